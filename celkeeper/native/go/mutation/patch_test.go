package mutation

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// decodeUnstructured decodes a document as the webhook decodes the request's object.
func decodeUnstructured(t *testing.T, doc string) map[string]any {
	t.Helper()
	obj := unstructured.Unstructured{}
	if err := obj.UnmarshalJSON([]byte(doc)); err != nil {
		t.Fatal(err)
	}
	return obj.Object
}

// opsSet is a patch's operations as sorted JSON (CreatePatch's order follows Go's map order).
func opsSet(t *testing.T, ops []jsonpatch.Operation) []string {
	t.Helper()
	out, err := opsJSON(ops)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// opsJSON is opsSet for any goroutine: the error returned, not failed on.
func opsJSON(ops []jsonpatch.Operation) ([]string, error) {
	out := make([]string, 0, len(ops))
	for i := range ops {
		data, err := json.Marshal(&ops[i])
		if err != nil {
			return nil, err
		}
		out = append(out, string(data))
	}
	sort.Strings(out)
	return out, nil
}

// checkPatch compares createPatch on the decoded documents with CreatePatch on their JSON.
func checkPatch(t *testing.T, beforeJSON string, after map[string]any) {
	t.Helper()
	afterJSON, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jsonpatch.CreatePatch([]byte(beforeJSON), afterJSON)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := createPatch(decodeUnstructured(t, beforeJSON), after)
	if !ok {
		t.Fatalf("%s -> %s: createPatch refused it", beforeJSON, afterJSON)
	}
	if w, g := opsSet(t, want), opsSet(t, got); fmt.Sprint(w) != fmt.Sprint(g) {
		t.Fatalf("%s -> %s:\nCreatePatch: %v\ncreatePatch: %v", beforeJSON, afterJSON, w, g)
	}
}

const patchBase = `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a/b": "x", "c~d": "y"}},
 "spec": {"n": 3, "f": 1.5, "big": 9007199254740993, "neg": -0, "e": 1e3, "b": true, "z": null, "u": "é\u2028",
  "list": [1, "two", {"three": 3}, [4]], "empty": {}, "none": []}}`

func TestCreatePatchIsJsonpatchsOnTheDecodedDocuments(t *testing.T) {
	cases := map[string]func(o map[string]any){
		"unchanged":          func(o map[string]any) {},
		"label added":        func(o map[string]any) { o["metadata"].(map[string]any)["labels"].(map[string]any)["new/~k"] = "v" },
		"label removed":      func(o map[string]any) { delete(o["metadata"].(map[string]any)["labels"].(map[string]any), "a/b") },
		"same int":           func(o map[string]any) { specOf(o)["n"] = int64(3) },
		"int as float":       func(o map[string]any) { specOf(o)["n"] = float64(3) },
		"int changed":        func(o map[string]any) { specOf(o)["n"] = int64(4) },
		"big int rounds":     func(o map[string]any) { specOf(o)["big"] = int64(9007199254740992) },
		"big int differs":    func(o map[string]any) { specOf(o)["big"] = int64(9007199254740995) },
		"negative zero":      func(o map[string]any) { specOf(o)["neg"] = math.Copysign(0, -1) },
		"exponent":           func(o map[string]any) { specOf(o)["e"] = int64(1000) },
		"float changed":      func(o map[string]any) { specOf(o)["f"] = 2.25 },
		"type changed":       func(o map[string]any) { specOf(o)["b"] = "true" },
		"null to value":      func(o map[string]any) { specOf(o)["z"] = map[string]any{"k": int64(1)} },
		"value to null":      func(o map[string]any) { specOf(o)["f"] = nil },
		"typed nil map":      func(o map[string]any) { specOf(o)["empty"] = map[string]any(nil) },
		"typed nil slice":    func(o map[string]any) { specOf(o)["none"] = []any(nil) },
		"null stays":         func(o map[string]any) { specOf(o)["z"] = []any(nil) },
		"list grows":         func(o map[string]any) { specOf(o)["list"] = append(specOf(o)["list"].([]any), int64(5), "six") },
		"list shrinks":       func(o map[string]any) { specOf(o)["list"] = specOf(o)["list"].([]any)[:1] },
		"list item changed":  func(o map[string]any) { specOf(o)["list"].([]any)[2].(map[string]any)["three"] = "3" },
		"nested added":       func(o map[string]any) { specOf(o)["new"] = map[string]any{"a": []any{int64(1), nil, true}} },
		"unicode changed":    func(o map[string]any) { specOf(o)["u"] = "ü<&>" },
		"top level removed":  func(o map[string]any) { delete(o, "spec") },
		"array to object":    func(o map[string]any) { specOf(o)["none"] = map[string]any{} },
		"many changes":       func(o map[string]any) { specOf(o)["n"] = int64(0); delete(specOf(o), "u"); specOf(o)["x"] = "y" },
		"empty list grows":   func(o map[string]any) { specOf(o)["none"] = []any{map[string]any{}} },
		"empty map gets key": func(o map[string]any) { specOf(o)["empty"] = map[string]any{"/": "~"} },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			after := decodeUnstructured(t, patchBase)
			change(after)
			checkPatch(t, patchBase, after)
		})
	}
}

