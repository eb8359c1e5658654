"""Gatekeeper's ExpansionTemplates (expansion.gatekeeper.sh), as `gator verify` and `gator test` apply them.

An ExpansionTemplate says that objects of some kinds (spec.applyTo: groups x versions x kinds, exact)
generate others: the map at spec.templateSource (a dotted path, e.g. `spec.template`) becomes an object
of spec.generatedGVK, named `<parent name>-<generated kind>` (lowercase), in the parent's namespace,
owned by the parent. The generated object is reviewed too (as source `Generated`); its results carry
the prefix `[Implied by <template name>]` and, when spec.enforcementAction is set, that action
(gatekeeper pkg/expansion: system.go, aggregate.go; pkg/gator/expand). Generated objects are expanded
again (up to 30 levels); templates that form a cycle are left out, as Gatekeeper's database does.
Mutators are not applied: celkeeper has no mutation (callers refuse inputs that hold mutators).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError

GROUP = "expansion.gatekeeper.sh"
KIND = "ExpansionTemplate"
MAX_DEPTH = 30  # maxRecursionDepth
MESSAGE_PREFIX = "[Implied by {}]"
MUTATOR_GROUP = "mutations.gatekeeper.sh"
MUTATOR_KINDS = frozenset({"Assign", "AssignMetadata", "ModifySet", "AssignImage"})

GVK = tuple[str, str, str]  # group, version, kind


class ExpansionError(CelkeeperError):
    """An ExpansionTemplate Gatekeeper refuses, or an object it cannot expand."""


def is_expansion_template(document: Document) -> bool:
    return document.group == GROUP and document.kind == KIND


def is_mutator(document: Document) -> bool:
    return document.group == MUTATOR_GROUP and document.kind in MUTATOR_KINDS


@dataclass(frozen=True)
class ExpansionTemplate:
    name: str
    applies_to: frozenset[GVK]
    source: tuple[str, ...]  # the path of the template source in the parent
    generates: GVK
    enforcement_action: str  # "" keeps the constraint's own action


@dataclass(frozen=True)
class Resultant:
    object: dict[str, Any]
    template: str
    enforcement_action: str


def parse_expansion_template(document: Document) -> ExpansionTemplate:
    """Read and check an ExpansionTemplate as Gatekeeper's ValidateTemplate does; raises ExpansionError."""
    data = document.data
    name = document.name
    spec = data.get("spec") if isinstance(data.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)

    def fail(message: str, path: str) -> ExpansionError:
        return document.error(ExpansionError, message, path)

    if not name:
        raise fail("ExpansionTemplate has empty name field", "metadata.name")
    if len(name) >= 64:
        raise fail("ExpansionTemplate name must be less than 64 characters", "metadata.name")
    source = spec.get("templateSource")
    if not isinstance(source, str) or not source:
        raise fail(f"ExpansionTemplate {name} has empty source field", "spec.templateSource")
    generated = spec.get("generatedGVK")
    if not isinstance(generated, Mapping) or not any(generated.get(k) for k in ("group", "version", "kind")):
        raise fail(f"ExpansionTemplate {name} has empty generatedGVK field", "spec.generatedGVK")
    generates = (
        str(generated.get("group", "")),
        str(generated.get("version", "")),
        str(generated.get("kind", "")),
    )
    apply_to = spec.get("applyTo")
    if not isinstance(apply_to, list) or not apply_to:
        raise fail(f"ExpansionTemplate {name} must specify ApplyTo", "spec.applyTo")
    gvks: set[GVK] = set()
    for item in apply_to:
        entry: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        gvks.update(
            (str(g), str(v), str(k))
            for g in _strings(entry.get("groups"))
            for v in _strings(entry.get("versions"))
            for k in _strings(entry.get("kinds"))
        )
    if generates in gvks:
        raise fail(
            f"ExpansionTemplate {name} generates GVK {_gvk_text(generates)}, "
            "but also applies to that same GVK",
            "spec.generatedGVK",
        )
    action = spec.get("enforcementAction")
    return ExpansionTemplate(
        name=name,
        applies_to=frozenset(gvks),
        source=tuple(source.split(".")),
        generates=generates,
        enforcement_action=action if isinstance(action, str) else "",
    )


