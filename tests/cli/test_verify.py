"""`celkeeper verify`: the examples and the Gatekeeper library samples pass on both engines; failures
are reported in gator's format with exit code 1."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES, ROOT, case_count, run_unprivileged, verify_summary
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


# -- never a clean result over inputs that were not used -----------------------------------------------------


def test_a_nul_byte_in_a_suite_fails_with_its_place(cli, example_copy) -> None:
    folder = example_copy("required-labels")
    suite = folder / "suite.yaml"
    text = suite.read_text()
    at = text.index("tests:")
    suite.write_text(text[:at] + "\x00" + text[at:])
    line = text[:at].count("\n") + 1
    run = cli("verify", str(folder))
    assert run.code == 1
    assert run.out.splitlines() == ["FAIL", "0 passed, 0 failed, 1 errors"]
    assert run.err.splitlines() == [
        f"celkeeper verify: {suite}:{line}:1: cannot read: unacceptable character #x0000: "
        "special characters are not allowed"
    ]


def test_a_truncated_template_says_why_and_fails(cli, example_copy) -> None:
    folder = example_copy("required-labels")
    template = folder / "template.yaml"
    text = template.read_text()
    cut = text[: text.index("              - name: missing")]
    template.write_text(
        cut
        + "              - name: missing\n                expression: >-\n"
        + "                  variables.required.filter(\n"
    )
    run = cli("verify", str(folder))
    assert run.code == 1
    assert run.out.splitlines()[-2:] == [
        "FAIL",
        f"{verify_summary(run.out)[0]} passed, {verify_summary(run.out)[1]} failed, 1 errors",
    ]
    (problem,) = run.err.splitlines()
    assert problem.startswith(f"celkeeper verify: {template}:")
    assert (
        "variables[2].expression: template ckrequiredlabels: variable 'missing' does not compile: " in problem
    )


def test_a_folder_that_cannot_be_read_fails(shared_tmp: Path) -> None:
    folder = shared_tmp / "suites"
    shutil.copytree(EXAMPLES / "required-labels", folder)
    hidden = folder / "more"
    shutil.copytree(EXAMPLES / "required-labels", hidden)
    for path in shared_tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    hidden.chmod(0)
    run = run_unprivileged("verify", str(folder), "--engine", "cel-python", "--no-cache")
    assert run.code == 1, run.out + run.err
    assert run.err.splitlines() == [f"celkeeper verify: {hidden}: cannot list: Permission denied"]
    assert run.out.splitlines()[-2] == "FAIL"
    assert run.out.splitlines()[-1].endswith(" failed, 1 errors")
