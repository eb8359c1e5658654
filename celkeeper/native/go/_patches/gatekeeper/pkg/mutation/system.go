// celkeeper's copy of github.com/open-policy-agent/gatekeeper/v3 v3.23.1 pkg/mutation/system.go,
// compiled in its place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   2cde8a3e9953749745e68912ae6f788f93565c3f54a4bf194b2b00ed57088a6b
// (tests/native/test_locate_patches.py checks that the module cache holds it). Four changes, marked
// "celkeeper:" below; docs/known-issues.md says why and when they can go:
//   - the object before mutation is copied only when the mutation log (--log-mutations), its only
//     reader, is on;
//   - MutateFrom, an addition: Mutate, also handing over the copy of the object the first pass makes
//     before it mutates (celkeeper's webhook makes its patch against it instead of copying the object
//     again);
//   - a pass's object is compared with the one before it by UnstructuredEqual, reflect.DeepEqual's
//     answer, instead of go-cmp's cmp.Equal. For what the System holds (unstructured content: maps,
//     slices, strings, numbers, booleans, nil, and external data placeholders, structs without Equal
//     methods or unexported fields) both say equal for exactly the same values; cmp.Equal also works
//     out a difference report it throws away, half of the CPU of a mutation with ten mutators
//     (bench/mutation.py's profile), and reflect.DeepEqual's reflection was then a fifth of it;
//   - each pass's copy of the object (DeepCopyWithPlaceholders' copy) is made into the maps and slices
//     of a copy an earlier pass or request no longer needs (CopyObject, RecycleCopy): the same copy,
//     without allocating it again for every pass of every request (half of what a mutation allocated).

package mutation

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/google/uuid"
	"github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ErrNotConverging reports that applying all Mutators isn't converging.
var ErrNotConverging = errors.New("mutation not converging")

// ErrNotRemoved reports that we were unable to remove a Mutator properly as
// System was in an inconsistent state.
var ErrNotRemoved = errors.New("failed to find mutator on sorted list")

// System keeps the list of mutators and provides an interface to apply mutations.
type System struct {
	schemaDB                          schema.DB
	orderedMutators                   orderedIDs
	mutatorsMap                       map[types.ID]types.Mutator
	mux                               sync.RWMutex
	reporter                          StatsReporter
	newUUID                           func() uuid.UUID
	providerCache                     *externaldata.ProviderCache
	sendRequestToExternalDataProvider externaldata.SendRequestToProvider
	clientCertWatcher                 *certwatcher.CertWatcher
}

// SystemOpts allows for optional dependencies to be passed into the mutation System.
type SystemOpts struct {
	Reporter                          StatsReporter
	NewUUID                           func() uuid.UUID
	ProviderCache                     *externaldata.ProviderCache
	SendRequestToExternalDataProvider externaldata.SendRequestToProvider
	ClientCertWatcher                 *certwatcher.CertWatcher
}

// NewSystem initializes an empty mutation system.
func NewSystem(options SystemOpts) *System {
	if options.NewUUID == nil {
		options.NewUUID = uuid.New
	}

	return &System{
		schemaDB:                          *schema.New(),
		orderedMutators:                   orderedIDs{},
		mutatorsMap:                       make(map[types.ID]types.Mutator),
		reporter:                          options.Reporter,
		newUUID:                           options.NewUUID,
		providerCache:                     options.ProviderCache,
		sendRequestToExternalDataProvider: options.SendRequestToExternalDataProvider,
		clientCertWatcher:                 options.ClientCertWatcher,
	}
}

// Get mutator for given id.
func (s *System) Get(id types.ID) types.Mutator {
	s.mux.RLock()
	defer s.mux.RUnlock()

	mutator, found := s.mutatorsMap[id]
	if !found {
		return nil
	}
	return mutator.DeepCopy()
}

