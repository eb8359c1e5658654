package k8scel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The templates, constraints and Pod of bench/decision.py: five typical templates, 20 constraints
// (four each), a ~5 KB Pod with two containers.

type benchTemplate struct {
	name   string
	source string // JSON
	params func(i int) map[string]any
}

var benchTemplates = []benchTemplate{
	{"k8srequiredlabels", `{"variables":[{"name":"labels","expression":"has(object.metadata.labels) ? object.metadata.labels : {}"}],
	  "validations":[{"expression":"variables.params.labels.all(l, l in variables.labels)",
	  "messageExpression":"'missing labels: ' + variables.params.labels.filter(l, !(l in variables.labels)).join(', ')"}]}`,
		func(i int) map[string]any {
			second := "app"
			if i%2 == 1 {
				second = fmt.Sprintf("team%d", i)
			}
			return map[string]any{"labels": []any{"app", second}}
		}},
	{"k8sallowedrepos", `{"validations":[{"expression":"object.spec.containers.all(c, variables.params.repos.exists(r, c.image.startsWith(r)))",
	  "message":"container image from a registry that is not allowed"}]}`,
		func(i int) map[string]any {
			return map[string]any{"repos": []any{"registry.example.com/", fmt.Sprintf("mirror%d.example.com/", i)}}
		}},
	{"k8snolatest", `{"validations":[{"expression":"object.spec.containers.all(c, c.image.contains(':') && !c.image.endsWith(':' + variables.params.tag))",
	  "messageExpression":"'images must not use the ' + variables.params.tag + ' tag'"}]}`,
		func(i int) map[string]any { return map[string]any{"tag": "latest"} }},
	{"k8snoprivileged", `{"variables":[{"name":"containers","expression":"object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"}],
	  "validations":[{"expression":"!variables.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged && !(c.name in variables.params.exempt))",
	  "message":"privileged containers are not allowed"}]}`,
		func(i int) map[string]any { return map[string]any{"exempt": []any{fmt.Sprintf("debug%d", i)}} }},
	{"k8scontainerlimits", `{"validations":[
	  {"expression":"object.spec.containers.all(c, has(c.resources) && has(c.resources.limits) && 'cpu' in c.resources.limits && 'memory' in c.resources.limits)",
	   "message":"containers need cpu and memory limits"},
	  {"expression":"object.spec.containers.all(c, !has(c.resources.limits) || !('memory' in c.resources.limits) || quantity(c.resources.limits.memory).compareTo(quantity(variables.params.memory)) <= 0)",
	   "messageExpression":"'memory limit above ' + variables.params.memory"}]}`,
		func(i int) map[string]any { return map[string]any{"cpu": "2", "memory": fmt.Sprintf("%dGi", i+1)} }},
}

func benchPod() map[string]any {
	env := []any{}
	for i := 0; i < 10; i++ {
		env = append(env, map[string]any{"name": fmt.Sprintf("VAR%d", i), "value": fmt.Sprint(i)})
	}
	container := func(name string) map[string]any {
		return map[string]any{
			"name": name, "image": "registry.example.com/team/app:1.4.2",
			"resources": map[string]any{
				"limits":   map[string]any{"cpu": "500m", "memory": "512Mi"},
				"requests": map[string]any{"cpu": "100m", "memory": "128Mi"},
			},
			"securityContext": map[string]any{"privileged": false, "runAsNonRoot": true},
			"ports":           []any{map[string]any{"containerPort": 8080}},
			"env":             env,
		}
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": "web-1", "namespace": "prod",
			"labels":      map[string]any{"app": "web", "team1": "x"},
			"annotations": map[string]any{"note": strings.Repeat("x", 100)},
		},
		"spec": map[string]any{"containers": []any{container("app"), container("sidecar")}, "serviceAccountName": "web"},
	}
}

var benchHeader = []byte(`{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"Pod"},
  "resource":{"group":"","version":"v1","resource":"pods"},"namespace":"prod","name":"web-1","operation":"CREATE",
  "userInfo":{"username":"alice","groups":["system:authenticated"]},"dryRun":false,
  "options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}`)

var benchNamespace = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod", "labels": map[string]any{"env": "prod"}}}

type benchSet struct {
	templates   []*Template
	gatekeeper  *gatekeeper
	constraints []*Constraint
	of          []int // template index of each constraint
}

