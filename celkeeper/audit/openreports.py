"""The audit's results as OpenReports (`openreports.io/v1alpha1` Report and ClusterReport): pure, no I/O.

    row = result_row(violation, template)          # one result: a violation (or an audit error)
    buckets = bucket_count(counts, max_results)    # how many reports a namespace's results take
    for piece in pieces(rows, bucket, buckets, max_results): report(namespace, piece, timestamps)

What a report holds (field names from github.com/openreports/reports-api v0.2.1,
apis/openreports.io/v1alpha1/report_types.go): one Report per namespace with violations (a ClusterReport
for cluster-scoped objects), `source: celkeeper`, a `summary` counting its results, and one result per
violation:
    policy      the constraint: `<kind>/<name>`; a Kubernetes admission policy's binding (the audit with
                its admission policies): `ValidatingAdmissionPolicy/<policy>`
    rule        its template; an admission policy's binding: the binding's name
    result      fail (enforcement action deny; a scoped constraint whose audit actions include deny),
                warn (warn, dryrun, or a scoped constraint without deny at the audit point),
                error (the object could not be evaluated for that constraint)
    message     the violation's message (at most MESSAGE_BYTES bytes)
    resources   the object: apiVersion, kind, namespace, name, uid
    timestamp   when the audit first found this result ({seconds, nanos}: the start of that run); kept
                while the result persists
    properties  enforcementAction (the constraint's), enforcementActions (scoped: those at the audit point;
                a binding's validationActions when more than one), binding (an admission policy's, as
                Kyverno's reports of these policies name it)

Bounded in size. A namespace's results fit one report up to `max_results` (MAX_RESULTS); beyond, they
are split by object: each object's results go to bucket `crc32(apiVersion/kind/name) mod B`, where B is
the smallest power of two that keeps every bucket within `max_results` (an object never straddles two
buckets, and a result stays in its bucket from run to run while B is unchanged, so one changed object
rewrites one report). Report `celkeeper-audit` when B is 1, else `celkeeper-audit-<bucket>`; a bucket
still over the bound (one object with more results than `max_results`) is cut in order into
`<name>-part<N>` pieces. Labels say the bucket and B (`celkeeper.io/report-bucket`,
`celkeeper.io/report-buckets`).

With `--reports policyreport`, the same reports as the `wgpolicyk8s.io/v1alpha2` PolicyReport and
ClusterPolicyReport they succeed (field names from Kyverno's api/policyreport/v1alpha2, which carries that
API): `source` then goes on each result (that version has none at the report level).

Written only when their content changes: each report carries the digest of its results without their
timestamps (annotation `celkeeper.io/results-digest`), so a run that finds the same results writes
nothing.
"""

from __future__ import annotations

import hashlib
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from celkeeper.admissionpolicy.documents import MUTATING_POLICY, VALIDATING_POLICY
from celkeeper.audit.results import ObjectRef, Violation
from celkeeper.model import Action, JsonObject

SOURCE = "celkeeper"
NAME = "celkeeper-audit"
MAX_RESULTS = 500  # results per report: with messages of MESSAGE_BYTES, well under etcd's 1.5 MiB
MESSAGE_BYTES = 1024
MAX_BUCKETS = 1 << 16
MANAGED_BY = "app.kubernetes.io/managed-by"
BUCKET_LABEL = "celkeeper.io/report-bucket"
BUCKETS_LABEL = "celkeeper.io/report-buckets"
DIGEST_ANNOTATION = "celkeeper.io/results-digest"
SELECTOR = f"{MANAGED_BY}={SOURCE}"  # the reports celkeeper writes (and deletes)

FAIL, WARN, ERROR = "fail", "warn", "error"
#: Kubernetes' admission policy kinds: a binding's result names its policy, the binding is the rule
ADMISSION_KINDS = frozenset({VALIDATING_POLICY, MUTATING_POLICY})


