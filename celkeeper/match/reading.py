"""Reading a constraint's spec.match, with Gatekeeper's checks (its match CRD schema and
ValidateLabelSelector), every problem located."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from celkeeper.documents import Document, index_path, key_path
from celkeeper.errors import ConstraintError, ConstraintSchemaError
from celkeeper.match.criteria import CRITERIA, WILDCARD, KindSelector, LabelSelector, Match, Requirement
from celkeeper.model import JsonValue

_GLOB = re.compile(r"^\*?[-:a-z0-9]*\*?$")
_MATCH_KEYS = frozenset({*CRITERIA, "processes"})
_SELECTOR_KEYS = frozenset({"matchLabels", "matchExpressions"})
_REQUIREMENT_KEYS = frozenset({"key", "operator", "values"})
_SOURCES = ("All", "Generated", "Original")
_PROCESSES = ("audit", "webhook", "sync", "mutation-webhook", "*")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class _Reader:
    def __init__(self, document: Document) -> None:
        self.document = document
        self.errors: list[ConstraintError] = []

    def add(self, message: str, path: str, *, key: bool = False, schema: bool = False) -> None:
        """schema: the match CRD's schema (types, patterns, enums) forbids it (ConstraintSchemaError)."""
        kind = ConstraintSchemaError if schema else ConstraintError
        self.errors.append(self.document.error(kind, message, path, key=key))

    def strings(self, value: Any, path: str) -> list[str] | None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.add("must be a list of strings", path, schema=True)
            return None
        return value

    def unknown(self, data: Mapping[str, JsonValue], known: frozenset[str], path: str) -> None:
        for key in data:
            if key not in known:
                self.add(f'unknown field "{key_path(path, key)}"', key_path(path, key), key=True)


def parse_match(
    data: Any, document: Document, path: str = "spec.match"
) -> tuple[Match | None, list[ConstraintError]]:
    """Read and check a constraint's spec.match; None (and the errors) when anything is wrong."""
    reader = _Reader(document)
    if data is None:
        return Match(), []
    if not isinstance(data, Mapping):
        reader.add("spec.match must be a map", path, schema=True)
        return None, reader.errors
    reader.unknown(data, _MATCH_KEYS, path)
    kinds = _kinds(data.get("kinds"), key_path(path, "kinds"), reader)
    scope = data.get("scope")
    if scope is not None and not isinstance(scope, str):
        reader.add("scope must be a string (*, Cluster or Namespaced)", key_path(path, "scope"), schema=True)
    namespaces = _globs(data.get("namespaces"), key_path(path, "namespaces"), reader)
    excluded = _globs(data.get("excludedNamespaces"), key_path(path, "excludedNamespaces"), reader)
    processes = None
    if data.get("processes") is not None:
        listed = reader.strings(data["processes"], key_path(path, "processes"))
        for i, process in enumerate(listed or []):
            if process not in _PROCESSES:
                reader.add(
                    f"unknown process {process!r}: use {', '.join(_PROCESSES)}",
                    index_path(key_path(path, "processes"), i),
                )
        processes = frozenset(listed) if listed else None
    label_selector = _selector(data.get("labelSelector"), key_path(path, "labelSelector"), reader)
    namespace_selector = _selector(data.get("namespaceSelector"), key_path(path, "namespaceSelector"), reader)
    name = data.get("name")
    if name is not None and (not isinstance(name, str) or not _GLOB.match(name)):
        reader.add(
            f"name {name!r} must be an object name, optionally with * at the start and/or end",
            key_path(path, "name"),
            schema=True,
        )
    source = data.get("source", "All")
    if source not in _SOURCES:
        reader.add(
            f"source must be one of {', '.join(_SOURCES)}, not {source!r}",
            key_path(path, "source"),
            schema=True,
        )
    if reader.errors:
        return None, sorted(reader.errors, key=lambda e: (e.location.line or 0, e.location.column or 0))
    return Match(
        kinds=kinds or (),
        scope=scope if isinstance(scope, str) else None,
        namespaces=namespaces,
        excluded_namespaces=excluded,
        processes=processes,
        label_selector=label_selector,
        namespace_selector=namespace_selector,
        name=name or None,
        source=source,
    ), []


