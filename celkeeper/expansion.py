"""Gatekeeper's ExpansionTemplates (expansion.gatekeeper.sh): workloads expanded into what they generate.

An ExpansionTemplate says that objects of some kinds (spec.applyTo: groups x versions x kinds, exact, no
globs) generate others: the map at spec.templateSource (a dotted path, e.g. `spec.template`) becomes an
object of spec.generatedGVK, named `<parent name>-<generated kind>` (lowercase), in the parent's
namespace, with an ownerReference to the parent (apiVersion, kind, name, uid ""); nothing else of the
parent is copied. Generated objects are expanded again (up to 30 levels: a CronJob's Job, then the Job's
Pod), children listed before their parents. The generated objects are reviewed with match source
`Generated`; their results carry the prefix `[Implied by <template name>]` and, when
spec.enforcementAction is set, that action instead of the constraint's (gatekeeper v3.23.1
pkg/expansion: system.go, db.go, aggregate.go; pkg/gator/expand).

Templates whose generated kinds form a cycle are all left out (db.go: strongly connected components);
a template generating a kind it applies to is refused (ValidateTemplate). Gatekeeper also applies its
mutators to each generated object before expanding it in turn: `expand` takes that as a function
(review.decide passes the policy set's mutators, celkeeper.mutation).

    templates, errors = read_expansion_templates(documents)      # located errors; bad ones left out
    expansions = Expansions(templates)                            # cycles left out (expansions.cycles)
    expansions.expand(obj, namespace=None) -> [Resultant, ...]    # raises ExpansionError
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celkeeper.documents import Document, index_path, key_path
from celkeeper.errors import CelkeeperError
from celkeeper.model import JsonObject, JsonValue

GROUP = "expansion.gatekeeper.sh"
KIND = "ExpansionTemplate"
VERSIONS = ("v1alpha1", "v1beta1")
MAX_DEPTH = 30  # maxRecursionDepth
SOURCE_GENERATED = "Generated"
SOURCE_ORIGINAL = "Original"
# spec.enforcementAction: "" keeps the constraint's own action; Gatekeeper's webhook skips results with
# any other value, so celkeeper refuses them when the template is read
ACTIONS = ("deny", "warn", "dryrun", "scoped")

GVK = tuple[str, str, str]  # group, version, kind
#: a generated object mutated as Gatekeeper's mutators mutate it (raises ExpansionError)
Mutate = Callable[[JsonObject], JsonObject]


class ExpansionError(CelkeeperError):
    """An ExpansionTemplate Gatekeeper refuses, or an object it cannot expand."""


def is_expansion_template(document: Document) -> bool:
    return document.group == GROUP and document.kind == KIND


def prefix(template: str) -> str:
    """The prefix of the messages of a generated object's results (aggregate.go childMsgPrefix)."""
    return f"[Implied by {template}]"


@dataclass(frozen=True)
class ExpansionTemplate:
    name: str
    applies_to: frozenset[GVK]
    source: tuple[str, ...]  # spec.templateSource split at dots
    generates: GVK
    enforcement_action: str  # "" keeps the constraint's own action
    document: Document | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Resultant:
    """An object a generator generates: the object, the template that made it and its action."""

    object: JsonObject
    template: str
    enforcement_action: str


def read_expansion_templates(
    documents: Iterable[Document],
) -> tuple[list[ExpansionTemplate], list[ExpansionError]]:
    """The ExpansionTemplates among `documents` (others are ignored), and every problem found."""
    templates: list[ExpansionTemplate] = []
    errors: list[ExpansionError] = []
    for document in documents:
        if not is_expansion_template(document):
            continue
        template, problems = parse_expansion_template(document)
        errors.extend(problems)
        if template is not None:
            templates.append(template)
    return templates, errors


