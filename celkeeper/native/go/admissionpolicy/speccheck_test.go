package admissionpolicy

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	arvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
)

// specVariants are policy specs (in YAML, under `spec:`) the API server accepts and refuses for reasons of
// every part: expressions that do not compile, a missing failurePolicy, bad rules, audit annotations whose
// keys the policy's name makes too long, duplicate keys, variables.
var specVariants = []string{
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}, validations: [{expression: "object.metadata.name != 'x'"}]}`,
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}, validations: [{expression: "object.metadata.name +"}]}`,
	`{matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}, validations: [{expression: "1"}]}`,
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [NOPE], resources: ["a/b/c"]}]}, validations: [{expression: "true", messageExpression: "1"}]}`,
	`{failurePolicy: Ignore, matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}, variables: [{name: r, expression: "object.spec.replicas"}, {name: bad, expression: "variables.nope"}], validations: [{expression: "variables.r < 5"}]}`,
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}, auditAnnotations: [{key: replicas, valueExpression: "string(object.spec.replicas)"}, {key: replicas, valueExpression: "'x'"}]}`,
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}, auditAnnotations: [{key: "` + strings.Repeat("k", 60) + `", valueExpression: "'x'"}]}`,
	`{failurePolicy: Fail, matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}}`,
}

// specNames are names and metadata the policies are given: valid, too long for an audit annotation key
// with the spec's keys, invalid.
var specNames = []string{
	`{name: p}`,
	`{name: p2, labels: {a: b}}`,
	`{name: "` + strings.Repeat("n", 250) + `"}`,
	`{name: Not_Valid}`,
	`{name: q, labels: {"bad key!": v}}`,
}

func validatingPolicyOf(t *testing.T, meta, spec string) *admissionregistration.ValidatingAdmissionPolicy {
	t.Helper()
	data := jsonOf(t, fmt.Sprintf("{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicy, metadata: %s, spec: %s}", meta, spec))
	obj, _, err := strictCodecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", meta, spec, err)
	}
	return obj.(*admissionregistration.ValidatingAdmissionPolicy)
}

func errorTexts(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

// Every policy's errors, its spec checked once for all the policies that share it, are those of
// Kubernetes' own validation of the policy, in the same order.
func TestASpecCheckedOnceGivesEachPolicyItsOwnValidation(t *testing.T) {
	checks := newSpecChecks()
	refused := 0
	for _, spec := range specVariants {
		for _, meta := range specNames {
			p := validatingPolicyOf(t, meta, spec)
			want := arvalidation.ValidateValidatingAdmissionPolicy(validatingPolicyOf(t, meta, spec))
			got := checks.validatingPolicy(p)
			if errorTexts(got) != errorTexts(want) {
				t.Errorf("metadata %s, spec %s:\n%s\nwant\n%s", meta, spec, errorTexts(got), errorTexts(want))
			}
			if len(want) > 0 {
				refused++
			}
		}
	}
	// each spec was validated once, but those with audit annotations once per name
	if len(checks.bySpec) != len(specVariants)+2*(len(specNames)-1) {
		t.Errorf("%d specs checked", len(checks.bySpec))
	}
	if refused == 0 || refused == len(specVariants)*len(specNames) {
		t.Errorf("%d refused", refused)
	}
}
