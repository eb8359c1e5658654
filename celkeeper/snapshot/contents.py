"""What the informer publishes to the workers: one complete, immutable set of policy sources.

A Snapshot holds the *texts* of the policy documents (a file's YAML/JSON, or an API object as JSON),
not compiled policies: compiled CEL programs do not cross processes, so each worker parses and
compiles (with caches keyed by content, so only what changed is redone).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = 1


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


ORIGIN_FILE = ""  # text as written in a file: YAML or JSON, possibly several documents, with line:col
ORIGIN_OBJECT = "object"  # one API object as JSON: errors name the item and the field, not line:col


@dataclass(frozen=True)
class SnapshotItem:
    """One unit of policy source: `name` says where it came from (a path relative to the policy
    folder, or e.g. `constrainttemplate/<name>` for an API object); `text` is YAML or JSON, possibly
    multi-doc, or for `origin` ORIGIN_OBJECT exactly one JSON object."""

    name: str
    text: str
    digest: str = ""
    origin: str = ORIGIN_FILE

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", digest(self.text))


@dataclass(frozen=True)
class Snapshot:
    generation: int  # > 0, grows by one with every publication of different content
    created: float  # Unix time of publication
    source: str  # e.g. "folder:/srv/policies"
    synced: bool  # the source had listed everything that existed when it started
    items: tuple[SnapshotItem, ...] = ()
    # Namespace objects by name (namespaceSelector, namespaceObject, the ignore label)
    namespaces: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # True: `namespaces` lists every namespace there is (a cluster source); a name not in it does
    # not exist. False (a folder): a namespace not listed is taken to exist with no labels but
    # kubernetes.io/metadata.name, as a new namespace has.
    namespaces_complete: bool = False
    problems: tuple[str, ...] = ()  # source-level problems (e.g. an unreadable file), one line each
    # fail-static (informer/loop.py): items published at their last good version because the current
    # one cannot be used (its problems are in `problems`), and items published although never good
    # (no earlier version to keep: loaded with their problems, as Gatekeeper would)
    held: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()
    # the kinds of synced data whose first list is in the data store ("<apiVersion> <kind>", sorted):
    # templates reading other kinds fail under their failurePolicy (celkeeper.review.not_synced)
    synced_kinds: tuple[str, ...] = ()

    def content_key(self) -> tuple[object, ...]:
        """Equal for two snapshots with the same content (generation and time aside)."""
        ns = digest(json.dumps(self.namespaces, sort_keys=True)) if self.namespaces else ""
        items = tuple((i.name, i.digest) for i in self.items)
        return (
            self.source,
            self.synced,
            items,
            ns,
            self.namespaces_complete,
            self.problems,
            self.held,
            self.unproven,
            self.synced_kinds,
        )

    def to_json(self) -> bytes:
        doc = {
            "format": FORMAT,
            "generation": self.generation,
            "created": self.created,
            "source": self.source,
            "synced": self.synced,
            "items": [_item_json(i) for i in self.items],
            "namespaces": self.namespaces,
            "namespacesComplete": self.namespaces_complete,
            "problems": list(self.problems),
            "held": list(self.held),
            "unproven": list(self.unproven),
            "syncedKinds": list(self.synced_kinds),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Snapshot:
        """Raises ValueError (or a subclass) when `data` is not a snapshot of this format."""
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"not a celkeeper snapshot of format {FORMAT}")
        try:
            items = tuple(
                SnapshotItem(
                    str(i["name"]), str(i["text"]), str(i.get("digest") or ""), str(i.get("origin") or "")
                )
                for i in doc["items"]
            )
            namespaces = doc.get("namespaces") or {}
            if not isinstance(namespaces, dict):
                raise ValueError("namespaces is not a mapping")
            return cls(
                generation=int(doc["generation"]),
                created=float(doc["created"]),
                source=str(doc["source"]),
                synced=bool(doc["synced"]),
                items=items,
                namespaces=namespaces,
                namespaces_complete=bool(doc.get("namespacesComplete", False)),
                problems=tuple(str(p) for p in doc.get("problems") or ()),
                held=tuple(str(p) for p in doc.get("held") or ()),
                unproven=tuple(str(p) for p in doc.get("unproven") or ()),
                synced_kinds=tuple(str(k) for k in doc.get("syncedKinds") or ()),
            )
        except (KeyError, TypeError) as err:
            raise ValueError(f"malformed snapshot: {err!r}") from err


def _item_json(item: SnapshotItem) -> dict[str, str]:
    out = {"name": item.name, "digest": item.digest, "text": item.text}
    if item.origin:
        out["origin"] = item.origin
    return out
