"""Documents: YAML 1.2 / JSON text into plain data with the position of every field."""

from __future__ import annotations

import math
import textwrap

import pytest

from celkeeper.documents import (
    Document,
    field_path,
    parent_path,
    parse_documents,
    parse_sources,
)
from celkeeper.errors import DocumentError
from tests.support.policydocs import doc


def test_yaml_1_2_scalars_follow_the_core_schema() -> None:
    data = doc("""
        yes_: yes
        no_: no
        on_: on
        off_: Off
        y_: y
        true_: true
        True_: True
        octal_like: 012
        octal: 0o14
        hex: 0x1F
        float_: 1.5
        exp: 1e3
        inf: .inf
        neg_inf: -.inf
        null_: null
        tilde: ~
        empty:
        date: 2024-01-02
        time: 2024-01-02T10:00:00Z
        quoted_int: "12"
        tagged: !!str 12
        """).data
    assert data["yes_"] == "yes" and data["no_"] == "no" and data["on_"] == "on" and data["off_"] == "Off"
    assert data["y_"] == "y"
    assert data["true_"] is True and data["True_"] is True
    assert data["octal_like"] == 12 and data["octal"] == 12 and data["hex"] == 31
    assert data["float_"] == 1.5 and data["exp"] == 1000.0
    assert data["inf"] == math.inf and data["neg_inf"] == -math.inf
    assert data["null_"] is None and data["tilde"] is None and data["empty"] is None
    # timestamps stay text, as Kubernetes (JSON) reads them
    assert data["date"] == "2024-01-02" and data["time"] == "2024-01-02T10:00:00Z"
    assert data["quoted_int"] == "12" and data["tagged"] == "12"
    assert all(type(v) in (str, int, float, bool, type(None)) for v in data.values())


def test_block_scalars_anchors_and_merge_keys() -> None:
    data = doc("""
        literal: |
          line one
            indented
        folded: >-
          folded
          text
        base: &base {a: 1, b: 2}
        derived:
          <<: *base
          b: 3
        """).data
    assert data["literal"] == "line one\n  indented\n"
    assert data["folded"] == "folded text"
    assert data["derived"] == {"a": 1, "b": 3}
    assert type(data["literal"]) is str


def test_every_field_has_a_position_and_key_position() -> None:
    d = doc("""
        apiVersion: v1
        kind: Pod
        metadata:
          name: web
          labels:
            app.kubernetes.io/name: web
        spec:
          containers:
            - name: c
              image: nginx
        """)
    assert str(d.location("kind")) == "test.yaml:2:7: document 1: kind"
    assert str(d.location("kind", key=True)) == "test.yaml:2:1: document 1: kind"
    assert (
        str(d.location("spec.containers[0].image")) == "test.yaml:10:14: document 1: spec.containers[0].image"
    )
    label = "metadata.labels[app.kubernetes.io/name]"
    assert d.location(label).line == 6 and d.location(label).column == 29
    # a missing field is located at its nearest enclosing field (at its key)
    missing = d.location("spec.containers[0].securityContext.privileged")
    assert (missing.line, missing.column) == (9, 7)
    assert missing.path == "spec.containers[0].securityContext.privileged"


def test_document_identity() -> None:
    d = doc("""
        apiVersion: constraints.gatekeeper.sh/v1beta1
        kind: K8sRequiredLabels
        metadata: {name: must-have-owner}
        """)
    assert (d.group, d.version, d.kind, d.name) == (
        "constraints.gatekeeper.sh",
        "v1beta1",
        "K8sRequiredLabels",
        "must-have-owner",
    )
    assert d.index == 1 and d.file == "test.yaml"
    assert "K8sRequiredLabels" in repr(d)


def test_multi_document_numbers_count_empty_documents() -> None:
    text = "a: 1\n---\n# only a comment\n---\nb: 2\n---\n"
    parsed = parse_documents(text, "multi.yaml")
    assert [(d.index, d.data) for d in parsed.documents] == [(1, {"a": 1}), (3, {"b": 2})]
    assert parsed.errors == ()


def test_syntax_error_keeps_the_documents_before_it() -> None:
    text = "a: 1\n---\nb: [1, 2\nc: 3\n"
    parsed = parse_documents(text, "broken.yaml")
    assert [d.data for d in parsed.documents] == [{"a": 1}]
    (err,) = parsed.errors
    assert isinstance(err, DocumentError)
    assert str(err).startswith("broken.yaml:4:2: document 2: YAML/JSON syntax error: ")
    assert "flow sequence" in str(err)


def test_duplicate_keys_are_errors() -> None:
    parsed = parse_documents("a: 1\nb:\n  c: 1\n  c: 2\n", "dup.yaml")
    assert parsed.documents == ()
    assert [str(e) for e in parsed.errors] == [
        "dup.yaml:4:3: document 1: b.c: duplicate key 'c' (first at line 3)"
    ]


def test_a_document_must_be_a_mapping() -> None:
    parsed = parse_documents("- a\n- b\n---\nok: 1\n---\njust text\n", "list.yaml")
    assert [d.index for d in parsed.documents] == [2]
    assert [str(e) for e in parsed.errors] == [
        "list.yaml:1:1: document 1: a document must be a mapping (an object with apiVersion and kind), not "
        "a list",
        "list.yaml:6:1: document 3: a document must be a mapping (an object with apiVersion and kind), not "
        "a string",
    ]