// Upsert updates or inserts the given object. Returns an error in case of
// schema conflicts.
func (s *System) Upsert(m types.Mutator) error {
	if m == nil {
		return schema.ErrNilMutator
	}

	s.mux.Lock()
	defer s.mux.Unlock()

	id := m.ID()
	if current, ok := s.mutatorsMap[id]; ok && !m.HasDiff(current) {
		// Handle the case where a previous reconcile successfully updated System,
		// but the update to PodStatus failed.
		conflicts := s.schemaDB.GetConflicts(id)
		if len(conflicts) == 0 {
			return nil
		}
		return schema.NewErrConflictingSchema(conflicts)
	}

	toAdd := m.DeepCopy()

	// Check schema consistency only if the mutator has schema.
	var err error
	if withSchema, ok := toAdd.(schema.MutatorWithSchema); ok {
		err = s.schemaDB.Upsert(withSchema)

		if err != nil && !errors.As(err, &schema.ErrConflictingSchema{}) {
			// This means the error is not due to a schema conflict, and is most likely
			// a bug.
			s.schemaDB.Remove(id)
			return errors.Wrapf(err, "Schema upsert caused non-conflict error: %v", m.ID())
		}
	}

	s.mutatorsMap[id] = toAdd

	s.orderedMutators.insert(id)
	return err
}

// Remove removes the mutator from the mutation system.
func (s *System) Remove(id types.ID) error {
	s.mux.Lock()
	defer s.mux.Unlock()

	if _, ok := s.mutatorsMap[id]; !ok {
		return nil
	}

	s.schemaDB.Remove(id)

	delete(s.mutatorsMap, id)

	removed := s.orderedMutators.remove(id)
	if !removed {
		return fmt.Errorf("%w: ID %v", ErrNotRemoved, id)
	}
	return nil
}

func (s *System) GetConflicts(id types.ID) map[types.ID]bool {
	return s.schemaDB.GetConflicts(id)
}

// Mutate applies the mutation in place to the given object. Returns
// true if applying Mutators caused any changes to the object.
func (s *System) Mutate(ctx context.Context, mutable *types.Mutable) (bool, error) {
	return s.mutateFrom(ctx, mutable, nil)
}

// MutateFrom is Mutate, also returning the object as it was before any mutator ran: the copy the first
// pass compares with (celkeeper). nil when the object was not mutated.
func (s *System) MutateFrom(ctx context.Context, mutable *types.Mutable) (bool, *unstructured.Unstructured, error) {
	var first *unstructured.Unstructured
	mutated, err := s.mutateFrom(ctx, mutable, &first)
	if !mutated {
		RecycleCopy(first)
		first = nil
	}
	return mutated, first, err
}

// mutateFrom is Mutate; with first, the first pass's copy of the object is put there (celkeeper).
func (s *System) mutateFrom(ctx context.Context, mutable *types.Mutable, first **unstructured.Unstructured) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}

	s.mux.RLock()
	defer s.mux.RUnlock()

	convergence := SystemConvergenceFalse

	iterations, merr := s.mutate(ctx, mutable, first)
	if merr == nil {
		convergence = SystemConvergenceTrue
	}

	if s.reporter != nil {
		err := s.reporter.ReportIterationConvergence(convergence, iterations)
		if err != nil {
			log.Error(err, "failed to report mutator ingestion request")
		}
	}

	mutated := iterations != 0 && merr == nil
	return mutated, merr
}

