package k8scel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	celtypes "github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Decision is one non-admitting decision of validator.Validate: Action "deny" or "admit" (an error
// under failurePolicy Ignore), Evaluation "deny" or "error". Gatekeeper reports the decisions whose
// Action is "deny" as violations, with Message.
type Decision struct {
	Action     string `json:"action"`
	Evaluation string `json:"evaluation"`
	Message    string `json:"message"`
}

// PerCallLimit is the budget Gatekeeper's driver gives each constraint (celAPI.PerCallLimit).
const PerCallLimit = celconfig.PerCallLimit

func policyDecisionActionForError(f admissionregistrationv1.FailurePolicyType) validating.PolicyDecisionAction {
	if f == admissionregistrationv1.Ignore {
		return validating.ActionAdmit
	}
	return validating.ActionDeny
}

func errorDecision(f admissionregistrationv1.FailurePolicyType, message string) Decision {
	return Decision{Action: string(policyDecisionActionForError(f)), Evaluation: string(validating.EvalError), Message: message}
}

// ErrorDecision is the decision for an error that prevented the evaluation (e.g. the deadline passed
// before the constraint was evaluated), under the template's failure policy.
func (t *Template) ErrorDecision(message string) Decision {
	return errorDecision(*t.failurePolicy, message)
}

// Validate is validator.Validate (k8s.io/apiserver v0.36.2 pkg/admission/plugin/policy/validating/
// validator.go) for Gatekeeper's validator (no compile error, a matcher, no audit annotations, no
// authorizer), with the request's conversions taken from r instead of being recomputed and
// evaluations remembered in r (memo.go). It returns the decisions that do not admit, in order.
// budget is the runtime cost budget (PerCallLimit).
func (t *Template) Validate(ctx context.Context, r *Request, c *Constraint, budget int64) []Decision {
	key := decisionsKey{t, c.class}
	if found, ok := r.memo.decisions[key]; ok {
		return found
	}
	out := t.validate(ctx, r, c, budget)
	if ctx.Err() == nil { // an interrupted evaluation is not this class's answer
		r.memo.decisions[key] = out
	}
	return out
}

func (t *Template) validate(ctx context.Context, r *Request, c *Constraint, budget int64) []Decision {
	var f admissionregistrationv1.FailurePolicyType
	if t.failurePolicy == nil {
		f = admissionregistrationv1.Fail
	} else {
		f = *t.failurePolicy
	}
	comp := r.composition(ctx, t, c) // the evaluation contexts of this constraint, in turn
	defer r.recycle(comp)
	// v.celMatcher.Match(...) (matcher.go); Gatekeeper always has a matcher, which without conditions
	// matches (its ForInput evaluates nothing).
	if len(t.conditions) > 0 {
		matches, err := t.match(comp, f)
		if err != nil {
			return []Decision{errorDecision(f, err.Error())}
		}
		if !matches {
			return nil
		}
	}
	evalResults, remainingBudget, err := comp.forInput(t.validations, partValidation, scopeValidations, budget)
	if err != nil {
		return []Decision{errorDecision(f, err.Error())}
	}
	var out []Decision
	messageResults, _, err := comp.forInput(t.messages, partMessage, scopeValidations, remainingBudget)
	for i, evalResult := range evalResults {
		validation, ok := evalResult.ExpressionAccessor.(*validating.ValidationCondition)
		if !ok {
			out = append(out, errorDecision(f, "Invalid type sent to validator, expected ValidationCondition"))
			continue
		}
		var messageResult *plugincel.EvaluationResult
		if len(messageResults) > i {
			messageResult = &messageResults[i]
		}
		switch {
		case evalResult.Error != nil:
			out = append(out, errorDecision(f, evalResult.Error.Error()))
		case errors.Is(err, apiservercel.ErrInternal) || errors.Is(err, apiservercel.ErrOutOfBudget):
			out = append(out, errorDecision(f, fmt.Sprintf("failed messageExpression: %s", err)))
		case evalResult.EvalResult != celtypes.True:
			out = append(out, Decision{
				Action:     string(validating.ActionDeny),
				Evaluation: string(validating.EvalDeny),
				Message:    denyMessage(validation, messageResult),
			})
		}
	}
	// The audit annotations filter of Gatekeeper's validator has no expressions: nothing to evaluate.
	return out
}

// denyMessage is validator.go's "decide the failure message".
func denyMessage(validation *validating.ValidationCondition, messageResult *plugincel.EvaluationResult) string {
	var message string
	if messageResult != nil && messageResult.Error == nil && messageResult.EvalResult != nil {
		// also fallback if the eval result is non-string (including null) or whitespaces.
		if s, ok := messageResult.EvalResult.Value().(string); ok {
			message = strings.TrimSpace(s)
			if len(message) > celconfig.MaxEvaluatedMessageExpressionSizeBytes {
				message = ""
			}
			if strings.ContainsAny(message, "\n") {
				message = ""
			}
		}
	}
	if message == "" && len(validation.Message) > 0 {
		message = strings.TrimSpace(validation.Message)
	}
	if message == "" {
		message = fmt.Sprintf("failed expression: %v", strings.TrimSpace(validation.Expression))
	}
	return message
}