def parse_expansion_template(document: Document) -> tuple[ExpansionTemplate | None, list[ExpansionError]]:
    """Read and check an ExpansionTemplate as Gatekeeper reads and validates one (ValidateTemplate);
    the template is None when anything is wrong."""
    errors: list[ExpansionError] = []

    def add(message: str, path: str) -> None:
        errors.append(document.error(ExpansionError, message, path))

    data = document.data if isinstance(document.data, dict) else {}
    if document.version not in VERSIONS:
        add(
            f"unsupported apiVersion {document.api_version!r} for an ExpansionTemplate; use "
            + " or ".join(f"{GROUP}/{v}" for v in VERSIONS),
            "apiVersion",
        )
    name = document.name
    spec = data.get("spec")
    if spec is not None and not isinstance(spec, dict):
        add("spec must be a map", "spec")
    spec = spec if isinstance(spec, dict) else {}
    if not name:
        add("ExpansionTemplate has empty name field", "metadata.name")
    elif len(name) >= 64:
        add("ExpansionTemplate name must be less than 64 characters", "metadata.name")
    source = spec.get("templateSource")
    if source is not None and not isinstance(source, str):
        add(
            "templateSource must be a string (a dotted field path, e.g. spec.template)", "spec.templateSource"
        )
    elif not source:
        add(f"ExpansionTemplate {name} has empty source field", "spec.templateSource")
    generates = _generated(spec, add)
    if generates == ("", "", ""):
        add(f"ExpansionTemplate {name} has empty generatedGVK field", "spec.generatedGVK")
    applies_to = _apply_to(spec, add)
    if not spec.get("applyTo"):
        add(f"ExpansionTemplate {name} must specify ApplyTo", "spec.applyTo")
    elif generates in applies_to:
        add(
            f"ExpansionTemplate {name} generates GVK {_gvk_text(generates)}, "
            "but also applies to that same GVK",
            "spec.generatedGVK",
        )
    action = spec.get("enforcementAction")
    if action is not None and action != "" and action not in ACTIONS:
        add(
            f"enforcementAction {action!r} is not one of {', '.join(ACTIONS)} (or absent: the constraint's "
            "own action); Gatekeeper would drop the violations",
            "spec.enforcementAction",
        )
    if errors:
        return None, errors
    assert isinstance(source, str)
    return (
        ExpansionTemplate(
            name=name,
            applies_to=applies_to,
            source=tuple(source.split(".")),
            generates=generates,
            enforcement_action=action or "",
            document=document,
        ),
        [],
    )


def _generated(spec: Mapping[str, JsonValue], add: Callable[[str, str], None]) -> GVK:
    generated = spec.get("generatedGVK")
    if generated is None:
        return ("", "", "")
    if not isinstance(generated, dict):
        add("generatedGVK must be a map of group, version and kind", "spec.generatedGVK")
        return ("", "", "")
    parts = []
    for key in ("group", "version", "kind"):
        value = generated.get(key, "")
        if not isinstance(value, str):
            add(f"{key} must be a string", f"spec.generatedGVK.{key}")
            value = ""
        parts.append(value)
    return (parts[0], parts[1], parts[2])


def _apply_to(spec: Mapping[str, JsonValue], add: Callable[[str, str], None]) -> frozenset[GVK]:
    items = spec.get("applyTo")
    if items is None:
        return frozenset()
    if not isinstance(items, list):
        add("applyTo must be a list of {groups, kinds, versions}", "spec.applyTo")
        return frozenset()
    gvks: set[GVK] = set()
    for i, item in enumerate(items):
        where = index_path("spec.applyTo", i)
        if not isinstance(item, dict):
            add("an applyTo entry must be a map of groups, kinds and versions", where)
            continue
        lists: dict[str, list[str]] = {}
        for key in ("groups", "versions", "kinds"):
            value = item.get(key, [])
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                add(f"{key} must be a list of strings", key_path(where, key))
                value = []
            lists[key] = value
        gvks.update((g, v, k) for g in lists["groups"] for v in lists["versions"] for k in lists["kinds"])
    return frozenset(gvks)


