"""Writing a run's results on each constraint's status, once per run per constraint.

The audit owns these fields of a constraint's status and replaces all of them at each write (what the
webhook pods aggregate there, `byPod` and `enforced`, is kept as stored):
    auditTimestamp     the run's start, RFC 3339 (UTC, seconds): Gatekeeper's audit id
    totalViolations    every violation found
    violations         at most --constraint-violations-limit of them (absent when there are none)
    totalAuditErrors   objects (or kinds) that could not be evaluated for it (absent when none): celkeeper's
    auditErrors        at most the same limit of them, each naming the object and why (absent when none)
    reports            where every violation is (when the run wrote its OpenReports): the reports'
                       apiVersion, kinds and label selector, and this constraint's `policy` in them
Gatekeeper writes every constraint of every kind at each run, with 0 when nothing violates it; so does
celkeeper. The write is a status-subresource update of the stored object: a conflict (a webhook pod
wrote its byPod meanwhile) reads it again and writes again; a constraint deleted meanwhile is not
written (404), nor is one deleted and made again under the same name (another uid: its results belong
to the old one; the next run audits the new one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from celkeeper.audit.openreports import OPENREPORTS, SELECTOR, ReportApi, policy_name
from celkeeper.audit.results import ConstraintKey, RunResults
from celkeeper.kube import ApiError, Client, Resource, update_status
from celkeeper.kube.resources import name_of, uid_of
from celkeeper.model import JsonObject, JsonValue

log = logging.getLogger("celkeeper.audit")

AUDIT_FIELDS = (
    "auditTimestamp",
    "totalViolations",
    "violations",
    "totalAuditErrors",
    "auditErrors",
    "reports",
)


def reports_field(key: ConstraintKey, api: ReportApi = OPENREPORTS) -> JsonObject:
    """status.reports: where the complete list of a constraint's violations is."""
    return {
        "apiVersion": api.api_version,
        "kinds": [api.kind, api.cluster_kind],
        "labelSelector": SELECTOR,
        "policy": policy_name(*key),
    }


def audit_id(seconds: float) -> str:
    """Gatekeeper's audit id and auditTimestamp: the run's start, RFC 3339 in UTC to the second."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_audit_status(stored: Mapping[str, JsonValue], fields: Mapping[str, JsonValue]) -> JsonObject:
    """The body of the status write: the object as stored (its resourceVersion included), its status's
    audit fields replaced by `fields` (those not in `fields` removed), the others kept."""
    status = stored.get("status")
    kept = {k: v for k, v in status.items() if k not in AUDIT_FIELDS} if isinstance(status, Mapping) else {}
    return {**stored, "status": {**kept, **fields}}


@dataclass(frozen=True)
class Audited:
    """A constraint that existed when the run started: where it is and which incarnation it was."""

    resource: Resource
    name: str
    uid: str

    @property
    def key(self) -> ConstraintKey:
        return (self.resource.kind, self.name)

    @classmethod
    def of(cls, resource: Resource, obj: Mapping[str, JsonValue]) -> Audited:
        return cls(resource, name_of(obj), uid_of(obj))


@dataclass(frozen=True)
class Written:
    written: int
    gone: int  # deleted (or made again) during the run: not written
    failed: tuple[str, ...]


def write_results(
    client: Client,
    constraints: Iterable[tuple[Audited, Mapping[str, JsonValue] | None]],
    results: RunResults,
    timestamp: str,
    *,
    reports: ReportApi | None = None,
) -> Written:
    """Write the run's results on each constraint (given with its latest watched copy, if any);
    `reports`: the reports the run wrote (the status says where)."""
    written = gone = 0
    failed: list[str] = []
    for audited, stored in constraints:
        fields: dict[str, Any] = {"auditTimestamp": timestamp, **results.status_fields(audited.key)}
        if reports is not None:
            fields["reports"] = reports_field(audited.key, reports)

        def change(current: Mapping[str, JsonValue], audited: Audited = audited, fields: Any = fields) -> Any:
            if audited.uid and uid_of(current) != audited.uid:
                return None
            return with_audit_status(current, fields)

        latest = stored if stored is None or not audited.uid or uid_of(stored) == audited.uid else None
        try:  # (a watched copy of another incarnation is not trusted: the object is read to be sure)
            if update_status(client, audited.resource, audited.name, change, stored=latest):
                written += 1
            else:
                gone += 1
                log.info("not writing the audit of %s %s: it was deleted during the run", *audited.key)
        except ApiError as err:
            failed.append(f"{audited.key[0]} {audited.key[1]}: {err}")
            log.error("could not write the audit results of %s %s: %s", *audited.key, err)
    return Written(written, gone, tuple(failed))
