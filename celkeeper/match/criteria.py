"""The match criteria and Gatekeeper's matching of one object (match.Matches and matchAny)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from celkeeper.model import JsonValue

WILDCARD = "*"
#: the criteria of a match, in the order Gatekeeper checks them (Match.mismatch names the one that failed)
CRITERIA = (
    "kinds",
    "scope",
    "namespaces",
    "excludedNamespaces",
    "labelSelector",
    "namespaceSelector",
    "name",
    "source",
)


class MatchError(Exception):
    """Matching could not be decided (Gatekeeper: `error matching the requested object: ...`)."""


# -- globs ---------------------------------------------------------------------------------------
def wildcard_matches(pattern: str, candidate: str) -> bool:
    """Gatekeeper's wildcard.Wildcard.Matches: exact, `prefix*`, `*suffix` or `*contains*`."""
    if len(pattern) >= 2 and pattern.startswith(WILDCARD) and pattern.endswith(WILDCARD):
        return pattern[1:-1] in candidate
    if pattern.startswith(WILDCARD):
        return candidate.endswith(pattern[1:])
    if pattern.endswith(WILDCARD):
        return candidate.startswith(pattern[:-1])
    return pattern == candidate


def wildcard_matches_generate_name(pattern: str, candidate: str) -> bool:
    """Gatekeeper's Wildcard.MatchesGenerateName: only globs ending in `*` match a generateName."""
    if len(pattern) >= 2 and pattern.startswith(WILDCARD) and pattern.endswith(WILDCARD):
        return pattern[1:-1] in candidate
    if pattern.endswith(WILDCARD):
        return candidate.startswith(pattern[:-1])
    return False


