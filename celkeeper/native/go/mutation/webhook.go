package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	gkmutation "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	k8serrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"celkeeper.local/native/k8scel"
)

// Request is what Gatekeeper's mutation webhook works on: the AdmissionRequest, and the Namespace it
// reads from the cluster for a namespaced request (its cache, then the API server).
type Request struct {
	Request admissionv1.AdmissionRequest `json:"request"`
	// Namespace is the request's Namespace object, as the cluster has it; nil when it does not exist.
	Namespace *corev1.Namespace `json:"namespace"`
	// NoNamespace: a namespace the request names but that is not given is mutated without its
	// Namespace (no cluster to read it from: the offline tools) rather than refused with the API
	// server's not-found error, Gatekeeper's answer in a cluster. A mutator whose match needs it then
	// fails with Gatekeeper's error.
	NoNamespace bool `json:"noNamespace"`
	// MutationID is the mutation's id (gatekeeper.sh/mutation-id, with Options.Annotations) instead of
	// a random UUID: for tests.
	MutationID string `json:"mutationID"`
	// Explain: also say which mutators applied in which iteration.
	Explain bool `json:"explain"`
	// ResponseOnly: the AdmissionResponse alone (a served request: Result's Patch and Object are left
	// out, the response carries the patch).
	ResponseOnly bool `json:"responseOnly"`
}

// Result is Gatekeeper's answer and what it is made of.
type Result struct {
	// Response is the AdmissionResponse Gatekeeper's webhook answers (controller-runtime's, completed).
	Response admissionv1.AdmissionResponse `json:"response"`
	// Mutated: the object changed (Response carries the JSONPatch).
	Mutated bool `json:"mutated"`
	// Patch is the JSONPatch as operations.
	Patch []jsonpatch.JsonPatchOperation `json:"patch"`
	// Object is the mutated object (JSON), when mutated.
	Object json.RawMessage `json:"object,omitempty"`
	// Error is the error Gatekeeper answers with (code 500), if any.
	Error string `json:"error,omitempty"`
	// Iterations, when explained: the mutators that changed the object in each iteration that did (as
	// Gatekeeper logs them with --log-mutations), "iteration_0" first.
	Iterations []Iteration `json:"iterations,omitempty"`
	// Trace, when explained and the object went to the mutators: what each mutator did (explain.go).
	Trace *Trace `json:"trace,omitempty"`

	// maps: the request's object's recycled maps, which Patch's values may be (Release)
	maps *k8scel.Maps
}

// Release gives back the maps the request's object was decoded into, once the Result has been encoded:
// nothing may read its Patch after. Once per Result (a Result not released leaves them to the collector).
func (r *Result) Release() {
	r.maps.Recycle()
	r.maps = nil
}

// Iteration is one pass over the mutators that changed the object.
type Iteration struct {
	Iteration string   `json:"iteration"`
	Mutators  []string `json:"mutators"`
}

// flagsMu guards Gatekeeper's two process-wide flags its System reads (--mutation-annotations,
// --log-mutations) and the systems' nextUUID: calls that find the flags as they need them and draw a
// random mutation id (a served request) run together under the read lock, as Gatekeeper's webhook runs
// its requests; a call that must change a flag, fix the id (tests) or capture the log (explain) runs
// alone under the write lock, and puts the random id back.
var flagsMu sync.RWMutex

// exclusive runs fn alone with the flags and the mutation id set for it.
func (s *System) exclusive(logging bool, id uuid.UUID, fn func()) {
	flagsMu.Lock()
	defer flagsMu.Unlock()
	*gkmutation.MutationAnnotationsEnabled = s.opts.Annotations
	*gkmutation.MutationLoggingEnabled = logging
	s.nextUUID = func() uuid.UUID { return id }
	defer func() { s.nextUUID = uuid.New }()
	fn()
}

// shared runs fn beside other calls when the flags are already as this system needs them (annotations
// as its options say, no logging); it reports false, having run nothing, otherwise.
func (s *System) shared(fn func()) bool {
	flagsMu.RLock()
	defer flagsMu.RUnlock()
	if *gkmutation.MutationAnnotationsEnabled != s.opts.Annotations || *gkmutation.MutationLoggingEnabled {
		return false
	}
	fn()
	return true
}

// Mutate answers an admission request exactly as Gatekeeper's mutation webhook does
// (pkg/webhook/mutation.go Handle and mutateRequest, then controller-runtime's Webhook.Handle completing
// the response), with the Namespace given instead of read from the cluster.
func (s *System) Mutate(in *Request) Result {
	var out Result
	if in.MutationID == "" && !in.Explain && s.shared(func() { out = s.mutate(in, nil) }) {
		return out
	}
	id := uuid.New()
	if in.MutationID != "" {
		parsed, err := uuid.Parse(in.MutationID)
		if err != nil {
			return Result{Error: "mutationID: " + err.Error()}
		}
		id = parsed
	}
	s.exclusive(in.Explain, id, func() {
		var captured *capture
		if in.Explain {
			captured = captures.start(id)
			defer captures.stop(id)
		}
		out = s.mutate(in, captured)
	})
	return out
}