// mutate runs all Mutators on obj. Returns the number of iterations required
// to converge, and any error encountered attempting to run Mutators.
func (s *System) mutate(ctx context.Context, mutable *types.Mutable, first **unstructured.Unstructured) (int, error) {
	mutationUUID := s.newUUID()
	// celkeeper: the object before mutation is copied only for the mutation log, its only reader
	var original *unstructured.Unstructured
	if *MutationLoggingEnabled {
		original = unversioned.DeepCopyWithPlaceholders(mutable.Object)
	}
	var allAppliedMutations [][]types.Mutator
	maxIterations := len(s.orderedMutators.ids) + 1

	// celkeeper: the last pass's copy (not MutateFrom's), made into by the next pass, recycled at the end
	var spare *unstructured.Unstructured
	defer func() { RecycleCopy(spare) }()

	for iteration := 1; iteration <= maxIterations; iteration++ {
		var appliedMutations []types.Mutator
		// celkeeper: DeepCopyWithPlaceholders' copy, made into a copy no longer needed
		old := CopyObject(spare, mutable.Object)
		spare = old
		if iteration == 1 && first != nil { // celkeeper: MutateFrom's copy (only read after)
			*first = old
			spare = nil
		}

		for _, id := range s.orderedMutators.ids {
			if s.schemaDB.HasConflicts(id) {
				// Don't try to apply Mutators which have conflicts.
				continue
			}

			mutator := s.mutatorsMap[id]
			matches, err := mutator.Matches(mutable)
			if err != nil {
				return iteration, matchesErr(err, mutator.ID(), mutable.Object)
			}

			if matches {
				mutated, err := mutator.Mutate(mutable)
				if mutated {
					appliedMutations = append(appliedMutations, mutator)
				}
				if err != nil {
					return iteration, mutateErr(err, mutationUUID, mutator.ID(), mutable.Object)
				}
			}
		}

		// celkeeper: reflect.DeepEqual's answer, not cmp.Equal (same answer, no difference report)
		if len(appliedMutations) == 0 || UnstructuredEqual(old, mutable.Object) {
			// If no mutations were applied, we can safely assume the object is
			// identical to before.
			if iteration == 1 {
				return 0, nil
			}

			err := s.resolvePlaceholders(ctx, mutable.Object)
			if err != nil {
				return iteration, fmt.Errorf("failed to resolve external data placeholders: %w", err)
			}

			if *MutationLoggingEnabled {
				logAppliedMutations("Mutation applied", mutationUUID, original, allAppliedMutations, mutable.Source)
			}

			if *MutationAnnotationsEnabled {
				mutationAnnotations(mutable.Object, allAppliedMutations, mutationUUID)
			}

			return iteration, nil
		}

		if *MutationLoggingEnabled || *MutationAnnotationsEnabled {
			allAppliedMutations = append(allAppliedMutations, appliedMutations)
		}
	}

	if *MutationLoggingEnabled {
		logAppliedMutations("Mutation not converging", mutationUUID, original, allAppliedMutations, mutable.Source)
	}

	return maxIterations, fmt.Errorf("%w: mutation %s not converging for %s %s %s %s",
		ErrNotConverging,
		mutationUUID,
		mutable.Object.GroupVersionKind().Group,
		mutable.Object.GroupVersionKind().Kind,
		mutable.Object.GetNamespace(),
		getNameOrGenerateName(mutable.Object))
}

func mutateErr(err error, uid uuid.UUID, mID types.ID, obj *unstructured.Unstructured) error {
	return errors.Wrapf(err, "mutation %s for mutator %v failed for %s %s %s %s",
		uid,
		mID,
		obj.GroupVersionKind().Group,
		obj.GroupVersionKind().Kind,
		obj.GetNamespace(),
		getNameOrGenerateName(obj))
}

func matchesErr(err error, mID types.ID, obj *unstructured.Unstructured) error {
	return errors.Wrapf(err, "matching for mutator %v failed for %s %s %s %s",
		mID,
		obj.GroupVersionKind().Group,
		obj.GroupVersionKind().Kind,
		obj.GetNamespace(),
		getNameOrGenerateName(obj))
}

// celkeeper: UnstructuredEqual is reflect.DeepEqual(a, b) for objects, compared without reflection where
// their content is JSON's (maps, slices, strings, int64 and float64 numbers, booleans, nil), by
// reflect.DeepEqual elsewhere (exported for celkeeper's tests against reflect.DeepEqual).
func UnstructuredEqual(a, b *unstructured.Unstructured) bool {
	if a == nil || b == nil || a == b {
		return reflect.DeepEqual(a, b)
	}
	return contentEqual(a.Object, b.Object)
}