@dataclass(frozen=True)
class ReportApi:
    """Which reports: OpenReports, or the PolicyReports they succeed (the same results, other names)."""

    name: str  # as --reports names it
    group: str
    version: str
    kind: str  # a namespace's
    cluster_kind: str  # cluster-scoped objects'
    plural: str
    cluster_plural: str
    # wgpolicyk8s.io/v1alpha2 has no report-level source: each result names it
    source_in_results: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


OPENREPORTS = ReportApi(
    "openreports", "openreports.io", "v1alpha1", "Report", "ClusterReport", "reports", "clusterreports"
)
POLICYREPORTS = ReportApi(
    "policyreport",
    "wgpolicyk8s.io",
    "v1alpha2",
    "PolicyReport",
    "ClusterPolicyReport",
    "policyreports",
    "clusterpolicyreports",
    source_in_results=True,
)
APIS = {api.name: api for api in (OPENREPORTS, POLICYREPORTS)}


class ResultRow(NamedTuple):
    """One result of a report, as the audit collects it (plain strings: cheap to keep and to store)."""

    namespace: str  # "" for a cluster-scoped object (a ClusterReport)
    api_version: str
    kind: str
    name: str
    uid: str
    policy: str  # <constraint kind>/<constraint name>
    rule: str  # the template
    result: str  # fail, warn, error
    message: str
    action: str  # the constraint's enforcement action ("" for an error)
    actions: str  # a scoped constraint's actions at the audit point, comma-separated

    @property
    def key(self) -> tuple[str, ...]:
        """What a result is, whatever its timestamp (results with equal keys are the same result)."""
        return tuple(self)

    @property
    def order(self) -> tuple[str, ...]:
        """The order of results in a report: by object, then policy and message."""
        return (self.api_version, self.kind, self.name, self.uid, self.policy, self.message, self.result)


def shortened(message: str, size: int = MESSAGE_BYTES) -> str:
    """At most `size` bytes of UTF-8, cut between characters, the last three `...` when cut."""
    data = message.encode()
    if len(data) <= size:
        return message
    return data[: max(0, size - 3)].decode("utf-8", errors="ignore") + "..."


def result_of(action: str, actions: Sequence[str]) -> str:
    """fail for what the audit would deny, warn for the rest (warn, dryrun)."""
    if action == Action.DENY.value or (action == Action.SCOPED.value and Action.DENY.value in actions):
        return FAIL
    return WARN


def policy_name(kind: str, name: str) -> str:
    return f"{kind}/{name}"


def result_row(violation: Violation, template: str) -> ResultRow:
    """A violation's result: of a constraint, `<kind>/<name>` and its template; of an admission policy's
    binding (the constraint `<policy kind>/<policy>/<binding>`), `<policy kind>/<policy>` and the binding."""
    ref = violation.ref
    kind, name = violation.constraint
    if kind in ADMISSION_KINDS:
        name, _, template = name.partition("/")
    return ResultRow(
        namespace=ref.namespace,
        api_version=ref.api_version,
        kind=ref.kind,
        name=ref.name,
        uid=ref.uid,
        policy=policy_name(kind, name),
        rule=template,
        result=result_of(violation.enforcement_action, violation.enforcement_actions),
        message=shortened(violation.message),
        action=violation.enforcement_action,
        actions=",".join(violation.enforcement_actions),
    )


def error_row(constraint: tuple[str, str], ref: ObjectRef, message: str, template: str) -> ResultRow | None:
    """An object that could not be evaluated for a constraint (None for a whole kind: its list failed,
    which only the constraint's status reports); an admission policy's binding named as `result_row`
    names it."""
    if not ref.name:
        return None
    kind, name = constraint
    if kind in ADMISSION_KINDS:
        name, _, template = name.partition("/")
    return ResultRow(
        namespace=ref.namespace,
        api_version=ref.api_version,
        kind=ref.kind,
        name=ref.name,
        uid=ref.uid,
        policy=policy_name(kind, name),
        rule=template,
        result=ERROR,
        message=shortened(message),
        action="",
        actions="",
    )


