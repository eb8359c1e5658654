//go:build !gatekeeper_only

package main

/*
#include <stdlib.h>
#include <stdint.h>
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"celkeeper.local/native/admissionpolicy"
	"celkeeper.local/native/procs"
)

// The admissionpolicy capability's exports: Kubernetes' own ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy plugins run on a set of policies, bindings, params and Namespaces
// (admissionpolicy_set), answering requests as the API server would (admissionpolicy_review) and
// explaining why (admissionpolicy_explain). Not in the library built with the tag gatekeeper_only
// (libcelkeeper-gatekeeper.so: see main.go).

type setReply struct {
	Handle   int64                     `json:"handle,omitempty"`
	Problems []admissionpolicy.Problem `json:"problems"`
	Policies []string                  `json:"policies"`
	Error    string                    `json:"error,omitempty"`
}

// admissionpolicy_set builds a policy set from JSON {"policies": [...], "params": [...], "namespaces":
// [...], "crds": [...]} (each a list of objects). Returns its handle (release it with native_release),
// or 0 with {"error": ...}; the reply lists the problems the API server would find in the documents.
//
//export admissionpolicy_set
func admissionpolicy_set(in *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var input admissionpolicy.Input
	if err := json.Unmarshal(bytesOf(in, n), &input); err != nil {
		replyJSON(out, outn, setReply{Error: "the policy set is not valid JSON: " + err.Error()})
		return 0
	}
	set, problems, err := admissionpolicy.NewSet(input)
	if err != nil {
		replyJSON(out, outn, setReply{Error: err.Error()})
		return 0
	}
	h := register(set)
	if problems == nil {
		problems = []admissionpolicy.Problem{}
	}
	replyJSON(out, outn, setReply{Handle: h, Problems: problems, Policies: set.Policies()})
	return C.longlong(h)
}

// admissionpolicy_review answers a request (JSON, admissionpolicy.Request: an AdmissionReview's
// request) with a set: {"response": {...}} or {"error": ..., "request": true} for a request the API
// server would not decode. Returns 0, or -1 on error.
//
//export admissionpolicy_review
func admissionpolicy_review(h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	return C.int(answerRequest(h, in, n, timeout, out, outn, "response", (*admissionpolicy.Set).Review))
}

// admissionpolicy_explain answers a request (as admissionpolicy_review) and traces why, policy by policy
// and binding by binding (admissionpolicy.Explanation): {"explanation": {...}} or {"error": ...,
// "request": true} for a request the API server would not decode. Returns 0, or -1 on error.
//
//export admissionpolicy_explain
func admissionpolicy_explain(h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	return C.int(answerRequest(h, in, n, timeout, out, outn, "explanation", (*admissionpolicy.Set).Explain))
}

// answerRequest is admissionpolicy_review and admissionpolicy_explain: the request read and answered
// by the set of handle h within the timeout, replied as {key: answer}, or the error reply (with
// "request": true when the API server would not decode the request). Returns 0, or -1 on error.
func answerRequest[A any](h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int, key string,
	answer func(*admissionpolicy.Set, context.Context, admissionpolicy.Request) (A, error)) C.longlong {
	set, req, ok := requestFor(h, in, n, out, outn)
	if !ok {
		return -1
	}
	ctx, cancel := deadline(timeout)
	defer cancel()
	found, err := answer(set, ctx, req)
	if err != nil {
		replyError(out, outn, err)
		return -1
	}
	replyJSON(out, outn, map[string]any{key: found})
	return 0
}

// requestFor is the admission policy set of handle h and the request read from in, or false with the
// error replied ("request": true when the request is not valid JSON of one).
func requestFor(h C.longlong, in *C.char, n C.int, out **C.char, outn *C.int) (*admissionpolicy.Set, admissionpolicy.Request, bool) {
	var req admissionpolicy.Request
	set, ok := setOf(h, out, outn)
	if !ok {
		return nil, req, false
	}
	if err := json.Unmarshal(bytesOf(in, n), &req); err != nil {
		replyJSON(out, outn, map[string]any{"error": "the request is not valid: " + err.Error(), "request": true})
		return nil, req, false
	}
	return set, req, true
}

// replyError replies an error answering a request (errorReply).
func replyError(out **C.char, outn *C.int, err error) {
	replyJSON(out, outn, errorReply(err))
}

// errorReply is the reply of an error answering a request: "request" says whether the API server would
// have refused to decode the request (an admissionpolicy.RequestError).
func errorReply(err error) map[string]any {
	var reqErr *admissionpolicy.RequestError
	return map[string]any{"error": err.Error(), "request": errors.As(err, &reqErr)}
}

// setOf is the admission policy set of handle h, or false with the error replied.
func setOf(h C.longlong, out **C.char, outn *C.int) (*admissionpolicy.Set, bool) {
	set, ok := lookup(int64(h)).(*admissionpolicy.Set)
	if !ok {
		replyJSON(out, outn, map[string]string{"error": fmt.Sprintf("no admission policy set with handle %d", h)})
	}
	return set, ok
}

// admissionpolicy_review_batch answers many requests (a JSON array of admissionpolicy.Request) with a
// set, concurrently on the process's cores (as the API server answers concurrent requests): a JSON array
// of replies in the same order, each as admissionpolicy_review's. Returns 0, or -1 when the batch itself
// cannot be read.
//
//export admissionpolicy_review_batch
func admissionpolicy_review_batch(h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	set, ok := setOf(h, out, outn)
	if !ok {
		return -1
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(bytesOf(in, n), &raw); err != nil {
		replyJSON(out, outn, map[string]any{"error": "the requests are not a JSON array: " + err.Error()})
		return -1
	}
	ctx, cancel := deadline(timeout)
	defer cancel()
	replies := make([]any, len(raw))
	procs.Each(len(raw), func(i int) { replies[i] = reviewOne(ctx, set, raw[i]) })
	replyJSON(out, outn, replies)
	return 0
}

// admissionpolicy_mutate begins a request (as admissionpolicy_review's) through the mutating chain with
// a webhook after the policies (admissionpolicy.Mutation): when the chain waits at the webhook, the reply
// is {"object": ...} (what the webhook is sent) and the result the Mutation's handle (give it the
// webhook's JSONPatch with admissionpolicy_mutate_continue, then release it with native_release, which
// also abandons it); when the chain ended before, the reply is {"response": ...} and the result 0; on
// error, {"error": ..., "request": bool} and -1.
//
//export admissionpolicy_mutate
func admissionpolicy_mutate(h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	set, req, ok := requestFor(h, in, n, out, outn)
	if !ok {
		return -1
	}
	m, err := set.BeginMutation(time.Duration(timeout), req)
	if err != nil {
		replyError(out, outn, err)
		return -1
	}
	if m.Object == nil {
		resp, err := m.Continue(nil)
		if err != nil {
			replyJSON(out, outn, map[string]any{"error": err.Error(), "request": false})
			return -1
		}
		replyJSON(out, outn, map[string]any{"response": resp})
		return 0
	}
	replyJSON(out, outn, map[string]any{"object": json.RawMessage(m.Object)})
	return C.longlong(register(m))
}

// admissionpolicy_mutate_continue gives the webhook's JSONPatch (a JSON array; empty input: no change) to
// the Mutation of handle h and replies the API server's answer once its chain has ended: {"response":
// ...}, or {"error": ...}. Returns 0, or -1 on error.
//
//export admissionpolicy_mutate_continue
func admissionpolicy_mutate_continue(h C.longlong, in *C.char, n C.int, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	m, ok := lookup(int64(h)).(*admissionpolicy.Mutation)
	if !ok {
		replyJSON(out, outn, map[string]string{"error": fmt.Sprintf("no mutation with handle %d", h)})
		return -1
	}
	patch := append([]byte(nil), bytesOf(in, n)...)
	resp, err := m.Continue(patch)
	if err != nil {
		replyJSON(out, outn, map[string]any{"error": err.Error(), "request": false})
		return -1
	}
	replyJSON(out, outn, map[string]any{"response": resp})
	return 0
}

func reviewOne(ctx context.Context, set *admissionpolicy.Set, raw json.RawMessage) (reply any) {
	defer func() {
		if r := recover(); r != nil {
			reply = map[string]any{"error": fmt.Sprintf("internal error in celkeeper's native library: %v\n%s", r, debug.Stack()), "internal": true}
		}
	}()
	var req admissionpolicy.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		return map[string]any{"error": "the request is not valid: " + err.Error(), "request": true}
	}
	resp, err := set.Review(ctx, req)
	if err != nil {
		return errorReply(err)
	}
	return map[string]any{"response": resp}
}
