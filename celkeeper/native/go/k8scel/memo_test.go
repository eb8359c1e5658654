package k8scel

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

func TestUnescapeIsKubernetes(t *testing.T) {
	for _, name := range []string{"foo", "a_b", "_x_", "x__", "__x", "a__dash__b", "__dot__", "__underscores__",
		"__int__", "a__int__", "__nope__", "__dash____dot__", "a__slash__b__c", "___dash___"} {
		got, gotOK := unescape(name)
		want, wantOK := apiservercel.Unescape(name)
		if got != want || gotOK != wantOK {
			t.Errorf("unescape(%q) = %q, %t; Kubernetes: %q, %t", name, got, gotOK, want, wantOK)
		}
	}
}

func TestKeyOfRemembersOnlyValuesThatBehaveAlike(t *testing.T) {
	key := func(v ref.Val) valueKey {
		k, ok := keyOf(v)
		if !ok {
			t.Fatalf("%v (%T) has no key", v, v)
		}
		return k
	}
	if key(types.Int(1)) == key(types.Double(1)) || key(types.Int(1)) == key(types.Uint(1)) {
		t.Error("1, 1u and 1.0 are different CEL values")
	}
	if key(types.Double(math.Copysign(0, -1))) == key(types.Double(0)) {
		t.Error("-0.0 and 0.0 differ in what they produce (1/x)")
	}
	if key(types.String("a")) != key(types.String("a")) || key(types.String("a")) == key(types.String("b")) {
		t.Error("strings are keyed by their value")
	}
	list := func(items ...any) ref.Val { return types.NewDynamicList(types.DefaultTypeAdapter, items) }
	dict := func(m map[string]any) ref.Val { return types.NewDynamicMap(types.DefaultTypeAdapter, m) }
	if key(list()) == key(dict(map[string]any{})) {
		t.Error("an empty list is not an empty map")
	}
	if key(list("a", int64(1))) != key(list("a", int64(1))) || key(list("a", int64(1))) == key(list(int64(1), "a")) ||
		key(list(int64(1))) == key(list(1.0)) {
		t.Error("lists are keyed by their items, in order, with their types")
	}
	if key(list("a")) == key(types.NewDynamicList(types.DefaultTypeAdapter, []string{"a"})) {
		t.Error("lists wrapping different Go slices are keyed apart")
	}
	many := map[string]any{}
	for i := range maxRememberedEntries {
		many[fmt.Sprint(i)] = int64(i)
	}
	again := map[string]any{}
	for k, v := range many {
		again[k] = v
	}
	if key(dict(many)) != key(dict(again)) || key(dict(map[string]any{"a": "b"})) == key(dict(map[string]any{"b": "a"})) {
		t.Error("maps are keyed by their entries, in the order of their keys")
	}
	many["more"] = int64(1)
	for _, v := range []ref.Val{
		types.String(string(make([]byte, maxRememberedString+1))),
		list(list()),
		list(map[string]any{}),
		dict(many),
		dict(map[string]any{"a": []any{}}),
		list(string(make([]byte, maxRememberedString)) + "x"),
		types.NewErr("boom"),
		types.OptionalNone,
		types.Bytes("x"),
	} {
		if _, ok := keyOf(v); ok {
			t.Errorf("%v (%T) must not be remembered", v, v)
		}
	}
}

