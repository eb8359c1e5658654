package admissionpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
)

// The validating plugin's dispatcher is given only the hooks whose policy's rules may match a request
// (the copy of k8s.io/apiserver's generic/policy_matcher.go: NewRuleIndexedDispatcher, RulesMayMatch). A
// hook it leaves out must be one whose DefinitionMatches is (false, nil): these tests check it on policies
// of every kind of rule, against requests of every kind.

// ruleShapes are resource rules of every shape rules.Matcher reads: groups, versions, resources with and
// without subresources and wildcards, operations, scopes.
var ruleShapes = []map[string]any{
	{"apiGroups": []string{"apps"}, "apiVersions": []string{"v1"}, "resources": []string{"deployments"}, "operations": []string{"CREATE"}},
	{"apiGroups": []string{"apps"}, "apiVersions": []string{"*"}, "resources": []string{"deployments", "statefulsets"}, "operations": []string{"CREATE", "UPDATE"}},
	{"apiGroups": []string{"apps"}, "apiVersions": []string{"v1beta1"}, "resources": []string{"deployments"}, "operations": []string{"*"}},
	{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "resources": []string{"pods"}, "operations": []string{"*"}, "scope": "Namespaced"},
	{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "resources": []string{"pods/status"}, "operations": []string{"UPDATE"}},
	{"apiGroups": []string{"*"}, "apiVersions": []string{"*"}, "resources": []string{"*/status"}, "operations": []string{"*"}},
	{"apiGroups": []string{"*"}, "apiVersions": []string{"*"}, "resources": []string{"*"}, "operations": []string{"DELETE"}},
	{"apiGroups": []string{"*"}, "apiVersions": []string{"*"}, "resources": []string{"*/*"}, "operations": []string{"CREATE"}, "scope": "Cluster"},
	{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "resources": []string{"namespaces"}, "operations": []string{"CREATE", "UPDATE"}, "scope": "Cluster"},
	{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "resources": []string{"configmaps"}, "operations": []string{"CREATE"}, "scope": "Namespaced"},
	{"apiGroups": []string{"autoscaling"}, "apiVersions": []string{"v2"}, "resources": []string{"horizontalpodautoscalers"}, "operations": []string{"CREATE"}},
	{"apiGroups": []string{"events.k8s.io"}, "apiVersions": []string{"v1"}, "resources": []string{"events"}, "operations": []string{"CREATE"}},
	{"apiGroups": []string{"rbac.authorization.k8s.io"}, "apiVersions": []string{"v1"}, "resources": []string{"clusterroles"}, "operations": []string{"CREATE"}},
	{"apiGroups": []string{"apps"}, "apiVersions": []string{"v1"}, "resources": []string{"deployments/*"}, "operations": []string{"UPDATE"}},
}

// rulesIndexPolicies are a policy and a binding for each rule shape, with matchPolicy Exact and Equivalent,
// alone and with an exclude rule of another shape; and policies whose rules name resources.
func rulesIndexPolicies(t *testing.T) []runtime.RawExtension {
	t.Helper()
	var out []runtime.RawExtension
	add := func(name string, constraints map[string]any) {
		policy := map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"failurePolicy":    "Fail",
				"matchConstraints": constraints,
				"validations":      []map[string]any{{"expression": "false", "message": name}},
			},
		}
		binding := map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"policyName": name, "validationActions": []string{"Warn"}},
		}
		for _, doc := range []map[string]any{policy, binding} {
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, runtime.RawExtension{Raw: data})
		}
	}
	for i, rule := range ruleShapes {
		for _, policy := range []string{"Exact", "Equivalent"} {
			add(fmt.Sprintf("p%d-%s", i, strings.ToLower(policy)), map[string]any{"matchPolicy": policy, "resourceRules": []any{rule}})
			excluded := ruleShapes[(i+5)%len(ruleShapes)]
			add(fmt.Sprintf("p%d-%s-exclude", i, strings.ToLower(policy)), map[string]any{
				"matchPolicy": policy, "resourceRules": []any{rule}, "excludeResourceRules": []any{excluded},
			})
		}
	}
	named := map[string]any{"apiGroups": []string{"apps"}, "apiVersions": []string{"v1"}, "resources": []string{"deployments"}, "operations": []string{"*"}, "resourceNames": []string{"web"}}
	add("named", map[string]any{"resourceRules": []any{named}})
	add("named-exclude", map[string]any{"resourceRules": []any{ruleShapes[6]}, "excludeResourceRules": []any{named}})
	return out
}

// rulesIndexRequests are requests of every kind the rules tell apart: operations, resources equivalent to
// others (Deployments, HPAs, Events), subresources, namespaced and cluster-scoped ones, Namespaces.
func rulesIndexRequests(t *testing.T) []Request {
	t.Helper()
	obj := func(apiVersion, kind, namespace, name string, extra map[string]any) json.RawMessage {
		meta := map[string]any{"name": name}
		if namespace != "" {
			meta["namespace"] = namespace
		}
		o := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
		for k, v := range extra {
			o[k] = v
		}
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	deploymentSpec := map[string]any{"spec": map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}}, "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}},
	}}
	pod := obj("v1", "Pod", "demo", "p", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}})
	objects := []json.RawMessage{
		obj("apps/v1", "Deployment", "demo", "web", deploymentSpec),
		obj("apps/v1", "Deployment", "demo", "api", deploymentSpec),
		pod,
		obj("v1", "ConfigMap", "demo", "c", nil),
		obj("v1", "Namespace", "", "other", nil),
		obj("autoscaling/v1", "HorizontalPodAutoscaler", "demo", "h", map[string]any{"spec": map[string]any{"maxReplicas": 2, "scaleTargetRef": map[string]any{"kind": "Deployment", "name": "web"}}}),
		obj("v1", "Event", "demo", "e", map[string]any{"involvedObject": map[string]any{"kind": "Pod", "name": "p"}}),
		obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "r", nil),
	}
	var out []Request
	for _, o := range objects {
		out = append(out,
			Request{Operation: "CREATE", Object: o},
			Request{Operation: "UPDATE", Object: o, OldObject: o},
			Request{Operation: "DELETE", OldObject: o})
	}
	out = append(out,
		Request{Operation: "UPDATE", Object: pod, OldObject: pod, SubResource: "status"},
		Request{Operation: "UPDATE", Object: pod, OldObject: pod, SubResource: "ephemeralcontainers"})
	return out
}

