package k8scel

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

// Constraint is a constraint object, decoded once (Gatekeeper passes the constraint's
// *unstructured.Unstructured to validator.Validate as the versioned params).
type Constraint struct {
	Object *unstructured.Unstructured
	params any   // objectToResolveVal(constraint): the object's content, computed once
	class  int64 // its parameter class in its template (memo.go); unbound: its own
	// the results of its template's variables that read nothing of the request (bound: computed
	// when bound; nil: none)
	fixedVariables []*variableResult
}

func (c *Constraint) fixed(i int) *variableResult {
	if c == nil || c.fixedVariables == nil {
		return nil
	}
	return c.fixedVariables[i]
}

// NewConstraint decodes a constraint object (JSON) as an unstructured object (not bound to a
// template: nothing of its evaluations is shared with other constraints).
func NewConstraint(data []byte) (*Constraint, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return &Constraint{Object: u, params: u.UnstructuredContent(), class: -constraintIDs.Add(1)}, nil
}

// Bind decodes a constraint object of this template.
func (t *Template) Bind(data []byte) (*Constraint, error) {
	c, err := NewConstraint(data)
	if err != nil {
		return nil, err
	}
	c.class = t.classOf(c.Object.UnstructuredContent())
	// the variables that read only the constraint (and each other): evaluated once, here
	r := &Request{memo: newMemo()}
	comp := t.newComposition(context.Background(), r, c)
	comp.reset(scopeValidations)
	fixed := make([]*variableResult, len(t.variables))
	for i, isFixed := range t.variableFixed {
		if isFixed {
			comp.vars.resolveField(i)
			fixed[i] = r.memo.variables[t.memoKey(c, scopeValidations, partVariable, i)]
		}
	}
	c.fixedVariables = fixed
	return c, nil
}

// Request is one admission request converted once for every constraint evaluated on it: what
// validator.Validate and matcher.Match compute again for each constraint (CreateAdmissionRequest,
// newActivation's conversions) is computed here, with the same functions, once.
type Request struct {
	Admission *admissionv1.AdmissionRequest // as Gatekeeper's driver holds it (object unset on DELETE)
	Attr      *admission.VersionedAttributes
	Namespace *corev1.Namespace // the request's Namespace as the driver converts it (mapToNamespace), or nil

	memo   *memo        // what evaluating constraints on this request produced (memo.go)
	tracer *Trace       // while Explain decides a constraint: where its parts' results are recorded
	spare  *composition // the next constraint's composition (composition.go: recycle)

	values *objectValues // object and oldObject as CEL values, converted once (objectvalues.go)
	maps   *Maps         // the recycled maps object and oldObject were decoded into (nil: new ones)

	view *View                 // the synced data this request reads (nil: none; inventory.go)
	data map[*Template]ref.Val // `data` of each template that reads it, made when first needed

	object, oldObject any            // objectToResolveVal(versionedAttr.Versioned{Old,}Object)
	request           map[string]any // convertObjectToUnstructured(CreateAdmissionRequest(...)).Object
	namespace         any            // objectToResolveVal(CreateNamespaceObject(namespace))

	// request is made when an expression first reads it (requestValue): most templates never do
	requestOnce sync.Once
	requestErr  error
}

// requestValue is the `request` variable: activation.go newActivation's
// convertObjectToUnstructured(CreateAdmissionRequest(...)), made on first use - the same value, a
// tenth of a request's conversion saved for the templates that never read it. The conversion of an
// AdmissionRequest cannot fail (its fields are plain data and the options JSON that was decoded);
// should it, the expressions reading `request` get the error Kubernetes would have answered the
// request with.
func (r *Request) requestValue() any {
	r.requestOnce.Do(func() {
		if r.Attr == nil { // a Request made of values (Expression.Evaluate): `request` is given
			return
		}
		// validator.go Validate: CreateAdmissionRequest(versionedAttr.Attributes, matchedResource,
		// versionedAttr.VersionedKind) with matchedResource = versionedAttr.GetResource() (driver.go);
		// matcher.go Match builds the same request from the same values.
		admissionRequest := plugincel.CreateAdmissionRequest(r.Attr.Attributes,
			metav1.GroupVersionResource(r.Attr.GetResource()), metav1.GroupVersionKind(r.Attr.VersionedKind))
		r.request, r.requestErr = runtime.DefaultUnstructuredConverter.ToUnstructured(admissionRequest)
	})
	if r.requestErr != nil {
		return types.NewErr("failed to prepare request variable for evaluation: %v", r.requestErr)
	}
	return r.request
}