def object_hash(api_version: str, kind: str, name: str) -> int:
    """The object's place among buckets (stable across runs and processes)."""
    return zlib.crc32(f"{api_version}/{kind}/{name}".encode())


def row_hash(row: ResultRow) -> int:
    return object_hash(row.api_version, row.kind, row.name)


def bucket_count(counts: Mapping[int, int], max_results: int = MAX_RESULTS) -> int:
    """B: the smallest power of two for which every bucket (object hash mod B) holds at most
    `max_results` results, given the results per object hash (`counts`). A bucket that one object fills
    alone cannot be split by object: B stops growing when splitting no longer helps."""
    limit = max(1, max_results)
    if sum(counts.values()) <= limit:
        return 1
    buckets = 2
    while buckets < MAX_BUCKETS:
        sizes: Counter[int] = Counter()
        objects: Counter[int] = Counter()
        for value, n in counts.items():
            sizes[value & (buckets - 1)] += n
            objects[value & (buckets - 1)] += 1
        if all(size <= limit or objects[b] == 1 for b, size in sizes.items()):
            return buckets
        buckets *= 2
    return buckets


def report_name(bucket: int, buckets: int, part: int = 0) -> str:
    name = NAME if buckets == 1 else f"{NAME}-{bucket}"
    return f"{name}-part{part}" if part else name


@dataclass(frozen=True)
class Piece:
    """The results of one report: its name, its bucket among `buckets`, its rows (in report order)."""

    name: str
    bucket: int
    buckets: int
    rows: tuple[ResultRow, ...]

    @property
    def digest(self) -> str:
        return results_digest(self.rows, self.bucket, self.buckets)


def pieces(
    rows: Iterable[ResultRow], bucket: int, buckets: int, max_results: int = MAX_RESULTS
) -> list[Piece]:
    """One bucket's rows as reports of at most `max_results` results (in order; more than one only when
    one object has more results than that)."""
    ordered = sorted(rows, key=lambda r: r.order)
    limit = max(1, max_results)
    chunks = [ordered[i : i + limit] for i in range(0, len(ordered), limit)] or [[]]
    return [
        Piece(report_name(bucket, buckets, part), bucket, buckets, tuple(chunk))
        for part, chunk in enumerate(chunks)
        if chunk
    ]


def split(rows: Iterable[ResultRow], max_results: int = MAX_RESULTS) -> list[Piece]:
    """One namespace's rows as its reports (everything in memory: the offline audit)."""
    listed = list(rows)
    counts = Counter(row_hash(r) for r in listed)
    buckets = bucket_count(counts, max_results)
    grouped: dict[int, list[ResultRow]] = {}
    for row in listed:
        grouped.setdefault(row_hash(row) & (buckets - 1), []).append(row)
    return [p for bucket in sorted(grouped) for p in pieces(grouped[bucket], bucket, buckets, max_results)]


def results_digest(rows: Iterable[ResultRow], bucket: int, buckets: int) -> str:
    """The digest of a report's content without its timestamps."""
    hasher = hashlib.sha256(f"{bucket}/{buckets}\n".encode())
    for row in rows:
        hasher.update("\x1f".join(row).encode())
        hasher.update(b"\x1e")
    return hasher.hexdigest()[:32]


def summary(rows: Iterable[ResultRow]) -> dict[str, int]:
    counts = Counter(r.result for r in rows)
    return {"pass": 0, "fail": counts[FAIL], "warn": counts[WARN], "error": counts[ERROR], "skip": 0}


