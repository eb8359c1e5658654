// celkeeper's copy of k8s.io/apiserver v0.36.2 pkg/admission/plugin/cel/activation.go, compiled in its
// place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   14451bf0329f0d2e576122e1319a1da2b75d9cf00f1dcd9eb4c6fdf3d67a81e2
// (tests/native/test_locate_patches.py checks that the module cache holds it). One change, marked
// "celkeeper:" below; docs/known-issues.md says why and when it can go: when the context an activation
// is made in carries an ActivationCache (WithActivationCache: celkeeper sets one per admission request),
// the unstructured maps of the `request` and `namespaceObject` variables are made once per distinct
// value and shared by the activations of every policy of the request, instead of converted by
// reflection for every expression group of every policy (for a request meeting fifty policies, a third
// of its CPU). A map is reused only for a value reflect.DeepEqual to the one it was made of (for an
// AdmissionRequest, SameValue decides it field by field, without reflection but for its objects): the
// conversion is a function of the value, so the variables are the maps it would make; CEL only reads
// them. Without a cache in the context the function is upstream's.

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
	var paramsVal, authorizerVal, requestResourceAuthorizerVal any
	if inputs.VersionedParams != nil {
		paramsVal, err = objectToResolveVal(inputs.VersionedParams)
		if err != nil {
			return nil, fmt.Errorf("failed to prepare params variable for evaluation: %w", err)
		}
	}

	if inputs.Authorizer != nil {
		authorizerVal = library.NewAuthorizerVal(versionedAttr.GetUserInfo(), inputs.Authorizer)
		requestResourceAuthorizerVal = library.NewResourceAuthorizerVal(versionedAttr.GetUserInfo(), inputs.Authorizer, versionedAttr)
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
		object:                    objectVal,
		oldObject:                 oldObjectVal,
		params:                    paramsVal,
		request:                   requestVal,
		namespace:                 namespaceResolveVal(namespaceVal),
		authorizer:                authorizerVal,
		requestResourceAuthorizer: requestResourceAuthorizerVal,
	}

	// composition is an optional feature that only applies for ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
	if compositionCtx != nil {
		va.variables = compositionCtx.Variables(va)
	}
	return va, nil
}

type evaluationActivation struct {
	object, oldObject, params, request, namespace, authorizer, requestResourceAuthorizer, variables interface{}
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
		return a.authorizer, a.authorizer != nil
	case RequestResourceAuthorizerVarName:
		return a.requestResourceAuthorizer, a.requestResourceAuthorizer != nil
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
// context's: one admission request.
func WithActivationCache(ctx context.Context) context.Context {
	return context.WithValue(ctx, activationCacheKey{}, &ActivationCache{})
}

// convert is makeMap(), or the map made before of a value reflect.DeepEqual to value, among the entries
// of the variable which (a nil cache: makeMap()). The cache keeps a copy of the value (copyOf), so that
// the key stays the value the map was made of. The same pointer found equal before is not compared again:
// the plugin hands one request to the validation, message and audit annotation groups of a policy, and
// its lister's Namespace to each policy, and reads them only (the cache holds the pointer, so it is not
// reused for another value).
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
	object, err := makeMap()
	if err != nil {
		return nil, err
	}
	c.entries[which] = append(entries, converted{value: copyOf(), object: object, seen: value})
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

func sameStrings(a, b []string) bool {
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
