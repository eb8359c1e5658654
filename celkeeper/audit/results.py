"""What one audit run found, gathered the way Gatekeeper's audit gathers it (pure, no I/O).

    results = RunResults(limit=20)
    results.add(violation)                   # per violation: totals, the per-action totals, the capped list
    results.add_error(key, ref, message)     # an object (or a whole kind) that could not be evaluated
    results.counted(group, version, kind)    # an object audited
    results.status_fields(key)               # totalViolations, violations[] (+ audit errors) for a constraint

Semantics of gatekeeper pkg/audit/manager.go (v3.23.1):
- every violation counts in its constraint's `totalViolations` and in the total of its enforcement
  action (`deny`, `dryrun`, `warn`, or `scoped` for a scoped constraint, whose actions at the audit
  point go in `enforcementActions`);
- messages longer than 256 bytes are cut to 253 bytes plus `...` (truncateString, msgSize);
- a constraint keeps at most `limit` violations: the smallest in the order (group, version, kind,
  namespace, name, message, enforcementAction), listed largest first (LimitQueue is a max-heap that
  drops its largest; updateConstraintStatus pops it) - so the status of a constraint violated by
  pods a..z with the default limit lists t, s, ..., a.
Memory is bounded by the number of constraints times `limit`, whatever the number of objects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, NotRequired, TypedDict, TypeVar

from celkeeper.model import Action, JsonValue

MESSAGE_BYTES = 256  # Gatekeeper's msgSize
DEFAULT_LIMIT = 20  # --constraint-violations-limit
# Gatekeeper's util.KnownEnforcementActions: the violations gauge reports each, 0 when none
KNOWN_ACTIONS = ("deny", "dryrun", "warn", "scoped", "unrecognized")


def truncate(message: str, size: int = MESSAGE_BYTES) -> str:
    """Gatekeeper's truncateString on the UTF-8 bytes: at most `size` bytes, the last 3 being `...`.

    Go cuts bytes; a character cut in two becomes one U+FFFD per remaining byte (what Go's JSON encoder
    writes for invalid UTF-8)."""
    data = message.encode()
    if len(data) <= size:
        return message
    cut = data[: size - 3 if size > 3 else size]
    text = cut.decode("utf-8", errors="ignore")
    return text + "\ufffd" * (len(cut) - len(text.encode())) + "..."


@dataclass(frozen=True)
class ObjectRef:
    """The audited object, as a violation names it."""

    group: str
    version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    resource_version: str = ""

    @classmethod
    def of(cls, obj: JsonValue) -> ObjectRef:
        group, version, kind = cls.kind_of(obj)
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        return cls(
            group=group,
            version=version,
            kind=kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
        )

    @staticmethod
    def kind_of(obj: JsonValue) -> tuple[str, str, str]:
        """The object's (group, version, kind), as `of` names them (without making a reference)."""
        group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
        return group, version, str(obj.get("kind") or "")

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.api_version}/{self.kind} {where}"


ConstraintKey = tuple[str, str]  # (constraint kind, constraint name)


@dataclass(frozen=True)
class Violation:
    constraint: ConstraintKey
    enforcement_action: str  # the constraint's own: deny, dryrun, warn or scoped
    enforcement_actions: tuple[str, ...]  # scoped: the actions at the audit point; else ()
    message: str  # as evaluated (truncated where it is recorded)
    ref: ObjectRef
    labels: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def denies(self) -> bool:
        return Action.DENY.value in (self.enforcement_action, *self.enforcement_actions)


class AuditError(TypedDict):
    """One entry of status.auditErrors: an object a constraint could not be evaluated on."""

    group: str
    version: str
    kind: str
    name: str
    namespace: NotRequired[str]  # left out when empty (omitempty)
    message: str


class StatusViolation(AuditError):
    """One entry of status.violations (Gatekeeper's StatusViolation): the object and message, and the
    action."""

    enforcementAction: str
    enforcementActions: NotRequired[list[str]]  # scoped: the actions at the audit point


class AuditStatus(TypedDict):
    """The audit's fields of a constraint's status for one run (those absent are removed)."""

    totalViolations: int
    violations: NotRequired[list[StatusViolation]]
    totalAuditErrors: NotRequired[int]
    auditErrors: NotRequired[list[AuditError]]


def _violation_order(entry: StatusViolation) -> tuple[str, ...]:
    return (*_error_order(entry), entry["enforcementAction"])