// mutate is Mutate under flagsMu; `captured`: the log capture of an explained call.
func (s *System) mutate(in *Request, captured *capture) Result {
	req := admission.Request{AdmissionRequest: in.Request}
	out := &Result{}
	resp := s.handle(context.Background(), req, in, out)
	if err := resp.Complete(req); err != nil {
		resp = admission.Errored(http.StatusInternalServerError, errors.New("unable to encode response"))
		resp.UID = req.UID
	}
	out.Response = resp.AdmissionResponse
	out.Patch = resp.Patches
	if in.ResponseOnly {
		out.Patch, out.Object = nil, nil
	}
	if out.Patch == nil {
		out.Patch = []jsonpatch.JsonPatchOperation{}
	}
	if resp.Result != nil && resp.Result.Code == http.StatusInternalServerError {
		out.Error = resp.Result.Message
	}
	if captured != nil {
		out.Iterations = captured.iterations
	}
	return *out
}

// handle is pkg/webhook/mutation.go:105-142 (Handle): Gatekeeper's own requests, operations other than
// CREATE and UPDATE, Gatekeeper's resources and namespaces excluded by the Config are not mutated.
func (s *System) handle(ctx context.Context, req admission.Request, in *Request, out *Result) admission.Response {
	if s.opts.SelfUsername != "" && req.UserInfo.Username == s.opts.SelfUsername {
		return admission.Allowed("Gatekeeper does not self-manage")
	}
	if !match.IsSupportedMutationOperation(req.Operation) {
		return admission.Allowed("Mutating only on create or update")
	}
	if isGatekeeperResource(&req) {
		return admission.Allowed("Not mutating gatekeeper resources")
	}
	// skipExcludedNamespace (pkg/webhook/common.go:157-189); an error is logged there and the
	// namespace not excluded.
	if excluded, _ := s.skipExcludedNamespace(&req.AdmissionRequest); excluded {
		return admission.Allowed("Namespace is set to be ignored by Gatekeeper config")
	}
	return s.mutateRequest(ctx, &req, in, out)
}

// isGatekeeperResource is pkg/webhook/common.go:119-132.
func isGatekeeperResource(req *admission.Request) bool {
	switch req.Kind.Group {
	case "templates.gatekeeper.sh", "constraints.gatekeeper.sh", Group, "config.gatekeeper.sh",
		"externaldata.gatekeeper.sh", "expansion.gatekeeper.sh", "status.gatekeeper.sh":
		return true
	}
	return false
}

func (s *System) skipExcludedNamespace(req *admissionv1.AdmissionRequest) (bool, error) {
	if len(s.opts.Exclusions) == 0 {
		// no Config exclusions: Gatekeeper's excluder excludes nothing, and handle ignores a decode
		// error, so the object need not be decoded to know
		return false, nil
	}
	obj := &unstructured.Unstructured{}
	if _, _, err := deserializer.Decode(req.Object.Raw, nil, obj); err != nil {
		return false, err
	}
	obj.SetNamespace(req.Namespace)
	return s.excluder.IsNamespaceExcluded(process.Mutation, obj)
}

// mutateRequest is pkg/webhook/mutation.go:144-212, with the Namespace given (in.Namespace) where
// Gatekeeper gets it from its client.
func (s *System) mutateRequest(ctx context.Context, req *admission.Request, in *Request, out *Result) admission.Response {
	ns := &corev1.Namespace{}
	switch {
	case req.Kind.Kind == "Namespace" && req.Kind.Group == "":
		req.Namespace = ""
		obj, _, err := deserializer.Decode(req.Object.Raw, nil, &corev1.Namespace{})
		if err != nil {
			return admission.Errored(int32(http.StatusInternalServerError), err)
		}
		var ok bool
		ns, ok = obj.(*corev1.Namespace)
		if !ok {
			return admission.Errored(int32(http.StatusInternalServerError), errors.New("failed to cast namespace object"))
		}
	case req.Namespace != "":
		switch {
		case in.Namespace != nil:
			ns = in.Namespace.DeepCopy()
		case in.NoNamespace:
			ns = nil
		default:
			return admission.Errored(int32(http.StatusInternalServerError),
				k8serrors.NewNotFound(corev1.Resource("namespaces"), req.Namespace))
		}
	default:
		ns = nil
	}
	if !in.Explain { // explained, the trace keeps copies of the object: its maps are left to the collector
		out.maps = k8scel.NewMaps()
	}
	// obj.UnmarshalJSON's object, read faster, in recycled maps (given back by Release)
	obj, fast := k8scel.DecodeUnstructuredInto(req.Object.Raw, out.maps)
	if !fast {
		obj = &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
			return admission.Errored(int32(http.StatusInternalServerError), err)
		}
	}

	// the JSONPatch's original document is the request's object as decoded: the System's first pass
	// copies it before any mutator runs (MutateFrom), with the namespace set below, which `original`
	// puts back as it was
	original := originalOf(obj.Object)
	oldNS := obj.GetNamespace()
	obj.SetNamespace(req.Namespace)

	mutable := &mutationtypes.Mutable{
		Object:    obj,
		Namespace: ns,
		Username:  req.UserInfo.Username,
		Source:    mutationtypes.SourceTypeOriginal,
		Operation: req.Operation,
	}
	if in.Explain {
		traced := *mutable
		traced.Object = obj.DeepCopy()
		out.Trace = s.trace(&traced)
	}
	mutated, first, err := s.gk.MutateFrom(ctx, mutable)
	if err != nil {
		return admission.Errored(int32(http.StatusInternalServerError), err)
	}
	if !mutated {
		return admission.Allowed("Resource was not mutated")
	}

	mutable.Object.SetNamespace(oldNS)
	var before any
	decoded := first != nil && original(first.Object)
	if decoded {
		before = first.Object
	}

	resp, newJSON, err := patchResponse(req.Object.Raw, before, decoded, mutable.Object, !in.ResponseOnly)
	gkmutation.RecycleCopy(first) // the patch holds nothing of it (its values are the mutated object's)
	if err != nil {
		return admission.Errored(int32(http.StatusInternalServerError), err)
	}
	if len(resp.Patches) > 0 {
		out.Mutated = true
		out.Object = newJSON
	}
	return resp
}

