package k8scel

import (
	"context"
	"testing"
)

// The library is built with celkeeper's copy of cel-go's interpreter/frame.go (celkeeper/native/go/
// _patches, docs/known-issues.md): an evaluation given a context (ContextEval, as Kubernetes evaluates)
// makes none of the state of asynchronous calls. Run with CELKEEPER_UPSTREAM_COST=1 on the module as it
// is (no patched go.mod: tests/native/test_locate_patches.py does it), the test shows instead that
// upstream cel-go still makes it; when a cel-go release passes it in that mode, the copy can go.

func TestEvaluatingWithAContextMakesNothingForAsynchronousCalls(t *testing.T) {
	e, err := CompileExpression("object.spec.containers.all(c, c.name != '') && size(object.metadata.name) > 0", nil)
	if err != nil {
		t.Fatal(err)
	}
	object := map[string]any{
		"metadata": map[string]any{"name": "web"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"name": "b"}}},
	}
	ctx, cancel := context.WithCancel(context.Background()) // a parent that can be cancelled, as a deadline's
	defer cancel()
	r := &Request{memo: newMemo(), object: object}
	c := &Constraint{class: -constraintIDs.Add(1)}
	comp := e.t.newComposition(ctx, r, c)
	comp.reset(scopeValidations)
	program := e.result.Program
	eval := func(withContext bool) {
		var err error
		if withContext {
			_, _, err = program.ContextEval(comp, &comp.act)
		} else {
			_, _, err = program.Eval(&comp.act)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	plain := testing.AllocsPerRun(200, func() { eval(false) })
	withContext := testing.AllocsPerRun(200, func() { eval(true) })
	if upstreamCost {
		if withContext <= plain {
			t.Errorf("upstream cel-go's ContextEval no longer allocates more than Eval (%v, %v): drop the copy of frame.go", withContext, plain)
		}
		return
	}
	if withContext > plain {
		t.Errorf("ContextEval allocates %v per evaluation, Eval %v", withContext, plain)
	}
	// the interrupt still reaches the evaluation: a cancelled context ends a comprehension
	long := make([]any, 1000)
	for i := range long {
		long[i] = map[string]any{"name": "x"}
	}
	r.object = map[string]any{"metadata": map[string]any{"name": "web"}, "spec": map[string]any{"containers": long}}
	comp.reset(scopeValidations)
	comp.act.object = r.object
	cancel()
	if _, _, err := program.ContextEval(comp, &comp.act); err == nil {
		t.Errorf("a cancelled context did not interrupt the evaluation")
	}
}
