"""Writing a run's OpenReports (or PolicyReports): create what is new, update what changed, delete what
is gone, nothing else.

    written = write_reports(client, rows, now=int(started))

After each complete run (after the constraint statuses), once per run, by the audit singleton:
1. the reports celkeeper wrote are listed (label `app.kubernetes.io/managed-by=celkeeper`, metadata only,
   in pages): their names, uids, resourceVersions, buckets and content digests;
2. per namespace with results or with stored reports, the desired reports (audit.openreports) are made
   one at a time from the run's rows (audit.reportrows), so memory holds one report, never them all;
3. a report whose digest is the stored one is not written (a run finding the same results writes
   nothing); a changed one is replaced (the stored resourceVersion: a concurrent change is a conflict,
   re-read); a new one is created; stored reports no longer desired (their namespace's violations gone,
   or fewer buckets) are deleted.
A result's timestamp is when it was first found: a report being rewritten takes its results' timestamps
from the stored reports that could have held them (the same bucket under the old and new bucket count).

celkeeper writes, updates and deletes only reports labelled as its own (RBAC cannot tell them apart: a
Report of the same name someone else made is left alone and reported). Without the CRDs (not installed)
nothing is written and a warning is logged once per run; CRDs just installed, whose storage answers 429
for a moment, are waited for a few seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from celkeeper.audit.openreports import (
    BUCKET_LABEL,
    BUCKETS_LABEL,
    DIGEST_ANNOTATION,
    MANAGED_BY,
    MAX_RESULTS,
    OPENREPORTS,
    SELECTOR,
    SOURCE,
    Piece,
    ReportApi,
    bucket_count,
    pieces,
    report,
    rows_of,
)
from celkeeper.audit.reportrows import ReportRows
from celkeeper.kube import ApiError, Client, Resource, delete_if_present, pages, write_desired
from celkeeper.kube.compare import with_resource_version
from celkeeper.kube.resources import meta

log = logging.getLogger("celkeeper.audit")

LIST_CHUNK = 100  # stored reports per list request (metadata only)
STORAGE_WAITS = (0.5, 1.0, 2.0, 4.0)  # seconds between lists answered 429 (CRDs just installed)


def collection(api: ReportApi, namespace: str | None, *, listing: bool = False) -> Resource:
    """Where a namespace's reports are ("": the cluster-scoped reports; None: every namespace's). With
    `listing`: celkeeper's only, metadata only."""
    selector = SELECTOR if listing else ""
    if namespace == "":
        return Resource(
            api.group,
            api.version,
            api.cluster_plural,
            api.cluster_kind,
            label_selector=selector,
            metadata_only=listing,
        )
    return Resource(
        api.group,
        api.version,
        api.plural,
        api.kind,
        namespace=namespace,
        label_selector=selector,
        metadata_only=listing,
    )


@dataclass(frozen=True)
class Stored:
    """A report celkeeper wrote, as listed (metadata only)."""

    name: str
    uid: str
    resource_version: str
    digest: str
    bucket: int
    buckets: int

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Stored:
        metadata = meta(obj)
        labels = metadata.get("labels") or {}
        annotations = metadata.get("annotations") or {}
        return cls(
            name=str(metadata.get("name") or ""),
            uid=str(metadata.get("uid") or ""),
            resource_version=str(metadata.get("resourceVersion") or ""),
            digest=str(annotations.get(DIGEST_ANNOTATION) or ""),
            bucket=_int(labels.get(BUCKET_LABEL), 0),
            buckets=_int(labels.get(BUCKETS_LABEL), 1),
        )

    def as_object(self, namespace: str) -> dict[str, Any]:
        """Enough of the stored object for write_desired (ownership, resourceVersion)."""
        metadata: dict[str, Any] = {
            "name": self.name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
            "labels": {MANAGED_BY: SOURCE},
        }
        if namespace:
            metadata["namespace"] = namespace
        return {"metadata": metadata}

    def may_hold(self, piece: Piece) -> bool:
        """Whether this report's bucket can have held objects of the piece's bucket (the same object
        hash modulo the smaller of the two bucket counts)."""
        common = min(self.buckets, piece.buckets)
        return (self.bucket & (common - 1)) == (piece.bucket & (common - 1))


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


@dataclass
class ReportsWritten:
    installed: bool = True  # the CRDs are served
    created: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: list[str] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return self.created + self.updated + self.deleted

    def counts(self) -> dict[str, int]:
        """By operation: created, updated, deleted, unchanged, failed."""
        return {
            "created": self.created,
            "updated": self.updated,
            "deleted": self.deleted,
            "unchanged": self.unchanged,
            "failed": len(self.failed),
        }


def ours(obj: Mapping[str, Any]) -> bool:
    labels = meta(obj).get("labels")
    return isinstance(labels, Mapping) and labels.get(MANAGED_BY) == SOURCE


