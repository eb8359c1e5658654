package k8scel

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"sync"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" database/sql driver
)

// Synced cluster data (a celkeeper extension: Gatekeeper's CEL cannot read it, Gatekeeper #3300).
//
// A template that declares the kinds it reads (celkeeper reads Gatekeeper's
// metadata.gatekeeper.sh/requires-sync-data annotation) is compiled with one more variable, `data`
// (dyn), shaped as Gatekeeper's Rego `data.inventory`:
//
//	data.inventory.cluster[<apiVersion>][<kind>][<name>]                   cluster-scoped objects
//	data.inventory.namespace[<namespace>][<apiVersion>][<kind>][<name>]    namespaced objects
//
// restricted to the kinds the template declares. The objects live in a store the informer writes
// (SQLite, its format in celkeeper/cel/inventory.py) and this library opens read-only: each request
// reads it in one read transaction (a consistent view), lazily - a map level is queried when the
// expression reaches it, an object decoded when it is read - so a request pays for what its
// expressions touch, and no process holds a copy of the cache.

// DataKind is a kind a template may read: its apiVersion ("v1", "networking.k8s.io/v1") and kind.
type DataKind struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// DataVarName is the variable a template that reads synced data gets.
const DataVarName = "data"

// StoreFormat is the format of the store this library reads (the `format` row of its `meta` table).
const StoreFormat = "1"

// Store is the synced data, opened read-only.
type Store struct {
	db   *sql.DB
	Path string

	objectStmt, namesStmt, bodiesStmt, namespacesStmt, nsKindsStmt, clusterKindStmt *sql.Stmt
}

