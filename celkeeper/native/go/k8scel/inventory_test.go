package k8scel

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// storeSchema is celkeeper/cel/inventory.py's SCHEMA (tests/snapshot/test_datastore_engines.py checks that the
// library reads what the Python writer writes).
var storeSchema = []string{
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
	"CREATE TABLE kinds (id INTEGER PRIMARY KEY, api_version TEXT NOT NULL, kind TEXT NOT NULL, UNIQUE (api_version, kind))",
	"CREATE TABLE objects (kind_id INTEGER NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (kind_id, namespace, name)) WITHOUT ROWID",
	"CREATE INDEX objects_by_namespace ON objects (namespace, kind_id)",
}

type testStore struct {
	t    testing.TB
	db   *sql.DB
	path string
}

func newTestStore(t testing.TB) *testStore {
	path := filepath.Join(t.TempDir(), "data.db")
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, stmt := range storeSchema {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO meta VALUES ('format', ?)`, StoreFormat); err != nil {
		t.Fatal(err)
	}
	return &testStore{t, db, path}
}

func (s *testStore) put(obj map[string]any) {
	meta := obj["metadata"].(map[string]any)
	ns, _ := meta["namespace"].(string)
	apiVersion, kind := obj["apiVersion"].(string), obj["kind"].(string)
	if _, err := s.db.Exec(`INSERT OR IGNORE INTO kinds (api_version, kind) VALUES (?, ?)`, apiVersion, kind); err != nil {
		s.t.Fatal(err)
	}
	body, _ := json.Marshal(obj)
	if _, err := s.db.Exec(`INSERT OR REPLACE INTO objects SELECT id, ?, ?, ? FROM kinds WHERE api_version = ? AND kind = ?`,
		ns, meta["name"], body, apiVersion, kind); err != nil {
		s.t.Fatal(err)
	}
}

func (s *testStore) remove(apiVersion, kind, ns, name string) {
	if _, err := s.db.Exec(`DELETE FROM objects WHERE namespace = ? AND name = ? AND kind_id = (SELECT id FROM kinds WHERE api_version = ? AND kind = ?)`,
		ns, name, apiVersion, kind); err != nil {
		s.t.Fatal(err)
	}
}

func ingress(ns, name string, hosts ...string) map[string]any {
	rules := []any{}
	for _, h := range hosts {
		rules = append(rules, map[string]any{"host": h})
	}
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"rules": rules}}
}

var ingressKinds = []DataKind{{"networking.k8s.io/v1", "Ingress"}}

// the unique ingress host policy of gatekeeper-library, in CEL over data.inventory
var uniqueHostSource = map[string]any{
	"variables": []any{
		map[string]any{"name": "hosts", "expression": "object.spec.rules.map(r, r.host)"},
		map[string]any{"name": "others", "expression": `data.inventory.namespace.map(ns, data.inventory.namespace[ns]).filter(m, "networking.k8s.io/v1" in m && "Ingress" in m["networking.k8s.io/v1"]).map(m, m["networking.k8s.io/v1"]["Ingress"])`},
	},
	"validations": []any{map[string]any{
		"expression":        `variables.others.all(byName, byName.all(name, byName[name].metadata.namespace == object.metadata.namespace && name == object.metadata.name || !byName[name].spec.rules.exists(r, r.host in variables.hosts)))`,
		"messageExpression": `"ingress host conflicts with an existing ingress"`,
	}},
}

func ingressRequest(t testing.TB, obj map[string]any) *Request {
	header := []byte(`{"uid":"u","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"resource":{"group":"networking.k8s.io","version":"v1","resource":"ingresses"},"operation":"CREATE","name":"` +
		obj["metadata"].(map[string]any)["name"].(string) + `","namespace":"` + obj["metadata"].(map[string]any)["namespace"].(string) + `","userInfo":{}}`)
	body, _ := json.Marshal(obj)
	r, err := NewRequest(header, body, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func decide(t *testing.T, tmpl *Template, store *Store, obj map[string]any) []string {
	t.Helper()
	c, err := tmpl.Bind([]byte(`{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"K","metadata":{"name":"c"},"spec":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	r := ingressRequest(t, obj)
	view := NewView(context.Background(), store)
	defer view.Close()
	r.ReadData(view)
	var out []string
	for _, d := range tmpl.Validate(context.Background(), r, c, PerCallLimit) {
		out = append(out, d.Evaluation+": "+d.Message)
	}
	return out
}

func openTestStore(t *testing.T, s *testStore) *Store {
	store, err := OpenStore(s.path, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func TestUniqueIngressHostReadsTheStore(t *testing.T) {
	s := newTestStore(t)
	tmpl, err := CompileTemplateReading(uniqueHostSource, ingressKinds)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Diagnostics) != 0 {
		t.Fatalf("diagnostics: %+v", tmpl.Diagnostics)
	}
	store := openTestStore(t, s)
	mine := ingress("prod", "web", "a.example.com")
	if got := decide(t, tmpl, store, mine); len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	s.put(ingress("dev", "other", "b.example.com"))
	s.put(mine) // the object itself (an UPDATE): not a conflict
	if got := decide(t, tmpl, store, mine); len(got) != 0 {
		t.Fatalf("no conflict: %v", got)
	}
	s.put(ingress("dev", "clash", "c.example.com", "a.example.com"))
	if got := decide(t, tmpl, store, mine); len(got) != 1 || got[0] != "deny: ingress host conflicts with an existing ingress" {
		t.Fatalf("conflict: %v", got)
	}
	s.remove("networking.k8s.io/v1", "Ingress", "dev", "clash")
	if got := decide(t, tmpl, store, mine); len(got) != 0 {
		t.Fatalf("after the delete: %v", got)
	}
}

func evalData(t *testing.T, kinds []DataKind, store *Store, expression string) []string {
	t.Helper()
	source := map[string]any{"validations": []any{map[string]any{"expression": "(" + expression + `) == "~"`, "messageExpression": expression}}}
	tmpl, err := CompileTemplateReading(source, kinds)
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Diagnostics) != 0 {
		t.Fatalf("%s: %+v", expression, tmpl.Diagnostics)
	}
	return decide(t, tmpl, store, ingress("prod", "web", "a"))
}

func TestTheInventoryIsGatekeepersShapeRestrictedToTheDeclaredKinds(t *testing.T) {
	s := newTestStore(t)
	s.put(ingress("prod", "web", "a"))
	s.put(ingress("dev", "api", "b"))
	s.put(map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "prod"}})
	s.put(map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s", "namespace": "prod"}})
	store := openTestStore(t, s)
	kinds := append([]DataKind{{"v1", "Namespace"}}, ingressKinds...)
	for expression, want := range map[string]string{
		`data.inventory.namespace.map(ns, string(ns)).join(",")`:                                       `dev,prod`,
		`data.inventory.namespace["prod"].map(gv, string(gv)).join(",")`:                               `networking.k8s.io/v1`,
		`string(data.inventory.namespace.prod["networking.k8s.io/v1"].Ingress.web.spec.rules[0].host)`: `a`,
		`data.inventory.cluster.v1.Namespace.map(n, string(n)).join(",")`:                              `prod`,
		`string(size(data.inventory.cluster))`:                                                         `1`,
		`string("v1" in data.inventory.namespace.prod)`:                                                `false`, // Service is not declared
		`string("nope" in data.inventory.namespace)`:                                                   `false`,
		`string(size(data.inventory.namespace.?nope.orValue({})))`:                                     `0`,
		`string(has(data.inventory.namespace.dev))`:                                                    `true`,
		`string(data.inventory.namespace.dev["networking.k8s.io/v1"].Ingress.exists(n, n == "api"))`:   `true`,
		`string(data.inventory.namespace.nope)`:                                                        "no such key: nope",
	} {
		got := evalData(t, kinds, store, expression)
		if len(got) != 1 {
			t.Fatalf("%s: %v", expression, got)
		}
		if !strings.Contains(got[0], want) {
			t.Errorf("%s: got %q, want %q", expression, got[0], want)
		}
	}
}

func TestWithoutAStoreTheInventoryIsEmpty(t *testing.T) {
	got := evalData(t, ingressKinds, nil, `string(size(data.inventory.namespace)) + " " + string(size(data.inventory.cluster))`)
	if len(got) != 1 || got[0] != "deny: 0 0" {
		t.Fatalf("%v", got)
	}
}

func TestATemplateThatDeclaresNoKindsHasNoData(t *testing.T) {
	source := map[string]any{"validations": []any{map[string]any{"expression": "size(data.inventory.cluster) == 0"}}}
	tmpl, err := CompileTemplate(source) // Gatekeeper's environment, unchanged
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.Diagnostics) != 1 || !strings.Contains(tmpl.Diagnostics[0].Message, "undeclared reference to 'data'") {
		t.Fatalf("%+v", tmpl.Diagnostics)
	}
}

func TestAVariableReadingDataIsNotFixedWhenBound(t *testing.T) {
	s := newTestStore(t)
	store := openTestStore(t, s)
	source := map[string]any{
		"variables":   []any{map[string]any{"name": "n", "expression": "size(data.inventory.namespace)"}},
		"validations": []any{map[string]any{"expression": "variables.n == 0", "messageExpression": `"namespaces: " + string(variables.n)`}},
	}
	tmpl, err := CompileTemplateReading(source, ingressKinds)
	if err != nil {
		t.Fatal(err)
	}
	if got := decide(t, tmpl, store, ingress("prod", "web", "a")); len(got) != 0 {
		t.Fatalf("%v", got)
	}
	s.put(ingress("dev", "api", "b"))
	if got := decide(t, tmpl, store, ingress("prod", "web", "a")); len(got) != 1 || got[0] != "deny: namespaces: 1" {
		t.Fatalf("%v", got)
	}
}

func TestAStoreOfAnotherFormatIsRefused(t *testing.T) {
	s := newTestStore(t)
	if _, err := s.db.Exec(`UPDATE meta SET value = '0' WHERE key = 'format'`); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(s.path, 1); err == nil || !strings.Contains(err.Error(), "format") {
		t.Fatalf("%v", err)
	}
	if _, err := OpenStore(filepath.Join(t.TempDir(), "missing.db"), 1); err == nil {
		t.Fatal("a missing store opened")
	}
}

// BenchmarkUniqueHostScan decides one Ingress against the unique-host template with 10,000 synced
// Ingresses (bench/refdata.py measures the same through the library).
func BenchmarkUniqueHostScan(b *testing.B) {
	s := newTestStore(b)
	tx, _ := s.db.Begin()
	s.db.Exec(`INSERT INTO kinds (api_version, kind) VALUES ('networking.k8s.io/v1', 'Ingress')`)
	for i := 0; i < 10000; i++ {
		obj := ingress(fmt.Sprintf("team-%d", i%100), fmt.Sprintf("web-%d", i), fmt.Sprintf("web-%d.example.com", i))
		body, _ := json.Marshal(obj)
		tx.Exec(`INSERT INTO objects VALUES (1, ?, ?, ?)`, obj["metadata"].(map[string]any)["namespace"], obj["metadata"].(map[string]any)["name"], body)
	}
	tx.Commit()
	store, err := OpenStore(s.path, 2)
	if err != nil {
		b.Fatal(err)
	}
	tmpl, err := CompileTemplateReading(uniqueHostSource, ingressKinds)
	if err != nil {
		b.Fatal(err)
	}
	c, _ := tmpl.Bind([]byte(`{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"K","metadata":{"name":"c"},"spec":{}}`))
	mine := ingress("prod", "new", "new.example.com")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := ingressRequest(b, mine)
		view := NewView(context.Background(), store)
		r.ReadData(view)
		if d := tmpl.Validate(context.Background(), r, c, PerCallLimit); len(d) != 0 {
			b.Fatal(d)
		}
		view.Close()
	}
}
