package main

/*
#include <stdlib.h>
#include <stdint.h>
*/
import "C"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"celkeeper.local/native/mutation"
)

// The mutation capability's exports: sets of Gatekeeper's mutators (a handle each), mutators read and
// upserted into a set or removed, and admission requests answered as Gatekeeper's mutation webhook
// answers them (mutation/).

func systemOf(h C.longlong) (*mutation.System, error) {
	s, ok := lookup(int64(h)).(*mutation.System)
	if !ok {
		return nil, fmt.Errorf("no mutation system with handle %d", h)
	}
	return s, nil
}

// mutation_system makes an empty set of mutators with the webhook's options (JSON, may be empty:
// mutation.Options). Returns the handle, or 0 with {"error": ...}.
//
//export mutation_system
func mutation_system(opts *C.char, optn C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var options mutation.Options
	if raw := bytesOf(opts, optn); len(raw) > 0 {
		if err := json.Unmarshal(raw, &options); err != nil {
			replyJSON(out, outn, map[string]string{"error": "the mutation options are not valid: " + err.Error()})
			return 0
		}
	}
	reply(out, outn, []byte("{}"))
	return C.longlong(register(mutation.NewSystem(options)))
}

type upsertReply struct {
	ID       *mutation.ID      `json:"id,omitempty"`
	Mutator  string            `json:"mutator,omitempty"`
	Refused  *mutation.Refused `json:"refused,omitempty"`
	Conflict string            `json:"conflict,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// mutation_upsert reads a mutator document (JSON) and, unless it is refused, upserts it into the set
// (handle 0: only read it, as the apply-time check does). Returns 1 when it is in the set (a schema
// conflict is then said in "conflict"; Gatekeeper keeps such a mutator and applies neither it nor those it
// conflicts with), 0 when refused ("refused": kind, name, problems with their field paths).
//
//export mutation_upsert
func mutation_upsert(h C.longlong, doc *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var s *mutation.System
	if h != 0 {
		var err error
		if s, err = systemOf(h); err != nil {
			replyJSON(out, outn, upsertReply{Error: err.Error()})
			return 0
		}
	}
	load := mutation.Load
	if s != nil {
		load = s.Load
	}
	raw := bytes.Clone(bytesOf(doc, n)) // kept by the set: bytesOf aliases the caller's buffer
	m, err := load(raw)
	if err != nil {
		var refused *mutation.Refused
		if errors.As(err, &refused) {
			replyJSON(out, outn, upsertReply{Refused: refused})
		} else {
			replyJSON(out, outn, upsertReply{Error: err.Error()})
		}
		return 0
	}
	r := upsertReply{ID: &mutation.ID{Kind: m.ID().Kind, Name: m.ID().Name}, Mutator: m.String()}
	if s != nil {
		if err := s.UpsertDocument(m, raw); err != nil {
			r.Conflict = err.Error()
		}
	}
	replyJSON(out, outn, r)
	return 1
}

// mutation_remove takes the mutator {"kind", "name"} out of the set.
//
//export mutation_remove
func mutation_remove(h C.longlong, id *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	s, err := systemOf(h)
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	var which mutation.ID
	if err := json.Unmarshal(bytesOf(id, n), &which); err != nil {
		replyJSON(out, outn, map[string]string{"error": "not a mutator id: " + err.Error()})
		return 0
	}
	if err := s.Remove(mutation.MakeID(which.Kind, which.Name)); err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	reply(out, outn, []byte("{}"))
	return 1
}

// mutation_statuses lists the set's mutators in Gatekeeper's order with their schema conflicts
// ({"mutators": [mutation.Status, ...]}).
//
//export mutation_statuses
func mutation_statuses(h C.longlong, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	s, err := systemOf(h)
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	replyJSON(out, outn, map[string]any{"mutators": s.Statuses()})
	return 1
}

// mutation_mutate answers a request (JSON: mutation.Request, the AdmissionRequest and its Namespace) as
// Gatekeeper's mutation webhook does: mutation.Result (the AdmissionResponse, the patch, the mutated
// object, Gatekeeper's error). `obj` (length objn > 0) is the AdmissionRequest's object (JSON, encoded
// by the caller) given apart, in place of the request's "object": it is then scanned only where it is
// decoded, not first as part of the request's JSON too.
//
//export mutation_mutate
func mutation_mutate(h C.longlong, req *C.char, n C.int, obj *C.char, objn C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	s, err := systemOf(h)
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	var in mutation.Request
	if err := json.Unmarshal(bytesOf(req, n), &in); err != nil {
		replyJSON(out, outn, map[string]any{"error": "not a mutation request: " + err.Error(), "invalid": true})
		return 0
	}
	if objn > 0 {
		// read as the request's "object" is (null: none); JSON as the caller encoded it, decoded (and so
		// checked) where it is mutated
		in.Request.Object = mutation.RawObject(in.Request.Object, bytesOf(obj, objn))
	}
	res := s.Mutate(&in)
	replyJSON(out, outn, res)
	res.Release() // encoded: nothing reads the request's object after
	return 1
}

// mutation_object mutates one object (JSON: mutation.ObjectRequest) as Gatekeeper's expansion mutates a
// generated object: mutation.ObjectResult.
//
//export mutation_object
func mutation_object(h C.longlong, req *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	s, err := systemOf(h)
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	var in mutation.ObjectRequest
	if err := json.Unmarshal(bytesOf(req, n), &in); err != nil {
		replyJSON(out, outn, map[string]any{"error": "not an object to mutate: " + err.Error()})
		return 0
	}
	replyJSON(out, outn, s.MutateObject(&in))
	return 1
}

type expandOutputRequest struct {
	Objects []json.RawMessage `json:"objects"`
	Format  string            `json:"format"`
}

// mutation_expand_output renders resultants (JSON: {"objects": [...], "format": "yaml"|"json"}) as `gator
// expand` prints them: {"text": ...}, or 0 with {"error": ...}.
//
//export mutation_expand_output
func mutation_expand_output(req *C.char, n C.int, out **C.char, outn *C.int) (result C.longlong) {
	defer guard(out, outn, &result)
	var in expandOutputRequest
	if err := json.Unmarshal(bytesOf(req, n), &in); err != nil {
		replyJSON(out, outn, map[string]string{"error": "not resultants to print: " + err.Error()})
		return 0
	}
	text, err := mutation.ExpandOutput(in.Objects, in.Format)
	if err != nil {
		replyJSON(out, outn, map[string]string{"error": err.Error()})
		return 0
	}
	replyJSON(out, outn, map[string]string{"text": text})
	return 1
}
