package mutation

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Gatekeeper's webhook answers a mutated object with controller-runtime's PatchResponseFromRaw(the
// request's object, the mutated object's JSON): gomodules.xyz/jsonpatch/v2's CreatePatch decodes both
// documents with encoding/json and compares them. The object was decoded already (to mutate it), so
// celkeeper compares the decoded documents instead, as CreatePatch compares them once decoded: both
// read as encoding/json decodes their JSON (numbers float64: the request's object as Kubernetes
// decoded it holds int64s, JSON's own values otherwise). Where the mutated object holds a value whose
// JSON round trip is not that reading (a Go type JSON has no form for, a non-finite number, a string
// that is not UTF-8), the patch is made the upstream way, from the JSON.

// patchResponse is admission.PatchResponseFromRaw(raw, obj's JSON), `before` being raw as Kubernetes
// decodes it into unstructured content when `decoded`; with `object`, also obj's JSON (when there is
// a patch).
func patchResponse(raw []byte, before any, decoded bool, obj *unstructured.Unstructured, object bool) (admission.Response, []byte, error) {
	if decoded {
		if patches, ok := createPatch(before, obj.Object); ok {
			return patchedResponse(patches, obj, object)
		}
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return admission.Response{}, nil, err
	}
	return admission.PatchResponseFromRaw(raw, data), data, nil
}

// patchedResponse is PatchResponseFromRaw's answer with `patches`.
func patchedResponse(patches []jsonpatch.Operation, obj *unstructured.Unstructured, object bool) (admission.Response, []byte, error) {
	var data []byte
	if object && len(patches) > 0 {
		var err error
		if data, err = obj.MarshalJSON(); err != nil {
			return admission.Response{}, nil, err
		}
	}
	resp := admission.Response{Patches: patches, AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}}
	if len(patches) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	return resp, data, nil
}

