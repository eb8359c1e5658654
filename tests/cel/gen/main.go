// Command gen compiles and evaluates CEL expressions exactly as Gatekeeper v3.23.1 compiles a
// template variable: k8s.io/apiserver v0.36.2's composited compiler on the base environment at
// environment.DefaultCompatibilityVersion() (1.35), stored expressions, with `params` declared and
// Gatekeeper's built-in variables (variables.anyObject, variables.params); cel-go v0.30.0. It writes
// one JSON result per case: the golden answers celkeeper's CEL tests compare both engines against.
// Run through tests/cel/golden/regenerate.py (`gen corpus`) and tests/cel/k8slib/golden/regenerate.py
// (`gen k8slib`); see corpus.go and k8slib.go for each input.
//
// A result is {"t": kind, "v": value}: values are encoded as the cel-go engine encodes them
// (celkeeper/native/go/k8scel/encode.go; only the encoding is shared), a compile error is
// {"t": "compile_error", "v": message}, an evaluation error {"t": "error", "v": message}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"celkeeper.local/native/k8scel"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/drivers/k8scel/transform"

	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

type result struct {
	T string `json:"t"`
	V any    `json:"v"`
}

type out struct {
	Type   string `json:"type"`
	Result result `json:"result"`
}

// encode is the cel-go engine's encoding of values (the engine's tests decode it the same way).
func encode(v ref.Val) result {
	return result(k8scel.Encode(v))
}

// anyExpression accepts every output type, as a template variable does.
type anyExpression string

func (a anyExpression) GetExpression() string    { return string(a) }
func (a anyExpression) ReturnTypes() []*cel.Type { return []*cel.Type{cel.AnyType} }

// compiler is Gatekeeper's compiler for a template's variables (driver.go AddTemplate).
func compiler() *plugincel.CompositedCompiler {
	c, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		fail(err)
	}
	c.CompileAndStoreVariables(transform.AllVariablesCEL(), plugincel.OptionalVariableDeclarations{HasParams: true}, environment.StoredExpressions)
	return c
}

// evaluate compiles expr as a template variable and evaluates it with vars (object, oldObject,
// request, params, namespaceObject). A failure to plan the program is reported as programError
// ("compile_error" or "program_error").
func evaluate(c *plugincel.CompositedCompiler, expr string, vars map[string]any, programError string) (o out) {
	compiled := c.CompileCELExpression(anyExpression(expr), plugincel.OptionalVariableDeclarations{HasParams: true}, environment.StoredExpressions)
	if compiled.Error != nil {
		var compilation *apiservercel.CompilationError
		if errors.As(compiled.Error, &compilation) {
			return out{"", result{"compile_error", compilation.Issues.Err().Error()}}
		}
		o.Result = result{programError, compiled.Error.Error()}
		return o
	}
	o.Type = compiled.OutputType.String()
	defer func() {
		if r := recover(); r != nil {
			o.Result = result{"panic", fmt.Sprint(r)}
		}
	}()
	ctx := c.CreateContext(context.Background())
	bindings := map[string]any{}
	for k, v := range vars {
		bindings[k] = v
	}
	activation, err := interpreter.NewActivation(bindings)
	if err != nil {
		fail(err)
	}
	bindings["variables"] = ctx.Variables(activation)
	val, _, err := compiled.Program.ContextEval(ctx, activation)
	if err != nil {
		o.Result = result{"error", err.Error()}
		return o
	}
	o.Result = encode(val)
	return o
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	modes := map[string]func(*json.Decoder) (any, error){"corpus": corpus, "k8slib": k8slib}
	if len(os.Args) != 2 || modes[os.Args[1]] == nil {
		fail(fmt.Errorf("usage: gen corpus|k8slib < request.json > results.json"))
	}
	results, err := modes[os.Args[1]](json.NewDecoder(os.Stdin))
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(results); err != nil {
		fail(err)
	}
}
