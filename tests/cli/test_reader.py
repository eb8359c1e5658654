"""cli.reader: the objects read by a process of its own give the pieces documents.stream gives in the
tool's process, in order, errors included; a tool reading through it gives the same results."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.cli import inputs
from celkeeper.cli.reader import read_in_child
from celkeeper.documents.stream import Unread, read_objects
from celkeeper.errors import DocumentError
from tests.cli.conftest import EXAMPLES


def pod(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"}, **extra}


def shown(piece: Any) -> str:
    if isinstance(piece, Unread):
        return f"Unread({piece.reason}: {piece.error})"
    return f"DocumentError({piece})" if isinstance(piece, DocumentError) else repr(piece)


def test_the_pieces_are_those_read_here_in_order(tmp_path: Path) -> None:
    kubectl = yaml.safe_dump({"apiVersion": "v1", "items": [pod("a"), pod("b")], "kind": "List"})
    broken = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: c, x: 1, x: 2}\n---\n- not an object\n---\nkind: [\n"
    )
    api = json.dumps({"kind": "PodList", "apiVersion": "v1", "items": [{"metadata": {"name": "d"}}]})
    files = []
    for name, text in (("list.yaml", kubectl), ("broken.yaml", broken), ("pods.json", api)):
        files.append(tmp_path / name)
        files[-1].write_text(text)
    here = []
    for path in files:
        with path.open("rb") as handle:
            here.extend(read_objects(handle, str(path)))
    missing = str(tmp_path / "gone.yaml")
    there = list(read_in_child([(str(p), str(p), None) for p in files] + [(missing, missing, None)]))
    assert [shown(p) for p in there[:-1]] == [shown(p) for p in here]
    assert len(here) == 7
    assert str(there[-1]) == f"{missing}: cannot read: No such file or directory"


def test_a_descriptor_is_read_from_its_start(tmp_path: Path) -> None:
    with (tmp_path / "copy").open("w+b") as copy:
        copy.write(yaml.safe_dump(pod("from-stdin")).encode())
        copy.flush()
        found = list(read_in_child([("<stdin>", None, copy.fileno())]))
        assert [p.data["metadata"]["name"] for p in found] == ["from-stdin"]
        assert os.lseek(copy.fileno(), 0, os.SEEK_CUR) >= 0  # still open here


def test_a_tool_reads_the_same_through_it(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil_copy = (EXAMPLES / "allowed-registries" / "template.yaml").read_text()
    (tmp_path / "template.yaml").write_text(shutil_copy)
    (tmp_path / "constraint.yaml").write_text(
        (EXAMPLES / "allowed-registries" / "constraint.yaml").read_text()
    )
    images = ["docker.io/nginx:1", "registry.example.com/a:1"]
    pods = [pod(f"p{i}", spec={"containers": [{"name": "c", "image": images[i % 2]}]}) for i in range(40)]
    (tmp_path / "pods.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "items": pods, "kind": "List"}))
    here = cli("test", "-f", str(tmp_path))
    monkeypatch.setattr(inputs, "PARALLEL_BYTES", 0)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    through = cli("test", "-f", str(tmp_path))
    assert (through.code, through.out, through.err) == (here.code, here.out, here.err)
    assert here.err == "celkeeper test: summary: 42 objects read, 42 reviewed, 0 not reviewed, 0 errors\n"
    assert len(here.out.splitlines()) == 20
