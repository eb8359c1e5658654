"""Desired versus stored: does an object in the API already say what we want it to say?

The API server adds fields to what it stores (defaults such as a CRD's `conversion`, metadata such as
uid, resourceVersion, managedFields, creationTimestamp). `covers(stored, desired)` is true when every
field of `desired` is in `stored` with the same value, recursively; fields only in `stored` are
ignored. Lists must have the same length and cover element by element.

Covering alone cannot notice that a field was *removed* from what we want (a parameter dropped from a
template's schema is still in the stored CRD). So desired objects also carry a digest of themselves
in an annotation (`with_digest`): a changed desire changes the digest, which no longer covers.

Adapter (celkeeper.kube): generic to any object any controller writes; no celkeeper resource is named
here (the digest annotation is the writer's mark, whatever it writes).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

DIGEST_ANNOTATION = "celkeeper.io/desired-digest"


def covers(stored: Any, desired: Any) -> bool:
    """Whether `stored` holds everything `desired` holds (extra fields in `stored` ignored)."""
    if isinstance(desired, Mapping):
        if not isinstance(stored, Mapping):
            return False
        return all(key in stored and covers(stored[key], value) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(stored, list) or len(stored) != len(desired):
            return False
        return all(covers(s, d) for s, d in zip(stored, desired, strict=True))
    if isinstance(desired, bool) or isinstance(stored, bool):
        return type(desired) is type(stored) and desired == stored
    return bool(desired == stored)


def digest_of(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def with_digest(desired: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `desired` whose metadata.annotations carries the digest of the rest of it."""
    out = copy.deepcopy(dict(desired))
    metadata = out.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(DIGEST_ANNOTATION, None)
    metadata["annotations"] = annotations
    annotations[DIGEST_ANNOTATION] = digest_of(out)
    return out


def up_to_date(stored: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Nothing to write: the stored object exists and covers the desired one (digest included)."""
    return stored is not None and covers(stored, desired)


def for_update(stored: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a PUT that makes `stored` say `desired`: the desired object with the stored
    resourceVersion (so a concurrent change is a conflict, not lost) and the stored annotations and
    labels that are not ours kept."""
    body = copy.deepcopy(dict(desired))
    metadata = body.setdefault("metadata", {})
    stored_meta = stored.get("metadata") or {}
    metadata["resourceVersion"] = stored_meta.get("resourceVersion")
    for field in ("annotations", "labels"):
        merged = dict(stored_meta.get(field) or {})
        merged.update(metadata.get(field) or {})
        if merged:
            metadata[field] = merged
    return body


def with_resource_version(stored: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a PUT for an object we own whole (nothing of the stored copy kept): the desired
    object with the stored resourceVersion, so that a concurrent change is a conflict."""
    version = (stored.get("metadata") or {}).get("resourceVersion")
    return {**desired, "metadata": {**desired["metadata"], "resourceVersion": version}}
