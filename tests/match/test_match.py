"""spec.match, with Gatekeeper's semantics (pkg/mutation/match/match.go and its test table)."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.documents import Document
from celkeeper.match import (
    Match,
    MatchError,
    parse_match,
    wildcard_matches,
    wildcard_matches_generate_name,
)
from tests.support.policydocs import doc


def match_of(data: dict[str, Any]) -> Match:
    match, errors = parse_match(data, Document.from_object({"spec": {"match": data}}))
    assert errors == [], [str(e) for e in errors]
    assert match is not None
    return match


def obj(
    kind: str = "kind",
    group: str = "group",
    namespace: str = "",
    name: str = "name",
    labels: dict[str, str] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind, "metadata": metadata}


def ns(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return obj("Namespace", "", "", name, labels)


KIND_GROUP = {"kinds": [{"kinds": ["kind"], "apiGroups": ["group"]}]}

# (name, match, object, namespace, expected) - Gatekeeper's TestMatch rows, then more
TABLE: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any] | None, bool]] = [
    (
        "match kind with *",
        {"kinds": [{"kinds": ["*"], "apiGroups": ["*"]}]},
        obj(namespace="namespace"),
        ns("namespace"),
        True,
    ),
    (
        "match group and no kinds specified should match",
        {"kinds": [{"kinds": ["notmatching", "neithermatching"], "apiGroups": ["*"]}, {"apiGroups": ["*"]}]},
        obj(namespace="namespace"),
        ns("namespace"),
        True,
    ),
    (
        "match kind and no group specified should match",
        {"kinds": [{"kinds": ["kind", "neithermatching"]}]},
        obj(namespace="namespace"),
        ns("namespace"),
        True,
    ),
    (
        "match kind and group explicit",
        {
            "kinds": [
                {"kinds": ["notmatching", "neithermatching"], "apiGroups": ["*"]},
                {"kinds": ["notmatching", "kind"], "apiGroups": ["*"]},
            ]
        },
        obj(namespace="namespace"),
        ns("namespace"),
        True,
    ),
    (
        "kind group don't matches",
        {
            "kinds": [
                {"kinds": ["notmatching", "neithermatching"], "apiGroups": ["*"]},
                {"kinds": ["notmatching", "kind"], "apiGroups": ["notmatchinggroup"]},
            ]
        },
        obj(namespace="namespace"),
        ns("namespace"),
        False,
    ),
    (
        "namespace matches",
        {"namespaces": ["nonmatching", "namespace"]},
        obj(namespace="namespace"),
        ns("namespace"),
        True,
    ),
    (
        "namespace is not in the matches list",
        {"namespaces": ["nonmatching", "notmatchingeither"]},
        obj(namespace="namespace"),
        ns("namespace"),
        False,
    ),
    (
        "namespace fails if clusterscoped",
        {"namespaces": ["nonmatching", "namespace"], "scope": "Cluster"},
        obj(namespace="namespace"),
        ns("namespace"),
        False,
    ),
    (
        "namespace is excluded",
        {**KIND_GROUP, "namespaces": ["nonmatching", "namespace"], "excludedNamespaces": ["namespace"]},
        obj(namespace="namespace"),
        ns("namespace"),
        False,
    ),
    ("namespace scoped fails if cluster scoped", {**KIND_GROUP, "scope": "Namespaced"}, obj(), None, False),
    (
        "label selector",
        {**KIND_GROUP, "labelSelector": {"matchLabels": {"labelname": "labelvalue"}}},
        obj(labels={"labelname": "labelvalue"}),
        None,
        True,
    ),
    (
        "label selector not matching",
        {
            **KIND_GROUP,
            "labelSelector": {"matchLabels": {"labelname": "labelvalue", "labelnotmatching": "foo"}},
        },
        obj(labels={"labelname": "labelvalue"}),
        None,
        False,
    ),
    (
        "namespace selector",
        {**KIND_GROUP, "namespaceSelector": {"matchLabels": {"labelname": "labelvalue"}}},
        obj(namespace="foo"),
        ns("foo", {"labelname": "labelvalue"}),
        True,
    ),
    (
        "namespace selector not matching",
        {**KIND_GROUP, "namespaceSelector": {"matchLabels": {"labelname": "labelvalue", "foo": "bar"}}},
        obj(namespace="foo"),
        ns("foo", {"labelname": "labelvalue"}),
        False,
    ),
    (
        "namespace selector not matching, but cluster scoped",
        {**KIND_GROUP, "namespaceSelector": {"matchLabels": {"labelname": "labelvalue", "foo": "bar"}}},
        obj(),
        None,
        True,
    ),
    (
        "namespace selector is applied to the object, if the object is a namespace",
        {"namespaceSelector": {"matchLabels": {"labelname": "labelvalue"}}},
        ns("namespace", {"labelname": "labelvalue"}),
        None,
        True,
    ),
    (
        "namespace selector is applied to the namespace, and does not match",
        {"namespaceSelector": {"matchLabels": {"labelname": "badvalue"}}},
        ns("namespace", {"labelname": "labelvalue"}),
        None,
        False,
    ),
    # globs
    ("namespace prefix glob", {"namespaces": ["kube-*"]}, obj(namespace="kube-system"), None, True),
    ("namespace suffix glob", {"namespaces": ["*-system"]}, obj(namespace="gatekeeper-system"), None, True),
    ("namespace contains glob", {"namespaces": ["*sys*"]}, obj(namespace="kube-system-x"), None, True),
    ("namespace glob no match", {"namespaces": ["kube-*"]}, obj(namespace="default"), None, False),
    ("excluded prefix glob", {"excludedNamespaces": ["kube-*"]}, obj(namespace="kube-public"), None, False),
    (
        "excluded glob does not exclude others",
        {"excludedNamespaces": ["kube-*"]},
        obj(namespace="prod"),
        None,
        True,
    ),
    ("cluster-scoped objects always match namespaces", {"namespaces": ["prod"]}, obj(), None, True),
    ("cluster-scoped objects are never excluded", {"excludedNamespaces": ["*"]}, obj(), None, True),
    ("a Namespace's namespace is its own name", {"namespaces": ["prod"]}, ns("prod"), None, True),
    ("a Namespace is excluded by its own name", {"excludedNamespaces": ["prod"]}, ns("prod"), None, False),
    ("the looked-up Namespace's name counts", {"namespaces": ["prod"]}, obj(), ns("prod"), True),
    ("scope Cluster matches a Namespace", {"scope": "Cluster"}, ns("prod"), None, True),
    ("scope Namespaced does not match a Namespace", {"scope": "Namespaced"}, ns("prod"), None, False),
    ("scope Namespaced matches a namespaced object", {"scope": "Namespaced"}, obj(namespace="a"), None, True),
    ("an invalid scope matches everything", {"scope": "cluster"}, obj(namespace="a"), None, True),
    # names
    ("name exact", {"name": "name"}, obj(), None, True),
    ("name exact no match", {"name": "other"}, obj(), None, False),
    ("name prefix glob", {"name": "na*"}, obj(), None, True),
    ("name suffix glob", {"name": "*me"}, obj(), None, True),
    ("prefix glob matches generateName", {"name": "web-*"}, obj(name="", generateName="web-"), None, True),
    (
        "suffix glob does not match generateName",
        {"name": "*-web"},
        obj(name="", generateName="x-web"),
        None,
        False,
    ),
    (
        "exact name does not match generateName",
        {"name": "web-"},
        obj(name="", generateName="web-"),
        None,
        False,
    ),
    # label selector operators
    (
        "In",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["a", "b"]}]}},
        obj(labels={"env": "b"}),
        None,
        True,
    ),
    (
        "In missing label",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["a"]}]}},
        obj(labels={}),
        None,
        False,
    ),
    (
        "NotIn",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}},
        obj(labels={"env": "a"}),
        None,
        False,
    ),
    (
        "NotIn missing label matches",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["a"]}]}},
        obj(),
        None,
        True,
    ),
    (
        "Exists",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]}},
        obj(labels={"env": ""}),
        None,
        True,
    ),
    (
        "DoesNotExist",
        {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}},
        obj(labels={"env": "x"}),
        None,
        False,
    ),
    ("empty selector matches everything", {"labelSelector": {}}, obj(), None, True),
    # source
    ("source Original matches reviewed objects", {"source": "Original"}, obj(), None, True),
    ("source Generated does not", {"source": "Generated"}, obj(), None, False),
]


@pytest.mark.parametrize(
    ("match", "target", "namespace", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_match_table(
    match: dict[str, Any], target: dict[str, Any], namespace: dict[str, Any] | None, expected: bool
) -> None:
    assert match_of(match).matches_any((target, None), namespace) is expected


def test_old_object_is_enough() -> None:
    match = match_of({"labelSelector": {"matchLabels": {"app": "web"}}})
    old = obj(labels={"app": "web"})
    new = obj(labels={"app": "db"})
    assert match.matches_any((new, old), None) is True
    assert match.matches_any((None, old), None) is True  # DELETE
    assert match.matches_any((new, None), None) is False


def test_missing_namespace_for_namespace_selector_is_an_error() -> None:
    match = match_of({"namespaceSelector": {"matchLabels": {"team": "a"}}})
    with pytest.raises(MatchError) as caught:
        match.matches_any((obj(namespace="prod", name="web"), None), None)
    assert str(caught.value) == (
        "error matching the requested object: web :failed to run Match criteria: namespace selector for "
        "namespace-scoped object but missing Namespace"
    )
    with pytest.raises(MatchError) as caught:
        match.matches_any((None, None), None)
    assert str(caught.value) == "invalid request object: neither object nor old object are defined"


def test_processes_limit_excluded_namespaces() -> None:
    match = match_of({"excludedNamespaces": ["kube-*"], "processes": ["audit"]})
    target = obj(namespace="kube-system")
    assert match.matches_any((target, None), None, process="audit") is False
    assert match.matches_any((target, None), None, process="webhook") is True


@pytest.mark.parametrize(
    ("pattern", "candidate", "expected", "generate"),
    [
        ("kube-*", "kube-system", True, True),
        ("*-system", "kube-system", True, False),
        ("*sys*", "kube-system", True, True),
        ("kube-system", "kube-system", True, False),
        ("kube", "kube-system", False, False),
        ("*", "anything", True, True),
        ("*", "", True, True),
    ],
)
def test_wildcards(pattern: str, candidate: str, expected: bool, generate: bool) -> None:
    assert wildcard_matches(pattern, candidate) is expected
    assert wildcard_matches_generate_name(pattern, candidate) is generate


def test_index_keys() -> None:
    assert match_of({}).index_keys() == {(None, None)}
    assert match_of(
        {"kinds": [{"apiGroups": ["", "apps"], "kinds": ["Pod", "Deployment"]}]}
    ).index_keys() == {("", "Pod"), ("", "Deployment"), ("apps", "Pod"), ("apps", "Deployment")}
    assert match_of({"kinds": [{"apiGroups": ["*"], "kinds": ["Pod"]}, {"kinds": ["*"]}]}).index_keys() == {
        (None, "Pod"),
        (None, None),
    }
    assert match_of({"kinds": [{"apiGroups": ["apps"]}]}).index_keys() == {("apps", None)}


def test_parse_errors_are_located() -> None:
    document = doc(
        """
        spec:
          match:
            kinds:
              - apiGroups: [""]
                kind: [Pod]
            namespaces: ["Kube-*"]
            name: "a b"
            scope: 3
            source: Everything
            labelSelector:
              matchLabels:
                "bad key!": x
              matchExpressions:
                - {key: env, operator: In}
                - {key: tier, operator: Exists, values: [a]}
                - {key: x, operator: Equals, values: [a]}
            namespaceSelector:
              matchLabel: {a: b}
            processes: [webhook, controller]
            extra: 1
        """,
        "m.yaml",
    )
    match, errors = parse_match(document.data["spec"]["match"], document)
    assert match is None
    assert [str(e) for e in errors] == [
        'm.yaml:5:9: document 1: spec.match.kinds[0].kind: unknown field "spec.match.kinds[0].kind"',
        "m.yaml:6:18: document 1: spec.match.namespaces[0]: 'Kube-*' must be a namespace name, optionally "
        "with * "
        "at the start and/or end",
        "m.yaml:7:11: document 1: spec.match.name: name 'a b' must be an object name, optionally with * at "
        "the "
        "start and/or end",
        "m.yaml:8:12: document 1: spec.match.scope: scope must be a string (*, Cluster or Namespaced)",
        "m.yaml:9:13: document 1: spec.match.source: source must be one of All, Generated, Original, not "
        "'Everything'",
        "m.yaml:12:9: document 1: spec.match.labelSelector.matchLabels[bad key!]: Invalid value: 'bad "
        "key!': name "
        "part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (at most 63 characters)",
        # a missing field is located at its enclosing entry
        "m.yaml:14:11: document 1: spec.match.labelSelector.matchExpressions[0].values: Required value: "
        "must be "
        "specified when `operator` is 'In' or 'NotIn'",
        "m.yaml:15:49: document 1: spec.match.labelSelector.matchExpressions[1].values: Forbidden: may not "
        "be "
        "specified when `operator` is 'Exists' or 'DoesNotExist'",
        "m.yaml:16:30: document 1: spec.match.labelSelector.matchExpressions[2].operator: Unsupported value: "
        "'Equals': supported values: In, NotIn, Exists, DoesNotExist",
        "m.yaml:18:7: document 1: spec.match.namespaceSelector.matchLabel: unknown field "
        '"spec.match.namespaceSelector.matchLabel"',
        "m.yaml:19:26: document 1: spec.match.processes[1]: unknown process 'controller': use audit, "
        "webhook, "
        "sync, mutation-webhook, *",
        'm.yaml:20:5: document 1: spec.match.extra: unknown field "spec.match.extra"',
    ]
