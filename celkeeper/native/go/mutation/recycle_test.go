package mutation

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
)

// normalised is a Result's JSON with its patch operations in one order (a JSONPatch lists them in the
// order of Go's map iteration, as Gatekeeper's does: different from one call to the next).
func normalised(data []byte) (string, error) {
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil {
		return "", err
	}
	sorted := func(ops []any) []any {
		sort.Slice(ops, func(i, j int) bool {
			a, _ := json.Marshal(ops[i])
			b, _ := json.Marshal(ops[j])
			return string(a) < string(b)
		})
		return ops
	}
	if ops, ok := r["patch"].([]any); ok {
		r["patch"] = sorted(ops)
	}
	if resp, ok := r["response"].(map[string]any); ok {
		if encoded, ok := resp["patch"].(string); ok {
			raw, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				return "", err
			}
			var ops []any
			if err := json.Unmarshal(raw, &ops); err != nil {
				return "", err
			}
			resp["patch"] = sorted(ops)
		}
	}
	out, err := json.Marshal(r)
	return string(out), err
}

// Requests whose objects are decoded into recycled maps (Result.Release) answer as requests decoded into
// new ones: in turn and from several goroutines at once, for objects of different shapes, with their
// patches (whose values are the mutated object's maps) encoded before the maps are given back.
func TestRecycledMapsAnswerAsNewOnes(t *testing.T) {
	s, req, pod := benchSystem(t)
	withPatch := bytes.Replace(req, []byte(`"responseOnly":true`), []byte(`"responseOnly":false`), 1)
	if bytes.Equal(withPatch, req) {
		t.Fatal("the bench request no longer asks for the response only")
	}
	var base map[string]any
	if err := json.Unmarshal(pod, &base); err != nil {
		t.Fatal(err)
	}
	objects := [][]byte{pod}
	for i := 0; i < 6; i++ { // the Pod with more labels, fewer fields, other containers
		var obj map[string]any
		if err := json.Unmarshal(pod, &obj); err != nil {
			t.Fatal(err)
		}
		meta := obj["metadata"].(map[string]any)
		labels := map[string]any{}
		for j := 0; j <= i*3; j++ {
			labels[fmt.Sprintf("label-%d", j)] = fmt.Sprintf("value-%d-%d", i, j)
		}
		meta["labels"] = labels
		spec := obj["spec"].(map[string]any)
		if i%2 == 1 {
			delete(spec, "securityContext")
		}
		containers := spec["containers"].([]any)
		for j := 0; j < i; j++ {
			c := map[string]any{"name": fmt.Sprintf("side-%d", j), "image": fmt.Sprintf("registry.example/side:%d", j)}
			containers = append(containers, c)
		}
		spec["containers"] = containers
		data, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, data)
	}

	// what each request answers decoded into new maps (the Result never released)
	answer := func(r, obj []byte, release bool) []byte {
		var in Request
		if err := json.Unmarshal(r, &in); err != nil {
			t.Error(err)
			return nil
		}
		in.Request.Object = RawObject(in.Request.Object, obj)
		res := s.Mutate(&in)
		out, err := json.Marshal(res)
		if err != nil {
			t.Error(err)
		}
		if release {
			res.Release()
		}
		return out
	}
	requests := [][]byte{req, withPatch}
	want := map[[2]int]string{}
	for i := range requests {
		for j := range objects {
			first := answer(requests[i], objects[j], false)
			if !bytes.Contains(first, []byte(`"mutated":true`)) {
				t.Fatalf("request %d, object %d: not mutated: %s", i, j, first)
			}
			norm, err := normalised(first)
			if err != nil {
				t.Fatal(err)
			}
			want[[2]int{i, j}] = norm
		}
	}

	check := func(round int) {
		for k := 0; k < len(requests)*len(objects); k++ {
			key := [2]int{(k + round) % len(requests), (k*5 + round) % len(objects)}
			got, err := normalised(answer(requests[key[0]], objects[key[1]], true))
			if err != nil || got != want[key] {
				t.Errorf("round %d, request %d, object %d: recycled maps answered (%v)\n%s\nnew ones\n%s",
					round, key[0], key[1], err, got, want[key])
				return
			}
		}
	}
	for round := 0; round < 20; round++ {
		check(round)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for round := 0; round < 20; round++ {
				check(g*20 + round)
			}
		}(g)
	}
	wg.Wait()
}
