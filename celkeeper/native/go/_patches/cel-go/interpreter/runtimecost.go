// celkeeper's copy of github.com/google/cel-go v0.30.0 interpreter/runtimecost.go, compiled in its
// place (celkeeper/native/go/patched.py). Derived from the file whose sha256 is
//   d3a664b0547e6b0ba51c013014e2a783d34bd57b8dc464b7d2b541c293d95bf1
// (tests/native/test_locate_patches.py checks that the module cache holds it). Changes, each marked
// "celkeeper:" below; docs/known-issues.md says why and when they can go:
//   1. no allocation per observed step: a call's arguments are found on the stack without building
//      the slice of their Interpretables (unary, binary, ==, !=) and gathered into a buffer of the
//      tracker; a tracker's stack and that buffer come from a pool when it is cloned for an
//      evaluation and go back to it when the evaluation's frame closes (frame.go's Close), grown
//      stacks kept. Same costs, same results.
//   2. growth is refused before it is made: string and bytes concatenation is charged before the
//      concatenation runs (the same cost, so the same outcome, without the value that would exceed
//      the limit ever being allocated); `+` on dyn operands that turn out to be strings or bytes costs
//      what the typed overload costs (cel-go charges 1 when the overload is chosen at run time); and
//      replace, format and join are refused when their result could not be paid for by what is left
//      of the budget at concatenation's rate (StringTraversalCostFactor per character). The error is
//      the cost limit's own.
//
// Upstream: cel-go reworked cost tracking (cel-expr/cel-go#1430: costs pushed by each operation, no
// observer) in releases published as cel.dev/cel-go only (v0.32 on), which k8s.io/apiserver v0.36
// does not use.

// Copyright 2022 Google LLC
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//      http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package interpreter

