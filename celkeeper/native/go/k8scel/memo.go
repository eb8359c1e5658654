package k8scel

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

// Why remembering is exact. An evaluation reads only its inputs: the request's values (object,
// oldObject, request, and namespaceObject outside match conditions; synced data, read in one
// transaction per request: the same within a request, so never remembered beyond one), the constraint (`params`,
// through `variables.params` outside variables: Gatekeeper declares `params` for variables only),
// and other variables. Within one request, evaluating the same compiled expression on the same
// inputs gives the same value, the same error and the same actual cost (cel-go's cost is a function
// of the evaluation; Kubernetes' own evaluation order over a map's keys is unspecified, and a
// remembered result is one of its possible results). So a request remembers, per template, part and
// index: for parts that cannot read the constraint, one result (shared by every constraint of the
// template); for the others, one result per *parameter class* - the constraints whose parameters
// (and the presence of spec and spec.parameters, which the cost of `variables.params` depends on)
// are equal, or each constraint alone when a template variable reads `params` itself. A constraint
// whose parameter class was decided already in the request gets the same decisions.
//
// Templates share too. Two parts that cannot read the constraint, with the same expression, compiled
// in the same environment (a variable's, or a validation's, message's or match condition's), whose
// `variables.X` name variables that are themselves the same in this sense, are checked into the
// same program: the same declarations, the same types for every name they use. Their evaluations in
// one request are then the same evaluation, remembered once under the part's *identity* (a hash of
// the expression and of the identities of the variables it names): Gatekeeper's `anyObject`, or a
// `containers` variable written alike in many templates, is evaluated once per request. A template
// that defines a variable name twice, a part that does not compile or that names such a variable,
// or that uses `variables` other than by selecting a field, keeps an identity of its own.
//
// Requests share what cannot differ between them (valuememo.go): a part that reads nothing of the
// request itself, only variables, is a function of the values of the variables it reads (and of the
// constraint's class).
//
// Static analysis is conservative: a part reads the constraint when its syntax mentions `params`
// anywhere, uses `variables` other than by selecting a field, or selects a variable that does.

type scope uint8

const (
	scopeConditions  scope = iota // match conditions: no namespaceObject
	scopeValidations              // validations and messageExpressions
)

type part uint8

const (
	partVariable part = iota
	partCondition
	partValidation
	partMessage
	parts // the number of parts
)

// partInfo is what the analysis found about one part of a template (a variable, a condition, a
// validation, a message expression).
type partInfo struct {
	readsConstraint bool                  // it may read the constraint: remembered per parameter class
	id              unique.Handle[string] // its evaluation's identity in a request's memo
	values          *valueMemo            // its results across requests (nil: not remembered)
}

type memoKey struct {
	id    unique.Handle[string]
	scope scope
	class int64 // 0: the same for every constraint
}

// exprResult is what evaluating one top-level expression produced (Program.ContextEval).
type exprResult struct {
	value   ref.Val
	err     error
	details bool    // evaluation details were returned
	cost    *uint64 // the actual cost, when known
	reads   []string
}

type decisionsKey struct {
	t     *Template
	class int64
}

// memo is a request's remembered results.
type memo struct {
	variables   map[memoKey]*variableResult
	expressions map[memoKey]*exprResult
	decisions   map[decisionsKey][]Decision
}

func newMemo() *memo {
	return &memo{
		variables:   map[memoKey]*variableResult{},
		expressions: map[memoKey]*exprResult{},
		decisions:   map[decisionsKey][]Decision{},
	}
}

// memos holds the memos of decided requests, emptied (their maps keep the room they grew to: a
// request remembers about as many results as the one before).
var memos = sync.Pool{New: func() any { return newMemo() }}

// maxKeptMemo bounds the results a pooled memo was holding (a larger one is dropped).
const maxKeptMemo = 4096

// release empties the memo and gives it back to memos (nothing reads it after: its request is decided).
func (m *memo) release() {
	if len(m.variables)+len(m.expressions)+len(m.decisions) > maxKeptMemo {
		return
	}
	clear(m.variables)
	clear(m.expressions)
	clear(m.decisions)
	memos.Put(m)
}

// memoKey is the key of an evaluation of part p (index i) for constraint c.
func (t *Template) memoKey(c *Constraint, s scope, p part, i int) memoKey {
	info := &t.parts[p][i]
	key := memoKey{id: info.id, scope: s}
	if info.readsConstraint && c != nil {
		key.class = c.class
	}
	return key
}

