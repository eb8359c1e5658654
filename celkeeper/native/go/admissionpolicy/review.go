package admissionpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/admission"
	admissioncel "k8s.io/apiserver/pkg/admission/plugin/cel"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// Request is one admission request: what an AdmissionReview's request holds (kind, resource, subResource,
// name and namespace are worked out from the object when not given).
type Request struct {
	Operation   string                       `json:"operation"`
	Object      json.RawMessage              `json:"object,omitempty"`
	OldObject   json.RawMessage              `json:"oldObject,omitempty"`
	Namespace   string                       `json:"namespace,omitempty"`
	Name        string                       `json:"name,omitempty"`
	SubResource string                       `json:"subResource,omitempty"`
	Kind        *metav1.GroupVersionKind     `json:"kind,omitempty"`
	Resource    *metav1.GroupVersionResource `json:"resource,omitempty"`
	UserInfo    authenticationv1.UserInfo    `json:"userInfo"`
	DryRun      bool                         `json:"dryRun,omitempty"`
	Options     json.RawMessage              `json:"options,omitempty"`
}

// Response is what the API server answers: allowed or the status error it returns, the warnings it
// sends (Warning headers, as kubectl prints them), the audit annotations it records, and the object as
// admission left it (set when a mutating policy changed it).
type Response struct {
	Allowed          bool              `json:"allowed"`
	Status           *metav1.Status    `json:"status,omitempty"`
	Warnings         []string          `json:"warnings"`
	AuditAnnotations map[string]string `json:"auditAnnotations"`
	Mutated          bool              `json:"mutated"`
	Object           json.RawMessage   `json:"object,omitempty"`
	// when mutated: the object as the API server decoded it (defaulted), before admission
	Decoded json.RawMessage `json:"decoded,omitempty"`
	// the Namespace the request was evaluated with when none was given (created as the API server
	// creates a Namespace without labels)
	AssumedNamespace string `json:"assumedNamespace,omitempty"`
	// the kind's resource was guessed (a kind neither built in nor defined by a CRD given)
	GuessedResource string `json:"guessedResource,omitempty"`
	// the validating policies were called (the mutating ones allowed the request)
	validated bool
}

// RequestError is a request that cannot be reviewed (as the API server would refuse to decode it).
type RequestError struct{ Message string }

func (e *RequestError) Error() string { return e.Message }

func requestErrorf(format string, args ...any) error {
	return &RequestError{Message: fmt.Sprintf(format, args...)}
}

// Review answers a request as the API server's admission chain would: the mutating policies (with
// reinvocation), then the validating ones on the object they left.
func (s *Set) Review(ctx context.Context, req Request) (*Response, error) {
	p, err := s.prepare(ctx, req)
	if err != nil || p.attrs == nil {
		return p.resp, err
	}
	return s.answerWith(ctx, p, true)
}

// prepared is a request made ready for admission: its attributes as the API server's handler builds
// them (nil when the handler answers before admission: resp holds that answer).
type prepared struct {
	attrs admission.Attributes
	gvk   schema.GroupVersionKind
	resp  *Response
}

