package k8scel

import "testing"

// Strings with escapes are decoded as Kubernetes' decoder decodes them, or handed over to it.
func TestDecodeObjectEscapes(t *testing.T) {
	for _, doc := range []string{
		`{"a":"\""}`, `{"a":"\\"}`, `{"a":"\/"}`, `{"a":"\b\f\n\r\t"}`, `{"a":"x\u0041y"}`, `{"a":"\u00e9\u65e5"}`,
		`{"a":"\u0000"}`, `{"a":"\uFFFF"}`, `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\udc00x"}`, `{"a":"\'"}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12zz"}`, `{"a":"\`, `{"a":"\"`, `{"a":"\\\""}`, `{"é\"":"日\n本"}`,
		"{\"a\":\"\\n\xff\"}", "{\"a\":\"\\n\x01\"}", `{"k:{\"name\":\"app\"}":{".":{},"f:image":{}}}`,
	} {
		checkDecode(t, doc)
	}
}

// The managedFields of an object as the API server lists it are decoded by the fast path.
func TestDecodeObjectManagedFieldsFast(t *testing.T) {
	doc := `{"kind":"Pod","metadata":{"managedFields":[{"fieldsV1":{"f:spec":{"f:containers":` +
		`{"k:{\"name\":\"app\"}":{".":{},"f:env":{"k:{\"name\":\"VAR0\"}":{".":{}}}}}}}}]}}`
	got, err := decodeObject([]byte(doc))
	if err != nil {
		t.Fatalf("not decoded by the fast path: %v", err)
	}
	containers := got["metadata"].(map[string]any)["managedFields"].([]any)[0].(map[string]any)["fieldsV1"].(map[string]any)["f:spec"].(map[string]any)["f:containers"].(map[string]any)
	if _, ok := containers[`k:{"name":"app"}`]; !ok {
		t.Fatalf("key not unescaped: %v", containers)
	}
	checkDecode(t, doc)
}
