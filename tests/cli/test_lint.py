"""`celkeeper lint` (every problem, one line each)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.cli.conftest import EXAMPLES, run_unprivileged, write_dedented
from tests.support.native import require_celgo


def test_examples_lint_clean(cli, engine: str) -> None:
    run = cli("lint", str(EXAMPLES), "--engine", engine)
    assert run.code == 0, run.out
    assert run.out == ""
    assert re.fullmatch(
        r"celkeeper lint: no problems in \d+ files: \d+ templates, \d+ constraints, \d+ suites\n", run.err
    )


def test_lint_reports_every_problem_one_line_each(cli, tmp_path: Path) -> None:
    template = write_dedented(
        tmp_path / "template.yaml",
        """\
        apiVersion: templates.celkeeper.io/v1
        kind: ConstraintTemplate
        metadata:
          name: ckbroken
        spec:
          crd:
            spec:
              names:
                kind: CKBroken
              validation:
                openAPIV3Schema:
                  type: object
                  properties:
                    n: {type: integer}
          targets:
            - target: admission.k8s.gatekeeper.sh
              code:
                - engine: K8sNativeValidation
                  source:
                    validations:
                      - expression: object.metadata.name == 1 +
                      - expression: size(object.metadata.name) > 0
                        messageExpression: '"x" + nope(1)'
        """,
    )
    write_dedented(
        tmp_path / "constraint.yaml",
        """\
        apiVersion: constraints.celkeeper.io/v1beta1
        kind: CKBroken
        metadata: {name: wrong-type}
        spec:
          parameters:
            n: "three"
        """,
    )
    write_dedented(tmp_path / "nokind.yaml", "apiVersion: v1\nmetadata: {name: x}\n")
    write_dedented(tmp_path / "syntax.yaml", "a: [\n")
    write_dedented(
        tmp_path / "suite.yaml", "kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\ntests: 3\n"
    )
    run = cli("lint", str(tmp_path))
    assert run.code == 1
    lines = run.out.splitlines()
    assert all("Traceback" not in line for line in lines)
    assert re.search(
        r"^celkeeper lint: 5 problems and 1 warning in 5 files: 1 templates, 1 constraints, 1 suites$",
        run.err,
    )
    expected = [
        rf"^{tmp_path}/constraint.yaml:6:\d+: document 1: spec.parameters.n: .*",
        rf"^{tmp_path}/nokind.yaml(:\d+:\d+)?: document 1: missing kind$",
        rf"^{tmp_path}/suite.yaml:3:8: document 1: tests: must be a list, not the number 3$",
        rf"^{tmp_path}/syntax.yaml:2:1: document 1: YAML/JSON syntax error",
        rf"^{template}:21:\d+: document 1: spec.targets\[0\].code\[0\].source.validations\[0\].expression: ",
        rf"^{template}:23:\d+: document 1: "
        r"spec.targets\[0\].code\[0\].source.validations\[1\].messageExpression: ",
    ]
    for pattern in expected:
        assert sum(1 for line in lines if re.search(pattern, line)) == 1, (pattern, lines)
    assert len(lines) == len(expected), lines


def test_lint_shows_what_gatekeeper_loads_as_warnings_but_cel_that_does_not_compile_as_an_error(
    cli, tmp_path: Path
) -> None:
    # Gatekeeper loads this template (tests/e2e/gator compares the verdicts): lint warns about the key it
    # ignores, and reports the expression that does not compile as an error (the policy does not do what
    # it says), each with its place
    write_dedented(
        tmp_path / "template.yaml",
        """\
        apiVersion: templates.gatekeeper.sh/v1
        kind: ConstraintTemplate
        metadata:
          name: ckwarned
        spec:
          crd:
            spec:
              names:
                kind: CKWarned
          targets:
            - target: admission.k8s.gatekeeper.sh
              code:
                - engine: K8sNativeValidation
                  source:
                    validations:
                      - expression: object.metadata.name ==
                    matchConditions:
                      - {name: pods, expression: "true"}
        """,
    )
    run = cli("lint", str(tmp_path))
    assert run.code == 1, run.out
    lines = run.out.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(
        f"{tmp_path}/template.yaml:16:52: document 1: "
        "spec.targets[0].code[0].source.validations[0].expression: template ckwarned: "
        "validation does not compile: "
    )
    assert lines[1].startswith(
        f"{tmp_path}/template.yaml:17:13: document 1: spec.targets[0].code[0].source.matchConditions: "
        "warning: template ckwarned: matchConditions is not a key"
    )
    assert (
        run.err
        == "celkeeper lint: 1 problem and 1 warning in 1 files: 1 templates, 0 constraints, 0 suites\n"
    )
    (tmp_path / "template.yaml").write_text(
        (tmp_path / "template.yaml")
        .read_text()
        .replace("object.metadata.name ==", "object.metadata.name == 'x'")
    )
    assert cli("lint", str(tmp_path)).code == 0
    assert cli("lint", "--strict", str(tmp_path)).code == 1


def test_lint_skips_kustomization_files(cli, tmp_path: Path) -> None:
    # gatekeeper-library keeps a kustomization.yaml beside each policy: not a policy document
    shutil.copytree(EXAMPLES / "required-labels", tmp_path / "required-labels")
    write_dedented(tmp_path / "required-labels" / "kustomization.yaml", "resources:\n- template.yaml\n")
    write_dedented(
        tmp_path / "kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [required-labels]\n",
    )
    write_dedented(
        tmp_path / "component.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
    )
    run = cli("lint", str(tmp_path))
    assert (run.code, run.out) == (0, ""), run.out
    assert run.err.startswith("celkeeper lint: no problems in ")


def test_a_folder_that_cannot_be_read_is_a_problem(shared_tmp: Path) -> None:
    folder = shared_tmp / "policies"
    shutil.copytree(EXAMPLES / "required-labels", folder)
    hidden = folder / "more"
    shutil.copytree(EXAMPLES / "allowed-registries", hidden)
    for path in shared_tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    hidden.chmod(0)
    run = run_unprivileged("lint", str(folder), "--engine", "cel-python")
    assert run.code == 1, run.out + run.err
    assert run.out.splitlines() == [f"{hidden}: cannot list: Permission denied"]
    assert run.err.startswith("celkeeper lint: 1 problem in ")


def test_mutators_gatekeeper_refuses_and_conflicts_are_problems(cli, tmp_path: Path) -> None:
    require_celgo()
    path = write_dedented(
        tmp_path / "mutators.yaml",
        """\
        apiVersion: mutations.gatekeeper.sh/v1
        kind: Assign
        metadata: {name: as-a-list}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers[name:*].imagePullPolicy"
          parameters: {assign: {value: Always}}
        ---
        apiVersion: mutations.gatekeeper.sh/v1
        kind: Assign
        metadata: {name: as-a-map}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers.web.imagePullPolicy"
          parameters: {assign: {value: Never}}
        ---
        apiVersion: mutations.gatekeeper.sh/v1beta1
        kind: ModifySet
        metadata: {name: broken}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers[name:*"
          parameters: {values: {fromList: [x]}}
        ---
        apiVersion: mutations.gatekeeper.sh/v1
        kind: AssignMetadata
        metadata: {name: reads-a-provider}
        spec:
          location: metadata.labels.x
          parameters: {assign: {externalData: {provider: p, dataSource: Username}}}
        """,
    )
    run = cli("lint", str(tmp_path))
    assert run.code == 1
    lines = run.out.splitlines()
    assert [line.split(": ", 3)[:3] for line in lines] == [
        [f"{path}:6:13", "document 1", "spec.location"],
        [f"{path}:14:13", "document 2", "spec.location"],
        [f"{path}:22:13", "document 3", "spec.location"],
        [f"{path}:30:39", "document 4", "spec.parameters.assign.externalData"],
    ]
    assert "conflicting schemas" in lines[0] and "conflicting schemas" in lines[1]
    assert "ModifySet broken: invalid location format" in lines[2]
    assert "AssignMetadata reads-a-provider: external data" in lines[3]
    assert (
        run.err == "celkeeper lint: 4 problems in 1 files: 0 templates, 0 constraints, 0 suites, 4 mutators\n"
    )
