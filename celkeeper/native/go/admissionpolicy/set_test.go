package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func docs(t *testing.T, yamls ...string) []runtime.RawExtension {
	t.Helper()
	var out []runtime.RawExtension
	for _, y := range yamls {
		data, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, runtime.RawExtension{Raw: data})
	}
	return out
}

func jsonOf(t *testing.T, y string) json.RawMessage {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

const denyPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 5
    messageExpression: "'replicas must be <= 5, not ' + string(object.spec.replicas)"
  auditAnnotations:
  - key: replicas
    valueExpression: "string(object.spec.replicas)"
`

const denyBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-binding}
spec:
  policyName: replicas
  validationActions: [Deny, Audit]
`

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: demo}
spec:
  replicas: 7
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
`

func TestValidatingPolicyDenies(t *testing.T) {
	set := mustSet(t, Input{Policies: docs(t, denyPolicy, denyBinding)})
	resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, deployment)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || resp.Status == nil {
		t.Fatalf("allowed: %+v", resp)
	}
	want := "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'replicas-binding' denied request: replicas must be <= 5, not 7"
	if resp.Status.Message != want || resp.Status.Code != 422 {
		t.Fatalf("status %d %q, want %q", resp.Status.Code, resp.Status.Message, want)
	}
	if !strings.Contains(resp.AuditAnnotations["validation.policy.admission.k8s.io/validation_failure"], `"expressionIndex":0`) {
		t.Fatalf("audit annotations: %v", resp.AuditAnnotations)
	}
	if resp.AssumedNamespace != "demo" {
		t.Fatalf("assumed namespace: %q", resp.AssumedNamespace)
	}
}

const mapPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: sidecar}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: [Object.spec.containers{name: "sidecar", image: "busybox"}]}}
`

const mapBinding = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: sidecar-binding}
spec:
  policyName: sidecar
`

const pod = `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: demo}
spec:
  containers: [{name: app, image: nginx}]
`

func TestMutatingPolicyAppliesConfiguration(t *testing.T) {
	set := mustSet(t, Input{Policies: docs(t, mapPolicy, mapBinding)})
	resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed || !resp.Mutated {
		t.Fatalf("not mutated: %+v %s", resp, resp.Status)
	}
	var out struct {
		Spec struct {
			Containers []struct {
				Name, Image, ImagePullPolicy string
			}
		}
	}
	if err := json.Unmarshal(resp.Object, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.Containers) != 2 || out.Spec.Containers[1].Name != "sidecar" || out.Spec.Containers[1].ImagePullPolicy != "Always" {
		t.Fatalf("containers: %s", resp.Object)
	}
}

func limitPolicy(name string, most int) string {
	return strings.ReplaceAll(strings.ReplaceAll(denyPolicy, "{name: replicas}", "{name: "+name+"}"),
		"object.spec.replicas <= 5", "object.spec.replicas <= "+string(rune('0'+most)))
}

func limitBinding(name, policy string) string {
	return strings.ReplaceAll(strings.ReplaceAll(denyBinding, "{name: replicas-binding}", "{name: "+name+"}"),
		"policyName: replicas", "policyName: "+policy)
}

// Two policies and two bindings of one policy deny the Deployment: the API server answers with the first
// denial of its hooks, which upstream lists in a Go map's order (random on every build of the hooks); the
// copy of policy_source.go lists them in name order, so every set answers with the same one.
func TestTheFirstDenialIsThatOfThePolicyAndBindingFirstByName(t *testing.T) {
	documents := docs(t,
		limitPolicy("z-limit", 4), limitBinding("z-binding", "z-limit"),
		limitPolicy("a-limit", 5), limitBinding("a-two", "a-limit"), limitBinding("a-one", "a-limit"),
	)
	for round := 0; round < 12; round++ {
		set, problems, err := NewSet(Input{Policies: documents})
		if err != nil {
			t.Fatal(err)
		}
		if len(problems) > 0 {
			set.Close()
			t.Fatalf("problems: %+v", problems)
		}
		resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, deployment)})
		set.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := "ValidatingAdmissionPolicy 'a-limit' with binding 'a-one' denied request"
		if resp.Allowed || resp.Status == nil || !strings.Contains(resp.Status.Message, want) {
			t.Fatalf("round %d: %+v, want a message with %q", round, resp.Status, want)
		}
	}
}

// annotatingPolicy warns on every Deployment created with message (a CEL expression) and gives the audit
// annotation key the value of value (one too).
func annotatingPolicy(name, message, key, value string) string {
	return fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [deployments]
  validations:
  - expression: "false"
    messageExpression: %[2]q
  auditAnnotations:
  - key: %[3]s
    valueExpression: %[4]q
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Warn]
`, name, message, key, value)
}

// namespacePolicy's validation and audit annotation each say whether the request's Namespace has
// managedFields (not a field of namespaceObject's type: read through dyn): an audit annotation is given
// the Namespace itself, a validation (and a message) the copy without them (cel.CreateNamespaceObject).
var namespacePolicy = annotatingPolicy("namespace-fields",
	"'validation sees managedFields: ' + string(has(dyn(namespaceObject.metadata).managedFields))",
	"managed", "string(has(dyn(namespaceObject.metadata).managedFields))")

// A Namespace the inputs do not hold is created as the API server would create it, with the managedFields
// of its creation, which an audit annotation sees (the set keeps the field-managed clientset for them).
func TestAnAssumedNamespaceHasTheManagedFieldsAnAuditAnnotationSees(t *testing.T) {
	set := setOf(t, namespacePolicy)
	resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, deployment)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.AssumedNamespace != "demo" {
		t.Fatalf("assumed namespace: %q", resp.AssumedNamespace)
	}
	if got := resp.AuditAnnotations["namespace-fields/managed"]; got != "true" {
		t.Fatalf("audit annotations: %v", resp.AuditAnnotations)
	}
	if len(resp.Warnings) != 1 || !strings.HasSuffix(resp.Warnings[0], "validation sees managedFields: false") {
		t.Fatalf("warnings: %q", resp.Warnings)
	}
}
