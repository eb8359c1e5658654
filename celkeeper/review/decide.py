"""Deciding: Gatekeeper's target handler (which constraints apply) in Python, Kubernetes' validator
(what each constraint decides) in the engine, in one engine call per request (and one per object an
ExpansionTemplate generates from it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from celkeeper.cel.api import Explained, Inventory, Outcome, RequestInput
from celkeeper.cel.inventory import Gvk, describe, unmet
from celkeeper.expansion import (
    SOURCE_GENERATED,
    SOURCE_ORIGINAL,
    ExpansionError,
    Expansions,
    Resultant,
    prefix,
)
from celkeeper.match import MatchError, targets_of
from celkeeper.model import Action, Decision, EnforcementPoint, FailurePolicy, JsonObject, JsonValue, Result
from celkeeper.policy import Candidate, PolicySet
from celkeeper.review.request import MAPPING, AdmissionRequest, request_for_object
from celkeeper.templates import CompiledTemplate

if TYPE_CHECKING:
    from celkeeper.mutation import MutatorSet

#: seconds one decision may take in the engine: below the API server's 10 s webhook timeout and at
#: Gatekeeper's own registration timeout (3 s); constraints not reached in time fail under their
#: failurePolicy
DEFAULT_DEADLINE = 3.0

NamespaceLookup = Callable[[str], Mapping[str, JsonValue] | None]
#: the name of the Namespace Gatekeeper knows for an object it expands (its generated objects are put
#: there; "" removes their namespace), or None when it knows none (they keep the parent's)
ExpansionNamespace = Callable[[Mapping[str, JsonValue]], str | None]


@dataclass(frozen=True)
class SyncedData:
    """What templates that read synced data read: the engine's opened store (None: an empty
    inventory), and the kinds whose first list completed (None: every kind, e.g. an offline
    inventory, which is complete by definition)."""

    inventory: Inventory | None = None
    synced: frozenset[Gvk] | None = None


def not_synced(template: CompiledTemplate, data: SyncedData | None) -> str | None:
    """Why a template cannot be evaluated on the data there is: the first requirement no synced kind
    meets (the decision is then an evaluation error under the template's failurePolicy), or None."""
    if not template.requirements:
        return None
    synced = data.synced if data is not None else frozenset()
    if synced is None:
        return None
    missing = unmet(template.requirements, synced)
    if not missing:
        return None
    return (
        f"data not synced: template {template.name} reads {describe(missing[0])}, which celkeeper has "
        "not synced (name it in a SyncSet or in the Config's spec.sync.syncOnly; its first list must "
        "complete)"
    )


def inventory_lookup(namespaces: Mapping[str, Mapping[str, JsonValue]], complete: bool) -> NamespaceLookup:
    """The Namespace lookup of a known set of Namespaces. Without a complete inventory (a policy
    folder: the webhook's --namespaces, files given to explain), a namespace not listed is one with no
    labels but the one Kubernetes sets on every namespace; with one (a cluster), it does not exist."""

    def lookup(name: str) -> Mapping[str, JsonValue] | None:
        found = namespaces.get(name)
        if found is None and name and not complete:
            found = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            }
        return found

    return lookup


class Tracer(Protocol):
    """What `decide` tells an explanation (celkeeper.review.explain.Recorder) as it decides; None on the
    webhook's path. Calls come in order: begin, then per candidate constraint one of skipped,
    unmatched or selected, then evaluated for the selected ones the engine decided, then finish; again
    for each object an ExpansionTemplate generated."""

    def begin(self, request: AdmissionRequest, resultant: Resultant | None) -> None: ...

    def skipped(self, candidate: Candidate, reason: str) -> None:
        """Not evaluated: "operation" (the template's operations), "enforcementPoint" (no action) or
        "dataNotSynced" (the synced data it reads is not synced, under failurePolicy Ignore)."""

    def unmatched(self, candidate: Candidate, criteria: tuple[str, ...]) -> None:
        """spec.match excludes the object (the criterion, per object and oldObject)."""

    def selected(self, candidate: Candidate, actions: tuple[Action, ...], matched: bool | str) -> None:
        """spec.match selects the object (matched True), or cannot tell (the error)."""

    def evaluated(self, candidate: Candidate, explained: Explained) -> None: ...

    def finish(self, results: tuple[Result, ...]) -> None: ...


