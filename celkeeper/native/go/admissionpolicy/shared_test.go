package admissionpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"celkeeper.local/native/procs"
)

// Policies whose variables are the same share their compiled variables in the plugin (celkeeper's copy of
// the plugin's compilePolicy), and compilers build their CEL environments when first used (celkeeper's
// copy of the plugin's compile.go): each policy still answers with its own validations, its own variables
// and the request's own object and oldObject.

func warnPolicy(name, variable, validation string) string {
	return fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: replicas
    expression: %[2]q
  validations:
  - expression: %[3]q
    messageExpression: "'%[1]s: ' + string(variables.replicas)"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Warn]
`, name, variable, validation)
}

func setOf(t *testing.T, yamls ...string) *Set {
	t.Helper()
	var split []string
	for _, y := range yamls {
		split = append(split, strings.Split(y, "\n---\n")...)
	}
	return mustSet(t, Input{Policies: docs(t, split...)})
}

// mustSet is the set of in, closed when the test ends; an error or a problem ends the test.
func mustSet(t *testing.T, in Input) *Set {
	t.Helper()
	set, problems, err := NewSet(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	if len(problems) > 0 {
		t.Fatalf("problems: %+v", problems)
	}
	return set
}

func warningsOf(t *testing.T, set *Set, req Request) []string {
	t.Helper()
	resp, err := set.Review(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Status)
	}
	var out []string
	for _, w := range resp.Warnings { // "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'p': <message>"
		_, message, _ := strings.Cut(w, "': ")
		out = append(out, message)
	}
	sort.Strings(out)
	return out
}

func TestPoliciesWithTheSameVariablesKeepTheirOwnValidations(t *testing.T) {
	set := setOf(t,
		warnPolicy("a", "object.spec.replicas", "variables.replicas <= 5"),
		warnPolicy("b", "object.spec.replicas", "variables.replicas <= 10"),
		warnPolicy("c", "object.spec.replicas * 2", "variables.replicas <= 10"),
		warnPolicy("d", "object.spec.replicas", "variables.replicas <= 6"),
	)
	got := strings.Join(warningsOf(t, set, Request{Operation: "CREATE", Object: jsonOf(t, deployment)}), " | ")
	// replicas 7: a (<= 5) and d (<= 6) warn with 7, c with its own variable (14); b allows
	if want := "a: 7 | c: 14 | d: 7"; got != want {
		t.Fatalf("warnings %q, want %q", got, want)
	}
}

func TestValidatingPoliciesSeeTheirRequestsOwnObjects(t *testing.T) {
	grow := warnPolicy("grow", "object.spec.replicas - oldObject.spec.replicas", "variables.replicas <= 0")
	shrink := warnPolicy("shrink", "oldObject.spec.replicas - object.spec.replicas", "variables.replicas <= 0")
	set := setOf(t, grow, shrink)
	old := strings.Replace(deployment, "replicas: 7", "replicas: 3", 1)
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Operation: "UPDATE", Object: jsonOf(t, deployment), OldObject: jsonOf(t, old)}, "grow: 4"},
		{Request{Operation: "UPDATE", Object: jsonOf(t, old), OldObject: jsonOf(t, deployment)}, "shrink: 4"},
		{Request{Operation: "UPDATE", Object: jsonOf(t, deployment), OldObject: jsonOf(t, deployment)}, ""},
	} {
		if got := strings.Join(warningsOf(t, set, c.req), " | "); got != c.want {
			t.Fatalf("warnings %q, want %q", got, c.want)
		}
	}
}

// teamPolicy warns with the team label of the request's Namespace, in a message and an audit annotation.
var teamPolicy = annotatingPolicy("team", "'team ' + namespaceObject.metadata.labels.team", "team",
	"namespaceObject.metadata.labels.team")

// The `namespaceObject` maps a set's requests share (celkeeper's copy of the plugin's activation.go:
// NamespaceMaps) are each request's own Namespace's, whichever request made them and however many
// requests run at once.
func TestRequestsSeeTheirOwnNamespaces(t *testing.T) {
	teams := map[string]string{"a": "red", "b": "blue", "c": "green"}
	var namespaces []string
	for name, team := range teams {
		namespaces = append(namespaces, fmt.Sprintf("{apiVersion: v1, kind: Namespace, metadata: {name: %s, labels: {team: %s}}}", name, team))
	}
	set := mustSet(t, Input{Policies: docs(t, strings.Split(teamPolicy, "\n---\n")...), Namespaces: docs(t, namespaces...)})
	names := []string{"a", "b", "c"}
	const n = 60
	got := make([]string, n)
	procs.Each(n, func(i int) {
		object := strings.Replace(deployment, "namespace: demo", "namespace: "+names[i%len(names)], 1)
		resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, object)})
		if err != nil {
			t.Error(err)
			return
		}
		got[i] = fmt.Sprintf("%v %s", resp.Warnings, resp.AuditAnnotations["team/team"])
	})
	for i, g := range got {
		team := teams[names[i%len(names)]]
		if want := fmt.Sprintf("[Validation failed for ValidatingAdmissionPolicy 'team' with binding 'team': team %[1]s] %[1]s", team); g != want {
			t.Errorf("request %d in %s: %q, want %q", i, names[i%len(names)], g, want)
		}
	}
}
