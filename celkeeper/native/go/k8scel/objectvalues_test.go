package k8scel

import (
	"reflect"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// The values objectValues makes are cel-go's own (same Go types, equal values), each map and list
// made once per request, and nothing is kept once the request is done.
func TestObjectValuesAreCelGosMadeOncePerRequest(t *testing.T) {
	m, err := decodeObject(mustJSON(benchPod()))
	if err != nil {
		t.Fatal(err)
	}
	o := newObjectValues()
	root := o.root(m).(ref.Val)
	want := types.DefaultTypeAdapter.NativeToValue(m)
	if reflect.TypeOf(root) != reflect.TypeOf(want) || root.Equal(want) != types.True {
		t.Fatalf("root %T is not cel-go's %T (or not equal)", root, want)
	}
	spec, _ := root.(traits.Mapper).Find(types.String("spec"))
	again, _ := root.(traits.Mapper).Find(types.String("spec"))
	if spec != again {
		t.Fatal("spec was made twice in one request")
	}
	containers, _ := spec.(traits.Mapper).Find(types.String("containers"))
	wantList := types.DefaultTypeAdapter.NativeToValue(m["spec"].(map[string]any)["containers"])
	if reflect.TypeOf(containers) != reflect.TypeOf(wantList) || containers.Equal(wantList) != types.True {
		t.Fatalf("containers %T is not cel-go's %T (or not equal)", containers, wantList)
	}
	first := containers.(traits.Lister).Get(types.Int(0))
	if first != containers.(traits.Lister).Get(types.Int(0)) {
		t.Fatal("a container was made twice in one request")
	}
	if s := o.NativeToValue("x"); s != types.String("x") {
		t.Fatalf("a string became %v", s)
	}
	o.release()
	if len(o.maps) != 0 || len(o.lists) != 0 {
		t.Fatal("values kept after the request")
	}
	after, _ := root.(traits.Mapper).Find(types.String("spec"))
	if after == spec || after.Equal(spec) != types.True || len(o.maps) != 0 {
		t.Fatal("after release, values are made as cel-go makes them, and not kept")
	}
}