def test_json_documents_with_positions() -> None:
    text = (
        '{\n  "apiVersion": "v1",\n  "kind": "Pod",\n'
        '  "metadata": {"name": "x", "labels": {"on": "yes"}}\n}\n'
    )
    parsed = parse_documents(text, "pod.json")
    (d,) = parsed.documents
    assert d.data == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"on": "yes"}}}
    assert (d.location("metadata.name").line, d.location("metadata.name").column) == (4, 24)


def test_concatenated_json_objects() -> None:
    text = '{"a": 1}\n{"b": [1,\n  2]}\n'
    parsed = parse_documents(text, "stream.json")
    assert [(d.index, d.data) for d in parsed.documents] == [(1, {"a": 1}), (2, {"b": [1, 2]})]
    second = parsed.documents[1]
    assert (second.location("b[1]").line, second.location("b[1]").column) == (3, 3)


def test_parse_sources_keeps_names_and_order() -> None:
    parsed = parse_sources([("one.yaml", "a: 1\n"), ("two.yaml", "- x\n"), ("three.yaml", "b: 2\n")])
    assert [(d.file, d.data) for d in parsed.documents] == [("one.yaml", {"a": 1}), ("three.yaml", {"b": 2})]
    assert [e.location.file for e in parsed.errors] == ["two.yaml"]


def test_field_paths() -> None:
    assert field_path("spec", "targets", 0, "code", 1, "source") == "spec.targets[0].code[1].source"
    assert (
        field_path("metadata", "labels", "app.kubernetes.io/name")
        == "metadata.labels[app.kubernetes.io/name]"
    )
    assert parent_path("spec.targets[0].code") == "spec.targets[0]"
    assert parent_path("spec.targets[0]") == "spec.targets"
    assert parent_path("metadata.labels[a/b]") == "metadata.labels"
    assert parent_path("spec") == ""
    assert parent_path("") is None


def test_document_errors_carry_file_document_path_and_position() -> None:
    d = doc("a: 1\nspec:\n  x: 2\n", "f.yaml")
    err = d.error(DocumentError, "bad value", "spec.x")
    assert str(err) == "f.yaml:3:6: document 1: spec.x: bad value"
    assert str(Document.from_object({"a": 1}, file="<cluster>").error(DocumentError, "m", "a")) == (
        "<cluster>: document 1: a: m"
    )


@pytest.mark.parametrize(
    ("yaml", "inner", "expected"),
    [
        # literal block: exact, line by line
        ("e: |\n  a &&\n    b.c\n", (2, 3), (3, 5)),
        ("e: |\n  a &&\n    b.c\n", (1, 1), (2, 3)),
        # single-line plain and quoted scalars: exact
        ("e: a && b\n", (1, 6), (1, 9)),
        ("e: 'a && b'\n", (1, 6), (1, 10)),
        ('e: "a && b"\n', (1, 1), (1, 5)),
        # a plain scalar folded over lines
        ("e: a &&\n  b.c\n", (1, 6), (2, 3)),
        # a folded block
        ("e: >-\n  one\n  two\n", (1, 5), (3, 3)),
    ],
)
def test_expression_positions_map_into_the_file(
    yaml: str, inner: tuple[int, int], expected: tuple[int, int]
) -> None:
    d = doc(yaml)
    assert d.expression_position("e", *inner) == expected
    line, column = expected
    source_line = textwrap.dedent(yaml).splitlines()[line - 1]
    value = d.data["e"]
    inner_line = value.splitlines()[inner[0] - 1] if "\n" in value else value
    assert source_line[column - 1] == inner_line[inner[1] - 1]


def test_expression_position_unknown_without_source_text() -> None:
    d = Document.from_object({"e": "a && b"})
    assert d.expression_position("e", 1, 1) is None


def test_json_that_yaml_refuses_is_still_read() -> None:
    # YAML limits implicit keys to 1024 characters; JSON does not
    key = "k" * 2000
    parsed = parse_documents('{"' + key + '": 1}\n{"b": 2}\n', "long.json")
    assert [d.data for d in parsed.documents] == [{key: 1}, {"b": 2}]
    assert parsed.errors == ()
    first = parsed.documents[0]
    assert (first.location(key).line, first.location(key).column) == (1, 1)  # only the document's position


def test_a_character_yaml_does_not_allow_is_one_located_line() -> None:
    # a NUL byte: ruamel.yaml words it on two lines, with an offset; the error is one line, at line:col
    parsed = parse_documents(
        "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\n\x00tests: []\n", "suite.yaml"
    )
    assert [str(e) for e in parsed.errors] == [
        "suite.yaml:3:1: cannot read: unacceptable character #x0000: special characters are not allowed"
    ]


def test_what_looks_like_a_number_and_is_not_one_stays_as_written() -> None:
    # YAML 1.2's int pattern takes `-_` and `0x_`, which are no numbers (no crash: the text as written)
    parsed = parse_documents("a: -_\nb: 0x_\nc: !!int abc\nd: 0x1F\n", "odd.yaml")
    assert [d.data for d in parsed.documents] == [{"a": "-_", "b": "0x_", "c": "abc", "d": 31}]
