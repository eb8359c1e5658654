{{/* Labels every object of the release carries (no Helm bookkeeping: the rendering is deploy/celkeeper.yaml). */}}
{{- define "celkeeper.labels" -}}
app.kubernetes.io/name: celkeeper
app.kubernetes.io/part-of: celkeeper
celkeeper.io/system: "yes"
{{- end }}

{{/* The webhook pods' selector. */}}
{{- define "celkeeper.webhookSelector" -}}
app.kubernetes.io/name: celkeeper
app.kubernetes.io/component: webhook
{{- end }}

{{/* The audit pod's selector. */}}
{{- define "celkeeper.auditSelector" -}}
app.kubernetes.io/name: celkeeper
app.kubernetes.io/component: audit
{{- end }}

{{- define "celkeeper.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{/* Exempt namespaces: the release's own first, then the configured ones. */}}
{{- define "celkeeper.exemptNamespaces" -}}
{{- $all := list .Release.Namespace }}
{{- range .Values.exemptNamespaces }}{{ if not (has . $all) }}{{ $all = append $all . }}{{ end }}{{ end }}
{{- toJson $all }}
{{- end }}

{{/* The exempt namespaces a namespaceSelector can name (no `prefix*` patterns). */}}
{{- define "celkeeper.exactExemptNamespaces" -}}
{{- $exact := list }}
{{- range (include "celkeeper.exemptNamespaces" . | fromJsonArray) }}{{ if not (hasSuffix "*" .) }}{{ $exact = append $exact . }}{{ end }}{{ end }}
{{- toJson $exact }}
{{- end }}

{{/* The audit's reports: their API group and resources (reports.format). */}}
{{- define "celkeeper.reportsApi" -}}
{{- if eq .Values.reports.format "openreports" -}}
{"group": "openreports.io", "resources": ["reports", "clusterreports"], "files": ["openreports.io_reports.yaml", "openreports.io_clusterreports.yaml"]}
{{- else if eq .Values.reports.format "policyreport" -}}
{"group": "wgpolicyk8s.io", "resources": ["policyreports", "clusterpolicyreports"], "files": ["wgpolicyk8s.io_policyreports.yaml", "wgpolicyk8s.io_clusterpolicyreports.yaml"]}
{{- else -}}
{{- fail (printf "reports.format must be openreports or policyreport, not %q" .Values.reports.format) -}}
{{- end -}}
{{- end }}
