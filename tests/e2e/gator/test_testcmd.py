"""`celkeeper test` against `gator test`: the same results (object, constraint, message, enforcement
action, scoped actions) row for row in `-o json`, the same text lines, the same exit code, on the
examples and on generated inputs (every match criterion and enforcement action over namespaced,
cluster-scoped and Namespace objects; ExpansionTemplates, with mutators). AdmissionReviews are left out on
purpose: celkeeper reviews their request, gator the AdmissionReview object (celkeeper/cli/testcmd.py)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cli.main import main as celkeeper_main
from tests.e2e.gator.conftest import OWN_SUITES, ROOT, gatekeeper_copy
from tests.e2e.gator.corpus import requests
from tests.e2e.gator.corpus.model import constraint, write_corpus
from tests.support.gator import run_gator

Row = tuple[Any, ...]


def _inputs(base: Path) -> dict[str, Path]:
    examples = gatekeeper_copy(ROOT / "examples", base / "examples")
    for path in examples.rglob("*"):
        if path.is_file() and "AdmissionReview" in path.read_text(encoding="utf-8"):
            path.unlink()
    matching = base / "matching"
    family = requests.matching_family()
    write_corpus(matching, [family])
    for path in matching.rglob("suite.yaml"):  # only the policies and objects: no Suite documents
        path.unlink()
    for path in matching.rglob("*.yaml"):
        if "AdmissionReview" in path.read_text(encoding="utf-8"):
            path.unlink()
    expansion = base / "expansion"
    shutil.copytree(OWN_SUITES / "expansion", expansion)
    (expansion / "suite.yaml").unlink()
    (expansion / "not-expansion.yaml").unlink()
    (expansion / "deployment-no-template.yaml").unlink()  # gator test stops at an object it cannot expand
    (expansion / "scoped.yaml").write_text(
        json.dumps(
            constraint(
                "K8sExpandedPrivileged",
                "scoped-warn",
                action="scoped",
                scoped=[{"action": "warn", "enforcementPoints": [{"name": "*"}]}],
            )
        )
    )
    mutation = base / "mutation"
    shutil.copytree(expansion, mutation)
    (mutation / "mutators.yaml").write_text(MUTATORS)
    return {"examples": examples, "matching": matching, "expansion": expansion, "mutation": mutation}


# mutators with the ExpansionTemplates: gator test mutates an object before expanding it (source
# Original: the Deployment's template made unprivileged) and each generated object (source Generated:
# containers without the field made privileged), and reviews the mutators as objects
MUTATORS = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata:
  name: unprivileged-web
spec:
  applyTo: [{groups: [apps], versions: [v1], kinds: [Deployment]}]
  match: {source: Original}
  location: "spec.template.spec.containers[name:web].securityContext.privileged"
  parameters:
    assign: {value: false}
---
apiVersion: mutations.gatekeeper.sh/v1beta1
kind: Assign
metadata:
  name: privileged-generated
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {source: Generated}
  location: "spec.containers[name:*].securityContext.privileged"
  parameters:
    pathTests: [{subPath: "spec.containers[name:*].securityContext.privileged", condition: MustNotExist}]
    assign: {value: true}
---
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignMetadata
metadata:
  name: team
spec:
  location: metadata.labels.team
  parameters:
    assign: {fromMetadata: {field: namespace}}
"""


@pytest.fixture(scope="session")
def test_runs(gator: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = {}
    for name, folder in _inputs(tmp_path_factory.mktemp("gator-test")).items():
        sides: dict[str, Any] = {}
        for fmt in ("json", "text"):
            args = ["test", "-f", str(folder)] + (["-o", "json"] if fmt == "json" else [])
            done = run_gator(gator, args)
            captured, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(err):
                code = celkeeper_main(args)
            sides[fmt] = ((done.code, done.out), (code, captured.getvalue()), err.getvalue())
        out[name] = sides
    return out


def _rows(text: str) -> Counter[Row]:
    rows: Counter[Row] = Counter()
    for r in json.loads(text) or []:
        obj = r["violatingObject"]
        meta = obj.get("metadata", {})
        c = r.get("constraint", {})
        rows[
            (
                obj.get("apiVersion"),
                obj.get("kind"),
                meta.get("namespace", ""),
                meta.get("name", ""),
                c.get("kind"),
                c.get("metadata", {}).get("name"),
                r["msg"],
                r["enforcementAction"],
                tuple(sorted(r.get("scopedActions") or ())),
            )
        ] += 1
    return rows


@pytest.mark.parametrize("inputs", ["examples", "matching", "expansion", "mutation"])
def test_json_results_agree(test_runs: dict[str, dict[str, Any]], inputs: str) -> None:
    (gator_code, gator_out), (code, out), err = test_runs[inputs]["json"]
    # celkeeper's stderr: its summary line alone (every object reviewed, no error)
    (summary,) = err.splitlines()
    assert re.fullmatch(
        r"celkeeper test: summary: (\d+) objects read, \1 reviewed, 0 not reviewed, 0 errors", summary
    )
    theirs, ours = _rows(gator_out), _rows(out)
    assert sum(theirs.values()) > 0
    assert ours == theirs, (sorted(theirs - ours)[:10], sorted(ours - theirs)[:10])
    assert code == gator_code


@pytest.mark.parametrize("inputs", ["examples", "matching", "expansion", "mutation"])
def test_text_lines_agree(test_runs: dict[str, dict[str, Any]], inputs: str) -> None:
    (gator_code, gator_out), (code, out), _ = test_runs[inputs]["text"]
    assert sorted(out.splitlines()) == sorted(gator_out.splitlines())
    assert code == gator_code


def test_the_mutators_change_what_gator_reports(test_runs: dict[str, dict[str, Any]]) -> None:
    """The mutation inputs are the expansion inputs with mutators: gator's results differ (the agreement
    above is about mutation, not about inputs the mutators leave alone)."""
    (_, with_mutators), _, _ = test_runs["mutation"]["json"]
    (_, without), _, _ = test_runs["expansion"]["json"]
    assert _rows(with_mutators) != _rows(without)
