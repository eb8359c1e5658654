package main

/*
#include <stdlib.h>
#include <stdint.h>
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"celkeeper.local/native/k8scel"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The k8scel capability's exports: templates compiled and constraints bound as Gatekeeper's
// K8sNativeValidation driver does, requests decided (validate, explain), synced data stores, and single
// expressions (tests and goldens).

func init() {
	// the library's GOGC is set before its dependencies initialise (package gcpercent, imported by main.go)
	go warmTemplateCompiler()
}

// warmTemplateCompiler builds the template compiler's environments (Kubernetes' base environment
// and the ones a template's parts compile in, once per process) and compiles a template written as
// Gatekeeper's CEL templates are, in the background as the library loads, so that the process's first
// template does not wait for either: the loader (Python importing and reading files meanwhile)
// overlaps them. A compile arriving first waits for it (the process's one compiler is in use), as it
// would build them itself. Every process that loads the library compiles templates (webhook workers,
// the informer, the offline tools).
func warmTemplateCompiler() {
	_, _ = k8scel.CompileTemplate(warmTemplate)
}

// warmTemplate has a part of every kind (each kind compiles in an environment of its own) and the
// constructs templates use (macros, optional and has() selection, string and list functions, map and
// list literals, params, request). cel-go parses with an ANTLR parser whose prediction caches fill as
// it meets constructs, and its checker resolves overloads lazily: a process's first real template cost
// 22-58 ms to compile after a warm-up of trivial expressions (later ones 2-10 ms), and 5-8 ms after
// this one (~18 ms on the loading goroutine; measured 12-05 on four of examples/' templates).
var warmTemplate = map[string]any{
	"variables": []any{
		map[string]any{"name": "containers", "expression": "has(object.spec.containers) ? object.spec.containers : []"},
		map[string]any{"name": "bad", "expression": "variables.containers.filter(c, !c.image.startsWith('x') && c.name in ['a', 'b']).map(c, c.name)"},
		map[string]any{"name": "n", "expression": "size(variables.bad) + 1 - 2 * 3 / 4 % 5"},
		map[string]any{"name": "m", "expression": "{'k': 1}.exists(k, k == 'k') || [1, 2].all(x, x > 0) || object.metadata.?labels.orValue({}).size() >= 0"},
		map[string]any{"name": "s", "expression": "string(object.metadata.name).matches('^[a-z]+$') && 'a'.contains('b') && 'x'.endsWith('y') && params.x.lowerAscii() == 'x'"},
	},
	"validations": []any{map[string]any{
		"expression":        "size(variables.bad) == 0 && !variables.m && variables.s",
		"messageExpression": "'bad: ' + variables.bad.join(', ') + string(variables.n)",
	}},
	"matchConditions": []any{map[string]any{"name": "warm", "expression": "request.operation != 'DELETE' && (object.kind == 'Pod' || has(object.spec))"}},
}

// k8scel_compilers lets up to n templates compile at once, each from a thread of its own (see
// k8scel.WarmCompilers): the compilers this needs are made and warmed in the background. A process keeps
// one otherwise.
//
//export k8scel_compilers
func k8scel_compilers(n C.int) {
	k8scel.WarmCompilers(int(n), warmTemplate)
}

type templateReply struct {
	Handle        int64               `json:"handle,omitempty"`
	FailurePolicy string              `json:"failurePolicy,omitempty"`
	Diagnostics   []k8scel.Diagnostic `json:"diagnostics"`
	Error         string              `json:"error,omitempty"`
}

type templateOptions struct {
	// the kinds of synced data the template reads (celkeeper's extension; none: Gatekeeper's template)
	DataKinds []k8scel.DataKind `json:"dataKinds"`
}

// k8scel_template compiles a K8sNativeValidation source (a JSON object) as Gatekeeper's driver does,
// with options (JSON, may be empty: {"dataKinds": [{"apiVersion", "kind"}, ...]} for a template that
// reads synced data). Returns the handle (0 when Gatekeeper refuses the template: the reply says why).
//
//export k8scel_template
func k8scel_template(src *C.char, n C.int, opts *C.char, optn C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var source map[string]any
	if err := utiljson.Unmarshal(bytesOf(src, n), &source); err != nil {
		replyJSON(out, outn, templateReply{Error: "the source is not a JSON object: " + err.Error()})
		return 0
	}
	var options templateOptions
	if raw := bytesOf(opts, optn); len(raw) > 0 {
		if err := json.Unmarshal(raw, &options); err != nil {
			replyJSON(out, outn, templateReply{Error: "the template options are not valid: " + err.Error()})
			return 0
		}
	}
	t, err := k8scel.CompileTemplateReading(source, options.DataKinds)
	if err != nil {
		replyJSON(out, outn, templateReply{Error: err.Error()})
		return 0
	}
	h := register(t)
	replyJSON(out, outn, templateReply{Handle: h, FailurePolicy: t.FailurePolicy(), Diagnostics: append([]k8scel.Diagnostic{}, t.Diagnostics...)})
	return C.longlong(h)
}

type boundConstraint struct {
	template   *k8scel.Template
	constraint *k8scel.Constraint
}

// k8scel_constraint binds a constraint object (JSON) to a compiled template. Returns the handle, or 0
// with {"error": ...}.
//
//export k8scel_constraint
func k8scel_constraint(template C.longlong, obj *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	t, ok := lookup(int64(template)).(*k8scel.Template)
	if !ok {
		replyJSON(out, outn, map[string]string{"error": fmt.Sprintf("no template with handle %d", template)})
		return 0
	}
	c, err := t.Bind(bytesOf(obj, n))
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": "cannot read the constraint: " + err.Error()})
		return 0
	}
	reply(out, outn, []byte("{}"))
	return C.longlong(register(&boundConstraint{t, c}))
}

// validateReply writes k8scel_validate's reply: {"d": {"<index>": [decision, ...], ...}, "ns": [...]},
// the decisions of the constraints that have some, by their position, and the nanoseconds spent on
// each constraint (written by hand: encoding/json's reflection costs microseconds per request).
func validateReply(decisions [][]k8scel.Decision, elapsed []int64) ([]byte, error) {
	out := make([]byte, 0, 64+12*len(elapsed))
	out = append(out, `{"d":{`...)
	first := true
	for i, d := range decisions {
		if len(d) == 0 {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = strconv.AppendInt(out, int64(i), 10)
		out = append(out, `":`...)
		data, err := json.Marshal(d)
		if err != nil {
			return nil, err
		}
		out = append(out, data...)
	}
	out = append(out, `},"ns":[`...)
	for i, ns := range elapsed {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, ns, 10)
	}
	return append(out, "]}"...), nil
}

// k8scel_store_open opens a synced data store (its path, UTF-8) read-only, with at most maxConns
// connections. Returns the handle, or 0 with {"error": ...}.
//
//export k8scel_store_open
func k8scel_store_open(path *C.char, n C.int, maxConns C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	s, err := k8scel.OpenStore(string(bytesOf(path, n)), int(maxConns))
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	reply(out, outn, []byte("{}"))
	return C.longlong(register(s))
}

// k8scel_store_close closes a store and releases its handle.
//
//export k8scel_store_close
func k8scel_store_close(h C.longlong) {
	if s, ok := lookup(int64(h)).(*k8scel.Store); ok {
		_ = s.Close()
	}
	native_release(h)
}

// k8scel_validate decides one request for constraints (handles from k8scel_constraint, in order, as
// count int64s): the AdmissionRequest JSON without object/oldObject (header), those objects' JSON
// (empty: none), the request's Namespace object (empty: none), the synced data store templates that
// read data read (a handle from k8scel_store_open; 0: none, they see an empty inventory), and a
// timeout (ns, 0: none). Replies with the decisions that do not admit, by constraint, and the
// nanoseconds spent on each (see validateReply), or {"error": ...} when the request cannot be read
// (as Gatekeeper's driver fails the whole query).
//
//export k8scel_validate
func k8scel_validate(header *C.char, hn C.int, object *C.char, on C.int, oldObject *C.char, oldn C.int,
	namespace *C.char, nsn C.int, store C.longlong, list *C.longlong, count C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	rep, failed := decideRequest(false, bytesOf(header, hn), bytesOf(object, on), bytesOf(oldObject, oldn), bytesOf(namespace, nsn),
		int64(store), unsafe.Slice((*int64)(unsafe.Pointer(list)), int(count)), timeout)
	if failed != nil {
		replyJSON(out, outn, failed)
		return 1
	}
	data, err := validateReply(rep.Decisions, rep.Elapsed)
	if err != nil {
		replyJSON(out, outn, map[string]any{"error": "cannot encode the decisions: " + err.Error(), "internal": true})
		return 1
	}
	reply(out, outn, data)
	return 0
}

// decideReply is what decideRequest found: per constraint its decisions, the nanoseconds spent and
// (explain) the trace of its parts. k8scel_explain replies with it as JSON ({"d": [...], "ns": [...],
// "t": [...]}, every constraint listed); k8scel_validate through validateReply.
type decideReply struct {
	Decisions [][]k8scel.Decision `json:"d"`
	Elapsed   []int64             `json:"ns"`
	Traces    []k8scel.Trace      `json:"t,omitempty"`
}

// k8scel_explain is k8scel_validate recording, per constraint, every part's result (k8scel.Explain):
// the same decisions, plus {"t": [trace, ...]}. For explanations, never on the webhook's path.
//
//export k8scel_explain
func k8scel_explain(header *C.char, hn C.int, object *C.char, on C.int, oldObject *C.char, oldn C.int,
	namespace *C.char, nsn C.int, store C.longlong, list *C.longlong, count C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	rep, failed := decideRequest(true, bytesOf(header, hn), bytesOf(object, on), bytesOf(oldObject, oldn), bytesOf(namespace, nsn),
		int64(store), unsafe.Slice((*int64)(unsafe.Pointer(list)), int(count)), timeout)
	if failed != nil {
		replyJSON(out, outn, failed)
		return 1
	}
	replyJSON(out, outn, rep)
	return 0
}

// decideRequest is k8scel_validate and k8scel_explain: the constraints decided in order, within the
// timeout, by Template.Validate or (explain) Template.Explain; or the error reply when the request,
// the store or a constraint cannot be found.
func decideRequest(explain bool, header, object, oldObject, namespace []byte, store int64, ids []int64, timeout C.longlong) (*decideReply, map[string]string) {
	newRequest := k8scel.NewRecycledRequest // its decisions are strings, made before r.Done
	if explain {
		newRequest = k8scel.NewRequest // off the webhook's path: its traces keep whatever they hold
	}
	r, err := newRequest(header, object, oldObject, namespace)
	if err != nil {
		return nil, map[string]string{"error": err.Error()}
	}
	defer r.Done()
	ctx, cancel := deadline(timeout)
	defer cancel()
	if store != 0 {
		s, ok := lookup(store).(*k8scel.Store)
		if !ok {
			return nil, map[string]string{"error": fmt.Sprintf("no data store with handle %d", store)}
		}
		view := k8scel.NewView(ctx, s)
		defer view.Close()
		r.ReadData(view)
	}
	rep := &decideReply{Decisions: make([][]k8scel.Decision, len(ids)), Elapsed: make([]int64, len(ids))}
	if explain {
		rep.Traces = make([]k8scel.Trace, len(ids))
	}
	for i, h := range ids {
		started := time.Now()
		b, ok := lookup(h).(*boundConstraint)
		if !ok {
			return nil, map[string]string{"error": fmt.Sprintf("no constraint with handle %d", h)}
		}
		if explain {
			rep.Traces[i] = k8scel.Trace{Parts: []k8scel.TracePart{}}
		}
		if ctx.Err() != nil {
			rep.Decisions[i] = []k8scel.Decision{b.template.ErrorDecision(fmt.Sprintf(
				"not evaluated: the evaluation deadline (%s) passed before this constraint was reached", time.Duration(timeout)))}
			continue
		}
		if explain {
			rep.Decisions[i], rep.Traces[i] = b.template.Explain(ctx, r, b.constraint, k8scel.PerCallLimit)
		} else {
			rep.Decisions[i] = b.template.Validate(ctx, r, b.constraint, k8scel.PerCallLimit)
		}
		rep.Elapsed[i] = int64(time.Since(started))
	}
	return rep, nil
}

type expressionRequest struct {
	Source    string            `json:"source"`
	Variables []k8scel.Variable `json:"variables"`
}

type expressionReply struct {
	OutputType string `json:"outputType,omitempty"`
	Error      *struct {
		Variable string `json:"variable,omitempty"`
		Message  string `json:"message"`
		Line     int    `json:"line,omitempty"`
		Column   int    `json:"column,omitempty"`
		Full     string `json:"full"`
	} `json:"error,omitempty"`
}

// k8scel_expression compiles one expression as a template variable is compiled (see
// k8scel.CompileExpression). Returns the handle, or 0 with the compile error.
//
//export k8scel_expression
func k8scel_expression(in *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var req expressionRequest
	if err := json.Unmarshal(bytesOf(in, n), &req); err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return -1
	}
	e, err := k8scel.CompileExpression(req.Source, req.Variables)
	var rep expressionReply
	if err != nil {
		ce, ok := err.(*k8scel.CompileError)
		if !ok {
			replyJSON(out, outn, map[string]string{"error": err.Error()})
			return -1
		}
		rep.Error = &struct {
			Variable string `json:"variable,omitempty"`
			Message  string `json:"message"`
			Line     int    `json:"line,omitempty"`
			Column   int    `json:"column,omitempty"`
			Full     string `json:"full"`
		}{ce.Variable, ce.Message, ce.Line, ce.Column, ce.Full}
		replyJSON(out, outn, rep)
		return 0
	}
	rep.OutputType = e.OutputType
	replyJSON(out, outn, rep)
	return C.longlong(register(e))
}

// k8scel_evaluate evaluates an expression (handle) with inputs {object, oldObject, request,
// namespaceObject, params} (JSON, numbers as Kubernetes decodes them). Replies with the encoded value
// or {"t": "error", "v": message}.
//
//export k8scel_evaluate
func k8scel_evaluate(h C.longlong, in *C.char, n C.int, timeout C.longlong, out **C.char, outn *C.int) (result C.int) {
	var status C.longlong
	defer func() { // a panic recovered by guard sets status; else the value returned stands
		if status != 0 {
			result = C.int(status)
		}
	}()
	defer guard(out, outn, &status)
	e, ok := lookup(int64(h)).(*k8scel.Expression)
	if !ok {
		replyJSON(out, outn, map[string]string{"error": fmt.Sprintf("no expression with handle %d", h)})
		return 1
	}
	var inputs k8scel.Inputs
	if err := utiljson.Unmarshal(bytesOf(in, n), &inputs); err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 1
	}
	ctx, cancel := deadline(timeout)
	defer cancel()
	value, err := e.Evaluate(ctx, inputs)
	if err != nil {
		replyJSON(out, outn, k8scel.Encoded{T: "error", V: err.Error()})
		return 0
	}
	replyJSON(out, outn, k8scel.Encode(value))
	return 0
}
