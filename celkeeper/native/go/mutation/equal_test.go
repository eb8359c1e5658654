package mutation

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"testing"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	gkmutation "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Gatekeeper's System (the copy in _patches) compares a pass's object with the one before it by
// UnstructuredEqual, which must answer as reflect.DeepEqual does.

func checkEqual(t *testing.T, name string, a, b map[string]any) {
	t.Helper()
	ua, ub := &unstructured.Unstructured{Object: a}, &unstructured.Unstructured{Object: b}
	if got, want := gkmutation.UnstructuredEqual(ua, ub), reflect.DeepEqual(ua, ub); got != want {
		t.Fatalf("%s: UnstructuredEqual %v, reflect.DeepEqual %v:\n%#v\n%#v", name, got, want, a, b)
	}
}

func TestUnstructuredEqualIsReflectDeepEqual(t *testing.T) {
	nan := map[string]any{"x": math.NaN()}
	shared := []any{math.NaN()}
	placeholder := func(v string) *unversioned.ExternalDataPlaceholder {
		return &unversioned.ExternalDataPlaceholder{Ref: &unversioned.ExternalData{Provider: "p"}, ValueAtLocation: v}
	}
	cases := map[string][2]map[string]any{
		"equal":                   {{"a": int64(1), "b": []any{"x", true, nil}}, {"a": int64(1), "b": []any{"x", true, nil}}},
		"int64 and float64":       {{"a": int64(1)}, {"a": float64(1)}},
		"int and int64":           {{"a": 1}, {"a": int64(1)}},
		"int and int":             {{"a": 1}, {"a": 1}},
		"NaN":                     {{"a": math.NaN()}, {"a": math.NaN()}},
		"the same map with NaN":   {{"a": nan}, {"a": nan}},
		"the same slice with NaN": {{"a": shared}, {"a": shared}},
		"negative zero":           {{"a": math.Copysign(0, -1)}, {"a": 0.0}},
		"nil and empty map":       {{"a": map[string]any(nil)}, {"a": map[string]any{}}},
		"nil maps":                {{"a": map[string]any(nil)}, {"a": map[string]any(nil)}},
		"nil and empty slice":     {{"a": []any(nil)}, {"a": []any{}}},
		"nil slice and nil":       {{"a": []any(nil)}, {"a": nil}},
		"missing and nil":         {{"a": nil}, {"b": nil}},
		"longer":                  {{"a": []any{"x"}}, {"a": []any{"x", "y"}}},
		"typed map":               {{"a": map[string]string{"k": "v"}}, {"a": map[string]string{"k": "v"}}},
		"typed map and map":       {{"a": map[string]string{"k": "v"}}, {"a": map[string]any{"k": "v"}}},
		"equal placeholders":      {{"a": placeholder("v")}, {"a": placeholder("v")}},
		"different placeholders":  {{"a": placeholder("v")}, {"a": placeholder("w")}},
		"placeholder and string":  {{"a": placeholder("v")}, {"a": "v"}},
		"nil objects":             {nil, nil},
		"nil and empty object":    {nil, {}},
	}
	for name, c := range cases {
		checkEqual(t, name, c[0], c[1])
	}
	checkEqual(t, "the same object", nan, nan)
	if !gkmutation.UnstructuredEqual(nil, nil) || gkmutation.UnstructuredEqual(nil, &unstructured.Unstructured{}) {
		t.Fatal("nil objects: not reflect.DeepEqual's answer")
	}
}

// TestUnstructuredEqualOnRandomObjects compares with reflect.DeepEqual on random objects and random
// changes (some changes leave an equal object).
func TestUnstructuredEqualOnRandomObjects(t *testing.T) {
	r := rand.New(rand.NewSource(25))
	for i := 0; i < 3000; i++ {
		a := randomValue(r, 0).(map[string]any)
		b := unversioned.DeepCopyWithPlaceholders(&unstructured.Unstructured{Object: a}).Object
		for n := r.Intn(3); n > 0; n-- {
			change(r, b)
		}
		checkEqual(t, "random", a, b)
	}
}

// Gatekeeper's System (the copy in _patches) makes each pass's copy of the object into the maps and
// slices of a copy no longer needed (CopyObject): the copy must be DeepCopyWithPlaceholders' copy,
// whatever the copy it is made into held, and share nothing with the object.

func checkCopy(t *testing.T, name string, into *unstructured.Unstructured, object map[string]any) *unstructured.Unstructured {
	t.Helper()
	want := unversioned.DeepCopyWithPlaceholders(&unstructured.Unstructured{Object: object})
	got := gkmutation.CopyObject(into, &unstructured.Unstructured{Object: object})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the copy made into another is not DeepCopyWithPlaceholders':\n%#v\n%#v", name, got.Object, want.Object)
	}
	return got
}

func TestCopiesMadeIntoOtherCopiesAreDeepCopies(t *testing.T) {
	placeholder := &unversioned.ExternalDataPlaceholder{Ref: &unversioned.ExternalData{Provider: "p"}, ValueAtLocation: "v"}
	objects := []map[string]any{
		{"a": map[string]any{"b": []any{"x", int64(1)}}, "c": []any{map[string]any{"d": 1.5}}},
		{"a": map[string]any(nil), "c": []any(nil)},                      // typed nils where the copy held a map and a slice
		{"a": map[string]any{}, "c": []any{}},                            // empty, not nil
		{"a": []any{"x", "y", "z"}, "c": map[string]any{"d": nil}},       // a slice where a map was, and back
		{"a": map[string]any{"b": []any{"x", int64(1), true, nil, "w"}}}, // longer than the slice it is made into
		{"a": map[string]any{"p": placeholder}, "n": json.Number("1")},
		nil,
		{},
	}
	var into *unstructured.Unstructured
	for i, object := range objects {
		into = checkCopy(t, fmt.Sprintf("object %d", i), into, object)
	}
	if copied := gkmutation.CopyObject(nil, &unstructured.Unstructured{Object: objects[5]}); copied.Object["a"].(map[string]any)["p"] == placeholder {
		t.Fatal("a placeholder is copied, as DeepCopyWithPlaceholders copies it")
	}
}

// TestCopiesMadeIntoOtherCopiesOnRandomObjects makes copies of random objects into the copies of earlier
// ones, then changes them: the objects stay as they were.
func TestCopiesMadeIntoOtherCopiesOnRandomObjects(t *testing.T) {
	r := rand.New(rand.NewSource(29))
	var recycled []*unstructured.Unstructured
	for i := 0; i < 3000; i++ {
		object := randomValue(r, 0).(map[string]any)
		before := unversioned.DeepCopyWithPlaceholders(&unstructured.Unstructured{Object: object})
		var into *unstructured.Unstructured
		if len(recycled) > 0 && r.Intn(4) != 0 {
			into = recycled[r.Intn(len(recycled))]
		}
		copied := checkCopy(t, "random", into, object)
		for n := r.Intn(4); n > 0; n-- {
			change(r, copied.Object)
		}
		if !reflect.DeepEqual(object, before.Object) {
			t.Fatalf("changing the copy changed the object:\n%#v\n%#v", object, before.Object)
		}
		if into == nil {
			recycled = append(recycled, copied)
		}
	}
}
