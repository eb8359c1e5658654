// Command gen compiles and evaluates CEL expressions in the Kubernetes 1.34 base CEL environment
// (k8s.io/apiserver/pkg/cel/environment at v0.34.4, the environment Gatekeeper compiles templates in),
// extended with the admission variables object, oldObject, request, params and namespaceObject (dyn),
// and writes one JSON result per case. celkeeper's CEL tests compare both engines against it.
// Run through ../regenerate.py.
//
// Input (stdin): {"inputs": {name: {variable: JSON}}, "cases": [{"name", "expr", "inputs"}]}.
// Output (stdout): {case name: {"type": output type or "", "result": encoded result}} where a compile
// error is {"t": "compile_error", "v": message} and an evaluation error {"t": "error", "v": message}.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

type caseIn struct {
	Name   string `json:"name"`
	Expr   string `json:"expr"`
	Inputs string `json:"inputs"`
}

type input struct {
	Inputs map[string]map[string]json.RawMessage `json:"inputs"`
	Cases  []caseIn                              `json:"cases"`
}

type result struct {
	T string `json:"t"`
	V any    `json:"v"`
}

type out struct {
	Type   string `json:"type"`
	Result result `json:"result"`
}

func encode(v ref.Val) result {
	switch x := v.(type) {
	case *types.Err:
		return result{"error", x.Error()}
	case types.Bool:
		return result{"bool", bool(x)}
	case types.Int:
		return result{"int", strconv.FormatInt(int64(x), 10)}
	case types.Uint:
		return result{"uint", strconv.FormatUint(uint64(x), 10)}
	case types.Double:
		f := float64(x)
		switch {
		case math.IsNaN(f):
			return result{"double", "NaN"}
		case math.IsInf(f, 1):
			return result{"double", "+Inf"}
		case math.IsInf(f, -1):
			return result{"double", "-Inf"}
		}
		return result{"double", strconv.FormatFloat(f, 'g', -1, 64)}
	case types.String:
		return result{"string", string(x)}
	case types.Bytes:
		return result{"bytes", base64.StdEncoding.EncodeToString([]byte(x))}
	case types.Null:
		return result{"null", nil}
	case types.Duration:
		return result{"duration", strconv.FormatInt(int64(x.Duration), 10)}
	case types.Timestamp:
		return result{"timestamp", x.Time.UTC().Format(time.RFC3339Nano)}
	case *types.Optional:
		if !x.HasValue() {
			return result{"optional", nil}
		}
		return result{"optional", encode(x.GetValue())}
	case apiservercel.Quantity:
		return result{"quantity", x.Quantity.String()}
	case *apiservercel.Quantity:
		return result{"quantity", x.Quantity.String()}
	case apiservercel.URL:
		return result{"url", x.URL.String()}
	case apiservercel.IP:
		return result{"ip", x.Addr.String()}
	case apiservercel.CIDR:
		return result{"cidr", x.Prefix.String()}
	case *types.Type:
		return result{"type", x.TypeName()}
	}
	if l, ok := v.(traits.Lister); ok {
		items := []result{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			items = append(items, encode(it.Next()))
		}
		return result{"list", items}
	}
	if m, ok := v.(traits.Mapper); ok {
		entries := [][2]result{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			entries = append(entries, [2]result{encode(k), encode(m.Get(k))})
		}
		sort.Slice(entries, func(i, j int) bool {
			a, _ := json.Marshal(entries[i][0])
			b, _ := json.Marshal(entries[j][0])
			return string(a) < string(b)
		})
		return result{"map", entries}
	}
	return result{"unknown", fmt.Sprintf("%T %v", v, v.Value())}
}

// fromJSON decodes a JSON document as Kubernetes' unstructured data (integers as int64).
func fromJSON(raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	return numbers(v)
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

func eval(env *cel.Env, expr string, vars map[string]any) (o out) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return out{"", result{"compile_error", iss.Err().Error()}}
	}
	o.Type = ast.OutputType().String()
	prg, err := env.Program(ast)
	if err != nil {
		o.Result = result{"compile_error", err.Error()}
		return o
	}
	defer func() {
		if r := recover(); r != nil {
			o.Result = result{"panic", fmt.Sprint(r)}
		}
	}()
	val, _, err := prg.Eval(vars)
	if err != nil {
		o.Result = result{"error", err.Error()}
		return o
	}
	o.Result = encode(val)
	return o
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	base := environment.MustBaseEnvSet(version.MajorMinor(1, 34), true).StoredExpressionsEnv()
	env, err := base.Extend(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("params", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	results := map[string]out{}
	for _, c := range in.Cases {
		vars := map[string]any{"object": nil, "oldObject": nil, "request": nil, "params": nil, "namespaceObject": nil}
		for name, raw := range in.Inputs[c.Inputs] {
			vars[name] = fromJSON(raw)
		}
		results[c.Name] = eval(env, c.Expr, vars)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
