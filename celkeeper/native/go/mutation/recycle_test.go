package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
)

// normalised is a Result's JSON with its patch operations in one order (opsJSON: a JSONPatch lists them
// in the order of Go's map iteration, as Gatekeeper's does, different from one call to the next).
func normalised(data []byte, err error) (string, error) {
	if err != nil {
		return "", err
	}
	var r map[string]any
	if err := json.Unmarshal(data, &r); err != nil {
		return "", err
	}
	sorted := func(patch []byte) ([]string, error) {
		var ops []jsonpatch.Operation
		if err := json.Unmarshal(patch, &ops); err != nil {
			return nil, err
		}
		return opsJSON(ops)
	}
	var listed struct {
		Patch    json.RawMessage `json:"patch"`
		Response struct {
			Patch []byte `json:"patch"` // base64 in the JSON
		} `json:"response"`
	}
	if err := json.Unmarshal(data, &listed); err != nil {
		return "", err
	}
	if len(listed.Patch) > 0 {
		if r["patch"], err = sorted(listed.Patch); err != nil {
			return "", err
		}
	}
	if resp, ok := r["response"].(map[string]any); ok && len(listed.Response.Patch) > 0 {
		if resp["patch"], err = sorted(listed.Response.Patch); err != nil {
			return "", err
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
	requests := [][]byte{req, withPatch}
	want := map[[2]int]string{}
	for i := range requests {
		for j := range objects {
			first, err := mutateOnce(s, requests[i], objects[j], false)
			if err != nil || !bytes.Contains(first, []byte(`"mutated":true`)) {
				t.Fatalf("request %d, object %d: not mutated (%v): %s", i, j, err, first)
			}
			norm, err := normalised(first, nil)
			if err != nil {
				t.Fatal(err)
			}
			want[[2]int{i, j}] = norm
		}
	}

	check := func(round int) {
		for k := 0; k < len(requests)*len(objects); k++ {
			key := [2]int{(k + round) % len(requests), (k*5 + round) % len(objects)}
			got, err := normalised(mutateOnce(s, requests[key[0]], objects[key[1]], true))
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