// prepare decodes a request and builds its admission attributes as the API server's handler does.
func (s *Set) prepare(ctx context.Context, req Request) (prepared, error) {
	op := admission.Operation(strings.ToUpper(req.Operation))
	if op == "" {
		op = admission.Create
	}
	switch op {
	case admission.Create, admission.Update, admission.Delete, admission.Connect:
	default:
		return prepared{}, requestErrorf("operation must be one of CREATE, UPDATE, DELETE, CONNECT, not %q", req.Operation)
	}
	source := req.Object
	if len(source) == 0 || bytes.Equal(bytes.TrimSpace(source), []byte("null")) {
		source = req.OldObject
	}
	var gvk schema.GroupVersionKind
	hasSource := len(source) > 0 && !bytes.Equal(bytes.TrimSpace(source), []byte("null"))
	if hasSource {
		h, err := readHeader(source)
		if err != nil {
			return prepared{}, err
		}
		gvk = h.gvk
		if req.Name == "" {
			req.Name = h.name
		}
		if req.Namespace == "" {
			req.Namespace = h.namespace
		}
	}
	if req.Kind != nil && req.Kind.Kind != "" {
		gvk = schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	}
	if gvk.Kind == "" {
		return prepared{}, requestErrorf("the request has no object and no kind")
	}
	resp := &Response{Warnings: []string{}, AuditAnnotations: map[string]string{}}
	var gvr schema.GroupVersionResource
	var namespaced bool
	if req.Resource != nil && req.Resource.Resource != "" {
		gvr = schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
		if m, ok := s.resources.lookup(gvk); ok {
			namespaced = m.namespaced
		} else {
			namespaced = req.Namespace != ""
		}
	} else {
		m, ok := s.resources.lookup(gvk)
		if !ok {
			m = s.resources.Guess(gvk, req.Namespace != "")
		}
		if m.guessed {
			resp.GuessedResource = m.resource.Resource
		}
		gvr, namespaced = m.resource, m.namespaced
	}
	if namespaced && req.Namespace == "" {
		req.Namespace = metav1.NamespaceDefault // kubectl's namespace when none is set
	}
	if !namespaced {
		req.Namespace = ""
	}

	obj, err := s.decodeObject(req.Object, gvk)
	if err != nil {
		return prepared{}, notAnObject(source, "object: %v", err)
	}
	oldObj, err := s.decodeObject(req.OldObject, gvk)
	if err != nil {
		return prepared{}, notAnObject(source, "oldObject: %v", err)
	}
	if op == admission.Update && oldObj == nil {
		return prepared{}, requestErrorf("an UPDATE needs the oldObject")
	}
	if op == admission.Delete && oldObj == nil {
		return prepared{}, requestErrorf("a DELETE needs the oldObject")
	}
	if op == admission.Create && obj == nil {
		return prepared{}, requestErrorf("a CREATE needs the object")
	}
	// What the API server's handlers do before admission (k8s.io/apiserver/pkg/endpoints/handlers,
	// create.go and update.go): a Namespace's requests are in the namespace of its own name, the system
	// fields of a created object are wiped, and the object's namespace is the request's.
	if gvr == namespacesResource {
		req.Namespace = req.Name
	}
	if obj != nil {
		if m, ok := obj.(metav1.Object); ok {
			if op == admission.Create {
				rest.WipeObjectMetaSystemFields(m)
			}
			if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(req.Namespace, gvr), m); err != nil {
				resp.Status = responsewriters.ErrorToAPIStatus(err)
				return prepared{resp: resp}, nil
			}
		}
	}
	options, err := decodeOptions(req.Options, op)
	if err != nil {
		return prepared{}, requestErrorf("options: %v", err)
	}
	if namespaced && req.Namespace != "" {
		if assumed, err := s.ensureNamespace(ctx, req.Namespace); err != nil {
			return prepared{}, err
		} else if assumed {
			resp.AssumedNamespace = req.Namespace
		}
	}

	userInfo := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups}
	if len(req.UserInfo.Extra) > 0 {
		userInfo.Extra = map[string][]string{}
		for k, v := range req.UserInfo.Extra {
			userInfo.Extra[k] = v
		}
	}
	attrs := admission.NewAttributesRecord(obj, oldObj, gvk, req.Namespace, req.Name, gvr, req.SubResource, op, options, req.DryRun, userInfo)

	return prepared{attrs: attrs, gvk: gvk, resp: resp}, nil
}

// header is what a request's object says of itself: its kind, name and namespace.
type header struct {
	gvk             schema.GroupVersionKind
	name, namespace string
}

// readHeader is the header of an object given as JSON: its apiVersion, kind and metadata's name and
// namespace as unstructured.Unstructured reads them, or the error its UnmarshalJSON gives. Those fields
// are read alone (case-sensitive, as Unstructured's map keys), so that a built-in kind's object is not
// decoded into maps only to be decoded again typed (decodeObject); a document they cannot be read from as
// strings, or without a kind, is read whole as before.
func readHeader(source []byte) (header, error) {
	var fields struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := utiljson.Unmarshal(source, &fields); err == nil && fields.Kind != "" {
		h := header{name: fields.Metadata.Name, namespace: fields.Metadata.Namespace}
		if gv, err := schema.ParseGroupVersion(fields.APIVersion); err == nil { // as Unstructured.GroupVersionKind
			h.gvk = gv.WithKind(fields.Kind)
		}
		return h, nil
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(source); err != nil {
		return header{}, requestErrorf("the object is not a Kubernetes object: %v", err)
	}
	return header{gvk: u.GroupVersionKind(), name: u.GetName(), namespace: u.GetNamespace()}, nil
}

// notAnObject is the error of an object that cannot be decoded: the one readHeader would have given had it
// read the request's source object whole (unstructured.Unstructured's), else format's.
func notAnObject(source []byte, format string, err error) error {
	if len(source) > 0 {
		if perr := (&unstructured.Unstructured{}).UnmarshalJSON(source); perr != nil {
			return requestErrorf("the object is not a Kubernetes object: %v", perr)
		}
	}
	return requestErrorf(format, err)
}

// answerWith runs the admission chain on a prepared request: the API server's answer (with validate
// false, the mutating chain's alone).
func (s *Set) answerWith(ctx context.Context, p prepared, validate bool) (*Response, error) {
	attrs, gvk, resp := p.attrs, p.gvk, p.resp
	// Only a mutating policy (or the webhook, when not validating) can change the object: without one in
	// the set the mutating plugin has no hook to call, and validation may not change it, so it is not
	// encoded to be compared.
	mayChange := s.mutating || !validate
	var before []byte
	if mayChange {
		var err error
		if before, err = s.encode(attrs.GetObject(), gvk); err != nil {
			return nil, err
		}
	}
	admitErr, warnings, annotations, validated := s.run(ctx, attrs, validate)
	resp.validated = validated
	resp.Warnings = append(resp.Warnings, warnings...)
	for k, v := range annotations {
		resp.AuditAnnotations[k] = v
	}
	if admitErr != nil {
		resp.Status = responsewriters.ErrorToAPIStatus(admitErr)
		return resp, nil
	}
	resp.Allowed = true
	if !mayChange {
		return resp, nil
	}
	after, err := s.encode(attrs.GetObject(), gvk)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		resp.Mutated = true
		resp.Object = after
		resp.Decoded = before
	}
	return resp, nil
}

