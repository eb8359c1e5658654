package k8scel

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Encoded is a CEL value as plain JSON data: {"t": kind, "v": value}. Kinds: bool, int and uint
// (decimal strings), double (its shortest decimal string, or "NaN"/"+Inf"/"-Inf"), string, bytes
// (base64), null, duration (nanoseconds, decimal string), timestamp (RFC 3339, UTC), optional (v:
// null or the encoded value), list (v: encoded items), map (v: [[key, value], ...] by key), type
// (its name), error (its message), and the Kubernetes library values quantity, url, ip, cidr, semver,
// format (their canonical string forms).
type Encoded struct {
	T string `json:"t"`
	V any    `json:"v"`
}

// Encode converts a CEL value.
func Encode(v ref.Val) Encoded {
	switch x := v.(type) {
	case *types.Err:
		return Encoded{"error", x.Error()}
	case types.Bool:
		return Encoded{"bool", bool(x)}
	case types.Int:
		return Encoded{"int", strconv.FormatInt(int64(x), 10)}
	case types.Uint:
		return Encoded{"uint", strconv.FormatUint(uint64(x), 10)}
	case types.Double:
		f := float64(x)
		switch {
		case math.IsNaN(f):
			return Encoded{"double", "NaN"}
		case math.IsInf(f, 1):
			return Encoded{"double", "+Inf"}
		case math.IsInf(f, -1):
			return Encoded{"double", "-Inf"}
		}
		return Encoded{"double", strconv.FormatFloat(f, 'g', -1, 64)}
	case types.String:
		return Encoded{"string", string(x)}
	case types.Bytes:
		return Encoded{"bytes", base64.StdEncoding.EncodeToString([]byte(x))}
	case types.Null:
		return Encoded{"null", nil}
	case types.Duration:
		return Encoded{"duration", strconv.FormatInt(int64(x.Duration), 10)}
	case types.Timestamp:
		return Encoded{"timestamp", x.Time.UTC().Format(time.RFC3339Nano)}
	case *types.Optional:
		if !x.HasValue() {
			return Encoded{"optional", nil}
		}
		return Encoded{"optional", Encode(x.GetValue())}
	case apiservercel.Quantity:
		return Encoded{"quantity", x.Quantity.String()}
	case *apiservercel.Quantity:
		return Encoded{"quantity", x.Quantity.String()}
	case apiservercel.URL:
		return Encoded{"url", x.URL.String()}
	case apiservercel.IP:
		return Encoded{"ip", x.Addr.String()}
	case apiservercel.CIDR:
		return Encoded{"cidr", x.Prefix.String()}
	case apiservercel.Semver:
		return Encoded{"semver", semver.Version(x.Version).String()}
	case apiservercel.Format:
		return Encoded{"format", x.Name}
	case *apiservercel.Format:
		return Encoded{"format", x.Name}
	case *types.Type:
		return Encoded{"type", x.TypeName()}
	}
	if l, ok := v.(traits.Lister); ok {
		items := []Encoded{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			items = append(items, Encode(it.Next()))
		}
		return Encoded{"list", items}
	}
	if m, ok := v.(traits.Mapper); ok {
		entries := [][2]Encoded{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			entries = append(entries, [2]Encoded{Encode(k), Encode(m.Get(k))})
		}
		sort.Slice(entries, func(i, j int) bool { // a stable order for a map's entries
			a, _ := json.Marshal(entries[i][0])
			b, _ := json.Marshal(entries[j][0])
			return string(a) < string(b)
		})
		return Encoded{"map", entries}
	}
	return Encoded{"unknown", fmt.Sprintf("%T %v", v, v.Value())}
}
