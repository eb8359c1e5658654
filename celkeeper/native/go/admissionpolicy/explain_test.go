package admissionpolicy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const paramPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  matchConditions:
  - name: not-exempt
    expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)"
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'replicas ' + string(object.spec.replicas) + ' > ' + params.data.max"
  - expression: "has(object.metadata.labels)"
    message: "labels are required"
  auditAnnotations:
  - key: replicas
    valueExpression: "string(object.spec.replicas)"
`

const paramBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-demo}
spec:
  policyName: max-replicas
  validationActions: [Deny]
  paramRef: {name: limits, namespace: policies, parameterNotFoundAction: Deny}
`

const prodBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-prod}
spec:
  policyName: max-replicas
  validationActions: [Warn]
  paramRef: {name: prod-limits, namespace: policies, parameterNotFoundAction: Allow}
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
`

const missingBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-missing}
spec:
  policyName: max-replicas
  validationActions: [Deny]
  paramRef: {name: absent, namespace: policies, parameterNotFoundAction: Allow}
`

const limits = `
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: policies}
data: {max: "5"}
`

const jsonPatchPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: team-label}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/labels/team", value: "platform"}]
`

const jsonPatchBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: team-label-binding}
spec:
  policyName: team-label
`

const labelledDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo, labels: {app: web}}
spec:
  replicas: 7
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
`

func explainSet(t *testing.T, policies ...string) *Set {
	t.Helper()
	return mustSet(t, Input{Policies: docs(t, policies...), Params: docs(t, limits)})
}

func binding(t *testing.T, traces []BindingTrace, name string) BindingTrace {
	t.Helper()
	for _, b := range traces {
		if b.Binding == name {
			return b
		}
	}
	t.Fatalf("no trace of binding %s in %+v", name, traces)
	return BindingTrace{}
}

func TestExplainValidatingPolicy(t *testing.T) {
	set := explainSet(t, paramPolicy, paramBinding, prodBinding, missingBinding, jsonPatchPolicy, jsonPatchBinding)
	ex, err := set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, labelledDeployment)})
	if err != nil {
		t.Fatal(err)
	}
	// the answer is the real chain's, the same as Review's
	resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, labelledDeployment)})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Response.Allowed || resp.Allowed || ex.Response.Status.Message != resp.Status.Message {
		t.Fatalf("explain answered %+v, review %+v", ex.Response.Status, resp.Status)
	}
	if !strings.Contains(ex.Response.Status.Message, "replicas 7 > 5") || !ex.Validated {
		t.Fatalf("status: %s", ex.Response.Status.Message)
	}

	demo := binding(t, ex.Validating, "max-replicas-demo")
	if !demo.Applied || len(demo.Params) != 1 || demo.Params[0].Param != "policies/limits" || !demo.Params[0].Matched {
		t.Fatalf("demo binding: %+v", demo)
	}
	v := demo.Params[0].Validations
	if len(v) != 2 || v[0].Result != "failed" || v[0].Message != "replicas 7 > 5" || v[0].Reason != "Invalid" || v[1].Result != "passed" {
		t.Fatalf("validations: %+v", v)
	}
	a := demo.Params[0].AuditAnnotations
	if len(a) != 1 || a[0].Key != "replicas" || a[0].Value != "7" || a[0].Result != "published" {
		t.Fatalf("audit annotations: %+v", a)
	}

	prod := binding(t, ex.Validating, "max-replicas-prod")
	if prod.Applied || prod.Excluded != "binding spec.matchResources.namespaceSelector" || !strings.Contains(prod.Reason, `"env":"prod"`) {
		t.Fatalf("prod binding: %+v", prod)
	}
	missing := binding(t, ex.Validating, "max-replicas-missing")
	if !missing.Applied || len(missing.Params) != 0 || !strings.Contains(missing.Reason, "parameterNotFoundAction Allow") {
		t.Fatalf("missing binding: %+v", missing)
	}

	// the mutating policy's JSONPatch, and the validating ones saw the object it left
	team := binding(t, ex.Mutating, "team-label-binding")
	if !team.Applied || len(team.Params) != 1 || len(team.Params[0].Mutations) != 1 {
		t.Fatalf("mutating: %+v", team)
	}
	var patch map[string]any
	if err := json.Unmarshal(team.Params[0].Mutations[0].Patch, &patch); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(patch); string(got) != `{"metadata":{"labels":{"team":"platform"}}}` {
		t.Fatalf("patch: %s", got)
	}
}

func TestExplainMatchConditionAndExclusion(t *testing.T) {
	set := explainSet(t, paramPolicy, paramBinding)
	exempt := strings.Replace(labelledDeployment, "labels: {app: web}}", "labels: {app: web, exempt: \"yes\"}}", 1)
	ex, err := set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, exempt)})
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Response.Allowed {
		t.Fatalf("denied: %+v", ex.Response.Status)
	}
	demo := binding(t, ex.Validating, "max-replicas-demo")
	if !demo.Applied || demo.Params[0].Matched || demo.Params[0].FailedCondition != "not-exempt" || len(demo.Params[0].Validations) != 0 {
		t.Fatalf("demo binding: %+v", demo)
	}

	ex, err = set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Validating) != 1 || ex.Validating[0].Binding != "" || ex.Validating[0].Excluded != "policy spec.matchConstraints.resourceRules" ||
		ex.Validating[0].Reason != `no rule matches CREATE v1 pods "p"` {
		t.Fatalf("pod: %+v", ex.Validating)
	}
}

func TestExplainParamNotFoundDenies(t *testing.T) {
	set := explainSet(t, paramPolicy, strings.Replace(paramBinding, "name: limits", "name: absent", 1))
	ex, err := set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, labelledDeployment)})
	if err != nil {
		t.Fatal(err)
	}
	demo := binding(t, ex.Validating, "max-replicas-demo")
	if ex.Response.Allowed || demo.Applied || !strings.Contains(demo.Error, "no params found") || !strings.Contains(ex.Response.Status.Message, "no params found") {
		t.Fatalf("binding %+v, answer %+v", demo, ex.Response.Status)
	}
}

const selectorPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: selected}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
    - apiGroups: ["*"]
      apiVersions: ["*"]
      operations: [CREATE]
      resources: ["*"]
    excludeResourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  validations:
  - expression: "object.spec.missing.field == 1"
`

const selectorBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: only-tier-web}
spec:
  policyName: selected
  validationActions: [Deny]
  matchResources:
    objectSelector: {matchLabels: {tier: web}}
`

const selectorAllBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: everything}
spec:
  policyName: selected
  validationActions: [Deny]
`

func TestExplainSelectorsExclusionsAndErrors(t *testing.T) {
	set := explainSet(t, selectorPolicy, selectorBinding, selectorAllBinding)
	ex, err := set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, limits)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Validating) != 1 || ex.Validating[0].Excluded != "policy spec.matchConstraints.excludeResourceRules" ||
		ex.Validating[0].Reason != `a rule excludes CREATE v1 configmaps "limits"` {
		t.Fatalf("configmap: %+v", ex.Validating)
	}

	ex, err = set.Explain(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, labelledDeployment)})
	if err != nil {
		t.Fatal(err)
	}
	web := binding(t, ex.Validating, "only-tier-web")
	if web.Applied || web.Excluded != "binding spec.matchResources.objectSelector" || !strings.Contains(web.Reason, "(labels app=web)") {
		t.Fatalf("objectSelector: %+v", web)
	}
	// a runtime error under failurePolicy Ignore: the request is allowed, the trace says why
	all := binding(t, ex.Validating, "everything")
	if !ex.Response.Allowed || !all.Applied || len(all.Params) != 1 || len(all.Params[0].Validations) != 1 {
		t.Fatalf("everything: %+v, answer %+v", all, ex.Response)
	}
	v := all.Params[0].Validations[0]
	if v.Result != "error" || !v.Ignored || !strings.Contains(v.Message, "no such key") {
		t.Fatalf("validation: %+v", v)
	}
}
