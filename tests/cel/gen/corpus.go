package main

// `gen corpus`: the differential corpus (tests/cel/corpus*.py), compiled as a Gatekeeper template
// variable (see main.go) and evaluated with the corpus inputs as object, oldObject, request, params
// and namespaceObject.
//
// Input: {"inputs": {name: {variable: JSON}}, "cases": [{"name", "expr", "inputs"}]}.
// Output: {case name: {"type": output type or "", "result": encoded result}}.

import (
	"bytes"
	"encoding/json"
)

type corpusCase struct {
	Name   string `json:"name"`
	Expr   string `json:"expr"`
	Inputs string `json:"inputs"`
}

type corpusInput struct {
	Inputs map[string]map[string]json.RawMessage `json:"inputs"`
	Cases  []corpusCase                          `json:"cases"`
}

func corpus(dec *json.Decoder) (any, error) {
	var in corpusInput
	if err := dec.Decode(&in); err != nil {
		return nil, err
	}
	c := compiler()
	var err error
	results := map[string]out{}
	for _, k := range in.Cases {
		vars := map[string]any{"object": nil, "oldObject": nil, "request": nil, "params": nil, "namespaceObject": nil}
		for name, raw := range in.Inputs[k.Inputs] {
			if vars[name], err = fromJSON(raw); err != nil {
				return nil, err
			}
		}
		results[k.Name] = evaluate(c, k.Expr, vars, "compile_error")
	}
	return results, nil
}

// fromJSON decodes a JSON document as Kubernetes' unstructured data (integers as int64).
func fromJSON(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
		return x
	}
	return v
}