func TestDetachedRefusesEveryMapOfUnstructuredData(t *testing.T) {
	adapter := types.DefaultTypeAdapter
	list := func(items ...any) ref.Val { return types.NewDynamicList(adapter, items) }
	object := map[string]any{"app": "a"}
	for _, v := range []ref.Val{
		types.True, types.String("a"), types.NullValue, types.NewErr("boom"), types.OptionalNone,
		list("a", int64(1), list("b")),
		types.NewRefValList(adapter, []ref.Val{types.String("a")}),
		types.NewStringStringMap(adapter, map[string]string{"a": "b"}),
		types.NewRefValMap(adapter, map[ref.Val]ref.Val{types.String("a"): list("b")}),
		types.OptionalOf(list("a")),
	} {
		if !detached(v, new(int)) {
			t.Errorf("%v (%T) holds no map of unstructured data", v, v)
		}
	}
	for _, v := range []ref.Val{
		types.NewStringInterfaceMap(adapter, object),
		types.NewDynamicMap(adapter, object),
		list("a", object),
		list(list([]any{object})),
		types.NewRefValList(adapter, []ref.Val{types.NewStringInterfaceMap(adapter, object)}),
		types.NewRefValMap(adapter, map[ref.Val]ref.Val{types.String("a"): types.NewDynamicMap(adapter, object)}),
		types.OptionalOf(types.NewStringInterfaceMap(adapter, object)),
		list(make([]any, maxDetachedValues)...), // too large to look through
	} {
		if detached(v, new(int)) {
			t.Errorf("%v (%T) holds a map of unstructured data", v, v)
		}
	}
}

func compile(t *testing.T, source string) *Template {
	t.Helper()
	_, tmpl := compileSource(t, source)
	return tmpl
}

// compileSource is the template's source as a map (what Gatekeeper's driver is given) and the
// template compiled from it.
func compileSource(t *testing.T, source string) (map[string]any, *Template) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(source), &m); err != nil {
		t.Fatal(err)
	}
	tmpl, err := CompileTemplate(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, tmpl
}

func variable(t *Template, name string) partInfo { return t.parts[partVariable][t.variableIndex[name]] }

