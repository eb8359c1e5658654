"""Kubernetes' admission policies in the offline `celkeeper audit`: each audited object is answered as the
API server answers a CREATE of it (cli.admissionpolicies' AdmissionReviewer, Kubernetes' own code), and
what the answer says is reported beside the constraints' violations.

    admission = AdmissionAudit.build(inputs, documents, param_and_namespace_objects)   # None: no policies
    pending = admission.submit(obj, location)     # as the object is read: answered in batches
    violations, changes = admission.take(pending) # once the object's result is recorded
    admission.finish()                            # the bindings the API server could not configure

A CREATE, with no user (`userInfo` empty), because the objects audited exist: the question is whether the
API server would admit each of them now. What its answer says becomes rows:

- a ValidatingAdmissionPolicy's binding whose validation fails is a violation of the "constraint"
  `ValidatingAdmissionPolicy/<policy>/<binding>`, one per failed validation, its message in Kubernetes'
  words: the refusal's (after `denied request: `), a warning's (after the binding's name), or the entry
  of the audit annotation `validation.policy.admission.k8s.io/validation_failure`. Its enforcement action
  is the binding's strongest validationAction: Deny -> deny, Warn -> warn, Audit alone -> dryrun (recorded,
  no effect, as Gatekeeper's dryrun); the binding's actions are its enforcementActions when they are more
  than that one (`deny(deny,audit)`, `dryrun(audit)`). The API server refuses a request with its first
  denying validation, and records the first failure in the audit annotation: an object is reported with
  what the API server says of it, not every validation that would fail.
- a MutatingAdmissionPolicy that would change the object is a row of action `mutate` with what would
  change (a JSON merge patch), under `MutatingAdmissionPolicy/<names>` (the answer says what changed,
  not which of the policies changed it). It is no violation: it is counted apart and fails nothing.
- a binding the API server cannot configure for the request (a parameter that does not exist, with
  parameterNotFoundAction Deny) refuses every request it matches: that is an error of the binding,
  reported once, located at it, with the number of objects it refused.

Memory: an object is held until its batch is answered (`BATCH` objects), then only its rows are.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.admissionpolicy.documents import (
    MUTATING_BINDING,
    MUTATING_POLICY,
    VALIDATING_BINDING,
    VALIDATING_POLICY,
    is_admission_policy_document,
)
from celkeeper.audit import ObjectRef, Violation
from celkeeper.cli.admissionpolicies import AdmissionReviewer, merge_patch
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError, CelkeeperError, Location
from celkeeper.model import JsonObject, JsonValue

#: objects answered together (the native library answers a batch on every core)
BATCH = 256
#: the action of a row that says what a MutatingAdmissionPolicy would change
MUTATE = "mutate"
#: the audit annotation the API server records a failed validation of an Audit binding in
VALIDATION_FAILURE = "validation.policy.admission.k8s.io/validation_failure"

_DENIED = re.compile(
    r"(ValidatingAdmissionPolicy|MutatingAdmissionPolicy|policy) '([^']+)' with binding '([^']+)' "
    r"denied request: (.*)",
    re.S,
)
_WARNED = re.compile(
    r"Validation failed for ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)': (.*)", re.S
)
#: a refusal of the binding itself, whatever the object (Kubernetes' "failed to configure binding")
_UNCONFIGURED = "failed to configure "
#: the Kubernetes validationActions, strongest first, and the enforcement action each is reported as
_ACTIONS = {"Deny": "deny", "Warn": "warn", "Audit": "dryrun"}


@dataclass(frozen=True)
class Binding:
    """A binding among the policies: what the totals list."""

    kind: str  # ValidatingAdmissionPolicy or MutatingAdmissionPolicy: the kind of its policy
    policy: str
    name: str
    actions: tuple[str, ...]  # validationActions as Kubernetes spells them (none for a mutating one)
    document: Document

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, f"{self.policy}/{self.name}")

    @property
    def enforcement_action(self) -> str:
        """The binding's validationActions, as the totals show them (`Deny,Audit`)."""
        return ",".join(self.actions)


class Pending:
    """An object submitted for review: its request until its batch is answered, then what was found."""

    __slots__ = ("error", "found", "location", "request")

    def __init__(self, request: Mapping[str, JsonValue], location: Location) -> None:
        self.request: Mapping[str, JsonValue] | None = request
        self.location = location
        self.found: tuple[Violation, ...] = ()
        self.error: str | None = None