def decide(
    request: AdmissionRequest,
    policies: PolicySet,
    namespaces: NamespaceLookup,
    point: EnforcementPoint | str,
    clock: Callable[[], float] | None = None,
    *,
    deadline: float = DEFAULT_DEADLINE,
    data: SyncedData | None = None,
    expand: bool = True,
    expansion_namespace: ExpansionNamespace | None = None,
    mutate_before_expanding: bool = False,
    tracer: Tracer | None = None,
) -> Decision:
    """Every violation of the policies by the request, with the action that applies at `point`.

    `deadline`: seconds the engine may spend on the request (0: no limit), shared by the objects an
    ExpansionTemplate generates from it. `clock`: when given, Decision.timings holds the seconds spent
    per constraint kind (as the engine measured them). `data`: the synced data templates that read it
    see (None: none is synced); a template whose data is not synced is not evaluated: its decision is
    that error, under its failurePolicy. `expand` (default): the objects the request's
    object generates (policies.expansions) are decided too, their results prefixed
    `[Implied by <template>]` (gator does not expand AdmissionReviews: it passes False);
    `expansion_namespace`: the Namespace known for the object expanded (None: the webhook's and the
    audit's, none beyond the object's own; gator's expander knows its own). The policy set's mutators
    (policies.given_mutators) mutate each generated object before it is decided or expanded in turn, as
    Gatekeeper's expansion does (source Generated); `mutate_before_expanding`: the object is mutated
    (source Original) before it is expanded, as gator test's expander does (its own decision is on the
    object as given). `tracer`: told everything decided (explanations); the verdict is the same with or
    without one. Raises ExpansionError when the object cannot be expanded (or mutated)."""
    point_name = str(point.value if isinstance(point, EnforcementPoint) else point)
    expansions = policies.expansions
    resultants = (
        expand_request(
            request,
            expansions,
            expansion_namespace,
            policies.given_mutators,
            namespaces,
            mutate_before_expanding,
        )
        if expand and (request.group, request.kind) in expansions.group_kinds
        else ()
    )
    if not resultants:
        return _decide(request, policies, namespaces, point_name, clock, deadline, data, tracer, None)
    share = deadline / (1 + len(resultants)) if deadline > 0 else 0.0
    decision = _decide(request, policies, namespaces, point_name, clock, share, data, tracer, None)
    results = list(decision.results)
    timings = dict(decision.timings)
    for resultant in resultants:
        generated = request_for_object(resultant.object, operation=request.operation, source=SOURCE_GENERATED)
        found = _decide(generated, policies, namespaces, point_name, clock, share, data, tracer, resultant)
        results.extend(found.results)
        for kind, seconds in found.timings:
            timings[kind] = timings.get(kind, 0.0) + seconds
    return Decision(tuple(results), tuple(timings.items()))


