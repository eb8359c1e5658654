package k8scel

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// valueMemo remembers, across requests, the results of one part that reads nothing of the request
// itself, only variables (memo.go): such a part, evaluated for a constraint class, is a function of
// the values of the variables it reads. Its evaluation reads them one after the other, each read
// deciding (with the values read before) what the evaluation does until the next one; so what it
// produced is remembered in a tree: at each node the variable the evaluation read next, each branch
// one value of it, and at a leaf the result (value or error, actual cost, the names read, in order).
//
// Looking a result up reads the variables exactly as the evaluation would (the same variables, in
// the same order, each resolved in the evaluation's context with its cost reported) until a leaf -
// the evaluation's result - or a value never seen there - then the part is evaluated, and what it
// produced is added. Exact, because the values compared are equal as CEL values and of the same Go
// type (scalars, and empty lists and maps: see keyOf), and the variables that read only the
// constraint are equal for every constraint of a class. A value of any other kind is never
// remembered (the part is evaluated). The tree of a part holds at most maxRemembered results.
//
// In a webhook most parts see the same few values on most requests (a list of offending containers
// that is empty, a flag, a count): their validations and messages are then not evaluated again.
type valueMemo struct {
	variable bool // the part is a variable (variableResult), else an expression (exprResult)
	// mu guards the tree: lookups (every request, from every calling thread at once) share it,
	// remember (a result not seen before: at most maxRemembered per part) holds it alone
	mu    sync.RWMutex
	roots map[int64]*valueNode // per constraint class
	size  int                  // results remembered
	hits  atomic.Int64         // results found (for tests)
	// evaluations in a row not remembered: a value read could not be a key
	refused atomic.Int64
}

// refusedBackoff: after that many evaluations in a row whose values could not be remembered (a part
// reading lists of objects: containers), a part tries once every refusedBackoff evaluations only (the
// keys of the values read before the one refused cost as much as the evaluation they would save).
// Remembering is a cache: what is not remembered is evaluated, with the same result.
const refusedBackoff = 64

// maxRemembered bounds the results one part remembers.
const maxRemembered = 256

type valueNode struct {
	next     string // the variable read next ("" at a leaf)
	fixed    bool   // it reads only the constraint: its value is the class's, not compared
	branches map[valueKey]*valueNode
	leaf     any // *variableResult or *exprResult
}

// heldValue is the value a result to remember holds.
func heldValue(result any) ref.Val {
	switch r := result.(type) {
	case *variableResult:
		return r.value
	case *exprResult:
		return r.value
	}
	return nil
}

// maxDetachedValues bounds the values detached looks at (a larger result is not remembered).
const maxDetachedValues = 1024

// detached is whether v (a result to remember across requests) holds nothing of the request that
// produced it: no map of its decoded object - a part reading only variables may pass on a map a
// variable read from the object (`size(variables.labels) > 0 ? variables.labels : {}`), and a
// request's maps are emptied and decoded into again once it is decided (NewRecycledRequest). So no
// Go map[string]any anywhere in it (those of the constraint's parameters are refused alike: such
// a result is evaluated each time, with the same value). Strings are immutable and lists are never
// reused; seen counts the values looked at.
func detached(v ref.Val, seen *int) bool {
	*seen++
	if *seen > maxDetachedValues {
		return false
	}
	switch x := v.(type) {
	case *types.Optional:
		return !x.HasValue() || detached(x.GetValue(), seen)
	case traits.Mapper:
		if _, native := x.Value().(map[string]any); native {
			return false
		}
		for it := x.Iterator(); it.HasNext() == types.True; {
			key := it.Next()
			value, found := x.Find(key)
			if !found || !detached(key, seen) || !detached(value, seen) {
				return false
			}
		}
	case traits.Lister:
		for it := x.Iterator(); it.HasNext() == types.True; {
			if !detached(it.Next(), seen) {
				return false
			}
		}
	}
	return true
}

// valueKey is a CEL value as a map key: its Go type and its value as a comparable Go value.
type valueKey struct {
	typ reflect.Type
	v   any
}

