"""Kubernetes' admission policies in the audit: each audited object is answered as the API server answers a
CREATE of it (celkeeper.admissionpolicy, Kubernetes' own code), and what the answer says is reported beside
the constraints' violations. One implementation for the offline `celkeeper audit` (cli.audit) and the
in-cluster audit (audit.process, with --audit-admission-policies).

    admission = AdmissionAudit.of(problems, policies, documents)   # policies: an AdmissionPolicies
    pending = admission.submit(obj, location)     # as the object is read: answered in batches
    found = admission.take(pending)               # its violations, `mutate` row and errors, once recorded
    unconfigured = admission.finish()             # the bindings the API server could not configure

    problems = RunProblems(results)               # the in-cluster audit's: logged, counted in its results
    found = read_cluster(client, resources, namespaces, problems)  # the cluster's, for one run (or None)

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

What cannot be answered is an error, counted as the constraints' audit counts an object a constraint
cannot evaluate (RunResults.add_error: the run's error total, `celkeeper_audit_errors`, the offline exit
code and summary):

- a binding the API server cannot configure for the request (a parameter that does not exist, with
  parameterNotFoundAction Deny) refuses every request it matches: each object it refuses is an error of
  the "constraint" `<policy kind>/<policy>/<binding>` (`Found.refused`), and `finish` says it once per
  binding, located at it, with the number of objects it refused;
- an object the policies cannot review (the API server would not decode the request) is an error of
  ALL_POLICIES, `AdmissionPolicy/*` (`Found.errors`);
- a policy or binding the API server would refuse (AdmissionPolicies.problems: it is left out, as the API
  server would not store it), in the cluster: an error of that policy (`<kind>/<policy>`) or binding
  (`<policy kind>/<policy>/<binding>`); policies that cannot be read or built: of ALL_POLICIES
  (RunProblems; offline, these are the tool's input errors).

Which objects (the in-cluster audit, `selects`): the kinds the constraints can match, and the resources a
policy's matchConstraints.resourceRules name for CREATE (by group and resource; Kubernetes' matching then
decides, versions and all).

Memory: an object is held until its batch is answered (`BATCH` objects), then only its rows are.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from celkeeper.admissionpolicy import AdmissionPolicies, Answer
from celkeeper.admissionpolicy.documents import (
    MUTATING_BINDING,
    MUTATING_POLICY,
    VALIDATING_BINDING,
    VALIDATING_POLICY,
    is_admission_policy_document,
)
from celkeeper.audit.openreports import ADMISSION_KINDS
from celkeeper.audit.results import ConstraintKey, ObjectRef, RunResults, Violation
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyError, AdmissionPolicyNote, CelkeeperError, Location
from celkeeper.incluster.objects import policy_object
from celkeeper.kube import ApiError, Client
from celkeeper.kube.admissionpolicies import POLICY_RESOURCES, read_admission_policies, read_crds
from celkeeper.kube.discovery import ApiResource
from celkeeper.model import JsonObject, JsonValue

log = logging.getLogger("celkeeper.audit")

#: objects answered together (the native library answers a batch on every core)
BATCH = 256
#: the action of a row that says what a MutatingAdmissionPolicy would change
MUTATE = "mutate"
#: the "constraint" an error of the admission policies as a whole is counted under: an object they cannot
#: review, policies that cannot be read or built
ALL_POLICIES: ConstraintKey = ("AdmissionPolicy", "*")
#: the API version of the policies and bindings, as an error's object names them
_POLICY_API = ("admissionregistration.k8s.io", "v1")
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
#: (apiGroups, resources) of the policies' resourceRules that can match a CREATE
Rules = list[tuple[frozenset[str], frozenset[str]]]


class Problems(Protocol):
    """Where the problems go: the offline tool's inputs (printed, counted), or the in-cluster audit's run
    (RunProblems: logged, counted)."""

    def error(self, problem: str | CelkeeperError) -> None: ...

    def note(self, text: str) -> None: ...


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


@dataclass(frozen=True)
class Found:
    """What the API server's answer says of an object: its rows (violations, a `mutate` row), and what
    could not be answered, each as (the "constraint" it is an error of, the message)."""

    ref: ObjectRef
    violations: tuple[Violation, ...] = ()
    #: the object could not be reviewed: each an error of the object, reported as the constraints' are
    errors: tuple[tuple[ConstraintKey, str], ...] = ()
    #: bindings the API server cannot configure refused it: each an error of the object, which `finish`
    #: says once per binding
    refused: tuple[tuple[ConstraintKey, str], ...] = ()


class Pending:
    """An object submitted for review: its request until its batch is answered, then what was found."""

    __slots__ = ("found", "location", "request")

    def __init__(self, request: Mapping[str, JsonValue], location: Location | None) -> None:
        self.request: Mapping[str, JsonValue] | None = request
        self.location = location
        self.found: Found | None = None


class AdmissionAudit:
    def __init__(
        self,
        problems: Problems,
        policies: AdmissionPolicies,
        documents: Sequence[Document],
        *,
        where: str = "the inputs",
    ) -> None:
        self.problems = problems
        self.policies = policies
        self.where = where  # what the notes say an assumed Namespace or CRD is not among
        self.bindings = _bindings(documents)
        self._actions = {(b.kind, b.name): b.actions for b in self.bindings}
        self._by_name = {(b.kind, b.name): b for b in self.bindings}
        mutating = sorted({b.policy for b in self.bindings if b.kind == MUTATING_POLICY})
        #: the "constraint" of what the mutating policies would change
        self.mutation_key = (MUTATING_POLICY, ",".join(mutating))
        self._policies = set(policies.names)
        self._rules = _resource_rules(d for d in documents if d.kind in ADMISSION_KINDS)
        self._pending: list[Pending] = []
        self._noted: set[str] = set()
        #: refusals of a binding itself: (kind, policy, binding, message) -> objects refused
        self._unconfigured: Counter[tuple[str, str, str, str]] = Counter()

    @classmethod
    def of(
        cls,
        problems: Problems,
        policies: AdmissionPolicies,
        documents: Sequence[Document],
        *,
        where: str = "the inputs",
    ) -> AdmissionAudit:
        """The audit of a set of policies built from `documents`, its problems reported (errors located,
        notes)."""
        for problem in policies.problems:
            if isinstance(problem, AdmissionPolicyNote):
                problems.note(str(problem))
            else:
                problems.error(problem)
        return cls(problems, policies, documents, where=where)

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

    def selects(self, group: str, resource: str) -> bool:
        """Whether a policy's matchConstraints can match a CREATE of this resource (`*` and `*/...`
        included), so that its objects are to be listed."""
        return _selected(self._rules, group, resource)

    # -- the objects -----------------------------------------------------------------------------------
    def submit(self, obj: JsonObject, location: Location | None = None) -> Pending:
        """An object to answer as a CREATE: answered with its batch (when the batch is full, or when a
        result is taken)."""
        pending = Pending({"operation": "CREATE", "object": obj}, location)
        self._pending.append(pending)
        if len(self._pending) >= BATCH:
            self._answer()
        return pending

    def take(self, pending: Pending) -> Found:
        """What the API server's answer says of the object (violations, a `mutate` row, errors)."""
        if pending.request is not None:
            self._answer()
        assert pending.found is not None
        return pending.found

    def _answer(self) -> None:
        batch, self._pending = self._pending, []
        requests = [p.request for p in batch if p.request is not None]
        answers = self.policies.review_many(requests)
        for pending, answer in zip((p for p in batch if p.request is not None), answers, strict=True):
            request, pending.request = pending.request, None
            assert request is not None
            obj = request["object"]
            ref = ObjectRef.of(obj)
            if isinstance(answer, CelkeeperError):
                pending.found = Found(
                    ref, errors=((ALL_POLICIES, f"not reviewed by the admission policies: {answer}"),)
                )
                continue
            for note in answer.assumptions(self.where):
                if note not in self._noted:
                    self._noted.add(note)
                    self.problems.note(note)
            pending.found = self._found(answer, obj, ref)

    def _found(self, answer: Answer, obj: JsonValue, ref: ObjectRef) -> Found:
        if answer.quiet:
            return Found(ref)
        # (kind, policy, binding, message) -> the actions Kubernetes took on that failure
        failures: dict[tuple[str, str, str, str], set[str]] = {}
        rows: list[Violation] = []
        refused: list[tuple[ConstraintKey, str]] = []
        if not answer.allowed:
            denied = _DENIED.search(answer.message)
            if denied is None:  # refused by no policy's binding (not expected: said as it is)
                rows.append(Violation(("AdmissionPolicy", ""), "deny", (), answer.message, ref))
            else:
                kind = self._kind(denied[1], denied[2])
                if denied[4].startswith(_UNCONFIGURED):
                    self._unconfigured[(kind, denied[2], denied[3], denied[4])] += 1
                    refused.append(((kind, f"{denied[2]}/{denied[3]}"), denied[4]))
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
            patch = answer.change(obj if isinstance(obj, dict) else None)
            text = json.dumps(patch, sort_keys=True, separators=(",", ":"))
            rows.append(Violation(self.mutation_key, MUTATE, (), f"would change: {text}", ref))
        return Found(ref, tuple(rows), refused=tuple(refused))

    def _kind(self, said: str, policy: str) -> str:
        """The kind of the policy a refusal names (`policy 'p'` names none: the given policy's)."""
        if said != "policy":
            return said
        if f"{VALIDATING_POLICY}/{policy}" in self._policies:
            return VALIDATING_POLICY
        return MUTATING_POLICY if f"{MUTATING_POLICY}/{policy}" in self._policies else "AdmissionPolicy"

    def finish(self) -> list[CelkeeperError | str]:
        """The bindings the API server could not configure, one error each, located at the binding (the
        objects they refused were counted as `Found.refused`)."""
        said: list[CelkeeperError | str] = []
        for (kind, policy, binding, message), count in sorted(self._unconfigured.items()):
            found = self._by_name.get((kind, binding))
            binding_kind = VALIDATING_BINDING if kind == VALIDATING_POLICY else MUTATING_BINDING
            text = (
                f'{binding_kind} "{binding}" (policy "{policy}"): {message}: the API server refuses every '
                f"request the binding matches ({count} object(s) here)"
            )
            path = "spec.paramRef" if "param" in message else "spec"
            said.append(found.document.error(AdmissionPolicyError, text, path) if found else text)
        self._unconfigured.clear()
        return said

    def close(self) -> None:
        self.policies.close()


