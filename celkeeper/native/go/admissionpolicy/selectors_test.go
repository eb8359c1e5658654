package admissionpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Each binding's namespaceSelector and objectSelector are parsed once and kept (celkeeper's copy of the
// plugins' policy_matcher.go): bindings of one policy with different selectors, met by request after
// request, each still selects by its own.

func selectingBinding(name, namespaceLabels, objectLabels string) string {
	return fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: replicas
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {matchLabels: %[2]s}
    objectSelector: {matchExpressions: [%[3]s]}
`, name, namespaceLabels, objectLabels)
}

func labelledNamespace(name, labels string) string {
	return fmt.Sprintf("{apiVersion: v1, kind: Namespace, metadata: {name: %s, labels: %s}}", name, labels)
}

func TestEachBindingSelectsByItsOwnSelectors(t *testing.T) {
	policy, _, _ := strings.Cut(warnPolicy("replicas", "object.spec.replicas", "variables.replicas <= 5"), "\n---\n")
	set := mustSet(t, Input{
		Policies: docs(t, policy,
			selectingBinding("team-a", "{team: a}", ""),
			selectingBinding("team-b", "{team: b}", "{key: tier, operator: In, values: [web]}"),
			selectingBinding("not-web", "{}", "{key: tier, operator: NotIn, values: [web]}"),
		),
		Namespaces: docs(t, labelledNamespace("a", "{team: a}"), labelledNamespace("b", "{team: b}"), labelledNamespace("c", "{}")),
	})
	bindings := func(namespace, tier string) string {
		object := strings.Replace(deployment, "namespace: demo", "namespace: "+namespace+", labels: {tier: "+tier+"}", 1)
		resp, err := set.Review(context.Background(), Request{Operation: "CREATE", Object: jsonOf(t, object)})
		if err != nil || !resp.Allowed {
			t.Fatalf("%v %+v", err, resp)
		}
		var names []string
		for _, w := range resp.Warnings { // "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': ..."
			_, binding, _ := strings.Cut(w, "with binding '")
			binding, _, _ = strings.Cut(binding, "'")
			names = append(names, binding)
		}
		return strings.Join(names, " ")
	}
	for round := 0; round < 3; round++ { // the selectors parsed at the first round, kept for the others
		for _, c := range []struct{ namespace, tier, want string }{
			{"a", "web", "team-a"},
			{"a", "db", "not-web team-a"},
			{"b", "web", "team-b"},
			{"b", "db", "not-web"},
			{"c", "db", "not-web"},
			{"c", "web", ""},
		} {
			if got := bindings(c.namespace, c.tier); got != c.want {
				t.Fatalf("round %d, namespace %s, tier %s: bindings %q warn, want %q", round, c.namespace, c.tier, got, c.want)
			}
		}
	}
}
