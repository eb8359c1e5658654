package admissionpolicy

import (
	"encoding/json"
	"sync"

	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	arvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
)

// specChecks is the API server's create validation of ValidatingAdmissionPolicies (most of a set's
// build: it compiles every expression) done once per distinct spec of a set. Kubernetes' validation of a
// policy (validateValidatingAdmissionPolicy, k8s.io/kubernetes/pkg/apis/admissionregistration/validation)
// is its ObjectMeta's errors followed by its spec's, and the spec's read of the ObjectMeta is its name,
// for audit annotation keys only: so a policy's errors are its ObjectMeta's followed by those of any
// policy with the same spec (and, when the spec has audit annotations, the same name).
// tests/native/test_locate_patches.py checks that upstream's validation is still so composed.
type specChecks struct {
	mu     sync.Mutex
	bySpec map[string]*specCheck
}

type specCheck struct {
	once sync.Once
	errs field.ErrorList
}

func newSpecChecks() *specChecks {
	return &specChecks{bySpec: map[string]*specCheck{}}
}

// bareName is the name a spec without audit annotations is validated under (a valid one: its ObjectMeta
// has no error to strip).
const bareName = "spec"

// validatingPolicy is arvalidation.ValidateValidatingAdmissionPolicy(p).
func (s *specChecks) validatingPolicy(p *admissionregistration.ValidatingAdmissionPolicy) field.ErrorList {
	name := bareName
	if len(p.Spec.AuditAnnotations) > 0 {
		name = p.Name
	}
	key, err := json.Marshal(struct {
		Name string
		Spec *admissionregistration.ValidatingAdmissionPolicySpec
	}{name, &p.Spec})
	if err != nil {
		return arvalidation.ValidateValidatingAdmissionPolicy(p)
	}
	s.mu.Lock()
	check, ok := s.bySpec[string(key)]
	if !ok {
		check = &specCheck{}
		s.bySpec[string(key)] = check
	}
	s.mu.Unlock()
	check.once.Do(func() {
		bare := &admissionregistration.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *p.Spec.DeepCopy()}
		all := arvalidation.ValidateValidatingAdmissionPolicy(bare)
		check.errs = all[len(objectMetaErrors(&bare.ObjectMeta)):]
	})
	return append(objectMetaErrors(&p.ObjectMeta), check.errs...)
}

// objectMetaErrors is what validateValidatingAdmissionPolicy says of a policy's ObjectMeta.
func objectMetaErrors(meta *metav1.ObjectMeta) field.ErrorList {
	return genericvalidation.ValidateObjectMeta(meta, false, genericvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
}