# -- the cluster's --------------------------------------------------------------------------------------
class RunProblems:
    """The in-cluster audit's problems for one run: log lines, each said once (an error is a warning: the
    constraints' audit goes on), and each error counted in the run's results, under the policy or binding
    it is of (`problem_key`)."""

    def __init__(self, results: RunResults) -> None:
        self.results = results
        self._said: set[str] = set()

    def error(self, problem: str | CelkeeperError) -> None:
        text = f"admission policies: {problem}"
        if text in self._said:
            return
        key, ref = problem_key(problem)
        self.results.add_error(key, ref, str(problem))
        self._once(logging.WARNING, text)

    def note(self, text: str) -> None:
        self._once(logging.INFO, f"admission policies: {text}")

    def _once(self, level: int, text: str) -> None:
        if text not in self._said:
            self._said.add(text)
            log.log(level, text)


def problem_key(problem: str | CelkeeperError) -> tuple[ConstraintKey, ObjectRef]:
    """The "constraint" an error of the policies is counted under, and the object it is of: a policy's
    (`<kind>/<policy>`) or a binding's (`<policy kind>/<policy>/<binding>`) the API server would refuse,
    else ALL_POLICIES."""
    kind, name, policy = problem.subject if isinstance(problem, AdmissionPolicyError) else ("", "", "")
    if kind in ADMISSION_KINDS:
        return (kind, name), ObjectRef(*_POLICY_API, kind, "", name)
    if kind in (VALIDATING_BINDING, MUTATING_BINDING):
        policy_kind = VALIDATING_POLICY if kind == VALIDATING_BINDING else MUTATING_POLICY
        return (policy_kind, f"{policy}/{name}"), ObjectRef(*_POLICY_API, kind, "", name)
    return ALL_POLICIES, ObjectRef(*_POLICY_API, "", "", "")


