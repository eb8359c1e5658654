package k8scel

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// decodeObject must give what Kubernetes' decoder gives, or hand over to it (errFallback).
func checkDecode(t *testing.T, doc string) {
	t.Helper()
	want := map[string]any{}
	werr := utiljson.Unmarshal([]byte(doc), &want)
	got, gerr := decodeObject([]byte(doc))
	if gerr != nil {
		if gerr != errFallback {
			t.Fatalf("%q: unexpected error %v", doc, gerr)
		}
		return // Kubernetes' decoder decides
	}
	if werr != nil {
		t.Fatalf("%q: decoded, but Kubernetes says %v", doc, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", doc, got, want)
	}
}

func TestDecodeObjectAsKubernetes(t *testing.T) {
	for _, doc := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":-0}`, `{"a":1.0}`, `{"a":1e3}`, `{"a":1E+3}`, `{"a":-1.5e-3}`,
		`{"a":9223372036854775807}`, `{"a":9223372036854775808}`, `{"a":-9223372036854775808}`,
		`{"a":-9223372036854775809}`, `{"a":1e400}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":+1}`,
		`{"a":-}`, `{"a":1e}`, `{"a":"x","a":"y"}`, `{"a":[]}`, `{"a":[1,[2,{"b":null}]]}`,
		`{"a":true,"b":false,"c":null}`, `{"a":"é ü 日本"}`, `{"a":"\u00e9"}`, `{"a":"x\ny"}`,
		`{"a":"\ud83d\ude00"}`, "{\"a\":\"\xff\"}", "{\"a\":\"\x01\"}", `{"a":tru}`, `{"a":1,}`, `{,}`,
		`{"a":1} x`, `[1]`, `null`, `"s"`, `{"a":[1,]}`, `{"a" 1}`, `{"a":{"b":{"c":[{"d":1.25}]}}}`,
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[]}}`,
		`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
		`{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`,
	} {
		checkDecode(t, doc)
	}
	// generated documents
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		checkDecode(t, "{"+genMembers(rng, 0)+"}")
	}
}

func genMembers(rng *rand.Rand, depth int) string {
	n := rng.Intn(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%s:%s", genString(rng), genValue(rng, depth+1))
	}
	return strings.Join(parts, ",")
}

func genString(rng *rand.Rand) string {
	pieces := []string{"a", "key", "é", "\\n", "\\\"", "\\u0041", " ", "日", "\\ud800", "x"}
	var b strings.Builder
	b.WriteByte('"')
	for i := rng.Intn(4); i > 0; i-- {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	b.WriteByte('"')
	return b.String()
}

func genValue(rng *rand.Rand, depth int) string {
	if depth > 4 {
		return "1"
	}
	switch rng.Intn(9) {
	case 0:
		return "{" + genMembers(rng, depth) + "}"
	case 1:
		items := make([]string, rng.Intn(4))
		for i := range items {
			items[i] = genValue(rng, depth+1)
		}
		return "[" + strings.Join(items, ",") + "]"
	case 2:
		return genString(rng)
	case 3:
		return []string{"true", "false", "null"}[rng.Intn(3)]
	case 4:
		return fmt.Sprint(rng.Int63() - rng.Int63())
	case 5:
		return fmt.Sprint(rng.NormFloat64() * 1e6)
	case 6:
		return []string{"1e2", "-0", "0.0", "12345678901234567890", "1.5E-7", "-9223372036854775808"}[rng.Intn(6)]
	default:
		return fmt.Sprint(rng.Intn(100))
	}
}

// A decoder keeps the keys it read (up to maxKeys of at most maxKeyLength bytes): documents read
// after it is full, or with longer keys, decode as before; kept keys are the same strings.
func TestDecodeObjectKeysKept(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < maxKeys+500; i++ {
		fmt.Fprintf(&b, `"key%d":%d,`, i, i)
	}
	fmt.Fprintf(&b, `%q:"long"}`, strings.Repeat("k", maxKeyLength+1))
	doc := b.String()
	for i := 0; i < 3; i++ { // pooled decoders: the first fills its keys, later ones reuse them
		checkDecode(t, doc)
	}
	d := &jsonDecoder{}
	for i := 0; i < 2; i++ {
		d.data, d.pos = []byte(doc), 0
		if _, err := d.object(0); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.keys) != maxKeys {
		t.Fatalf("the decoder kept %d keys, want %d", len(d.keys), maxKeys)
	}
	if _, ok := d.keys[strings.Repeat("k", maxKeyLength+1)]; ok {
		t.Fatal("a key longer than maxKeyLength was kept")
	}
}

// Likewise the short string values: documents decode as before (Kubernetes' decoder gives the same),
// a value read again is the one kept, the kept values are bounded.
func TestDecodeObjectValuesKept(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"list":[`)
	for i := 0; i < maxKeys+500; i++ {
		fmt.Fprintf(&b, `"value%d",`, i)
	}
	fmt.Fprintf(&b, `%q],"again":"value7","escaped":"val\u0075e7"}`, strings.Repeat("v", maxKeyLength+1))
	doc := b.String()
	for i := 0; i < 3; i++ {
		checkDecode(t, doc)
	}
	d := &jsonDecoder{}
	var first, second map[string]any
	for i, out := range []*map[string]any{&first, &second} {
		d.data, d.pos = []byte(doc), 0
		m, err := d.object(0)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		*out = m
	}
	if len(d.values) != maxKeys {
		t.Fatalf("the decoder kept %d values, want %d", len(d.values), maxKeys)
	}
	if _, ok := d.values[strings.Repeat("v", maxKeyLength+1)]; ok {
		t.Fatal("a value longer than maxKeyLength was kept")
	}
	same := func(a, b any) bool { return unsafe.StringData(a.(string)) == unsafe.StringData(b.(string)) }
	if !same(first["again"], first["list"].([]any)[7]) || !same(first["again"], second["again"]) {
		t.Fatal("a short value read again was made again")
	}
	if first["escaped"] != "value7" || first["again"] != "value7" {
		t.Fatalf("values %v %v", first["escaped"], first["again"])
	}
}