def _kinds(value: Any, path: str, reader: _Reader) -> tuple[KindSelector, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        reader.add("kinds must be a list of {apiGroups, kinds}", path, schema=True)
        return None
    selectors = []
    for i, entry in enumerate(value):
        entry_path = index_path(path, i)
        if not isinstance(entry, Mapping):
            reader.add("must be a map with apiGroups and kinds", entry_path, schema=True)
            continue
        reader.unknown(entry, frozenset({"apiGroups", "kinds"}), entry_path)
        groups = reader.strings(entry.get("apiGroups", []), key_path(entry_path, "apiGroups"))
        kinds = reader.strings(entry.get("kinds", []), key_path(entry_path, "kinds"))
        if groups is None or kinds is None:
            continue
        selectors.append(
            KindSelector(
                groups=None if not groups or WILDCARD in groups else frozenset(groups),
                kinds=None if not kinds or WILDCARD in kinds else frozenset(kinds),
            )
        )
    return tuple(selectors)


def _globs(value: Any, path: str, reader: _Reader) -> tuple[str, ...] | None:
    if value is None:
        return None
    listed = reader.strings(value, path)
    if listed is None:
        return None
    for i, pattern in enumerate(listed):
        if not _GLOB.match(pattern):
            reader.add(
                f"{pattern!r} must be a namespace name, optionally with * at the start and/or end",
                index_path(path, i),
                schema=True,
            )
    return tuple(listed) or None


def _selector(value: Any, path: str, reader: _Reader) -> LabelSelector | None:
    """metav1.LabelSelectorAsSelector with ValidateLabelSelector's checks."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        reader.add("must be a label selector (matchLabels, matchExpressions)", path)
        return None
    reader.unknown(value, _SELECTOR_KEYS, path)
    requirements: list[Requirement] = []
    labels = value.get("matchLabels")
    labels_path = key_path(path, "matchLabels")
    if labels is not None:
        if not isinstance(labels, Mapping):
            reader.add("matchLabels must be a map of label keys to values", labels_path)
        else:
            for label_key, label_value in labels.items():
                where = key_path(labels_path, label_key)
                _check_key(label_key, where, reader, key_position=True)
                if not isinstance(label_value, str):
                    reader.add("a label value must be a string", where)
                    continue
                _check_value(label_value, where, reader)
                requirements.append(Requirement(label_key, "In", frozenset({label_value})))
    expressions = value.get("matchExpressions")
    expressions_path = key_path(path, "matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            reader.add("matchExpressions must be a list", expressions_path)
            expressions = []
        for i, expression in enumerate(expressions):
            where = index_path(expressions_path, i)
            requirement = _requirement(expression, where, reader)
            if requirement is not None:
                requirements.append(requirement)
    return LabelSelector(tuple(requirements))


def _requirement(value: Any, path: str, reader: _Reader) -> Requirement | None:
    if not isinstance(value, Mapping):
        reader.add("must be a map with key, operator and values", path)
        return None
    reader.unknown(value, _REQUIREMENT_KEYS, path)
    key, operator, values = value.get("key"), value.get("operator"), value.get("values")
    if not isinstance(key, str):
        reader.add("Required value: key", key_path(path, "key"))
        return None
    _check_key(key, key_path(path, "key"), reader)
    if operator not in _OPERATORS:
        reader.add(
            f"Unsupported value: {operator!r}: supported values: {', '.join(_OPERATORS)}",
            key_path(path, "operator"),
        )
        return None
    listed = [] if values is None else reader.strings(values, key_path(path, "values"))
    if listed is None:
        return None
    if operator in ("In", "NotIn") and not listed:
        reader.add(
            "Required value: must be specified when `operator` is 'In' or 'NotIn'", key_path(path, "values")
        )
    if operator in ("Exists", "DoesNotExist") and listed:
        reader.add(
            "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            key_path(path, "values"),
        )
    for i, item in enumerate(listed):
        _check_value(item, index_path(key_path(path, "values"), i), reader)
    return Requirement(key, operator, frozenset(listed))


def _check_key(key: str, path: str, reader: _Reader, *, key_position: bool = False) -> None:
    """A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        reader.add(
            f"Invalid value: {key!r}: prefix part must be a lowercase DNS subdomain", path, key=key_position
        )
    elif not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        reader.add(
            f"Invalid value: {key!r}: name part must consist of alphanumeric characters, '-', '_' or "
            "'.', and must start and end with an alphanumeric character (at most 63 characters)",
            path,
            key=key_position,
        )


def _check_value(value: str, path: str, reader: _Reader) -> None:
    if value and (len(value) > 63 or not _QUALIFIED_NAME.match(value)):
        reader.add(
            f"Invalid value: {value!r}: a label value must be empty or consist of alphanumeric "
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(at most 63 characters)",
            path,
        )
