"""cli.inputs: the sources of `audit` and `test` (folders, standard input), the first pass that finds the
policies and Namespaces among the objects, the objects evaluated as they are read, and the count of
everything."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.cli.inputs import Inputs, Source
from celkeeper.documents import Document
from celkeeper.documents.stream import Streamed
from celkeeper.gator.kinds import is_policy_document
from tests.cli.conftest import EXAMPLES

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}}


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "prod"}}


def found_in(paths: list[Path]) -> tuple[list[Document], list[str]]:
    """The policy documents the first pass finds, and the sources it parsed."""
    inputs: Inputs[Any] = Inputs("test", "reviewed")
    sources = inputs.sources([str(p) for p in paths])
    parsed: list[str] = []
    find = inputs._find

    def spy(source: Source, *args: Any) -> list[Document]:
        parsed.append(source.name)
        return find(source, *args)

    inputs._find = spy  # type: ignore[method-assign]
    return inputs.policies(sources, is_policy=is_policy_document, report=lambda _: False), parsed


def test_the_first_pass_parses_only_files_that_can_hold_a_policy(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "---\n".join(yaml.safe_dump(pod(f"p{i}")) for i in range(20)) + "---\n" + yaml.safe_dump(NAMESPACE)
    )
    template = EXAMPLES / "allowed-registries" / "template.yaml"
    listed = tmp_path / "z-listed.yaml"
    listed.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [yaml.safe_load(template.read_text())]})
    )
    documents, parsed = found_in([pods, template, listed])
    assert parsed == [str(template), str(listed)]  # pods.yaml names no policy kind: not parsed
    assert [(d.kind, d.file, d.index) for d in documents] == [
        ("ConstraintTemplate", str(template), 1),
        ("ConstraintTemplate", str(listed), 1),  # an item of a List
    ]
    assert documents[0].location("spec.crd").line == 11  # read again by the policy reader: fields located


@pytest.mark.parametrize(
    "disguise",
    [
        '"ConstraintTempl\\u0061te"',  # a JSON or YAML escape
        '"ConstraintTempl\\x61te"',
        '"ConstraintTem\\\n  plate"',  # a double-quoted line continued by a backslash
    ],
)
def test_a_name_spelled_with_escapes_is_still_found(tmp_path: Path, disguise: str) -> None:
    text = (EXAMPLES / "allowed-registries" / "template.yaml").read_text()
    path = tmp_path / "t.yaml"
    path.write_text(text.replace("kind: ConstraintTemplate", f"kind: {disguise}", 1))
    documents, parsed = found_in([path])
    assert parsed == [str(path)]
    assert [d.kind for d in documents] == ["ConstraintTemplate"]


def test_utf16_text_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes((EXAMPLES / "allowed-registries" / "template.yaml").read_text().encode("utf-16"))
    documents, parsed = found_in([path])
    assert (parsed, [d.kind for d in documents]) == ([str(path)], ["ConstraintTemplate"])


class Seen:
    """A sink that records each object's name and the Namespace it saw."""

    def __init__(self, inputs: Inputs[Any]) -> None:
        self.inputs = inputs
        self.recorded: list[tuple[str, Any]] = []

    def evaluate(self, obj: Streamed) -> tuple[str, Any]:
        namespace = self.inputs.namespaces.get(obj.data["metadata"].get("namespace", ""))
        return str(obj.data["metadata"]["name"]), (namespace or {}).get("metadata", {}).get("labels")

    def record(self, result: tuple[str, Any]) -> None:
        self.inputs.read += 1
        self.recorded.append(result)


def consumed(*texts: str, tmp_path: Path) -> tuple[Inputs[Any], list[tuple[str, Any]]]:
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"{i}.yaml")
        paths[-1].write_text(text)
    inputs: Inputs[Any] = Inputs("test", "reviewed")
    sink = Seen(inputs)
    inputs.consume(inputs.sources([str(p) for p in paths]), sink)
    return inputs, sink.recorded


def test_objects_see_their_namespace_even_when_it_comes_after_them(tmp_path: Path) -> None:
    before = yaml.safe_dump(pod("early"))
    after = yaml.safe_dump(NAMESPACE) + "---\n" + yaml.safe_dump(pod("late"))
    inputs, recorded = consumed(before, after, tmp_path=tmp_path)
    assert sorted(recorded) == [
        ("early", {"env": "prod"}),
        ("late", {"env": "prod"}),
        ("prod", None),  # this sink looks a Namespace up by its metadata.namespace (none)
    ]
    assert inputs.read == 3  # "early" evaluated twice, counted once