func newBenchSet(t testing.TB, n int) *benchSet {
	s := &benchSet{gatekeeper: newGatekeeper(t)}
	for _, bt := range benchTemplates {
		var source map[string]any
		if err := json.Unmarshal([]byte(bt.source), &source); err != nil {
			t.Fatal(err)
		}
		tmpl, err := CompileTemplate(source)
		if err != nil {
			t.Fatal(err)
		}
		if len(tmpl.Diagnostics) > 0 {
			t.Fatalf("%s: %v", bt.name, tmpl.Diagnostics)
		}
		s.templates = append(s.templates, tmpl)
		if err := s.gatekeeper.addTemplate(bt.name, source); err != nil {
			t.Fatal(err)
		}
	}
	kinds := []string{"K8sRequiredLabels", "K8sAllowedRepos", "K8sNoLatest", "K8sNoPrivileged", "K8sContainerLimits"}
	for i := 0; i < n; i++ {
		k := i % len(benchTemplates)
		obj := map[string]any{
			"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": kinds[k],
			"metadata": map[string]any{"name": fmt.Sprintf("pods-%d", i)},
			"spec": map[string]any{
				"match":      map[string]any{"kinds": []any{map[string]any{"apiGroups": []any{""}, "kinds": []any{"Pod"}}}},
				"parameters": benchTemplates[k].params(i),
			},
		}
		c, err := s.templates[k].Bind(mustJSON(obj))
		if err != nil {
			t.Fatal(err)
		}
		s.constraints = append(s.constraints, c)
		s.of = append(s.of, k)
	}
	return s
}

func TestBenchSetMatchesGatekeeper(t *testing.T) {
	s := newBenchSet(t, 20)
	pod := benchPod()
	pods := []map[string]any{pod}
	// a Pod that breaks every template
	bad := benchPod()
	spec := bad["spec"].(map[string]any)
	c0 := spec["containers"].([]any)[0].(map[string]any)
	c0["image"] = "docker.io/app:latest"
	c0["securityContext"] = map[string]any{"privileged": true}
	c0["resources"] = map[string]any{"limits": map[string]any{"memory": "64Gi"}}
	delete(bad["metadata"].(map[string]any), "labels")
	pods = append(pods, bad)
	for _, p := range pods {
		object := mustJSON(p)
		for i, c := range s.constraints {
			want, werr := s.gatekeeper.query(benchHeader, object, nil, benchNamespace, c.Object)
			got, gerr := ours(s.templates[s.of[i]], benchHeader, object, nil, mustJSON(benchNamespace), c)
			if !sameAnswers(want, werr, got, gerr) {
				t.Errorf("constraint %d: gatekeeper %s, ours %s", i, describe(want, werr), describe(got, gerr))
			}
		}
	}
}

// BenchmarkGatekeeperDriver: Gatekeeper's driver (Query) on the Pod and the 20 constraints.
func BenchmarkGatekeeperDriver(b *testing.B) {
	s := newBenchSet(b, 20)
	object := mustJSON(benchPod())
	objs := make([]*unstructured.Unstructured, len(s.constraints))
	for i, c := range s.constraints {
		objs[i] = c.Object
	}
	b.ReportAllocs()
	for b.Loop() {
		req := decodeHeader(b, benchHeader)
		req.Object.Raw = object
		if _, err := s.gatekeeper.driver.Query(context.Background(), "admission.k8s.gatekeeper.sh", objs,
			&gatekeeperReview{req}, reviewNamespace(benchNamespace)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate: this package's path as the library's k8scel_validate takes it (one conversion
// into recycled maps, then Validate per constraint, then Done).
func BenchmarkValidate(b *testing.B) {
	s := newBenchSet(b, 20)
	object := mustJSON(benchPod())
	ns := mustJSON(benchNamespace)
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewRecycledRequest(benchHeader, object, nil, ns)
		if err != nil {
			b.Fatal(err)
		}
		for i, c := range s.constraints {
			s.templates[s.of[i]].Validate(context.Background(), r, c, PerCallLimit)
		}
		r.Done() // as the library's k8scel_validate does
	}
}

// BenchmarkNewRequest: the per-request conversion alone.
func BenchmarkNewRequest(b *testing.B) {
	object := mustJSON(benchPod())
	ns := mustJSON(benchNamespace)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRequest(benchHeader, object, nil, ns); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileTemplate: one template of two validations with a messageExpression.
func BenchmarkCompileTemplate(b *testing.B) {
	var source map[string]any
	if err := json.Unmarshal([]byte(benchTemplates[4].source), &source); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := CompileTemplate(source); err != nil {
			b.Fatal(err)
		}
	}
}
