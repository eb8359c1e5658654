// celkeeper's copy of k8s.io/apiserver v0.36.2 pkg/admission/plugin/policy/generic/policy_matcher.go,
// compiled in its place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   4ceb0645320dc7e0f356e47c6f65345bcf39cffd9c2d2c06e16b071f2f40cdaf
// (tests/native/test_locate_patches.py checks that the module cache holds it). Two changes, marked
// "celkeeper:" below; docs/known-issues.md says why and when they can go:
//   - the namespaceSelector and objectSelector of a policy's matchConstraints or a binding's matchResources
//     are parsed (metav1.LabelSelectorAsSelector: each label key and value checked by regular expressions)
//     once per MatchResources object, not for every request the policy or binding is matched against. The
//     plugins read the MatchResources of the policies and bindings their informers hold, which are never
//     changed in place (a change is a new object), and a parsed selector is only read (Matches), so each
//     request is matched with the selector upstream would parse from the same fields. At most maxParsed
//     entries are kept.
//   - NewRuleIndexedDispatcher (added; the validating plugin's copy uses it): a dispatcher that hands the
//     plugin's dispatcher only the hooks whose policy's resource rules may match the request, remembered per
//     (resource, subresource, operation, namespaced or not, equivalent resources). Which hooks may match is
//     decided by upstream's matching.Matcher with the policy's rules and selectors that select everything, a
//     necessary condition of DefinitionMatches: a hook left out is one the dispatcher would skip (no match,
//     no error), in the same order, so the answer is the same.

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
	"slices"
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

// celkeeper: NewRuleIndexedDispatcher wraps a plugin's dispatcher: each request is dispatched to the hooks
// whose policy may match its resource, subresource and operation (mayMatch), in their order. The hooks
// left out are those whose DefinitionMatches is (false, nil) for the request whatever its object, names
// and Namespace, which the dispatchers skip without any other effect. definition is the policy of a hook.
func NewRuleIndexedDispatcher[H Hook](inner Dispatcher[H], m *matching.Matcher, definition func(H) PolicyAccessor) Dispatcher[H] {
	return &ruleIndexedDispatcher[H]{Dispatcher: inner, matcher: m, definition: definition}
}

// celkeeper: ruleIndexedDispatcher remembers, for the hooks it was last given (the source's list, replaced
// whole when the policies change), the hooks that may match each kind of request (ruleKey).
type ruleIndexedDispatcher[H Hook] struct {
	Dispatcher[H]
	matcher    *matching.Matcher
	definition func(H) PolicyAccessor

	mu      sync.RWMutex
	of      []H
	entries map[ruleKey]ruleEntry[H]
}

// celkeeper: ruleKey is what the rules of a policy are matched with (rules.Matcher reads the resource, the
// subresource, the operation and whether the request has a namespace; matchPolicy Equivalent the resources
// equivalent to the resource, kept in the entry).
type ruleKey struct {
	resource    schema.GroupVersionResource
	subresource string
	operation   admission.Operation
	namespaced  bool
}

type ruleEntry[H Hook] struct {
	equivalents []schema.GroupVersionResource
	hooks       []H
}

func (d *ruleIndexedDispatcher[H]) Dispatch(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces, hooks []H) error {
	return d.Dispatcher.Dispatch(ctx, a, o, d.candidates(a, o, hooks))
}

// candidates are the hooks that may match the request, in their order.
func (d *ruleIndexedDispatcher[H]) candidates(a admission.Attributes, o admission.ObjectInterfaces, hooks []H) []H {
	if len(hooks) == 0 || o == nil {
		return hooks
	}
	key := ruleKey{resource: a.GetResource(), subresource: a.GetSubresource(), operation: a.GetOperation(), namespaced: a.GetNamespace() != ""}
	equivalents := o.GetEquivalentResourceMapper().EquivalentResourcesFor(key.resource, key.subresource)
	d.mu.RLock()
	entry, found := d.entries[key]
	found = found && sameHooks(d.of, hooks) && slices.Equal(entry.equivalents, equivalents)
	d.mu.RUnlock()
	if found {
		return entry.hooks
	}
	may := make([]H, 0, len(hooks))
	for _, h := range hooks {
		if d.mayMatch(a, o, d.definition(h)) {
			may = append(may, h)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !sameHooks(d.of, hooks) || len(d.entries) >= maxParsed {
		d.of, d.entries = hooks, map[ruleKey]ruleEntry[H]{}
	}
	d.entries[key] = ruleEntry[H]{equivalents: slices.Clone(equivalents), hooks: may}
	return may
}

// sameHooks says whether two lists are the same list (the source hands out one list until it changes).
func sameHooks[H any](a, b []H) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// mayMatch is RulesMayMatch with the dispatcher's matcher.
func (d *ruleIndexedDispatcher[H]) mayMatch(a admission.Attributes, o admission.ObjectInterfaces, definition PolicyAccessor) bool {
	return RulesMayMatch(d.matcher, a, o, definition)
}

// celkeeper: RulesMayMatch is false only when DefinitionMatches(a, o, definition) is (false, nil) for every
// request with a's resource, subresource, operation and namespace (empty or not): when the policy's rules,
// matched by upstream's matching.Matcher with selectors that select everything, neither match nor fail.
// Matches returns (false, nil) whenever those rules do, whatever its selectors say; DefinitionMatches'
// other outcomes (a policy without matchConstraints or selectors: an error) and rules naming resources
// (which read the request's name) are always kept.
func RulesMayMatch(m *matching.Matcher, a admission.Attributes, o admission.ObjectInterfaces, definition PolicyAccessor) bool {
	constraints := definition.GetMatchConstraints()
	if constraints == nil || constraints.NamespaceSelector == nil || constraints.ObjectSelector == nil {
		return true
	}
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{constraints.ResourceRules, constraints.ExcludeResourceRules} {
		for _, rule := range rules {
			if len(rule.ResourceNames) > 0 {
				return true
			}
		}
	}
	matches, _, _, err := m.Matches(a, o, rulesOnly{constraints: constraints})
	return matches || err != nil
}

// celkeeper: rulesOnly is a policy's matchConstraints with selectors that select everything.
type rulesOnly struct {
	constraints *admissionregistrationv1.MatchResources
}

func (rulesOnly) GetParsedNamespaceSelector() (labels.Selector, error) {
	return labels.Everything(), nil
}

func (rulesOnly) GetParsedObjectSelector() (labels.Selector, error) { return labels.Everything(), nil }

func (r rulesOnly) GetMatchResources() admissionregistrationv1.MatchResources { return *r.constraints }
