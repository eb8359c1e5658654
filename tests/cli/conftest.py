"""Shared helpers for the CLI tests: run `celkeeper` in-process and capture its output."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from unittest import mock

import pytest

from celkeeper.cli.main import main
from celkeeper.gator.verdicts import CACHE_ENV
from celkeeper.settings import ENGINES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> Run:
        capsys.readouterr()
        code = main(list(argv))
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def example_copy(tmp_path: Path):
    """A writable copy of one example folder."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(EXAMPLES / name, target)
        return target

    return copy


SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?(?:, \d+ errors)?$", re.M)


def verify_summary(out: str) -> tuple[int, int]:
    """(passed, failed) from the last summary line `celkeeper verify` printed."""
    found = SUMMARY.findall(out)
    assert found, out
    passed, failed, _ = found[-1]
    return int(passed), int(failed)


def case_count(folder: Path) -> int:
    """The number of cases of the Suites under `folder`."""
    return sum(len(re.findall(r"^\s+object: ", p.read_text(), re.M)) for p in folder.rglob("suite.yaml"))


def write_dedented(path: Path, text: str) -> Path:
    """Write `text`, dedented, to `path` (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


NOBODY = 65534


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder every user can enter (pytest's tmp_path is root's own when tests run as root)."""
    folder = Path(tempfile.mkdtemp(prefix="celkeeper-shared-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in folder.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(folder)


def run_unprivileged(*argv: str) -> Run:
    """`celkeeper ARGV` as a user who is not root (uid and gid 65534), for what fails only without root's
    rights (root reads a folder of mode 000). The command runs in a child forked from this process, after
    a first run here imported what it needs (the child cannot read root's Python installation); its
    engine should be cel-python (the cel-go library refuses a process forked after loading it). Both runs
    go without the disk cache of verdicts (root's, which the child could not read: it would then compute
    what the first run read from the cache, with modules the first run did not import). Without root the
    command runs here, as the user the tests run as."""
    if os.geteuid() != 0:
        return _in_process(argv)
    with mock.patch.dict(os.environ, {CACHE_ENV: ""}):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(list(argv))  # imports what the command needs, as root
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            return _forked(argv, out, err)


def _forked(argv: tuple[str, ...], out: IO[bytes], err: IO[bytes]) -> Run:
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 70
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
            code = main(list(argv))
        except BaseException:  # reported to the parent: exit code and stderr
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return Run(os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode())


def _in_process(argv: tuple[str, ...]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Run(code, out.getvalue(), err.getvalue())


@pytest.fixture
def failing_suites(example_copy, tmp_path: Path) -> Path:
    """Two examples, one of them with a case that fails, a test that is skipped, and a Suite that cannot be
    read."""
    example_copy("block-service-types")
    broken = example_copy("disallow-latest-tag")
    suite = broken / "suite.yaml"
    text = suite.read_text()
    text = text.replace("          - violations: no\n", "          - violations: 2\n", 1)
    suite.write_text(text)
    write_dedented(
        tmp_path / "bad" / "suite.yaml",
        """\
        kind: Suite
        apiVersion: test.gatekeeper.sh/v1alpha1
        tests: {not: a list}
        """,
    )
    return tmp_path


# a template and three constraints (owner: deny on Pods, team: warn on Pods, services: deny on Services)
POLICY = """\
apiVersion: templates.celkeeper.io/v1
kind: ConstraintTemplate
metadata: {name: k8slabels}
spec:
  crd:
    spec:
      names: {kind: K8sLabels}
      validation:
        openAPIV3Schema: {type: object, properties: {key: {type: string}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: "has(object.metadata.labels) && variables.params.key in object.metadata.labels"
          messageExpression: "'missing label ' + variables.params.key"
---
apiVersion: constraints.celkeeper.io/v1beta1
kind: K8sLabels
metadata: {name: owner}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  parameters: {key: owner}
---
apiVersion: constraints.celkeeper.io/v1beta1
kind: K8sLabels
metadata: {name: team}
spec:
  enforcementAction: warn
  match: {kinds: [{apiGroups: [""], kinds: [Pod]}]}
  parameters: {key: team}
---
apiVersion: constraints.celkeeper.io/v1beta1
kind: K8sLabels
metadata: {name: services}
spec:
  match: {kinds: [{apiGroups: [""], kinds: [Service]}]}
  parameters: {key: owner}
"""
