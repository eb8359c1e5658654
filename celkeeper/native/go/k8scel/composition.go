package k8scel

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// composition is Kubernetes' compositionContext (k8s.io/apiserver v0.36.2 pkg/admission/plugin/cel/
// composition.go: CreateContext, Variables, variableAccessor.Callback, reportCost, GetAndResetCost)
// and its lazy variables map (pkg/cel/lazy/lazy.go), with two additions:
//   - what evaluating a variable or an expression produced (value, cost, the variables it read) is
//     remembered in the request's memo and replayed when the same evaluation comes again (memo.go);
//     a replay reads the same variables again, so each context reports exactly the costs a fresh
//     evaluation would have reported;
//   - one composition serves the contexts of one constraint in turn: reset() gives the fresh context
//     (no variable resolved, no cost) CreateContext would give, without allocating it again; and a
//     request decides its constraints one after the other with one composition (Request.composition,
//     recycle), when no value may refer to the one before.
type composition struct {
	context.Context

	t     *Template
	r     *Request
	c     *Constraint
	scope scope
	act   activation
	vars  variablesMap

	accumulatedCost int64
	recorders       []*[]string  // the variables read by each evaluation in progress (nil: not recorded)
	recordersBuf    [4]*[]string // the first recorders (most evaluations need no more)
	trace           *Trace       // Explain: every part's result is recorded here (nil: not traced)

	// where forInput puts the results of the conditions, the validations and the messages (each
	// read until the constraint is decided), kept with the composition
	results [3][]plugincel.EvaluationResult
}

// newComposition makes the evaluation contexts of one constraint (CreateContext + newActivation).
func (t *Template) newComposition(ctx context.Context, r *Request, c *Constraint) *composition {
	comp := &composition{}
	comp.init(ctx, t, r, c)
	return comp
}

// init makes comp the evaluation contexts of constraint c of template t in request r, keeping the
// room of what it held before.
func (comp *composition) init(ctx context.Context, t *Template, r *Request, c *Constraint) {
	values, resolved, results := comp.vars.values, comp.vars.resolved, comp.results
	*comp = composition{Context: ctx, t: t, r: r, c: c, trace: r.tracer, results: results}
	comp.recorders = comp.recordersBuf[:0]
	comp.act = activation{object: r.object, oldObject: r.oldObject, r: r}
	if len(t.dataKinds) > 0 {
		comp.act.data = r.dataFor(t)
	}
	if c != nil {
		comp.act.params = c.params
	}
	n := len(t.variables)
	if cap(values) < n {
		values, resolved = make([]ref.Val, n), make([]bool, n)
	} else {
		clear(values[:n])
		clear(resolved[:n])
	}
	comp.vars = variablesMap{t: t, values: values[:n], resolved: resolved[:n], comp: comp}
	comp.act.variables = &comp.vars
}

// composition is the composition the request decides constraint c of template t with: the one its
// previous constraint was decided with when recycle kept it, else a new one.
func (r *Request) composition(ctx context.Context, t *Template, c *Constraint) *composition {
	comp := r.spare
	if comp == nil {
		return t.newComposition(ctx, r, c)
	}
	r.spare = nil
	comp.init(ctx, t, r, c)
	return comp
}

// recycle keeps comp, its constraint decided, for the request's next one - unless a value may still
// refer to it: a part of its template that uses `variables` as a whole may have made the variables
// map (this composition's) a value, which the request's memo keeps. What it held is let go.
func (r *Request) recycle(comp *composition) {
	if comp.t.wholeVariables || comp.trace != nil {
		return
	}
	clear(comp.vars.values)
	for i := range comp.results {
		clear(comp.results[i])
	}
	comp.Context, comp.c, comp.act = nil, nil, activation{}
	r.spare = comp
}

// resultsFor is the room for n results of the parts evaluated in scope s as part p (zeroed).
func (comp *composition) resultsFor(p part, n int) []plugincel.EvaluationResult {
	i := int(p) - int(partCondition) // conditions, validations, messages
	if i < 0 || i >= len(comp.results) {
		return make([]plugincel.EvaluationResult, n)
	}
	if cap(comp.results[i]) < n {
		comp.results[i] = make([]plugincel.EvaluationResult, n)
	}
	out := comp.results[i][:n]
	clear(out)
	return out
}

