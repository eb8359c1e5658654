package k8scel

import (
	"context"

	"github.com/google/cel-go/common/types/ref"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
)

// TracePart is what one part of a template gave while a constraint was decided (Explain): its value
// (encoded as Encode does) or its error, and the runtime cost it reported (for a match condition,
// validation or messageExpression: what it took from the budget, including the variables it read
// first). Evaluated is false for a variable the decision did not read, evaluated afterwards only to
// show its value. Scope is "validations" or "conditions" (match conditions see no namespaceObject).
type TracePart struct {
	Part      string   `json:"part"` // "variable", "matchCondition", "validation", "messageExpression"
	Index     int      `json:"index"`
	Name      string   `json:"name,omitempty"`
	Scope     string   `json:"scope"`
	Evaluated bool     `json:"evaluated"`
	Value     *Encoded `json:"value,omitempty"`
	Error     string   `json:"error,omitempty"`
	Cost      *int64   `json:"cost,omitempty"`
}

// Trace is what Explain records for one constraint.
type Trace struct {
	Parts []TracePart `json:"parts"`
}

var partNames = map[part]string{
	partVariable:   "variable",
	partCondition:  "matchCondition",
	partValidation: "validation",
	partMessage:    "messageExpression",
}

func (s scope) String() string {
	if s == scopeConditions {
		return "conditions"
	}
	return "validations"
}

// Explain decides constraint c on request r exactly as Validate does (the same validate, on the same
// composition; only the request's memo of decisions is not consulted, so that every part is seen
// evaluated or replayed) and records every part's result on the way. Afterwards the template's
// variables the decision did not read are evaluated in the validations' context, to be shown (marked
// not evaluated: they did not take part in the decision). The decisions are Validate's.
func (t *Template) Explain(ctx context.Context, r *Request, c *Constraint, budget int64) ([]Decision, Trace) {
	trace := &Trace{Parts: []TracePart{}}
	decisions := t.validateTraced(ctx, r, c, budget, trace)
	read := map[int]bool{}
	for _, p := range trace.Parts {
		if p.Part == "variable" && p.Scope == "validations" {
			read[p.Index] = true
		}
	}
	var missing []int
	for i := builtinVariables; i < len(t.variables); i++ {
		if !read[i-builtinVariables] {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 && ctx.Err() == nil {
		extra := &Trace{}
		comp := t.newComposition(ctx, r, c)
		comp.trace = extra
		comp.reset(scopeValidations)
		for _, i := range missing {
			if !comp.vars.resolved[i] {
				comp.vars.resolveField(i)
			}
		}
		for _, p := range extra.Parts {
			if p.Part == "variable" && !read[p.Index] {
				p.Evaluated = false
				trace.Parts = append(trace.Parts, p)
				read[p.Index] = true
			}
		}
	}
	return decisions, *trace
}

// validateTraced is validate with a trace attached to its composition.
func (t *Template) validateTraced(ctx context.Context, r *Request, c *Constraint, budget int64, trace *Trace) []Decision {
	saved := r.tracer
	r.tracer = trace
	defer func() { r.tracer = saved }()
	return t.validate(ctx, r, c, budget)
}

// tracePart records the result of one evaluation of forInput (err: the error that stopped the
// evaluation of the whole list, e.g. the budget running out).
func (comp *composition) tracePart(p part, index int, evaluation plugincel.EvaluationResult, cost int64, err error) {
	tp := TracePart{Part: partNames[p], Index: index, Scope: comp.scope.String(), Evaluated: true}
	if p == partCondition && index < len(comp.t.conditionNames) {
		tp.Name = comp.t.conditionNames[index]
	}
	switch {
	case err != nil:
		tp.Error = err.Error()
	case evaluation.Error != nil:
		tp.Error = evaluation.Error.Error()
	case evaluation.EvalResult != nil:
		tp.Value = encoded(evaluation.EvalResult)
	}
	if err == nil {
		tp.Cost = &cost
	}
	comp.trace.Parts = append(comp.trace.Parts, tp)
}

// traceVariable records the value of variable i as the variables map resolved it.
func (comp *composition) traceVariable(i int, found *variableResult) {
	if i < builtinVariables {
		return // anyObject and params: shown from the request and the constraint
	}
	tp := TracePart{Part: "variable", Index: i - builtinVariables, Name: comp.t.variableNames[i], Scope: comp.scope.String(), Evaluated: true}
	if found.value != nil {
		tp.Value = encoded(found.value)
		if tp.Value.T == "error" {
			tp.Error, _ = tp.Value.V.(string)
			tp.Value = nil
		}
	}
	if found.reportCost {
		cost := found.cost
		tp.Cost = &cost
	}
	comp.trace.Parts = append(comp.trace.Parts, tp)
}

func encoded(v ref.Val) *Encoded {
	e := Encode(v)
	return &e
}
