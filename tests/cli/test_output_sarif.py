"""`test -o sarif` and `verify -o sarif`: SARIF 2.1.0 valid against its JSON schema (vendored in
tests/cli/schemas), one result per violation (the same as `-o json` of the same run) at the line where its
object starts in the manifest, one per failed case at the line of the case in its Suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator

from tests.cli.conftest import POLICY, write_dedented

SCHEMA = Draft4Validator(
    json.loads((Path(__file__).parent / "schemas" / "sarif-2.1.0-rtm.5.json").read_text())
)
MANIFESTS = """\
# the shop's pods
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: shop}
---
apiVersion: v1
kind: Pod
metadata:
  name: labelled
  namespace: shop
  labels: {owner: a, team: b}
---

apiVersion: v1
kind: Pod
metadata:
  name: half
  namespace: shop
  labels: {owner: a}
"""


def valid(text: str) -> dict[str, Any]:
    log: dict[str, Any] = json.loads(text)
    errors = sorted(SCHEMA.iter_errors(log), key=str)
    assert not errors, "\n".join(str(e) for e in errors[:3])
    assert log["version"] == "2.1.0"
    return log


def starts(text: str) -> dict[str, int]:
    """Each Pod's name -> the line its document starts on (its first line that is not a comment or blank)."""
    found: dict[str, int] = {}
    start = 0
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if line == "---":
            start = 0
        elif not start and line.strip() and not line.startswith("#"):
            start = number
        if "name:" in line:
            name = line.split("name:")[1].split(",")[0].strip(" {}")
            found.setdefault(name, start)
    return found


def test_test_sarif_puts_each_violation_on_its_objects_line(cli, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    policy = write_dedented(tmp_path / "policy.yaml", POLICY)
    app = write_dedented(tmp_path / "manifests" / "app.yaml", MANIFESTS)
    as_json = cli("test", "-f", str(policy), "-f", str(app), "-o", "json")
    run = cli("test", "-f", str(policy), "-f", str(app), "-o", "sarif")
    assert run.code == as_json.code == 1
    log = valid(run.out)
    [found] = log["runs"]
    results = found["results"]
    expected = json.loads(as_json.out)
    assert len(results) == len(expected) == 3  # bare: owner, team; half: team
    lines = starts(MANIFESTS)
    for result in results:
        [location] = result["locations"]
        physical = location["physicalLocation"]
        assert (
            physical["artifactLocation"]["uri"] == "manifests/app.yaml"
        )  # relative to the working directory
        name = result["properties"]["object"]["name"]
        assert physical["region"]["startLine"] == lines[name], name
        assert (
            result["level"] == {"deny": "error", "warn": "warning"}[result["properties"]["enforcementAction"]]
        )
    assert sorted((r["ruleId"], r["properties"]["object"]["name"]) for r in results) == [
        ("K8sLabels/owner", "bare"),
        ("K8sLabels/team", "bare"),
        ("K8sLabels/team", "half"),
    ]
    assert {r["id"] for r in found["tool"]["driver"]["rules"]} == {"K8sLabels/owner", "K8sLabels/team"}
    assert found["invocations"][0]["executionSuccessful"] is True


def test_verify_sarif_puts_each_failed_case_on_its_line(cli, failing_suites: Path) -> None:
    suites = failing_suites
    run = cli("verify", str(suites), "-o", "sarif")
    assert run.code == 1
    log = valid(run.out)
    [found] = log["runs"]
    [result] = found["results"]
    suite = next(suites.glob("disallow-latest-tag/suite.yaml"))
    text = suite.read_text().splitlines()
    case_line = next(i for i, line in enumerate(text, 1) if "- name: tagged-digest-and-exempt-images" in line)
    location = result["locations"][0]["physicalLocation"]
    assert location["region"]["startLine"] == case_line
    assert location["artifactLocation"]["uri"].endswith("disallow-latest-tag/suite.yaml")
    assert result["ruleId"] == "no-latest-images" and result["level"] == "error"
    # the Suite that cannot be read is a notification, and the run did not succeed
    notes = found["invocations"][0]["toolExecutionNotifications"]
    assert [n for n in notes if "bad/suite.yaml" in n["message"]["text"]]
    assert found["invocations"][0]["executionSuccessful"] is False
