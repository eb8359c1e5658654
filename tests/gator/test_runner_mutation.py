"""celkeeper's Suite extension (celkeeper.gator.suite, gator.runner): a test's `mutators` and a case's
`mutated`, the object as Gatekeeper's mutation webhook leaves it. The passing Suite runs under gator too
(tests/e2e/gator/suites/mutation); here, what fails and how it reads."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest

from celkeeper.cli.main import main as celkeeper_main
from tests.support.native import require_celgo

SUITES = Path(__file__).resolve().parents[1] / "e2e" / "gator" / "suites"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    require_celgo()
    shutil.copytree(SUITES / "mutation", tmp_path / "mutation")
    shutil.copytree(SUITES / "expansion", tmp_path / "expansion")
    return tmp_path / "mutation"


def verify(folder: Path) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = celkeeper_main(["verify", "-v", str(folder)])
    return code, out.getvalue()


def test_the_suite_passes(suite: Path) -> None:
    code, out = verify(suite)
    assert code == 0, out
    assert "--- PASS: privileged-pod" in out and "--- PASS: update" in out


def test_a_different_mutation_fails_the_case_with_the_differences(suite: Path) -> None:
    expected = suite / "pod-mutated.yaml"
    expected.write_text(expected.read_text().replace("imagePullPolicy: Always", "imagePullPolicy: Never"))
    code, out = verify(suite)
    assert code == 1
    assert "--- FAIL: privileged-pod" in out and "--- PASS: update" in out
    assert "the mutated object is not pod-mutated.yaml:" in out
    assert 'spec.containers[0].imagePullPolicy: expected "Never", got "Always"' in out


def test_mutated_without_mutators_is_an_invalid_case(suite: Path) -> None:
    text = (suite / "suite.yaml").read_text().replace("  mutators: mutators.yaml\n", "")
    (suite / "suite.yaml").write_text(text)
    code, out = verify(suite)
    assert code == 1
    assert "invalid Case: mutated needs the test's mutators" in out


def test_a_mutator_gatekeeper_refuses_fails_the_test(suite: Path) -> None:
    mutators = suite / "mutators.yaml"
    mutators.write_text(mutators.read_text().replace("metadata.labels.team", "spec.team"))
    code, out = verify(suite)
    assert code == 1
    assert "--- FAIL: mutated-pods" in out
    assert "invalid location for assignmetadata team: spec.team" in out
