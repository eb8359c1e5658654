"""The sync configuration: which kinds to cache for templates that read synced data.

Read from, as Gatekeeper reads them (the union of every source):
- Gatekeeper's `Config` (config.gatekeeper.sh/v1alpha1) named `config` in the pods' namespace:
  `spec.sync.syncOnly` [{group, version, kind}], and `spec.match` entries whose `processes` name
  `sync` or `*`: their `excludedNamespaces` (exact names, or prefixes ending in `*`) are not synced;
- Gatekeeper's `SyncSet` (syncset.gatekeeper.sh/v1alpha1, cluster-scoped): `spec.gvks`;
- celkeeper's `SyncSet` (syncset.celkeeper.io/v1alpha1): the same, in celkeeper's group (crds/).

Pure: objects in, a SyncConfig out.

celkeeper's (celkeeper.incluster): Gatekeeper's and celkeeper's configuration objects (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from celkeeper.cel.inventory import Gvk
from celkeeper.crds import names
from celkeeper.kube.resources import Resource, meta, name_of


def gatekeeper_configs(namespace: str) -> Resource:
    return Resource(
        names.GATEKEEPER_CONFIG_GROUP,
        names.GATEKEEPER_CONFIG_VERSION,
        "configs",
        names.GATEKEEPER_CONFIG_KIND,
        namespace=namespace,
    )


GATEKEEPER_SYNCSETS = Resource(names.GATEKEEPER_SYNCSET_GROUP, "v1alpha1", "syncsets", "SyncSet")
SYNCSETS = Resource(names.SYNCSET_GROUP, names.SYNCSET_VERSION, "syncsets", names.SYNCSET_KIND)


@dataclass(frozen=True)
class SyncConfig:
    kinds: Mapping[Gvk, tuple[str, ...]] = field(default_factory=dict)  # kind -> what asks for it
    excluded_namespaces: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()  # entries that name no valid kind, one line each

    def excludes(self, namespace: str) -> bool:
        return namespace_excluded(self.excluded_namespaces, namespace)


def namespace_excluded(patterns: Iterable[str], namespace: str) -> bool:
    """Gatekeeper's wildcard match: an exact name, or a prefix ending in `*`."""
    for pattern in patterns:
        if pattern == namespace or (pattern.endswith("*") and namespace.startswith(pattern[:-1])):
            return True
    return False


def _entries(items: Any, source: str, kinds: dict[Gvk, list[str]], problems: list[str], where: str) -> None:
    if items is None:
        return
    if not isinstance(items, list):
        problems.append(f"{source}: {where} must be a list of {{group, version, kind}}")
        return
    for i, entry in enumerate(items):
        if not isinstance(entry, Mapping):
            problems.append(f"{source}: {where}[{i}] must be a map of group, version and kind")
            continue
        group, version, kind = (entry.get(k, "") for k in ("group", "version", "kind"))
        if not all(isinstance(v, str) for v in (group, version, kind)) or not version or not kind:
            problems.append(f"{source}: {where}[{i}] needs a version and a kind (strings)")
            continue
        kinds.setdefault(Gvk(group, version, kind), []).append(source)


def sync_config(
    configs: Iterable[Mapping[str, Any]],
    syncsets: Iterable[tuple[str, Mapping[str, Any]]],
) -> SyncConfig:
    """The union of the Configs named `config` (the caller lists them in the pods' namespace) and of
    the SyncSets, given as (group of their API, object)."""
    kinds: dict[Gvk, list[str]] = {}
    problems: list[str] = []
    excluded: set[str] = set()
    for config in configs:
        if name_of(config) != names.CONFIG_NAME:
            continue  # Gatekeeper reads only this one
        source = f"Config/{meta(config).get('namespace', '')}/{name_of(config)}"
        spec = config.get("spec") if isinstance(config.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        sync = spec.get("sync") if isinstance(spec.get("sync"), Mapping) else {}
        assert isinstance(sync, Mapping)
        _entries(sync.get("syncOnly"), source, kinds, problems, "spec.sync.syncOnly")
        for i, entry in enumerate(spec.get("match") or ()):
            if not isinstance(entry, Mapping):
                continue
            processes = entry.get("processes") or ()
            if "sync" in processes or "*" in processes:
                for ns in entry.get("excludedNamespaces") or ():
                    if isinstance(ns, str) and ns:
                        excluded.add(ns)
                    else:
                        problems.append(f"{source}: spec.match[{i}].excludedNamespaces: not a name")
    for group, syncset in syncsets:
        source = f"SyncSet/{name_of(syncset)}" + ("" if group == names.SYNCSET_GROUP else f" ({group})")
        spec = syncset.get("spec") if isinstance(syncset.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        _entries(spec.get("gvks"), source, kinds, problems, "spec.gvks")
    return SyncConfig(
        kinds={k: tuple(sorted(v)) for k, v in sorted(kinds.items())},
        excluded_namespaces=tuple(sorted(excluded)),
        problems=tuple(problems),
    )
