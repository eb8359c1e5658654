package k8scel

import (
	"sync"
	"unsafe"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// objectValues converts a request's objects (object, oldObject: unstructured JSON) to CEL values
// once per request. cel-go wraps a map[string]any or []any in a new CEL map or list (holding the
// adapter that made it) each time an expression reaches it - a field of a map found, an item of a
// list iterated - and every template reaches the same containers and their fields again: most of a
// request's allocations. This adapter makes the same wrappers cel-go makes
// (types.NewStringInterfaceMap, types.NewDynamicList: what types.Registry.NativeToValue makes of
// these Go types), with itself as their adapter, and hands out the one made for a given map or list
// for the rest of the request; every other value is converted as cel-go converts it. The values
// are read-only: a wrapper shared by two expressions behaves as two equal ones.
//
// The activation holds the object as the wrapper of its root map (cel-go uses a ref.Val as it is),
// so everything reached from it - directly or through variables - goes through this adapter.
// release drops what it holds at the end of the request and gives the adapter to a later request
// (its maps keep their room). A value remembered across requests may keep a wrapper, and with it
// this adapter: it converts through the adapter of whichever request holds it then, under its lock,
// and what it keeps there is keyed by the identity of containers that wrapper keeps alive - never
// another request's.
type objectValues struct {
	mu    sync.Mutex
	maps  map[unsafe.Pointer]ref.Val // never replaced: made reads these fields without the lock
	lists map[listKey]ref.Val
	done  bool
}

type listKey struct {
	data unsafe.Pointer
	size int
}

func newObjectValues() *objectValues {
	o := adapters.Get().(*objectValues)
	o.mu.Lock()
	o.done = false
	o.mu.Unlock()
	return o
}

// adapters holds the released adapters (their maps emptied).
var adapters = sync.Pool{New: func() any {
	return &objectValues{maps: map[unsafe.Pointer]ref.Val{}, lists: map[listKey]ref.Val{}, done: true}
}}

// maxKeptValues bounds the wrappers a pooled adapter was holding (a larger one is dropped).
const maxKeptValues = 4096

// NativeToValue implements types.Adapter.
func (o *objectValues) NativeToValue(value any) ref.Val {
	switch v := value.(type) {
	case map[string]any:
		key := *(*unsafe.Pointer)(unsafe.Pointer(&v)) // the map's identity
		return made(o, o.maps, key, func() ref.Val { return types.NewStringInterfaceMap(o, v) })
	case []any:
		key := listKey{unsafe.Pointer(unsafe.SliceData(v)), len(v)}
		return made(o, o.lists, key, func() ref.Val { return types.NewDynamicList(o, v) })
	}
	return types.DefaultTypeAdapter.NativeToValue(value)
}

// made is the value kept under key in kept, or make's (kept until the request is done).
func made[K comparable](o *objectValues, kept map[K]ref.Val, key K, make func() ref.Val) ref.Val {
	o.mu.Lock()
	defer o.mu.Unlock()
	if found, ok := kept[key]; ok {
		return found
	}
	v := make()
	if !o.done {
		kept[key] = v
	}
	return v
}

// root is the CEL value of an object (nil stays nil: the variable is null).
func (o *objectValues) root(object any) any {
	if m, ok := object.(map[string]any); ok {
		return o.NativeToValue(m)
	}
	return object
}

func (o *objectValues) release() {
	o.mu.Lock()
	o.done = true // the maps themselves stay (made reads them without the lock): emptied
	kept := len(o.maps)+len(o.lists) <= maxKeptValues
	clear(o.maps)
	clear(o.lists)
	o.mu.Unlock()
	if kept {
		adapters.Put(o)
	}
}
