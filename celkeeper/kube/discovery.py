"""Discovery: which resources the API serves, in the version a client should use for each.

    found = discover(client)
    found.resources      every resource (no subresources) in its preferred version, as ApiResource
    found.errors         one line per API group version that could not be read (e.g. an aggregated
                         APIService that is down); the others are still there

The version chosen for a resource is client-go's `ServerPreferredResources`: its group's preferred
version when it is served there, else the first version (in the server's order) that serves it. The
classic discovery documents are read (/api, /api/v1, /apis, /apis/<group>/<version>): one request per
group version, each a small document.

Adapter (celkeeper.kube): the API's own discovery documents, read as client-go reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.kube.client import ApiError, Client
from celkeeper.kube.resources import Resource


@dataclass(frozen=True)
class ApiResource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    verbs: frozenset[str]

    @property
    def listable(self) -> bool:
        return "list" in self.verbs

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def resource(self) -> Resource:
        """The collection across every namespace (for a namespaced resource) or the cluster."""
        return Resource(self.group, self.version, self.plural, self.kind)

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


@dataclass(frozen=True)
class Discovered:
    resources: tuple[ApiResource, ...]
    errors: tuple[str, ...]


def _group_versions(client: Client) -> list[tuple[str, str, list[str]]]:
    """(group, preferred version, every version in the server's order), the core group first."""
    core = client.get_path("/api")
    versions = [str(v) for v in core.get("versions") or () if isinstance(v, str)]
    out = [("", versions[0] if versions else "v1", versions or ["v1"])]
    for group in client.get_path("/apis").get("groups") or ():
        if not isinstance(group, Mapping) or not isinstance(group.get("name"), str):
            continue
        listed = [
            str(v["version"])
            for v in group.get("versions") or ()
            if isinstance(v, Mapping) and v.get("version")
        ]
        preferred = group.get("preferredVersion")
        chosen = str(preferred.get("version")) if isinstance(preferred, Mapping) else ""
        if listed:
            out.append((group["name"], chosen or listed[0], listed))
    return out


def _resources(doc: Mapping[str, Any], group: str, version: str) -> list[ApiResource]:
    found = []
    for entry in doc.get("resources") or ():
        if not isinstance(entry, Mapping):
            continue
        name, kind = entry.get("name"), entry.get("kind")
        if not isinstance(name, str) or not isinstance(kind, str) or "/" in name or not name:
            continue  # subresources (pods/status) are not collections of their own
        verbs = frozenset(str(v) for v in entry.get("verbs") or () if isinstance(v, str))
        found.append(ApiResource(group, version, name, kind, bool(entry.get("namespaced")), verbs))
    return found


def discover(client: Client) -> Discovered:
    """Every resource the server serves, in its preferred version. Raises ApiError only when the
    group lists themselves cannot be read."""
    chosen: dict[tuple[str, str], ApiResource] = {}
    errors: list[str] = []
    for group, preferred, versions in _group_versions(client):
        for version in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                doc = client.get_path(path)
            except ApiError as err:
                errors.append(f"{group or 'core'}/{version}: {err}")
                continue
            for resource in _resources(doc, group, version):
                key = (group, resource.plural)
                if key in chosen and version != preferred:
                    continue  # only the preferred version replaces the first one seen
                chosen[key] = resource
    ordered = sorted(chosen.values(), key=lambda r: (r.group, r.plural))
    return Discovered(tuple(ordered), tuple(errors))