# -- label selectors -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: frozenset[str]

    def matches(self, labels: Mapping[str, JsonValue]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist


@dataclass(frozen=True)
class LabelSelector:
    """metav1.LabelSelector; an empty selector matches everything."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, JsonValue] | None) -> bool:
        labels = labels if isinstance(labels, dict) else {}
        return all(r.matches(labels) for r in self.requirements)


# -- the match ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class KindSelector:
    groups: frozenset[str] | None  # None: any group
    kinds: frozenset[str] | None  # None: any kind

    def matches(self, group: str, kind: str) -> bool:
        return (self.kinds is None or kind in self.kinds) and (self.groups is None or group in self.groups)


@dataclass(frozen=True)
class Target:
    """What matching reads from one object, extracted once per request (object or oldObject)."""

    group: str
    kind: str
    namespace: str  # metadata.namespace ("" when absent)
    name: str
    generate_name: str
    labels: Mapping[str, JsonValue]
    is_namespace: bool

    @classmethod
    def of(cls, obj: Mapping[str, JsonValue]) -> Target:
        group = str(obj.get("apiVersion") or "").rpartition("/")[0]
        kind = str(obj.get("kind") or "")
        meta = _meta(obj)
        labels = meta.get("labels")
        return cls(
            group=group,
            kind=kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            generate_name=str(meta.get("generateName") or ""),
            labels=labels if isinstance(labels, dict) else {},
            is_namespace=kind == "Namespace" and group == "",
        )


def targets_of(objects: tuple[JsonValue, ...]) -> tuple[Target, ...]:
    """The targets of the objects that are present (object and oldObject; None when absent)."""
    return tuple(Target.of(obj) for obj in objects if isinstance(obj, dict))


@dataclass(frozen=True)
class Match:
    kinds: tuple[KindSelector, ...] = ()
    scope: str | None = None
    namespaces: tuple[str, ...] | None = None
    excluded_namespaces: tuple[str, ...] | None = None
    processes: frozenset[str] | None = None  # None: excludedNamespaces applies to every process
    label_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    name: str | None = None
    source: str = "All"
    # whether matching may look at the object's Namespace (computed)
    needs_namespace: bool = field(init=False, compare=False)

    def __post_init__(self) -> None:
        needs = bool(
            self.scope in ("Cluster", "Namespaced")
            or self.namespaces
            or self.excluded_namespaces
            or self.namespace_selector is not None
        )
        object.__setattr__(self, "needs_namespace", needs)

    def index_keys(self) -> frozenset[tuple[str | None, str | None]]:
        """(group, kind) pairs this match can select; None stands for any group or any kind."""
        if not self.kinds:
            return frozenset({(None, None)})
        keys: set[tuple[str | None, str | None]] = set()
        for selector in self.kinds:
            groups: list[str | None] = list(selector.groups) if selector.groups is not None else [None]
            kinds: list[str | None] = list(selector.kinds) if selector.kinds is not None else [None]
            keys.update((g, k) for g in groups for k in kinds)
        return frozenset(keys)

    def matches_any(
        self,
        objects: tuple[Target | Mapping[str, JsonValue] | None, ...],
        namespace: Mapping[str, JsonValue] | None,
        *,
        process: str = "webhook",
        source: str = "Original",
    ) -> bool:
        """Whether any of the objects (object, oldObject) matches; MatchError when it cannot be told.

        `objects` may be prepared Targets (targets_of) or the objects themselves.
        """
        return not self.mismatches_any(objects, namespace, process=process, source=source)

    def mismatches_any(
        self,
        objects: tuple[Target | Mapping[str, JsonValue] | None, ...],
        namespace: Mapping[str, JsonValue] | None,
        *,
        process: str = "webhook",
        source: str = "Original",
    ) -> tuple[str, ...]:
        """() when any of the objects matches, else the criterion that excluded each object (one of
        CRITERIA, for object then oldObject); MatchError when it cannot be told."""
        present = [
            obj if isinstance(obj, Target) else Target.of(obj)
            for obj in objects
            if isinstance(obj, Target | dict)
        ]
        if not present:
            raise MatchError("invalid request object: neither object nor old object are defined")
        reasons = []
        for target in present:
            try:
                reason = self.mismatch(target, namespace, process=process, source=source)
            except MatchError as err:
                raise MatchError(
                    f"error matching the requested object: {target.name} :failed to run Match criteria: {err}"
                ) from None
            if reason is None:
                return ()
            reasons.append(reason)
        return tuple(reasons)

    def matches(
        self,
        target: Target,
        namespace: Mapping[str, JsonValue] | None,
        *,
        process: str,
        source: str,
    ) -> bool:
        """Gatekeeper's match.Matches for one object (raises MatchError with the bare reason)."""
        return self.mismatch(target, namespace, process=process, source=source) is None

    def mismatch(
        self,
        target: Target,
        namespace: Mapping[str, JsonValue] | None,
        *,
        process: str,
        source: str,
    ) -> str | None:
        """None when the object matches (Gatekeeper's match.Matches), else the first criterion that
        excludes it, in Gatekeeper's order (one of CRITERIA); raises MatchError with the bare reason."""
        if self.kinds and not any(s.matches(target.group, target.kind) for s in self.kinds):
            return "kinds"
        if self.needs_namespace:
            is_namespace = target.is_namespace
            if self.scope == "Cluster" or self.scope == "Namespaced":  # noqa: PLR1714
                has_namespace = target.namespace != "" or namespace is not None
                if self.scope == "Cluster" and not (is_namespace or not has_namespace):
                    return "scope"
                if self.scope == "Namespaced" and not (not is_namespace and has_namespace):
                    return "scope"
            cluster_scoped = not is_namespace and namespace is None and target.namespace == ""
            if (self.namespaces or self.excluded_namespaces) and not cluster_scoped:
                effective = self.effective_namespace(target, namespace)
                if self.namespaces and not any(wildcard_matches(p, effective) for p in self.namespaces):
                    return "namespaces"
                if (
                    self.excluded_namespaces
                    and self._excludes_for(process)
                    and any(wildcard_matches(p, effective) for p in self.excluded_namespaces)
                ):
                    return "excludedNamespaces"
        if self.label_selector is not None and not self.label_selector.matches(target.labels):
            return "labelSelector"
        if self.namespace_selector is not None and not (
            not target.is_namespace and namespace is None and target.namespace == ""
        ):
            if target.is_namespace:
                if not self.namespace_selector.matches(target.labels):
                    return "namespaceSelector"
            elif namespace is None:
                raise MatchError("namespace selector for namespace-scoped object but missing Namespace")
            elif not self.namespace_selector.matches(_meta(namespace).get("labels")):
                return "namespaceSelector"
        if self.name and not (
            wildcard_matches(self.name, target.name)
            or wildcard_matches_generate_name(self.name, target.generate_name)
        ):
            return "name"
        return None if self.source in ("All", source) else "source"

    @staticmethod
    def effective_namespace(target: Target, namespace: Mapping[str, JsonValue] | None) -> str:
        """The namespace namespaces/excludedNamespaces look at: a Namespace's own name, else the
        looked-up Namespace's name, else the object's metadata.namespace."""
        if target.is_namespace:
            return target.name
        if namespace is not None:
            return str(_meta(namespace).get("name") or "")
        return target.namespace

    def _excludes_for(self, process: str) -> bool:
        return self.processes is None or WILDCARD in self.processes or process in self.processes


def _meta(obj: Mapping[str, JsonValue] | None) -> Mapping[str, JsonValue]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}