// Bounds of the values used as keys: a string's bytes, a list's or map's entries, a key's length.
const (
	maxRememberedString  = 256
	maxRememberedEntries = 16
	maxRememberedKey     = 1024
)

// keyOf is the key of a value a part read, or false when such a value is not remembered: only
// values equal as CEL values when their keys are equal, and that behave alike in every operation
// (the same Go type, and for lists and maps the same Go type of what they hold): null, bool, int,
// uint, double (by its bits: NaN and -0 are values of their own), short strings, and small lists
// and maps of those (a map's entries in the order of their keys: a map iterates in no defined order,
// in Kubernetes as here, and a result remembered for equal maps is one Kubernetes could give).
func keyOf(v ref.Val) (valueKey, bool) {
	switch x := v.(type) {
	case types.Null:
		return valueKey{reflect.TypeOf(v), nil}, true
	case types.Bool:
		return valueKey{reflect.TypeOf(v), bool(x)}, true
	case types.Int:
		return valueKey{reflect.TypeOf(v), int64(x)}, true
	case types.Uint:
		return valueKey{reflect.TypeOf(v), uint64(x)}, true
	case types.Double:
		return valueKey{reflect.TypeOf(v), math.Float64bits(float64(x))}, true
	case types.String:
		if len(x) > maxRememberedString {
			return valueKey{}, false
		}
		return valueKey{reflect.TypeOf(v), string(x)}, true
	case traits.Lister:
		if x.Type() != types.ListType {
			return valueKey{}, false
		}
		if key, ok := collectionKey(x, false); ok {
			return valueKey{reflect.TypeOf(v), key}, true
		}
	case traits.Mapper:
		if x.Type() != types.MapType {
			return valueKey{}, false
		}
		if key, ok := collectionKey(x, true); ok {
			return valueKey{reflect.TypeOf(v), key}, true
		}
	}
	return valueKey{}, false
}

// collectionKey writes a list's items (or a map's entries, by key) with their Go types, after the Go
// type of the value the collection wraps. Most collections a part reads hold objects (containers,
// volumes): they are refused by a look at their items' types before any key is written.
func collectionKey(c traits.Sizer, isMap bool) (string, bool) {
	size, ok := c.Size().(types.Int)
	if !ok || size > maxRememberedEntries {
		return "", false
	}
	if l, isList := c.(traits.Lister); isList && size > 0 && !isScalarKey(l.Get(types.IntZero)) {
		return "", false // a list of objects: refused before anything is made
	}
	var b strings.Builder // the Go type of the value the collection wraps, then its entries
	b.WriteString(typeName(c.(ref.Val).Value()))
	b.WriteByte('|')
	if size == 0 {
		return b.String(), true
	}
	var held [2 * maxRememberedEntries]ref.Val // items (and their values, for a map), in order
	items := held[:0]
	it := c.(traits.Iterable).Iterator()
	for it.HasNext() == types.True {
		item := it.Next()
		if !isScalarKey(item) || len(items) >= len(held)-1 {
			return "", false
		}
		items = append(items, item)
		if isMap {
			value, found := c.(traits.Mapper).Find(item)
			if !found || !isScalarKey(value) {
				return "", false
			}
			items = append(items, value)
		}
	}
	if !isMap { // a list's items in order
		for _, item := range items {
			scalarKey(&b, item)
			b.WriteByte(',')
			if b.Len() > maxRememberedKey {
				return "", false
			}
		}
		return b.String(), true
	}
	entries := make([]string, 0, len(items)/2) // a map's entries, by key
	for i := 0; i < len(items); i += 2 {
		var e strings.Builder
		scalarKey(&e, items[i])
		e.WriteByte(':')
		scalarKey(&e, items[i+1])
		entries = append(entries, e.String())
	}
	slices.Sort(entries)
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte(',')
		if b.Len() > maxRememberedKey {
			return "", false
		}
	}
	return b.String(), true
}

