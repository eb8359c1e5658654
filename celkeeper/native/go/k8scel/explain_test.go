package k8scel

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func explainOne(t *testing.T, source string, params map[string]any, object map[string]any) ([]Decision, []Decision, Trace) {
	t.Helper()
	tmpl := compile(t, source)
	c, err := tmpl.Bind(mustJSON(map[string]any{
		"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "T", "metadata": map[string]any{"name": "c"},
		"spec": map[string]any{"parameters": params},
	}))
	if err != nil {
		t.Fatal(err)
	}
	header := mustJSON(map[string]any{
		"uid": "1", "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource": map[string]any{"group": "", "version": "v1", "resource": "pods"}, "operation": "CREATE",
		"name": "p", "namespace": "ns",
	})
	r1, err := NewRequest(header, mustJSON(object), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := NewRequest(header, mustJSON(object), nil, nil)
	validated := tmpl.Validate(context.Background(), r1, c, PerCallLimit)
	explained, trace := tmpl.Explain(context.Background(), r2, c, PerCallLimit)
	return validated, explained, trace
}

func findPart(trace Trace, part string, index int) *TracePart {
	for i := range trace.Parts {
		if trace.Parts[i].Part == part && trace.Parts[i].Index == index {
			return &trace.Parts[i]
		}
	}
	return nil
}

func TestExplainRecordsEveryPart(t *testing.T) {
	source := `{
	  "matchCondition": [{"name": "has-containers", "expression": "has(object.spec.containers)"}],
	  "variables": [
	    {"name": "names", "expression": "object.spec.containers.map(c, c.name)"},
	    {"name": "unused", "expression": "size(variables.names) * 10"},
	    {"name": "broken", "expression": "object.spec.missing.field"}
	  ],
	  "validations": [
	    {"expression": "variables.names.all(n, n.startsWith(variables.params.prefix))",
	     "messageExpression": "'bad names: ' + variables.names.join(', ')"},
	    {"expression": "size(variables.names) < 5", "message": "too many"}
	  ]}`
	object := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app"}, map[string]any{"name": "x-side"}}}}
	validated, explained, trace := explainOne(t, source, map[string]any{"prefix": "x-"}, object)
	if !reflect.DeepEqual(validated, explained) {
		t.Fatalf("Explain decided %v, Validate %v", explained, validated)
	}
	if len(explained) != 1 || explained[0].Message != "bad names: app, x-side" {
		t.Fatalf("decisions: %v", explained)
	}
	cond := findPart(trace, "matchCondition", 0)
	if cond == nil || cond.Name != "has-containers" || cond.Value == nil || cond.Value.V != true || cond.Scope != "conditions" {
		t.Fatalf("match condition: %+v", cond)
	}
	names := findPart(trace, "variable", 0)
	if names == nil || names.Name != "names" || !names.Evaluated || names.Value == nil || names.Value.T != "list" || names.Cost == nil {
		t.Fatalf("variable names: %+v", names)
	}
	unused := findPart(trace, "variable", 1)
	if unused == nil || unused.Evaluated || unused.Value == nil || unused.Value.V != "20" {
		t.Fatalf("variable unused (not read by the decision, shown): %+v", unused)
	}
	broken := findPart(trace, "variable", 2)
	if broken == nil || broken.Evaluated || !strings.Contains(broken.Error, `composited variable "broken" fails to evaluate: no such key: missing`) {
		t.Fatalf("variable broken: %+v", broken)
	}
	v0 := findPart(trace, "validation", 0)
	if v0 == nil || v0.Value == nil || v0.Value.V != false || v0.Cost == nil || *v0.Cost <= 0 {
		t.Fatalf("validation 0: %+v", v0)
	}
	v1 := findPart(trace, "validation", 1)
	if v1 == nil || v1.Value == nil || v1.Value.V != true {
		t.Fatalf("validation 1: %+v", v1)
	}
	m0 := findPart(trace, "messageExpression", 0)
	if m0 == nil || m0.Value == nil || m0.Value.V != "bad names: app, x-side" {
		t.Fatalf("message 0: %+v", m0)
	}
}

func TestExplainRecordsTheBudgetRunningOut(t *testing.T) {
	source := `{"validations": [
	  {"expression": "object.spec.containers.all(c, object.spec.containers.exists_one(d, d.name == c.name))"},
	  {"expression": "true"}]}`
	var containers []any
	for i := 0; i < 2000; i++ {
		containers = append(containers, map[string]any{"name": fmt.Sprintf("c%d", i)})
	}
	object := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"containers": containers}}
	validated, explained, trace := explainOne(t, source, nil, object)
	if !reflect.DeepEqual(validated, explained) {
		t.Fatalf("Explain decided %v, Validate %v", explained, validated)
	}
	v0 := findPart(trace, "validation", 0)
	if v0 == nil || !strings.Contains(v0.Error, "running out of cost budget") {
		t.Fatalf("validation 0: %+v", v0)
	}
	if findPart(trace, "validation", 1) != nil {
		t.Fatalf("validation 1 was not evaluated (the budget ran out first), yet it is recorded: %+v", trace)
	}
}

func TestExplainFalseMatchConditionStops(t *testing.T) {
	source := `{"matchCondition": [{"name": "never", "expression": "false"}],
	  "validations": [{"expression": "false", "message": "no"}]}`
	object := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}}
	validated, explained, trace := explainOne(t, source, nil, object)
	if len(validated) != 0 || len(explained) != 0 {
		t.Fatalf("decisions: %v / %v", validated, explained)
	}
	if findPart(trace, "validation", 0) != nil {
		t.Fatalf("a validation was evaluated after a false match condition: %+v", trace)
	}
	if c := findPart(trace, "matchCondition", 0); c == nil || c.Value == nil || c.Value.V != false {
		t.Fatalf("match condition: %+v", c)
	}
}