def expand_request(  # noqa: PLR0917
    request: AdmissionRequest,
    expansions: Expansions,
    namespace_of: ExpansionNamespace | None = None,
    mutators: MutatorSet | None = None,
    namespaces: NamespaceLookup | None = None,
    mutate_before_expanding: bool = False,
) -> list[Resultant]:
    """The objects the request's object generates, as Gatekeeper's webhook expands a request: its
    object (oldObject on DELETE) with the request's namespace and kind (gatekeeper pkg/webhook
    policy.go reviewRequest); a plain object (gator, audit) as it is. Each generated object is mutated by
    `mutators` (pkg/expansion/system.go expand), with the Namespace the expansion knows (`namespaces`).
    Raises ExpansionError."""
    obj = request.object if request.object is not None else None
    if obj is None and request.operation == "DELETE":
        obj = request.old_object
    if not isinstance(obj, Mapping):
        return []
    if request.from_review:
        parent = dict(obj)
        meta = parent.get("metadata")
        meta = dict(meta) if isinstance(meta, Mapping) else {}
        if request.namespace:
            meta["namespace"] = request.namespace
        else:
            meta.pop("namespace", None)
        parent["metadata"] = meta
        parent["apiVersion"] = f"{request.group}/{request.version}" if request.group else request.version
        parent["kind"] = request.kind
        obj = parent
    namespace = namespace_of(obj) if namespace_of is not None else None
    if mutators is None or not len(mutators):
        return expansions.expand(obj, namespace)
    user = request.cel_request.get("userInfo")
    username = str(user.get("username") or "") if isinstance(user, Mapping) else ""
    ns_object = _namespace_object(request, namespace, namespace_of is not None, namespaces)
    if mutate_before_expanding:
        base = mutators.mutate_object(obj, ns_object, source=SOURCE_ORIGINAL, username=username)
        if base.error:
            raise ExpansionError(f"{BASE_MUTATION} {_name_of(obj)}: {base.error}")
        obj = base.object

    def mutate(generated: JsonObject) -> JsonObject:
        done = mutators.mutate_object(generated, ns_object, source=SOURCE_GENERATED, username=username)
        if done.error:
            raise ExpansionError(f"failed to mutate resultant resource {_name_of(generated)}: {done.error}")
        return done.object

    return expansions.expand(obj, namespace, mutate)


#: how gator's expander words a failure to mutate the object it expands (pkg/gator/expand/expand.go)
BASE_MUTATION = "error mutating base resource"


def _namespace_object(
    request: AdmissionRequest, namespace: str | None, gator: bool, namespaces: NamespaceLookup | None
) -> Mapping[str, JsonValue] | None:
    """The Namespace of the Mutable Gatekeeper's expansion mutates generated objects with: the request's
    (the webhook, the audit: none for a cluster-scoped object), or gator's expander's
    (NamespaceForResource: an empty one for a cluster-scoped object, the one it was given, a `default`
    made up, or none)."""
    if not gator:
        if not request.namespace or namespaces is None:
            return None
        return namespaces(request.namespace)
    if namespace == "":
        return {}
    if namespace is None:
        return None
    found = namespaces(namespace) if namespaces is not None else None
    if found is None and namespace == "default":
        return {"metadata": {"name": "default"}}
    return found