func specOf(o map[string]any) map[string]any { return o["spec"].(map[string]any) }

func TestCreatePatchRefusesWhatJSONWouldChange(t *testing.T) {
	before := decodeUnstructured(t, patchBase)
	for name, v := range map[string]any{
		"NaN":            math.NaN(),
		"infinity":       math.Inf(1),
		"int":            3,
		"typed map":      map[string]string{"a": "b"},
		"invalid UTF-8":  "\xff",
		"nested invalid": map[string]any{"k": []any{"ok", "\xfe"}},
		"invalid key":    map[string]any{"\xff": "v"},
	} {
		t.Run(name, func(t *testing.T) {
			after := decodeUnstructured(t, patchBase)
			specOf(after)["n"] = v
			if _, ok := createPatch(before, after); ok {
				t.Fatalf("%#v: createPatch took it", v)
			}
		})
	}
}

// TestCreatePatchOnRandomDocuments compares with CreatePatch on random documents and random changes.
func TestCreatePatchOnRandomDocuments(t *testing.T) {
	r := rand.New(rand.NewSource(25))
	for i := 0; i < 2000; i++ {
		doc := randomValue(r, 0).(map[string]any)
		doc["apiVersion"], doc["kind"] = "v1", "Thing" // unstructured decodes objects with a kind
		beforeJSON, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		after := decodeUnstructured(t, string(beforeJSON))
		for n := r.Intn(4); n >= 0; n-- {
			change(r, after)
		}
		checkPatch(t, string(beforeJSON), after)
	}
}

var keys = []string{"a", "b", "c/d", "e~f", "g"}

// randomValue is a random object at depth 0, any JSON value below.
func randomValue(r *rand.Rand, depth int) any {
	kind := r.Intn(8)
	if depth == 0 {
		kind = 0
	} else if depth > 3 {
		kind = 2 + r.Intn(6)
	}
	switch kind {
	case 0:
		m := map[string]any{}
		for n := r.Intn(5); n > 0; n-- {
			m[keys[r.Intn(len(keys))]] = randomValue(r, depth+1)
		}
		return m
	case 1:
		l := make([]any, r.Intn(4))
		for i := range l {
			l[i] = randomValue(r, depth+1)
		}
		return l
	case 2:
		return keys[r.Intn(len(keys))]
	case 3:
		return int64(r.Intn(5)) - 2
	case 4:
		return float64(r.Intn(9)) / 4
	case 5:
		return r.Intn(2) == 0
	case 6:
		return nil
	default:
		return int64(1)<<53 + int64(r.Intn(3))
	}
}

// change changes a random place of an unstructured object as a mutator could: set, delete, append.
func change(r *rand.Rand, obj map[string]any) {
	var cur any = obj
	for {
		switch c := cur.(type) {
		case map[string]any:
			k := keys[r.Intn(len(keys))]
			next, found := c[k]
			if !found || r.Intn(3) == 0 {
				switch r.Intn(3) {
				case 0:
					delete(c, k)
				default:
					c[k] = randomValue(r, 1)
				}
				return
			}
			cur = next
		case []any:
			if len(c) == 0 || r.Intn(3) == 0 {
				if len(c) > 0 && r.Intn(2) == 0 {
					c[r.Intn(len(c))] = randomValue(r, 1)
				}
				return
			}
			cur = c[r.Intn(len(c))]
		default:
			return
		}
	}
}

// The webhook's patch is made against the System's first copy of the object, its namespace put back as
// the request's object had it: the same patch as CreatePatch on the request's JSON and the mutated
// object's (PatchResponseFromRaw, Gatekeeper's), whatever the object's metadata says of its namespace.
func TestThePatchIsMadeAgainstTheRequestsObject(t *testing.T) {
	s := mustLoad(t, pullAlways)
	const spec = `"spec": {"containers": [{"name": "a", "image": "nginx", "n": 3}]}`
	for name, object := range map[string]string{
		"namespace as the request's": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, ` + spec + `}`,
		"no namespace":               `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, ` + spec + `}`,
		"empty namespace":            `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ""}, ` + spec + `}`,
		"another namespace":          `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "other"}, ` + spec + `}`,
		"no metadata":                `{"apiVersion": "v1", "kind": "Pod", ` + spec + `}`,
		"null metadata":              `{"apiVersion": "v1", "kind": "Pod", "metadata": null, ` + spec + `}`,
		"escaped strings":            `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p\u00e9"}, ` + spec + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			in := podRequest(t, admissionv1.Create, pod)
			in.Request.Object.Raw = []byte(object)
			r := s.Mutate(in)
			if r.Error != "" || !r.Mutated {
				t.Fatalf("not mutated: %+v", r)
			}
			want, err := jsonpatch.CreatePatch([]byte(object), r.Object)
			if err != nil {
				t.Fatal(err)
			}
			if w, g := opsSet(t, want), opsSet(t, r.Patch); fmt.Sprint(w) != fmt.Sprint(g) {
				t.Fatalf("%s -> %s:\nCreatePatch: %v\nthe webhook: %v", object, r.Object, w, g)
			}
		})
	}
}
