package mutation

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func mustLoad(t *testing.T, doc string) *System {
	t.Helper()
	s := NewSystem(Options{})
	for _, d := range strings.Split(doc, "\n---\n") {
		m, err := Load(yamlJSON(t, d))
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		if err := s.Upsert(m); err != nil {
			t.Fatalf("upsert: %v", err)
		}
	}
	return s
}

func yamlJSON(t *testing.T, doc string) []byte {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func podRequest(t *testing.T, op admissionv1.Operation, pod string) *Request {
	t.Helper()
	return &Request{
		Request: admissionv1.AdmissionRequest{
			UID:       "uid-1",
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "default",
			Operation: op,
			Object:    runtime.RawExtension{Raw: yamlJSON(t, pod)},
		},
		Namespace: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"env": "dev"}}},
	}
}

const pod = `
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default}
spec:
  containers:
  - {name: a, image: nginx}
  - {name: b, image: busybox, imagePullPolicy: IfNotPresent}
`

const pullAlways = `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pull-always}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers[name:*].imagePullPolicy"
  parameters: {assign: {value: Always}}
`

func patchOf(t *testing.T, r Result) string {
	t.Helper()
	data, err := json.Marshal(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAssignPatchesEveryContainer(t *testing.T) {
	s := mustLoad(t, pullAlways)
	r := s.Mutate(podRequest(t, admissionv1.Create, pod))
	if r.Error != "" || !r.Mutated || !r.Response.Allowed {
		t.Fatalf("not mutated: %+v", r)
	}
	want := `[{"op":"add","path":"/spec/containers/0/imagePullPolicy","value":"Always"},` +
		`{"op":"replace","path":"/spec/containers/1/imagePullPolicy","value":"Always"}]`
	if got := patchOf(t, r); got != want {
		t.Fatalf("patch %s, want %s", got, want)
	}
	if r.Response.PatchType == nil || *r.Response.PatchType != admissionv1.PatchTypeJSONPatch || r.Response.UID != "uid-1" {
		t.Fatalf("response: %+v", r.Response)
	}
}

func TestOnlyCreateAndUpdateAreMutated(t *testing.T) {
	s := mustLoad(t, pullAlways)
	r := s.Mutate(podRequest(t, admissionv1.Delete, pod))
	if r.Mutated || r.Response.Result.Message != "Mutating only on create or update" {
		t.Fatalf("%+v", r)
	}
}

func TestNamespaceNotGivenIsGatekeepersNotFound(t *testing.T) {
	s := mustLoad(t, pullAlways)
	req := podRequest(t, admissionv1.Create, pod)
	req.Namespace = nil
	r := s.Mutate(req)
	if r.Response.Allowed || r.Error != `namespaces "default" not found` || r.Response.Result.Code != 500 {
		t.Fatalf("%+v", r)
	}
	req.NoNamespace = true
	if r := s.Mutate(req); !r.Mutated {
		t.Fatalf("without a Namespace: %+v", r)
	}
}

func TestConflictingMutatorsAreNotApplied(t *testing.T) {
	other := `
apiVersion: mutations.gatekeeper.sh/v1beta1
kind: Assign
metadata: {name: containers-as-map}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers.a.imagePullPolicy"
  parameters: {assign: {value: Never}}
`
	s := NewSystem(Options{})
	for i, doc := range []string{pullAlways, other} {
		m, err := Load(yamlJSON(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Upsert(m)
		if (err != nil) != (i == 1) || (err != nil && !isConflict(err)) {
			t.Fatalf("upsert %d: %v", i, err)
		}
	}
	st := s.Statuses()
	if len(st) != 2 || len(st[0].Conflicts) != 1 || len(st[1].Conflicts) != 1 || !strings.Contains(st[0].Error, "conflicting schemas") {
		t.Fatalf("statuses: %+v", st)
	}
	if r := s.Mutate(podRequest(t, admissionv1.Create, pod)); r.Mutated || r.Error != "" {
		t.Fatalf("a mutator in conflict applied: %+v", r)
	}
	if err := s.Remove(MakeID("Assign", "containers-as-map")); err != nil {
		t.Fatal(err)
	}
	if r := s.Mutate(podRequest(t, admissionv1.Create, pod)); !r.Mutated {
		t.Fatalf("the conflict is gone, yet: %+v", r)
	}
}

func TestRefusedMutators(t *testing.T) {
	cases := map[string]struct{ doc, field, message string }{
		"bad location": {`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers[name:*"
  parameters: {assign: {value: x}}
`, "spec.location", "invalid location format"},
		"schema": {`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {source: Everything}
  location: "spec.x"
  parameters: {assign: {value: x}}
`, "spec.match.source", `Unsupported value: "Everything"`},
		"metadata root": {`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "metadata.labels.x"
  parameters: {assign: {value: x}}
`, "", "assign bad can't change metadata"},
		"version": {`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignImage
metadata: {name: bad}
spec: {location: "spec.containers[name:*].image"}
`, "", `no matches for kind "AssignImage" in version "mutations.gatekeeper.sh/v1"`},
		"external data": {`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: ext}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers[name:*].image"
  parameters: {assign: {externalData: {provider: registry}}}
`, "spec.parameters.assign.externalData", `external data (provider "registry") is not supported`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(yamlJSON(t, c.doc))
			refused, ok := err.(*Refused)
			if !ok {
				t.Fatalf("not refused: %v", err)
			}
			p := refused.Problems[0]
			if p.Field != c.field || !strings.Contains(p.Message, c.message) {
				t.Fatalf("refused with %+v, want %q: %q", refused.Problems, c.field, c.message)
			}
		})
	}
}

func TestModifySetOperationDefaultsToMerge(t *testing.T) {
	s := mustLoad(t, `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.containers[name:a].args"
  parameters: {values: {fromList: ["--v=2"]}}
`)
	r := s.Mutate(podRequest(t, admissionv1.Create, pod))
	if got := patchOf(t, r); got != `[{"op":"add","path":"/spec/containers/0/args","value":["--v=2"]}]` {
		t.Fatalf("patch %s (%+v)", got, r)
	}
}

func TestAnnotationsAndIterations(t *testing.T) {
	s := NewSystem(Options{Annotations: true})
	for _, doc := range []string{pullAlways, `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match: {namespaceSelector: {matchLabels: {env: dev}}}
  location: "metadata.labels.owner"
  parameters: {assign: {value: team-a}}
`} {
		m, err := Load(yamlJSON(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Upsert(m); err != nil {
			t.Fatal(err)
		}
	}
	req := podRequest(t, admissionv1.Update, pod)
	req.MutationID = "00000000-0000-0000-0000-000000000001"
	req.Explain = true
	r := s.Mutate(req)
	var obj map[string]any
	if err := json.Unmarshal(r.Object, &obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["metadata"].(map[string]any)
	annotations := meta["annotations"].(map[string]any)
	if annotations["gatekeeper.sh/mutations"] != "Assign//pull-always:1, AssignMetadata//owner:1" ||
		annotations["gatekeeper.sh/mutation-id"] != req.MutationID || meta["labels"].(map[string]any)["owner"] != "team-a" {
		t.Fatalf("metadata: %v", meta)
	}
	want := []Iteration{{Iteration: "iteration_0", Mutators: []string{"Assign//pull-always:1", "AssignMetadata//owner:1"}}}
	if got, _ := json.Marshal(r.Iterations); string(got) != mustJSON(t, want) {
		t.Fatalf("iterations %s", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// assignIf is not part of Gatekeeper v3.23.1's API: its CRD has no such field, and the API server refuses
// it under kubectl's default strict field validation.
func TestUnknownFieldsAreRefused(t *testing.T) {
	_, err := Load(yamlJSON(t, `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: guarded}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  location: "spec.dnsPolicy"
  parameters: {assign: {value: Default}, assignIf: {in: [ClusterFirst]}}
`))
	refused, ok := err.(*Refused)
	if !ok || len(refused.Problems) != 1 || refused.Problems[0].Field != "spec.parameters.assignIf" {
		t.Fatalf("refused with %v", err)
	}
}

// A generated object is mutated as Gatekeeper's expansion mutates it: source Generated, no operation
// (a mutator applying to CREATE only does not apply).
func TestMutateObjectAsExpansionDoes(t *testing.T) {
	s := mustLoad(t, pullAlways+"\n---\n"+`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: create-only}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod], operations: [CREATE]}]
  location: "spec.dnsPolicy"
  parameters: {assign: {value: Default}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: originals}
spec:
  match: {source: Original}
  location: "metadata.labels.original"
  parameters: {assign: {value: "yes"}}
`)
	r := s.MutateObject(&ObjectRequest{Object: yamlJSON(t, pod), Source: "Generated"})
	if r.Error != "" || !r.Mutated {
		t.Fatalf("%+v", r)
	}
	var obj map[string]any
	if err := json.Unmarshal(r.Object, &obj); err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	if spec["dnsPolicy"] != nil || obj["metadata"].(map[string]any)["labels"] != nil {
		t.Fatalf("a mutator that does not apply applied: %v", obj)
	}
	if spec["containers"].([]any)[0].(map[string]any)["imagePullPolicy"] != "Always" {
		t.Fatalf("not mutated: %v", obj)
	}
}

// Served requests run concurrently (flagsMu's read lock), beside calls that need the flags changed or a
// fixed mutation id (the write lock): every answer is the one a call alone gets (run with -race).
func TestConcurrentCallsAnswerAsCallsAlone(t *testing.T) {
	plain := mustLoad(t, pullAlways)
	annotated := NewSystem(Options{Annotations: true})
	for _, d := range strings.Split(pullAlways, "\n---\n") {
		m, err := Load(yamlJSON(t, d))
		if err != nil {
			t.Fatal(err)
		}
		_ = annotated.Upsert(m)
	}
	want := patchOf(t, plain.Mutate(podRequest(t, admissionv1.Create, pod)))
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if g%4 == 3 { // another system's options: the flags change under the write lock
					req := podRequest(t, admissionv1.Create, pod)
					req.MutationID = "9b2c5f1e-3a4d-4e5f-8a6b-7c8d9e0f1a2b"
					if r := annotated.Mutate(req); !strings.Contains(string(r.Object), "9b2c5f1e") {
						errs <- "annotated call lost its mutation id"
					}
					continue
				}
				if got := patchOf(t, plain.Mutate(podRequest(t, admissionv1.Create, pod))); got != want {
					errs <- got
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a concurrent call answered %s, want %s", e, want)
	}
}