// match is matcher.Match (k8s.io/apiserver pkg/admission/plugin/webhook/matchconditions/matcher.go):
// the conditions are evaluated without a namespace, with the match conditions' budget.
func (t *Template) match(comp *composition, f admissionregistrationv1.FailurePolicyType) (bool, error) {
	evalResults, _, err := comp.forInput(t.conditions, partCondition, scopeConditions, celconfig.RuntimeCELCostBudgetMatchConditions)
	if err != nil {
		if f == admissionregistrationv1.Fail {
			return false, err
		}
		return false, nil
	}
	var errorList []error
	for _, evalResult := range evalResults {
		if evalResult.Error != nil {
			errorList = append(errorList, evalResult.Error)
		}
		if evalResult.EvalResult == celtypes.False {
			return false, nil
		}
	}
	if len(errorList) > 0 {
		if f == admissionregistrationv1.Fail {
			return false, utilerrors.NewAggregate(errorList)
		}
		return false, nil
	}
	return true, nil
}

// forInput is CompositedConditionEvaluator.ForInput then condition.ForInput (composition.go,
// condition.go): a new composition context and activation, every result evaluated in order sharing
// one budget. Without anything to evaluate, there is no context to make.
func (comp *composition) forInput(results []plugincel.CompilationResult, p part, s scope, budget int64) ([]plugincel.EvaluationResult, int64, error) {
	evaluations := comp.resultsFor(p, len(results))
	remainingBudget := budget
	fresh := false
	var err error
	for i, compilationResult := range results {
		if compilationResult.ExpressionAccessor == nil { // a placeholder: evaluates nothing
			continue
		}
		if !fresh {
			comp.reset(s)
			fresh = true
		}
		before := remainingBudget
		evaluations[i], remainingBudget, err = comp.evaluate(p, i, compilationResult, remainingBudget)
		if comp.trace != nil {
			comp.tracePart(p, i, evaluations[i], before-remainingBudget, err)
		}
		if err != nil {
			return nil, -1, err
		}
	}
	return evaluations, remainingBudget, nil
}

// activation is activation.go's evaluationActivation (no authorizer: Gatekeeper passes none).
type activation struct {
	object, oldObject, params, namespace any
	variables                            ref.Val
	r                                    *Request // its requestValue is `request`
	data                                 ref.Val  // synced data, for a template that reads it (inventory.go)
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case plugincel.ObjectVarName:
		return a.object, true
	case plugincel.OldObjectVarName:
		return a.oldObject, true
	case plugincel.ParamsVarName:
		return a.params, true // params may be null
	case plugincel.RequestVarName:
		return a.r.requestValue(), true
	case plugincel.NamespaceVarName:
		return a.namespace, true
	case plugincel.VariableVarName: // variables always present
		return a.variables, true
	case DataVarName: // declared only for templates that read synced data
		if a.data == nil {
			return nil, false
		}
		return a.data, true
	default:
		return nil, false
	}
}

func (a *activation) Parent() interpreter.Activation {
	return nil
}

// evaluate is evaluationActivation.Evaluate (activation.go), line for line but the timing, with the
// program's evaluation remembered (composition.go).
func (comp *composition) evaluate(p part, index int, compilationResult plugincel.CompilationResult, remainingBudget int64) (plugincel.EvaluationResult, int64, error) {
	var evaluation = plugincel.EvaluationResult{}
	if compilationResult.ExpressionAccessor == nil { // in case of placeholder
		return evaluation, remainingBudget, nil
	}
	evaluation.ExpressionAccessor = compilationResult.ExpressionAccessor
	if compilationResult.Error != nil {
		evaluation.Error = &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("compilation error: %v", compilationResult.Error),
			Cause:  compilationResult.Error,
		}
		return evaluation, remainingBudget, nil
	}
	if compilationResult.Program == nil {
		evaluation.Error = &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: "unexpected internal error compiling expression",
		}
		return evaluation, remainingBudget, nil
	}
	key := comp.t.memoKey(comp.c, comp.scope, p, index)
	result := comp.r.memo.expressions[key]
	if result == nil {
		values := comp.t.parts[p][index].values
		if values != nil {
			result, _ = values.lookup(comp, key.class).(*exprResult)
		}
		if result == nil || comp.Err() != nil {
			result = &exprResult{}
			comp.push(&result.reads)
			value, evalDetails, err := compilationResult.Program.ContextEval(comp, &comp.act)
			comp.pop()
			result.value, result.err, result.details = value, err, evalDetails != nil
			if evalDetails != nil {
				result.cost = evalDetails.ActualCost()
			}
			if values != nil && comp.Err() == nil {
				values.remember(comp, key.class, result.reads, result)
			}
		}
		if comp.Err() == nil { // an interrupted evaluation is not the expression's result
			comp.r.memo.expressions[key] = result
		}
	} else {
		comp.replay(result.reads)
	}
	compositionCost := comp.GetAndResetCost()
	if compositionCost > remainingBudget {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: "validation failed due to running out of cost budget, no further validation rules will be run",
			Cause:  apiservercel.ErrOutOfBudget,
		}
	}
	remainingBudget -= compositionCost
	if !result.details {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", compilationResult.ExpressionAccessor.GetExpression()),
		}
	}
	rtCost := result.cost
	if rtCost == nil {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("runtime cost could not be calculated for expression: %v, no further expression will be run", compilationResult.ExpressionAccessor.GetExpression()),
			Cause:  apiservercel.ErrOutOfBudget,
		}
	}
	if *rtCost > math.MaxInt64 || int64(*rtCost) > remainingBudget {
		return evaluation, -1, &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: "validation failed due to running out of cost budget, no further validation rules will be run",
			Cause:  apiservercel.ErrOutOfBudget,
		}
	}
	remainingBudget -= int64(*rtCost)
	if result.err != nil {
		evaluation.Error = &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInvalid,
			Detail: fmt.Sprintf("expression '%v' resulted in error: %v", compilationResult.ExpressionAccessor.GetExpression(), result.err),
		}
	} else {
		evaluation.EvalResult = result.value
	}
	return evaluation, remainingBudget, nil
}