// typeName is fmt's %T of v (without fmt's reflection over the verb).
func typeName(v any) string {
	if v == nil {
		return "<nil>"
	}
	return reflect.TypeOf(v).String()
}

// isScalarKey is whether scalarKey writes v.
func isScalarKey(v ref.Val) bool {
	switch x := v.(type) {
	case types.Null, types.Bool, types.Int, types.Uint, types.Double:
		return true
	case types.String:
		return len(x) <= maxRememberedString
	}
	return false
}

// scalarKey writes a scalar with its type (false: not a scalar keyOf remembers).
func scalarKey(b *strings.Builder, v ref.Val) bool {
	switch x := v.(type) {
	case types.Null:
		b.WriteString("null")
	case types.Bool:
		b.WriteString("b" + strconv.FormatBool(bool(x)))
	case types.Int:
		b.WriteString("i" + strconv.FormatInt(int64(x), 10))
	case types.Uint:
		b.WriteString("u" + strconv.FormatUint(uint64(x), 10))
	case types.Double:
		b.WriteString("d" + strconv.FormatUint(math.Float64bits(float64(x)), 16))
	case types.String:
		if len(x) > maxRememberedString {
			return false
		}
		b.WriteString("s" + strconv.Quote(string(x)))
	default:
		return false
	}
	return true
}

func newValueMemo(variable bool) *valueMemo {
	return &valueMemo{variable: variable, roots: map[int64]*valueNode{}}
}

// lookup walks the tree of class, reading each variable through comp (as the evaluation would):
// the remembered result, or nil when this evaluation has not been seen (the variables read so far
// stay read, as the evaluation will read them first too).
func (m *valueMemo) lookup(comp *composition, class int64) any {
	m.mu.RLock()
	node := m.roots[class]
	m.mu.RUnlock()
	for node != nil {
		m.mu.RLock()
		next, fixed, leaf := node.next, node.fixed, node.leaf
		m.mu.RUnlock()
		if leaf != nil {
			m.hits.Add(1)
			return leaf
		}
		value, _ := comp.vars.Find(types.String(next))
		if fixed {
			m.mu.RLock()
			node = node.branches[valueKey{}]
			m.mu.RUnlock()
			continue
		}
		key, ok := keyOf(value)
		if !ok {
			return nil
		}
		m.mu.RLock()
		node = node.branches[key]
		m.mu.RUnlock()
	}
	return nil
}

// remember adds what an evaluation produced (result, having read reads in order) for class, when
// every value it read can be remembered.
func (m *valueMemo) remember(comp *composition, class int64, reads []string, result any) {
	if refused := m.refused.Load(); refused >= refusedBackoff && refused%refusedBackoff != 0 {
		m.refused.Add(1)
		return
	}
	keys := make([]valueKey, len(reads))
	fixed := make([]bool, len(reads))
	for n, name := range reads {
		i := comp.t.variableIndex[name]
		if comp.t.variableFixed[i] {
			fixed[n] = true
			continue
		}
		if !comp.vars.resolved[i] {
			return
		}
		key, ok := keyOf(comp.vars.values[i])
		if !ok {
			m.refused.Add(1)
			return
		}
		keys[n] = key
	}
	m.refused.Store(0)
	if !detached(heldValue(result), new(int)) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.size >= maxRemembered {
		return
	}
	node := m.roots[class]
	if node == nil {
		node = &valueNode{}
		m.roots[class] = node
	}
	for n, name := range reads {
		if node.leaf != nil {
			return // cannot happen for a deterministic evaluation: keep what is there
		}
		if node.next == "" && node.branches == nil {
			node.next, node.fixed, node.branches = name, fixed[n], map[valueKey]*valueNode{}
		} else if node.next != name || node.fixed != fixed[n] {
			return // idem
		}
		child := node.branches[keys[n]]
		if child == nil {
			child = &valueNode{}
			node.branches[keys[n]] = child
		}
		node = child
	}
	if node.leaf != nil || node.next != "" {
		return
	}
	node.leaf = result
	m.size++
}
