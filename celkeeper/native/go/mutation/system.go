// Package mutation runs Gatekeeper v3.23.1's mutators (mutations.gatekeeper.sh Assign, AssignMetadata,
// ModifySet, AssignImage) with Gatekeeper's own code: its mutation System (ordering, iteration to a
// fixed point, schema conflicts), its mutators, path parser, path tests, match and applyTo. What is
// celkeeper's here is only what Gatekeeper's webhook does around the System (webhook.go, mirroring
// pkg/webhook/mutation.go) and reading mutator documents as the API server and Gatekeeper read them
// (load.go).
package mutation

import (
	"errors"
	"sort"
	"sync"

	"github.com/google/uuid"
	configv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/config/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	gkmutation "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
)

// Options are what Gatekeeper's mutation webhook takes from its flags and its Config.
type Options struct {
	// Annotations: --mutation-annotations (gatekeeper.sh/mutations and gatekeeper.sh/mutation-id on
	// each mutated object).
	Annotations bool `json:"annotations"`
	// SelfUsername: the user whose requests are not mutated (Gatekeeper's own service account,
	// system:serviceaccount:<POD_NAMESPACE>:gatekeeper-admin); empty: none.
	SelfUsername string `json:"selfUsername"`
	// Exclusions: the Config's spec.match entries (namespaces excluded from processes); those naming
	// the mutation-webhook process, or "*", exclude namespaces from mutation.
	Exclusions []configv1alpha1.MatchEntry `json:"exclusions"`
	// GatorReading: mutators are read as gator's expander reads them (LoadAsGator), not as the API
	// server and Gatekeeper's webhook read them (Load).
	GatorReading bool `json:"gatorReading"`
}

// Load reads a mutator document as the set's options say (Load or LoadAsGator).
func (s *System) Load(raw []byte) (types.Mutator, error) {
	if s.opts.GatorReading {
		return LoadAsGator(raw)
	}
	return Load(raw)
}

// System is a set of mutators, in Gatekeeper's System, and the options of the webhook that runs them.
type System struct {
	gk       *gkmutation.System
	excluder *process.Excluder
	opts     Options

	mu       sync.Mutex                 // the mutators' own records (System has its own lock)
	mutators map[types.ID]string        // id -> the mutator's String() (Kind/namespace/name:generation)
	loaded   map[types.ID]loadedMutator // id -> the mutator and its document (explain's trace)
	nextUUID func() uuid.UUID           // the mutation id Gatekeeper's System draws (set under flagsMu)
}

// NewSystem is an empty set of mutators.
func NewSystem(opts Options) *System {
	s := &System{opts: opts, mutators: map[types.ID]string{}, loaded: map[types.ID]loadedMutator{}, nextUUID: uuid.New}
	s.gk = gkmutation.NewSystem(gkmutation.SystemOpts{NewUUID: func() uuid.UUID { return s.nextUUID() }})
	s.excluder = process.New()
	s.excluder.Add(opts.Exclusions)
	return s
}

// Upsert adds or replaces a mutator (by its ID). A schema conflict with another mutator is returned as
// Gatekeeper words it (schema.ErrConflictingSchema): the mutator is kept, and neither it nor the
// mutators it conflicts with is applied until the conflict is gone, as in Gatekeeper.
func (s *System) Upsert(m types.Mutator) error {
	return s.UpsertDocument(m, nil)
}

// UpsertDocument is Upsert, keeping the mutator's document (JSON) for explain's trace of its criteria.
func (s *System) UpsertDocument(m types.Mutator, doc []byte) error {
	err := s.gk.Upsert(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil || isConflict(err) {
		s.mutators[m.ID()] = m.String()
		s.loaded[m.ID()] = loadedMutator{mutator: m, doc: doc}
	}
	return err
}

// Remove takes a mutator out (no error when it is not there).
func (s *System) Remove(id types.ID) error {
	s.mu.Lock()
	delete(s.mutators, id)
	delete(s.loaded, id)
	s.mu.Unlock()
	return s.gk.Remove(id)
}

// Status is a mutator of the system and the mutators its schema conflicts with (Gatekeeper does not
// apply a mutator in conflict: its MutatorPodStatus says so).
type Status struct {
	ID        ID     `json:"id"`
	Mutator   string `json:"mutator"`
	Conflicts []ID   `json:"conflicts,omitempty"`
	Error     string `json:"error,omitempty"`
}

// ID is a mutator's identity (Gatekeeper's types.ID: group, kind, name; mutators are cluster-scoped).
type ID struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// MakeID is a mutator kind and name as Gatekeeper's ID.
func MakeID(kind, name string) types.ID {
	return types.ID{Group: Group, Kind: kind, Name: name}
}

// Statuses lists every mutator in Gatekeeper's order, with its conflicts.
func (s *System) Statuses() []Status {
	s.mu.Lock()
	ids := make([]types.ID, 0, len(s.mutators))
	for id := range s.mutators {
		ids = append(ids, id)
	}
	strs := make(map[types.ID]string, len(s.mutators))
	for id, str := range s.mutators {
		strs[id] = str
	}
	s.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	out := make([]Status, 0, len(ids))
	for _, id := range ids {
		st := Status{ID: ID{Kind: id.Kind, Name: id.Name}, Mutator: strs[id]}
		conflicts := s.gk.GetConflicts(id)
		if len(conflicts) > 0 {
			for other := range conflicts {
				if other != id {
					st.Conflicts = append(st.Conflicts, ID{Kind: other.Kind, Name: other.Name})
				}
			}
			sort.Slice(st.Conflicts, func(i, j int) bool {
				a, b := st.Conflicts[i], st.Conflicts[j]
				return a.Kind < b.Kind || (a.Kind == b.Kind && a.Name < b.Name)
			})
			st.Error = schema.NewErrConflictingSchema(conflicts).Error()
		}
		out = append(out, st)
	}
	return out
}

func isConflict(err error) bool {
	return errors.As(err, &schema.ErrConflictingSchema{})
}