// contentEqual is reflect.DeepEqual(x, y) for values of unstructured content (deepValueEqual's rules:
// the same type, nil maps and slices equal only to nil ones, the same map or slice equal to itself).
func contentEqual(x, y any) bool {
	switch x := x.(type) {
	case nil:
		return y == nil
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		if reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() {
			return true
		}
		for k, xv := range x {
			yv, found := y[k]
			if !found || !contentEqual(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		if !ok || (x == nil) != (y == nil) || len(x) != len(y) {
			return false
		}
		if unsafe.SliceData(x) == unsafe.SliceData(y) {
			return true
		}
		for i := range x {
			if !contentEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case string:
		y, ok := y.(string)
		return ok && x == y
	case int64:
		y, ok := y.(int64)
		return ok && x == y
	case float64:
		y, ok := y.(float64)
		return ok && x == y
	case bool:
		y, ok := y.(bool)
		return ok && x == y
	}
	return reflect.DeepEqual(x, y)
}

// celkeeper: copies holds the copies of objects no longer needed (RecycleCopy), their maps and slices
// made into by the next copies (CopyObject).
var copies sync.Pool

// RecycleCopy gives a copy made by the System (MutateFrom's) back for its maps and slices to be reused:
// nothing may read it or anything in it after (nil: nothing).
func RecycleCopy(u *unstructured.Unstructured) {
	if u != nil {
		copies.Put(u)
	}
}

// CopyObject is unversioned.DeepCopyWithPlaceholders(u), made into `into` (nil: a recycled copy, or a
// new one): the same copy, reusing the maps and slices `into` holds (exported for celkeeper's tests).
func CopyObject(into, u *unstructured.Unstructured) *unstructured.Unstructured {
	if into == nil {
		into, _ = copies.Get().(*unstructured.Unstructured)
		if into == nil {
			into = new(unstructured.Unstructured)
		}
	}
	kept := into.Object
	*into = *u
	into.Object = copyInto(kept, u.Object).(map[string]interface{}) // nolint:forcetypeassert
	return into
}

// copyInto is DeepCopyWithPlaceholders' deepCopy(x) (runtime.DeepCopyJSONValue aware of external data
// placeholders), whose maps and slices are those of `into` where it has one at the same place (emptied
// of what x does not hold), new ones elsewhere.
func copyInto(into, x interface{}) interface{} {
	switch x := x.(type) {
	case map[string]interface{}:
		if x == nil {
			// Typed nil - an interface{} that contains a type map[string]interface{} with a value of nil
			return x
		}
		clone, ok := into.(map[string]interface{})
		if !ok || clone == nil {
			clone = make(map[string]interface{}, len(x))
		} else {
			for k := range clone {
				if _, found := x[k]; !found {
					delete(clone, k)
				}
			}
		}
		for k, v := range x {
			clone[k] = copyInto(clone[k], v)
		}
		return clone
	case []interface{}:
		if x == nil {
			// Typed nil - an interface{} that contains a type []interface{} with a value of nil
			return x
		}
		kept, _ := into.([]interface{})
		clone := kept
		if kept == nil || cap(kept) < len(x) { // a slice, never nil: x is not nil
			clone = make([]interface{}, len(x))
		}
		clone = clone[:len(x)]
		for i, v := range x {
			var was interface{}
			if i < len(kept) {
				was = kept[i]
			}
			clone[i] = copyInto(was, v)
		}
		return clone
	case string, int64, bool, float64, nil, json.Number:
		return x
	case *unversioned.ExternalDataPlaceholder:
		return x.DeepCopy()
	default:
		panic(fmt.Errorf("cannot deep copy %T", x))
	}
}