// OpenStore opens the store at path read-only (the writer keeps it in WAL mode: readers and the
// writer do not block each other). At most maxConns connections are opened (one per concurrent
// request); each keeps a small page cache, the file itself is read through the OS page cache that
// every process shares.
func OpenStore(path string, maxConns int) (*Store, error) {
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_cache_size=-2048&_busy_timeout=5000&_query_only=1"
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, err
	}
	if maxConns < 1 {
		maxConns = 4
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db, Path: path}
	var format string
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'format'`).Scan(&format); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot read the synced data store %s: %w", path, err)
	}
	if format != StoreFormat {
		db.Close()
		return nil, fmt.Errorf("the synced data store %s has format %q; this library reads format %q", path, format, StoreFormat)
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.objectStmt, `SELECT body FROM objects WHERE kind_id = ? AND namespace = ? AND name = ?`},
		{&s.namesStmt, `SELECT name FROM objects WHERE kind_id = ? AND namespace = ? ORDER BY name`},
		{&s.bodiesStmt, `SELECT name, body FROM objects WHERE kind_id = ? AND namespace = ? ORDER BY name`},
		{&s.namespacesStmt, `SELECT DISTINCT namespace FROM objects WHERE kind_id = ? AND namespace != ''`},
		{&s.nsKindsStmt, `SELECT DISTINCT kind_id FROM objects WHERE namespace = ?`},
		{&s.clusterKindStmt, `SELECT 1 FROM objects WHERE kind_id = ? AND namespace = '' LIMIT 1`},
	} {
		if *p.stmt, err = db.Prepare(p.sql); err != nil {
			db.Close()
			return nil, fmt.Errorf("cannot read the synced data store %s: %w", path, err)
		}
	}
	return s, nil
}

// Close closes the store (views still open fail their next read).
func (s *Store) Close() error { return s.db.Close() }

// View is one request's read of a store: a read transaction, begun when the request first reads
// data and ended by Close; what it has read is kept for the request (the same map read twice is
// queried once).
type View struct {
	store *Store
	ctx   context.Context
	mu    sync.Mutex
	tx    *sql.Tx
	err   error
	kinds map[DataKind]int64 // the kinds the store has (any object ever synced)
	begun bool
	stmts map[*sql.Stmt]*sql.Stmt // the store's statements, prepared in this transaction
}

// NewView is a view of s for one request (s nil: an empty inventory).
func NewView(ctx context.Context, s *Store) *View { return &View{store: s, ctx: ctx} }

func (v *View) begin() error {
	if v.begun {
		return v.err
	}
	v.begun = true
	v.kinds = map[DataKind]int64{}
	if v.store == nil {
		return nil
	}
	v.tx, v.err = v.store.db.BeginTx(v.ctx, &sql.TxOptions{ReadOnly: true})
	if v.err != nil {
		return v.err
	}
	rows, err := v.tx.QueryContext(v.ctx, `SELECT id, api_version, kind FROM kinds`)
	if err != nil {
		v.err = err
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var k DataKind
		if err := rows.Scan(&id, &k.APIVersion, &k.Kind); err != nil {
			v.err = err
			return err
		}
		v.kinds[k] = id
	}
	v.err = rows.Err()
	return v.err
}

// Close ends the view's transaction.
func (v *View) Close() {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tx != nil {
		_ = v.tx.Rollback()
		v.tx = nil
	}
}

func (v *View) stmt(s *sql.Stmt) *sql.Stmt {
	if found, ok := v.stmts[s]; ok {
		return found
	}
	if v.stmts == nil {
		v.stmts = map[*sql.Stmt]*sql.Stmt{}
	}
	found := v.tx.StmtContext(v.ctx, s)
	v.stmts[s] = found
	return found
}

// the queries a data value makes (each under the view's lock: a transaction is one connection)

func (v *View) kindID(k DataKind) (int64, bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.begin(); err != nil {
		return 0, false, err
	}
	id, ok := v.kinds[k]
	return id, ok, nil
}

func (v *View) strings(s *sql.Stmt, args ...any) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.begin(); err != nil {
		return nil, err
	}
	if v.tx == nil {
		return nil, nil
	}
	rows, err := v.stmt(s).QueryContext(v.ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

func (v *View) exists(s *sql.Stmt, args ...any) (bool, error) {
	found, err := v.strings(s, args...)
	return len(found) > 0, err
}

func (v *View) body(kind int64, namespace, name string) ([]byte, bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.begin(); err != nil {
		return nil, false, err
	}
	if v.tx == nil {
		return nil, false, nil
	}
	var data []byte
	err := v.stmt(v.store.objectStmt).QueryRowContext(v.ctx, kind, namespace, name).Scan(&data)
	if err == sql.ErrNoRows {
		return nil, false, nil
	}
	return data, err == nil, err
}

// bodies is every (name, body) of one kind in one namespace.
func (v *View) bodies(kind int64, namespace string) (map[string][]byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.begin(); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if v.tx == nil {
		return out, nil
	}
	rows, err := v.stmt(v.store.bodiesStmt).QueryContext(v.ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var body []byte
		if err := rows.Scan(&name, &body); err != nil {
			return nil, err
		}
		out[name] = body
	}
	return out, rows.Err()
}

func (v *View) kindsIn(namespace string) (map[int64]bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.begin(); err != nil {
		return nil, err
	}
	out := map[int64]bool{}
	if v.tx == nil {
		return out, nil
	}
	rows, err := v.stmt(v.store.nsKindsStmt).QueryContext(v.ctx, namespace)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out[id] = true
	}
	return out, rows.Err()
}

// dataValue is `data` for one template in one request: the inventory of the template's kinds.
func newDataValue(view *View, kinds []DataKind) ref.Val {
	if view == nil {
		view = NewView(context.Background(), nil)
	}
	d := &dataReader{view: view, kinds: kinds}
	inventory := newLazyMap(func() ([]string, error) { return []string{"cluster", "namespace"}, nil },
		func(key string) (ref.Val, bool, error) {
			switch key {
			case "cluster":
				return d.cluster(), true, nil
			case "namespace":
				return d.namespaces(), true, nil
			}
			return nil, false, nil
		})
	return newLazyMap(func() ([]string, error) { return []string{"inventory"}, nil },
		func(key string) (ref.Val, bool, error) {
			if key == "inventory" {
				return inventory, true, nil
			}
			return nil, false, nil
		})
}

type dataReader struct {
	view  *View
	kinds []DataKind
}

// present is the template's kinds the store has, with their ids.
func (d *dataReader) present() ([]DataKind, []int64, error) {
	var kinds []DataKind
	var ids []int64
	for _, k := range d.kinds {
		id, ok, err := d.view.kindID(k)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			kinds = append(kinds, k)
			ids = append(ids, id)
		}
	}
	return kinds, ids, nil
}

// cluster is data.inventory.cluster: apiVersion -> kind -> name -> object.
func (d *dataReader) cluster() ref.Val {
	return d.byVersion("", func() (map[int64]bool, error) {
		_, ids, err := d.present()
		if err != nil {
			return nil, err
		}
		out := map[int64]bool{}
		for _, id := range ids {
			found, err := d.view.exists(d.view.store.clusterKindStmt, id)
			if err != nil {
				return nil, err
			}
			out[id] = found
		}
		return out, nil
	})
}

// namespaces is data.inventory.namespace: namespace -> apiVersion -> kind -> name -> object.
func (d *dataReader) namespaces() ref.Val {
	return newLazyMap(func() ([]string, error) {
		_, ids, err := d.present()
		if err != nil {
			return nil, err
		}
		set := map[string]bool{}
		for _, id := range ids {
			found, err := d.view.strings(d.view.store.namespacesStmt, id)
			if err != nil {
				return nil, err
			}
			for _, ns := range found {
				set[ns] = true
			}
		}
		return sortedKeys(set), nil
	}, func(namespace string) (ref.Val, bool, error) {
		if namespace == "" {
			return nil, false, nil
		}
		kinds, err := d.view.kindsIn(namespace)
		if err != nil {
			return nil, false, err
		}
		_, ids, err := d.present()
		if err != nil {
			return nil, false, err
		}
		any := false
		for _, id := range ids {
			any = any || kinds[id]
		}
		if !any {
			return nil, false, nil
		}
		return d.byVersion(namespace, func() (map[int64]bool, error) { return kinds, nil }), true, nil
	})
}

// byVersion is the apiVersion -> kind -> name -> object map of one namespace ("": cluster-scoped),
// given which kinds have objects there.
func (d *dataReader) byVersion(namespace string, having func() (map[int64]bool, error)) ref.Val {
	found := func() (map[string]map[string]int64, error) {
		kinds, ids, err := d.present()
		if err != nil {
			return nil, err
		}
		has, err := having()
		if err != nil {
			return nil, err
		}
		out := map[string]map[string]int64{}
		for i, k := range kinds {
			if !has[ids[i]] {
				continue
			}
			if out[k.APIVersion] == nil {
				out[k.APIVersion] = map[string]int64{}
			}
			out[k.APIVersion][k.Kind] = ids[i]
		}
		return out, nil
	}
	var once sync.Once
	var cached map[string]map[string]int64
	var cachedErr error
	load := func() (map[string]map[string]int64, error) {
		once.Do(func() { cached, cachedErr = found() })
		return cached, cachedErr
	}
	return newLazyMap(func() ([]string, error) {
		versions, err := load()
		if err != nil {
			return nil, err
		}
		return sortedKeys(versions), nil
	}, func(version string) (ref.Val, bool, error) {
		versions, err := load()
		if err != nil {
			return nil, false, err
		}
		kinds, ok := versions[version]
		if !ok {
			return nil, false, nil
		}
		return newLazyMap(func() ([]string, error) { return sortedKeys(kinds), nil },
			func(kind string) (ref.Val, bool, error) {
				id, ok := kinds[kind]
				if !ok {
					return nil, false, nil
				}
				return d.objects(id, namespace), true, nil
			}), true, nil
	})
}

// objects is the name -> object map of one kind in one namespace ("": cluster-scoped). An object read
// by name alone is one query; once the names have been listed (the map is iterated: the expression
// goes through the objects), every body comes with one query, each decoded when it is read.
func (d *dataReader) objects(kind int64, namespace string) ref.Val {
	var listed bool
	var all map[string][]byte
	return newLazyMap(func() ([]string, error) {
		listed = true
		return d.view.strings(d.view.store.namesStmt, kind, namespace)
	}, func(name string) (ref.Val, bool, error) {
		var data []byte
		var ok bool
		var err error
		if listed && all == nil {
			if all, err = d.view.bodies(kind, namespace); err != nil {
				return nil, false, err
			}
		}
		if all != nil {
			data, ok = all[name]
			delete(all, name) // decoded once: the map keeps the value
		} else {
			data, ok, err = d.view.body(kind, namespace, name)
		}
		if err != nil || !ok {
			return nil, false, err
		}
		obj, err := decodeStored(data)
		if err != nil {
			return nil, false, err
		}
		return types.DefaultTypeAdapter.NativeToValue(obj), true, nil
	})
}

// decodeStored decodes an object as Kubernetes decodes JSON into unstructured data.
func decodeStored(data []byte) (map[string]any, error) {
	if obj, err := decodeObject(data); err == nil {
		return obj, nil
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("a synced object cannot be decoded: %w", err)
	}
	return obj, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lazyMap is a CEL map (string keys) whose keys and values are read when first needed, then kept.
type lazyMap struct {
	listKeys func() ([]string, error)
	lookup   func(string) (ref.Val, bool, error)

	mu      sync.Mutex
	keys    []string
	keysErr error
	listed  bool
	values  map[string]ref.Val
	absent  map[string]bool
}

var (
	_ ref.Val       = (*lazyMap)(nil)
	_ traits.Mapper = (*lazyMap)(nil)
)

func newLazyMap(keys func() ([]string, error), lookup func(string) (ref.Val, bool, error)) *lazyMap {
	return &lazyMap{listKeys: keys, lookup: lookup, values: map[string]ref.Val{}, absent: map[string]bool{}}
}

func dataError(err error) ref.Val {
	return types.NewErr("cannot read synced data: %v", err)
}

func (m *lazyMap) allKeys() ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.listed {
		m.keys, m.keysErr = m.listKeys()
		m.listed = true
	}
	return m.keys, m.keysErr
}

// Find is traits.Mapper's Find: the value of a string key.
func (m *lazyMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	name := string(k)
	m.mu.Lock()
	if v, ok := m.values[name]; ok {
		m.mu.Unlock()
		return v, true
	}
	if m.absent[name] {
		m.mu.Unlock()
		return nil, false
	}
	m.mu.Unlock()
	v, found, err := m.lookup(name)
	if err != nil {
		return dataError(err), true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !found {
		m.absent[name] = true
		return nil, false
	}
	m.values[name] = v
	return v, true
}

func (m *lazyMap) Get(key ref.Val) ref.Val {
	if _, ok := key.(types.String); !ok {
		return types.ValOrErr(key, "no such key: %v", key)
	}
	v, found := m.Find(key)
	if !found {
		return types.NewErr("no such key: %v", key)
	}
	return v
}

func (m *lazyMap) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if v != nil && types.IsError(v) {
		return v
	}
	return types.Bool(found)
}

func (m *lazyMap) Size() ref.Val {
	keys, err := m.allKeys()
	if err != nil {
		return dataError(err)
	}
	return types.Int(len(keys))
}

func (m *lazyMap) Iterator() traits.Iterator {
	keys, err := m.allKeys()
	if err != nil {
		return &keyIterator{err: dataError(err)}
	}
	return &keyIterator{keys: keys}
}

func (m *lazyMap) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return m.materialize().ConvertToNative(typeDesc)
}

func (m *lazyMap) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, typeVal)
}

func (m *lazyMap) Equal(other ref.Val) ref.Val {
	return m.materialize().Equal(other)
}

func (m *lazyMap) Type() ref.Type { return types.MapType }

func (m *lazyMap) Value() any { return m.materialize().Value() }

// materialize is the map with every value read (equality, conversions: rare, and as costly as
// they would be on any map).
func (m *lazyMap) materialize() traits.Mapper {
	keys, err := m.allKeys()
	out := map[ref.Val]ref.Val{}
	if err == nil {
		for _, k := range keys {
			v, found := m.Find(types.String(k))
			if found {
				out[types.String(k)] = v
			}
		}
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, out).(traits.Mapper)
}

// keyIterator iterates a lazy map's keys.
type keyIterator struct {
	keys  []string
	index int
	err   ref.Val
}

func (it *keyIterator) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion on iterators not supported")
}
func (it *keyIterator) ConvertToType(typeVal ref.Type) ref.Val {
	return types.NewErr("type conversion on iterators not supported")
}
func (it *keyIterator) Equal(other ref.Val) ref.Val { return types.Bool(other == it) }
func (it *keyIterator) Type() ref.Type              { return types.IteratorType }
func (it *keyIterator) Value() any                  { return nil }
func (it *keyIterator) HasNext() ref.Val {
	if it.err != nil {
		return it.err
	}
	return types.Bool(it.index < len(it.keys))
}
func (it *keyIterator) Next() ref.Val {
	if it.err != nil {
		return it.err
	}
	if it.index >= len(it.keys) {
		return types.NewErr("no more elements")
	}
	k := it.keys[it.index]
	it.index++
	return types.String(k)
}