func (t *Template) readsConstraint(p part, i int) bool {
	return t.parts[p][i].readsConstraint
}

// facts are what an expression's syntax says about what it reads.
type facts struct {
	parsed         bool     // false: it does not parse (it does not compile: never evaluated)
	params         bool     // it names `params`
	request        bool     // it names object, oldObject, request, namespaceObject, authorizer or data
	data           bool     // it names data (synced data: what it holds depends on the template)
	wholeVariables bool     // it uses `variables` other than by selecting a field
	variables      []string // the variables it selects, each once, in order
}

// factsOfParsed reads the facts of a parsed expression (the compiler's parse, before it is checked:
// templateCompiler.compileReading); an expression that does not parse has zero facts.
func factsOfParsed(ast *cel.Ast) facts {
	f := facts{parsed: true}
	visit(ast.NativeRep().Expr(), func(e celast.Expr, parent celast.Expr) {
		if e.Kind() != celast.IdentKind {
			return
		}
		switch e.AsIdent() {
		case "params":
			f.params = true
		case "object", "oldObject", "request", "namespaceObject", "authorizer":
			f.request = true
		case DataVarName: // changes between requests, and each template sees the kinds it declares
			f.request, f.data = true, true
		case "variables":
			if parent == nil || parent.Kind() != celast.SelectKind || parent.AsSelect().Operand() != e {
				f.wholeVariables = true
			} else if name := parent.AsSelect().FieldName(); !slices.Contains(f.variables, name) {
				f.variables = append(f.variables, name)
			}
		}
	})
	return f
}

var templateIDs atomic.Int64

// dependencies analyses every part (see the top of the file) from its source and the facts of its
// expression (variables, conditions, validations, messages; an empty source has zero facts): which
// may read the constraint, which variables read nothing of the request, the parts' identities, which
// results requests may share.
func (t *Template) dependencies(sources [parts][]string, all [parts][]facts) {
	results := [parts][]plugincel.CompilationResult{t.variables, t.conditions, t.validations, t.messages}
	variables := sources[partVariable]
	// a part reads the constraint if it names params, uses variables as a whole, or selects a
	// variable that reads it (a variable names only those before it: one pass in order)
	readsVariable := map[string]bool{}
	readsConstraint := func(f facts) bool {
		if !f.parsed || f.params || f.wholeVariables {
			return true
		}
		for _, name := range f.variables {
			if readsVariable[name] {
				return true
			}
		}
		return false
	}
	// the variables that read nothing of the request: their results are the constraint's
	readsRequest := map[string]bool{}
	t.variableFixed = make([]bool, len(variables))
	for i, f := range all[partVariable] {
		name := t.variableNames[i]
		readsVariable[name] = sources[partVariable][i] != "" && readsConstraint(f)
		request := !f.parsed || f.request || f.wholeVariables
		for _, v := range f.variables {
			request = request || readsRequest[v]
		}
		readsRequest[name] = request
		t.variableFixed[i] = !request
	}
	// the identities: shared by equal parts (see the top of the file) or the template's own
	shareable := !t.redefined
	template := templateIDs.Add(1)
	shared := map[string]string{} // variable name -> its shared identity ("": its own)
	identity := func(p part, i int, f facts) unique.Handle[string] {
		own := unique.Make(fmt.Sprintf("t%d/%d/%d", template, p, i))
		if !shareable || f.data || results[p][i].Error != nil || results[p][i].Program == nil || readsConstraint(f) {
			return own
		}
		kind := "e" // validations, messages and conditions compile in one environment, variables in another
		if p == partVariable {
			kind = "v"
		}
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00", kind, sources[p][i])
		names := slices.Clone(f.variables)
		slices.Sort(names)
		for _, name := range names {
			id, ok := shared[name]
			if !ok || id == "" {
				return own
			}
			fmt.Fprintf(h, "%s=%s\x00", name, id)
		}
		return unique.Make("s/" + hex.EncodeToString(h.Sum(nil)))
	}
	for p := range parts {
		t.parts[p] = make([]partInfo, len(sources[p]))
		for i, f := range all[p] {
			info := &t.parts[p][i]
			t.wholeVariables = t.wholeVariables || f.wholeVariables
			if p == partVariable {
				info.readsConstraint = readsVariable[t.variableNames[i]]
			} else {
				info.readsConstraint = sources[p][i] != "" && readsConstraint(f)
			}
			info.id = identity(p, i, f)
			if p == partVariable {
				if s := info.id.Value(); strings.HasPrefix(s, "s/") {
					shared[t.variableNames[i]] = s
				} else {
					shared[t.variableNames[i]] = ""
				}
			}
			if f.parsed && !f.request && !f.wholeVariables && results[p][i].Error == nil && results[p][i].Program != nil {
				info.values = newValueMemo(p == partVariable)
			}
		}
	}
	// a template variable reading the constraint object itself: one class per constraint
	for i, f := range all[partVariable][builtinVariables:] {
		if t.parts[partVariable][builtinVariables+i].readsConstraint && (f.params || !f.parsed) {
			t.perConstraint = true
		}
	}
}