class Expansions:
    """A set of ExpansionTemplates, as Gatekeeper's expansion system keeps them (immutable).

    A later template of the same name replaces an earlier one; templates on a cycle of generated kinds
    are left out and listed in `cycles` (name -> the template whose addition closed the cycle, in order:
    gator refuses that one with `template forms expansion cycle`)."""

    def __init__(self, templates: Sequence[ExpansionTemplate] = ()) -> None:
        by_name: dict[str, ExpansionTemplate] = {}
        for template in templates:
            by_name.pop(template.name, None)  # an update goes to the end, as a re-upsert does
            by_name[template.name] = template
        self.templates: tuple[ExpansionTemplate, ...] = tuple(by_name.values())
        self.cycles: dict[str, str] = _cycles(self.templates)
        self._by_gvk: dict[GVK, tuple[ExpansionTemplate, ...]] = {}
        for template in sorted(self.templates, key=lambda t: t.name):
            if template.name in self.cycles:
                continue
            for gvk in template.applies_to:
                self._by_gvk[gvk] = (*self._by_gvk.get(gvk, ()), template)
        # (group, kind) pairs some template applies to, whatever the version: a quick test on the hot path
        self.group_kinds: frozenset[tuple[str, str]] = frozenset((g, k) for g, _, k in self._by_gvk)

    def __bool__(self) -> bool:
        return bool(self._by_gvk)

    def templates_for(self, gvk: GVK) -> tuple[ExpansionTemplate, ...]:
        """The templates that expand objects of this GVK, by name."""
        return self._by_gvk.get(gvk, ())

    def generated_kinds(self, group: str, kind: str) -> set[tuple[str, str]]:
        """(group, kind) of everything objects of this group and kind may generate, transitively
        (any version)."""
        found: set[tuple[str, str]] = set()
        todo = [(group, kind)]
        while todo:
            g, k = todo.pop()
            for (tg, _, tk), templates in self._by_gvk.items():
                if (tg, tk) != (g, k):
                    continue
                for template in templates:
                    made = (template.generates[0], template.generates[2])
                    if made not in found:
                        found.add(made)
                        todo.append(made)
        return found

    def expand(
        self, obj: Mapping[str, JsonValue], namespace: str | None = None, mutate: Mutate | None = None
    ) -> list[Resultant]:
        """Every object `obj` generates, recursively, children before their parents (Expand).

        `namespace`: the name of the Namespace Gatekeeper knows for the object (its resultants are put
        there; "" removes their namespace), None when it knows none (the parent's metadata.namespace is
        used). `mutate`: applied to each generated object before it is expanded in turn, as Gatekeeper's
        expansion applies its mutators (the object mutated, or ExpansionError). Raises ExpansionError
        when an object cannot be expanded."""
        out: list[Resultant] = []
        self._expand(obj, namespace, out, 0, mutate)
        return out

    def _expand(
        self,
        obj: Mapping[str, JsonValue],
        namespace: str | None,
        out: list[Resultant],
        depth: int,
        mutate: Mutate | None,
    ) -> None:
        if depth >= MAX_DEPTH:
            raise ExpansionError(f"maximum recursion depth of {MAX_DEPTH} reached")
        gvk = gvk_of(obj)
        if gvk == ("", "", ""):
            raise ExpansionError(f"cannot expand resource {_name(obj)} with empty GVK")
        made = [
            Resultant(generate(obj, namespace, t), t.name, t.enforcement_action)
            for t in self.templates_for(gvk)
        ]
        if mutate is not None:
            made = [Resultant(mutate(r.object), r.template, r.enforcement_action) for r in made]
        for resultant in made:
            self._expand(resultant.object, namespace, out, depth + 1, mutate)
        out.extend(made)


