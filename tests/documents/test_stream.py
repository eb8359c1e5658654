"""documents.stream: objects read one at a time (a List's items one by one), every one accounted for,
located, with the limits objects have. Their values are kubectl's: tests/documents/test_stream_kubectl.py."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.documents import stream
from celkeeper.documents.stream import Settled, Streamed, Unread, read_objects
from celkeeper.errors import DocumentError
from tests.documents.test_parse_composers import ODD_CASES


def pieces(text: str | bytes, name: str = "objects.yaml") -> list[Any]:
    data = text.encode() if isinstance(text, str) else text
    return list(read_objects(io.BytesIO(data), name))


def objects(text: str | bytes, name: str = "objects.yaml") -> list[Streamed]:
    """The objects that stand (tentative ones withdrawn by a Settled are left out)."""
    out: list[Streamed] = []
    pending: list[Streamed] = []
    for piece in pieces(text, name):
        if isinstance(piece, Streamed):
            (pending if piece.tentative else out).append(piece)
        elif isinstance(piece, Settled):
            if piece.is_list:
                out.extend(pending)
            pending = []
    return out


def problems(text: str | bytes, name: str = "objects.yaml") -> list[str]:
    found = []
    for piece in pieces(text, name):
        if isinstance(piece, Unread):
            found.append(f"{piece.reason}: {piece.error}")
        elif isinstance(piece, DocumentError):
            found.append(str(piece))
    return found


def pod(name: str, namespace: str = "shop", **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, **extra}


def kubectl_yaml(items: list[dict[str, Any]], kind: str = "List") -> str:
    """What `kubectl get -o yaml` prints: the items before the kind."""
    document = {"apiVersion": "v1", "items": items, "kind": kind, "metadata": {"resourceVersion": ""}}
    return yaml.safe_dump(document)


# -- Lists ---------------------------------------------------------------------------------------------------


def test_a_list_of_n_objects_gives_n_objects_located_by_item() -> None:
    found = objects(kubectl_yaml([pod(f"p{i}") for i in range(50)]))
    assert [o.data["metadata"]["name"] for o in found] == [f"p{i}" for i in range(50)]
    assert {(o.document, o.path) for o in found[:2]} == {(1, "items[0]"), (1, "items[1]")}
    assert (found[0].line, found[0].column) == (3, 3)
    assert str(found[1].location()).startswith("objects.yaml:")
    assert str(found[1].location()).endswith(": document 1: items[1]")


def test_items_before_the_kind_are_tentative_until_the_kind_says_list() -> None:
    found = pieces(kubectl_yaml([pod("a"), pod("b")]))
    assert [type(p).__name__ for p in found] == ["Streamed", "Streamed", "Settled"]
    assert all(p.tentative for p in found[:2])
    assert found[2] == Settled("objects.yaml", 1, True, 2)


def test_items_after_the_kind_are_handed_out_as_they_come() -> None:
    text = json.dumps({"kind": "List", "apiVersion": "v1", "items": [pod("a"), pod("b")]})
    found = pieces(text, "objects.json")
    assert [(type(p).__name__, getattr(p, "tentative", None)) for p in found] == [
        ("Streamed", False),
        ("Streamed", False),
    ]


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_a_typed_list_gives_its_items_its_kind(fmt: str) -> None:
    # GET /api/v1/pods: items carry no apiVersion or kind; kubectl's order puts them first
    items = [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]
    document = {"apiVersion": "v1", "items": items, "kind": "PodList"}
    text = yaml.safe_dump(document) if fmt == "yaml" else json.dumps(document)
    found = objects(text, f"pods.{fmt}")
    assert [(o.data["apiVersion"], o.data["kind"], o.data["metadata"]["name"]) for o in found] == [
        ("v1", "Pod", "a"),
        ("v1", "Pod", "b"),
    ]


def test_items_held_for_their_kind_go_to_a_file_beyond_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "HELD_IN_MEMORY", 20)  # a few items in memory, the rest in a file
    items = [{"metadata": {"name": f"p{i}", "labels": {"n": str(i)}}} for i in range(40)]
    found = objects(yaml.safe_dump({"apiVersion": "v1", "items": items, "kind": "PodList"}))
    assert [o.data["metadata"]["name"] for o in found] == [f"p{i}" for i in range(40)]
    assert all(o.data["kind"] == "Pod" for o in found)


def test_a_document_whose_items_come_before_another_kind_is_one_object() -> None:
    text = "apiVersion: example.com/v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n"
    text += "kind: Bundle\n"
    found = pieces(text)
    assert found[1] == Settled("objects.yaml", 1, False, 1)
    assert found[2].data == {
        "apiVersion": "example.com/v1",
        "kind": "Bundle",
        "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}],
    }
    assert not found[2].tentative


def test_a_list_inside_a_list_and_items_that_are_not_objects() -> None:
    inner = {"apiVersion": "v1", "kind": "List", "items": [pod("deep")]}
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod("a"), inner, 7]})
    assert [o.data["metadata"]["name"] for o in objects(text, "l.json")] == ["a", "deep"]
    assert problems(text, "l.json") == [
        "not an object: l.json:1:1: document 1: items[2]: a List item must be an object (a mapping), "
        "not a number"
    ] or problems(text, "l.json")[0].startswith("not an object: l.json:1:")


# -- streams -------------------------------------------------------------------------------------------------


def test_a_stream_gives_each_document_and_skips_empty_ones() -> None:
    text = "---\n".join(yaml.safe_dump(pod(f"p{i}")) for i in range(5)) + "---\n---\n# nothing\n"
    found = objects(text)
    assert [(o.document, o.item, o.data["metadata"]["name"]) for o in found] == [
        (i + 1, None, f"p{i}") for i in range(5)
    ]
    assert problems(text) == []


def test_a_json_stream_one_document_per_line() -> None:
    text = "\n".join(json.dumps(pod(f"p{i}")) for i in range(3))
    assert [(o.document, o.line) for o in objects(text, "s.json")] == [(1, 1), (2, 2), (3, 3)]


def test_json_the_json_reader_does_not_read_goes_to_yaml() -> None:
    # YAML's flow style; NaN (a string in YAML) in an item; a `---` after a JSON document
    flow = objects("{apiVersion: v1, kind: Pod, metadata: {name: a}}\n", "flow.json")
    assert flow[0].data["metadata"]["name"] == "a"
    item = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n"}, "x": "NaN"}
    text = '{"kind": "List", "apiVersion": "v1", "items": [' + json.dumps(item).replace('"NaN"', "NaN") + "]}"
    assert [o.data for o in objects(text, "nan.json")] == [item]
    yaml_after = "\n---\nkind: Pod\napiVersion: v1\nmetadata: {name: b}\n"
    mixed = objects(json.dumps(pod("a")) + yaml_after, "m.json")
    assert [(o.document, o.data["metadata"]["name"]) for o in mixed] == [(1, "a"), (2, "b")]


# -- problems ------------------------------------------------------------------------------------------------


def test_a_nul_byte_is_a_located_error() -> None:
    # libyaml checks what it has read before parsing it: the documents of the same chunk are not read
    text = b"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: P\x00d\n"
    assert problems(text) == [
        "objects.yaml:6:8: cannot read: unacceptable character #x0000: control characters are not allowed"
    ]


def test_text_that_is_not_utf8_is_a_located_error() -> None:
    found = problems(b'{"apiVersion": "v1",\n "kind": "Pod", "x": "\xff"}', "bad.json")
    assert found == ["bad.json:2:23: cannot read: not UTF-8 text (invalid start byte)"]


def test_an_invalid_item_is_reported_and_the_others_are_read() -> None:
    text = "kind: List\napiVersion: v1\nitems:\n"
    text += "- {apiVersion: v1, kind: Pod, metadata: {name: a}, x: 1, x: 2}\n"
    text += "- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n"
    assert [o.data["metadata"]["name"] for o in objects(text)] == ["b"]
    assert problems(text) == ["invalid: objects.yaml:4:58: document 1: items[0]: duplicate key 'x'"]


def test_a_syntax_error_withdraws_the_tentative_items_of_its_document() -> None:
    text = "apiVersion: v1\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n- [unclosed\n"
    found = pieces(text)
    assert found[1] == Settled("objects.yaml", 1, False, 1, failed=True)
    assert isinstance(found[2], DocumentError) and "syntax error" in str(found[2])
    assert str(found[2]).startswith("objects.yaml:5:1: document 1: ")


def test_an_object_over_the_values_limit_says_which_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "MAX_OBJECT_VALUES", 50)
    big = pod("big", data={f"k{i}": "v" for i in range(60)})
    text = kubectl_yaml([pod("a"), big, pod("c")])
    assert [o.data["metadata"]["name"] for o in objects(text)] == ["a", "c"]
    (problem,) = problems(text)
    assert problem.startswith("too large: objects.yaml:")
    assert ": document 1: items[1]: the object has more than 50 values " in problem


def test_aliases_of_aliases_are_bounded_per_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "MAX_OBJECT_VALUES", 1000)
    laughs = ODD_CASES["aliases of aliases beyond the values budget"]
    assert problems(laughs)[0].startswith("too large: objects.yaml:1:1: document 1: the object has more than")
    assert [o.data for o in objects(laughs)] == [{"next": 1}]


def test_deeper_than_libyaml_reads_is_an_error_not_a_crash() -> None:
    text = "a: " + "[" * 1200 + "]" * 1200 + "\n"
    assert "syntax error" in problems(text)[0] or "nesting" in problems(text)[0]
    assert problems('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "deep.json")


def test_a_document_that_is_not_a_map_is_not_an_object() -> None:
    assert problems("- a\n- b\n") == [
        "not an object: objects.yaml:1:1: document 1: a document must be a mapping (an object with "
        "apiVersion and kind), not a list"
    ]


# -- memory --------------------------------------------------------------------------------------------------


def test_a_large_list_is_never_held_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # reading a List holds one item at a time (and, while its kind is not known, the first items up to
    # REBUILD_VALUES values, here a few Pods'): the memory Python allocates does not grow with the List
    from tests.support.pods import realistic_pod

    monkeypatch.setattr(stream, "REBUILD_VALUES", 2000)

    def peak(count: int) -> int:
        path = tmp_path / f"pods-{count}.yaml"
        items = [realistic_pod(f"p{i}", "shop") for i in range(count)]
        document = {"apiVersion": "v1", "items": items, "kind": "List"}
        path.write_text(yaml.dump(document, Dumper=yaml.CSafeDumper))
        read = 0
        tracemalloc.start()
        try:
            with path.open("rb") as handle:
                for piece in read_objects(handle, str(path)):
                    read += isinstance(piece, Streamed)
            _, found = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert read == count
        return found

    small, large = peak(300), peak(1200)
    assert large < small * 1.25, (small, large)
    assert large < 4 * 1024 * 1024  # the chunks read (1 MiB) and one Pod
