"""`celkeeper audit` over files in the formats people read: `-o openreports` (the Reports the cluster's audit
would write, valid against the upstream CRDs' schemas, holding what `-o json` counts) and `-o html` (the page,
rendered by headless Chromium, shows the run's totals)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from tests.cli.conftest import POLICY, ROOT, write_dedented
from tests.cli.test_output_html import Dom
from tests.support.browser import Chromium

CRDS = ROOT / "crds" / "reports"


def objects() -> str:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ("shop", "ops")
    ]
    for namespace, count in (("shop", 7), ("ops", 4)):
        for i in range(count):
            labels = {"owner": "a"} if i % 2 else {}
            if i % 3 == 0:
                labels["team"] = "b"
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"p{i}", "namespace": namespace, "labels": labels},
                }
            )
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}})
    return "\n---\n".join(json.dumps(d) for d in docs)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    return write_dedented(tmp_path / "policies" / "p.yaml", POLICY), write_dedented(
        tmp_path / "objects.yaml", objects()
    )


def schema(file: str) -> Draft202012Validator:
    crd = yaml.safe_load((CRDS / file).read_text(encoding="utf-8"))
    return Draft202012Validator(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_openreports_hold_every_violation_json_counts(cli, inputs: tuple[Path, Path]) -> None:
    policies, objects_file = inputs
    as_json = json.loads(
        cli("audit", "--policy-dir", str(policies), "--objects", str(objects_file), "-o", "json").out
    )
    run = cli("audit", "--policy-dir", str(policies), "--objects", str(objects_file), "-o", "openreports")
    assert run.code == 1  # a deny violation, as with the other formats
    listed = json.loads(run.out)
    assert listed["kind"] == "List"
    reports = listed["items"]
    validators = {
        "Report": schema("openreports.io_reports.yaml"),
        "ClusterReport": schema("openreports.io_clusterreports.yaml"),
    }
    per_policy: Counter[str] = Counter()
    for report in reports:
        validators[report["kind"]].validate(report)
        assert report["kind"] == "Report" and report["metadata"]["name"] == "celkeeper-audit"
        for result in report["results"]:
            assert result["resources"][0]["namespace"] == report["metadata"]["namespace"]
            per_policy[result["policy"]] += 1
    assert {r["metadata"]["namespace"] for r in reports} == {"shop", "ops"}
    totals = {f"{c['kind']}/{c['name']}": c["status"]["totalViolations"] for c in as_json["constraints"]}
    assert dict(per_policy) == {k: v for k, v in totals.items() if v}
    assert sum(per_policy.values()) == as_json["totalViolations"]


@pytest.mark.browser
def test_the_html_page_shows_the_totals_of_the_run(
    cli, chromium: Chromium, inputs: tuple[Path, Path], tmp_path: Path
) -> None:
    policies, objects_file = inputs
    as_json = json.loads(
        cli("audit", "--policy-dir", str(policies), "--objects", str(objects_file), "-o", "json").out
    )
    page = tmp_path / "audit.html"
    run = cli(
        "audit",
        "--policy-dir",
        str(policies),
        "--objects",
        str(objects_file),
        "-o",
        "html",
        "--output-file",
        str(page),
    )
    assert run.code == 1 and run.out == ""
    dom = Dom(chromium.dump_dom(page))
    assert dom.by_id["total-violations"] == str(as_json["totalViolations"])
    assert dom.by_id["total-objects"] == str(as_json["objects"])
    assert dom.by_id["total-constraints"] == str(len(as_json["constraints"]))
    assert dom.actions == as_json["byEnforcementAction"]
    assert dict(dom.bars["constraint"]) == {
        f"{c['kind']}/{c['name']}": c["status"]["totalViolations"]
        for c in as_json["constraints"]
        if c["status"]["totalViolations"]
    }
    assert len(dom.rows) == as_json["totalViolations"]
