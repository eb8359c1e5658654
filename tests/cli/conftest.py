"""Shared helpers for the CLI tests: run `celkeeper` in-process and capture its output."""

from __future__ import annotations

import re
import shutil
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from celkeeper.cli.main import main
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


SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$", re.M)


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
