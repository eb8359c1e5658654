"""Synced cluster data as templates read it: the kinds a template declares, and the store's format.

A template reads synced data when it declares the kinds it needs in Gatekeeper's annotation
`metadata.gatekeeper.sh/requires-sync-data` (Gatekeeper's format: a JSON list of requirements, each a
list of clauses `{"groups": [...], "versions": [...], "kinds": [...]}`; every requirement must be met
by one of the kinds its clauses expand to). Gatekeeper only reads the annotation in `gator sync test`;
celkeeper also gives such a template - and only such a template - the variable `data`, shaped as
Gatekeeper's Rego `data.inventory` and restricted to the kinds it declares:

    data.inventory.cluster[<apiVersion>][<kind>][<name>]                 cluster-scoped objects
    data.inventory.namespace[<namespace>][<apiVersion>][<kind>][<name>]  namespaced objects

The store (a SQLite file the informer writes in WAL mode; engines open it read-only):

    meta(key, value)                     `format` = FORMAT
    kinds(id, api_version, kind)         every kind ever stored
    objects(kind_id, namespace, name, body)   body: the object's JSON; namespace "" when cluster-scoped

`SCHEMA` is the one definition; the cel-go engine's reader (celkeeper/native/go/k8scel/inventory.go)
and the cel-python engine's reader (celpython/inventory.py) read it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from celkeeper.model import JsonValue

#: Gatekeeper's annotation naming the kinds a template needs synced (cachemanager/parser)
SYNC_ANNOTATION = "metadata.gatekeeper.sh/requires-sync-data"
#: the variable a template that reads synced data gets
DATA_VARIABLE = "data"

FORMAT = "1"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kinds (id INTEGER PRIMARY KEY, api_version TEXT NOT NULL, "
    "kind TEXT NOT NULL, UNIQUE (api_version, kind))",
    "CREATE TABLE IF NOT EXISTS objects (kind_id INTEGER NOT NULL, namespace TEXT NOT NULL, "
    "name TEXT NOT NULL, body BLOB NOT NULL, PRIMARY KEY (kind_id, namespace, name)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS objects_by_namespace ON objects (namespace, kind_id)",
)


@dataclass(frozen=True, order=True)
class Gvk:
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version} {self.kind}"

    @classmethod
    def of(cls, api_version: str, kind: str) -> Gvk:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    @classmethod
    def parse(cls, text: str) -> Gvk:
        """The inverse of str(): `networking.k8s.io/v1 Ingress`."""
        api_version, _, kind = text.partition(" ")
        return cls.of(api_version, kind)


#: one requirement: any of these kinds meets it
Requirement = frozenset[Gvk]


class RequirementsError(ValueError):
    """The annotation is not Gatekeeper's requires-sync-data format."""


def parse_requirements(text: str) -> tuple[Requirement, ...]:
    """Gatekeeper's ReadSyncRequirements: the annotation's text (surrounding quotes and newlines are
    trimmed, as Gatekeeper trims them), decoded strictly; each requirement the set of kinds its clauses
    expand to (groups x versions x kinds). Raises RequirementsError."""
    trimmed = text.strip('\n"')
    try:
        doc = json.loads(trimmed)
    except ValueError as err:
        raise RequirementsError(f"not JSON: {err}") from err
    if not isinstance(doc, list):
        raise RequirementsError("must be a list of requirements (each a list of clauses)")
    out: list[Requirement] = []
    for i, requirement in enumerate(doc):
        if not isinstance(requirement, list):
            raise RequirementsError(f"requirement {i} must be a list of clauses")
        kinds: set[Gvk] = set()
        for j, clause in enumerate(requirement):
            if not isinstance(clause, dict):
                raise RequirementsError(f"requirement {i}, clause {j} must be a map")
            unknown = sorted(set(clause) - {"groups", "versions", "kinds"})
            if unknown:
                raise RequirementsError(f"requirement {i}, clause {j}: unknown field {unknown[0]!r}")
            lists = []
            for key in ("groups", "versions", "kinds"):
                value = clause.get(key) or []
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise RequirementsError(f"requirement {i}, clause {j}: {key} must be a list of strings")
                lists.append(value)
            kinds.update(Gvk(g, v, k) for g in lists[0] for v in lists[1] for k in lists[2])
        out.append(frozenset(kinds))
    return tuple(out)


def requirement_kinds(requirements: Iterable[Requirement]) -> tuple[Gvk, ...]:
    """Every kind the requirements name (what a template may read), sorted."""
    return tuple(sorted({gvk for requirement in requirements for gvk in requirement}))


def unmet(
    requirements: Iterable[Requirement], synced: Mapping[Gvk, bool] | frozenset[Gvk]
) -> tuple[Requirement, ...]:
    """The requirements none of whose kinds is synced."""
    return tuple(r for r in requirements if not any(synced_kind(synced, gvk) for gvk in r))


def synced_kind(synced: Mapping[Gvk, bool] | frozenset[Gvk], gvk: Gvk) -> bool:
    if isinstance(synced, Mapping):
        return bool(synced.get(gvk))
    return gvk in synced


def describe(requirement: Requirement) -> str:
    """`networking.k8s.io/v1 Ingress or extensions/v1beta1 Ingress`."""
    return " or ".join(str(g) for g in sorted(requirement))


@dataclass(frozen=True)
class Put:
    """A change to a store: the object is stored (added or replaced)."""

    object: Mapping[str, JsonValue]


@dataclass(frozen=True)
class Delete:
    """A change to a store: the object is removed."""

    object: Mapping[str, JsonValue]


Change = Put | Delete


def object_row(obj: Mapping[str, JsonValue]) -> tuple[Gvk, str, str] | None:
    """(kind, namespace, name) of an object as the store keys it; None without apiVersion, kind or
    name (Gatekeeper refuses such data)."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    meta = obj.get("metadata")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        return None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return None
    namespace = meta.get("namespace")
    return Gvk.of(api_version, kind), namespace if isinstance(namespace, str) else "", meta["name"]