class AdmissionAudit:
    def __init__(self, inputs: Any, reviewer: AdmissionReviewer, documents: Sequence[Document]) -> None:
        self.inputs = inputs
        self.reviewer = reviewer
        self.bindings = _bindings(documents)
        self._actions = {(b.kind, b.name): b.actions for b in self.bindings}
        self._by_name = {(b.kind, b.name): b for b in self.bindings}
        mutating = sorted({b.policy for b in self.bindings if b.kind == MUTATING_POLICY})
        #: the "constraint" of what the mutating policies would change
        self.mutation_key = (MUTATING_POLICY, ",".join(mutating))
        self._policies = set(reviewer.policies.names)
        self._pending: list[Pending] = []
        #: refusals of a binding itself: (kind, policy, binding, message) -> objects refused
        self._unconfigured: Counter[tuple[str, str, str, str]] = Counter()

    @classmethod
    def build(
        cls, inputs: Any, documents: Sequence[Document], objects: Iterable[Mapping[str, JsonValue]]
    ) -> AdmissionAudit | None:
        """The admission policies among `documents` with the parameter objects and Namespaces among
        `objects`; their problems reported (errors located, notes); None when there are none."""
        reviewer = AdmissionReviewer.build(documents, objects)
        if reviewer is None:
            return None
        for error in reviewer.errors():
            inputs.error(error)
        for note in reviewer.notes():
            inputs.note(str(note))
        return cls(inputs, reviewer, documents)

    @property
    def mutates(self) -> bool:
        return any(b.kind == MUTATING_POLICY for b in self.bindings)

    def validating(self) -> list[Binding]:
        """The ValidatingAdmissionPolicyBindings whose policy is given (the others bind nothing)."""
        return [
            b
            for b in self.bindings
            if b.kind == VALIDATING_POLICY and f"{VALIDATING_POLICY}/{b.policy}" in self._policies
        ]

    # -- the objects -----------------------------------------------------------------------------------
    def submit(self, obj: JsonObject, location: Location) -> Pending:
        """An object to answer as a CREATE: answered with its batch (when the batch is full, or when a
        result is taken)."""
        pending = Pending({"operation": "CREATE", "object": obj}, location)
        self._pending.append(pending)
        if len(self._pending) >= BATCH:
            self._answer()
        return pending

    def take(self, pending: Pending) -> tuple[Violation, ...]:
        """What the API server's answer says of the object (violations, and a `mutate` row); its error is
        reported here."""
        if pending.request is not None:
            self._answer()
        if pending.error is not None:
            self.inputs.error(pending.error)
        return pending.found

    def _answer(self) -> None:
        batch, self._pending = self._pending, []
        requests = [p.request for p in batch if p.request is not None]
        answers = self.reviewer.policies.review_many(requests)
        for pending, answer in zip((p for p in batch if p.request is not None), answers, strict=True):
            request, pending.request = pending.request, None
            assert request is not None
            obj = request["object"]
            ref = ObjectRef.of(obj)
            if isinstance(answer, CelkeeperError):
                pending.error = f"{pending.location}: {ref}: not reviewed by the admission policies: {answer}"
                continue
            reviewed = _reviewed(answer, obj)
            for note in self.reviewer.take_notes(reviewed):
                self.inputs.note(note)
            pending.found = self._rows(reviewed, ref)

    def _rows(self, reviewed: Any, ref: ObjectRef) -> tuple[Violation, ...]:
        answer = reviewed.answer
        if reviewed.quiet:
            return ()
        # (kind, policy, binding, message) -> the actions Kubernetes took on that failure
        failures: dict[tuple[str, str, str, str], set[str]] = {}
        rows: list[Violation] = []
        if not answer.allowed:
            denied = _DENIED.search(answer.message)
            if denied is None:  # refused by no policy's binding (not expected: said as it is)
                rows.append(Violation(("AdmissionPolicy", ""), "deny", (), answer.message, ref))
            else:
                kind = self._kind(denied[1], denied[2])
                if denied[4].startswith(_UNCONFIGURED):
                    self._unconfigured[(kind, denied[2], denied[3], denied[4])] += 1
                else:
                    failures.setdefault((kind, denied[2], denied[3], denied[4]), set()).add("Deny")
        for warning in answer.warnings:
            warned = _WARNED.match(warning)
            if warned is None:
                rows.append(Violation(("AdmissionPolicy", ""), "warn", (), warning, ref))
            else:
                failures.setdefault((VALIDATING_POLICY, warned[1], warned[2], warned[3]), set()).add("Warn")
        for entry in _audit_failures(answer.audit_annotations.get(VALIDATION_FAILURE)):
            key = (VALIDATING_POLICY, entry["policy"], entry["binding"], entry["message"])
            failures.setdefault(key, set()).update(entry["actions"])
        for (kind, policy, binding, message), seen in failures.items():
            declared = self._actions.get((kind, binding)) or tuple(a for a in _ACTIONS if a in seen)
            strongest = next((a for a in _ACTIONS if a in declared), "Deny")
            actions = tuple(a.lower() for a in declared)
            shown = actions if actions != (_ACTIONS[strongest],) else ()
            rows.append(Violation((kind, f"{policy}/{binding}"), _ACTIONS[strongest], shown, message, ref))
        if answer.patched is not None:
            patch = merge_patch(answer.decoded or reviewed.before or {}, answer.patched)
            text = json.dumps(patch, sort_keys=True, separators=(",", ":"))
            rows.append(Violation(self.mutation_key, MUTATE, (), f"would change: {text}", ref))
        return tuple(rows)

    def _kind(self, said: str, policy: str) -> str:
        """The kind of the policy a refusal names (`policy 'p'` names none: the given policy's)."""
        if said != "policy":
            return said
        if f"{VALIDATING_POLICY}/{policy}" in self._policies:
            return VALIDATING_POLICY
        return MUTATING_POLICY if f"{MUTATING_POLICY}/{policy}" in self._policies else "AdmissionPolicy"

    def finish(self) -> None:
        """Report the bindings the API server could not configure (once each, located at the binding)."""
        for (kind, policy, binding, message), count in sorted(self._unconfigured.items()):
            found = self._by_name.get((kind, binding))
            binding_kind = VALIDATING_BINDING if kind == VALIDATING_POLICY else MUTATING_BINDING
            text = (
                f'{binding_kind} "{binding}" (policy "{policy}"): {message}: the API server refuses every '
                f"request the binding matches ({count} object(s) here)"
            )
            path = "spec.paramRef" if "param" in message else "spec"
            self.inputs.error(found.document.error(AdmissionPolicyError, text, path) if found else text)

    def close(self) -> None:
        self.reviewer.close()


