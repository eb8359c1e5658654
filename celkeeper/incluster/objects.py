"""API objects as policy sources: what of them the workers need, and the names they go by.

A watched object carries fields that change without changing the policy (resourceVersion, managedFields,
status written by celkeeper itself, kubectl's last-applied annotation). Snapshot items keep only what
matters, so a status write or a no-op apply does not make a new snapshot: a template or constraint keeps
apiVersion, kind, metadata (name, uid, generation, labels, annotations) and spec; a Namespace keeps
everything but resourceVersion and managedFields (`namespaceObject` may read any field).

Item names say where an error is: `constrainttemplate/<name>`, `constraint/<Kind>/<name>` and
`expansiontemplate/<name>` (Gatekeeper's ExpansionTemplates, kept as templates are).

celkeeper's (celkeeper.incluster): what celkeeper keeps of its policy objects (pure).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celkeeper.crds import names
from celkeeper.expansion import GROUP as EXPANSION_GROUP
from celkeeper.expansion import KIND as EXPANSION_KIND
from celkeeper.mutation import GROUP as MUTATION_GROUP
from celkeeper.mutation import KINDS as MUTATOR_KINDS

TEMPLATE_ITEM_PREFIX = "constrainttemplate/"
CONSTRAINT_ITEM_PREFIX = "constraint/"
EXPANSION_ITEM_PREFIX = "expansiontemplate/"
MUTATOR_ITEM_PREFIX = "mutator/"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_POLICY_METADATA = ("name", "uid", "generation", "labels", "annotations", "creationTimestamp")
_VOLATILE_METADATA = ("resourceVersion", "managedFields")


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def policy_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A template or constraint reduced to what defines the policy."""
    meta = _metadata(obj)
    kept: dict[str, Any] = {k: meta[k] for k in _POLICY_METADATA if k in meta}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}
    if "spec" in obj:
        out["spec"] = obj["spec"]
    return out


def namespace_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Namespace as `namespaceObject` sees it (without the fields that change on every write)."""
    meta = {k: v for k, v in _metadata(obj).items() if k not in _VOLATILE_METADATA}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out = {k: v for k, v in obj.items() if k != "metadata"}
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Namespace")
    out["metadata"] = meta
    return out


def template_item_name(name: str) -> str:
    return f"{TEMPLATE_ITEM_PREFIX}{name}"


def constraint_item_name(kind: str, name: str) -> str:
    return f"{CONSTRAINT_ITEM_PREFIX}{kind}/{name}"


def item_name(obj: Mapping[str, Any]) -> str | None:
    """The snapshot item name of a template, constraint, ExpansionTemplate or mutator, None for anything
    else."""
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.rpartition("/")[0]
    kind = str(obj.get("kind") or "")
    name = str(_metadata(obj).get("name") or "")
    if not name:
        return None
    if group == names.TEMPLATES_GROUP and kind == names.TEMPLATE_KIND:
        return template_item_name(name)
    if group == names.CONSTRAINTS_GROUP and kind:
        return constraint_item_name(kind, name)
    if group == EXPANSION_GROUP and kind == EXPANSION_KIND:
        return f"{EXPANSION_ITEM_PREFIX}{name}"
    if group == MUTATION_GROUP and kind in MUTATOR_KINDS:
        return f"{MUTATOR_ITEM_PREFIX}{kind.lower()}/{name}"
    return None