func validatingHooks(t *testing.T, set *Set) ([]validating.PolicyHook, *matching.Matcher) {
	t.Helper()
	_, v := set.policyPlugins()
	source, ok := unexported[generic.Source[validating.PolicyHook]](v.Plugin, "source")
	if !ok {
		t.Fatal("the validating plugin's source is not where the test reads it")
	}
	m, ok := unexported[*matching.Matcher](v.Plugin, "matcher")
	if !ok || m == nil {
		t.Fatal("the validating plugin's matcher is not where the test reads it")
	}
	return source.Hooks(), m
}

func TestRulesMayMatchLeavesOutOnlyPoliciesThatDoNotMatch(t *testing.T) {
	set := mustSet(t, Input{Policies: rulesIndexPolicies(t), Namespaces: docs(t, "{apiVersion: v1, kind: Namespace, metadata: {name: demo}}")})
	hooks, m := validatingHooks(t, set)
	if len(hooks) != 4*len(ruleShapes)+2 {
		t.Fatalf("%d hooks", len(hooks))
	}
	matcher := generic.NewPolicyMatcher(m)
	leftOut, kept, matched := 0, 0, 0
	for _, req := range rulesIndexRequests(t) {
		p, err := set.prepare(context.Background(), req)
		if err != nil || p.attrs == nil {
			t.Fatalf("%s %s: %v", req.Operation, req.SubResource, err)
		}
		o := set.resources.validatingObjectInterfaces()
		for _, hook := range hooks {
			policy := validating.NewValidatingAdmissionPolicyAccessor(hook.Policy)
			may := generic.RulesMayMatch(m, p.attrs, o, policy)
			matches, _, _, err := matcher.DefinitionMatches(p.attrs, o, policy)
			switch {
			case !may && (matches || err != nil):
				t.Errorf("%s %s %s: policy %s left out, but it matches (%v, %v)", req.Operation, p.attrs.GetResource(), p.attrs.GetSubresource(), hook.Policy.Name, matches, err)
			case !may:
				leftOut++
			case matches:
				matched++
			default:
				kept++
			}
		}
	}
	// the index leaves most policies out, and keeps some that then do not match (selectors, names)
	if leftOut <= matched || matched == 0 || kept == 0 {
		t.Errorf("left out %d, matched %d, kept without a match %d", leftOut, matched, kept)
	}
}

func TestTheRulesIndexAnswersAsEveryPolicyWouldBeMatched(t *testing.T) {
	set := mustSet(t, Input{Policies: rulesIndexPolicies(t), Namespaces: docs(t, "{apiVersion: v1, kind: Namespace, metadata: {name: demo}}")})
	hooks, m := validatingHooks(t, set)
	matcher := generic.NewPolicyMatcher(m)
	for _, req := range rulesIndexRequests(t) {
		// twice: the second answer comes from what the index remembers
		for range 2 {
			resp, err := set.Review(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			p, err := set.prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			o := set.resources.validatingObjectInterfaces()
			for _, hook := range hooks {
				if matches, _, _, err := matcher.DefinitionMatches(p.attrs, o, validating.NewValidatingAdmissionPolicyAccessor(hook.Policy)); matches && err == nil {
					want = append(want, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", hook.Policy.Name, hook.Policy.Name, hook.Policy.Name))
				}
			}
			if fmt.Sprint(resp.Warnings) != fmt.Sprint(want) {
				t.Errorf("%s %s %s: warnings\n%v\nwant\n%v", req.Operation, p.attrs.GetResource(), p.attrs.GetSubresource(), resp.Warnings, want)
			}
		}
	}
}

// A kind no CRD defines is mapped as it is met (Resources.Guess), and each version met becomes equivalent
// to the others: the index follows, as matching every policy does.
func TestTheRulesIndexFollowsTheResourcesTheSetLearns(t *testing.T) {
	policy := `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: widgets}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v2], operations: [CREATE], resources: [widgets]}
  validations:
  - {expression: "false", message: no widgets}
`
	binding := `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: widgets}
spec: {policyName: widgets, validationActions: [Deny]}
`
	set := mustSet(t, Input{Policies: docs(t, policy, binding)})
	widget := func(version string) Request {
		return Request{Operation: "CREATE", Object: jsonOf(t, fmt.Sprintf("{apiVersion: example.com/%s, kind: Widget, metadata: {name: w, namespace: demo}}", version))}
	}
	var allowed []bool
	for _, req := range []Request{widget("v1"), widget("v2"), widget("v1")} {
		resp, err := set.Review(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		allowed = append(allowed, resp.Allowed)
	}
	// v1 is equivalent to v2 once v2 is known: the second v1 request matches the policy by matchPolicy
	// Equivalent (the default)
	if fmt.Sprint(allowed) != "[true false false]" {
		t.Errorf("allowed %v", allowed)
	}
}
