// celkeeper's copy of k8s.io/apiserver v0.36.2 pkg/admission/plugin/cel/activation.go, compiled in its
// place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   14451bf0329f0d2e576122e1319a1da2b75d9cf00f1dcd9eb4c6fdf3d67a81e2
// (tests/native/test_locate_patches.py checks that the module cache holds it). Changes, marked
// "celkeeper:" below; docs/known-issues.md says why and when they can go:
//   - when the context an activation is made in carries an ActivationCache (WithActivationCache: celkeeper
//     sets one per admission request), the unstructured maps of the `request` and `namespaceObject`
//     variables are made once per distinct value and shared by the activations of every policy of the
//     request, instead of converted by reflection for every expression group of every policy (for a
//     request meeting fifty policies, a third of its CPU); with a NamespaceMaps, the Namespaces' maps are
//     shared by the requests of a policy set too. A map is reused only for a value reflect.DeepEqual to the
//     one it was made of (for an AdmissionRequest or a Namespace, SameValue decides it field by field,
//     without reflection but for an AdmissionRequest's objects): the conversion is a function of the
//     value, so the variables are the maps it would make; CEL only reads them. Without a cache in the
//     context the function is upstream's.
//   - the `authorizer` and `authorizer.requestResource` variables are made when an expression first reads
//     them, not for every activation (the same values, from the same user and authorizer).

