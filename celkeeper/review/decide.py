"""Deciding: Gatekeeper's target handler (which constraints apply) in Python, Kubernetes' validator
(what each constraint decides) in the engine, in one engine call per request."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.api import RequestInput
from celkeeper.cel.inventory import Gvk, describe, unmet
from celkeeper.match import MatchError, targets_of
from celkeeper.model import Action, Decision, EnforcementPoint, FailurePolicy, Result
from celkeeper.policy import Candidate, PolicySet
from celkeeper.review.request import AdmissionRequest
from celkeeper.templates import CompiledTemplate

#: seconds one decision may take in the engine: below the API server's 10 s webhook timeout and at
#: Gatekeeper's own registration timeout (3 s); constraints not reached in time fail under their
#: failurePolicy
DEFAULT_DEADLINE = 3.0

NamespaceLookup = Callable[[str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class SyncedData:
    """What templates that read synced data read: the engine's opened store (None: an empty
    inventory), and the kinds whose first list completed (None: every kind, e.g. an offline
    inventory, which is complete by definition)."""

    inventory: Any = None
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


def decide(
    request: AdmissionRequest,
    policies: PolicySet,
    namespaces: NamespaceLookup,
    point: EnforcementPoint | str,
    clock: Callable[[], float] | None = None,
    *,
    deadline: float = DEFAULT_DEADLINE,
    data: SyncedData | None = None,
) -> Decision:
    """Every violation of the policies by the request, with the action that applies at `point`.

    `deadline`: seconds the engine may spend on the request (0: no limit). `clock`: when given,
    Decision.timings holds the seconds spent per constraint kind (as the engine measured them).
    `data`: the synced data templates that read it see (None: none is synced); a template whose
    data is not synced is not evaluated: its decision is that error, under its failurePolicy."""
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
        return Decision()
    point_name = str(point.value if isinstance(point, EnforcementPoint) else point)
    process = "audit" if point_name == EnforcementPoint.AUDIT.value else "webhook"
    lookup = _Namespace(request, namespaces)
    targets = targets_of((request.object, request.old_object))  # read once, matched many times
    decided: dict[int, bool | str] = {}  # per Match object (equal ones are shared): matched, or the error
    # a template's operations (spec.targets[0].operations) select requests at the webhook only
    # (frameworks client.Review); audit and gator evaluate every template
    webhook = point_name == EnforcementPoint.WEBHOOK.value
    operation = request.operation if request.from_review and webhook else None
    selected: list[tuple[Candidate, tuple[Action, ...], bool | str]] = []
    for candidate in candidates:
        template = candidate.template
        if operation is not None and template.operations is not None and operation not in template.operations:
            continue
        actions = candidate.constraint.actions_for(point_name)
        if not actions:
            continue
        match = candidate.match
        matched = decided.get(id(match))
        if matched is None:
            try:
                matched = match.matches_any(
                    targets,
                    lookup.namespace if match.needs_namespace else None,
                    process=process,
                    source=request.source,
                )
            except MatchError as err:
                matched = f"unable to match constraints: {err}"
            decided[id(match)] = matched
        if matched is True and template.requirements:
            why = not_synced(template, data)
            if why is not None:
                if template.failure_policy is FailurePolicy.IGNORE:
                    continue
                matched = why
        if matched:
            selected.append((candidate, actions, matched))
    if not selected:
        return Decision()
    evaluated = [c.binding for c, _, matched in selected if matched is True]
    outcomes = (
        policies.engine.validate(
            RequestInput(
                request=request.cel_request,
                object=request.object,
                old_object=request.old_object,
                # Gatekeeper's driver is given the Namespace by its webhook and audit, never by gator
                namespace=lookup.namespace if point_name != EnforcementPoint.CLI.value else None,
                inventory=data.inventory if data is not None else None,
            ),
            evaluated,
            deadline,
        )
        if evaluated
        else []
    )
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
        for message in messages:
            results.extend(
                Result(constraint.kind, constraint.name, action, message, candidate.template.name)
                for action in actions
            )
    return Decision(tuple(results), tuple(timings.items()))


class _Namespace:
    """The request's Namespace, looked up once and only when needed."""

    def __init__(self, request: AdmissionRequest, lookup: NamespaceLookup) -> None:
        self._request = request
        self._lookup = lookup
        self._found: Mapping[str, Any] | None = None
        self._looked_up = False

    @property
    def namespace(self) -> Mapping[str, Any] | None:
        if not self._looked_up:
            self._looked_up = True
            # asked for "" too: gator test knows an (empty) Namespace for cluster-scoped objects
            found = self._lookup(self._request.namespace)
            self._found = found if isinstance(found, Mapping) else None
        return self._found