def stored_reports(
    client: Client, api: ReportApi = OPENREPORTS, chunk: int = LIST_CHUNK
) -> dict[str, dict[str, Stored]] | None:
    """celkeeper's stored reports by namespace ("": cluster-scoped) and name; None when the CRDs are not
    installed. Raises ApiError when a list fails otherwise."""
    found: dict[str, dict[str, Stored]] = {}
    for listed in (collection(api, None, listing=True), collection(api, "", listing=True)):
        try:
            for page in pages(client, listed, chunk):
                for obj in page.items:
                    namespace = str(meta(obj).get("namespace") or "")
                    stored = Stored.of(obj)
                    found.setdefault(namespace, {})[stored.name] = stored
        except ApiError as err:
            if err.not_found:
                return None
            raise
    return found


def _stored_reports_when_served(
    client: Client, api: ReportApi, sleep: Callable[[float], None]
) -> dict[str, dict[str, Stored]] | None:
    """stored_reports, waiting a little for CRDs just installed: their storage answers 429 (`storage is
    (re)initializing`) for a moment after they are established."""
    for delay in STORAGE_WAITS:
        try:
            return stored_reports(client, api)
        except ApiError as err:
            if err.status != 429:
                raise
            log.info("the %s are not served yet (%s): listing again in %.1f s", api.kind, err, delay)
            sleep(delay)
    return stored_reports(client, api)


def write_reports(
    client: Client,
    rows: ReportRows,
    now: int,
    max_results: int = MAX_RESULTS,
    *,
    api: ReportApi = OPENREPORTS,
    sleep: Callable[[float], None] = time.sleep,
) -> ReportsWritten:
    """Make the stored reports say what `rows` hold (results first seen now get `now`, Unix seconds)."""
    out = ReportsWritten()
    try:
        stored = _stored_reports_when_served(client, api, sleep)
    except ApiError as err:
        out.failed.append(f"listing the reports: {err}")
        log.error("could not list the %ss: %s (no report written this run)", api.kind, err)
        return out
    if stored is None:
        out.installed = False
        log.warning(
            "the %s CRDs (%s.%s, %s.%s) are not installed: no reports written",
            api.kind,
            api.plural,
            api.group,
            api.cluster_plural,
            api.group,
        )
        return out
    for namespace in sorted(set(rows.namespaces()) | set(stored)):
        try:
            _write_namespace(
                client, rows, namespace, stored.get(namespace, {}), out, now=now, limit=max_results, api=api
            )
        except ApiError as err:
            where = f"namespace {namespace}" if namespace else "cluster-scoped objects"
            out.failed.append(f"{where}: {err}")
            log.error("could not write the reports of %s: %s", where, err)
    return out


def _write_namespace(
    client: Client,
    rows: ReportRows,
    namespace: str,
    stored: Mapping[str, Stored],
    out: ReportsWritten,
    *,
    now: int,
    limit: int,
    api: ReportApi,
) -> None:
    resource = collection(api, namespace)
    desired: set[str] = set()
    counts = rows.counts(namespace)
    if counts:
        buckets = bucket_count(counts, limit)
        for bucket in sorted({h & (buckets - 1) for h in counts}):
            for piece in pieces(rows.bucket(namespace, buckets, bucket), bucket, buckets, limit):
                desired.add(piece.name)
                old = stored.get(piece.name)
                if old is not None and old.digest == piece.digest:
                    out.unchanged += 1
                    continue
                first_seen = _first_seen(client, resource, piece, stored)
                body = report(namespace, piece, first_seen, now, api)
                outcome = write_desired(
                    client,
                    resource,
                    body,
                    old.as_object(namespace) if old is not None else None,
                    current=_same_digest,
                    update_body=with_resource_version,
                    owned=ours,
                )
                if outcome == "created":
                    out.created += 1
                elif outcome == "updated":
                    out.updated += 1
                else:
                    out.unchanged += 1
    for name, old in sorted(stored.items()):
        if name not in desired and delete_if_present(client, resource, name, old.uid):
            out.deleted += 1


def _same_digest(stored: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    if stored is None or not ours(stored):
        return False
    digest = (meta(stored).get("annotations") or {}).get(DIGEST_ANNOTATION)
    return bool(digest) and digest == (meta(desired).get("annotations") or {}).get(DIGEST_ANNOTATION)


def _first_seen(
    client: Client, resource: Resource, piece: Piece, stored: Mapping[str, Stored]
) -> dict[tuple[str, ...], int]:
    """When each of the piece's results was first found, from the stored reports that may hold them."""
    wanted = {row.key for row in piece.rows}
    found: dict[tuple[str, ...], int] = {}
    for old in stored.values():
        if not old.may_hold(piece):
            continue
        try:
            obj = client.get(resource, old.name)
        except ApiError as err:
            if err.not_found:
                continue
            raise
        if not ours(obj):
            continue
        for key, seconds in rows_of(obj):
            if key in wanted and (key not in found or seconds < found[key]):
                found[key] = seconds
    return found
