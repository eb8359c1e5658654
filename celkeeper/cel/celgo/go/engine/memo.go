package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types/ref"
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
)

type memoKey struct {
	t     *Template
	scope scope
	part  part
	index int
	class int64 // 0: the same for every constraint of the template
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

func newMemo() memo {
	return memo{
		variables:   map[memoKey]*variableResult{},
		expressions: map[memoKey]*exprResult{},
		decisions:   map[decisionsKey][]Decision{},
	}
}

// memoKey is the key of an evaluation of part p (index i) for constraint c.
func (t *Template) memoKey(c *Constraint, s scope, p part, i int) memoKey {
	key := memoKey{t: t, scope: s, part: p, index: i}
	if t.readsConstraint(p, i) && c != nil {
		key.class = c.class
	}
	return key
}

func (t *Template) readsConstraint(p part, i int) bool {
	switch p {
	case partVariable:
		return t.variableReads[i]
	case partCondition:
		return t.conditionReads[i]
	case partValidation:
		return t.validationReads[i]
	default:
		return t.messageReads[i]
	}
}

// dependencies finds, for every part, whether it may read the constraint (see the top of the file).
func (t *Template) dependencies(parseEnv *cel.Env, variables, conditions, validations, messages []string) {
	readsVariable := map[string]bool{}
	reads := func(source string) bool {
		if source == "" {
			return false
		}
		ast, iss := parseEnv.Parse(source)
		if iss.Err() != nil {
			return true // it does not compile: never evaluated
		}
		found := false
		visit(ast.NativeRep().Expr(), func(e celast.Expr, parent celast.Expr) {
			if e.Kind() != celast.IdentKind {
				return
			}
			switch e.AsIdent() {
			case "params":
				found = true
			case "variables":
				if parent == nil || parent.Kind() != celast.SelectKind || parent.AsSelect().Operand() != e {
					found = true // variables used as a whole: conservatively, every variable
				} else if readsVariable[parent.AsSelect().FieldName()] {
					found = true
				}
			}
		})
		return found
	}
	t.variableReads = make([]bool, len(variables))
	for i, source := range variables {
		t.variableReads[i] = reads(source)
		readsVariable[t.variableNames[i]] = t.variableReads[i]
	}
	// the variables that read nothing of the request: their results are the constraint's
	readsRequest := map[string]bool{}
	t.variableFixed = make([]bool, len(variables))
	for i, source := range variables {
		request := true
		if ast, iss := parseEnv.Parse(source); iss.Err() == nil {
			request = false
			visit(ast.NativeRep().Expr(), func(e celast.Expr, parent celast.Expr) {
				if e.Kind() != celast.IdentKind {
					return
				}
				switch e.AsIdent() {
				case "object", "oldObject", "request", "namespaceObject", "authorizer", DataVarName:
					request = true
				case "variables":
					if parent == nil || parent.Kind() != celast.SelectKind || parent.AsSelect().Operand() != e ||
						readsRequest[parent.AsSelect().FieldName()] {
						request = true
					}
				}
			})
		}
		readsRequest[t.variableNames[i]] = request
		t.variableFixed[i] = !request
	}
	t.conditionReads = mapBools(conditions, reads)
	t.validationReads = mapBools(validations, reads)
	t.messageReads = mapBools(messages, reads)
	// a template variable reading the constraint object itself: one class per constraint
	for i, source := range variables[builtinVariables:] {
		if t.variableReads[builtinVariables+i] && mentionsParams(parseEnv, source) {
			t.perConstraint = true
		}
	}
}

func mapBools(sources []string, f func(string) bool) []bool {
	out := make([]bool, len(sources))
	for i, s := range sources {
		out[i] = f(s)
	}
	return out
}

func mentionsParams(parseEnv *cel.Env, source string) bool {
	ast, iss := parseEnv.Parse(source)
	if iss.Err() != nil {
		return true
	}
	found := false
	visit(ast.NativeRep().Expr(), func(e celast.Expr, _ celast.Expr) {
		if e.Kind() == celast.IdentKind && e.AsIdent() == "params" {
			found = true
		}
	})
	return found
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
