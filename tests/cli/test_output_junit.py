"""`verify -o junit` and `test -o junit`: JUnit XML valid against Jenkins' xunit schema (junit-10.xsd,
vendored in tests/cli/schemas), with the same passes and failures as the text output of the same run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from tests.cli.conftest import EXAMPLES, POLICY, verify_summary, write_dedented

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).parent / "schemas" / "junit-10.xsd"))


def valid(path: Path) -> ET.Element:
    SCHEMA.validate(str(path))
    return ET.parse(path).getroot()


def test_verify_junit_counts_what_the_text_counts(cli, failing_suites: Path, tmp_path: Path) -> None:
    suites = failing_suites
    text = cli("verify", str(suites))
    passed, failed = verify_summary(text.out)
    out = tmp_path / "report.xml"
    run = cli("verify", str(suites), "-o", "junit", "--output-file", str(out))
    assert run.code == text.code == 1 and run.out == ""
    assert verify_summary(run.err) == (passed, failed)
    root = valid(out)
    cases = root.findall(".//testcase")
    failing = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert len(cases) - len(failing) == passed and len(failing) == failed
    assert int(root.get("tests", "0")) == len(cases)
    assert int(root.get("failures", "0")) + int(root.get("errors", "0")) == failed
    # the failing case: its test as class, its name, the message the text printed under it
    [case] = [c for c in failing if c.get("name") == "tagged-digest-and-exempt-images"]
    assert case.get("classname") == "no-latest-images"
    failure = case.find("failure")
    assert failure is not None and failure.text and failure.text.strip() in text.out
    files = {s.get("file") for s in root.findall("testsuite")}
    assert str(suites / "bad" / "suite.yaml") in files
    [bad] = [s for s in root.findall("testsuite") if s.get("file") == str(suites / "bad" / "suite.yaml")]
    assert bad.find("testcase/error") is not None


def test_verify_junit_of_the_examples_passes_every_case(cli, tmp_path: Path) -> None:
    run = cli("verify", str(EXAMPLES), "-o", "junit")
    assert run.code == 0
    out = tmp_path / "examples.xml"
    out.write_text(run.out)
    root = valid(out)
    assert int(root.get("tests", "0")) == verify_summary(run.err)[0] > 50
    assert root.find(".//failure") is None


MANIFESTS = """\
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: shop}
---
apiVersion: v1
kind: Pod
metadata: {name: labelled, namespace: shop, labels: {owner: a, team: b}}
---
apiVersion: v1
kind: Pod
metadata: {name: half, namespace: shop, labels: {owner: a}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
"""


@pytest.fixture
def manifests(tmp_path: Path) -> tuple[Path, Path]:
    return write_dedented(tmp_path / "policy.yaml", POLICY), write_dedented(tmp_path / "app.yaml", MANIFESTS)


def test_test_junit_has_a_testcase_per_object_and_constraint(
    cli, manifests: tuple[Path, Path], tmp_path: Path
) -> None:
    policy, app = manifests
    out = tmp_path / "test.xml"
    run = cli("test", "-f", str(policy), "-f", str(app), "-o", "junit", "--output-file", str(out))
    assert run.code == 1  # bare lacks owner (deny)
    root = valid(out)
    [suite] = [s for s in root.findall("testsuite") if s.get("file") == str(app)]
    cases = {(c.get("classname"), c.get("name")): c for c in suite.findall("testcase")}
    # the Pods against the two Pod constraints; the ConfigMap against none
    assert sorted(cases) == sorted(
        (f"v1/Pod shop/{pod} (document {i})", f"K8sLabels/{name}")
        for i, pod in ((1, "bare"), (2, "labelled"), (3, "half"))
        for name in ("owner", "team")
    )
    failure = cases[("v1/Pod shop/bare (document 1)", "K8sLabels/owner")].find("failure")
    assert failure is not None and failure.text == "[owner] missing label owner"
    # a warning is no failure: its message is the testcase's output
    warned = cases[("v1/Pod shop/half (document 3)", "K8sLabels/team")]
    assert warned.find("failure") is None
    assert warned.findtext("system-out") == "warn: [team] missing label team"
    assert sum(c.find("failure") is not None for c in cases.values()) == 1