def test_the_last_namespace_of_a_name_is_the_one_every_object_sees(tmp_path: Path) -> None:
    other = {**NAMESPACE, "metadata": {"name": "prod", "labels": {"env": "other"}}}
    text = "---\n".join(yaml.safe_dump(d) for d in (NAMESPACE, pod("a"), other, pod("b")))
    _, recorded = consumed(text, tmp_path=tmp_path)
    assert sorted(recorded) == [
        ("a", {"env": "other"}),
        ("b", {"env": "other"}),
        ("prod", None),
        ("prod", None),
    ]


def test_tentative_items_count_only_once_their_list_stands(tmp_path: Path) -> None:
    class Sink:
        def __init__(self) -> None:
            self.recorded: list[str] = []

        def evaluate(self, obj: Streamed) -> str:
            return str(obj.data["metadata"]["name"])

        def record(self, result: str) -> None:
            self.recorded.append(result)

    bundle = "apiVersion: example.com/v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: inner}\n"
    bundle += "kind: Bundle\nmetadata: {name: bundle}\n---\n"
    kubectl = yaml.safe_dump({"apiVersion": "v1", "items": [pod("a"), pod("b")], "kind": "List"})
    broken = "apiVersion: v1\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: c}}\n- [\n"
    path = tmp_path / "objects.yaml"
    path.write_text(bundle + kubectl + "---\n" + broken)
    inputs: Inputs[str] = Inputs("test", "reviewed")
    sink = Sink()
    inputs.consume(inputs.sources([str(path)]), sink)
    assert sink.recorded == ["bundle", "a", "b"]  # the Bundle is one object; c's document is broken
    assert inputs.errors == 1
    assert (inputs.read, dict(inputs.not_done)) == (1, {"in a document not read to its end": 1})


def test_standard_input_is_copied_once_and_read_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(NAMESPACE) + "\n" + json.dumps(pod("a"))))
    inputs: Inputs[Any] = Inputs("audit", "audited")
    try:
        sources = inputs.sources(["-"])
        assert [s.name for s in sources] == ["<stdin>"]
        first = [p.data["kind"] for p in inputs.objects(sources) if isinstance(p, Streamed)]
        second = [p.data["kind"] for p in inputs.objects(sources) if isinstance(p, Streamed)]
    finally:
        inputs.close()
    assert first == second == ["Namespace", "Pod"]


def test_the_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    inputs: Inputs[Any] = Inputs("audit", "audited")
    assert inputs.summary() == "celkeeper audit: summary: 0 objects read, 0 audited, 0 not audited, 0 errors"
    inputs.read, inputs.done = 5, 2
    inputs.not_evaluated("too large", "x.yaml:3:1: document 1: items[2]: too large")
    inputs.not_evaluated("AdmissionReview")
    inputs.not_evaluated("policy document")
    inputs.error("x.yaml:3:1: document 1: items[2]: too large")  # said once
    assert inputs.summary() == (
        "celkeeper audit: summary: 8 objects read, 2 audited, 3 not audited "
        "(policy document: 1, AdmissionReview: 1, too large: 1), 1 errors"
    )
    assert capsys.readouterr().err == "celkeeper audit: x.yaml:3:1: document 1: items[2]: too large\n"


def test_objects_held_whole_are_read_as_every_object_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # test --cluster's manifests, explain's object and vap's webhook configuration: kubectl's reading (a
    # List item by item, `yes` a boolean), every problem located and returned, nothing skipped
    from celkeeper.cli.inputs import object_documents

    (tmp_path / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {hostPID: yes}}\n"
        "- {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {hostPID: yes, hostPID: no}}\n"
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pod.json").write_text(json.dumps(pod("c") | {"spec": {"priority": 1.0}}))
    documents, errors = object_documents([str(tmp_path)])
    assert [(d.name, d.data["spec"]) for d in documents] == [("a", {"hostPID": True}), ("c", {"priority": 1})]
    assert [str(e) for e in errors] == [
        f"{tmp_path}/list.yaml:5:73: document 1: items[1]: duplicate key 'hostPID'"
    ]
    assert type(documents[1].data["spec"]["priority"]) is int  # as kubectl holds 1.0: an int64
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n"))
    documents, errors = object_documents(["-"])
    assert [(d.file, d.name) for d in documents] == [("<stdin>", "x")] and not errors
