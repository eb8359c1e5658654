package k8scel

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// The library is built with celkeeper's copy of cel-go's interpreter/runtimecost.go
// (celkeeper/native/go/_patches, docs/known-issues.md). These tests show what the copy changes; run
// with CELKEEPER_UPSTREAM_COST=1 on the module as it is (no patched go.mod: tests/native/
// test_celgo_patch.py does it) they show instead that upstream cel-go still needs it. When a cel-go
// release passes them in that mode, the copy can go.

var upstreamCost = os.Getenv("CELKEEPER_UPSTREAM_COST") == "1"

// doubling: variable vN is v(N-1) concatenated with itself, v0 an 8-character string of the object
// (dyn: `+` is then chosen at run time) or a literal (string: `+` is add_string).
func doubling(base string, n int) []Variable {
	vars := []Variable{{Name: "v0", Expression: base}}
	for i := 1; i <= n; i++ {
		vars = append(vars, Variable{Name: fmt.Sprintf("v%d", i), Expression: fmt.Sprintf("variables.v%[1]d + variables.v%[1]d", i-1)})
	}
	return vars
}

// allocatedBy is the bytes the Go heap allocated while f ran.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestGrowthIsRefusedBeforeItIsMade(t *testing.T) {
	object := map[string]any{"metadata": map[string]any{"name": "abcdefgh"}}
	for _, c := range []struct {
		name, base string
		typed      bool // Kubernetes' cost model charges it (cel-go refuses it, after making the last value)
	}{
		{"dyn strings", "object.metadata.name", false},
		{"strings", "'abcdefgh'", true},
		{"replace", "object.metadata.name.replace('', object.metadata.name)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// 8*2^n characters: 128 MiB (made by cel-go when `+` is dyn)
			n := 24
			source := fmt.Sprintf("size(variables.v%d)", n)
			vars := doubling(c.base, n)
			if c.name == "replace" { // quadratic: s.replace('', s) is |s|*(|s|+1)+|s| characters: 43 million
				vars = []Variable{{Name: "v0", Expression: "object.metadata.name"}}
				for i := 1; i <= 3; i++ {
					vars = append(vars, Variable{Name: fmt.Sprintf("v%d", i), Expression: fmt.Sprintf("variables.v%[1]d.replace('', variables.v%[1]d)", i-1)})
				}
				source = "size(variables.v3)"
			}
			e, err := CompileExpression(source, vars)
			if err != nil {
				t.Fatal(err)
			}
			var value any
			allocated := allocatedBy(func() {
				value, err = e.Evaluate(context.Background(), Inputs{Object: object})
			})
			refused := err != nil && strings.Contains(err.Error(), "cost limit exceeded")
			// what the per-call limit (1,000,000) pays for: 10 million characters of concatenation in one
			// step (v20, 8 MiB, and every vN before it: 16 MiB); cel-go makes the next one (v21, 16 MiB)
			// before it refuses it
			bounded := allocated < 24<<20
			if upstreamCost {
				if c.typed { // upstream refuses it too, but only once the value that exceeds the limit exists
					if !refused || bounded {
						t.Errorf("upstream cel-go now refuses %s before making it (%d bytes allocated, %v): drop the growth guard of the patch", c.name, allocated, err)
					}
				} else if refused || bounded {
					t.Errorf("upstream cel-go now bounds %s (%d bytes allocated, %v): drop the growth guard of the patch", c.name, allocated, err)
				}
				return
			}
			if !refused {
				t.Fatalf("%s: want the cost limit's error, got %v, %v", c.name, value, err)
			}
			if !bounded {
				t.Errorf("%s: %d bytes allocated before the refusal", c.name, allocated)
			}
		})
	}
}

func TestConcatenationCostsWhatItsOverloadCosts(t *testing.T) {
	// `+` on dyn strings (chosen at run time) costs what add_string costs: 0.1 per character
	long := strings.Repeat("x", 5000)
	object := map[string]any{"a": long, "b": long}
	costOf := func(source string) int64 {
		e, err := CompileExpression(source, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := &Request{memo: newMemo(), object: object}
		c := &Constraint{class: -constraintIDs.Add(1)}
		comp := e.t.newComposition(context.Background(), r, c)
		comp.reset(scopeValidations)
		_, details, err := e.result.Program.ContextEval(comp, &comp.act)
		if err != nil {
			t.Fatal(err)
		}
		return int64(*details.ActualCost())
	}
	dyn, typed := costOf("size(object.a + object.b)"), costOf("size(string(object.a) + string(object.b))")
	// the conversions (string(x): 1 each) aside, the same
	if upstreamCost {
		if dyn >= typed-2 {
			t.Errorf("upstream cel-go now charges dyn concatenation (%d, typed %d): drop that part of the patch", dyn, typed)
		}
		return
	}
	if dyn != typed-2 {
		t.Errorf("dyn concatenation costs %d, typed %d (conversions: 2)", dyn, typed)
	}
}

func TestObservingCostsAllocatesNothingPerOperator(t *testing.T) {
	// allocations of one evaluation: with 40 more operators, no more allocations
	object := map[string]any{"n": int64(3)}
	allocs := func(operators int) float64 {
		return evaluationAllocs(t, "object.n"+strings.Repeat(" + 2 - 1", operators/2)+" > 0", object)
	}
	few, many := allocs(2), allocs(42)
	if upstreamCost {
		if many <= few {
			t.Errorf("upstream cel-go's cost observer no longer allocates per operator (%v, %v): drop that part of the patch", few, many)
		}
		return
	}
	if many > few {
		t.Errorf("%v allocations with 2 operators, %v with 42", few, many)
	}
}

func TestCostTrackersReuseTheirStacks(t *testing.T) {
	// the cost observer's stack holds a value per pending operand: right-nested additions hold one per
	// level. Its room comes back to a pool when the evaluation ends, so a deep stack, once grown, is
	// not grown again by the next evaluation: as few allocations as a shallow one.
	object := map[string]any{"n": int64(1)}
	allocs := func(depth int) float64 {
		source := strings.Repeat("object.n + (", depth) + "object.n" + strings.Repeat(")", depth) + " > 0"
		return evaluationAllocs(t, source, object)
	}
	shallow, deep := allocs(1), allocs(60)
	if upstreamCost {
		if deep <= shallow {
			t.Errorf("upstream cel-go's cost tracker no longer grows its stack for each evaluation (%v, %v): drop that part of the patch", shallow, deep)
		}
		return
	}
	if deep > shallow {
		t.Errorf("%v allocations with a stack 2 deep, %v with one 61 deep", shallow, deep)
	}
}

// evaluationAllocs is the allocations of one evaluation of source against object (averaged over 200).
func evaluationAllocs(t *testing.T, source string, object map[string]any) float64 {
	t.Helper()
	e, err := CompileExpression(source, nil)
	if err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(200, func() {
		if _, err := e.Evaluate(context.Background(), Inputs{Object: object}); err != nil {
			t.Fatal(err)
		}
	})
}