class Expander:
    """The expansion templates of one review (a Suite test's `expansion:` file, or gator test's inputs)."""

    def __init__(self, templates: Sequence[ExpansionTemplate]) -> None:
        by_name = {t.name: t for t in templates}  # a later template of the same name replaces one
        cyclic = _in_cycles(list(by_name.values()))
        self._by_gvk: dict[GVK, list[ExpansionTemplate]] = {}
        for template in by_name.values():
            if template.name in cyclic:
                continue
            for gvk in template.applies_to:
                self._by_gvk.setdefault(gvk, []).append(template)

    def __bool__(self) -> bool:
        return bool(self._by_gvk)

    def expand(self, obj: Mapping[str, Any], namespace: str | None) -> list[Resultant]:
        """Every object `obj` generates, recursively. `namespace`: the name of the namespace Gatekeeper
        knows for it (None: unknown, the parent's metadata.namespace is used)."""
        out: list[Resultant] = []
        self._expand(obj, namespace, out, 0)
        return out

    def _expand(
        self, obj: Mapping[str, Any], namespace: str | None, out: list[Resultant], depth: int
    ) -> None:
        if depth >= MAX_DEPTH:
            raise ExpansionError(f"maximum recursion depth of {MAX_DEPTH} reached")
        gvk = _gvk_of(obj)
        if gvk == ("", "", ""):
            raise ExpansionError(f"cannot expand resource {_name(obj)} with empty GVK")
        generated = [
            Resultant(_generate(obj, namespace, t), t.name, t.enforcement_action)
            for t in sorted(self._by_gvk.get(gvk, ()), key=lambda t: t.name)
        ]
        for resultant in generated:
            self._expand(resultant.object, namespace, out, depth + 1)
        out.extend(generated)


def _generate(obj: Mapping[str, Any], namespace: str | None, template: ExpansionTemplate) -> dict[str, Any]:
    source: Any = obj
    for key in template.source:
        source = source.get(key) if isinstance(source, Mapping) else None
        if source is None:
            break
    if not isinstance(source, Mapping):
        raise ExpansionError(
            f"error expanding resource {_name(obj)}: could not find source field "
            f"{'.'.join(template.source)!r} in resource {_name(obj)}"
        )
    resource = copy.deepcopy(dict(source))
    group, version, kind = template.generates
    resource["apiVersion"] = f"{group}/{version}" if group else version
    resource["kind"] = kind
    meta = resource.get("metadata")
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    parent_meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(parent_meta, Mapping)
    if namespace is not None:
        _set(meta, "namespace", namespace)
    elif isinstance(parent_meta.get("namespace"), str):
        _set(meta, "namespace", parent_meta["namespace"])
    meta["name"] = (str(parent_meta.get("name") or "") + ("-" if kind else "") + kind).lower()
    parent = (
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        str(parent_meta.get("name") or ""),
    )
    if all(parent):
        refs = meta.get("ownerReferences")
        refs = list(refs) if isinstance(refs, list) else []
        if not any(
            isinstance(r, Mapping) and (r.get("apiVersion"), r.get("kind"), r.get("name")) == parent
            for r in refs
        ):
            refs.append({"apiVersion": parent[0], "kind": parent[1], "name": parent[2], "uid": ""})
        meta["ownerReferences"] = refs
    resource["metadata"] = meta
    return resource


def _set(meta: dict[str, Any], key: str, value: str) -> None:
    """unstructured's SetNamespace: an empty value removes the field."""
    if value:
        meta[key] = value
    else:
        meta.pop(key, None)


def _in_cycles(templates: list[ExpansionTemplate]) -> set[str]:
    """Names of the templates on a cycle of generated kinds (Gatekeeper leaves them out)."""
    edges = {t.name: [u.name for u in templates if t.generates in u.applies_to] for t in templates}
    cyclic: set[str] = set()
    for start, targets in edges.items():
        stack, seen = list(targets), set()
        while stack:
            name = stack.pop()
            if name == start:
                cyclic.add(start)
                break
            if name not in seen:
                seen.add(name)
                stack.extend(edges[name])
    return cyclic


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _gvk_of(obj: Mapping[str, Any]) -> GVK:
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return (group, version, str(obj.get("kind") or ""))


def _gvk_text(gvk: GVK) -> str:
    group, version, kind = gvk
    return f"{group}/{version}, Kind={kind}" if group else f"/{version}, Kind={kind}"


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
