"""Suites' `admissionPolicyTests` (celkeeper.gator.admissionpolicies): parsed strictly and located, run with
Kubernetes' answers, and ignored by gator (a Suite may hold both kinds of test)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from celkeeper.cli.main import main
from celkeeper.documents import parse_documents
from celkeeper.errors import CelkeeperError
from celkeeper.gator.admissionpolicies import with_admission_tests
from celkeeper.gator.suite import Suite, parse_suite
from tests.support.gator import GatorUnavailable, find_gator, run_gator
from tests.support.native import require_celgo
from tests.support.requirements import GATOR

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "admissionpolicy" / "suite"


@dataclass(frozen=True)
class Run:
    code: int
    out: str


@pytest.fixture
def verify(capsys: pytest.CaptureFixture[str]) -> Callable[..., Run]:
    def run(*argv: str) -> Run:
        capsys.readouterr()
        code = main(["verify", *argv])
        return Run(code, capsys.readouterr().out)

    return run


def _suite(text: str) -> Suite:
    parsed = parse_documents(text, "suite.yaml")
    assert not parsed.errors
    return with_admission_tests(parse_suite(parsed.documents[0]), parsed.documents[0])


def test_the_extension_is_parsed_beside_gators_tests() -> None:
    suite = _suite((SUITE / "suite.yaml").read_text(encoding="utf-8"))
    assert suite.tests == ()
    (first, second) = suite.admission_tests
    assert first.name == "replica-limit" and first.policies == ("policies.yaml",)
    assert [c.name for c in first.cases] == [
        "too-many-replicas-in-prod",
        "few-replicas-labelled-by-team",
        "not-in-prod",
    ]
    assert first.cases[0].assertions[0].allowed is False
    assert first.cases[0].assertions[2].audit_annotations == {"replica-limit/replicas": "^8$"}
    assert second.invalid


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("admissionPolicyTests: {}", "suite.yaml:5:23: document 1: admissionPolicyTests: must be a list"),
        (
            "admissionPolicyTests:\n- name: t\n  cases:\n  - name: c\n    assertions:\n    - allow: false",
            "suite.yaml:10:7: document 1: admissionPolicyTests[0].cases[0].assertions[0].allow: "
            "unknown assertion 'allow'",
        ),
        (
            "admissionPolicyTests:\n- name: t\n  policies: policies.yaml",
            "suite.yaml:7:13: document 1: admissionPolicyTests[0].policies: must be a list",
        ),
    ],
)
def test_a_malformed_extension_is_a_located_error(body: str, where: str) -> None:
    head = "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\nmetadata:\n  name: s\n"
    with pytest.raises(CelkeeperError) as raised:
        _suite(head + body)
    assert str(raised.value) == where


def test_verify_runs_the_admission_policy_tests(verify: Callable[..., Run]) -> None:
    require_celgo()
    run = verify("-v", str(SUITE))
    assert run.code == 0, run.out
    assert "--- PASS: too-many-replicas-in-prod" in run.out
    assert "--- PASS: refused-policy" in run.out
    assert run.out.splitlines()[-1] == "4 passed, 0 failed"


def test_a_failing_case_says_why(verify: Callable[..., Run], tmp_path: Path) -> None:
    require_celgo()
    shutil.copytree(SUITE, tmp_path / "suite")
    suite = tmp_path / "suite" / "suite.yaml"
    suite.write_text(
        suite.read_text(encoding="utf-8").replace("- allowed: true", "- allowed: false"), encoding="utf-8"
    )
    run = verify(str(tmp_path / "suite"))
    assert run.code == 1
    assert "the request is allowed, want denied" in run.out
    assert run.out.splitlines()[-1] == "3 passed, 1 failed"


@pytest.mark.gator
def test_gator_ignores_the_extension(verify: Callable[..., Run], tmp_path: Path) -> None:
    """A Suite with gator's tests and celkeeper's: gator runs its own and passes, celkeeper runs both."""
    require_celgo()
    try:
        gator = find_gator()
    except GatorUnavailable as exc:
        GATOR.unavailable("gator", exc)
    folder = tmp_path / "both"
    shutil.copytree(ROOT / "examples" / "required-labels", folder)
    for name in ("policies.yaml", "deployment-8.yaml", "namespace-prod.yaml"):
        shutil.copy(SUITE / name, folder / f"ap-{name}")
    extension = (
        "admissionPolicyTests:\n- name: replica-limit\n  policies: [ap-policies.yaml]\n  cases:\n"
        "  - name: denied\n    object: ap-deployment-8.yaml\n    inventory: [ap-namespace-prod.yaml]\n"
        "    assertions:\n    - allowed: false\n"
    )
    for path in folder.rglob("*.yaml"):  # gator knows Gatekeeper's API groups only
        text = path.read_text(encoding="utf-8").replace("celkeeper.io", "gatekeeper.sh")
        path.write_text(text + (extension if path.name == "suite.yaml" else ""), encoding="utf-8")
    gatored = run_gator(gator, ["verify", str(folder)])
    assert gatored.code == 0, gatored.out + gatored.err
    ours = verify(str(folder))
    assert ours.code == 0, ours.out
    passed = int(ours.out.splitlines()[-1].split(" passed")[0])
    assert passed == 8  # the example's 7 cases and the admission policy case
