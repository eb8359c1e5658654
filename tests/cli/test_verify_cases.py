"""`celkeeper verify` on failing, invalid, skipped and filtered cases, and on broken input: reported in
gator's format, one line per error, exit code 1."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES, ROOT, case_count, verify_summary

# -- failures ---------------------------------------------------------------------------------------


def test_a_failing_case_is_reported_like_gator(cli, example_copy) -> None:
    folder = example_copy("required-labels")
    suite = folder / "suite.yaml"
    text = suite.read_text()
    # the allowed namespace is now expected to violate: that case must fail
    suite.write_text(
        text.replace(
            "object: objects/namespace-allowed.yaml\n        assertions:\n          - violations: no",
            "object: objects/namespace-allowed.yaml\n        assertions:\n          - violations: yes",
        )
    )
    run = cli("verify", str(folder))
    assert run.code == 1
    lines = run.out.splitlines()
    assert re.fullmatch(r"    --- FAIL: owner-and-cost-center\t\(\d+\.\d{3}s\)", lines[0]), lines
    assert lines[1] == (
        "        unexpected number of violations: got 0 violations but want at least 1: got messages []"
    )
    assert re.fullmatch(r"--- FAIL: namespaces-have-owner\t\(\d+\.\d{3}s\)", lines[2])
    assert re.fullmatch(rf"FAIL\t{re.escape(str(suite))}\t\d+\.\d{{3}}s", lines[3])
    assert lines[4] == "FAIL"
    total = case_count(folder)
    assert lines[5] == f"{total - 1} passed, 1 failed"


def test_a_wrong_message_regex_lists_the_messages(cli, example_copy) -> None:
    folder = example_copy("allowed-registries")
    suite = folder / "suite.yaml"
    suite.write_text(suite.read_text().replace("message: netshoot", "message: '^netshoot'"))
    run = cli("verify", str(folder))
    assert run.code == 1
    assert (
        'got 0 violations containing "^netshoot" but want at least 1: got messages [images must come'
        in run.out
    )


def test_a_template_that_does_not_compile_is_loaded_and_fails_per_request(cli, example_copy) -> None:
    # as gator: the template loads; each case the broken validation applies to gets the compile error
    # as a violation (failurePolicy Fail); and the problem is an error with its place (with or without
    # -v), which fails the run
    folder = example_copy("replica-limits")
    template = folder / "template.yaml"
    template.write_text(
        template.read_text().replace(
            "expression: variables.inRange || variables.improving",
            "expression: variables.inRange || variables.improving ||| true",
        )
    )
    run = cli("verify", "-v", str(folder))
    assert run.code == 1
    assert "--- FAIL: within-range" in run.out
    assert "got messages [compilation error: compilation failed: " in run.out
    assert f"celkeeper verify: {template}:" in run.err
    assert "validations[0].expression" in run.err and "does not compile" in run.err
    assert run.out.splitlines()[-1].endswith(" failed, 1 errors")


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


TEMPLATE = """\
    apiVersion: templates.gatekeeper.sh/v1
    kind: ConstraintTemplate
    metadata:
      name: k8sdemolabel
    spec:
      crd:
        spec:
          names:
            kind: K8sDemoLabel
          validation:
            openAPIV3Schema:
              type: object
              properties:
                key:
                  type: string
      targets:
        - target: admission.k8s.gatekeeper.sh
          code:
            - engine: K8sNativeValidation
              source:
                validations:
                  - expression: >-
                      has(variables.anyObject.metadata.labels) &&
                      variables.params.key in variables.anyObject.metadata.labels
                    messageExpression: '"missing label " + variables.params.key'
    """

CONSTRAINT = """\
    apiVersion: constraints.gatekeeper.sh/v1beta1
    kind: K8sDemoLabel
    metadata:
      name: needs-owner
    spec:
      parameters:
        key: {key}
    """

POD = """\
    apiVersion: v1
    kind: Pod
    metadata:
      name: p
      namespace: default
      {labels}
    spec:
      containers: [{{name: c, image: nginx}}]
    """


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    _write(tmp_path, "template.yaml", TEMPLATE)
    _write(tmp_path, "good.yaml", CONSTRAINT.format(key="owner"))
    _write(tmp_path, "bad.yaml", CONSTRAINT.format(key="[1, 2]"))
    _write(tmp_path, "labelled.yaml", POD.format(labels="labels: {owner: me}"))
    _write(tmp_path, "unlabelled.yaml", POD.format(labels=""))
    _write(
        tmp_path,
        "suite.yaml",
        """\
        kind: Suite
        apiVersion: test.gatekeeper.sh/v1alpha1
        tests:
        - name: owner-label
          template: template.yaml
          constraint: good.yaml
          cases:
          - name: labelled
            object: labelled.yaml
            assertions: [{violations: no}]
          - name: unlabelled
            object: unlabelled.yaml
            assertions: [{violations: 1, message: missing label owner}]
          - name: skipped-case
            skip: true
            object: does-not-exist.yaml
            assertions: [{violations: no}]
        - name: parameters-must-be-strings
          template: template.yaml
          constraint: bad.yaml
          invalid: true
        - name: skipped-test
          skip: true
          template: nothing.yaml
          constraint: nothing.yaml
        """,
    )
    return tmp_path


def test_invalid_and_skip(cli, demo: Path, engine: str) -> None:
    run = cli("verify", str(demo / "suite.yaml"), "-v", "--engine", engine)
    assert run.code == 0, run.out + run.err
    lines = [re.sub(r"\t\(\d+\.\d{3}s\)$", "", line) for line in run.out.splitlines()]
    assert lines[:11] == [
        "=== RUN   owner-label",
        "    === RUN   labelled",
        "    --- PASS: labelled",
        "    === RUN   unlabelled",
        "    --- PASS: unlabelled",
        "    === SKIP  skipped-case",
        "--- PASS: owner-label",
        "=== RUN   parameters-must-be-strings",
        "--- PASS: parameters-must-be-strings",
        "=== SKIP  skipped-test",
        lines[10],
    ]
    assert lines[10].startswith(f"ok\t{demo / 'suite.yaml'}\t")
    assert lines[11:] == ["PASS", "3 passed, 0 failed, 2 skipped"]


def test_invalid_fails_when_the_constraint_is_accepted(cli, demo: Path) -> None:
    suite = demo / "suite.yaml"
    suite.write_text(suite.read_text().replace("constraint: bad.yaml", "constraint: good.yaml"))
    run = cli("verify", str(suite))
    assert run.code == 1
    assert "--- FAIL: parameters-must-be-strings" in run.out
    assert "constraint should have failed schema validation" in run.out


def test_run_filters_tests_and_cases(cli, engine: str) -> None:
    run = cli("verify", str(EXAMPLES), "-v", "--run", "//^unlabelled-deployment", "--engine", engine)
    assert run.code == 0, run.out + run.err
    ran = re.findall(r"^    === RUN   (\S+)$", run.out, re.M)
    assert ran == ["unlabelled-deployment-warns"]
    # as in gator, an empty test regex ("" before //) selects every test; their other cases are skipped
    assert "=== RUN   workloads-have-app-label" in run.out
    assert "    === SKIP  labelled-deployment" in run.out
    run = cli("verify", str(EXAMPLES), "-v", "--run", "^workloads//^unlabelled", "--engine", engine)
    assert re.findall(r"^=== RUN   (\S+)$", run.out, re.M) == ["workloads-have-app-label"]
    assert "=== SKIP  namespaces-have-owner" in run.out
    assert re.findall(r"^    === RUN   (\S+)$", run.out, re.M) == ["unlabelled-deployment-warns"]
    assert verify_summary(run.out)[0] == 1

    run = cli("verify", str(EXAMPLES), "-v", "--run", "host-paths-allowlist")  # a test name selects its cases
    assert re.findall(r"^    === RUN   (\S+)$", run.out, re.M) == [
        "allowed-prefixes-read-only",
        "paths-outside-allowlist",
        "read-only-prefix-mounted-writable",
    ]
    run = cli("verify", str(EXAMPLES), "--run", "no-such-thing")
    assert run.code == 0 and verify_summary(run.out) == (0, 0)


def test_bad_filter_is_one_error_line(cli) -> None:
    run = cli("verify", str(EXAMPLES), "--run", "a//b//c")
    assert run.code == 1
    assert (
        run.err
        == "celkeeper verify: invalid test filter 'a//b//c': a filter may include at most one \"//\"\n"
    )


def test_admission_review_objects_are_checked(cli, demo: Path) -> None:
    _write(
        demo,
        "review-unknown-field.yaml",
        """\
        apiVersion: admission.k8s.io/v1
        kind: AdmissionReview
        request:
          operation: CREATE
          objekt: {}
        """,
    )
    _write(
        demo,
        "review-delete.yaml",
        """\
        apiVersion: admission.k8s.io/v1beta1
        kind: AdmissionReview
        request:
          operation: DELETE
          oldObject:
            apiVersion: v1
            kind: Pod
            metadata: {name: p, namespace: default}
        """,
    )
    suite = demo / "suite.yaml"
    suite.write_text(
        suite.read_text().replace(
            "skip: true\n    object: does-not-exist.yaml", "object: review-unknown-field.yaml"
        )
        + textwrap.dedent("""\
                        - name: delete
                          template: template.yaml
                          constraint: good.yaml
                          cases:
                          - name: deleting-an-unlabelled-pod
                            object: review-delete.yaml
                            assertions: [{violations: 1, message: missing label owner}]
                        """)
    )
    run = cli("verify", str(suite))
    assert run.code == 1
    assert "    --- FAIL: skipped-case\t" in run.out
    assert "not a valid AdmissionReview object: unknown field 'objekt'" in run.out
    assert "deleting-an-unlabelled-pod" not in run.out  # passed: on DELETE the oldObject is reviewed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no/such/dir"], "celkeeper verify: no/such/dir: no such file or directory"),
        (
            ["setup.cfg"],
            "celkeeper verify: setup.cfg: unsupported extension (a Suite file ends in .yaml or .yml)",
        ),
    ],
)
def test_bad_paths_are_one_line_errors(
    cli, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    run = cli("verify", *args)
    assert run.code == 1
    assert run.err.splitlines()[0] == message
    assert "Traceback" not in run.err


def test_broken_suite_and_object_files(cli, demo: Path) -> None:
    _write(demo, "broken/suite.yaml", "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests: [\n")
    _write(demo, "typed/suite.yaml", "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests: {a: 1}\n")
    (demo / "labelled.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    run = cli("verify", str(demo))
    assert run.code == 1
    assert f"celkeeper verify: {demo}/broken/suite.yaml:4:1: document 1: YAML/JSON syntax error" in run.err
    assert (
        f"FAIL\t{demo}/typed/suite.yaml\t0.000s\n"
        f"  {demo}/typed/suite.yaml:3:8: document 1: tests: must be a list" in run.out
    )
    assert "    --- FAIL: labelled\t" in run.out
    assert f"{demo}/labelled.yaml:4:1: document 1: YAML/JSON syntax error" in run.out
    assert "Traceback" not in run.out + run.err


def test_relative_paths_resolve_from_the_suite_file(cli, demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(demo.parent)
    run = cli("verify", f"{demo.name}/...")
    assert run.code == 0, run.out + run.err
    assert f"ok\t{demo.name}/suite.yaml\t" in run.out
    assert os.getcwd() == str(demo.parent)


def test_invalid_expects_a_schema_error_not_a_template_that_does_not_compile(cli, demo: Path) -> None:
    # gator: `invalid: true` passes only when adding the constraint fails schema validation; a
    # template that does not compile still loads, so such a test fails, and its cases see the error
    broken = demo / "broken-template.yaml"
    broken.write_text(
        (demo / "template.yaml").read_text().replace("variables.params.key in", "variables.params.key in in")
    )
    _write(
        demo,
        "suite.yaml",
        """\
        kind: Suite
        apiVersion: test.gatekeeper.sh/v1alpha1
        tests:
        - name: broken-template
          template: broken-template.yaml
          constraint: good.yaml
          invalid: true
        - name: broken-template-not-expected
          template: broken-template.yaml
          constraint: good.yaml
          cases:
          - name: c
            object: labelled.yaml
            assertions: [{violations: no}]
        """,
    )
    run = cli("verify", str(demo / "suite.yaml"))
    assert run.code == 1
    assert "--- FAIL: broken-template\t" in run.out
    assert "constraint should have failed schema validation: it was accepted" in run.out
    assert "--- FAIL: broken-template-not-expected\t" in run.out
    assert "got messages [compilation error: compilation failed: " in run.out
    assert verify_summary(run.out) == (0, 2)