// jsonDocument is unstructured content (maps, slices, strings, int64 and float64 numbers, bools, nil)
// as encoding/json decodes its JSON into an interface{}: a copy, numbers float64 (the int64 a JSON
// integer decodes to converts to the float64 its literal parses to: both round to nearest), typed nil
// maps and slices nil. ok false: a value whose JSON does not decode to it (another Go type, a
// non-finite number, a string or key that is not UTF-8).
func jsonDocument(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return nil, true
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			if !utf8.ValidString(k) {
				return nil, false
			}
			c, ok := jsonDocument(e)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	case []any:
		if v == nil {
			return nil, true
		}
		out := make([]any, len(v))
		for i, e := range v {
			c, ok := jsonDocument(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case nil, bool:
		return v, true
	case string:
		return v, utf8.ValidString(v)
	case float64:
		return v, !math.IsInf(v, 0) && !math.IsNaN(v)
	case int64:
		return float64(v), true
	}
	return nil, false
}

// createPatch is jsonpatch.CreatePatch(a's JSON, b's JSON) for `a` a JSON document as Kubernetes decodes
// it into unstructured content (maps, slices, strings, int64 and finite float64 numbers, booleans,
// nil; UTF-8 strings) and `b` unstructured content; ok false: b holds a value jsonDocument refuses.
func createPatch(a, b any) ([]jsonpatch.Operation, bool) {
	d := differ{patch: []jsonpatch.Operation{}, ok: true}
	d.values(a, b)
	return d.patch, d.ok
}

// differ is jsonpatch v2.4.0's handleValues, diff and matchesValue (gomodules.xyz/jsonpatch, Apache-2.0),
// reading b as encoding/json would decode its JSON; the path of the values compared is made only for
// an operation.
type differ struct {
	patch []jsonpatch.Operation
	ok    bool
	at    []string // the path's keys and indexes
}

// path is makePath's path of the values compared (makePath: fmt.Sprintf("%v") of a key, of an index,
// RFC 6901's escapes; an index has none to escape).
func (d *differ) path() string {
	var b strings.Builder
	for _, key := range d.at {
		b.WriteByte('/')
		b.WriteString(rfc6901Encoder.Replace(key))
	}
	return b.String()
}

// op appends an operation at the path.
func (d *differ) op(op string, value any) {
	d.patch = append(d.patch, jsonpatch.NewOperation(op, d.path(), value))
}

// emit appends an operation whose value is b's value `v` (its jsonDocument).
func (d *differ) emit(op string, v any) {
	doc, ok := jsonDocument(v)
	if !ok {
		d.ok = false
		return
	}
	d.op(op, doc)
}

// values is handleValues at the path, b's value read as encoding/json would decode its JSON: the
// same type (the JSON's: object, array, string, number, boolean, null) compares, another replaces.
func (d *differ) values(av, bv any) {
	switch b := bv.(type) {
	case map[string]any:
		if b == nil { // null
			d.null(av)
			return
		}
		if a, ok := av.(map[string]any); ok {
			d.diff(a, b)
			return
		}
	case []any:
		if b == nil { // null
			d.null(av)
			return
		}
		if a, ok := av.([]any); ok {
			d.list(a, b)
			return
		}
	case nil:
		d.null(av)
		return
	case string:
		if a, ok := av.(string); ok {
			if a != b { // b, unlike a, may not be UTF-8: not JSON's then
				if !utf8.ValidString(b) {
					d.ok = false
					return
				}
				d.op("replace", b)
			}
			return
		}
	case int64:
		if a, ok := number(av); ok {
			if a != float64(b) {
				d.op("replace", float64(b))
			}
			return
		}
	case float64:
		if math.IsInf(b, 0) || math.IsNaN(b) {
			d.ok = false
			return
		}
		if a, ok := number(av); ok {
			if a != b {
				d.op("replace", b)
			}
			return
		}
	case bool:
		if a, ok := av.(bool); ok {
			if a != b {
				d.op("replace", b)
			}
			return
		}
	default:
		d.ok = false
		return
	}
	// If types have changed, replace completely (preserves null in destination)
	d.emit("replace", bv)
}

// number is a's number as encoding/json decodes it (float64: the int64 of a JSON integer converts to the
// float64 its literal parses to, both rounding to nearest, as jsonDocument converts it).
func number(av any) (float64, bool) {
	switch a := av.(type) {
	case float64:
		return a, true
	case int64:
		return float64(a), true
	}
	return 0, false
}

// null is handleValues with b null: nothing when a is null too, else a replace by null.
func (d *differ) null(av any) {
	if av != nil {
		d.op("replace", nil)
	}
}

// list is handleValues of two arrays.
func (d *differ) list(at, bt []any) {
	n := min(len(at), len(bt))
	for i := len(at) - 1; i >= n; i-- {
		d.enter(strconv.Itoa(i))
		d.op("remove", nil)
		d.leave()
	}
	for i := n; i < len(bt) && d.ok; i++ {
		d.enter(strconv.Itoa(i))
		d.emit("add", bt[i])
		d.leave()
	}
	for i := 0; i < n && d.ok; i++ {
		d.enter(strconv.Itoa(i))
		d.values(at[i], bt[i])
		d.leave()
	}
}

// diff is diff at the path.
func (d *differ) diff(a, b map[string]any) {
	for key, bv := range b {
		av, ok := a[key]
		if !ok && !utf8.ValidString(key) { // a's keys are UTF-8
			d.ok = false
			return
		}
		d.enter(key)
		if !ok {
			d.emit("add", bv)
		} else {
			d.values(av, bv)
		}
		d.leave()
		if !d.ok {
			return
		}
	}
	for key := range a {
		if _, found := b[key]; !found {
			d.enter(key)
			d.op("remove", nil)
			d.leave()
		}
	}
}

func (d *differ) enter(key string) { d.at = append(d.at, key) }
func (d *differ) leave()           { d.at = d.at[:len(d.at)-1] }

var rfc6901Encoder = strings.NewReplacer("~", "~0", "/", "~1")
