package main

// `gen k8slib`: the Kubernetes library cases of tests/cel/k8slib, compiled as a Gatekeeper template
// variable (see main.go) and evaluated with every input null.
//
// Input: a JSON array of requests, each {"expr": "<CEL>"} or {"quantity_string": "<quantity>"} (the
// latter prints resource.ParseQuantity(s).String(), which CEL cannot reach).
// Output: {expression or "quantity_string:<s>": encoded result}; a failure to plan the program is
// {"t": "program_error", "v": message}.

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/resource"
)

type k8slibRequest struct {
	Expr           *string `json:"expr,omitempty"`
	QuantityString *string `json:"quantity_string,omitempty"`
}

func k8slib(dec *json.Decoder) (any, error) {
	var reqs []k8slibRequest
	if err := dec.Decode(&reqs); err != nil {
		return nil, err
	}
	c := compiler()
	none := map[string]any{"object": nil, "oldObject": nil, "request": nil, "params": nil, "namespaceObject": nil}
	results := map[string]result{}
	for _, r := range reqs {
		switch {
		case r.Expr != nil:
			results[*r.Expr] = evaluate(c, *r.Expr, none, "program_error").Result
		case r.QuantityString != nil:
			key := "quantity_string:" + *r.QuantityString
			if q, err := resource.ParseQuantity(*r.QuantityString); err != nil {
				results[key] = result{"error", err.Error()}
			} else {
				results[key] = result{"string", q.String()}
			}
		}
	}
	return results, nil
}
