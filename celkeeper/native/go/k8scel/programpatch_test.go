package k8scel

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
)

// The library is built with celkeeper's copies of cel-go's cel/program.go and cel/env.go (celkeeper/
// native/go/_patches, docs/known-issues.md): the programs of an environment whose options add no
// function share one dispatcher of the environment's functions, made by the first of them, instead of
// each filling a map with every overload of the environment. Run with CELKEEPER_UPSTREAM_COST=1 on the
// module as it is (no patched go.mod: tests/native/test_locate_patches.py does it), the test shows
// instead that upstream cel-go still fills one per program; when a cel-go release passes it in that
// mode, the copies can go.

func TestProgramsOfAnEnvironmentShareItsDispatcher(t *testing.T) {
	env, err := cel.NewEnv(ext.Strings(), ext.Lists(), ext.Sets(), ext.Math(), ext.Encoders())
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(`"a".upperAscii() == "A"`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	if _, err := env.Program(ast); err != nil { // the first program (with the copies: the shared dispatcher)
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const programs = 50
	for range programs {
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		if out, _, err := prg.Eval(cel.NoVars()); err != nil || out != types.True {
			t.Fatalf("%v, %v", out, err)
		}
	}
	runtime.ReadMemStats(&after)
	perProgram := float64(after.TotalAlloc-before.TotalAlloc) / programs
	// every overload of the environment in a map of its own: tens of kilobytes; the plan of this
	// expression and its evaluation: a few
	t.Logf("%.0f bytes per program", perProgram)
	const most = 8 << 10
	if upstreamCost {
		if perProgram <= most {
			t.Errorf("upstream cel-go's programs allocate %.0f bytes each: it no longer fills a dispatcher per program: drop the copies of program.go and env.go", perProgram)
		}
		return
	}
	if perProgram > most {
		t.Errorf("a program of an environment whose dispatcher is made allocates %.0f bytes, more than %d", perProgram, most)
	}
}

// A program whose options add functions dispatches with its own dispatcher: its functions are its own,
// and one named as the environment's is refused, as upstream refuses it.
func TestAProgramsOwnFunctionsAreItsOwn(t *testing.T) {
	env, err := cel.NewEnv(
		cel.Function("shout", cel.Overload("shout_string", []*cel.Type{cel.StringType}, cel.StringType)),
		cel.Function("twice", cel.Overload("twice_int", []*cel.Type{cel.IntType}, cel.IntType,
			cel.UnaryBinding(func(v ref.Val) ref.Val { return v.(types.Int) * 2 }))))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(`shout("hi")`)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	shout := &functions.Overload{Operator: "shout_string", Unary: func(v ref.Val) ref.Val {
		return types.String(strings.ToUpper(string(v.(types.String))))
	}}
	bound, err := env.Program(ast, cel.Functions(shout))
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := bound.Eval(cel.NoVars()); err != nil || out != types.String("HI") {
		t.Fatalf("with its own binding: %v, %v", out, err)
	}
	unbound, err := env.Program(ast) // the environment's dispatcher: no binding of shout
	if err != nil {
		t.Fatal(err)
	}
	if out, _, err := unbound.Eval(cel.NoVars()); err == nil {
		t.Fatalf("a program without the binding evaluated shout: %v", out)
	}
	if out, _, err := bound.Eval(cel.NoVars()); err != nil || out != types.String("HI") {
		t.Fatalf("with its own binding, after the environment's dispatcher was made: %v, %v", out, err)
	}
	twice := &functions.Overload{Operator: "twice_int", Unary: func(ref.Val) ref.Val { return types.Int(0) }}
	if _, err := env.Program(ast, cel.Functions(twice)); err == nil || !strings.Contains(err.Error(), "overload already exists 'twice_int'") {
		t.Fatalf("a program's function named as the environment's: %v", err)
	}
}