func TestEqualVariablesShareTheirEvaluations(t *testing.T) {
	containers := `{"name": "containers", "expression": "has(variables.anyObject.spec.containers) ? variables.anyObject.spec.containers : []"}`
	a := compile(t, `{"variables": [`+containers+`], "validations": [{"expression": "size(variables.containers) > 0"}]}`)
	b := compile(t, `{"variables": [`+containers+`, {"name": "names", "expression": "variables.containers.map(c, c.name)"}],
		"validations": [{"expression": "size(variables.names) < 10"}, {"expression": "size(variables.containers) > 0"}]}`)
	// the same text naming another definition of `containers`'s dependency: not the same
	c := compile(t, `{"variables": [{"name": "x", "expression": "1"}, {"name": "containers", "expression": "has(variables.anyObject.spec.containers) ? variables.anyObject.spec.containers : []"}],
		"validations": [{"expression": "size(variables.containers) > 0"}]}`)
	redefined := compile(t, `{"variables": [`+containers+`, `+containers+`], "validations": [{"expression": "size(variables.containers) > 0"}]}`)
	params := compile(t, `{"variables": [`+containers+`], "validations": [{"expression": "size(variables.containers) > variables.params.min"}]}`)

	if variable(a, "anyObject").id != variable(b, "anyObject").id || variable(a, "params").id == variable(b, "params").id {
		t.Error("Gatekeeper's anyObject is shared by every template, params (the constraint) by none")
	}
	if variable(a, "containers").id != variable(b, "containers").id || variable(a, "containers").id != variable(c, "containers").id {
		t.Error("equal containers variables are one evaluation")
	}
	if a.parts[partValidation][0].id != b.parts[partValidation][1].id || a.parts[partValidation][0].id != c.parts[partValidation][0].id {
		t.Error("equal validations reading equal variables are one evaluation")
	}
	if variable(redefined, "containers").id == variable(a, "containers").id || redefined.parts[partValidation][0].id == a.parts[partValidation][0].id {
		t.Error("a template defining a name twice shares nothing")
	}
	if params.parts[partValidation][0].id == a.parts[partValidation][0].id || !params.parts[partValidation][0].readsConstraint {
		t.Error("a part reading the constraint is its template's own")
	}

	// one request, three templates: the shared variables are evaluated once
	object := mustJSON(benchPod())
	r, err := NewRequest(benchHeader, object, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range []*Template{a, b, c} {
		constraint, err := tmpl.Bind([]byte(`{"kind": "K", "metadata": {"name": "c"}}`))
		if err != nil {
			t.Fatal(err)
		}
		if d := tmpl.Validate(context.Background(), r, constraint, PerCallLimit); len(d) != 0 {
			t.Fatalf("%v", d)
		}
	}
	// anyObject, containers (a, b, c), names (b); params is bound with each constraint
	if n := len(r.memo.variables); n != 3 {
		t.Errorf("%d variable evaluations remembered, want 3", n)
	}
}

// Templates whose parts read variables with values that change from request to request (empty
// lists, counts, flags, a message whose cost runs out of budget for some values only), on a sequence
// of requests decoded into recycled maps as the webhook's are (NewRecycledRequest, Done): every
// decision is Gatekeeper's, and parts were remembered across requests.
func TestRememberedResultsAreGatekeepers(t *testing.T) {
	sources := map[string]string{
		"names": `{"variables": [
			{"name": "names", "expression": "object.spec.containers.map(c, c.name)"},
			{"name": "bad", "expression": "variables.names.filter(n, n.startsWith('bad'))"},
			{"name": "n", "expression": "size(variables.names)"},
			{"name": "privileged", "expression": "object.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)"}],
		  "validations": [
			{"expression": "size(variables.bad) == 0", "messageExpression": "'bad: ' + variables.bad.join(', ')"},
			{"expression": "variables.n <= variables.params.max", "messageExpression": "'at most ' + string(variables.params.max) + ', not ' + string(variables.n)"},
			{"expression": "!variables.privileged || variables.n > 3", "message": "privileged"}]}`,
		// the message of a passing validation runs out of the cost budget for large values of n only
		"budget": `{"variables": [
			{"name": "n", "expression": "has(object.metadata.annotations) && 'n' in object.metadata.annotations ? int(object.metadata.annotations.n) : 1"}],
		  "validations": [
			{"expression": "true", "messageExpression": "string(lists.range(variables.n).map(i, lists.range(variables.n).size()).size())"},
			{"expression": "variables.n < 3", "messageExpression": "'n is ' + string(variables.n)"}]}`,
		// parts reading small maps and lists
		"labels": `{"variables": [
			{"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
			{"name": "keys", "expression": "variables.labels.map(k, k)"}],
		  "validations": [
			{"expression": "!('forbidden' in variables.labels)", "messageExpression": "'forbidden among ' + string(size(variables.keys)) + ' labels'"},
			{"expression": "variables.labels.all(k, variables.labels[k] != 'x')", "messageExpression": "'x in ' + variables.keys.filter(k, variables.labels[k] == 'x').join(',')"}]}`,
		// a part reading only variables that passes on a map of the object: a result remembered
		// with it would show what a later request decoded into that map once recycled (detached)
		"picked": `{"variables": [
			{"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
			{"name": "picked", "expression": "size(variables.labels) > 0 ? variables.labels : {}"}],
		  "validations": [
			{"expression": "size(variables.picked) == 0", "messageExpression": "string(size(variables.picked)) + ' labels, app ' + ('app' in variables.picked ? variables.picked.app : 'none')"}]}`,
		"ignore": `{"failurePolicy": "Ignore", "variables": [
			{"name": "first", "expression": "object.spec.containers[0].name"},
			{"name": "long", "expression": "size(variables.first) > 8"}],
		  "validations": [{"expression": "!variables.long", "messageExpression": "variables.first + ' is long'"}]}`,
	}
	gk := newGatekeeper(t)
	type bound struct {
		tmpl       *Template
		constraint *Constraint
	}
	var all []bound
	for name, source := range sources {
		m, tmpl := compileSource(t, source)
		if err := gk.addTemplate(name, m); err != nil {
			t.Fatal(err)
		}
		for _, max := range []int{1, 2, 2, 5} {
			c, err := tmpl.Bind(mustJSON(map[string]any{"apiVersion": "constraints.gatekeeper.sh/v1beta1",
				"kind": name, "metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, len(all))},
				"spec": map[string]any{"parameters": map[string]any{"max": max}}}))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, bound{tmpl, c})
		}
	}
	pod := func(n int, privileged bool, names ...string) map[string]any {
		var containers []any
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("c%d", i)
			if i < len(names) {
				name = names[i]
			}
			containers = append(containers, map[string]any{"name": name, "image": "x",
				"securityContext": map[string]any{"privileged": privileged && i == 0}})
		}
		p := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "prod"},
			"spec": map[string]any{"containers": containers}}
		return p
	}
	withN := func(p map[string]any, n string) map[string]any {
		p["metadata"].(map[string]any)["annotations"] = map[string]any{"n": n}
		return p
	}
	withLabels := func(p map[string]any, labels map[string]any) map[string]any {
		p["metadata"].(map[string]any)["labels"] = labels
		return p
	}
	pods := []map[string]any{
		pod(1, false), pod(1, false), pod(2, false), pod(2, true), pod(1, false, "bad1"), pod(3, false),
		pod(1, false, "averylongname"), withN(pod(1, false), "2"), withN(pod(1, false), "2000"), withN(pod(1, false), "1"),
		withN(pod(1, false), "2000"), pod(4, true), pod(1, false), pod(2, false, "bad", "bad2"), withN(pod(2, true), "4"),
		pod(1, false), pod(2, false),
		withLabels(pod(1, false), map[string]any{"app": "a"}), withLabels(pod(1, false), map[string]any{"app": "a"}),
		withLabels(pod(1, false), map[string]any{"app": "x"}), withLabels(pod(1, false), map[string]any{"forbidden": "1"}),
		withLabels(pod(1, false), map[string]any{"app": "x"}), withLabels(pod(1, false), map[string]any{"app": "a", "forbidden": "x"}),
		withLabels(pod(1, false), map[string]any{"app": "a"}), withLabels(pod(2, false, "bad"), map[string]any{"forbidden": "1"}),
		withLabels(pod(2, false, "bad"), map[string]any{"forbidden": "1"}),
	}
	compared := 0
	for n, p := range pods {
		object := mustJSON(p)
		r, err := NewRecycledRequest(benchHeader, object, nil, mustJSON(benchNamespace))
		if err != nil {
			t.Fatal(err)
		}
		decided := make([][]string, len(all))
		for i, b := range all {
			for _, d := range b.tmpl.Validate(context.Background(), r, b.constraint, PerCallLimit) {
				if d.Action == "deny" {
					decided[i] = append(decided[i], d.Message)
				}
			}
		}
		r.Done()
		for i, b := range all {
			ours := decided[i]
			want, werr := gk.query(benchHeader, object, nil, benchNamespace, b.constraint.Object)
			if !sameAnswers(want, werr, ours, nil) {
				t.Errorf("pod %d, %s: gatekeeper %s, ours %s", n, b.constraint.Object.GetName(), describe(want, werr), describe(ours, nil))
			}
			compared++
		}
	}
	hits := 0
	for _, b := range all {
		for p := range parts {
			for _, info := range b.tmpl.parts[p] {
				if info.values != nil {
					hits += int(info.values.hits.Load())
				}
			}
		}
	}
	if hits < len(pods) {
		t.Errorf("%d results found remembered: the memo is not used", hits)
	}
	t.Logf("%d decisions compared, %d results found remembered", compared, hits)
}