// reset starts a new evaluation context (CompositedConditionEvaluator.ForInput's CreateContext) in
// scope s: match conditions see no namespaceObject (matcher.go).
func (comp *composition) reset(s scope) {
	comp.scope = s
	comp.act.namespace = nil
	if s == scopeValidations {
		comp.act.namespace = comp.r.namespace
	}
	clear(comp.vars.values)
	clear(comp.vars.resolved)
	comp.accumulatedCost = 0
	comp.recorders = comp.recorders[:0]
}

// GetAndResetCost is compositionContext.GetAndResetCost.
func (comp *composition) GetAndResetCost() int64 {
	cost := comp.accumulatedCost
	comp.accumulatedCost = 0
	return cost
}

func (comp *composition) reportCost(cost int64) {
	comp.accumulatedCost += cost
}

// record notes that the evaluation in progress read a variable (the first time it reads it: a
// variable is resolved once in a context, so reading it again neither costs nor decides anything).
func (comp *composition) record(name string) {
	if n := len(comp.recorders); n > 0 && comp.recorders[n-1] != nil && !slices.Contains(*comp.recorders[n-1], name) {
		*comp.recorders[n-1] = append(*comp.recorders[n-1], name)
	}
}

// push starts recording the variables an evaluation reads directly (into reads; nil: none recorded,
// e.g. while a variable is resolved on behalf of the evaluation in progress).
func (comp *composition) push(reads *[]string) { comp.recorders = append(comp.recorders, reads) }

func (comp *composition) pop() { comp.recorders = comp.recorders[:len(comp.recorders)-1] }

// replay reads the variables a remembered evaluation read (each resolved, and its cost reported, if
// this context has not resolved it yet).
func (comp *composition) replay(reads []string) {
	comp.push(nil)
	for _, name := range reads {
		comp.vars.Find(types.String(name))
	}
	comp.pop()
}

// variableResult is what evaluating one variable produced (variableAccessor.Callback).
type variableResult struct {
	value      ref.Val
	cost       int64
	reportCost bool
	reads      []string
}

// callback is variableAccessor.Callback for variable i, its result remembered: on the constraint
// when the variable reads nothing of the request (computed when the constraint was bound), else in
// the request's memo.
func (comp *composition) callback(i int) ref.Val {
	found := comp.c.fixed(i)
	if found == nil {
		key := comp.t.memoKey(comp.c, comp.scope, partVariable, i)
		found = comp.r.memo.variables[key]
		if found == nil {
			values := comp.t.parts[partVariable][i].values
			if values != nil {
				found, _ = values.lookup(comp, key.class).(*variableResult)
			}
			if found == nil || comp.Err() != nil {
				found = comp.evaluateVariable(i)
				if values != nil && comp.Err() == nil {
					values.remember(comp, key.class, found.reads, found)
				}
			}
			if comp.Err() == nil { // an interrupted evaluation is not the variable's value
				comp.r.memo.variables[key] = found
			}
		} else {
			comp.replay(found.reads)
		}
	} else {
		comp.replay(found.reads)
	}
	if found.reportCost {
		comp.reportCost(found.cost)
	}
	if comp.trace != nil {
		comp.traceVariable(i, found)
	}
	return found.value
}

func (comp *composition) evaluateVariable(i int) *variableResult {
	name, result := comp.t.variableNames[i], comp.t.variables[i]
	if result.Error != nil {
		return &variableResult{value: types.NewErr("composited variable %q fails to compile: %v", name, result.Error)}
	}
	out := &variableResult{}
	comp.push(&out.reads)
	v, details, err := result.Program.ContextEval(comp, &comp.act)
	comp.pop()
	if details == nil {
		out.value = types.NewErr("unable to get evaluation details of variable %q", name)
		return out
	}
	costPtr := details.ActualCost()
	if costPtr == nil {
		out.value = types.NewErr("unable to calculate cost of variable %q", name)
		return out
	}
	out.cost = int64(*costPtr)
	if *costPtr > math.MaxInt64 {
		out.cost = math.MaxInt64
	}
	out.reportCost = true
	if err != nil {
		out.value = types.NewErr("composited variable %q fails to evaluate: %v", name, err)
	} else {
		out.value = v
	}
	return out
}