def _error_order(entry: AuditError | StatusViolation) -> tuple[str, ...]:
    return (
        entry["group"],
        entry["version"],
        entry["kind"],
        entry.get("namespace", ""),
        entry["name"],
        entry["message"],
    )


_Entry = TypeVar("_Entry", AuditError, StatusViolation)


class Capped(Generic[_Entry]):
    """The `limit` smallest entries in `order` (status violations or audit errors), with amortised
    O(log limit) insertion."""

    def __init__(self, limit: int, order: Callable[[_Entry], tuple[str, ...]]) -> None:
        self.limit = max(0, limit)
        self._order: Callable[[_Entry], tuple[str, ...]] = order
        self._entries: list[_Entry] = []

    def push(self, entry: _Entry) -> None:
        if not self.limit:
            return
        self._entries.append(entry)
        if len(self._entries) >= 2 * self.limit + 16:
            self._trim()

    def _trim(self) -> None:
        self._entries.sort(key=self._order)
        del self._entries[self.limit :]

    def largest_first(self) -> list[_Entry]:
        self._trim()
        return list(reversed(self._entries))


class _Namespace(TypedDict, total=False):
    namespace: str


class _Actions(TypedDict, total=False):
    enforcementActions: list[str]


def status_violation(violation: Violation) -> StatusViolation:
    """One entry of status.violations (Gatekeeper's StatusViolation; namespace and enforcementActions
    left out when empty, as `omitempty` does), its keys in Gatekeeper's order."""
    actions: _Actions = (
        {"enforcementActions": list(violation.enforcement_actions)} if violation.enforcement_actions else {}
    )
    return {
        **error_entry(violation.ref, violation.message),
        "enforcementAction": violation.enforcement_action,
        **actions,
    }


def error_entry(ref: ObjectRef, message: str) -> AuditError:
    """One entry of status.auditErrors (namespace left out when empty), its keys in Gatekeeper's order."""
    namespace: _Namespace = {"namespace": ref.namespace} if ref.namespace else {}
    return {
        "group": ref.group,
        "version": ref.version,
        "kind": ref.kind,
        "name": ref.name,
        **namespace,
        "message": truncate(message),
    }


class ConstraintResults:
    def __init__(self, limit: int) -> None:
        self.total = 0
        self.violations = Capped[StatusViolation](limit, _violation_order)
        self.errors = 0
        self.error_entries = Capped[AuditError](limit, _error_order)
        self.action = ""  # the enforcement action of its violations


class RunResults:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.constraints: dict[ConstraintKey, ConstraintResults] = {}
        self.by_action: dict[str, int] = dict.fromkeys(KNOWN_ACTIONS, 0)
        self.objects: Counter[tuple[str, str, str]] = Counter()  # (group, version, kind) -> audited
        self.list_errors: dict[tuple[str, str, str], str] = {}  # kinds whose list failed -> why
        self.discovery_errors: list[str] = []  # API group versions that could not be discovered

    def _of(self, key: ConstraintKey) -> ConstraintResults:
        found = self.constraints.get(key)
        if found is None:
            found = self.constraints[key] = ConstraintResults(self.limit)
        return found

    def add(self, violation: Violation) -> None:
        results = self._of(violation.constraint)
        results.total += 1
        results.action = violation.enforcement_action
        action = (
            violation.enforcement_action
            if violation.enforcement_action in self.by_action
            else ("unrecognized")
        )
        self.by_action[action] += 1
        results.violations.push(status_violation(violation))

    def add_error(self, key: ConstraintKey, ref: ObjectRef, message: str) -> None:
        results = self._of(key)
        results.errors += 1
        results.error_entries.push(error_entry(ref, message))

    def counted(self, group: str, version: str, kind: str, objects: int = 1) -> None:
        self.objects[(group, version, kind)] += objects

    @property
    def total(self) -> int:
        return sum(r.total for r in self.constraints.values())

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.constraints.values())

    def status_fields(self, key: ConstraintKey) -> AuditStatus:
        """The audit's fields of a constraint's status for this run (absent ones are to be removed):
        totalViolations always, violations when there are any, auditErrors/totalAuditErrors likewise."""
        results = self.constraints.get(key)
        fields: AuditStatus = {"totalViolations": results.total if results else 0}
        if results is None:
            return fields
        violations = results.violations.largest_first()
        if violations:
            fields["violations"] = violations
        if results.errors:
            fields["totalAuditErrors"] = results.errors
            fields["auditErrors"] = results.error_entries.largest_first()
        return fields
