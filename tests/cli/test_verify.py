"""`celkeeper verify`: the examples and the Gatekeeper library samples pass on both engines; failures
are reported in gator's format with exit code 1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES, ROOT, case_count, verify_summary
from tests.support.samples import library


def test_every_example_has_the_expected_files() -> None:
    folders = sorted(p for p in EXAMPLES.iterdir() if p.is_dir() and p.name != "reviews")
    assert len(folders) >= 12, folders
    for folder in folders:
        assert (folder / "suite.yaml").is_file(), folder
        if (folder / "expansion.yaml").is_file():  # ExpansionTemplates: the suite uses the others' policies
            assert "kind: ExpansionTemplate" in (folder / "expansion.yaml").read_text(), folder
            assert "expansion: expansion.yaml" in (folder / "suite.yaml").read_text(), folder
            continue
        assert (folder / "template.yaml").is_file(), folder
        assert list(folder.glob("constraint*.yaml")), folder
        text = (folder / "template.yaml").read_text()
        assert "apiVersion: templates.celkeeper.io/v1" in text, folder
        for constraint in folder.glob("constraint*.yaml"):
            assert "apiVersion: constraints.celkeeper.io/v1beta1" in constraint.read_text(), constraint


def test_examples_pass(cli, engine: str) -> None:
    run = cli("verify", str(EXAMPLES), "--engine", engine)
    assert run.code == 0, run.out + run.err
    passed, failed = verify_summary(run.out)
    assert failed == 0
    assert passed == case_count(EXAMPLES)
    assert run.out.splitlines()[-2] == "PASS"
    assert "FAIL" not in run.out


def test_examples_cover_actions_and_admission_reviews() -> None:
    constraints = "\n".join(p.read_text() for p in EXAMPLES.rglob("constraint*.yaml"))
    for action in ("warn", "dryrun", "scoped"):
        assert f"enforcementAction: {action}" in constraints, action
    reviews = "\n".join(
        p.read_text() for p in EXAMPLES.rglob("*.yaml") if "kind: AdmissionReview" in p.read_text()
    )
    for operation in ("CREATE", "UPDATE", "DELETE"):
        assert f"operation: {operation}" in reviews, operation
    assert "oldObject:" in reviews and "userInfo:" in reviews


def test_examples_pass_through_the_console_script() -> None:
    script = Path(sys.executable).with_name("celkeeper")
    command = [str(script)] if script.exists() else [shutil.which("celkeeper") or "celkeeper"]
    proc = subprocess.run(
        [*command, "verify", "examples/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert verify_summary(proc.stdout) == (case_count(EXAMPLES), 0)
    assert "ok\texamples/allowed-registries/suite.yaml\t" in proc.stdout


LIBRARY_SUITES = [
    "general/requiredlabels",
    "pod-security-policy/host-namespaces",
    "pod-security-policy/privileged-containers",
]


@pytest.mark.parametrize("sample", LIBRARY_SUITES)
def test_gatekeeper_library_samples_pass_unchanged(cli, engine: str, sample: str) -> None:
    folder = library() / sample
    run = cli("verify", str(folder), "-v", "--engine", engine)
    assert run.code == 0, run.out + run.err
    assert verify_summary(run.out) == (case_count(folder), 0)
    assert f"ok\t{folder}/suite.yaml\t" in run.out
