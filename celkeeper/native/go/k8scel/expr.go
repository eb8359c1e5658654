package k8scel

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Variable is a template variable (name and expression).
type Variable struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
}

// Expression is one expression compiled as a template variable is (Gatekeeper's environment with
// `params` declared, after Gatekeeper's built-in variables and the given template variables), of
// any type: the expression-level engine used by tests, goldens and explanations. It evaluates with
// the variables of a template made of those variables (composition.go).
type Expression struct {
	t          *Template
	result     plugincel.CompilationResult
	OutputType string
}

// CompileError is an expression (or one of its variables) that does not compile.
type CompileError struct {
	Variable string // the variable whose expression does not compile ("" for the expression)
	Message  string // the first issue's message, or the whole error
	Line     int    // 1-based, 0 when unknown
	Column   int    // 1-based
	Full     string // every issue, as Kubernetes reports them
}

func (e *CompileError) Error() string { return e.Full }

// anyExpression accepts every output type (validating.Variable's ReturnTypes is AnyType too).
type anyExpression struct{ source string }

func (a anyExpression) GetExpression() string    { return a.source }
func (a anyExpression) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }

// CompileExpression compiles source after Gatekeeper's built-in variables and `variables`.
func CompileExpression(source string, variables []Variable) (*Expression, error) {
	// the names Gatekeeper refuses (schema.Source.Validate: reserved prefix, params, anyObject)
	src := schema.Source{}
	for _, v := range variables {
		src.Variables = append(src.Variables, schema.Variable{Name: v.Name, Expression: v.Expression})
	}
	if err := src.Validate(); err != nil {
		return nil, &CompileError{Message: err.Error(), Full: err.Error()}
	}
	compiler, err := compilers.acquire()
	if err != nil {
		return nil, err
	}
	defer compilers.release(compiler)
	compiler.begin(false)
	defer compiler.end()
	t := newTemplate()
	accessors := transform.AllVariablesCEL()
	for _, v := range variables {
		accessors = append(accessors, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	builtins := len(accessors) - len(variables)
	for i, v := range accessors {
		result := compiler.compileAndStoreVariable(v, celVarsWithParameters)
		if i >= builtins && result.Error != nil {
			ce := compileError(result)
			ce.Variable = v.GetName()
			return nil, ce
		}
		t.storeVariable(v.GetName(), result)
	}
	t.opaque() // nothing is shared between evaluations: every part reads the constraint, none is fixed
	result := compiler.compile(anyExpression{source}, celVarsWithParameters, environment.StoredExpressions)
	if result.Error != nil {
		return nil, compileError(result)
	}
	return &Expression{t: t, result: result, OutputType: result.OutputType.String()}, nil
}

func compileError(result plugincel.CompilationResult) *CompileError {
	ce := &CompileError{Message: result.Error.Error(), Full: result.Error.Error()}
	var compilation *apiservercel.CompilationError
	if errors.As(result.Error, &compilation) && len(compilation.Issues.Errors()) > 0 {
		d := issueDiagnostic("", 0, "", compilation.Issues.Errors()[0])
		ce.Message, ce.Line, ce.Column = d.Message, d.Line, d.Column
		ce.Full = compilation.Issues.String()
	}
	return ce
}

// Inputs are the values of one evaluation, as CEL sees them.
type Inputs struct {
	Object          any            `json:"object"`
	OldObject       any            `json:"oldObject"`
	Request         map[string]any `json:"request"`
	NamespaceObject any            `json:"namespaceObject"`
	Params          any            `json:"params"` // the constraint object (`params`)
}

// Evaluate evaluates the expression with the per-call cost limit Kubernetes gives it; an evaluation
// error is returned as err (its text as cel-go words it).
func (e *Expression) Evaluate(ctx context.Context, in Inputs) (ref.Val, error) {
	r := &Request{memo: newMemo(), object: in.Object, oldObject: in.OldObject, request: in.Request, namespace: in.NamespaceObject}
	c := &Constraint{params: in.Params, class: -constraintIDs.Add(1)}
	comp := e.t.newComposition(ctx, r, c)
	comp.reset(scopeValidations)
	value, _, err := e.result.Program.ContextEval(comp, &comp.act)
	if err != nil {
		return nil, err
	}
	if value == nil {
		return nil, fmt.Errorf("no value")
	}
	return value, nil
}