// run calls the chain as the API server's handlers do (admission.WithAudit around it, the warning
// recorder of its filter chain in the context): Admit, then Validate when Admit allowed. The context
// carries an activation cache for the request: the policies' `request` and `namespaceObject` variables
// are converted to unstructured once per request, not once per policy (celkeeper's copy of the plugin's
// activation.go, docs/known-issues.md).
func (s *Set) run(parent context.Context, attrs admission.Attributes, validate bool) (error, []string, map[string]string, bool) {
	var admitErr error
	validated := false
	var annotations map[string]string
	handler := filters.WithWarningRecorder(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := admissioncel.WithActivationCache(audit.WithAuditContext(r.Context()), s.namespaceMaps)
		ac := audit.AuditContextFrom(ctx)
		_ = ac.Init(audit.RequestAuditConfig{Level: auditinternal.LevelMetadata}, nil)
		if m, ok := s.chain.(admission.MutationInterface); ok && m.Handles(attrs.GetOperation()) {
			admitErr = m.Admit(ctx, attrs, s.objects)
		}
		if admitErr == nil && validate {
			if v, ok := s.chain.(admission.ValidationInterface); ok && v.Handles(attrs.GetOperation()) {
				validated = true
				admitErr = v.Validate(ctx, attrs, s.resources.validatingObjectInterfaces())
			}
		}
		annotations = ac.GetEventAnnotations()
	}))
	rec := httptest.NewRecorder()
	r, err := http.NewRequestWithContext(parent, http.MethodPost, "/", http.NoBody)
	if err != nil {
		return err, nil, nil, false
	}
	handler.ServeHTTP(rec, r)
	var warnings []string
	headers, _ := utilnet.ParseWarningHeaders(rec.Header().Values("Warning"))
	for _, h := range headers {
		warnings = append(warnings, h.Text)
	}
	return admitErr, warnings, annotations, validated
}

// decodeObject decodes a request's object as the API server's handler does: a built-in kind strictly,
// defaulted, to its internal version; a custom one as unstructured.
func (s *Set) decodeObject(data json.RawMessage, gvk schema.GroupVersionKind) (runtime.Object, error) {
	if len(data) == 0 || bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil
	}
	if IsBuiltin(gvk) {
		obj, _, err := strictCodecs.UniversalDecoder().Decode(data, nil, nil)
		return obj, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return u, nil
}

var namespacesResource = corev1.SchemeGroupVersion.WithResource("namespaces")

// encode writes an object (internal or unstructured) in the request's version, as the API server would
// return it.
func (s *Set) encode(obj runtime.Object, gvk schema.GroupVersionKind) ([]byte, error) {
	if obj == nil {
		return nil, nil
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.MarshalJSON()
	}
	out, err := legacyscheme.Scheme.ConvertToVersion(obj, gvk.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("cannot convert the object to %s: %w", gvk.GroupVersion(), err)
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return json.Marshal(out)
}

// decodeOptions is the request's options object (CreateOptions, UpdateOptions, DeleteOptions); by
// default the empty one of the operation, as an API client that sets none sends.
func decodeOptions(data json.RawMessage, op admission.Operation) (runtime.Object, error) {
	var obj runtime.Object
	switch op {
	case admission.Create:
		obj = &metav1.CreateOptions{}
	case admission.Update:
		obj = &metav1.UpdateOptions{}
	case admission.Delete:
		obj = &metav1.DeleteOptions{}
	default:
		return nil, nil
	}
	if len(data) > 0 && !bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		if err := json.Unmarshal(data, obj); err != nil {
			return nil, err
		}
	}
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
	obj.GetObjectKind().SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind(kind))
	return obj, nil
}

// ensureNamespace makes sure the request's Namespace exists, as it must in the API server: one not
// given is created as the API server creates a Namespace without labels (true: it was assumed).
func (s *Set) ensureNamespace(ctx context.Context, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namespaces[name] {
		return false, nil
	}
	data, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	obj, err := decodeBuiltin(data, corev1.SchemeGroupVersion)
	if err != nil {
		return false, err
	}
	ns := obj.(*corev1.Namespace)
	prepareNamespace(ns)
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	s.namespaces[name] = true
	return true, nil
}

// offlineAuthorizer answers the policies' `authorizer` checks offline, where no authorizer is known:
// no opinion (the check is not allowed), with a reason saying so.
type offlineAuthorizer struct{}

func (offlineAuthorizer) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "celkeeper evaluates offline: no authorizer", nil
}

var _ = warning.AddWarning
