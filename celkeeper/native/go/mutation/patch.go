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
// celkeeper compares the decoded documents instead, as CreatePatch compares them once decoded: `before`
// converted to what encoding/json decodes (numbers float64), the mutated object read as encoding/json
// would decode its JSON. Where the mutated object holds a value whose JSON round trip is not that
// reading (a Go type JSON has no form for, a non-finite number, a string that is not UTF-8), the
// patch is made the upstream way, from the JSON.

// patchResponse is admission.PatchResponseFromRaw(raw, obj's JSON), `before` being raw decoded when
// `decoded` (jsonDocument of the unstructured content); with `object`, also obj's JSON (when there is a
// patch).
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

// jsonDocument is decoded unstructured content (maps, slices, strings, int64 and float64 numbers, bools,
// nil) as encoding/json decodes its JSON into an interface{}: a copy, numbers float64 (the int64 a JSON
// integer decodes to converts to the float64 its literal parses to: both round to nearest).
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
	default:
		return jsonScalar(v)
	}
}

// jsonScalar is a value as encoding/json decodes its JSON, maps and slices as they are (typed nil ones
// encode as null); ok false: its JSON does not decode to it.
func jsonScalar(v any) (any, bool) {
	switch v := v.(type) {
	case nil, bool:
		return v, true
	case string:
		return v, utf8.ValidString(v)
	case float64:
		return v, !math.IsInf(v, 0) && !math.IsNaN(v)
	case int64:
		return float64(v), true
	case map[string]any:
		if v == nil {
			return nil, true
		}
		return v, true
	case []any:
		if v == nil {
			return nil, true
		}
		return v, true
	}
	return nil, false
}

// createPatch is jsonpatch.CreatePatch(a's JSON, b's JSON) for `a` a jsonDocument and `b` unstructured
// content; ok false: b holds a value jsonScalar refuses.
func createPatch(a, b any) ([]jsonpatch.Operation, bool) {
	d := differ{patch: []jsonpatch.Operation{}, ok: true}
	d.values(a, b)
	return d.patch, d.ok
}

// differ is jsonpatch v2.4.0's handleValues, diff and matchesValue (gomodules.xyz/jsonpatch, Apache-2.0),
// reading b through jsonScalar; the path of the values compared is made only for an operation.
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

// sameType is reflect.TypeOf(a) == reflect.TypeOf(b) for encoding/json's decoded values.
func sameType(a, b any) bool {
	switch a.(type) {
	case nil:
		return b == nil
	case map[string]any:
		_, ok := b.(map[string]any)
		return ok
	case []any:
		_, ok := b.([]any)
		return ok
	case string:
		_, ok := b.(string)
		return ok
	case float64:
		_, ok := b.(float64)
		return ok
	case bool:
		_, ok := b.(bool)
		return ok
	}
	return false
}

// values is handleValues at the path.
func (d *differ) values(av, bRaw any) {
	bv, ok := jsonScalar(bRaw)
	if !ok {
		d.ok = false
		return
	}
	if av == nil && bv == nil {
		return
	}
	if !sameType(av, bv) {
		// If types have changed, replace completely (preserves null in destination)
		d.emit("replace", bv)
		return
	}
	switch at := av.(type) {
	case map[string]any:
		d.diff(at, bv.(map[string]any))
	case string, float64, bool:
		if at != bv { // matchesValue of two values of the same type
			d.op("replace", bv)
		}
	case []any:
		bt := bv.([]any)
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
}

// diff is diff at the path.
func (d *differ) diff(a, b map[string]any) {
	for key, bv := range b {
		if !utf8.ValidString(key) {
			d.ok = false
			return
		}
		d.enter(key)
		if av, ok := a[key]; !ok {
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
