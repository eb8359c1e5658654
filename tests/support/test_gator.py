"""run_gator_over keeps a folder's answer by the binary, the arguments and the folder's files: the same
ones are answered from what was kept (the binary does not run again), any change runs it. The binary here
is a script that counts its runs and prints its arguments and what it read."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.gator import run_gator_over

SCRIPT = """#!/bin/sh
echo run >> "{runs}"
echo "args: $*"
cat "{root}/a/suite.yaml"
echo "to stderr: {root}" >&2
exit 1
"""


def _binary(tmp_path: Path, root: Path, text: str = SCRIPT) -> Path:
    binary = tmp_path / "bin" / "gator"
    binary.parent.mkdir(exist_ok=True)
    binary.write_text(text.format(runs=tmp_path / "runs", root=root))
    binary.chmod(0o755)
    return binary


def _runs(tmp_path: Path) -> int:
    path = tmp_path / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_the_same_files_are_answered_from_what_was_kept(tmp_path: Path) -> None:
    root = tmp_path / "one"
    (root / "a").mkdir(parents=True)
    (root / "a" / "suite.yaml").write_text("kind: Suite\n")
    binary = _binary(tmp_path, root)

    first = run_gator_over(binary, ["verify", f"{root}/..."], root)
    assert (first.code, _runs(tmp_path)) == (1, 1)
    assert first.out == f"args: verify {root}/...\nkind: Suite\n" and first.err == f"to stderr: {root}\n"
    assert run_gator_over(binary, ["verify", f"{root}/..."], root) == first
    assert _runs(tmp_path) == 1

    # the same files in another folder: the answer names that folder
    other = tmp_path / "two"
    shutil.copytree(root, other)
    moved = run_gator_over(binary, ["verify", f"{other}/..."], other)
    assert _runs(tmp_path) == 1
    assert moved.out == f"args: verify {other}/...\nkind: Suite\n" and moved.err == f"to stderr: {other}\n"


def test_a_changed_file_argument_or_binary_runs_gator(tmp_path: Path) -> None:
    root = tmp_path / "one"
    (root / "a").mkdir(parents=True)
    suite = root / "a" / "suite.yaml"
    suite.write_text("kind: Suite\n")
    binary = _binary(tmp_path, root)
    run_gator_over(binary, ["verify", f"{root}/..."], root)

    suite.write_text("kind: Suite # changed\n")
    changed = run_gator_over(binary, ["verify", f"{root}/..."], root)
    assert _runs(tmp_path) == 2 and "# changed" in changed.out

    (root / "a" / "objects.yaml").write_text("{}\n")  # a file more
    run_gator_over(binary, ["verify", f"{root}/..."], root)
    assert _runs(tmp_path) == 3

    run_gator_over(binary, ["verify", "-v", f"{root}/..."], root)
    assert _runs(tmp_path) == 4

    _binary(tmp_path, root, SCRIPT + "# another build\n")
    os.utime(binary)
    run_gator_over(binary, ["verify", "-v", f"{root}/..."], root)
    assert _runs(tmp_path) == 5