// opaque gives every part its own identity, reading the constraint, remembered in no request (the
// expression-level engine: nothing is shared).
func (t *Template) opaque() {
	template := templateIDs.Add(1)
	results := [parts][]plugincel.CompilationResult{t.variables, t.conditions, t.validations, t.messages}
	for p := range parts {
		t.parts[p] = make([]partInfo, len(results[p]))
		for i := range t.parts[p] {
			t.parts[p][i] = partInfo{readsConstraint: true, id: unique.Make(fmt.Sprintf("t%d/%d/%d", template, p, i))}
		}
	}
	t.variableFixed = make([]bool, len(t.variables))
	t.wholeVariables = true // nothing is known of what its parts read
}

// visit calls f on every node with its parent (nil for the root).
func visit(root celast.Expr, f func(e, parent celast.Expr)) {
	var walk func(e, parent celast.Expr)
	walk = func(e, parent celast.Expr) {
		if e == nil {
			return
		}
		f(e, parent)
		switch e.Kind() {
		case celast.CallKind:
			call := e.AsCall()
			if call.IsMemberFunction() {
				walk(call.Target(), e)
			}
			for _, a := range call.Args() {
				walk(a, e)
			}
		case celast.SelectKind:
			walk(e.AsSelect().Operand(), e)
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el, e)
			}
		case celast.MapKind:
			for _, entry := range e.AsMap().Entries() {
				me := entry.AsMapEntry()
				walk(me.Key(), e)
				walk(me.Value(), e)
			}
		case celast.StructKind:
			for _, field := range e.AsStruct().Fields() {
				walk(field.AsStructField().Value(), e)
			}
		case celast.ComprehensionKind:
			comp := e.AsComprehension()
			walk(comp.IterRange(), e)
			walk(comp.AccuInit(), e)
			walk(comp.LoopCondition(), e)
			walk(comp.LoopStep(), e)
			walk(comp.Result(), e)
		}
	}
	walk(root, nil)
}

var constraintIDs atomic.Int64

// classes interns the parameter classes of a template's constraints.
type classes struct {
	mu   sync.Mutex
	byID map[string]int64
}

// classOf is the parameter class of a constraint object of template t.
func (t *Template) classOf(object map[string]any) int64 {
	if t.perConstraint {
		return -constraintIDs.Add(1)
	}
	var key strings.Builder
	spec, hasSpec := object["spec"].(map[string]any)
	parameters, hasParameters := spec["parameters"]
	fmt.Fprintf(&key, "%t%t", hasSpec, hasParameters)
	canonical(&key, parameters)
	t.classes.mu.Lock()
	defer t.classes.mu.Unlock()
	if t.classes.byID == nil {
		t.classes.byID = map[string]int64{}
	}
	id, ok := t.classes.byID[key.String()]
	if !ok {
		id = int64(len(t.classes.byID) + 1)
		t.classes.byID[key.String()] = id
	}
	return id
}

// canonical writes an unstructured value with its types (1 and 1.0 are different CEL values).
func canonical(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("n")
	case bool:
		fmt.Fprintf(b, "b%t", x)
	case int64:
		b.WriteString("i" + strconv.FormatInt(x, 10))
	case float64:
		if math.IsNaN(x) {
			b.WriteString("fNaN")
		} else {
			b.WriteString("f" + strconv.FormatFloat(x, 'g', -1, 64))
		}
	case string:
		b.WriteString("s" + strconv.Quote(x))
	case []any:
		b.WriteString("[")
		for _, e := range x {
			canonical(b, e)
			b.WriteString(",")
		}
		b.WriteString("]")
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString("{")
		for _, k := range keys {
			b.WriteString(strconv.Quote(k) + ":")
			canonical(b, x[k])
			b.WriteString(",")
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "?%T%v", v, v) // not produced by JSON decoding
	}
}
