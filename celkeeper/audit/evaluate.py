"""One object audited: the violations of the policies by an existing object, as Gatekeeper's audit sees them.

    evaluator = Evaluator(policies, data)             # data: the run's synced data (SyncedData), or None
    outcome = evaluator.evaluate(obj, namespace)      # namespace: the object's Namespace object, or None

The object becomes a review as Gatekeeper's audit makes one (pkg/target
augmentedUnstructuredToAdmissionRequest): kind, name and namespace from the object, the object only
(no oldObject, no operation, no userInfo), its Namespace for namespaceSelector and `namespaceObject`.
It is decided by the pure `decide` at the audit enforcement point (audit.gatekeeper.sh), so scoped
enforcement actions select what applies there and a scoped constraint without it is not evaluated. A
scoped constraint's violation is one violation with enforcementAction `scoped` and its audit actions
in `enforcementActions` (frameworks' Result.ScopedEnforcementActions; Gatekeeper lists them in map
order, celkeeper as deny, warn, dryrun).

Objects an ExpansionTemplate generates from the object (a Deployment's Pod) are decided too, as
Gatekeeper's audit does: their violations are the object's, prefixed `[Implied by <template>]`, with
the template's enforcementAction when it has one.

An object that cannot be evaluated does not stop anything: when `decide` fails, the object is decided
again one constraint at a time, so that the violations of the others are still found and the failure is
an error of the constraint(s) that failed (an object that cannot be expanded: of every constraint that
could match it or what it generates). An object is evaluated however deep it is nested (the API
server stores up to 10,000 levels), as Gatekeeper's audit evaluates it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from celkeeper.audit.results import ConstraintKey, ObjectRef, Violation
from celkeeper.errors import CelkeeperError, ReviewError
from celkeeper.model import Action, EnforcementPoint, JsonValue, Result
from celkeeper.policy import Candidate, PolicySet
from celkeeper.review import NamespaceLookup, SyncedData, decide, request_for_object

log = logging.getLogger("celkeeper.audit")

POINT = EnforcementPoint.AUDIT


@dataclass(frozen=True)
class Outcome:
    violations: tuple[Violation, ...] = ()
    errors: tuple[tuple[ConstraintKey, str], ...] = ()  # constraints that could not evaluate it, and why


NOTHING = Outcome()  # no violation, no error: the outcome of most objects (immutable, shared)


class Evaluator:
    """Decides objects against one policy set (built per run; immutable)."""

    def __init__(self, policies: PolicySet, data: SyncedData | None = None) -> None:
        self.policies = policies
        self.data = data  # what templates that read synced data read (None: nothing is synced)
        self._constraints = {(c.kind, c.name): c for c in policies.constraints}

    def with_data(self, data: SyncedData | None) -> Evaluator:
        return Evaluator(self.policies, data)

    def audited(self, group: str, kind: str) -> tuple[Candidate, ...]:
        """The constraints that can select objects of this kind, or objects that objects of this kind
        generate (ExpansionTemplates), and have an action at the audit point."""
        point = POINT.value
        found = {id(c): c for c in self.policies.candidates(group, kind) if c.constraint.actions_for(point)}
        for generated in self.policies.expansions.generated_kinds(group, kind):
            found.update(
                (id(c), c) for c in self.policies.candidates(*generated) if c.constraint.actions_for(point)
            )
        return tuple(found.values())

    def evaluate(self, obj: Mapping[str, JsonValue], namespace: Mapping[str, JsonValue] | None) -> Outcome:
        try:
            request = request_for_object(obj)
        except ReviewError as err:  # not a Kubernetes object (no apiVersion or kind): files only
            return self.unevaluable(obj, f"cannot be reviewed: {err}")

        def lookup(name: str) -> Mapping[str, JsonValue] | None:
            return namespace if name == request.namespace else None

        try:
            decision = decide(request, self.policies, lookup, POINT, data=self.data)
        except Exception as err:  # a bug or an engine failure on this object: find the culprit(s)
            return self._one_by_one(obj, lookup, err)
        if not decision.results:
            return NOTHING
        return Outcome(tuple(self._violations(decision.results, obj)))

    def unevaluable(self, obj: Mapping[str, JsonValue], why: str) -> Outcome:
        """The object is not evaluated: an error of every audited constraint that could match it."""
        ref = ObjectRef.of(obj)
        return Outcome(
            errors=tuple(
                ((c.constraint.kind, c.constraint.name), why) for c in self.audited(ref.group, ref.kind)
            )
        )

    def _one_by_one(self, obj: Mapping[str, JsonValue], lookup: NamespaceLookup, first: Exception) -> Outcome:
        ref = ObjectRef.of(obj)
        log.warning(
            "evaluating %s failed (%s: %s); evaluating it one constraint at a time",
            ref,
            type(first).__name__,
            first,
        )
        request = request_for_object(obj)
        violations: list[Violation] = []
        errors: list[tuple[ConstraintKey, str]] = []
        for candidate in self.audited(ref.group, ref.kind):
            alone = PolicySet(
                self.policies.engine,
                self.policies.templates,
                [candidate],
                expansions=self.policies.expansions,
                mutators=self.policies.mutators,
            )
            try:
                decision = decide(request, alone, lookup, POINT, data=self.data)
            except Exception as err:
                text = str(err) if isinstance(err, CelkeeperError) else f"{type(err).__name__}: {err}"
                errors.append(
                    ((candidate.constraint.kind, candidate.constraint.name), f"cannot be evaluated: {text}")
                )
                continue
            violations.extend(self._violations(decision.results, obj))
        return Outcome(tuple(violations), tuple(errors))

    def _violations(self, results: Sequence[Result], obj: Mapping[str, JsonValue]) -> list[Violation]:
        ref = ObjectRef.of(obj)
        labels = _labels(obj)
        out: list[Violation] = []
        i = 0
        while i < len(results):
            result = results[i]
            key = (result.constraint_kind, result.constraint_name)
            constraint = self._constraints.get(key)
            if result.expansion_action and result.expansion_action != Action.SCOPED.value:
                # a generated object's violation under its ExpansionTemplate's enforcementAction
                out.append(Violation(key, result.expansion_action, (), result.message, ref, labels))
                i += 1
                continue
            if constraint is not None and constraint.enforcement_action is Action.SCOPED:
                actions = tuple(str(a) for a in constraint.actions_for(POINT.value))
                # decide gives one result per action for each message, the actions in this order
                group = results[i : i + len(actions)]
                if len(actions) > 1 and all(
                    (r.constraint_kind, r.constraint_name, r.message) == (*key, result.message) for r in group
                ):
                    i += len(actions)
                else:
                    i += 1
                out.append(Violation(key, Action.SCOPED.value, actions, result.message, ref, labels))
                continue
            action = str(constraint.enforcement_action) if constraint is not None else str(result.action)
            out.append(Violation(key, action, (), result.message, ref, labels))
            i += 1
        return out


def _labels(obj: Mapping[str, JsonValue]) -> dict[str, str]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}
