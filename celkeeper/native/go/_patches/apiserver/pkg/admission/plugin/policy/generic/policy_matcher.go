// celkeeper's copy of k8s.io/apiserver v0.36.2 pkg/admission/plugin/policy/generic/policy_matcher.go,
// compiled in its place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   4ceb0645320dc7e0f356e47c6f65345bcf39cffd9c2d2c06e16b071f2f40cdaf
// (tests/native/test_locate_patches.py checks that the module cache holds it). One change, marked
// "celkeeper:" below; docs/known-issues.md says why and when it can go: the namespaceSelector and
// objectSelector of a policy's matchConstraints or a binding's matchResources are parsed
// (metav1.LabelSelectorAsSelector: each label key and value checked by regular expressions) once per
// MatchResources object, not for every request the policy or binding is matched against. The plugins read
// the MatchResources of the policies and bindings their informers hold, which are never changed in place
// (a change is a new object), and a parsed selector is only read (Matches), so each request is matched
// with the selector upstream would parse from the same fields. At most maxParsed entries are kept.

/*
Copyright 2022 The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package generic

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
)

// Matcher is used for matching ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding to attributes
type PolicyMatcher interface {
	admission.InitializationValidator

	// DefinitionMatches says whether this policy definition matches the provided admission
	// resource request
	DefinitionMatches(a admission.Attributes, o admission.ObjectInterfaces, definition PolicyAccessor) (bool, schema.GroupVersionResource, schema.GroupVersionKind, error)

	// BindingMatches says whether this policy definition matches the provided admission
	// resource request
	BindingMatches(a admission.Attributes, o admission.ObjectInterfaces, binding BindingAccessor) (bool, error)

	// GetNamespace retrieves the Namespace resource by the given name. The name may be empty, in which case
	// GetNamespace must return nil, NotFound
	GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error)
}

var errNilSelector = "a nil %s selector was passed, please ensure selectors are initialized properly"

type matcher struct {
	Matcher *matching.Matcher

	// celkeeper: the parsed selectors of the MatchResources objects met (*MatchResources ->
	// *parsedSelectors), and how many entries were stored since it was last emptied
	parsed      sync.Map
	parsedCount atomic.Int64
}

// celkeeper: parsedSelectors is what GetParsedNamespaceSelector and GetParsedObjectSelector return for one
// MatchResources object.
type parsedSelectors struct {
	namespace, object       labels.Selector
	namespaceErr, objectErr error
}

// celkeeper: maxParsed bounds the entries kept (the map keeps its MatchResources objects alive): past it
// the map is emptied, and selectors are parsed again as they are met.
const maxParsed = 4096

// celkeeper: criteria is matchCriteria{constraints} with its selectors parsed once per MatchResources
// object, by upstream's calls on the first request that needs them. Selectors that select everything or
// nothing (no requirement: upstream's parse checks nothing) are left to upstream's parse at each call.
func (c *matcher) criteria(constraints *admissionregistrationv1.MatchResources) *matchCriteria {
	if noRequirement(constraints.NamespaceSelector) && noRequirement(constraints.ObjectSelector) {
		return &matchCriteria{constraints: constraints}
	}
	if found, ok := c.parsed.Load(constraints); ok {
		return &matchCriteria{constraints: constraints, parsed: found.(*parsedSelectors)}
	}
	p := &parsedSelectors{}
	p.namespace, p.namespaceErr = metav1.LabelSelectorAsSelector(constraints.NamespaceSelector)
	p.object, p.objectErr = metav1.LabelSelectorAsSelector(constraints.ObjectSelector)
	if c.parsedCount.Add(1) > maxParsed {
		c.parsed.Clear()
		c.parsedCount.Store(1)
	}
	c.parsed.Store(constraints, p)
	return &matchCriteria{constraints: constraints, parsed: p}
}

// celkeeper: noRequirement says LabelSelectorAsSelector makes its selector without parsing anything.
func noRequirement(s *metav1.LabelSelector) bool {
	return s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0
}

func NewPolicyMatcher(m *matching.Matcher) PolicyMatcher {
	return &matcher{
		Matcher: m,
	}
}

// ValidateInitialization checks if Matcher is initialized.
func (c *matcher) ValidateInitialization() error {
	return c.Matcher.ValidateInitialization()
}

// DefinitionMatches returns whether this ValidatingAdmissionPolicy matches the provided admission resource request
func (c *matcher) DefinitionMatches(a admission.Attributes, o admission.ObjectInterfaces, definition PolicyAccessor) (bool, schema.GroupVersionResource, schema.GroupVersionKind, error) {
	constraints := definition.GetMatchConstraints()
	if constraints == nil {
		return false, schema.GroupVersionResource{}, schema.GroupVersionKind{}, fmt.Errorf("policy contained no match constraints, a required field")
	}
	if constraints.NamespaceSelector == nil {
		return false, schema.GroupVersionResource{}, schema.GroupVersionKind{}, fmt.Errorf(errNilSelector, "namespace")
	}
	if constraints.ObjectSelector == nil {
		return false, schema.GroupVersionResource{}, schema.GroupVersionKind{}, fmt.Errorf(errNilSelector, "object")
	}

	criteria := c.criteria(constraints) // celkeeper: upstream matchCriteria{constraints: constraints}
	return c.Matcher.Matches(a, o, criteria)
}

// BindingMatches returns whether this ValidatingAdmissionPolicyBinding matches the provided admission resource request
func (c *matcher) BindingMatches(a admission.Attributes, o admission.ObjectInterfaces, binding BindingAccessor) (bool, error) {
	matchResources := binding.GetMatchResources()
	if matchResources == nil {
		return true, nil
	}
	if matchResources.NamespaceSelector == nil {
		return false, fmt.Errorf(errNilSelector, "namespace")
	}
	if matchResources.ObjectSelector == nil {
		return false, fmt.Errorf(errNilSelector, "object")
	}

	criteria := c.criteria(matchResources) // celkeeper: upstream matchCriteria{constraints: matchResources}
	isMatch, _, _, err := c.Matcher.Matches(a, o, criteria)
	return isMatch, err
}

func (c *matcher) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return c.Matcher.GetNamespace(ctx, name)
}

var _ matching.MatchCriteria = &matchCriteria{}

type matchCriteria struct {
	constraints *admissionregistrationv1.MatchResources
	parsed      *parsedSelectors // celkeeper: the selectors parsed (nil: parsed at each call, as upstream)
}

// GetParsedNamespaceSelector returns the converted LabelSelector which implements labels.Selector
func (m *matchCriteria) GetParsedNamespaceSelector() (labels.Selector, error) {
	if m.parsed != nil { // celkeeper
		return m.parsed.namespace, m.parsed.namespaceErr
	}
	return metav1.LabelSelectorAsSelector(m.constraints.NamespaceSelector)
}

// GetParsedObjectSelector returns the converted LabelSelector which implements labels.Selector
func (m *matchCriteria) GetParsedObjectSelector() (labels.Selector, error) {
	if m.parsed != nil { // celkeeper
		return m.parsed.object, m.parsed.objectErr
	}
	return metav1.LabelSelectorAsSelector(m.constraints.ObjectSelector)
}

// GetMatchResources returns the matchConstraints
func (m *matchCriteria) GetMatchResources() admissionregistrationv1.MatchResources {
	return *m.constraints
}
