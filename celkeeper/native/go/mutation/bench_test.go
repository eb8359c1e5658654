package mutation

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// testdata/bench.json is bench/mutation.py's workload: its ten mutators and its Pod review (bench/webhook.py's
// bench_pod, ~4.7 KB), written by
//
//	python -c 'import json, sys; sys.path.insert(0, "."); from bench.mutation import mutators; \
//	  from bench.webhook import bench_pod; from tests.support.serve import review; \
//	  json.dump({"review": review(bench_pod(), uid="bench-mutate"), "mutators": mutators()}, \
//	  open("celkeeper/native/go/mutation/testdata/bench.json", "w"), indent=1)'
type benchWorkload struct {
	Review struct {
		Request json.RawMessage `json:"request"`
	} `json:"review"`
	Mutators []json.RawMessage `json:"mutators"`
}

// benchNamespace is the review's Namespace as the webhook's informer hands it over.
const benchNamespace = `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod-shop",
 "uid": "0d3c1f9e-6a57-4f0e-9c1b-2f6e8d1a7b44", "resourceVersion": "412", "creationTimestamp": "2026-12-05T10:00:00Z",
 "labels": {"kubernetes.io/metadata.name": "prod-shop"}}, "spec": {"finalizers": ["kubernetes"]},
 "status": {"phase": "Active"}}`

// benchSystem loads the workload's mutators; the request and its object are the JSON the webhook sends
// mutation_mutate (the object apart).
func benchSystem(tb testing.TB) (*System, []byte, []byte) {
	tb.Helper()
	data, err := os.ReadFile("testdata/bench.json")
	if err != nil {
		tb.Fatal(err)
	}
	var w benchWorkload
	if err := json.Unmarshal(data, &w); err != nil {
		tb.Fatal(err)
	}
	s := NewSystem(Options{})
	for _, doc := range w.Mutators {
		m, err := Load(doc)
		if err != nil {
			tb.Fatalf("refused: %v", err)
		}
		if err := s.UpsertDocument(m, doc); err != nil {
			tb.Fatalf("upsert: %v", err)
		}
	}
	var request map[string]json.RawMessage
	if err := json.Unmarshal(w.Review.Request, &request); err != nil {
		tb.Fatal(err)
	}
	obj := request["object"]
	delete(request, "object")
	req, err := json.Marshal(map[string]any{
		"request":      request,
		"namespace":    json.RawMessage(benchNamespace),
		"responseOnly": true,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s, req, compact(tb, obj)
}

func compact(tb testing.TB, doc []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, doc); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// mutateJSON is what mutation_mutate does with a request and its object, without cgo: read them, mutate,
// encode the result.
func mutateJSON(tb testing.TB, s *System, req, obj []byte) []byte {
	out, err := mutateOnce(s, req, obj, true)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// mutateOnce is mutateJSON for any goroutine (the error returned); release false keeps the Result's
// maps from being recycled, as a caller that never releases it.
func mutateOnce(s *System, req, obj []byte, release bool) ([]byte, error) {
	var in Request
	if err := json.Unmarshal(req, &in); err != nil {
		return nil, err
	}
	in.Request.Object = RawObject(in.Request.Object, obj)
	res := s.Mutate(&in)
	out, err := json.Marshal(res)
	if release {
		res.Release()
	}
	return out, err
}

func TestBenchWorkloadMutatesThePod(t *testing.T) {
	s, req, obj := benchSystem(t)
	var r Result
	if err := json.Unmarshal(mutateJSON(t, s, req, obj), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Mutated || r.Response.Patch == nil || r.Error != "" {
		t.Fatalf("the bench workload is not mutated: %+v", r)
	}
	var ops []map[string]any
	if err := json.Unmarshal(r.Response.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) == 0 {
		t.Fatal("empty patch")
	}
}

// BenchmarkMutate is one served mutating review (bench/mutation.py's) through the library's mutate path.
func BenchmarkMutate(b *testing.B) {
	s, req, obj := benchSystem(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mutateJSON(b, s, req, obj)
	}
}
