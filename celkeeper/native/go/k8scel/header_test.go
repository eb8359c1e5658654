package k8scel

import (
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// readHeader gives what json.Unmarshal gives (value or error), and its fast path reads the plain
// headers celkeeper sends (the audit's, the webhook's) itself.
func TestReadHeaderIsJSONUnmarshal(t *testing.T) {
	fast := []string{
		string(auditHeader),
		string(benchHeader),
		`{}`,
		` { "uid" : "x" , "kind" : { } } `,
		`{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},` +
			`"subResource":"scale","requestSubResource":"scale","requestKind":null,"requestResource":null,"operation":"UPDATE",` +
			`"userInfo":{"username":"bob","uid":"42","groups":[],"extra":{"scopes":["a","b"],"none":[],"scopes":["c"]}},` +
			`"object":{"a":[1,2,{"b":null}]},"oldObject":null,"dryRun":true,"options":{"kind":"UpdateOptions","x":[1.5e3, "\u00e9"]}}`,
		`{"name":"caf\u00e9 \"q\"","namespace":"ns\n","userInfo":{"groups":["system:masters","x"]}}`,
		`{"options":[1,2],"object":"text","oldObject":12}`,
		`{"name":"é日本"}`,
	}
	fallback := []string{
		`{"Kind":{"group":"g"}}`,                         // another case: encoding/json takes it
		`{"kind":{"Group":"g","version":"v1"}}`,          // likewise inside
		`{"kind":{"group":"a"},"kind":{"version":"v1"}}`, // a repeated struct field is merged
		`{"name":"a","name":null}`,                       // null leaves a string as it was
		`{"name":"a","name":"b"}`,
		`{"uid":null}`,
		`{"name":1}`,       // an error
		`{"dryRun":"yes"}`, // an error
		`{"userInfo":{"groups":null}}`,
		`{"userInfo":{"extra":{"a":null}}}`,
		`{"userInfo":{"groups":["a",1]}}`,         // an error
		`{"unknown":{"deep":[1,2,3]},"name":"x"}`, // ignored by encoding/json
		`{"name":"x"} trailing`,                   // an error
		`{"name":"x",}`,                           // an error
		`[]`,                                      // an error
		``,                                        // an error
		`{"name":"\ud800"}`,                       // a lone surrogate
		"{\"name\":\"\xff\"}",                     // invalid UTF-8
		`{"requestKind":{"group":1}}`,             // an error
		`{"options":{"a":1e400}}`,                 // a number out of range: kept raw by json
	}
	check := func(doc string, wantFast bool) {
		t.Helper()
		want := &admissionv1.AdmissionRequest{}
		wantErr := json.Unmarshal([]byte(doc), want)
		got, gotErr := readHeader([]byte(doc))
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%s: json.Unmarshal: %v; readHeader: %v", doc, wantErr, gotErr)
		}
		if wantErr != nil {
			if wantErr.Error() != gotErr.Error() {
				t.Fatalf("%s: json.Unmarshal: %v; readHeader: %v", doc, wantErr, gotErr)
			}
		} else if !reflect.DeepEqual(want, got) {
			t.Fatalf("%s:\njson.Unmarshal %#v\nreadHeader     %#v", doc, want, got)
		}
		if _, ok := fastHeader([]byte(doc)); ok != wantFast {
			t.Fatalf("%s: read by the fast path: %v, want %v", doc, ok, wantFast)
		}
	}
	for _, doc := range fast {
		check(doc, true)
	}
	for _, doc := range fallback {
		check(doc, false)
	}
}

// auditHeader is the header celkeeper sends for an audited object (review/request.py
// request_for_object: no operation, no userInfo, no options).
var auditHeader = []byte(`{"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"","resource":""},` +
	`"requestKind":{"group":"","version":"v1","kind":"Pod"},"requestResource":{"group":"","version":"","resource":""},` +
	`"name":"web-1","namespace":"team-1","operation":"","userInfo":{},"dryRun":false,"options":null}`)

// The header read by readHeader (BenchmarkPieceHeader: a webhook's by encoding/json) and an audited
// object's by both.
func BenchmarkPieceHeaderRead(b *testing.B) {
	loopCPU(b, func() { _, _ = readHeader(benchHeader) })
}
func BenchmarkPieceAuditHeaderJSON(b *testing.B) {
	loopCPU(b, func() { _ = json.Unmarshal(auditHeader, &admissionv1.AdmissionRequest{}) })
}
func BenchmarkPieceAuditHeaderRead(b *testing.B) {
	loopCPU(b, func() { _, _ = readHeader(auditHeader) })
}

// BenchmarkPieceAuditRequest: an audited object's request (NewRequest on auditHeader).
func BenchmarkPieceAuditRequest(b *testing.B) {
	object := mustJSON(benchPod())
	ns := mustJSON(benchNamespace)
	loopCPU(b, func() { _, _ = NewRequest(auditHeader, object, nil, ns) })
}
