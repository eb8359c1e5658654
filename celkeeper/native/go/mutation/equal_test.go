package mutation

import (
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
