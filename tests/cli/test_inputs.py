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


def found_in(paths: list[Path], *, policies: bool = True) -> tuple[list[Document], dict[str, Any], list[str]]:
    """The policy documents and Namespaces the first pass finds, and the sources it parsed."""
    inputs: Inputs[Any] = Inputs("test", "reviewed")
    sources = inputs.sources([str(p) for p in paths])
    parsed: list[str] = []
    find = inputs._find

    def spy(source: Source, *args: Any, **kwargs: Any) -> None:
        parsed.append(source.name)
        find(source, *args, **kwargs)

    inputs._find = spy  # type: ignore[method-assign]
    found = inputs.policies(
        sources,
        policies=lambda _: policies,
        namespaces=lambda _: True,
        is_policy=is_policy_document,
        report=lambda _: False,
    )
    return found.documents, found.namespaces, parsed


def test_the_first_pass_parses_only_files_that_can_hold_a_policy_or_a_namespace(tmp_path: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text("---\n".join(yaml.safe_dump(pod(f"p{i}")) for i in range(20)))
    after = tmp_path / "z-namespaces.yaml"
    after.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [NAMESPACE]}))
    template = EXAMPLES / "allowed-registries" / "template.yaml"
    documents, namespaces, parsed = found_in([pods, after, template])
    assert parsed == [str(after), str(template)]  # pods.yaml names neither: not parsed
    assert namespaces == {"prod": NAMESPACE}  # found in a List, after the Pods
    (document,) = documents
    assert document.kind == "ConstraintTemplate"
    assert document.location("spec.crd").line == 11  # read again by the policy reader: fields located


@pytest.mark.parametrize(
    "disguise",
    [
        '"Namesp\\u0061ce"',  # a JSON or YAML escape
        '"Namesp\\x61ce"',
        '"Name\\\n  space"',  # a double-quoted line continued by a backslash
    ],
)
def test_a_name_spelled_with_escapes_is_still_found(tmp_path: Path, disguise: str) -> None:
    path = tmp_path / "ns.yaml"
    path.write_text(f"apiVersion: v1\nkind: {disguise}\nmetadata: {{name: prod}}\n")
    _, namespaces, parsed = found_in([path], policies=False)
    assert parsed == [str(path)]
    assert list(namespaces) == ["prod"]


def test_utf16_text_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "ns.yaml"
    path.write_bytes(yaml.safe_dump(NAMESPACE).encode("utf-16"))
    _, namespaces, parsed = found_in([path], policies=False)
    assert (parsed, list(namespaces)) == ([str(path)], ["prod"])


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
    inputs.consume(inputs.objects(inputs.sources([str(path)])), sink)
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