// Parts reading synced data are never shared: each template sees the kinds it declares, and the
// store changes between requests.
func TestPartsReadingDataAreTheirTemplatesOwn(t *testing.T) {
	s := newTestStore(t)
	s.put(ingress("dev", "api", "b"))
	s.put(map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "s", "namespace": "prod"}})
	store := openTestStore(t, s)
	source := map[string]any{"validations": []any{map[string]any{
		"expression":        "size(data.inventory.namespace) == 0",
		"messageExpression": `"namespaces: " + data.inventory.namespace.map(n, string(n)).join(",")`,
	}}}
	type bound struct {
		tmpl       *Template
		constraint *Constraint
	}
	var both []bound
	for _, kinds := range [][]DataKind{ingressKinds, {{"v1", "Service"}}} {
		tmpl, err := CompileTemplateReading(source, kinds)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tmpl.Bind([]byte(`{"apiVersion":"constraints.gatekeeper.sh/v1beta1","kind":"K","metadata":{"name":"c"},"spec":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, bound{tmpl, c})
	}
	request := func() []string {
		r := ingressRequest(t, ingress("prod", "web", "a"))
		view := NewView(context.Background(), store)
		defer view.Close()
		r.ReadData(view)
		var got []string
		for _, b := range both {
			decisions := b.tmpl.Validate(context.Background(), r, b.constraint, PerCallLimit)
			message := ""
			for _, d := range decisions {
				message += d.Message
			}
			got = append(got, message)
		}
		return got
	}
	if got := request(); !slices.Equal(got, []string{"namespaces: dev", "namespaces: prod"}) {
		t.Fatalf("one request, two templates: %q", got)
	}
	s.remove("networking.k8s.io/v1", "Ingress", "dev", "api")
	if got := request(); !slices.Equal(got, []string{"", "namespaces: prod"}) {
		t.Fatalf("after the store changed: %q", got)
	}
}

// An evaluation records each variable it reads once, in the order of the first reads (reading it
// again costs and decides nothing: it is resolved once in a context), however often it reads it;
// replaying it reports the same cost as evaluating it.
func TestReadsAreRecordedOnce(t *testing.T) {
	_, tmpl := compileSource(t, `{"variables": [
		{"name": "labels", "expression": "has(object.metadata.labels) ? object.metadata.labels : {}"},
		{"name": "n", "expression": "size(variables.labels)"}],
	  "validations": [{"expression": "variables.labels.all(k, variables.labels[k] != 'x' && variables.n < 9 && variables.labels[k] != variables.labels[k] + 'y')"}]}`)
	c, err := tmpl.Bind(mustJSON(map[string]any{"kind": "K", "metadata": map[string]any{"name": "c"}}))
	if err != nil {
		t.Fatal(err)
	}
	object := mustJSON(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{
		"name": "p", "labels": map[string]any{"a": "1", "b": "2", "c": "3"}}})
	costs := []int64{}
	for range 2 { // evaluated, then replayed from the request's memo
		r, err := NewRequest(benchHeader, object, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		comp := tmpl.newComposition(context.Background(), r, c)
		before := int64(PerCallLimit)
		_, remaining, err := comp.forInput(tmpl.validations, partValidation, scopeValidations, before)
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, before-remaining)
		_, remaining, err = comp.forInput(tmpl.validations, partValidation, scopeValidations, before)
		if err != nil {
			t.Fatal(err)
		}
		costs = append(costs, before-remaining)
		result := r.memo.expressions[tmpl.memoKey(c, scopeValidations, partValidation, 0)]
		if result == nil || !slices.Equal(result.reads, []string{"labels", "n"}) {
			t.Fatalf("reads recorded: %v", result)
		}
	}
	for _, cost := range costs[1:] {
		if cost != costs[0] || cost == 0 {
			t.Fatalf("costs evaluated and replayed: %v", costs)
		}
	}
}

// Requests decided at once on several threads (a worker's event loops) share each part's remembered
// results: every decision is the one the same request gets alone (run with -race to see the locking).
func TestRememberedResultsAreSharedSafelyByConcurrentRequests(t *testing.T) {
	source := `{"variables": [
		{"name": "names", "expression": "object.spec.containers.map(c, c.name)"},
		{"name": "bad", "expression": "variables.names.filter(n, n.startsWith('bad'))"},
		{"name": "n", "expression": "size(variables.names)"}],
	  "validations": [
		{"expression": "size(variables.bad) == 0", "messageExpression": "'bad: ' + variables.bad.join(', ')"},
		{"expression": "variables.n <= 2", "messageExpression": "'at most 2, not ' + string(variables.n)"}]}`
	requests := make([][]byte, 0, 40)
	for i := 0; i < cap(requests); i++ {
		var containers []any
		for c := 0; c <= i%4; c++ {
			name := fmt.Sprintf("c%d", c)
			if (i+c)%3 == 0 {
				name = fmt.Sprintf("bad%d", c%2)
			}
			containers = append(containers, map[string]any{"name": name, "image": "x"})
		}
		requests = append(requests, mustJSON(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "prod"}, "spec": map[string]any{"containers": containers}}))
	}
	decide := func(tmpl *Template, constraint *Constraint, object []byte) string {
		r, err := NewRequest(benchHeader, object, nil, nil)
		if err != nil {
			return err.Error()
		}
		defer r.Done()
		var messages []string
		for _, d := range tmpl.Validate(context.Background(), r, constraint, PerCallLimit) {
			messages = append(messages, d.Action+": "+d.Message)
		}
		return strings.Join(messages, "\n")
	}
	bind := func(tmpl *Template) *Constraint {
		c, err := tmpl.Bind([]byte(`{"kind": "K", "metadata": {"name": "c"}}`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alone := compile(t, source)
	aloneConstraint := bind(alone)
	want := make([]string, len(requests))
	for i, r := range requests {
		want[i] = decide(alone, aloneConstraint, r)
	}
	shared := compile(t, source)
	sharedConstraint := bind(shared)
	var wg sync.WaitGroup
	errs := make(chan string, 8*len(requests))
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for round := 0; round < 5; round++ {
				for k := range requests {
					i := (k + g*7) % len(requests)
					if got := decide(shared, sharedConstraint, requests[i]); got != want[i] {
						errs <- fmt.Sprintf("request %d: %q, alone %q", i, got, want[i])
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if hits := shared.parts[partValidation][0].values; hits == nil || hits.hits.Load() == 0 {
		t.Error("the validations' results were not remembered across requests")
	}
}

// A part whose values cannot be remembered (a list of objects) stops making keys for them, and tries
// again every refusedBackoff evaluations: once its values can be remembered, they are.
func TestPartsWithValuesNeverRememberedTryAgainLater(t *testing.T) {
	tmpl := compile(t, `{"variables": [
		{"name": "containers", "expression": "has(variables.anyObject.spec.containers) ? variables.anyObject.spec.containers : []"},
		{"name": "names", "expression": "variables.containers.map(c, c.name)"}],
		"validations": [{"expression": "size(variables.names) < 10"}]}`)
	names := variable(tmpl, "names").values
	if names == nil {
		t.Fatal("names reads only variables: its results may be remembered")
	}
	constraint, err := tmpl.Bind([]byte(`{"kind": "K", "metadata": {"name": "c"}}`))
	if err != nil {
		t.Fatal(err)
	}
	decide := func(containers []any) {
		t.Helper()
		object := mustJSON(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "spec": map[string]any{"containers": containers}})
		r, err := NewRequest(benchHeader, object, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := tmpl.Validate(context.Background(), r, constraint, PerCallLimit); len(d) != 0 {
			t.Fatalf("%v", d)
		}
	}
	for range refusedBackoff + 1 {
		decide([]any{map[string]any{"name": "a"}}) // names reads containers: a list of objects
	}
	if names.size != 0 || names.refused.Load() != refusedBackoff+1 {
		t.Fatalf("remembered %d, refused %d", names.size, names.refused.Load())
	}
	for range refusedBackoff - 1 { // not tried: a value that could be remembered is not
		decide([]any{})
	}
	if names.size != 0 {
		t.Fatalf("remembered %d while backing off", names.size)
	}
	decide([]any{}) // the next try: an empty list is remembered
	if names.size != 1 || names.refused.Load() != 0 {
		t.Errorf("remembered %d, refused %d after a try with a value that can be remembered", names.size, names.refused.Load())
	}
}