// Done releases what the request converted once for its evaluations and what it remembered (call it
// when the request is decided; the request is not evaluated after).
func (r *Request) Done() {
	if r.values != nil {
		r.values.release()
	}
	if r.memo != nil {
		r.memo.release()
		r.memo = nil
	}
	r.spare = nil
	r.maps.Recycle()
	r.maps = nil
}

// ReadData makes the request read synced data through view (one read transaction; the caller
// closes the view when the request is decided).
func (r *Request) ReadData(view *View) { r.view = view }

// dataFor is `data` for template t in this request.
func (r *Request) dataFor(t *Template) ref.Val {
	if v, ok := r.data[t]; ok {
		return v
	}
	if r.data == nil {
		r.data = map[*Template]ref.Val{}
	}
	v := newDataValue(r.view, t.dataKinds)
	r.data[t] = v
	return v
}

// NewRequest converts an AdmissionRequest: `header` is its JSON without object and oldObject (they
// may be there; they are replaced), `object`/`oldObject` the raw JSON of those fields (empty: none),
// `namespace` the JSON of the request's Namespace object (empty: none).
func NewRequest(header, object, oldObject, namespace []byte) (*Request, error) {
	return readRequest(header, object, oldObject, namespace, nil)
}

// NewRecycledRequest is NewRequest with object and oldObject decoded into recycled maps, which Done
// gives back for later requests: nothing may refer to the request's values after Done (its
// decisions are strings; what is remembered across requests holds none of its maps: detached).
// About a third of what deciding a webhook's request allocates is these maps.
func NewRecycledRequest(header, object, oldObject, namespace []byte) (*Request, error) {
	maps := NewMaps()
	r, err := readRequest(header, object, oldObject, namespace, maps)
	if err != nil {
		maps.Recycle()
		return nil, err
	}
	return r, nil
}

func readRequest(header, object, oldObject, namespace []byte, maps *Maps) (*Request, error) {
	req, err := readHeader(header) // json.Unmarshal's result, without its reflection (header.go)
	if err != nil {
		return nil, fmt.Errorf("cannot read the admission request: %w", err)
	}
	req.Object = runtime.RawExtension{Raw: object}
	req.OldObject = runtime.RawExtension{Raw: oldObject}
	var ns *convertedNamespace
	if len(namespace) != 0 && string(namespace) != "null" {
		ns = namespaces.convert(namespace)
	}
	return newRequest(req, ns, maps)
}

// convertedNamespace is a request's Namespace as the driver converts it and as CEL sees it.
type convertedNamespace struct {
	namespace *corev1.Namespace // nil: the driver could not read it and goes on without it
	value     any               // objectToResolveVal(CreateNamespaceObject(namespace))
	err       error             // why value could not be made (reported where Validate would)
}

// namespaceCache remembers the conversions of the last Namespace objects seen, by their JSON: the
// requests of one namespace carry the same Namespace, and converting it (JSON into a Namespace, then
// Kubernetes' unstructured conversion) costs a fifth of a request's conversion. The converted values
// are shared by the requests (nothing changes them: CEL values are read-only).
type namespaceCache struct {
	mu      sync.Mutex
	entries map[string]*convertedNamespace
}

// namespaceCacheSize bounds the cache (it is emptied when full).
const namespaceCacheSize = 512

var namespaces = &namespaceCache{entries: map[string]*convertedNamespace{}}

func (c *namespaceCache) convert(data []byte) *convertedNamespace {
	c.mu.Lock()
	found := c.entries[string(data)]
	c.mu.Unlock()
	if found != nil {
		return found
	}
	converted := convertNamespace(data)
	c.mu.Lock()
	if len(c.entries) >= namespaceCacheSize {
		clear(c.entries)
	}
	c.entries[string(data)] = converted
	c.mu.Unlock()
	return converted
}

func convertNamespace(data []byte) *convertedNamespace {
	// driver.go mapToNamespace: json.Marshal of the map, then json.Unmarshal into a Namespace
	ns := &corev1.Namespace{}
	if err := json.Unmarshal(data, ns); err != nil {
		return &convertedNamespace{} // the driver logs the error and continues without the namespace
	}
	return namespaceValue(ns)
}

// namespaceValue is validator.go's cel.CreateNamespaceObject(namespace), then newActivation's
// objectToResolveVal.
func namespaceValue(ns *corev1.Namespace) *convertedNamespace {
	value, err := objectToResolveVal(plugincel.CreateNamespaceObject(ns))
	if err != nil {
		err = fmt.Errorf("failed to prepare namespace variable for evaluation: %w", err)
	}
	return &convertedNamespace{namespace: ns, value: value, err: err}
}

