package admissionpolicy

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestMutationHandsTheObjectToTheWebhookAndAppliesItsPatchAsTheAPIServer(t *testing.T) {
	set, _, err := NewSet(Input{Policies: docs(t, mapPolicy, mapBinding)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m, err := set.BeginMutation(0, Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	// the webhook is sent the object as the policy left it (the sidecar in)
	if !strings.Contains(string(m.Object), `"sidecar"`) {
		t.Fatalf("sent %s", m.Object)
	}
	resp, err := m.Continue([]byte(`[{"op": "add", "path": "/spec/containers/-", "value": {"name": "late", "image": "busybox"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Spec struct {
			Containers []struct{ Name, ImagePullPolicy string }
		}
	}
	if err := json.Unmarshal(resp.Object, &out); err != nil {
		t.Fatal(err)
	}
	// the webhook's container defaulted, as the API server defaults the object a webhook's patch leaves
	if len(out.Spec.Containers) != 3 || out.Spec.Containers[2].Name != "late" || out.Spec.Containers[2].ImagePullPolicy != "Always" {
		t.Fatalf("containers: %s", resp.Object)
	}
}

func TestAMutationEndsBeforeTheWebhookWithoutAnObject(t *testing.T) {
	set, _, err := NewSet(Input{Policies: docs(t, mapPolicy, mapBinding)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m, err := set.BeginMutation(0, Request{Operation: "DELETE", OldObject: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Object != nil {
		t.Fatalf("a DELETE has no object to send: %s", m.Object)
	}
	resp, err := m.Continue(nil)
	if err != nil || !resp.Allowed {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestAnAbandonedMutationEndsAndAPatchThatDoesNotApplyFailsTheRequest(t *testing.T) {
	set, _, err := NewSet(Input{Policies: docs(t, mapPolicy, mapBinding)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m, err := set.BeginMutation(time.Minute, Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	m.Close() // returns once the chain has ended
	m.Close()

	m, err = set.BeginMutation(time.Minute, Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	// the request fails with an internal error, as in the API server
	resp, err := m.Continue([]byte(`[{"op": "replace", "path": "/spec/nowhere/x", "value": 1}]`))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || resp.Status == nil || resp.Status.Code != 500 || !strings.Contains(resp.Status.Message, "cannot be applied") {
		t.Fatalf("answer: %+v %+v", resp, resp.Status)
	}
}

func TestAMutationWhoseWebhookAnswersAfterTheDeadlineIsAnError(t *testing.T) {
	set, _, err := NewSet(Input{Policies: docs(t, mapPolicy, mapBinding)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	// long enough for the chain to reach the webhook on a loaded machine; the test then waits it out
	m, err := set.BeginMutation(2*time.Second, Request{Operation: "CREATE", Object: jsonOf(t, pod)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Object == nil {
		t.Fatalf("the chain ended before it reached the webhook: %+v %v", m.resp, m.err)
	}
	<-m.done // the chain gives up waiting once the deadline has passed
	if _, err := m.Continue(nil); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("error: %v", err)
	}
}