import (
	"errors"
	"math"
	"sync"

	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// WARNING: Any changes to cost calculations in this file require a corresponding change in checker/cost.go

// ActualCostEstimator provides function call cost estimations at runtime
// CallCost returns an estimated cost for the function overload invocation with the given args, or nil if it has no
// estimate to provide. CEL attempts to provide reasonable estimates for its standard function library, so CallCost
// should typically not need to provide an estimate for CELs standard function.
type ActualCostEstimator interface {
	CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64
}

// costTrackPlanOption modifies the cost tracking factory associatied with the CostObserver
type costTrackPlanOption func(*costTrackerFactory) *costTrackerFactory

// CostTrackerFactory configures the factory method to generate a new cost-tracker per-evaluation.
func CostTrackerFactory(factory func() (*CostTracker, error)) costTrackPlanOption {
	return func(fac *costTrackerFactory) *costTrackerFactory {
		fac.factory = factory
		return fac
	}
}

// CostObserver provides an observer that tracks runtime cost.
func CostObserver(opts ...costTrackPlanOption) PlannerOption {
	ct := &costTrackerFactory{}
	for _, o := range opts {
		ct = o(ct)
	}
	return func(p *planner) (*planner, error) {
		if ct.factory == nil {
			return nil, errors.New("cost tracker factory not configured")
		}
		p.observers = append(p.observers, ct)
		// celkeeper: growth is checked before it is made (decGuardGrowth), then observed as before
		p.decorators = append(p.decorators, decGuardGrowth(ct), decObserveEval(ct.Observe))
		return p, nil
	}
}

// costTrackerFactory holds a factory for producing new CostTracker instances on each Eval call.
type costTrackerFactory struct {
	factory func() (*CostTracker, error)
}

// InitState produces a CostTracker and bundles it into an Activation in a way which is not visible
// to expression evaluation.
func (ct *costTrackerFactory) InitState(frame *ExecutionFrame) (any, error) {
	if frame.ctx != nil && frame.ctx.costs != nil {
		return frame.ctx.costs, nil
	}
	tracker, err := ct.factory()
	if err != nil {
		return nil, err
	}
	if frame.ctx == nil {
		frame.ctx = evalContextPool.Get().(*evalContext)
	}
	frame.ctx.costs = tracker
	return tracker, nil
}

// GetState extracts the CostTracker from the Activation.
func (ct *costTrackerFactory) GetState(frame *ExecutionFrame) any {
	if frame == nil || frame.ctx == nil {
		return nil
	}
	return frame.ctx.costs
}

// Observe computes the incremental cost of each step and records it into the CostTracker associated
// with the evaluation.
func (ct *costTrackerFactory) Observe(vars Activation, id int64, programStep any, val ref.Val) {
	frame := AsFrame(vars)
	state := ct.GetState(frame)
	if state == nil {
		return
	}
	tracker, ok := state.(*CostTracker)
	if !ok {
		// The state is configured with CostTrackFactory so this shouldn't happen.
		return
	}
	switch t := programStep.(type) {
	case ConstantQualifier:
		// TODO: Push identifiers on to the stack before observing constant qualifiers that apply to them
		// and enable the below pop. Once enabled this can case can be collapsed into the Qualifier case.
		tracker.cost++
	case InterpretableConst:
		// zero cost
	case InterpretableAttribute:
		switch a := t.Attr().(type) {
		case *conditionalAttribute:
			// Ternary has no direct cost. All cost is from the conditional and the true/false branch expressions.
			tracker.stack.drop(a.falsy.ID(), a.truthy.ID(), a.expr.ID())
		default:
			tracker.stack.drop(t.Attr().ID())
			tracker.cost += common.SelectAndIdentCost
		}
		if !tracker.presenceTestHasCost {
			if _, isTestOnly := programStep.(*evalTestOnly); isTestOnly {
				tracker.cost -= common.SelectAndIdentCost
			}
		}
	case *evalExhaustiveConditional:
		// Ternary has no direct cost. All cost is from the conditional and the true/false branch expressions.
		tracker.stack.drop(t.attr.falsy.ID(), t.attr.truthy.ID(), t.attr.expr.ID())

	// While the field names are identical, the boolean operation eval structs do not share an interface and so
	// must be handled individually.
	case *evalOr:
		for _, term := range t.terms {
			tracker.stack.drop(term.ID())
		}
	case *evalAnd:
		for _, term := range t.terms {
			tracker.stack.drop(term.ID())
		}
	case *evalExhaustiveOr:
		for _, term := range t.terms {
			tracker.stack.drop(term.ID())
		}
	case *evalExhaustiveAnd:
		for _, term := range t.terms {
			tracker.stack.drop(term.ID())
		}
	case *evalFold:
		tracker.stack.drop(t.iterRange.ID())
	case Qualifier:
		tracker.cost++
	case InterpretableCall:
		// celkeeper: the arguments are found without building the slice of their Interpretables
		if argVals, ok := tracker.callArgs(t); ok {
			tracker.cost += tracker.costCall(t, argVals, val)
		}
	case InterpretableConstructor:
		tracker.stack.dropAll(t.InitVals()) // celkeeper: the values are not needed
		switch t.Type() {
		case types.ListType:
			tracker.cost += common.ListCreateBaseCost
		case types.MapType:
			tracker.cost += common.MapCreateBaseCost
		default:
			tracker.cost += common.StructCreateBaseCost
		}
	}
	tracker.stack.push(val, id)

	if tracker.Limit != nil && tracker.cost > *tracker.Limit {
		panic(EvalCancelledError{Cause: CostLimitExceeded, Message: "operation cancelled: actual cost limit exceeded"})
	}
}

// CostTrackerOption configures the behavior of CostTracker objects.
type CostTrackerOption func(*CostTracker) error

// CostTrackerLimit sets the runtime limit on the evaluation cost during execution and will terminate the expression
// evaluation if the limit is exceeded.
func CostTrackerLimit(limit uint64) CostTrackerOption {
	return func(tracker *CostTracker) error {
		tracker.Limit = &limit
		return nil
	}
}

// PresenceTestHasCost determines whether presence testing has a cost of one or zero.
// Defaults to presence test has a cost of one.
func PresenceTestHasCost(hasCost bool) CostTrackerOption {
	return func(tracker *CostTracker) error {
		tracker.presenceTestHasCost = hasCost
		return nil
	}
}

// NewCostTracker creates a new CostTracker with a given estimator and a set of functional CostTrackerOption values.
func NewCostTracker(estimator ActualCostEstimator, opts ...CostTrackerOption) (*CostTracker, error) {
	tracker := &CostTracker{
		Estimator:           estimator,
		overloadTrackers:    map[string]FunctionTracker{},
		presenceTestHasCost: true,
	}
	for _, opt := range opts {
		err := opt(tracker)
		if err != nil {
			return nil, err
		}
	}
	return tracker, nil
}

// OverloadCostTracker binds an overload ID to a runtime FunctionTracker implementation.
//
// OverloadCostTracker instances augment or override ActualCostEstimator decisions, allowing for  versioned and/or
// optional cost tracking changes.
func OverloadCostTracker(overloadID string, fnTracker FunctionTracker) CostTrackerOption {
	return func(tracker *CostTracker) error {
		tracker.overloadTrackers[overloadID] = fnTracker
		return nil
	}
}

// FunctionTracker computes the actual cost of evaluating the functions with the given arguments and result.
type FunctionTracker func(args []ref.Val, result ref.Val) *uint64

// CostTracker represents the information needed for tracking runtime cost.
type CostTracker struct {
	Estimator           ActualCostEstimator
	overloadTrackers    map[string]FunctionTracker
	Limit               *uint64
	presenceTestHasCost bool

	cost  uint64
	stack refValStack

	// celkeeper: the pooled room of a clone's stack and call arguments (nil: a tracker not cloned,
	// or its evaluation's frame closed)
	room *trackerRoom
}

// trackerRoom is the room a cloned tracker evaluates in (celkeeper): its stack's storage, kept at
// the size it grew to, and where a call's arguments are gathered (costCall does not keep them).
// Trackers take it from trackerRooms when cloned and give it back when their frame closes: only
// the cost is read after an evaluation.
type trackerRoom struct {
	stack refValStack
	args  [4]ref.Val
}

// stackRoom is the room a tracker's stack starts with (celkeeper); maxKeptStack bounds the stack a
// pooled room keeps (a larger one is dropped).
const (
	stackRoom    = 16
	maxKeptStack = 1024
)

var trackerRooms = sync.Pool{New: func() any { return &trackerRoom{stack: make(refValStack, 0, stackRoom)} }}

// release gives the tracker's room back to the pool, its values cleared (celkeeper: frame.go's Close,
// once the evaluation is over).
func (c *CostTracker) release() {
	room := c.room
	if room == nil {
		return
	}
	stack := c.stack // the room's, or what it grew into
	c.room, c.stack = nil, nil
	if cap(stack) > maxKeptStack {
		return
	}
	clear(stack[:cap(stack)])
	room.stack = stack[:0]
	room.args = [4]ref.Val{}
	trackerRooms.Put(room)
}

// callArgs drops a call's arguments from the stack and returns their values, in the tracker's buffer
// (celkeeper: dropArgs(t.Args()) without the slices).
func (c *CostTracker) callArgs(t InterpretableCall) ([]ref.Val, bool) {
	var buf []ref.Val
	if c.room != nil {
		buf = c.room.args[:0]
	}
	switch call := t.(type) {
	case *evalUnary:
		return c.stack.dropArgs1(call.arg, buf)
	case *evalBinary:
		return c.stack.dropArgs2(call.lhs, call.rhs, buf)
	case *evalGuardedBinary:
		return c.stack.dropArgs2(call.lhs, call.rhs, buf)
	case *evalGuardedUnary:
		return c.stack.dropArgs1(call.arg, buf)
	case *evalEq:
		return c.stack.dropArgs2(call.lhs, call.rhs, buf)
	case *evalNe:
		return c.stack.dropArgs2(call.lhs, call.rhs, buf)
	}
	return c.stack.dropArgs(t.Args(), buf)
}

// Clone makes a shallow copy of the tracker.
// The different clones can be used independently from
// each other.
func (c *CostTracker) Clone() (*CostTracker, error) {
	room := trackerRooms.Get().(*trackerRoom) // celkeeper: the stack's room, pooled
	tracker := &CostTracker{
		Estimator:           c.Estimator,
		overloadTrackers:    c.overloadTrackers,
		Limit:               c.Limit,
		presenceTestHasCost: c.presenceTestHasCost,
		stack:               room.stack,
		room:                room,
	}
	return tracker, nil
}

// ActualCost returns the runtime cost
func (c *CostTracker) ActualCost() uint64 {
	return c.cost
}

func (c *CostTracker) costCall(call InterpretableCall, args []ref.Val, result ref.Val) uint64 {
	var cost uint64
	if len(c.overloadTrackers) != 0 {
		if tracker, found := c.overloadTrackers[call.OverloadID()]; found {
			callCost := tracker(args, result)
			if callCost != nil {
				cost = safeAdd(cost, *callCost)
				return cost
			}
		}
	}
	if c.Estimator != nil {
		callCost := c.Estimator.CallCost(call.Function(), call.OverloadID(), args, result)
		if callCost != nil {
			cost = safeAdd(cost, *callCost)
			return cost
		}
	}
	// if user didn't specify, the default way of calculating runtime cost would be used.
	// if user has their own implementation of ActualCostEstimator, make sure to cover the mapping between overloadId and cost calculation
	overloadID := call.OverloadID()
	if overloadID == "" && call.Function() == operators.Add {
		overloadID = dynamicAdd(args) // celkeeper: `+` chosen at run time costs what its overload costs
	}
	switch overloadID {
	// O(n) functions
	case overloads.StartsWithString, overloads.EndsWithString:
		cost = safeAdd(cost, uint64(math.Ceil(float64(actualSize(args[1]))*common.StringTraversalCostFactor)))
	case overloads.StringToBytes, overloads.BytesToString, overloads.ExtQuoteString, overloads.ExtFormatString:
		cost = safeAdd(cost, uint64(math.Ceil(float64(actualSize(args[0]))*common.StringTraversalCostFactor)))
	case overloads.InList:
		// If a list is composed entirely of constant values this is O(1), but we don't account for that here.
		// We just assume all list containment checks are O(n).
		cost = safeAdd(cost, actualSize(args[1]))
	// O(min(m, n)) functions
	case overloads.LessString, overloads.GreaterString, overloads.LessEqualsString, overloads.GreaterEqualsString,
		overloads.LessBytes, overloads.GreaterBytes, overloads.LessEqualsBytes, overloads.GreaterEqualsBytes,
		overloads.Equals, overloads.NotEquals:
		// When we check the equality of 2 scalar values (e.g. 2 integers, 2 floating-point numbers, 2 booleans etc.),
		// the CostTracker.ActualSize() function by definition returns 1 for each operand, resulting in an overall cost
		// of 1.
		lhsSize := actualSize(args[0])
		rhsSize := actualSize(args[1])
		minSize := min(rhsSize, lhsSize)
		cost = safeAdd(cost, uint64(math.Ceil(float64(minSize)*common.StringTraversalCostFactor)))
	// O(m+n) functions
	case overloads.AddString, overloads.AddBytes:
		// In the worst case scenario, we would need to reallocate a new backing store and copy both operands over.
		cost = safeAdd(cost, uint64(math.Ceil(float64(actualSize(args[0])+actualSize(args[1]))*common.StringTraversalCostFactor)))
	// O(nm) functions
	case overloads.Matches, overloads.MatchesString:
		// https://swtch.com/~rsc/regexp/regexp1.html applies to RE2 implementation supported by CEL
		// Add one to string length for purposes of cost calculation to prevent product of string and regex to be 0
		// in case where string is empty but regex is still expensive.
		strCost := uint64(math.Ceil((1.0 + float64(actualSize(args[0]))) * common.StringTraversalCostFactor))
		// We don't know how many expressions are in the regex, just the string length (a huge
		// improvement here would be to somehow get a count the number of expressions in the regex or
		// how many states are in the regex state machine and use that to measure regex cost).
		// For now, we're making a guess that each expression in a regex is typically at least 4 chars
		// in length.
		regexCost := uint64(math.Ceil(float64(actualSize(args[1])) * common.RegexStringLengthCostFactor))
		cost = safeAdd(cost, strCost*regexCost)
	case overloads.ContainsString:
		strCost := uint64(math.Ceil(float64(actualSize(args[0])) * common.StringTraversalCostFactor))
		substrCost := uint64(math.Ceil(float64(actualSize(args[1])) * common.StringTraversalCostFactor))
		cost = safeAdd(cost, strCost*substrCost)

	default:
		// The following operations are assumed to have O(1) complexity.
		// - AddList due to the implementation. Index lookup can be O(c) the
		//    number of concatenated lists, but we don't track that is cost calculations.
		// - Conversions, since none perform a traversal of a type of unbound length.
		// - Computing the size of strings, byte sequences, lists and maps.
		// - Logical operations and all operators on fixed width scalars (comparisons, equality)
		// - Any functions that don't have a declared cost either here or in provided ActualCostEstimator.
		cost = safeAdd(cost, 1)

	}
	return cost
}

// actualSize returns the size of the value for all traits.Sizer values, a fixed size for all proto-based
// objects, and a size of 1 for all other value types.
func actualSize(value ref.Val) uint64 {
	if sz, ok := value.(traits.Sizer); ok {
		return uint64(sz.Size().(types.Int))
	}
	if opt, ok := value.(*types.Optional); ok && opt.HasValue() {
		return actualSize(opt.GetValue())
	}
	return 1
}

type stackVal struct {
	Val ref.Val
	ID  int64
}

// refValStack keeps track of values of the stack for cost calculation purposes
type refValStack []stackVal

func (s *refValStack) push(val ref.Val, id int64) {
	value := stackVal{Val: val, ID: id}
	*s = append(*s, value)
}

// TODO: Allowing drop and dropArgs to remove stack items above the IDs they are provided is a workaround. drop and dropArgs
// should find and remove only the stack items matching the provided IDs once all attributes are properly pushed and popped from stack.

// drop searches the stack for each ID and removes the ID and all stack items above it.
// If none of the IDs are found, the stack is not modified.
// WARNING: It is possible for multiple expressions with the same ID to exist (due to how macros are implemented) so it's
// possible that a dropped ID will remain on the stack.  They should be removed when IDs on the stack are popped.
func (s *refValStack) drop(ids ...int64) {
	for _, id := range ids {
		for idx := len(*s) - 1; idx >= 0; idx-- {
			if (*s)[idx].ID == id {
				*s = (*s)[:idx]
				break
			}
		}
	}
}

// dropArgs searches the stack for all the args by their IDs, accumulates their associated ref.Vals and drops any
// stack items above any of the arg IDs. If any of the IDs are not found the stack, false is returned.
// Args are assumed to be found in the stack in reverse order, i.e. the last arg is expected to be found highest in
// the stack.
// WARNING: It is possible for multiple expressions with the same ID to exist (due to how macros are implemented) so it's
// possible that a dropped ID will remain on the stack.  They should be removed when IDs on the stack are popped.
func (s *refValStack) dropArgs(args []InterpretableV2, buf []ref.Val) ([]ref.Val, bool) {
	// celkeeper: the values go into buf (the tracker's) when it has room
	var result []ref.Val
	if cap(buf) >= len(args) {
		result = buf[:len(args)]
	} else {
		result = make([]ref.Val, len(args))
	}
argloop:
	for nIdx := len(args) - 1; nIdx >= 0; nIdx-- {
		for idx := len(*s) - 1; idx >= 0; idx-- {
			if (*s)[idx].ID == args[nIdx].ID() {
				el := (*s)[idx]
				*s = (*s)[:idx]
				result[nIdx] = el.Val
				continue argloop
			}
		}
		return nil, false
	}
	return result, true
}

// dropAll is dropArgs without gathering the values (celkeeper).
func (s *refValStack) dropAll(args []InterpretableV2) {
argloop:
	for nIdx := len(args) - 1; nIdx >= 0; nIdx-- {
		for idx := len(*s) - 1; idx >= 0; idx-- {
			if (*s)[idx].ID == args[nIdx].ID() {
				*s = (*s)[:idx]
				continue argloop
			}
		}
		return
	}
}

// dropArgs1 is dropArgs for one argument (celkeeper).
func (s *refValStack) dropArgs1(arg InterpretableV2, buf []ref.Val) ([]ref.Val, bool) {
	id := arg.ID()
	for idx := len(*s) - 1; idx >= 0; idx-- {
		if (*s)[idx].ID == id {
			el := (*s)[idx]
			*s = (*s)[:idx]
			return append(buf[:0], el.Val), true
		}
	}
	return nil, false
}

// dropArgs2 is dropArgs for two arguments (celkeeper): the second is looked for first, as dropArgs
// does, and a stack without the first is left as dropArgs leaves it.
func (s *refValStack) dropArgs2(lhs, rhs InterpretableV2, buf []ref.Val) ([]ref.Val, bool) {
	var right ref.Val
	id := rhs.ID()
	found := false
	for idx := len(*s) - 1; idx >= 0; idx-- {
		if (*s)[idx].ID == id {
			right = (*s)[idx].Val
			*s = (*s)[:idx]
			found = true
			break
		}
	}
	if !found {
		return nil, false
	}
	id = lhs.ID()
	for idx := len(*s) - 1; idx >= 0; idx-- {
		if (*s)[idx].ID == id {
			el := (*s)[idx]
			*s = (*s)[:idx]
			return append(buf[:0], el.Val, right), true
		}
	}
	return nil, false
}

func safeAdd(x, y uint64, rest ...uint64) uint64 {
	if y > 0 && x > math.MaxUint64-y {
		return math.MaxUint64
	}
	next := x + y
	if len(rest) == 0 {
		return next
	}
	return safeAdd(next, rest[0], rest[1:]...)
}

func safeMul(x, y uint64) uint64 {
	if y != 0 && x > math.MaxUint64/y {
		return math.MaxUint64
	}
	return x * y
}

// -- celkeeper: growth refused before it is made -------------------------------------------------------

// decGuardGrowth wraps the calls whose result may be far larger than what observing it costs before it
// exists: string and bytes concatenation (typed, or chosen at run time), replace, format and join. The
// wrapper checks, once the arguments are evaluated and before the function runs, what the call will
// cost and how large its result can be (growthGuard). It is an InterpretableCall like the call it wraps,
// so the cost observer (decorating it next) observes it as it observed the call.
func decGuardGrowth(ct *costTrackerFactory) InterpretableDecoratorV2 {
	return func(i InterpretableV2) (InterpretableV2, error) {
		switch call := i.(type) {
		case *evalBinary:
			if guarded(call.function, call.overload) {
				return &evalGuardedBinary{evalBinary: call, ct: ct}, nil
			}
		case *evalUnary:
			if guarded(call.function, call.overload) {
				return &evalGuardedUnary{evalUnary: call, ct: ct}, nil
			}
		case *evalVarArgs:
			if guarded(call.function, call.overload) {
				return &evalGuardedVarArgs{evalVarArgs: call, ct: ct}, nil
			}
		}
		return i, nil
	}
}

func guarded(function, overload string) bool {
	switch function {
	case operators.Add:
		return overload == "" || overload == overloads.AddString || overload == overloads.AddBytes
	case "replace", "format", "join":
		return true
	}
	return false
}

// dynamicAdd is the overload `+` resolves to on these operands when it was chosen at run time: the
// string or bytes concatenation when both are strings or both bytes ("" otherwise).
func dynamicAdd(args []ref.Val) string {
	if len(args) != 2 {
		return ""
	}
	switch args[0].(type) {
	case types.String:
		if _, ok := args[1].(types.String); ok {
			return overloads.AddString
		}
	case types.Bytes:
		if _, ok := args[1].(types.Bytes); ok {
			return overloads.AddBytes
		}
	}
	return ""
}

// growthGuard panics with the cost limit's error when the call about to run (its arguments evaluated)
// will exceed the evaluation's cost limit, or would make a result larger than what is left of the limit
// can pay for at concatenation's rate (StringTraversalCostFactor per character):
//   - `+` of strings or bytes: its cost (what costCall will charge once it has run) is charged first;
//   - join: its cost, computed from the result's exact size, likewise;
//   - replace and format: their costs (computed from their receiver) likewise, and their result's size
//     bounded from the arguments.
func (ct *costTrackerFactory) growthGuard(frame *ExecutionFrame, function string, args []ref.Val) {
	tracker, _ := ct.GetState(frame).(*CostTracker)
	if tracker == nil || tracker.Limit == nil {
		return
	}
	var cost, size uint64
	switch function {
	case operators.Add:
		if dynamicAdd(args) == "" {
			return // not a concatenation: nothing grows
		}
		cost = uint64(math.Ceil(float64(actualSize(args[0])+actualSize(args[1])) * common.StringTraversalCostFactor))
	case "join":
		joined, ok := joinedSize(args)
		if !ok {
			return
		}
		// Kubernetes' library charges twice a traversal of the result (k8s.io/apiserver pkg/cel/library
		// cost.go, "join"); cel-go's own estimator none
		cost = uint64(math.Ceil(float64(joined) * 2 * common.StringTraversalCostFactor))
	case "replace":
		if len(args) < 3 {
			return
		}
		cost = uint64(math.Ceil(float64(actualSize(args[0])) * 2 * common.StringTraversalCostFactor))
		size = replacedSize(args)
	case "format":
		if len(args) < 2 {
			return
		}
		cost = uint64(math.Ceil(float64(actualSize(args[0])) * common.StringTraversalCostFactor))
		size = actualSize(args[0]) + formattedSize(args[1], 0)
	}
	limit := *tracker.Limit
	total := safeAdd(tracker.cost, cost)
	if total > limit || (size > 0 && float64(size)*common.StringTraversalCostFactor > float64(limit-total)) {
		panic(EvalCancelledError{Cause: CostLimitExceeded, Message: "operation cancelled: actual cost limit exceeded"})
	}
}

// joinedSize is the size of list.join(separator): its strings and the separators between them.
func joinedSize(args []ref.Val) (uint64, bool) {
	list, ok := args[0].(traits.Lister)
	if !ok {
		return 0, false
	}
	var sep uint64
	if len(args) > 1 {
		sep = actualSize(args[1])
	}
	n, ok := list.Size().(types.Int)
	if !ok {
		return 0, false
	}
	var size uint64
	for i := types.Int(0); i < n; i++ {
		item, ok := list.Get(i).(types.String)
		if !ok {
			return 0, false // join fails: nothing is made
		}
		size = safeAdd(size, actualSize(item))
		if i > 0 {
			size = safeAdd(size, sep)
		}
	}
	return size, true
}

// replacedSize bounds the size of s.replace(old, new[, n]).
func replacedSize(args []ref.Val) uint64 {
	s, old, repl := actualSize(args[0]), actualSize(args[1]), actualSize(args[2])
	if repl <= old {
		return s
	}
	count := s + 1 // an empty `old` matches before every character and at the end
	if old > 0 {
		count = s / old
	}
	if len(args) > 3 {
		if n, ok := args[3].(types.Int); ok && n >= 0 && uint64(n) < count {
			count = uint64(n)
		}
	}
	return safeAdd(s, safeMul(count, repl-old))
}

// formattedSize bounds the size of a format argument as format writes it (twice a string's size: %x).
func formattedSize(arg ref.Val, depth int) uint64 {
	const scalar = 64 // a number, a duration, a timestamp, a boolean, null
	if depth > 32 {
		return scalar
	}
	switch v := arg.(type) {
	case types.String, types.Bytes:
		return safeMul(actualSize(v), 2)
	case traits.Lister:
		size := uint64(2)
		it := v.Iterator()
		for it.HasNext() == types.True {
			size = safeAdd(size, formattedSize(it.Next(), depth+1), 2)
		}
		return size
	case traits.Mapper:
		size := uint64(2)
		it := v.Iterator()
		for it.HasNext() == types.True {
			key := it.Next()
			size = safeAdd(size, formattedSize(key, depth+1), formattedSize(v.Get(key), depth+1), 4)
		}
		return size
	}
	return scalar
}

// evalGuardedBinary is evalBinary with growthGuard before the function runs.
type evalGuardedBinary struct {
	*evalBinary
	ct *costTrackerFactory
}

// Exec is evalBinary.Exec with the guard.
func (g *evalGuardedBinary) Exec(frame *ExecutionFrame) ref.Val {
	bin := g.evalBinary
	lVal := bin.lhs.Exec(frame)
	strict := !bin.nonStrict
	if strict && types.IsError(lVal) {
		return lVal
	}
	rVal := bin.rhs.Exec(frame)
	if strict && types.IsError(rVal) {
		return rVal
	}
	if strict {
		var unk *types.Unknown
		unk, _ = types.MaybeMergeUnknowns(lVal, unk)
		unk, _ = types.MaybeMergeUnknowns(rVal, unk)
		if unk != nil {
			return unk
		}
	}
	g.ct.growthGuard(frame, bin.function, []ref.Val{lVal, rVal})
	if bin.impl != nil && (bin.trait == 0 || (!strict && types.IsUnknownOrError(lVal)) || lVal.Type().HasTrait(bin.trait)) {
		return types.LabelErrNode(bin.id, bin.impl(lVal, rVal))
	}
	if lVal.Type().HasTrait(traits.ReceiverType) {
		return types.LabelErrNode(bin.id, lVal.(traits.Receiver).Receive(bin.function, bin.overload, []ref.Val{rVal}))
	}
	return types.NewErrWithNodeID(bin.id, "no such overload: %s", bin.function)
}

// Eval implements the Interpretable interface method.
func (g *evalGuardedBinary) Eval(ctx Activation) ref.Val {
	return g.Exec(AsFrame(ctx))
}

// evalGuardedUnary is evalUnary with growthGuard before the function runs.
type evalGuardedUnary struct {
	*evalUnary
	ct *costTrackerFactory
}

// Exec is evalUnary.Exec with the guard.
func (g *evalGuardedUnary) Exec(frame *ExecutionFrame) ref.Val {
	un := g.evalUnary
	argVal := un.arg.Exec(frame)
	strict := !un.nonStrict
	if strict && types.IsUnknownOrError(argVal) {
		return argVal
	}
	g.ct.growthGuard(frame, un.function, []ref.Val{argVal})
	if un.impl != nil && (un.trait == 0 || (!strict && types.IsUnknownOrError(argVal)) || argVal.Type().HasTrait(un.trait)) {
		return types.LabelErrNode(un.id, un.impl(argVal))
	}
	if argVal.Type().HasTrait(traits.ReceiverType) {
		return types.LabelErrNode(un.id, argVal.(traits.Receiver).Receive(un.function, un.overload, []ref.Val{}))
	}
	return types.NewErrWithNodeID(un.id, "no such overload: %s", un.function)
}

// Eval implements the Interpretable interface method.
func (g *evalGuardedUnary) Eval(ctx Activation) ref.Val {
	return g.Exec(AsFrame(ctx))
}

// evalGuardedVarArgs is evalVarArgs with growthGuard before the function runs.
type evalGuardedVarArgs struct {
	*evalVarArgs
	ct *costTrackerFactory
}

// Exec is evalVarArgs.Exec with the guard.
func (g *evalGuardedVarArgs) Exec(frame *ExecutionFrame) ref.Val {
	fn := g.evalVarArgs
	argVals := make([]ref.Val, len(fn.args))
	strict := !fn.nonStrict
	var unk *types.Unknown
	for i, arg := range fn.args {
		argVals[i] = arg.Exec(frame)
		if strict {
			if types.IsError(argVals[i]) {
				return argVals[i]
			}
			unk, _ = types.MaybeMergeUnknowns(argVals[i], unk)
		}
	}
	if strict && unk != nil {
		return unk
	}
	g.ct.growthGuard(frame, fn.function, argVals)
	arg0 := argVals[0]
	if fn.impl != nil && (fn.trait == 0 || (!strict && types.IsUnknownOrError(arg0)) || arg0.Type().HasTrait(fn.trait)) {
		return types.LabelErrNode(fn.id, fn.impl(argVals...))
	}
	if arg0.Type().HasTrait(traits.ReceiverType) {
		return types.LabelErrNode(fn.id, arg0.(traits.Receiver).Receive(fn.function, fn.overload, argVals[1:]))
	}
	return types.NewErrWithNodeID(fn.id, "no such overload: %s %d", fn.function, fn.id)
}

// Eval implements the Interpretable interface method.
func (g *evalGuardedVarArgs) Eval(ctx Activation) ref.Val {
	return g.Exec(AsFrame(ctx))
}
