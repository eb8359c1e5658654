package main

// `gen k8slib`: the Kubernetes library cases of tests/cel/k8slib, in the base environment (no variables).
//
// Input: a JSON array of requests, each {"expr": "<CEL>"} or {"quantity_string": "<quantity>"} (the
// latter prints resource.ParseQuantity(s).String(), which CEL cannot reach).
// Output: {expression or "quantity_string:<s>": encoded result}; a failure to plan the program is
// {"t": "program_error", "v": message}.

import (
	"encoding/json"

	"github.com/google/cel-go/cel"
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
	env := baseEnv()
	results := map[string]result{}
	for _, r := range reqs {
		switch {
		case r.Expr != nil:
			results[*r.Expr] = evaluate(env, *r.Expr, cel.NoVars(), "program_error").Result
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
