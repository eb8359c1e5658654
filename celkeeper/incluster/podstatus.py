"""Per-pod status, the pure part: what a pod has loaded of each template and constraint, as objects.

    observations = observe(objects_by_item, policies, errors)   # one published snapshot
    tracker.advance(generation, observations)                    # keeps snapshotGeneration stable
    template_pod_status(pod, observation, snapshot_generation)    # the ConstraintTemplatePodStatus
    constraint_pod_status(pod, observation, snapshot_generation)  # the ConstraintPodStatus
    mutator_pod_status(pod, observation, snapshot_generation)     # the MutatorPodStatus
    admission_policy_pod_status(pod, observation, snapshot_generation)  # the AdmissionPolicyPodStatus

An Observation says, for one object of one snapshot: its uid and generation, the errors loading it
met (one line each, with the field path and line:col inside the CEL expression), and whether the
pod enforces it (a constraint that made it into the policy set; a template that compiled into one; a
mutator Gatekeeper's System holds and applies: not refused, not in a schema conflict, as Gatekeeper's
mutator controller sets its MutatorPodStatus; a Kubernetes admission policy or binding the webhook enforces
(--enforce-admission-policies) that the API server's code took without an error).

celkeeper's (celkeeper.incluster): the status objects of celkeeper's CRDs (pure; written by
celkeeper.incluster.podreporter).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celkeeper.cel.inventory import Gvk, describe, unmet
from celkeeper.crds import names
from celkeeper.errors import CelkeeperError, ConstraintError, DocumentError, TemplateError, TemplateWarning
from celkeeper.incluster.admissionpolicies import ITEM_PREFIX as ADMISSION_ITEM_PREFIX
from celkeeper.incluster.objects import (
    CONSTRAINT_ITEM_PREFIX,
    MUTATOR_ITEM_PREFIX,
    TEMPLATE_ITEM_PREFIX,
    item_name,
)
from celkeeper.incluster.resources import (
    admission_policy_pod_statuses,
    constraint_pod_statuses,
    mutator_pod_statuses,
    template_pod_statuses,
)
from celkeeper.kube.resources import Resource

if TYPE_CHECKING:
    from celkeeper.policy import PolicySet

OPERATIONS = ("webhook",)
_AT_IN_EXPRESSION = re.compile(r" \(at (\d+):(\d+) in the expression\)$")
_OBJECT_PREFIX = re.compile(r"^(?:template [^:\s]+|constraint [^:\s]+/[^:\s]+): ")
MAX_ERRORS = 20  # per object: a status object stays small whatever is wrong with the template
DATA_NOT_SYNCED = "data_not_synced"  # the code of the error of objects whose synced data is missing
#: Gatekeeper's type of a mutator's schema conflict (pkg/mutation/schema ErrConflictingSchemaType)
CONFLICTING_SCHEMA = "ErrConflictingSchema"


@dataclass(frozen=True)
class StatusError:
    code: str
    message: str
    location: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"code": self.code, "message": self.message}
        if self.location:
            out["location"] = self.location
        return out


def status_error(err: CelkeeperError) -> StatusError:
    """One error as a status entry: location = field path, then :line:col within the expression."""
    message = err.message
    location = err.location.path or ""
    found = _AT_IN_EXPRESSION.search(message)
    if found:
        message = message[: found.start()]
        location = f"{location}:{found.group(1)}:{found.group(2)}"
    elif err.location.line is not None and location:
        location = f"{location}:{err.location.line}:{err.location.column or 1}"
    message = _OBJECT_PREFIX.sub("", message, count=1)
    if isinstance(err, TemplateWarning):  # the template is enforced all the same (as Gatekeeper does)
        code = (
            "compile_error" if "does not compile" in message or "must evaluate to" in message else "warning"
        )
    elif isinstance(err, TemplateError):
        code = "compile_error" if "does not compile" in message else "invalid_template"
    elif isinstance(err, ConstraintError):
        code = "invalid_constraint"
    elif isinstance(err, DocumentError):
        code = "parse_error"
    else:
        code = "error"
    return StatusError(code, message, location)


@dataclass(frozen=True)
class Observation:
    kind: str  # ConstraintTemplate, or the constraint's kind
    name: str
    uid: str
    generation: int
    enforced: bool
    errors: tuple[StatusError, ...] = ()
    mutator: bool = False  # one of Gatekeeper's mutators (kind Assign, AssignMetadata, ...)
    admission: bool = False  # one of Kubernetes' admission policies or bindings the webhook enforces

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)

    @property
    def is_template(self) -> bool:
        return self.kind == names.TEMPLATE_KIND


ObservationKey = tuple[str, str]


def observe(
    objects: Mapping[str, Mapping[str, Any]],
    policies: PolicySet | None,
    errors: Iterable[CelkeeperError],
    synced: frozenset[Gvk] = frozenset(),
) -> dict[ObservationKey, Observation]:
    """What one snapshot holds of each object. `objects`: snapshot item name -> the object in it;
    `policies`: the policy set built from the snapshot (None when it could not be built); `errors`:
    every problem found building it (each located in its item by `location.file`); `synced`: the kinds
    of synced data the pod has. A template that reads data no synced kind provides says so, and its
    constraints are not enforced (the webhook fails them under the template's failurePolicy)."""
    by_item: dict[str, list[StatusError]] = {}
    for err in errors:
        if err.location.file:
            by_item.setdefault(err.location.file, []).append(status_error(err))
    loaded_templates = set(policies.templates) if policies is not None else set()
    loaded_constraints = {(c.kind, c.name) for c in policies.constraints} if policies is not None else set()
    waiting: dict[str, StatusError] = {}  # template name -> why its data is not there
    for template in policies.templates.values() if policies is not None else ():
        missing = unmet(template.requirements, synced)
        if missing:
            waiting[template.name] = StatusError(
                DATA_NOT_SYNCED,
                f"reads {describe(missing[0])}, which this pod has not synced (name it in a SyncSet or "
                "the Config's spec.sync.syncOnly); until it is, requests fail under the template's "
                f"failurePolicy ({template.failure_policy.value})",
            )
    found: dict[ObservationKey, Observation] = {}
    for item, obj in objects.items():
        if item_name(obj) == item and item.startswith(MUTATOR_ITEM_PREFIX):
            observation = _mutator(obj, policies, by_item.get(item, ()))
            found[(MUTATOR_KEY, f"{observation.kind}/{observation.name}")] = observation
            continue
        if item.startswith(ADMISSION_ITEM_PREFIX):
            observation = _admission_policy(obj, policies, by_item.get(item, ()))
            found[(ADMISSION_KEY, f"{observation.kind}/{observation.name}")] = observation
            continue
        if item_name(obj) != item or not item.startswith((TEMPLATE_ITEM_PREFIX, CONSTRAINT_ITEM_PREFIX)):
            continue  # ExpansionTemplates have no per-pod status (Gatekeeper's ExpansionTemplatePodStatus)
        meta = obj.get("metadata") or {}
        kind, name = str(obj.get("kind")), str(meta.get("name"))
        generation = meta.get("generation")
        problems = tuple(by_item.get(item, ())[:MAX_ERRORS])
        if policies is None:
            problems += (StatusError("error", "the policies of this snapshot could not be built"),)
        is_template = kind == names.TEMPLATE_KIND
        enforced = name in loaded_templates if is_template else (kind, name) in loaded_constraints
        data_error = waiting.get(name if is_template else kind.lower())
        if data_error is not None:
            problems += (data_error,)
            enforced = enforced and is_template  # a template is loaded; its constraints do not hold
        found[(kind, name)] = Observation(
            kind=kind,
            name=name,
            uid=str(meta.get("uid") or ""),
            generation=generation if isinstance(generation, int) else 0,
            enforced=enforced,
            errors=problems,
        )
    return found


#: the first part of a mutator's observation key (kinds of constraints and mutators may coincide)
MUTATOR_KEY = "mutations.gatekeeper.sh"


def _mutator(
    obj: Mapping[str, Any], policies: PolicySet | None, problems: Iterable[StatusError]
) -> Observation:
    """A mutator as Gatekeeper's mutator controller reports it: enforced when its System holds it without
    a schema conflict; its error (Gatekeeper keeps one: the conflict, else the refusal) otherwise."""
    meta = obj.get("metadata") or {}
    kind, name = str(obj.get("kind")), str(meta.get("name"))
    generation = meta.get("generation")
    loaded = (
        next((m for m in policies.mutators.mutators if (m.kind, m.name) == (kind, name)), None)
        if policies is not None
        else None
    )
    errors: tuple[StatusError, ...]
    if loaded is not None and loaded.conflicts:
        errors = (StatusError(CONFLICTING_SCHEMA, loaded.conflict_error or "conflicting schemas"),)
    elif loaded is None:
        first = next(iter(problems), None)
        if policies is None:
            first = StatusError("error", "the policies of this snapshot could not be built")
        errors = (first if first is not None else StatusError("error", "not loaded"),)
    else:
        errors = ()
    return Observation(
        kind=kind,
        name=name,
        uid=str(meta.get("uid") or ""),
        generation=generation if isinstance(generation, int) else 0,
        enforced=loaded is not None and not loaded.conflicts,
        errors=errors,
        mutator=True,
    )


#: the first part of an admission policy's or binding's observation key
ADMISSION_KEY = "admissionregistration.k8s.io"


def _admission_policy(
    obj: Mapping[str, Any], policies: PolicySet | None, problems: Iterable[StatusError]
) -> Observation:
    """A ValidatingAdmissionPolicy, MutatingAdmissionPolicy or binding of the snapshot: enforced when the
    API server's code took it without an error (the informer builds the set as the workers do)."""
    meta = obj.get("metadata") or {}
    generation = meta.get("generation")
    errors = tuple(problems)[:MAX_ERRORS]
    if policies is None:
        errors += (StatusError("error", "the policies of this snapshot could not be built"),)
    return Observation(
        kind=str(obj.get("kind")),
        name=str(meta.get("name")),
        uid=str(meta.get("uid") or ""),
        generation=generation if isinstance(generation, int) else 0,
        enforced=not errors,
        errors=errors,
        admission=True,
    )


class ObservationTracker:
    """The loaded observations, each with the snapshot generation in which it first appeared as it is:
    a new snapshot that leaves an object as it was keeps its snapshotGeneration (so the pod status, and
    the writes, do not change when other objects do)."""

    def __init__(self) -> None:
        self.current: dict[ObservationKey, tuple[Observation, int]] = {}
        self.generation = 0

    def advance(self, generation: int, observations: Mapping[ObservationKey, Observation]) -> None:
        previous = self.current
        self.current = {
            key: (obs, previous[key][1] if key in previous and previous[key][0] == obs else generation)
            for key, obs in observations.items()
        }
        self.generation = generation


@dataclass(frozen=True)
class Pod:
    """Who writes: the pod's name and namespace, an ownerReference to its Pod object when it has one
    (status objects of a deleted pod then go with it, through the garbage collector), and how many
    pods it was told to expect (`--expected-pods`; reported so that every pod aggregates alike)."""

    name: str
    namespace: str
    owner: Mapping[str, Any] | None = None
    expected_pods: int | None = None


def _metadata(pod: Pod, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": pod.namespace, "labels": dict(labels)}
    if pod.owner:
        meta["ownerReferences"] = [dict(pod.owner)]
    return meta


def _common(pod: Pod, obs: Observation, snapshot_generation: int) -> dict[str, Any]:
    status: dict[str, Any] = {
        "id": pod.name,
        "operations": list(OPERATIONS),
        "observedGeneration": obs.generation,
        "snapshotGeneration": snapshot_generation,
    }
    if obs.errors:
        status["errors"] = [e.to_json() for e in obs.errors]
    return status


def template_pod_status(
    pod: Pod, obs: Observation, snapshot_generation: int, vap: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ConstraintTemplatePodStatus object (`vap`: its vapGenerationStatus, when this pod manages the
    template's ValidatingAdmissionPolicy). Raises CelkeeperError when no valid name can be made."""
    status = _common(pod, obs, snapshot_generation)
    status["templateUID"] = obs.uid
    if vap:
        status["vapGenerationStatus"] = dict(vap)
    return {
        "apiVersion": names.STATUS_API_VERSION,
        "kind": names.TEMPLATE_POD_STATUS_KIND,
        "metadata": _metadata(
            pod,
            names.template_pod_status_name(pod.name, obs.name),
            names.template_pod_status_labels(pod.name, obs.name),
        ),
        "status": status,
    }


def constraint_pod_status(
    pod: Pod, obs: Observation, snapshot_generation: int, vap: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ConstraintPodStatus object (`vap`: its enforcementPointsStatus entry for vap.k8s.io, the binding).
    Raises CelkeeperError when no valid name can be made."""
    status = _common(pod, obs, snapshot_generation)
    status["constraintUID"] = obs.uid
    status["enforced"] = obs.enforced
    if pod.expected_pods is not None:
        status["expectedPods"] = pod.expected_pods
    if vap:
        status["enforcementPointsStatus"] = [dict(vap)]
    return {
        "apiVersion": names.STATUS_API_VERSION,
        "kind": names.CONSTRAINT_POD_STATUS_KIND,
        "metadata": _metadata(
            pod,
            names.constraint_pod_status_name(pod.name, obs.kind, obs.name),
            names.constraint_pod_status_labels(pod.name, obs.kind, obs.name),
        ),
        "status": status,
    }


def mutator_pod_status(pod: Pod, obs: Observation, snapshot_generation: int) -> dict[str, Any]:
    """The MutatorPodStatus object: Gatekeeper's fields (id, mutatorUID, operations, enforced, errors as
    {type, message}, observedGeneration) with celkeeper's snapshotGeneration and expectedPods. Raises
    CelkeeperError when no valid name can be made."""
    status: dict[str, Any] = {
        "id": pod.name,
        "operations": ["mutation-webhook"],
        "observedGeneration": obs.generation,
        "snapshotGeneration": snapshot_generation,
        "mutatorUID": obs.uid,
        "enforced": obs.enforced,
    }
    if obs.errors:
        status["errors"] = [
            {"type": e.code, "message": e.message} if e.code == CONFLICTING_SCHEMA else {"message": e.message}
            for e in obs.errors
        ]
    if pod.expected_pods is not None:
        status["expectedPods"] = pod.expected_pods
    return {
        "apiVersion": names.STATUS_API_VERSION,
        "kind": names.MUTATOR_POD_STATUS_KIND,
        "metadata": _metadata(
            pod,
            names.mutator_pod_status_name(pod.name, obs.kind, obs.name),
            names.mutator_pod_status_labels(pod.name, obs.kind, obs.name),
        ),
        "status": status,
    }


def admission_policy_pod_status(pod: Pod, obs: Observation, snapshot_generation: int) -> dict[str, Any]:
    """The AdmissionPolicyPodStatus object: whether the pod's workers enforce this generation of the
    policy or binding, with the errors the API server's code found in it. Raises CelkeeperError when no
    valid name can be made."""
    status = _common(pod, obs, snapshot_generation)
    status["operations"] = ["mutation-webhook" if obs.kind.startswith("Mutating") else "webhook"]
    status["policyUID"] = obs.uid
    status["enforced"] = obs.enforced
    if pod.expected_pods is not None:
        status["expectedPods"] = pod.expected_pods
    return {
        "apiVersion": names.STATUS_API_VERSION,
        "kind": names.ADMISSION_POLICY_POD_STATUS_KIND,
        "metadata": _metadata(
            pod,
            names.admission_policy_pod_status_name(pod.name, obs.kind, obs.name),
            names.admission_policy_pod_status_labels(pod.name, obs.kind, obs.name),
        ),
        "status": status,
    }


def pod_status(
    pod: Pod, obs: Observation, snapshot_generation: int, vap: Mapping[str, Any] | None = None
) -> tuple[Resource, dict[str, Any]]:
    """The status object for an observation, and the collection it goes to (`vap`: the state of its
    generated ValidatingAdmissionPolicy or binding)."""
    if obs.mutator:
        return mutator_pod_statuses(pod.namespace), mutator_pod_status(pod, obs, snapshot_generation)
    if obs.admission:
        return admission_policy_pod_statuses(pod.namespace), admission_policy_pod_status(
            pod, obs, snapshot_generation
        )
    if obs.is_template:
        return template_pod_statuses(pod.namespace), template_pod_status(pod, obs, snapshot_generation, vap)
    return constraint_pod_statuses(pod.namespace), constraint_pod_status(pod, obs, snapshot_generation, vap)


def pod_status_current(stored: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """The stored status object says exactly what `desired` says (status compared whole: we own it)."""
    if stored is None:
        return False
    stored_meta = stored.get("metadata") or {}
    desired_meta = desired.get("metadata") or {}
    labels = stored_meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in (desired_meta.get("labels") or {}).items()):
        return False
    if (stored_meta.get("ownerReferences") or []) != (desired_meta.get("ownerReferences") or []):
        return False
    return bool(stored.get("status") == desired.get("status"))