def _reviewed(answer: Any, obj: JsonValue) -> Any:
    from celkeeper.cli.admissionpolicies import Reviewed

    return Reviewed(answer, obj if isinstance(obj, dict) else None)


def _audit_failures(text: str | None) -> list[dict[str, Any]]:
    """The failures the validation_failure audit annotation records (a JSON list), as policy, binding,
    message and actions."""
    if not text:
        return []
    try:
        entries = json.loads(text)
    except ValueError:
        return []
    found = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        actions = entry.get("validationActions")
        found.append(
            {
                "policy": str(entry.get("policy", "")),
                "binding": str(entry.get("binding", "")),
                "message": str(entry.get("message", "")),
                "actions": [str(a) for a in actions] if isinstance(actions, list) else ["Audit"],
            }
        )
    return found


def _bindings(documents: Sequence[Document]) -> list[Binding]:
    found = []
    for document in documents:
        if not is_admission_policy_document(document) or document.kind not in (
            VALIDATING_BINDING,
            MUTATING_BINDING,
        ):
            continue
        spec = document.data.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        policy = spec.get("policyName")
        actions = spec.get("validationActions")
        validating = document.kind == VALIDATING_BINDING
        found.append(
            Binding(
                kind=VALIDATING_POLICY if validating else MUTATING_POLICY,
                policy=policy if isinstance(policy, str) else "",
                name=document.name,
                actions=tuple(
                    sorted(
                        {a for a in actions if isinstance(a, str)} if isinstance(actions, list) else (),
                        key=lambda a: list(_ACTIONS).index(a) if a in _ACTIONS else len(_ACTIONS),
                    )
                )
                if validating
                else (),
                document=document,
            )
        )
    return found