def generate(obj: Mapping[str, JsonValue], namespace: str | None, template: ExpansionTemplate) -> JsonObject:
    """The object `template` makes of `obj` (system.go expandResource)."""
    source = _source(obj, template.source)
    resource = copy.deepcopy(source)
    group, version, kind = template.generates
    resource["apiVersion"] = f"{group}/{version}" if group else version
    resource["kind"] = kind
    meta = resource.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    parent_meta = obj.get("metadata")
    parent_meta = parent_meta if isinstance(parent_meta, Mapping) else {}
    if namespace is not None:
        _set(meta, "namespace", namespace)
    elif isinstance(parent_meta.get("namespace"), str):
        _set(meta, "namespace", parent_meta["namespace"])
    _set(meta, "name", (str(parent_meta.get("name") or "") + ("-" if kind else "") + kind).lower())
    _own(meta, obj, parent_meta)
    resource["metadata"] = meta
    return resource


def _source(obj: Mapping[str, JsonValue], path: tuple[str, ...]) -> JsonObject:
    """unstructured.NestedMap(obj, path...): the map at `path`."""
    value: Any = obj
    for i, key in enumerate(path):
        if not isinstance(value, Mapping):
            raise _accessor_error(path[:i], value)
        if key not in value:
            raise ExpansionError(
                f"could not find source field {_go_quote('.'.join(path))} in resource {_name(obj)}"
            )
        value = value[key]
    if not isinstance(value, dict):
        raise _accessor_error(path, value)
    return value


def _accessor_error(path: tuple[str, ...], value: Any) -> ExpansionError:
    return ExpansionError(
        "could not extract source field from unstructured: "
        f".{'.'.join(path)} accessor error: {value} is of the type {_go_type(value)}, "
        "expected map[string]interface{}"
    )


def _own(meta: JsonObject, parent: Mapping[str, JsonValue], parent_meta: Mapping[str, JsonValue]) -> None:
    """ensureOwnerReference: the parent appended to ownerReferences unless it is there already."""
    owner = (
        str(parent.get("apiVersion") or ""),
        str(parent.get("kind") or ""),
        str(parent_meta.get("name") or ""),
    )
    if not all(owner):
        return
    refs = meta.get("ownerReferences")
    existing = [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []
    if any((r.get("apiVersion"), r.get("kind"), r.get("name")) == owner for r in existing):
        return
    # SetOwnerReferences writes every reference back as a metav1.OwnerReference
    meta["ownerReferences"] = [_owner_reference(r) for r in existing] + [
        {"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "uid": ""}
    ]


def _owner_reference(ref: Mapping[str, JsonValue]) -> JsonObject:
    out: JsonObject = {k: str(ref.get(k) or "") for k in ("apiVersion", "kind", "name", "uid")}
    for key in ("controller", "blockOwnerDeletion"):
        if isinstance(ref.get(key), bool):
            out[key] = ref[key]
    return out


def _set(meta: JsonObject, key: str, value: str) -> None:
    """unstructured's SetNamespace/SetName: an empty value removes the field."""
    if value:
        meta[key] = value
    else:
        meta.pop(key, None)


def _cycles(templates: Sequence[ExpansionTemplate]) -> dict[str, str]:
    """Templates on a cycle (a strongly connected component of more than one template, db.go
    updateCycles), each mapped to the template whose addition (in order) first closed a cycle it is on."""
    edges = {t.name: {u.name for u in templates if t.generates in u.applies_to} for t in templates}
    out: dict[str, str] = {}
    for i, template in enumerate(templates):
        names = {t.name for t in templates[: i + 1]}
        for component in _components({n: edges[n] & names for n in names}):
            if len(component) > 1 and template.name in component:
                for name in component:
                    out.setdefault(name, template.name)
    return out


def _components(edges: Mapping[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                out.append(component)
    return out


def gvk_of(obj: Mapping[str, JsonValue]) -> GVK:
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    return (group, version, str(obj.get("kind") or ""))


def _gvk_text(gvk: GVK) -> str:
    """schema.GroupVersionKind's String()."""
    group, version, kind = gvk
    return f"{group}/{version}, Kind={kind}"


def _name(obj: Mapping[str, JsonValue]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _go_quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _go_type(value: Any) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}"