def read_cluster(
    client: Client,
    resources: Sequence[ApiResource],
    namespaces: Iterable[Mapping[str, Any]],
    problems: Problems,
) -> AdmissionAudit | None:
    """The cluster's admission policies for one run, read afresh (policies, bindings, their parameter
    objects, the CRDs of the kinds served), with `namespaces` (the cluster's Namespaces); None when it
    holds none, or when they cannot be read or built (said: the constraints' audit goes on without them).
    `resources`: discovery's, for the parameters' and CRDs' resources."""
    served = {(r.group, r.kind): r for r in resources}

    def resource_for(group: str, kind: str) -> ApiResource | None:
        return served.get((group, kind))

    try:
        found = read_admission_policies(client, resource_for)
        for note in found.notes:
            problems.note(note)
        if not found.policies:
            return None
        where = {r.kind: str(r) for r in POLICY_RESOURCES}
        documents = [
            Document.from_object(policy_object(p), file=f"cluster:{where[str(p.get('kind'))]}/{_name(p)}")
            for p in found.policies
        ]
        # the CRDs of the custom resources the policies can match, and of their parameters' kinds: the
        # objects are decoded as the API server decodes them
        rules = _resource_rules(d for d in documents if d.kind in ADMISSION_KINDS)
        kinds = {(r.group, r.kind) for r in resources if _selected(rules, r.group, r.plural)}
        kinds |= {k for k in map(_param_kind, documents) if k is not None}
        crds, unread = read_crds(client, resource_for, kinds)
    except ApiError as err:
        problems.error(f"cannot read the cluster's admission policies ({err}): not audited in this run")
        return None
    for note in unread:
        problems.note(note)
    try:
        policies = AdmissionPolicies.build(
            documents,
            params=[Document.from_object(copy.deepcopy(p)) for p in found.params],
            namespaces=[Document.from_object(copy.deepcopy(dict(n))) for n in namespaces],
            crds=[Document.from_object(c) for c in crds],
        )
    except AdmissionPolicyError as err:
        problems.error(f"{err}: not audited in this run")
        return None
    return AdmissionAudit.of(problems, policies, documents, where="the cluster's")


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _resource_rules(policies: Iterable[Document]) -> Rules:
    """(apiGroups, resources) of each matchConstraints.resourceRules entry that can match a CREATE."""
    rules: Rules = []
    for policy in policies:
        spec = policy.data.get("spec") if isinstance(policy.data, dict) else None
        constraints = spec.get("matchConstraints") if isinstance(spec, dict) else None
        entries = constraints.get("resourceRules") if isinstance(constraints, dict) else None
        for rule in entries if isinstance(entries, list) else ():
            if not isinstance(rule, dict):
                continue
            operations = _strings(rule.get("operations"))
            if "*" not in operations and "CREATE" not in operations:
                continue
            # a subresource rule (`pods/status`) names no object to list; `*/x` and `*` stand for any
            resources = {r.partition("/")[0] for r in _strings(rule.get("resources")) if r.partition("/")[0]}
            rules.append((frozenset(_strings(rule.get("apiGroups"))), frozenset(resources)))
    return rules


def _selected(rules: Rules, group: str, resource: str) -> bool:
    return any(
        ("*" in groups or group in groups) and ("*" in resources or resource in resources)
        for groups, resources in rules
    )


def _param_kind(document: Document) -> tuple[str, str] | None:
    """(group, kind) of a policy's paramKind."""
    spec = document.data.get("spec") if isinstance(document.data, dict) else None
    param = spec.get("paramKind") if isinstance(spec, dict) else None
    if document.kind not in ADMISSION_KINDS or not isinstance(param, dict):
        return None
    api_version, kind = param.get("apiVersion"), param.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return (api_version.rpartition("/")[0], kind)


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


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