// NewRequestFrom converts a decoded AdmissionRequest as Driver.Query does (it is modified: its object
// is unset on DELETE).
func NewRequestFrom(req *admissionv1.AdmissionRequest, ns *corev1.Namespace) (*Request, error) {
	var converted *convertedNamespace
	if ns != nil {
		converted = namespaceValue(ns)
	}
	return newRequest(req, converted, nil)
}

func newRequest(req *admissionv1.AdmissionRequest, converted *convertedNamespace, maps *Maps) (*Request, error) {
	var ns *corev1.Namespace
	if converted != nil {
		ns = converted.namespace
	}
	// driver.go Query: "we must be sure that Object is unset on DELETE"
	if req.Operation == admissionv1.Delete {
		req.Object = runtime.RawExtension{}
	}
	attr, err := versionedAttributes(req, maps)
	if err != nil {
		return nil, err
	}
	r := &Request{Admission: req, Attr: attr, Namespace: ns, memo: memos.Get().(*memo), maps: maps}
	// the request variable: made when first read (requestValue)
	if r.object, err = objectToResolveVal(attr.VersionedObject); err != nil {
		return nil, fmt.Errorf("failed to prepare object variable for evaluation: %w", err)
	}
	if r.oldObject, err = objectToResolveVal(attr.VersionedOldObject); err != nil {
		return nil, fmt.Errorf("failed to prepare oldObject variable for evaluation: %w", err)
	}
	r.values = newObjectValues()
	r.object, r.oldObject = r.values.root(r.object), r.values.root(r.oldObject)
	if ns != nil {
		if converted.err != nil {
			return nil, converted.err
		}
		r.namespace = converted.value
	}
	return r, nil
}

// versionedAttributes is transform.RequestToVersionedAttributes (as Driver.Query calls it), with the
// object and the old object decoded by decodeObject when it can (fastjson.go): the same values, their
// small maps recycled ones recorded in maps (nil: new ones).
func versionedAttributes(req *admissionv1.AdmissionRequest, maps *Maps) (*admission.VersionedAttributes, error) {
	object, ok := fastUnstructured(req.Object.Raw, maps)
	oldObject, oldOK := fastUnstructured(req.OldObject.Raw, maps)
	if !ok || !oldOK {
		return transform.RequestToVersionedAttributes(req)
	}
	raw, oldRaw := req.Object, req.OldObject
	req.Object, req.OldObject = runtime.RawExtension{}, runtime.RawExtension{}
	attr, err := transform.RequestToVersionedAttributes(req) // the options, the request's fields
	req.Object, req.OldObject = raw, oldRaw
	if err != nil {
		return nil, err
	}
	if object != nil {
		attr.VersionedObject = object
	}
	if oldObject != nil {
		attr.VersionedOldObject = oldObject
	}
	return attr, nil
}

// DecodeUnstructuredInto is the object (&unstructured.Unstructured{}).UnmarshalJSON(raw) makes, when
// decodeObject reads raw (fastjson.go: the same values, faster); false otherwise: the caller decodes it
// so (for the object, or for its error). Its small maps are recycled ones, recorded in maps (nil: new
// ones), for the caller to give back (maps.Recycle) once nothing refers to the object.
func DecodeUnstructuredInto(raw []byte, maps *Maps) (*unstructured.Unstructured, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	return fastUnstructured(raw, maps)
}

// fastUnstructured is json.Unmarshal of raw into an *unstructured.Unstructured (NewWrapper) when
// decodeObject can decode it and it names its kind (UnstructuredJSONScheme.Decode requires one);
// false otherwise (the caller decodes it as Gatekeeper does).
func fastUnstructured(raw []byte, maps *Maps) (*unstructured.Unstructured, bool) {
	if len(raw) == 0 {
		return nil, true
	}
	m, err := decodeObjectInto(raw, maps)
	if err != nil {
		return nil, false
	}
	if kind, _ := m["kind"].(string); kind == "" {
		return nil, false
	}
	return &unstructured.Unstructured{Object: m}, true
}

// objectToResolveVal is k8s.io/apiserver pkg/admission/plugin/cel/condition.go objectToResolveVal.
func objectToResolveVal(r runtime.Object) (any, error) {
	if isNil(r) {
		return nil, nil
	}
	v, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func isNil(r runtime.Object) bool {
	return r == nil || reflect.ValueOf(r).IsNil()
}
