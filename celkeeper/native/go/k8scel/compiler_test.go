package k8scel

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// Templates compiled at once, each on a compiler of the pool (WarmCompilers), compile as they do alone:
// the same diagnostics and variable types, and the same decisions as Gatekeeper's driver; the pool
// makes no more compilers than its limit.
func TestTemplatesCompiledAtOnceDecideAsAlone(t *testing.T) {
	alone := newBenchSet(t, 20)
	broken := map[string]any{
		"variables":   []any{map[string]any{"name": "x", "expression": "object.spec +"}},
		"validations": []any{map[string]any{"expression": "variables.x == 1", "messageExpression": "1"}},
	}
	brokenAlone, err := CompileTemplate(broken)
	if err != nil {
		t.Fatal(err)
	}
	const limit, rounds = 3, 4
	WarmCompilers(limit, broken)
	sources := make([]map[string]any, len(benchTemplates))
	for i, bt := range benchTemplates {
		if err := json.Unmarshal([]byte(bt.source), &sources[i]); err != nil {
			t.Fatal(err)
		}
	}
	// every template compiled `rounds` times, all at once
	compiled := make([][]*Template, rounds)
	brokens := make([]*Template, rounds)
	var wg sync.WaitGroup
	errs := make(chan error, rounds*(len(sources)+1))
	for r := range rounds {
		compiled[r] = make([]*Template, len(sources))
		for i := range sources {
			wg.Go(func() {
				tmpl, err := CompileTemplate(sources[i])
				if err != nil {
					errs <- fmt.Errorf("%s: %w", benchTemplates[i].name, err)
				}
				compiled[r][i] = tmpl
			})
		}
		wg.Go(func() {
			tmpl, err := CompileTemplate(broken)
			if err != nil {
				errs <- err
			}
			brokens[r] = tmpl
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	compilers.mu.Lock()
	made, idle := compilers.made, len(compilers.idle)
	compilers.mu.Unlock()
	if made > limit || idle != made {
		t.Fatalf("the pool made %d compilers (limit %d), %d idle after the compilations", made, limit, idle)
	}
	for r := range rounds {
		if !reflect.DeepEqual(brokens[r].Diagnostics, brokenAlone.Diagnostics) {
			t.Errorf("round %d: diagnostics %v, alone %v", r, brokens[r].Diagnostics, brokenAlone.Diagnostics)
		}
		for i, tmpl := range compiled[r] {
			want := alone.templates[i]
			if !reflect.DeepEqual(tmpl.Diagnostics, want.Diagnostics) || tmpl.String() != want.String() ||
				!reflect.DeepEqual(tmpl.variableNames, want.variableNames) {
				t.Errorf("round %d, %s: %s %v, alone %s %v", r, benchTemplates[i].name, tmpl, tmpl.Diagnostics, want, want.Diagnostics)
			}
			for v := range tmpl.variables {
				if got, want := tmpl.variables[v].OutputType.String(), want.variables[v].OutputType.String(); got != want {
					t.Errorf("round %d, %s: variable %s is %s, alone %s", r, benchTemplates[i].name, tmpl.variableNames[v], got, want)
				}
			}
		}
		// the bench set's constraints bound to this round's templates decide as Gatekeeper's driver
		bad := benchPod()
		spec := bad["spec"].(map[string]any)
		c0 := spec["containers"].([]any)[0].(map[string]any)
		c0["image"] = "docker.io/app:latest"
		c0["securityContext"] = map[string]any{"privileged": true}
		delete(bad["metadata"].(map[string]any), "labels")
		for _, pod := range []map[string]any{benchPod(), bad} {
			object := mustJSON(pod)
			for i, c := range alone.constraints {
				bound, err := compiled[r][alone.of[i]].Bind(mustJSON(c.Object))
				if err != nil {
					t.Fatal(err)
				}
				want, werr := alone.gatekeeper.query(benchHeader, object, nil, benchNamespace, c.Object)
				got, gerr := ours(compiled[r][alone.of[i]], benchHeader, object, nil, mustJSON(benchNamespace), bound)
				if !sameAnswers(want, werr, got, gerr) {
					t.Errorf("round %d, constraint %d: gatekeeper %s, ours %s", r, i, describe(want, werr), describe(got, gerr))
				}
			}
		}
	}
}
