package mutation

import (
	"encoding/json"
	"sort"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
)

// Trace says what each mutator did to one object: the passes of Gatekeeper's System (pkg/mutation/
// system.go mutate, whose loop trace mirrors: the mutators in its order, those in a schema conflict
// skipped, passes until one changes nothing, at most one more than there are mutators), with the patch
// each mutator made in each pass, and for a mutator that did not match, which of its criteria did not
// hold (each evaluated alone by Gatekeeper's match code, on the object as it was given).
type Trace struct {
	Mutators  []MutatorTrace `json:"mutators"`
	Passes    int            `json:"passes"`
	Converged bool           `json:"converged"`
}

// MutatorTrace is one mutator's part.
type MutatorTrace struct {
	ID      ID     `json:"id"`
	Mutator string `json:"mutator"`
	// Conflict: in a schema conflict, so never applied.
	Conflict bool `json:"conflict,omitempty"`
	// Matched: it matched the object as given.
	Matched bool `json:"matched"`
	// NotMatched: the criteria that did not hold ("applyTo", or a spec.match field name).
	NotMatched []string `json:"notMatched,omitempty"`
	// MatchError: Gatekeeper's match error (e.g. a namespaceSelector without the Namespace).
	MatchError string `json:"matchError,omitempty"`
	// Changes: the passes in which it changed the object, with what it changed.
	Changes []Change `json:"changes,omitempty"`
	// Error: its mutation failed (Gatekeeper then refuses the request).
	Error string `json:"error,omitempty"`
}

// Change is what a mutator changed in one pass (1 is the first).
type Change struct {
	Pass  int                            `json:"pass"`
	Patch []jsonpatch.JsonPatchOperation `json:"patch"`
}

// spec is the part of a mutator's document the trace reads for its criteria.
type spec struct {
	Spec struct {
		ApplyTo []match.MutationApplyTo `json:"applyTo"`
		Match   match.Match             `json:"match"`
	} `json:"spec"`
}

// criteria are Gatekeeper's top-level matchers (pkg/mutation/match/match.go Matches), in its order, each
// as a Match holding only that criterion.
var criteria = []struct {
	name string
	only func(m *match.Match) match.Match
}{
	{"kinds", func(m *match.Match) match.Match { return match.Match{Kinds: m.Kinds} }},
	{"scope", func(m *match.Match) match.Match { return match.Match{Scope: m.Scope} }},
	{"namespaces", func(m *match.Match) match.Match { return match.Match{Namespaces: m.Namespaces} }},
	{"excludedNamespaces", func(m *match.Match) match.Match { return match.Match{ExcludedNamespaces: m.ExcludedNamespaces} }},
	{"labelSelector", func(m *match.Match) match.Match { return match.Match{LabelSelector: m.LabelSelector} }},
	{"namespaceSelector", func(m *match.Match) match.Match { return match.Match{NamespaceSelector: m.NamespaceSelector} }},
	{"name", func(m *match.Match) match.Match { return match.Match{Name: m.Name} }},
	{"source", func(m *match.Match) match.Match { return match.Match{Source: m.Source} }},
}

func (s *System) trace(mutable *mutationtypes.Mutable) *Trace {
	s.mu.Lock()
	ids := make([]mutationtypes.ID, 0, len(s.loaded))
	loaded := make(map[mutationtypes.ID]loadedMutator, len(s.loaded))
	for id, l := range s.loaded {
		ids = append(ids, id)
		loaded[id] = l
	}
	s.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })

	t := &Trace{Mutators: make([]MutatorTrace, 0, len(ids))}
	byID := make(map[mutationtypes.ID]*MutatorTrace, len(ids))
	for _, id := range ids {
		l := loaded[id]
		mt := MutatorTrace{ID: ID{Kind: id.Kind, Name: id.Name}, Mutator: l.mutator.String()}
		mt.Conflict = len(s.gk.GetConflicts(id)) > 0
		matched, err := l.mutator.Matches(mutable)
		mt.Matched = matched && err == nil
		if err != nil {
			mt.MatchError = err.Error()
		} else if !matched {
			mt.NotMatched = l.notMatched(mutable)
		}
		t.Mutators = append(t.Mutators, mt)
	}
	for i, id := range ids {
		byID[id] = &t.Mutators[i] // the slice is complete: the pointers stay valid
	}

	maxPasses := len(ids) + 1
	for pass := 1; pass <= maxPasses; pass++ {
		t.Passes = pass
		old := mutable.Object.DeepCopy()
		applied := 0
		for _, id := range ids {
			if byID[id].Conflict {
				continue
			}
			m := loaded[id].mutator
			matched, err := m.Matches(mutable)
			if err != nil || !matched {
				continue
			}
			before, _ := mutable.Object.MarshalJSON()
			mutated, err := m.Mutate(mutable)
			if err != nil {
				byID[id].Error = err.Error()
				return t
			}
			if mutated {
				applied++
				after, _ := mutable.Object.MarshalJSON()
				patch, _ := jsonpatch.CreatePatch(before, after)
				// in the order CreatePatch gives (it applies in that order); Gatekeeper's mutators may say
				// they mutated when the value was there already
				if len(patch) > 0 {
					byID[id].Changes = append(byID[id].Changes, Change{Pass: pass, Patch: patch})
				}
			}
		}
		if applied == 0 || cmp.Equal(old, mutable.Object) {
			t.Converged = true
			return t
		}
	}
	return t
}

// loadedMutator is a mutator in the set and its document (for its criteria).
type loadedMutator struct {
	mutator mutationtypes.Mutator
	doc     []byte
}

// notMatched names the mutator's criteria that do not hold for the object, each evaluated alone.
func (l loadedMutator) notMatched(mutable *mutationtypes.Mutable) []string {
	var doc spec
	if err := json.Unmarshal(l.doc, &doc); err != nil {
		return nil
	}
	var out []string
	gvk := mutable.Object.GetObjectKind().GroupVersionKind()
	if l.mutator.ID().Kind != "AssignMetadata" && !match.AppliesGVKAndOperation(doc.Spec.ApplyTo, gvk, mutable.Operation) {
		out = append(out, "applyTo")
	}
	target := &match.Matchable{Object: mutable.Object, Namespace: mutable.Namespace, Source: mutable.Source}
	for _, c := range criteria {
		only := c.only(&doc.Spec.Match)
		if ok, err := match.Matches(&only, target); err == nil && !ok {
			out = append(out, c.name)
		}
	}
	return out
}