// RawObject is raw.UnmarshalJSON(data)'s RawExtension without its copy of data: for a request mutated
// while data lives (nothing of the answer refers to the request's JSON).
func RawObject(raw runtime.RawExtension, data []byte) runtime.RawExtension {
	if !bytes.Equal(data, []byte("null")) {
		raw.Raw = data
	}
	return raw
}

// originalOf returns what makes a copy of `object`, made after SetNamespace, `object` as it was: its
// metadata.namespace as it was (or no metadata, when SetNamespace made it). false: the copy is not
// what it should be (the caller then makes the patch from the JSON).
func originalOf(object map[string]any) func(copied map[string]any) bool {
	meta, hasMeta := object["metadata"]
	m, isMap := meta.(map[string]any)
	switch {
	case !hasMeta: // SetNamespace made metadata to hold a namespace, or left none
		return func(copied map[string]any) bool {
			delete(copied, "metadata")
			return true
		}
	case !isMap: // SetNamespace left it as it was (it sets only within a map)
		return func(map[string]any) bool { return true }
	}
	namespace, hasNamespace := m["namespace"]
	return func(copied map[string]any) bool {
		cm, ok := copied["metadata"].(map[string]any)
		if !ok {
			return false
		}
		if hasNamespace {
			cm["namespace"] = namespace
		} else {
			delete(cm, "namespace")
		}
		return true
	}
}

// ObjectRequest is an object mutated outside a webhook request: a generated object (Gatekeeper's
// expansion System mutates each with source Generated, pkg/expansion/system.go expand), or an object
// gator's expander mutates before expanding it (pkg/gator/expand/expand.go Expand: source Original).
type ObjectRequest struct {
	Object    json.RawMessage   `json:"object"`
	Namespace *corev1.Namespace `json:"namespace"`
	Username  string            `json:"username"`
	Source    string            `json:"source"`
	Operation string            `json:"operation"`
}

// ObjectResult is the object as Gatekeeper's System leaves it, or its error.
type ObjectResult struct {
	Object  json.RawMessage `json:"object,omitempty"`
	Mutated bool            `json:"mutated"`
	Error   string          `json:"error,omitempty"`
}

// MutateObject runs the System on an object as Gatekeeper's expansion does: the Mutable holds the object
// (its namespace as it is), the Namespace, the user, the source and the operation (empty outside a
// request: only mutators applying to every operation match).
func (s *System) MutateObject(in *ObjectRequest) ObjectResult {
	var out ObjectResult
	if !s.shared(func() { out = s.mutateObject(in) }) {
		s.exclusive(false, uuid.New(), func() { out = s.mutateObject(in) })
	}
	return out
}

func (s *System) mutateObject(in *ObjectRequest) ObjectResult {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(in.Object); err != nil {
		return ObjectResult{Error: "the object to mutate: " + err.Error()}
	}
	source := mutationtypes.SourceType(in.Source)
	if source == "" {
		source = mutationtypes.SourceTypeOriginal
	}
	mutated, err := s.gk.Mutate(context.Background(), &mutationtypes.Mutable{
		Object:    obj,
		Namespace: in.Namespace,
		Username:  in.Username,
		Source:    source,
		Operation: admissionv1.Operation(in.Operation),
	})
	if err != nil {
		return ObjectResult{Error: err.Error()}
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return ObjectResult{Error: err.Error()}
	}
	return ObjectResult{Object: data, Mutated: mutated}
}
