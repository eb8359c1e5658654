// Package engine evaluates Gatekeeper K8sNativeValidation templates exactly as Gatekeeper v3.23.1's
// CEL driver does (pkg/drivers/k8scel/driver.go), on Kubernetes' own CEL code (k8s.io/apiserver
// v0.36.2, cel-go v0.30.0: the versions Gatekeeper v3.23.1 is built with).
//
// Templates are compiled once (CompileTemplate, mirroring Driver.AddTemplate), constraints are
// decoded once (NewConstraint), and a request is converted once (NewRequest) and then validated
// against any number of (template, constraint) pairs (Validate, mirroring validator.Validate with the
// per-request conversions done once). reference.go holds Gatekeeper's own path, which the tests
// compare this one with.
package k8scel

import (
	"errors"
	"fmt"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
	templates "github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Diagnostic is one compile problem of a template part, for lint, template status and verify -v.
// Line and Column are 1-based positions within the part's expression (0 when unknown).
type Diagnostic struct {
	Part    string `json:"part"` // "variable", "validation", "messageExpression", "matchCondition"
	Index   int    `json:"index"`
	Name    string `json:"name,omitempty"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// Template is a compiled K8sNativeValidation source: what Driver.AddTemplate builds, kept as
// compilation results so that Validate can evaluate them with per-request values computed once.
type Template struct {
	failurePolicy *admissionregistrationv1.FailurePolicyType
	// the compiled variables by name, as the composition state keeps them (a name defined twice: the
	// last definition), Gatekeeper's built-in variables first, then the template's
	variableNames  []string
	variableIndex  map[string]int
	variables      []plugincel.CompilationResult
	variablesType  *types.Type                   // the `variables` map's type (kubernetes.variables)
	conditions     []plugincel.CompilationResult // matchCondition
	conditionNames []string
	validations    []plugincel.CompilationResult
	messages       []plugincel.CompilationResult // one per validation; zero value where none is given
	Diagnostics    []Diagnostic

	// what the analysis found about each part, which variables read nothing of the request
	// (memo.go), and the parameter classes of its constraints
	parts         [parts][]partInfo
	variableFixed []bool
	redefined     bool // a variable name is defined twice (the last definition is kept)
	perConstraint bool
	// a part uses `variables` other than by selecting a field (its value may be the variables map)
	wholeVariables bool
	classes        classes

	// the kinds of synced data the template reads (none: `data` is not declared)
	dataKinds []DataKind
}

// builtinVariables is the number of Gatekeeper's built-in variables (anyObject, params).
var builtinVariables = len(transform.AllVariablesCEL())

// Options of the compilers, as Driver.AddTemplate declares them: the template's variables may read
// `params` (the constraint), nothing else may.
var (
	celVars               = plugincel.OptionalVariableDeclarations{}
	celVarsWithParameters = plugincel.OptionalVariableDeclarations{HasParams: true}
)

// SourceFromMap reads a K8sNativeValidation `source` as Gatekeeper does (schema.GetSource: decoded
// without strictness, then validated: reserved names, failure policy).
func SourceFromMap(source map[string]any) (*schema.Source, error) {
	return schema.GetSource(templates.Code{Engine: schema.Name, Source: &templates.Anything{Value: source}})
}

// CompileTemplate compiles a K8sNativeValidation source as Driver.AddTemplate does. An error means
// Gatekeeper refuses the template; compile errors of its expressions do not: they are kept (and
// reported per request, as Gatekeeper reports them) and listed in Diagnostics.
func CompileTemplate(source map[string]any) (*Template, error) {
	return CompileTemplateReading(source, nil)
}

// CompileTemplateReading compiles a template that reads synced data of the given kinds (none: a
// Gatekeeper template, CompileTemplate): its expressions are compiled with `data` declared.
func CompileTemplateReading(source map[string]any, dataKinds []DataKind) (*Template, error) {
	compiler, err := compilers.acquire()
	if err != nil {
		return nil, err
	}
	defer compilers.release(compiler)
	return compileTemplate(compiler, source, dataKinds)
}

// compileTemplate is CompileTemplateReading on this compiler.
func compileTemplate(compiler *templateCompiler, source map[string]any, dataKinds []DataKind) (*Template, error) {
	src, err := SourceFromMap(source)
	if err != nil {
		return nil, err
	}
	vapVars := transform.AllVariablesCEL()
	vapVarsSuffix, err := src.GetVariables()
	if err != nil {
		return nil, err
	}
	vapVars = append(vapVars, vapVarsSuffix...)
	// the CompositedCompiler Driver.AddTemplate makes for each template (compiler.go)
	compiler.begin(len(dataKinds) > 0)
	defer compiler.end()
	t := newTemplate()
	t.dataKinds = append([]DataKind(nil), dataKinds...)
	// filterCompiler.CompileAndStoreVariables(vapVars, celVarsWithParameters, StoredExpressions),
	// one variable at a time to keep each result (CompileAndStoreVariables is exactly this loop).
	builtins := len(vapVars) - len(vapVarsSuffix)
	var variableSources []string
	var variableFacts []facts
	for i, v := range vapVars {
		result, read := compiler.compileReading(v, celVarsWithParameters, environment.StoredExpressions)
		result = compiler.storeVariable(v, result)
		if at := t.storeVariable(v.GetName(), result); at == len(variableSources) {
			variableSources = append(variableSources, v.GetExpression())
			variableFacts = append(variableFacts, read)
		} else {
			variableSources[at] = v.GetExpression()
			variableFacts[at] = read
		}
		if i >= builtins {
			t.diagnose("variable", i-builtins, v.GetName(), result)
		}
	}
	if t.failurePolicy, err = src.GetFailurePolicy(); err != nil {
		return nil, err
	}
	matchAccessors, err := src.GetMatchConditions()
	if err != nil {
		return nil, err
	}
	var conditionsFacts []facts
	t.conditions, conditionsFacts = compileCondition(compiler, matchAccessors, celVars)
	validationAccessors, err := src.GetValidations()
	if err != nil {
		return nil, err
	}
	var validationsFacts []facts
	t.validations, validationsFacts = compileCondition(compiler, validationAccessors, celVars)
	messageAccessors, err := src.GetMessageExpressions()
	if err != nil {
		return nil, err
	}
	var messagesFacts []facts
	t.messages, messagesFacts = compileCondition(compiler, messageAccessors, celVars)
	for i, r := range t.conditions {
		t.conditionNames = append(t.conditionNames, src.MatchConditions[i].Name)
		t.diagnose("matchCondition", i, src.MatchConditions[i].Name, r)
	}
	for i := range t.validations {
		t.diagnose("validation", i, "", t.validations[i])
		t.diagnose("messageExpression", i, "", t.messages[i])
	}
	t.dependencies(
		[parts][]string{variableSources, sources(matchAccessors), sources(validationAccessors), sources(messageAccessors)},
		[parts][]facts{variableFacts, conditionsFacts, validationsFacts, messagesFacts},
	)
	return t, nil
}

// storeVariable keeps a compiled variable as the composition state does (compositionState
// compiledVariables: a name compiled again replaces the earlier one); its position.
func (t *Template) storeVariable(name string, result plugincel.CompilationResult) int {
	if at, seen := t.variableIndex[name]; seen {
		t.variables[at] = result
		t.redefined = true
		return at
	}
	t.variableIndex[name] = len(t.variables)
	t.variableNames = append(t.variableNames, name)
	t.variables = append(t.variables, result)
	return len(t.variables) - 1
}

// newTemplate is a template without parts: the variables map's type as lazy.NewMapValue makes it.
func newTemplate() *Template {
	return &Template{
		variablesType: types.NewTypeValue(variablesTypeName, traits.IndexerType|traits.FieldTesterType|traits.IterableType),
		variableIndex: map[string]int{},
	}
}

// variablesTypeName is the type of `variables` (composition.go).
const variablesTypeName = "kubernetes.variables"

func sources(accessors []plugincel.ExpressionAccessor) []string {
	out := make([]string, len(accessors))
	for i, a := range accessors {
		if a != nil {
			out[i] = a.GetExpression()
		}
	}
	return out
}

// compileCondition is conditionCompiler.CompileCondition (k8s.io/apiserver
// pkg/admission/plugin/cel/condition.go) keeping the results, with each expression's facts (memo.go):
// nil accessors stay zero results and zero facts.
func compileCondition(compiler *templateCompiler, accessors []plugincel.ExpressionAccessor, options plugincel.OptionalVariableDeclarations) ([]plugincel.CompilationResult, []facts) {
	results := make([]plugincel.CompilationResult, len(accessors))
	read := make([]facts, len(accessors))
	for i, accessor := range accessors {
		if accessor == nil {
			continue
		}
		results[i], read[i] = compiler.compileReading(accessor, options, environment.StoredExpressions)
	}
	return results, read
}

// DataKinds are the kinds of synced data the template reads.
func (t *Template) DataKinds() []DataKind { return t.dataKinds }

// FailurePolicy is "Fail" or "Ignore".
func (t *Template) FailurePolicy() string {
	return string(*t.failurePolicy)
}

func (t *Template) diagnose(part string, index int, name string, result plugincel.CompilationResult) {
	if result.Error == nil {
		return
	}
	var compilation *apiservercel.CompilationError
	if errors.As(result.Error, &compilation) && len(compilation.Issues.Errors()) > 0 {
		for _, issue := range compilation.Issues.Errors() {
			t.Diagnostics = append(t.Diagnostics, issueDiagnostic(part, index, name, issue))
		}
		return
	}
	t.Diagnostics = append(t.Diagnostics, Diagnostic{Part: part, Index: index, Name: name, Message: result.Error.Error()})
}

func issueDiagnostic(part string, index int, name string, issue *common.Error) Diagnostic {
	d := Diagnostic{Part: part, Index: index, Name: name, Message: issue.Message}
	if loc := issue.Location; loc != nil && loc.Line() > 0 {
		d.Line, d.Column = loc.Line(), loc.Column()+1
	}
	return d
}

// String names the template's parts, for test failures.
func (t *Template) String() string {
	return fmt.Sprintf("template(%d variables, %d conditions, %d validations)", len(t.variables), len(t.conditions), len(t.validations))
}