// variablesMap is lazy.MapValue (k8s.io/apiserver pkg/cel/lazy/lazy.go) for one template's
// variables: each is resolved (its callback run) when first found in the context, then kept; it
// also notes which variables each evaluation reads.
type variablesMap struct {
	t        *Template
	values   []ref.Val
	resolved []bool
	comp     *composition
}

var (
	_ ref.Val       = (*variablesMap)(nil)
	_ traits.Mapper = (*variablesMap)(nil)
)

// Contains checks if the key is known to the map
func (m *variablesMap) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if v != nil && types.IsUnknownOrError(v) {
		return v
	}
	return types.Bool(found)
}

// Iterator returns an iterator to traverse the map.
func (m *variablesMap) Iterator() traits.Iterator {
	return &variablesIterator{parent: m, index: 0}
}

// Size returns the number of currently known fields
func (m *variablesMap) Size() ref.Val {
	return types.Int(len(m.t.variableNames))
}

// ConvertToNative returns an error because it is disallowed
func (m *variablesMap) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion from %q to %q", m.t.variablesType.TypeName(), typeDesc.Name())
}

// ConvertToType converts the map to the given type.
// Only its own type and "Type" type are allowed.
func (m *variablesMap) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case m.t.variablesType:
		return m
	case types.TypeType:
		return m.t.variablesType
	}
	return types.NewErr("disallowed conversion from %q to %q", m.t.variablesType.TypeName(), typeVal.TypeName())
}

// Equal returns true if the other object is the same pointer-wise.
func (m *variablesMap) Equal(other ref.Val) ref.Val {
	otherMap, ok := other.(*variablesMap)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(m == otherMap)
}

// Type returns its registered type.
func (m *variablesMap) Type() ref.Type {
	return m.t.variablesType
}

// Value is not allowed.
func (m *variablesMap) Value() any {
	return types.NoSuchOverloadErr()
}

// resolveField resolves the field. Calls the callback if the value is not yet stored.
func (m *variablesMap) resolveField(i int) ref.Val {
	if m.resolved[i] {
		return m.values[i]
	}
	m.comp.push(nil) // what resolving reads is the variable's, not the reader's
	v := m.comp.callback(i)
	m.comp.pop()
	m.values[i], m.resolved[i] = v, true
	return v
}

func (m *variablesMap) Find(key ref.Val) (ref.Val, bool) {
	n, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(n), true
	}
	name, ok := unescape(string(n))
	if !ok {
		return nil, false
	}
	i, exists := m.t.variableIndex[name]
	if !exists {
		return nil, false
	}
	m.comp.record(name)
	return m.resolveField(i), true
}

func (m *variablesMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if found {
		return v
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// unescape is apiservercel.Unescape (which lazy.MapValue.Find calls on every lookup), without its
// regular expression for the names it leaves unchanged: it rewrites only `__..__` sequences.
func unescape(name string) (string, bool) {
	if !strings.Contains(name, "__") {
		return name, true
	}
	return apiservercel.Unescape(name)
}

// variablesIterator is lazy.MapValue's iterator (its values, in the variables' order).
type variablesIterator struct {
	parent *variablesMap
	index  int
}

func (i *variablesIterator) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion to %q", typeDesc.Name())
}

func (i *variablesIterator) ConvertToType(typeValue ref.Type) ref.Val {
	return types.NewErr("disallowed conversion o %q", typeValue.TypeName())
}

func (i *variablesIterator) Equal(other ref.Val) ref.Val {
	otherIterator, ok := other.(*variablesIterator)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(otherIterator == i)
}

func (i *variablesIterator) Type() ref.Type {
	return types.IteratorType
}

func (i *variablesIterator) Value() any {
	return nil
}

func (i *variablesIterator) HasNext() ref.Val {
	return types.Bool(i.index < len(i.parent.t.variableNames))
}

func (i *variablesIterator) Next() ref.Val {
	ret := i.parent.Get(types.String(i.parent.t.variableNames[i.index]))
	i.index++
	return ret
}

var _ traits.Iterator = (*variablesIterator)(nil)