def result_entry(row: ResultRow, seconds: int, api: ReportApi = OPENREPORTS) -> JsonObject:
    resource: JsonObject = {"apiVersion": row.api_version, "kind": row.kind}
    if row.namespace:
        resource["namespace"] = row.namespace
    resource["name"] = row.name
    if row.uid:
        resource["uid"] = row.uid
    properties: dict[str, str] = {}
    if row.action:
        properties["enforcementAction"] = row.action
    if row.actions:
        properties["enforcementActions"] = row.actions
    if row.policy.partition("/")[0] in ADMISSION_KINDS:
        properties["binding"] = row.rule  # where Kyverno's reports of these policies name it
    entry: JsonObject = {"source": SOURCE} if api.source_in_results else {}
    entry |= {
        "policy": row.policy,
        "rule": row.rule,
        "result": row.result,
        "message": row.message,
        "timestamp": {"seconds": seconds, "nanos": 0},
        "resources": [resource],
    }
    if properties:
        entry["properties"] = properties
    return entry


def report(
    namespace: str,
    piece: Piece,
    first_seen: Mapping[tuple[str, ...], int],
    now: int,
    api: ReportApi = OPENREPORTS,
) -> JsonObject:
    """The Report (ClusterReport when `namespace` is "") of one piece; each result's timestamp is when it
    was first seen (`first_seen`, by ResultRow.key), else `now` (Unix seconds). `api`: OpenReports, or
    wgpolicyk8s.io PolicyReports."""
    metadata: JsonObject = {
        "name": piece.name,
        "labels": {
            MANAGED_BY: SOURCE,
            BUCKET_LABEL: str(piece.bucket),
            BUCKETS_LABEL: str(piece.buckets),
        },
        "annotations": {DIGEST_ANNOTATION: piece.digest},
    }
    if namespace:
        metadata["namespace"] = namespace
    body: JsonObject = {
        "apiVersion": api.api_version,
        "kind": api.kind if namespace else api.cluster_kind,
        "metadata": metadata,
    }
    if not api.source_in_results:
        body["source"] = SOURCE
    body["summary"] = summary(piece.rows)
    body["results"] = [result_entry(r, first_seen.get(r.key, now), api) for r in piece.rows]
    return body


def rows_of(stored: Mapping[str, object]) -> Iterator[tuple[tuple[str, ...], int]]:
    """(key, timestamp seconds) of each result of a stored report celkeeper wrote (others are skipped)."""
    metadata = stored.get("metadata")
    namespace = ""
    if isinstance(metadata, Mapping):
        namespace = str(metadata.get("namespace") or "")
    results = stored.get("results")
    if not isinstance(results, list):
        return
    for entry in results:
        if not isinstance(entry, Mapping):
            continue
        resources = entry.get("resources")
        resource = resources[0] if isinstance(resources, list) and resources else None
        timestamp = entry.get("timestamp")
        if not isinstance(resource, Mapping) or not isinstance(timestamp, Mapping):
            continue
        properties = entry.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        seconds = timestamp.get("seconds")
        if not isinstance(seconds, int):
            continue
        row = ResultRow(
            namespace=namespace,
            api_version=str(resource.get("apiVersion") or ""),
            kind=str(resource.get("kind") or ""),
            name=str(resource.get("name") or ""),
            uid=str(resource.get("uid") or ""),
            policy=str(entry.get("policy") or ""),
            rule=str(entry.get("rule") or ""),
            result=str(entry.get("result") or ""),
            message=str(entry.get("message") or ""),
            action=str(properties.get("enforcementAction") or ""),
            actions=str(properties.get("enforcementActions") or ""),
        )
        yield row.key, seconds


def reports(
    rows: Iterable[ResultRow], now: int, max_results: int = MAX_RESULTS, api: ReportApi = OPENREPORTS
) -> list[JsonObject]:
    """Every report of these rows, all timestamps `now` (the offline audit: `-o openreports`); the
    ClusterReports first, then the Reports by namespace."""
    by_namespace: dict[str, list[ResultRow]] = {}
    for row in rows:
        by_namespace.setdefault(row.namespace, []).append(row)
    return [
        report(namespace, piece, {}, now, api)
        for namespace in sorted(by_namespace)
        for piece in split(by_namespace[namespace], max_results)
    ]
