"""`celkeeper expand`: gator expand's flags and output (its agreement with gator on generated inputs:
tests/e2e/gator/test_expand.py); what celkeeper does where gator stops: every problem located on stderr,
the other objects' resultants printed, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import write_dedented
from tests.support.native import require_celgo

TEMPLATE = """\
apiVersion: expansion.gatekeeper.sh/v1alpha1
kind: ExpansionTemplate
metadata: {name: expand-deployments}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  templateSource: spec.template
  generatedGVK: {kind: Pod, group: "", version: v1}
"""
MUTATOR = """\
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: pull-always}
spec:
  applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
  match: {source: Generated}
  location: "spec.containers[name:*].imagePullPolicy"
  parameters: {assign: {value: Always}}
"""


def _deployment(name: str, namespace: str = "shop") -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: main, image: nginx}}]}}
"""


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    require_celgo()
    write_dedented(tmp_path / "template.yaml", TEMPLATE)
    write_dedented(tmp_path / "mutator.yaml", MUTATOR)
    write_dedented(tmp_path / "objects.yaml", _deployment("web") + "---\n" + _deployment("api"))
    return tmp_path


def test_resultants_are_mutated_and_sorted_as_gator_sorts_them(cli, inputs: Path) -> None:
    run = cli("expand", "--filename", str(inputs))
    assert run.code == 0, run.err
    pods = list(yaml.safe_load_all(run.out))
    # gator sorts by name + apiVersion + kind, descending
    assert [p["metadata"]["name"] for p in pods] == ["web-pod", "api-pod"]
    assert all(p["spec"]["containers"][0]["imagePullPolicy"] == "Always" for p in pods)
    assert run.out.count("\n---\n") == 1 and run.out.endswith("\n")


def test_json_to_a_file(cli, inputs: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    run = cli("expand", "-n", str(inputs), "-f", "json", "-o", str(target))
    assert run.code == 0, run.err
    assert run.out == f"Writing output to file: {target}\n"
    text = target.read_text()
    assert text.startswith("{\n    ") and '"name": "web-pod"' in text


def test_a_problem_is_reported_and_the_other_objects_still_expanded(cli, inputs: Path) -> None:
    # gator stops at the first error; celkeeper says where it is and expands the rest
    write_dedented(
        inputs / "broken.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: broken}\n"
    )
    run = cli("expand", "-n", str(inputs))
    assert run.code == 1
    assert "broken.yaml" in run.err and "expanding resource broken" in run.err
    assert [p["metadata"]["name"] for p in yaml.safe_load_all(run.out)] == ["web-pod", "api-pod"]


def test_a_modifyset_without_operation_is_refused_as_gator_refuses_it(cli, inputs: Path) -> None:
    write_dedented(
        inputs / "modifyset.yaml",
        """\
        apiVersion: mutations.gatekeeper.sh/v1
        kind: ModifySet
        metadata: {name: args}
        spec:
          applyTo: [{groups: [""], versions: [v1], kinds: [Pod]}]
          location: "spec.containers[name:*].args"
          parameters: {values: {fromList: ["--v=2"]}}
        """,
    )
    run = cli("expand", "-n", str(inputs))
    assert run.code == 1
    assert "unrecognized operation for modifyset" in run.err
    # `celkeeper mutate` reads it as the API server stores it: operation defaults to merge
    mutated = cli("mutate", "-f", str(inputs / "modifyset.yaml"), "-f", str(inputs / "objects.yaml"))
    assert "unrecognized operation" not in mutated.err


def test_no_input(cli, tmp_path: Path) -> None:
    assert cli("expand").code == 1
    (tmp_path / "empty").mkdir()
    run = cli("expand", "-n", str(tmp_path / "empty"))
    assert run.code == 1 and "no input data identified" in run.err
    assert cli("expand", "--image", "ghcr.io/x/policies:v1").code == 2
