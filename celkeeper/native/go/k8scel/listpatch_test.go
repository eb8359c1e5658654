package k8scel

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	structpb "google.golang.org/protobuf/types/known/structpb"
)

// The library is built with celkeeper's copy of cel-go's common/types/list.go (celkeeper/native/go/
// _patches, docs/known-issues.md): a list makes no closure reading its elements (a list of ref.Val is
// two allocations: itself and its slice held as an interface; a list of the object's, given as an
// interface, one; a mutable list one), and a list's iterator is 32 bytes. Run with CELKEEPER_UPSTREAM_COST=1 on the module as it is (no
// patched go.mod: tests/native/test_locate_patches.py does it), the test shows instead that upstream
// cel-go still allocates more; when a cel-go release passes it in that mode, the copy can go.

func TestListsMakeNoClosure(t *testing.T) {
	elems := []ref.Val{types.Int(1), types.String("a")}
	var anys any = []any{int64(1), "a"} // as the object's lists are given to it: already an interface
	want := map[string]float64{"NewRefValList": 2, "NewDynamicList": 1, "NewMutableList": 1}
	made := map[string]float64{
		"NewRefValList":  testing.AllocsPerRun(200, func() { listSink = types.NewRefValList(types.DefaultTypeAdapter, elems) }),
		"NewDynamicList": testing.AllocsPerRun(200, func() { listSink = types.NewDynamicList(types.DefaultTypeAdapter, anys) }),
		"NewMutableList": testing.AllocsPerRun(200, func() { listSink = types.NewMutableList(types.DefaultTypeAdapter) }),
	}
	list := types.NewRefValList(types.DefaultTypeAdapter, elems)
	var iterators []traits.Iterator
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 1000 {
		iterators = append(iterators[:0], list.Iterator())
	}
	runtime.ReadMemStats(&after)
	iteratorBytes := float64(after.TotalAlloc-before.TotalAlloc) / 1000
	if upstreamCost {
		if reflect.DeepEqual(made, want) && iteratorBytes <= 32 {
			t.Errorf("upstream cel-go's lists make no closure and its iterators are 32 bytes (%v, %v bytes): drop the copy of list.go", made, iteratorBytes)
		}
		return
	}
	for name, allocs := range made {
		if allocs != want[name] {
			t.Errorf("%s: %v allocations, not %v", name, allocs, want[name])
		}
	}
	if iteratorBytes > 32 {
		t.Errorf("a list's iterator: %v bytes", iteratorBytes)
	}
}

// listSink keeps the lists made (so that they are made on the heap, as in an evaluation).
var listSink traits.Lister

// elements reads a list every way a list is read: Get, Iterator, Fold, Contains, String, Value and
// ConvertToNative.
func elements(t *testing.T, l traits.Lister) []ref.Val {
	t.Helper()
	var got, iterated, folded []ref.Val
	for i := types.Int(0); i < l.Size().(types.Int); i++ {
		got = append(got, l.Get(i))
	}
	for it := l.Iterator(); it.HasNext() == types.True; {
		iterated = append(iterated, it.Next())
	}
	if f, ok := l.(traits.Foldable); ok {
		f.Fold(folder(func(_, v any) { folded = append(folded, types.DefaultTypeAdapter.NativeToValue(v)) }))
	}
	if !reflect.DeepEqual(got, iterated) || !reflect.DeepEqual(got, folded) {
		t.Fatalf("Get %v, Iterator %v, Fold %v", got, iterated, folded)
	}
	for _, v := range got {
		if l.Contains(v) != types.True {
			t.Fatalf("%v does not contain %v", l, v)
		}
	}
	return got
}

type folder func(k, v any)

func (f folder) FoldEntry(k, v any) bool { f(k, v); return true }

func TestListsReadTheirElements(t *testing.T) {
	a := types.DefaultTypeAdapter
	want := []ref.Val{types.String("x"), types.String("y")}
	jsonList, err := structpb.NewList([]any{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	mutable := types.NewMutableList(a)
	mutable.Add(types.NewRefValList(a, want[:1]))
	mutable.Add(types.NewStringList(a, []string{"y"}))
	lists := map[string]traits.Lister{
		"NewRefValList":            types.NewRefValList(a, want),
		"NewStringList":            types.NewStringList(a, []string{"x", "y"}),
		"NewDynamicList []any":     types.NewDynamicList(a, []any{"x", "y"}),
		"NewDynamicList []string":  types.NewDynamicList(a, []string{"x", "y"}),
		"NewDynamicList array":     types.NewDynamicList(a, [2]string{"x", "y"}),
		"NewDynamicList []ref.Val": types.NewDynamicList(a, want),
		"NewJSONList":              types.NewJSONList(a, jsonList),
		"NewProtoList":             a.NativeToValue(jsonList).(traits.Lister),
		"NewMutableList":           mutable,
		"ToImmutableList":          mutable.ToImmutableList(),
	}
	for name, l := range lists {
		if got := elements(t, l); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, not %v", name, got, want)
		}
		if l.Equal(lists["NewRefValList"].(ref.Val)) != types.True {
			t.Errorf("%s: not equal to the same list", name)
		}
		native, err := l.ConvertToNative(reflect.TypeFor[[]string]())
		if err != nil || !reflect.DeepEqual(native, []string{"x", "y"}) {
			t.Errorf("%s: as []string %v (%v)", name, native, err)
		}
		if s := l.(ref.Val).(interface{ String() string }); name != "NewJSONList" && name != "NewProtoList" && s.String() != "[x, y]" {
			t.Errorf("%s: String %q", name, s.String())
		}
	}
	ints := types.NewDynamicList(a, []int64{3, 4})
	if got := elements(t, ints); !reflect.DeepEqual(got, []ref.Val{types.Int(3), types.Int(4)}) {
		t.Errorf("NewDynamicList []int64: %v", got)
	}
}
