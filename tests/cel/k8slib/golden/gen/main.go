// Command gen evaluates CEL expressions in the Kubernetes 1.34 base CEL environment
// (k8s.io/apiserver/pkg/cel/environment at v0.34.4, the environment Gatekeeper compiles templates in)
// and writes one JSON result per input. celkeeper's tests compare the pure-Python libraries in
// celkeeper/cel/k8slib against these results. Run through ../regenerate.sh.
//
// Input (stdin): a JSON array of requests, each {"expr": "<CEL>"} or {"quantity_string": "<quantity>"}
// (the latter prints resource.ParseQuantity(s).String(), which CEL cannot reach).
// Output (stdout): a JSON object mapping each request key to an encoded result.
package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

type request struct {
	Expr           *string `json:"expr,omitempty"`
	QuantityString *string `json:"quantity_string,omitempty"`
}

type result struct {
	T string `json:"t"`
	V any    `json:"v"`
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
		inner := encode(x.GetValue())
		return result{"optional", inner}
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
	case apiservercel.Semver:
		return result{"semver", semver.Version(x.Version).String()}
	case apiservercel.Format:
		return result{"format", x.Name}
	case *apiservercel.Format:
		return result{"format", x.Name}
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

func eval(env *cel.Env, expr string) (res result) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return result{"compile_error", iss.Err().Error()}
	}
	prg, err := env.Program(ast)
	if err != nil {
		return result{"program_error", err.Error()}
	}
	defer func() {
		if r := recover(); r != nil {
			res = result{"panic", fmt.Sprint(r)}
		}
	}()
	out, _, err := prg.Eval(cel.NoVars())
	if err != nil {
		return result{"error", err.Error()}
	}
	return encode(out)
}

func main() {
	var reqs []request
	if err := json.NewDecoder(os.Stdin).Decode(&reqs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := environment.MustBaseEnvSet(version.MajorMinor(1, 34), true).StoredExpressionsEnv()
	out := map[string]result{}
	for _, r := range reqs {
		switch {
		case r.Expr != nil:
			out[*r.Expr] = eval(env, *r.Expr)
		case r.QuantityString != nil:
			q, err := resource.ParseQuantity(*r.QuantityString)
			if err != nil {
				out["quantity_string:"+*r.QuantityString] = result{"error", err.Error()}
			} else {
				out["quantity_string:"+*r.QuantityString] = result{"string", q.String()}
			}
		}
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
