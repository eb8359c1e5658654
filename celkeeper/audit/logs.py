"""The audit's log: JSON lines with Gatekeeper's audit fields, so log pipelines built for it carry over.

Every line is one JSON object: `level`, `ts` (Unix seconds), `logger`, `msg`, then the record's
fields. The audit's own events carry Gatekeeper's keys (pkg/audit/manager.go logStart, logFinish,
logConstraint, logViolation; pkg/logging): `process: audit`, `audit_id` (the run's timestamp) and
`event_type` `audit_started`, `constraint_audited`, `violation_audited`, `audit_finished`, with the
constraint_* and resource_* fields. Fields Gatekeeper fills from Rego (`details`) are null here.

Kubernetes' admission policies (--audit-admission-policies): a failed validation is a `violation_audited`
line whose "constraint" is the binding: constraint_group `admissionregistration.k8s.io`, constraint_kind
`ValidatingAdmissionPolicy`, constraint_name `<policy>/<binding>`; what a MutatingAdmissionPolicy would
change is a `mutation_audited` line (constraint_kind `MutatingAdmissionPolicy`, constraint_name the
policies, the message `would change: <JSON merge patch>`).

    handler.setFormatter(JsonFormatter())
    log.info(message, extra=fields(...))
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from celkeeper.audit.openreports import ADMISSION_KINDS
from celkeeper.audit.results import ObjectRef, Violation, truncate
from celkeeper.crds import names
from celkeeper.model import JsonObject, JsonValue

FIELDS = "fields"  # the LogRecord attribute holding a line's structured fields
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_LEVELS = {"WARNING": "warn", "CRITICAL": "error"}
ADMISSION_GROUP = "admissionregistration.k8s.io"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: JsonObject = {
            "level": _LEVELS.get(record.levelname, record.levelname.lower()),
            "ts": record.created,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, FIELDS, None)
        if isinstance(extra, Mapping):
            line.update(extra)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def fields(**values: Any) -> JsonObject:
    """`extra=` for a logging call: the fields of a structured line."""
    return {FIELDS: values}


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String() (what Gatekeeper logs as `duration`): 1m2.5s, 850.5ms, 1.2µs."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return sign + _decimal(nanos, size) + unit
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = _decimal(rest, 1_000_000_000) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _decimal(value: int, unit: int) -> str:
    whole, fraction = divmod(value, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{str(fraction).rjust(digits, '0').rstrip('0')}"


def constraint_annotations(constraint: Mapping[str, JsonValue] | None) -> dict[str, str] | None:
    """A constraint's annotations without kubectl's last-applied copy (None when it has none)."""
    meta = (constraint or {}).get("metadata")
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(found, Mapping):
        return None
    return {str(k): str(v) for k, v in found.items() if k != LAST_APPLIED}


def constraint_fields(kind: str, name: str) -> JsonObject:
    """Gatekeeper's constraint_* keys (constraints are cluster-scoped: no namespace); of an admission
    policy's binding, its policy's group and version."""
    admission = kind in ADMISSION_KINDS
    return {
        "constraint_group": ADMISSION_GROUP if admission else names.CONSTRAINTS_GROUP,
        "constraint_api_version": "v1" if admission else names.CONSTRAINTS_STORAGE_VERSION,
        "constraint_kind": kind,
        "constraint_name": name,
        "constraint_namespace": "",
    }


def resource_fields(ref: ObjectRef) -> dict[str, str]:
    """Gatekeeper's resource_* keys of the violating object (labels apart)."""
    return {
        "resource_group": ref.group,
        "resource_api_version": ref.version,
        "resource_kind": ref.kind,
        "resource_namespace": ref.namespace,
        "resource_name": ref.name,
    }


def violation_line(
    violation: Violation, audit_id: str, annotations: Mapping[str, str] | None
) -> tuple[str, JsonObject]:
    """The message and fields of a `violation_audited` line (logViolation)."""
    ref = violation.ref
    values: JsonObject = {
        "process": "audit",
        "audit_id": audit_id,
        "details": None,
        "event_type": "violation_audited",
        "semantic": True,
        **constraint_fields(*violation.constraint),
        "constraint_action": violation.enforcement_action,
        "constraint_enforcement_actions": list(violation.enforcement_actions),
        "constraint_annotations": dict(annotations) if annotations is not None else None,
        **resource_fields(ref),
        "resource_labels": dict(violation.labels) if violation.labels else None,
    }
    return truncate(violation.message), fields(**values)


def change_line(change: Violation, audit_id: str) -> tuple[str, JsonObject]:
    """The message and fields of a `mutation_audited` line: what a MutatingAdmissionPolicy would change."""
    values: JsonObject = {
        "process": "audit",
        "audit_id": audit_id,
        "event_type": "mutation_audited",
        "semantic": True,
        **constraint_fields(*change.constraint),
        "constraint_action": change.enforcement_action,
        **resource_fields(change.ref),
    }
    return truncate(change.message), fields(**values)


def run_line(event_type: str, audit_id: str, **more: Any) -> JsonObject:
    """`audit_started` / `audit_finished` (with `duration`) fields."""
    return fields(process="audit", audit_id=audit_id, event_type=event_type, semantic=True, **more)


def constraint_line(kind: str, name: str, action: str, total: int, audit_id: str) -> JsonObject:
    """`constraint_audited` fields (logConstraint): one per constraint with violations."""
    return fields(
        process="audit",
        audit_id=audit_id,
        event_type="constraint_audited",
        semantic=True,
        **constraint_fields(kind, name),
        constraint_action=action,
        constraint_status="enforced",
        constraint_violations=str(total),
    )