def _name_of(obj: Mapping[str, JsonValue]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _decide(  # noqa: PLR0917
    request: AdmissionRequest,
    policies: PolicySet,
    namespaces: NamespaceLookup,
    point_name: str,
    clock: Callable[[], float] | None,
    deadline: float,
    data: SyncedData | None,
    tracer: Tracer | None,
    resultant: Resultant | None,
) -> Decision:
    """The decision on one object (the request's, or one an ExpansionTemplate generated)."""
    if tracer is not None:
        tracer.begin(request, resultant)
    kinds = request.object_kinds()
    if len(kinds) == 1:
        group, kind = next(iter(kinds))
        candidates = policies.candidates(group, kind)
    else:
        merged: dict[int, Candidate] = {}
        for group, kind in kinds:
            merged.update((id(c), c) for c in policies.candidates(group, kind))
        candidates = tuple(sorted(merged.values(), key=lambda c: (c.constraint.kind, c.constraint.name)))
    if not candidates:
        if tracer is not None:
            tracer.finish(())
        return Decision()
    process = "audit" if point_name == EnforcementPoint.AUDIT.value else "webhook"
    lookup = _Namespace(request, namespaces)
    targets = targets_of((request.object, request.old_object))  # read once, matched many times
    decided: dict[int, bool | str] = {}  # per Match object (equal ones are shared): matched, or the error
    # a template's operations (spec.targets[0].operations) select requests at the webhook only
    # (frameworks client.Review); audit and gator evaluate every template. A generated object has its
    # parent request's operation.
    webhook = point_name == EnforcementPoint.WEBHOOK.value
    operation = (request.operation or None) if webhook else None
    source = request.source
    selected: list[tuple[Candidate, tuple[Action, ...], bool | str]] = []
    for candidate in candidates:
        template = candidate.template
        if operation is not None and template.operations is not None and operation not in template.operations:
            if tracer is not None:
                tracer.skipped(candidate, "operation")
            continue
        actions = candidate.constraint.actions_for(point_name)
        if not actions:
            if tracer is not None:
                tracer.skipped(candidate, "enforcementPoint")
            continue
        match = candidate.match
        matched = decided.get(id(match))
        if matched is None:
            try:
                matched = match.matches_any(
                    targets,
                    lookup.namespace if match.needs_namespace else None,
                    process=process,
                    source=source,
                )
            except MatchError as err:
                matched = f"unable to match constraints: {err}"
            decided[id(match)] = matched
        if matched is True and template.requirements:
            why = not_synced(template, data)
            if why is not None:
                if template.failure_policy is FailurePolicy.IGNORE:
                    if tracer is not None:
                        tracer.skipped(candidate, "dataNotSynced")
                    continue
                matched = why
        if matched:
            selected.append((candidate, actions, matched))
            if tracer is not None:
                tracer.selected(candidate, actions, matched)
        elif tracer is not None:
            tracer.unmatched(
                candidate,
                match.mismatches_any(
                    targets,
                    lookup.namespace if match.needs_namespace else None,
                    process=process,
                    source=source,
                ),
            )
    if not selected:
        if tracer is not None:
            tracer.finish(())
        return Decision()
    evaluated = [c for c, _, matched in selected if matched is True]
    outcomes: Sequence[Outcome] = ()
    if evaluated:
        engine_input = RequestInput(
            request=request.cel_request,
            object=request.object,
            old_object=request.old_object,
            # Gatekeeper's driver is given the Namespace by its webhook and audit, never by gator
            namespace=lookup.namespace if point_name != EnforcementPoint.CLI.value else None,
            inventory=data.inventory if data is not None else None,
        )
        bindings = [c.binding for c in evaluated]
        if tracer is None:
            outcomes = policies.engine.validate(engine_input, bindings, deadline)
        else:
            explained = policies.engine.explain(engine_input, bindings, deadline)
            for candidate, one in zip(evaluated, explained, strict=True):
                tracer.evaluated(candidate, one)
            outcomes = [e.outcome for e in explained]
    results: list[Result] = []
    timings: dict[str, float] = {}
    evaluated_at = 0
    for candidate, actions, matched in selected:
        constraint = candidate.constraint
        if matched is True:
            outcome = outcomes[evaluated_at]
            evaluated_at += 1
            if clock is not None:
                timings[constraint.kind] = timings.get(constraint.kind, 0.0) + outcome.seconds
            if not outcome.decisions:
                continue
            messages = [d.message for d in outcome.decisions if d.action == "deny"]
        else:
            messages = [str(matched)]
        if resultant is None:
            for message in messages:
                results.extend(
                    Result(constraint.kind, constraint.name, action, message, candidate.template.name)
                    for action in actions
                )
            continue
        # a generated object's result (expansion aggregate.go): prefixed, the template's action if any
        override = resultant.enforcement_action
        applied = actions
        if override == Action.SCOPED.value:
            applied = actions if constraint.enforcement_action is Action.SCOPED else ()
        elif override:
            applied = (Action(override),)
        implied = prefix(resultant.template)
        for message in messages:
            results.extend(
                Result(
                    constraint.kind,
                    constraint.name,
                    action,
                    f"{implied} {message}",
                    candidate.template.name,
                    implied_by=resultant.template,
                    expansion_action=override,
                )
                for action in applied
            )
    if tracer is not None:
        tracer.finish(tuple(results))
    return Decision(tuple(results), tuple(timings.items()))


class _Namespace:
    """The request's Namespace, looked up once and only when needed."""

    def __init__(self, request: AdmissionRequest, lookup: NamespaceLookup) -> None:
        self._request = request
        self._lookup = lookup
        self._found: Mapping[str, JsonValue] | None = None
        self._looked_up = False

    @property
    def namespace(self) -> Mapping[str, JsonValue] | None:
        if not self._looked_up:
            self._looked_up = True
            # asked for "" too: gator test knows an (empty) Namespace for cluster-scoped objects
            found = self._lookup(self._request.namespace)
            self._found = found if isinstance(found, MAPPING) else None
        return self._found
