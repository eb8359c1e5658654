package admissionpolicy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	admissionauthorizer "k8s.io/apiserver/pkg/admission/plugin/authorizer"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
)

// Explanation is why the API server answers a request as it does: its answer (Response, from the real
// admission chain, the authority) and, per policy and binding, a trace made with the plugins' own
// compiled policies, matcher and parameter lookup: whether the binding applied and, when not, the
// criterion that excluded the request; the parameter objects; each matchCondition, validation,
// audit annotation and mutation's result.
type Explanation struct {
	Response *Response `json:"response"`
	// the MutatingAdmissionPolicies' bindings, on the object as the API server decoded it (one pass, in
	// the plugin's order, each binding on the object the previous ones left; reinvocation is not traced)
	Mutating []BindingTrace `json:"mutating"`
	// the ValidatingAdmissionPolicies' bindings, on the object the mutating policies left
	Validating []BindingTrace `json:"validating"`
	// the validating policies were called (false: a mutating policy denied the request first)
	Validated bool `json:"validated"`
}

// BindingTrace is one policy with one of its bindings (Binding empty: the policy itself did not match
// or could not be configured, so none of its bindings was considered).
type BindingTrace struct {
	Kind    string `json:"kind"` // ValidatingAdmissionPolicy, MutatingAdmissionPolicy
	Policy  string `json:"policy"`
	Binding string `json:"binding,omitempty"`
	Applied bool   `json:"applied"`
	// when not applied: the field that excluded the request (`policy spec.matchConstraints.namespaceSelector`,
	// `binding spec.matchResources.resourceRules`, ...) and why, in words
	Excluded string `json:"excluded,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// a configuration error (the policy does not compile, a parameter cannot be found with
	// parameterNotFoundAction Deny, ...): with failurePolicy Fail the request is denied with it
	Error         string   `json:"error,omitempty"`
	FailurePolicy string   `json:"failurePolicy,omitempty"`
	Actions       []string `json:"validationActions,omitempty"`
	// the binding's paramRef, and what was found
	ParamRef *admissionregistrationv1.ParamRef `json:"paramRef,omitempty"`
	Params   []ParamTrace                      `json:"params,omitempty"`
}

// ParamTrace is the evaluation of a binding with one parameter object (Param empty: without one).
type ParamTrace struct {
	Param string `json:"param,omitempty"` // namespace/name of the parameter object
	// the matchConditions: all true (Matched), or the first false one, or an error
	Matched         bool   `json:"matched"`
	FailedCondition string `json:"failedCondition,omitempty"`
	ConditionError  string `json:"conditionError,omitempty"`
	// an error that stopped the evaluation as a whole (its message, as the plugin reports it)
	Error            string            `json:"error,omitempty"`
	Validations      []ValidationTrace `json:"validations,omitempty"`
	AuditAnnotations []AnnotationTrace `json:"auditAnnotations,omitempty"`
	Mutations        []MutationTrace   `json:"mutations,omitempty"`
}

// ValidationTrace is one validation's result: passed, failed (with the message the API server gives:
// messageExpression's, else message, else the expression) or error (ignored with failurePolicy Ignore).
type ValidationTrace struct {
	Index             int    `json:"index"`
	Expression        string `json:"expression"`
	MessageExpression string `json:"messageExpression,omitempty"`
	Result            string `json:"result"` // passed, failed, error
	Message           string `json:"message,omitempty"`
	Reason            string `json:"reason,omitempty"`
	Ignored           bool   `json:"ignored,omitempty"`
}

// AnnotationTrace is one auditAnnotation's result: published (with its value), excluded (null or empty)
// or error.
type AnnotationTrace struct {
	Key    string `json:"key"`
	Result string `json:"result"`
	Value  string `json:"value,omitempty"`
	Error  string `json:"error,omitempty"`
}

// MutationTrace is one mutation's result: the JSON merge patch of what it changed (null: nothing), or
// its error.
type MutationTrace struct {
	Index     int             `json:"index"`
	PatchType string          `json:"patchType"`
	Patch     json.RawMessage `json:"patch,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Explain answers a request as Review does and traces why.
func (s *Set) Explain(ctx context.Context, req Request) (*Explanation, error) {
	mutatingPlugin, validatingPlugin := s.policyPlugins()
	if mutatingPlugin == nil || validatingPlugin == nil {
		return nil, fmt.Errorf("the admission policy plugins are not running")
	}
	out := &Explanation{Mutating: []BindingTrace{}, Validating: []BindingTrace{}}

	// the mutating trace on its own copy of the request: the real chain below mutates its attributes
	traced, err := s.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	if traced.attrs == nil {
		out.Response = traced.resp
		return out, nil
	}
	mutatingSource, ok := unexported[generic.Source[mutating.PolicyHook]](mutatingPlugin.Plugin, "source")
	if !ok {
		return nil, errPluginFields
	}
	validatingSource, ok := unexported[generic.Source[validating.PolicyHook]](validatingPlugin.Plugin, "source")
	if !ok {
		return nil, errPluginFields
	}
	tcm, ok := dispatcherTypeConverters(mutatingPlugin)
	if !ok {
		return nil, errPluginFields
	}
	if m, ok := unexported[*matching.Matcher](validatingPlugin.Plugin, "matcher"); !ok || m == nil {
		return nil, errPluginFields
	}
	t := s.tracer(ctx, traced.attrs)
	out.Mutating = t.mutating(sortedByName(mutatingSource.Hooks(), func(h mutating.PolicyHook) string { return h.Policy.Name }), tcm)

	real, err := s.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := s.answerWith(ctx, real, true)
	if err != nil {
		return nil, err
	}
	out.Response, out.Validated = resp, resp.validated
	t = s.tracer(ctx, real.attrs) // the object as the mutating policies left it
	out.Validating = t.validating(sortedByName(validatingSource.Hooks(), func(h validating.PolicyHook) string { return h.Policy.Name }))
	return out, nil
}

// errPluginFields: the plugins' fields the trace reads (see unexported) are not where this Kubernetes
// version keeps them; the trace would be empty, so there is none.
var errPluginFields = errors.New("cannot trace the admission policy plugins: their policy source, matcher or type converters are not where celkeeper reads them (a Kubernetes version it does not know)")

func (s *Set) policyPlugins() (*mutating.Plugin, *validating.Plugin) {
	var m *mutating.Plugin
	var v *validating.Plugin
	for _, p := range s.plugins {
		switch p := p.(type) {
		case *mutating.Plugin:
			m = p
		case *validating.Plugin:
			v = p
		}
	}
	return m, v
}

// unexported reads a field the plugins keep unexported (their policy source, matcher, dispatcher): the
// trace uses the very objects the plugins evaluate with. The Go test checks they are found.
func unexported[T any](ptr any, name string) (T, bool) {
	var zero T
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return zero, false
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() {
		return zero, false
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	if f.Kind() == reflect.Interface && f.IsNil() {
		return zero, false
	}
	got, ok := f.Interface().(T)
	return got, ok
}

// dispatcherTypeConverters is the mutating dispatcher's type converters (what its patches apply with).
func dispatcherTypeConverters(p *mutating.Plugin) (patch.TypeConverterManager, bool) {
	d, ok := unexported[generic.Dispatcher[mutating.PolicyHook]](p.Plugin, "dispatcher")
	if !ok {
		return nil, false
	}
	return unexported[patch.TypeConverterManager](d, "typeConverterManager")
}

// sortedByName is a copy of the plugin's hooks or a hook's bindings in the order of their names: the
// plugins keep them in an order that can change from one set to the next, a trace is read in this one.
func sortedByName[H any](hooks []H, name func(H) string) []H {
	out := append([]H(nil), hooks...)
	sort.SliceStable(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

type tracer struct {
	ctx       context.Context
	s         *Set
	attrs     admission.Attributes
	matcher   *matching.Matcher
	namespace *corev1.Namespace
	nsErr     error
}

func (s *Set) tracer(ctx context.Context, attrs admission.Attributes) *tracer {
	_, v := s.policyPlugins()
	m, _ := unexported[*matching.Matcher](v.Plugin, "matcher")
	t := &tracer{ctx: ctx, s: s, attrs: attrs, matcher: m}
	name := attrs.GetNamespace()
	if gvk := attrs.GetKind(); gvk.Kind == "Namespace" && gvk.Version == "v1" && gvk.Group == "" {
		name = "" // as the dispatchers: a Namespace's request is not evaluated within a namespace
	}
	if name != "" && m != nil {
		t.namespace, t.nsErr = m.GetNamespace(ctx, name)
	}
	return t
}

func (t *tracer) validating(hooks []validating.PolicyHook) []BindingTrace {
	out := []BindingTrace{}
	authz := admissionauthorizer.NewCachingAuthorizer(offlineAuthorizer{})
	for _, hook := range hooks {
		policy := hook.Policy
		base := BindingTrace{Kind: "ValidatingAdmissionPolicy", Policy: policy.Name, FailurePolicy: failurePolicy(policy.Spec.FailurePolicy)}
		accessor := validating.NewValidatingAdmissionPolicyAccessor(policy)
		matchResource, matchKind, applies := t.policyApplies(accessor, hook.ConfigurationError, len(hook.Bindings), &base)
		if !applies {
			out = append(out, base)
			continue
		}
		celMatcher, _ := unexported[matchconditions.Matcher](hook.Evaluator, "celMatcher")
		bindings := sortedByName(hook.Bindings, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string { return b.Name })
		for _, binding := range bindings {
			bt := base
			bt.Binding = binding.Name
			bt.ParamRef = binding.Spec.ParamRef
			for _, a := range binding.Spec.ValidationActions {
				bt.Actions = append(bt.Actions, string(a))
			}
			params, ok := t.bindingParams(accessor, validating.NewValidatingAdmissionPolicyBindingAccessor(binding), hook.ParamInformer, hook.ParamScope, &bt)
			if !ok {
				out = append(out, bt)
				continue
			}
			versioned, err := admission.NewVersionedAttributes(t.attrs, matchKind, t.s.objects)
			if err != nil {
				bt.Error = "failed to convert object version: " + err.Error()
				out = append(out, bt)
				continue
			}
			bt.Applied = true
			for _, param := range params {
				p := paramObject(param, policy.Spec.ParamKind)
				pt := ParamTrace{Param: objectName(param), Matched: true}
				if celMatcher == nil && len(policy.Spec.MatchConditions) > 0 && hook.Evaluator.CompileError() == nil {
					pt.Error = errPluginFields.Error()
					bt.Params = append(bt.Params, pt)
					continue
				}
				if celMatcher != nil && hook.Evaluator.CompileError() == nil {
					r := celMatcher.Match(t.ctx, versioned, p, authz)
					pt.Matched = r.Matches && r.Error == nil
					pt.FailedCondition = r.FailedConditionName
					if r.Error != nil {
						pt.ConditionError = r.Error.Error()
					}
				}
				result := hook.Evaluator.Validate(t.ctx, matchResource, versioned, p, t.namespace, celconfig.RuntimeCELCostBudget, authz)
				if pt.Matched {
					traceValidations(&pt, policy, result)
				}
				pt.AuditAnnotations = traceAnnotations(result)
				bt.Params = append(bt.Params, pt)
			}
			out = append(out, bt)
		}
	}
	return out
}

// traceValidations pairs the validator's decisions with the policy's validations (the validator gives
// one decision per validation, or a single one for an error that stopped the evaluation).
func traceValidations(pt *ParamTrace, policy *admissionregistrationv1.ValidatingAdmissionPolicy, result validating.ValidateResult) {
	validations := policy.Spec.Validations
	if len(result.Decisions) != len(validations) {
		for _, d := range result.Decisions {
			if d.Evaluation == validating.EvalError {
				pt.Error = d.Message
			}
		}
		return
	}
	for i, d := range result.Decisions {
		v := ValidationTrace{Index: i, Expression: validations[i].Expression, MessageExpression: validations[i].MessageExpression}
		switch d.Evaluation {
		case validating.EvalAdmit:
			v.Result = "passed"
		case validating.EvalDeny:
			v.Result, v.Message, v.Reason = "failed", d.Message, string(d.Reason)
		default:
			v.Result, v.Message = "error", d.Message
			v.Ignored = d.Action == validating.ActionAdmit
		}
		pt.Validations = append(pt.Validations, v)
	}
}

func traceAnnotations(result validating.ValidateResult) []AnnotationTrace {
	var out []AnnotationTrace
	for _, a := range result.AuditAnnotations {
		if a.Key == "" && a.Action == "" {
			continue
		}
		at := AnnotationTrace{Key: a.Key}
		switch a.Action {
		case validating.AuditAnnotationActionPublish:
			at.Result, at.Value = "published", a.Value
		case validating.AuditAnnotationActionExclude:
			at.Result = "excluded"
			if a.Error != "" {
				at.Error = a.Error
			}
		default:
			at.Result, at.Error = "error", a.Error
		}
		out = append(out, at)
	}
	return out
}

func (t *tracer) mutating(hooks []mutating.PolicyHook, tcm patch.TypeConverterManager) []BindingTrace {
	out := []BindingTrace{}
	authz := admissionauthorizer.NewCachingAuthorizer(offlineAuthorizer{})
	versionedByKind := map[schema.GroupVersionKind]*admission.VersionedAttributes{}
	for _, hook := range hooks {
		policy := hook.Policy
		base := BindingTrace{Kind: "MutatingAdmissionPolicy", Policy: policy.Name, FailurePolicy: failurePolicy(policy.Spec.FailurePolicy)}
		accessor := mutating.NewMutatingAdmissionPolicyAccessor(policy)
		matchResource, matchKind, applies := t.policyApplies(accessor, hook.ConfigurationError, len(hook.Bindings), &base)
		if !applies {
			out = append(out, base)
			continue
		}
		bindings := sortedByName(hook.Bindings, func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string { return b.Name })
		for _, binding := range bindings {
			bt := base
			bt.Binding = binding.Name
			bt.ParamRef = binding.Spec.ParamRef
			params, ok := t.bindingParams(accessor, mutating.NewMutatingAdmissionPolicyBindingAccessor(binding), hook.ParamInformer, hook.ParamScope, &bt)
			if !ok {
				out = append(out, bt)
				continue
			}
			versioned := versionedByKind[matchKind]
			if versioned == nil {
				v, err := admission.NewVersionedAttributes(t.attrs, matchKind, t.s.objects)
				if err != nil {
					bt.Error = "failed to convert object version: " + err.Error()
					out = append(out, bt)
					continue
				}
				versioned, versionedByKind[matchKind] = v, v
			}
			bt.Applied = true
			for _, param := range params {
				p := paramObject(param, policy.Spec.ParamKind)
				pt := ParamTrace{Param: objectName(param), Matched: true}
				ctx := t.ctx
				if hook.Evaluator.CompositedCompiler != nil {
					ctx = hook.Evaluator.CompositedCompiler.CreateContext(ctx)
				}
				if hook.Evaluator.Error != nil {
					pt.Error = hook.Evaluator.Error.Error()
					bt.Params = append(bt.Params, pt)
					continue
				}
				if hook.Evaluator.Matcher != nil {
					r := hook.Evaluator.Matcher.Match(ctx, versioned, p, authz)
					pt.Matched = r.Matches && r.Error == nil
					pt.FailedCondition = r.FailedConditionName
					if r.Error != nil {
						pt.ConditionError = r.Error.Error()
					}
				}
				if pt.Matched {
					pt.Mutations = t.mutations(ctx, hook, versioned, p, matchResource, tcm, authz)
				}
				bt.Params = append(bt.Params, pt)
			}
			out = append(out, bt)
		}
	}
	return out
}

// mutations applies a policy's mutations in order, as the mutating dispatcher does (its dispatchOne:
// the patch, the conversion back to the typed object, defaulting), saying what each changed.
func (t *tracer) mutations(ctx context.Context, hook mutating.PolicyHook, versioned *admission.VersionedAttributes, param runtime.Object, matchResource schema.GroupVersionResource, tcm patch.TypeConverterManager, authz authorizer.Authorizer) []MutationTrace {
	var out []MutationTrace
	for i, m := range hook.Policy.Spec.Mutations {
		mt := MutationTrace{Index: i, PatchType: string(m.PatchType)}
		if i >= len(hook.Evaluator.Mutators) || versioned.VersionedObject == nil {
			mt.Error = "no object to patch"
			out = append(out, mt)
			continue
		}
		var converter managedfields.TypeConverter
		if tcm != nil {
			converter = tcm.GetTypeConverter(versioned.VersionedKind)
		}
		if converter == nil {
			mt.Error = fmt.Sprintf("Resource kind %s not found", versioned.VersionedKind)
			out = append(out, mt)
			continue
		}
		before, _ := json.Marshal(versioned.VersionedObject)
		req := patch.Request{
			MatchedResource:     matchResource,
			VersionedAttributes: versioned,
			ObjectInterfaces:    t.s.objects,
			OptionalVariables:   cel.OptionalVariableBindings{VersionedParams: param, Authorizer: authz},
			Namespace:           t.namespace,
			TypeConverter:       converter,
		}
		patched, err := hook.Evaluator.Mutators[i].Patch(ctx, req, celconfig.RuntimeCELCostBudget)
		if err == nil {
			if _, unstructuredObject := versioned.VersionedObject.(interface{ UnstructuredContent() map[string]any }); !unstructuredObject {
				patched, err = t.s.objects.GetObjectConvertor().ConvertToVersion(patched, versioned.GetKind().GroupVersion())
			}
		}
		if err != nil {
			mt.Error = err.Error()
			out = append(out, mt)
			continue
		}
		t.s.objects.GetObjectDefaulter().Default(patched)
		versioned.VersionedObject = patched
		after, _ := json.Marshal(patched)
		if diff, err := jsonmergepatch.CreateThreeWayJSONMergePatch(before, after, before); err == nil && string(diff) != "{}" {
			mt.Patch = diff
		}
		out = append(out, mt)
	}
	return out
}

// policyMatches is the plugin's DefinitionMatches on a policy; when it does not match, the trace says
// which criterion excluded the request.
func (t *tracer) policyMatches(policy generic.PolicyAccessor, bt *BindingTrace) (schema.GroupVersionResource, schema.GroupVersionKind, bool) {
	if t.matcher == nil {
		bt.Error = "the plugin's matcher is not available"
		return schema.GroupVersionResource{}, schema.GroupVersionKind{}, true
	}
	matches, resource, kind, err := generic.NewPolicyMatcher(t.matcher).DefinitionMatches(t.attrs, t.s.objects, policy)
	if err != nil {
		bt.Error = "failed to configure policy: " + err.Error()
		return resource, kind, true
	}
	if !matches {
		t.why(policy.GetMatchConstraints(), "policy spec.matchConstraints", bt)
		return resource, kind, true
	}
	return resource, kind, false
}

// policyApplies says whether the request goes on to the policy's bindings: the policy matches it, is
// configured and has bindings; when not, base says why.
func (t *tracer) policyApplies(policy generic.PolicyAccessor, configErr error, bindings int, base *BindingTrace) (schema.GroupVersionResource, schema.GroupVersionKind, bool) {
	matchResource, matchKind, excluded := t.policyMatches(policy, base)
	switch {
	case excluded:
	case configErr != nil:
		base.Error = "failed to configure policy: " + configErr.Error()
	case bindings == 0:
		base.Reason = "no binding binds the policy"
	default:
		return matchResource, matchKind, true
	}
	return matchResource, matchKind, false
}

// bindingParams is the parameter objects of a binding that applies to the request (its matchResources
// match, its parameters are found, the request's Namespace is known); false, with bt saying why, when
// it does not.
func (t *tracer) bindingParams(policy generic.PolicyAccessor, binding generic.BindingAccessor, informer informers.GenericInformer, scope meta.RESTScope, bt *BindingTrace) ([]runtime.Object, bool) {
	if !t.bindingMatches(binding, bt) {
		return nil, false
	}
	params, ok := t.params(policy.GetParamKind(), informer, scope, binding.GetParamRef(), bt)
	if !ok {
		return nil, false
	}
	if t.nsErr != nil {
		bt.Error = t.nsErr.Error()
		return nil, false
	}
	return params, true
}

// bindingMatches is the plugin's BindingMatches on a binding, with the criterion that excluded it.
func (t *tracer) bindingMatches(binding generic.BindingAccessor, bt *BindingTrace) bool {
	matches, err := generic.NewPolicyMatcher(t.matcher).BindingMatches(t.attrs, t.s.objects, binding)
	if err != nil {
		bt.Error = "failed to configure binding: " + err.Error()
		return false
	}
	if !matches {
		t.why(binding.GetMatchResources(), "binding spec.matchResources", bt)
	}
	return matches
}

// why finds the criterion of matchResources that excludes the request: Kubernetes' matcher on each
// criterion alone (the others matching everything), in the order the matcher checks them.
func (t *tracer) why(mr *admissionregistrationv1.MatchResources, where string, bt *BindingTrace) {
	everything := &metav1.LabelSelector{}
	alone := func(r admissionregistrationv1.MatchResources) bool {
		if r.NamespaceSelector == nil {
			r.NamespaceSelector = everything
		}
		if r.ObjectSelector == nil {
			r.ObjectSelector = everything
		}
		ok, _, _, err := t.matcher.Matches(t.attrs, t.s.objects, &criteria{r})
		return ok || err != nil
	}
	policy := mr.MatchPolicy
	switch {
	case !alone(admissionregistrationv1.MatchResources{NamespaceSelector: mr.NamespaceSelector}):
		bt.Excluded = where + ".namespaceSelector"
		bt.Reason = fmt.Sprintf("%s does not select namespace %s (labels %s)", selectorText(mr.NamespaceSelector), t.attrs.GetNamespace(), labelsText(t.namespaceLabels()))
	case !alone(admissionregistrationv1.MatchResources{ObjectSelector: mr.ObjectSelector}):
		bt.Excluded = where + ".objectSelector"
		bt.Reason = fmt.Sprintf("%s does not select the object (labels %s)", selectorText(mr.ObjectSelector), labelsText(t.objectLabels()))
	case !alone(admissionregistrationv1.MatchResources{ExcludeResourceRules: mr.ExcludeResourceRules, MatchPolicy: policy}):
		bt.Excluded = where + ".excludeResourceRules"
		bt.Reason = fmt.Sprintf("a rule excludes %s", t.requestText())
	case len(mr.ResourceRules) > 0 && !alone(admissionregistrationv1.MatchResources{ResourceRules: mr.ResourceRules, MatchPolicy: policy}):
		bt.Excluded = where + ".resourceRules"
		bt.Reason = fmt.Sprintf("no rule matches %s", t.requestText())
	default:
		bt.Excluded = where
		bt.Reason = "the request is not matched"
	}
}

// criteria is matchResources as the plugin's matcher reads them (generic.matchCriteria).
type criteria struct {
	r admissionregistrationv1.MatchResources
}

func (c *criteria) GetParsedNamespaceSelector() (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(c.r.NamespaceSelector)
}

func (c *criteria) GetParsedObjectSelector() (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(c.r.ObjectSelector)
}

func (c *criteria) GetMatchResources() admissionregistrationv1.MatchResources { return c.r }

// requestText is the request as resource rules see it: `CREATE apps/v1 deployments "web"`.
func (t *tracer) requestText() string {
	r := t.attrs.GetResource()
	gv := r.Version
	if r.Group != "" {
		gv = r.Group + "/" + r.Version
	}
	resource := r.Resource
	if sub := t.attrs.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	text := fmt.Sprintf("%s %s %s", t.attrs.GetOperation(), gv, resource)
	if name := t.attrs.GetName(); name != "" {
		text += fmt.Sprintf(" %q", name)
	}
	return text
}

func (t *tracer) namespaceLabels() map[string]string {
	if t.namespace != nil {
		return t.namespace.Labels
	}
	return nil
}

func (t *tracer) objectLabels() map[string]string {
	obj := t.attrs.GetObject()
	if obj == nil {
		obj = t.attrs.GetOldObject()
	}
	if m, err := meta.Accessor(obj); err == nil && obj != nil {
		return m.GetLabels()
	}
	return nil
}

// params is the plugin's parameter lookup (generic.CollectParams) for a binding; false when it fails
// (the trace says why).
func (t *tracer) params(kind *admissionregistrationv1.ParamKind, informer informers.GenericInformer, scope meta.RESTScope, ref *admissionregistrationv1.ParamRef, bt *BindingTrace) ([]runtime.Object, bool) {
	params, err := generic.CollectParams(kind, informer, scope, ref, t.attrs.GetNamespace())
	if err != nil {
		bt.Error = "failed to configure binding: " + err.Error()
		return nil, false
	}
	if len(params) == 0 {
		action := "Allow"
		if ref != nil && ref.ParameterNotFoundAction != nil {
			action = string(*ref.ParameterNotFoundAction)
		}
		bt.Reason = fmt.Sprintf("no parameter object found (parameterNotFoundAction %s): the binding is not evaluated", action)
	}
	return params, true
}

// paramObject is a parameter as the dispatchers pass it to CEL: with its apiVersion and kind set (a
// typed object from an informer has none: validating's wrappedParam and the mutating dispatcher do the
// same).
func paramObject(param runtime.Object, kind *admissionregistrationv1.ParamKind) runtime.Object {
	if param == nil || kind == nil || !param.GetObjectKind().GroupVersionKind().Empty() {
		return param
	}
	data, err := runtime.DefaultUnstructuredConverter.ToUnstructured(param)
	if err != nil {
		return param
	}
	u := &unstructured.Unstructured{Object: data}
	u.SetAPIVersion(kind.APIVersion)
	u.SetKind(kind.Kind)
	return u
}

func objectName(obj runtime.Object) string {
	if obj == nil {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	if m.GetNamespace() != "" {
		return m.GetNamespace() + "/" + m.GetName()
	}
	return m.GetName()
}

func failurePolicy(f *admissionregistrationv1.FailurePolicyType) string {
	if f == nil {
		return string(admissionregistrationv1.Fail)
	}
	return string(*f)
}

func selectorText(s *metav1.LabelSelector) string {
	if s == nil {
		return "{}"
	}
	data, _ := json.Marshal(s)
	return string(data)
}

func labelsText(l map[string]string) string {
	if len(l) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}