/*
Copyright 2024 The Kubernetes Authors.

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

package cel

import (
	"bytes"
	"context"
	"fmt"
	"github.com/google/cel-go/interpreter"
	"math"
	"reflect"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/library"
)

// newActivation creates an activation for CEL admission plugins from the given request, admission chain and
// variable binding information.
func newActivation(compositionCtx CompositionContext, versionedAttr *admission.VersionedAttributes, request *admissionv1.AdmissionRequest, inputs OptionalVariableBindings, namespace *v1.Namespace) (*evaluationActivation, error) {
	oldObjectVal, err := objectToResolveVal(versionedAttr.VersionedOldObject)
	if err != nil {
		return nil, fmt.Errorf("failed to prepare oldObject variable for evaluation: %w", err)
	}
	objectVal, err := objectToResolveVal(versionedAttr.VersionedObject)
	if err != nil {
		return nil, fmt.Errorf("failed to prepare object variable for evaluation: %w", err)
	}
	var paramsVal any
	if inputs.VersionedParams != nil {
		paramsVal, err = objectToResolveVal(inputs.VersionedParams)
		if err != nil {
			return nil, fmt.Errorf("failed to prepare params variable for evaluation: %w", err)
		}
	}

	// celkeeper: the request's and the namespace's maps from the request's cache when there is one.
	var cache *ActivationCache
	if compositionCtx != nil {
		cache, _ = compositionCtx.Value(activationCacheKey{}).(*ActivationCache)
	}
	requestVal, err := cache.convert(requestEntries, request, func() interface{} { return request.DeepCopy() }, func() (map[string]interface{}, error) {
		u, err := convertObjectToUnstructured(request)
		if err != nil {
			return nil, err
		}
		return u.Object, nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to prepare request variable for evaluation: %w", err)
	}
	namespaceVal, err := cache.convert(namespaceEntries, namespace, func() interface{} { return namespace.DeepCopy() }, func() (map[string]interface{}, error) {
		v, err := objectToResolveVal(namespace)
		if v == nil || err != nil {
			return nil, err
		}
		return v.(map[string]interface{}), nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to prepare namespace variable for evaluation: %w", err)
	}
	va := &evaluationActivation{
		object:          objectVal,
		oldObject:       oldObjectVal,
		params:          paramsVal,
		request:         requestVal,
		namespace:       namespaceResolveVal(namespaceVal),
		authorizerInput: inputs.Authorizer,
		attributes:      versionedAttr,
	}

	// composition is an optional feature that only applies for ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
	if compositionCtx != nil {
		va.variables = compositionCtx.Variables(va)
	}
	return va, nil
}

type evaluationActivation struct {
	object, oldObject, params, request, namespace, variables interface{}
	// celkeeper: the authorizer variables, made when an expression first reads them (upstream makes both
	// for every activation: two CEL type values and the resource authorizer's value, whether read or not)
	authorizerInput                       authorizer.Authorizer
	attributes                            *admission.VersionedAttributes
	authorizer, requestResourceAuthorizer interface{}
}

// celkeeper: authorizers are the authorizer variables as upstream's newActivation makes them (none without
// an authorizer), made on the first call.
func (a *evaluationActivation) authorizers() (interface{}, interface{}) {
	if a.authorizer == nil && a.authorizerInput != nil {
		a.authorizer = library.NewAuthorizerVal(a.attributes.GetUserInfo(), a.authorizerInput)
		a.requestResourceAuthorizer = library.NewResourceAuthorizerVal(a.attributes.GetUserInfo(), a.authorizerInput, a.attributes)
	}
	return a.authorizer, a.requestResourceAuthorizer
}

// ResolveName returns a value from the activation by qualified name, or false if the name
// could not be found.
func (a *evaluationActivation) ResolveName(name string) (interface{}, bool) {
	switch name {
	case ObjectVarName:
		return a.object, true
	case OldObjectVarName:
		return a.oldObject, true
	case ParamsVarName:
		return a.params, true // params may be null
	case RequestVarName:
		return a.request, true
	case NamespaceVarName:
		return a.namespace, true
	case AuthorizerVarName:
		authz, _ := a.authorizers()
		return authz, authz != nil
	case RequestResourceAuthorizerVarName:
		_, authz := a.authorizers()
		return authz, authz != nil
	case VariableVarName: // variables always present
		return a.variables, true
	default:
		return nil, false
	}
}

// Parent returns the parent of the current activation, may be nil.
// If non-nil, the parent will be searched during resolve calls.
func (a *evaluationActivation) Parent() interpreter.Activation {
	return nil
}

// Evaluate runs a compiled CEL admission plugin expression using the provided activation and CEL
// runtime cost budget.
func (a *evaluationActivation) Evaluate(ctx context.Context, compositionCtx CompositionContext, compilationResult CompilationResult, remainingBudget int64) (EvaluationResult, int64, error) {
	var evaluation = EvaluationResult{}
	if compilationResult.ExpressionAccessor == nil { // in case of placeholder
		return evaluation, remainingBudget, nil
	}

	evaluation.ExpressionAccessor = compilationResult.ExpressionAccessor
	if compilationResult.Error != nil {
		evaluation.Error = &cel.Error{
			Type:   cel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("compilation error: %v", compilationResult.Error),
			Cause:  compilationResult.Error,
		}
		return evaluation, remainingBudget, nil
	}
	if compilationResult.Program == nil {
		evaluation.Error = &cel.Error{
			Type:   cel.ErrorTypeInternal,
			Detail: "unexpected internal error compiling expression",
		}
		return evaluation, remainingBudget, nil
	}
	t1 := time.Now()
	evalResult, evalDetails, err := compilationResult.Program.ContextEval(ctx, a)
	// budget may be spent due to lazy evaluation of composited variables
	if compositionCtx != nil {
		compositionCost := compositionCtx.GetAndResetCost()
		if compositionCost > remainingBudget {
			return evaluation, -1, &cel.Error{
				Type:   cel.ErrorTypeInvalid,
				Detail: "validation failed due to running out of cost budget, no further validation rules will be run",
				Cause:  cel.ErrOutOfBudget,
			}
		}
		remainingBudget -= compositionCost
	}
	elapsed := time.Since(t1)
	evaluation.Elapsed = elapsed
	if evalDetails == nil {
		return evaluation, -1, &cel.Error{
			Type:   cel.ErrorTypeInternal,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", compilationResult.ExpressionAccessor.GetExpression()),
		}
	} else {
		rtCost := evalDetails.ActualCost()
		if rtCost == nil {
			return evaluation, -1, &cel.Error{
				Type:   cel.ErrorTypeInvalid,
				Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", compilationResult.ExpressionAccessor.GetExpression()),
				Cause:  cel.ErrOutOfBudget,
			}
		} else {
			if *rtCost > math.MaxInt64 || int64(*rtCost) > remainingBudget {
				return evaluation, -1, &cel.Error{
					Type:   cel.ErrorTypeInvalid,
					Detail: "validation failed due to running out of cost budget, no further validation rules will be run",
					Cause:  cel.ErrOutOfBudget,
				}
			}
			remainingBudget -= int64(*rtCost)
		}
	}
	if err != nil {
		evaluation.Error = &cel.Error{
			Type:   cel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("expression '%v' resulted in error: %v", compilationResult.ExpressionAccessor.GetExpression(), err),
		}
	} else {
		evaluation.EvalResult = evalResult
	}
	return evaluation, remainingBudget, nil
}

// celkeeper: ActivationCache holds, for one admission request, the unstructured maps made of the values
// of the `request` and `namespaceObject` variables, each with the value it was made of.
type ActivationCache struct {
	mu      sync.Mutex
	entries [2][]converted // requestEntries, namespaceEntries
	shared  *NamespaceMaps
}

const (
	requestEntries = iota
	namespaceEntries
)

type converted struct {
	value  interface{} // a copy of the value the map was made of
	object map[string]interface{}
	seen   interface{} // the value last found equal to it (a pointer the plugin hands again)
}

type activationCacheKey struct{}

// WithActivationCache is ctx carrying a new ActivationCache: the activations made in it (their contexts
// derived from it) share the maps of equal `request` and `namespaceObject` values. Its lifetime is the
// context's: one admission request. With shared, the maps of `namespaceObject` values are also looked for
// among (and added to) those made for other requests.
func WithActivationCache(ctx context.Context, shared *NamespaceMaps) context.Context {
	return context.WithValue(ctx, activationCacheKey{}, &ActivationCache{shared: shared})
}

// NamespaceMaps holds `namespaceObject` maps for the ActivationCaches of many admission requests (those
// of a set of policies whose Namespaces change rarely), each with a copy of the value it was made of: at
// most maxSharedNamespaces of them, the first made.
type NamespaceMaps struct {
	mu      sync.Mutex
	entries []converted
}

const maxSharedNamespaces = 256

// find is the entry whose value is reflect.DeepEqual to value.
func (n *NamespaceMaps) find(value interface{}) (converted, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.entries {
		if SameValue(e.value, value) {
			return e, true
		}
	}
	return converted{}, false
}

func (n *NamespaceMaps) add(e converted) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.entries) < maxSharedNamespaces {
		n.entries = append(n.entries, converted{value: e.value, object: e.object})
	}
}

// convert is makeMap(), or the map made before of a value reflect.DeepEqual to value, among the entries
// of the variable which (a nil cache: makeMap()). The cache keeps a copy of the value (copyOf), so that
// the key stays the value the map was made of. The same pointer found equal before is not compared again:
// the plugin hands one request to the validation, message and audit annotation groups of a policy, and
// its lister's Namespace to each policy, and reads them only (the cache holds the pointer, so it is not
// reused for another value). A Namespace not among the request's entries is looked for among the shared
// ones before its map is made.
func (c *ActivationCache) convert(which int, value interface{}, copyOf func() interface{}, makeMap func() (map[string]interface{}, error)) (map[string]interface{}, error) {
	if c == nil {
		return makeMap()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := c.entries[which]
	for i := range entries {
		if entries[i].seen == value {
			return entries[i].object, nil
		}
	}
	for i := range entries {
		if SameValue(entries[i].value, value) {
			entries[i].seen = value
			return entries[i].object, nil
		}
	}
	shared := c.shared
	if which != namespaceEntries {
		shared = nil
	}
	if shared != nil {
		if e, ok := shared.find(value); ok {
			c.entries[which] = append(entries, converted{value: e.value, object: e.object, seen: value})
			return e.object, nil
		}
	}
	object, err := makeMap()
	if err != nil {
		return nil, err
	}
	e := converted{value: copyOf(), object: object, seen: value}
	c.entries[which] = append(entries, e)
	if shared != nil {
		shared.add(e)
	}
	return object, nil
}

// namespaceResolveVal is the namespace variable as objectToResolveVal makes it: nil (untyped) for no
// namespace, the map otherwise.
func namespaceResolveVal(object map[string]interface{}) interface{} {
	if object == nil {
		return nil
	}
	return object
}

// celkeeper: SameValue is reflect.DeepEqual(a, b). Two AdmissionRequests (what the validator makes of a
// request for each policy) are compared field by field as DeepEqual compares them (a nil slice, map or
// pointer differs from an empty or set one), their options and objects by DeepEqual itself (one pointer
// for every policy of a request: equal at once); any other value by DeepEqual.
func SameValue(a, b interface{}) bool {
	if na, ok := a.(*v1.Namespace); ok {
		if nb, ok := b.(*v1.Namespace); ok && na != nil && nb != nil && sameNamespace(na, nb) {
			return true
		}
	}
	ra, okA := a.(*admissionv1.AdmissionRequest)
	rb, okB := b.(*admissionv1.AdmissionRequest)
	if !okA || !okB || ra == nil || rb == nil {
		return reflect.DeepEqual(a, b)
	}
	return ra.UID == rb.UID && ra.Kind == rb.Kind && ra.Resource == rb.Resource && ra.SubResource == rb.SubResource &&
		samePointee(ra.RequestKind, rb.RequestKind) && samePointee(ra.RequestResource, rb.RequestResource) &&
		ra.RequestSubResource == rb.RequestSubResource && ra.Name == rb.Name && ra.Namespace == rb.Namespace &&
		ra.Operation == rb.Operation && samePointee(ra.DryRun, rb.DryRun) &&
		ra.UserInfo.Username == rb.UserInfo.Username && ra.UserInfo.UID == rb.UserInfo.UID &&
		sameStrings(ra.UserInfo.Groups, rb.UserInfo.Groups) &&
		((ra.UserInfo.Extra == nil && rb.UserInfo.Extra == nil) || reflect.DeepEqual(ra.UserInfo.Extra, rb.UserInfo.Extra)) &&
		sameRawExtension(&ra.Object, &rb.Object) && sameRawExtension(&ra.OldObject, &rb.OldObject) &&
		sameRawExtension(&ra.Options, &rb.Options)
}

func samePointee[T comparable](a, b *T) bool {
	return a == b || (a != nil && b != nil && *a == *b)
}

func sameStrings[T comparable](a, b []T) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameRawExtension(a, b *runtime.RawExtension) bool {
	if (a.Raw == nil) != (b.Raw == nil) || !bytes.Equal(a.Raw, b.Raw) {
		return false
	}
	return (a.Object == nil && b.Object == nil) || reflect.DeepEqual(a.Object, b.Object)
}

// sameNamespace is true only when reflect.DeepEqual(a, b) is, without reflection for the fields a
// Namespace made by CreateNamespaceObject has (false leaves DeepEqual to decide: for the fields it has not,
// or times whose locations are equal but not the same pointer).
func sameNamespace(a, b *v1.Namespace) bool {
	ma, mb := &a.ObjectMeta, &b.ObjectMeta
	return a.TypeMeta == b.TypeMeta && ma.Name == mb.Name && ma.GenerateName == mb.GenerateName &&
		ma.Namespace == mb.Namespace && ma.SelfLink == mb.SelfLink && ma.UID == mb.UID &&
		ma.ResourceVersion == mb.ResourceVersion && ma.Generation == mb.Generation &&
		ma.CreationTimestamp == mb.CreationTimestamp && samePointee(ma.DeletionTimestamp, mb.DeletionTimestamp) &&
		samePointee(ma.DeletionGracePeriodSeconds, mb.DeletionGracePeriodSeconds) &&
		sameStringMaps(ma.Labels, mb.Labels) && sameStringMaps(ma.Annotations, mb.Annotations) &&
		ma.OwnerReferences == nil && mb.OwnerReferences == nil && sameStrings(ma.Finalizers, mb.Finalizers) &&
		ma.ManagedFields == nil && mb.ManagedFields == nil &&
		sameStrings(a.Spec.Finalizers, b.Spec.Finalizers) && a.Status.Phase == b.Status.Phase &&
		a.Status.Conditions == nil && b.Status.Conditions == nil
}

func sameStringMaps(a, b map[string]string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, va := range a {
		if vb, ok := b[k]; !ok || va != vb {
			return false
		}
	}
	return true
}
