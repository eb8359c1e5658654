package k8scel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Recorded decisions (tests/cel/celgo/test_engine_decisions.py writes them: every call the engine gets
// while celkeeper verifies the examples and the Gatekeeper library suites, plus cases made to reach
// the cost budget, errors of every part and constraints sharing parameters). Each request is decided
// as celkeeper decides it - one conversion, every constraint in order sharing what the engine
// remembers - and by Gatekeeper's own driver, constraint by constraint; the messages must be equal.

type recordedTemplate struct {
	Source map[string]any `json:"source"`
}

type recordedConstraint struct {
	Template int            `json:"template"`
	Object   map[string]any `json:"object"`
}

type recordedRequest struct {
	Request     map[string]any `json:"request"`
	Object      any            `json:"object"`
	OldObject   any            `json:"oldObject"`
	Namespace   map[string]any `json:"namespace"`
	Constraints []int          `json:"constraints"`
}

type recorded struct {
	Templates   []recordedTemplate   `json:"templates"`
	Constraints []recordedConstraint `json:"constraints"`
	Requests    []recordedRequest    `json:"requests"`
}

func TestRecordedDecisionsMatchGatekeeper(t *testing.T) {
	path := os.Getenv("CELGO_CASES")
	if path == "" {
		t.Skip("CELGO_CASES names no file of recorded decisions (tests/cel/celgo/test_engine_decisions.py writes one)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorded
	if err := utiljson.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	gk := newGatekeeper(t)
	templates := make([]*Template, len(rec.Templates))
	for i, tmpl := range rec.Templates {
		var gerr error
		templates[i], err = CompileTemplate(tmpl.Source)
		gerr = gk.addTemplate(fmt.Sprintf("t%d", i), tmpl.Source)
		if (err == nil) != (gerr == nil) {
			t.Fatalf("template %d: ours %v, gatekeeper %v", i, err, gerr)
		}
	}
	constraints := make([]*Constraint, len(rec.Constraints))
	for i, c := range rec.Constraints {
		if templates[c.Template] == nil {
			continue
		}
		// Gatekeeper finds a constraint's template by its kind: name them after our index
		c.Object["kind"] = fmt.Sprintf("T%d", c.Template)
		if constraints[i], err = templates[c.Template].Bind(mustJSON(c.Object)); err != nil {
			t.Fatalf("constraint %d: %v", i, err)
		}
	}
	compared := 0
	for n, req := range rec.Requests {
		header := mustJSON(req.Request)
		var object, oldObject, namespace []byte
		if req.Object != nil {
			object = mustJSON(req.Object)
		}
		if req.OldObject != nil {
			oldObject = mustJSON(req.OldObject)
		}
		if req.Namespace != nil {
			namespace = mustJSON(req.Namespace)
		}
		r, ourErr := NewRequest(header, object, oldObject, namespace)
		explained, _ := NewRequest(header, object, oldObject, namespace) // Explain on a request of its own
		for _, ci := range req.Constraints {
			c := constraints[ci]
			tmpl := templates[rec.Constraints[ci].Template]
			var ours []string
			if ourErr == nil {
				decisions := tmpl.Validate(context.Background(), r, c, PerCallLimit)
				for _, d := range decisions {
					if d.Action == "deny" {
						ours = append(ours, d.Message)
					}
				}
				// explaining decides as validating does, decision for decision
				if again, _ := tmpl.Explain(context.Background(), explained, c, PerCallLimit); !reflect.DeepEqual(again, decisions) {
					t.Errorf("request %d, constraint %d: Explain decided %v, Validate %v", n, ci, again, decisions)
				}
			}
			want, werr := gk.query(header, object, oldObject, req.Namespace, c.Object)
			if !sameAnswers(want, werr, ours, ourErr) {
				t.Errorf("request %d, constraint %d (template %d):\n gatekeeper %s\n ours       %s",
					n, ci, rec.Constraints[ci].Template, describe(want, werr), describe(ours, ourErr))
			}
			compared++
		}
	}
	t.Logf("%d decisions compared (%d requests, %d templates, %d constraints)", compared, len(rec.Requests), len(rec.Templates), len(rec.Constraints))
	if compared == 0 {
		t.Fatal("nothing compared")
	}
}

var _ = json.Marshal
