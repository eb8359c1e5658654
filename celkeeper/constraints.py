"""Constraints: reading and checking them against the kinds and parameter schemas of the templates.

Accepted: `constraints.gatekeeper.sh/v1beta1` (and v1alpha1, which Gatekeeper also serves) and
celkeeper's `constraints.celkeeper.io/v1beta1` (and v1alpha1, v1). Checks follow Gatekeeper
(frameworks crds/validate.go ValidateCR, gatekeeper pkg/util/enforcement_action.go): a DNS-1123 name
of at most 63 characters, a kind some template defines, parameters valid against the template's
schema with unknown fields rejected, `spec.enforcementAction` deny (default) | dryrun | warn | scoped,
and with scoped, `spec.scopedEnforcementActions` [{action, enforcementPoints: [{name}]}].

`spec.match` is kept as data here and read by celkeeper.match (a sibling module), joined in policy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from celkeeper.documents import Document, index_path, key_path
from celkeeper.errors import ConstraintError, ConstraintSchemaError
from celkeeper.model import Action, EnforcementPoint, JsonObject, JsonValue

GATEKEEPER_GROUP = "constraints.gatekeeper.sh"
CELKEEPER_GROUP = "constraints.celkeeper.io"
VERSIONS = {GATEKEEPER_GROUP: ("v1beta1", "v1alpha1"), CELKEEPER_GROUP: ("v1beta1", "v1alpha1", "v1")}
ALL_POINTS = "*"
VAP_POINT = EnforcementPoint.VAP.value
KNOWN_POINTS = tuple(p.value for p in EnforcementPoint)
_ACTIONS = (Action.DENY.value, Action.DRYRUN.value, Action.WARN.value, Action.SCOPED.value)
_SCOPED_ACTIONS = (Action.DENY.value, Action.DRYRUN.value, Action.WARN.value)
_SPEC_KEYS = frozenset({"match", "parameters", "enforcementAction", "scopedEnforcementActions"})
_ROOT_KEYS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_ORDER = {Action.DENY: 0, Action.WARN: 1, Action.DRYRUN: 2}


class ParameterValidator(Protocol):
    """What a template offers to check parameters (celkeeper.templates.ParameterSchema)."""

    def errors(self, value: JsonValue, path: str = "spec.parameters") -> list[tuple[str, str]]: ...


def is_constraint(document: Document) -> bool:
    """Whether the document is in a constraint API group (whatever its kind)."""
    return document.group in VERSIONS


@dataclass(frozen=True, eq=False)
class Constraint:
    kind: str
    name: str
    document: Document
    parameters: JsonValue  # spec.parameters; None when absent (variables.params is then null)
    match: Mapping[str, JsonValue]  # spec.match as written ({} when absent)
    enforcement_action: Action
    # for scoped: enforcement point name -> actions (points lower-cased, as frameworks compares them)
    scoped_actions: Mapping[str, tuple[Action, ...]] = field(default_factory=dict)
    _unscoped: tuple[Action, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_unscoped", (self.enforcement_action,))

    def actions_for(self, point: str) -> tuple[Action, ...]:
        """The actions that apply at an enforcement point (frameworks constraintClient.matches).

        Not scoped: the enforcement action. Scoped: the actions listed for the point or for `*`, in
        the order deny, warn, dryrun; empty when none is (the constraint is then not evaluated).
        """
        if self.enforcement_action is not Action.SCOPED:
            return self._unscoped
        if point == ALL_POINTS:
            found = {a for actions in self.scoped_actions.values() for a in actions}
        else:
            found = set(self.scoped_actions.get(point.lower(), ())) | set(
                self.scoped_actions.get(ALL_POINTS, ())
            )
        return tuple(sorted(found, key=_ORDER.__getitem__))


def parse_constraint(
    document: Document,
    validators: Mapping[str, ParameterValidator | None],
) -> tuple[Constraint | None, list[ConstraintError]]:
    """Read and check a constraint document.

    `validators` maps each template kind to its parameter validator (None for a kind whose template
    exists but is invalid). The constraint is None when anything is wrong.
    """
    errors: list[ConstraintError] = []

    def add(message: str, path: str, *, key: bool = False, schema: bool = False) -> None:
        kind = ConstraintSchemaError if schema else ConstraintError
        errors.append(document.error(kind, message, path, key=key))

    data = document.data if isinstance(document.data, dict) else {}
    group, _, version = document.api_version.rpartition("/")
    if group not in VERSIONS or version not in VERSIONS[group]:
        supported = ", ".join(f"{g}/{v}" for g, versions in VERSIONS.items() for v in versions)
        add(
            f"unsupported apiVersion {document.api_version!r} for a constraint; use one of {supported}",
            "apiVersion",
        )
        return None, errors
    kind = document.kind
    name = document.name
    label = f"constraint {kind}/{name}: " if name else f"constraint {kind}: "
    if not kind:
        add("kind is required", "kind")
        return None, errors
    if not name:
        add(label + "metadata.name is required", "metadata.name")
    elif len(name) > 63 or not _DNS_SUBDOMAIN.match(name):
        add(
            label + f"invalid name {name!r}: a lowercase RFC 1123 subdomain of at most 63 characters "
            "(letters, digits, '-' and '.')",
            "metadata.name",
        )
    if kind not in validators:
        add(label + f"no ConstraintTemplate defines kind {kind!r}", "kind")
        return None, errors
    validator = validators[kind]
    if validator is None:
        add(label + f"the ConstraintTemplate for kind {kind!r} is invalid (see its errors)", "kind")
        return None, errors

    for key in data:
        if key not in _ROOT_KEYS:
            add(label + f'unknown field "{key}"', key, key=True)
    spec = data.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        add(label + "spec must be a map", "spec")
        return None, errors
    for key in spec:
        if key not in _SPEC_KEYS:
            add(label + f'unknown field "spec.{key}"', key_path("spec", key), key=True)

    parameters = spec.get("parameters")
    if parameters is None and "parameters" in spec:
        # the constraint CRD's schema says parameters is an object: null breaks it (Gatekeeper too)
        add(label + "spec.parameters must be a map, not null", "spec.parameters", schema=True)
    elif parameters is not None:
        for path, message in validator.errors(parameters, "spec.parameters"):
            unknown = message.startswith("unknown field")
            add(label + message, path, key=unknown, schema=not unknown)
    match = spec.get("match")
    if match is not None and not isinstance(match, dict):
        add(label + "spec.match must be a map", "spec.match")
    action, scoped = _enforcement(spec, label, add)

    if errors or action is None:
        return None, errors
    return Constraint(
        kind=kind,
        name=name,
        document=document,
        parameters=parameters,
        match=match or {},
        enforcement_action=action,
        scoped_actions=scoped,
    ), []


class _Problem(Protocol):
    """Records a problem of the constraint at `path` (`key`: the key itself; `schema`: its CRD's schema
    forbids it)."""

    def __call__(self, message: str, path: str, *, key: bool = False, schema: bool = False) -> None: ...


def _enforcement(
    spec: JsonObject, label: str, add: _Problem
) -> tuple[Action | None, dict[str, tuple[Action, ...]]]:
    value = spec.get("enforcementAction")
    if value is None or value == "":
        return Action.DENY, {}
    if not isinstance(value, str):
        add(label + "spec.enforcementAction must be a string", "spec.enforcementAction")
        return None, {}
    if value not in _ACTIONS:
        add(
            label + f"unrecognized enforcementAction: {value!r} is not within the supported list "
            f"[{' '.join(_ACTIONS)}]",
            "spec.enforcementAction",
        )
        return None, {}
    if value != Action.SCOPED.value:
        return Action(value), {}
    path = "spec.scopedEnforcementActions"
    entries = spec.get("scopedEnforcementActions")
    if entries is None:
        add(label + "scopedEnforcementActions is required when enforcementAction is scoped", path)
        return None, {}
    shape = "must be a list of {action: deny|dryrun|warn, enforcementPoints: [{name: ...}]}"
    if not isinstance(entries, list):
        add(label + f"scopedEnforcementActions {shape}", path)
        return None, {}
    ok = True
    scoped: dict[str, set[Action]] = {}
    for i, entry in enumerate(entries):
        entry_path = index_path(path, i)
        if not isinstance(entry, dict):
            add(label + f"scopedEnforcementActions {shape}", entry_path)
            ok = False
            continue
        for key in entry:
            if key not in ("action", "enforcementPoints"):
                add(
                    label + f'unknown field "{key_path(entry_path, key)}"',
                    key_path(entry_path, key),
                    key=True,
                )
                ok = False
        action = entry.get("action")
        if action not in _SCOPED_ACTIONS:
            add(
                label + f"unrecognized enforcementAction: {action!r} is not within the supported list "
                f"[{' '.join(_SCOPED_ACTIONS)}]",
                key_path(entry_path, "action"),
            )
            ok = False
        points = entry.get("enforcementPoints")
        points_path = key_path(entry_path, "enforcementPoints")
        if not isinstance(points, list) or not points:
            add(
                label
                + "enforcementPoints must list at least one enforcement point ({name: ...}); supported: "
                f"{', '.join(KNOWN_POINTS)} or *",
                points_path,
            )
            ok = False
            continue
        for j, point in enumerate(points):
            point_path = index_path(points_path, j)
            point_name = point.get("name") if isinstance(point, dict) else None
            if isinstance(point, dict):
                for key in point:
                    if key != "name":
                        add(
                            label + f'unknown field "{key_path(point_path, key)}"',
                            key_path(point_path, key),
                            key=True,
                        )
                        ok = False
            if point_name != ALL_POINTS and point_name not in KNOWN_POINTS:
                add(
                    label + f"unrecognized enforcement point {point_name!r}: constraint will not be enforced "
                    f"there; supported enforcement points are {', '.join(KNOWN_POINTS)} and *",
                    key_path(point_path, "name"),
                )
                ok = False
                continue
            if action in _SCOPED_ACTIONS:
                scoped.setdefault(str(point_name).lower(), set()).add(Action(action))
    if not ok:
        return None, {}
    return Action.SCOPED, {
        point: tuple(sorted(actions, key=_ORDER.__getitem__)) for point, actions in scoped.items()
    }
