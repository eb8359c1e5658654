// Command gen compiles and evaluates CEL expressions in the Kubernetes 1.34 base CEL environment
// (k8s.io/apiserver/pkg/cel/environment at v0.34.4, the environment Gatekeeper compiles templates in)
// and writes one JSON result per case: the golden answers celkeeper's CEL tests compare both engines
// against. Run through tests/cel/golden/regenerate.py (`gen corpus`) and
// tests/cel/k8slib/golden/regenerate.py (`gen k8slib`); see corpus.go and k8slib.go for each input.
//
// A result is {"t": kind, "v": value}: values are encoded by encode() below, a compile error is
// {"t": "compile_error", "v": message}, an evaluation error {"t": "error", "v": message}.
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

	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

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
	case apiservercel.Semver:
		return result{"semver", semver.Version(x.Version).String()}
	case apiservercel.Format:
		return result{"format", x.Name}
	case *apiservercel.Format:
		return result{"format", x.Name}
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

// evaluate compiles expr in env and evaluates it with vars (a map or an activation). A failure to
// plan the program is reported as programError ("compile_error" or "program_error").
func evaluate(env *cel.Env, expr string, vars any, programError string) (o out) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return out{"", result{"compile_error", iss.Err().Error()}}
	}
	o.Type = ast.OutputType().String()
	prg, err := env.Program(ast)
	if err != nil {
		o.Result = result{programError, err.Error()}
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

// baseEnv is Kubernetes 1.34's base environment for stored expressions.
func baseEnv() *cel.Env {
	return environment.MustBaseEnvSet(version.MajorMinor(1, 34), true).StoredExpressionsEnv()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func main() {
	modes := map[string]func(*json.Decoder) (any, error){"corpus": corpus, "k8slib": k8slib}
	if len(os.Args) != 2 || modes[os.Args[1]] == nil {
		fail(fmt.Errorf("usage: gen corpus|k8slib < request.json > results.json"))
	}
	results, err := modes[os.Args[1]](json.NewDecoder(os.Stdin))
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(results); err != nil {
		fail(err)
	}
}
