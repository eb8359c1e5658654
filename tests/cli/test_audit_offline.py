"""`celkeeper audit` over files (for CI pipelines): every violation, totals per constraint, Lists from
kubectl expanded, Namespaces among the objects seen by namespaceSelector; exit 1 on a deny violation."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from tests.cli.conftest import EXAMPLES

TEMPLATE = """\
apiVersion: templates.celkeeper.io/v1
kind: ConstraintTemplate
metadata: {name: k8slabels}
spec:
  crd:
    spec:
      names: {kind: K8sLabels}
      validation:
        openAPIV3Schema:
          type: object
          properties: {key: {type: string}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: "has(object.metadata.labels) && variables.params.key in object.metadata.labels"
          messageExpression: "'missing label ' + variables.params.key"
"""


def constraint(
    name: str,
    key: str,
    action: str = "deny",
    match: str = "{kinds: [{apiGroups: [''], kinds: [Pod]}]}",
    scoped: str = "",
) -> str:
    return (
        textwrap.dedent(f"""\
        apiVersion: constraints.celkeeper.io/v1beta1
        kind: K8sLabels
        metadata: {{name: {name}}}
        spec:
          enforcementAction: {action}
          match: {match}
          parameters: {{key: {key}}}
        """)
        + scoped
    )


def pods_list(names: list[str], namespace: str = "shop") -> str:
    """What `kubectl get pods -o yaml` prints: a v1 List."""
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": namespace}} for n in names
    ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "template.yaml").write_text(TEMPLATE)
    (folder / "constraints.yaml").write_text(
        constraint("owner", "owner")
        + "---\n"
        + constraint("team", "team", action="warn")
        + "---\n"
        + constraint(
            "tier",
            "tier",
            action="scoped",
            scoped=textwrap.dedent("""\
              scopedEnforcementActions:
              - action: deny
                enforcementPoints: [{name: audit.gatekeeper.sh}]
              - action: warn
                enforcementPoints: [{name: "*"}]
            """)
            .replace("\n", "\n  ")
            .replace("scopedEnforcementActions", "  scopedEnforcementActions", 1),
        )
    )
    return folder


def test_every_violation_and_the_totals_deny_exits_1(cli, policies: Path, tmp_path: Path) -> None:
    objects = tmp_path / "pods.json"
    objects.write_text(pods_list(["web", "api"]))
    run = cli("audit", "--policy-dir", str(policies), "--objects", str(objects))
    assert run.code == 1, run.err
    lines = run.out.splitlines()
    assert lines[0].split() == ["CONSTRAINT", "ACTION", "OBJECT", "MESSAGE"]
    rows = [line.split(None, 3) for line in lines[1:7]]
    assert rows == [
        ["K8sLabels/owner", "deny", "v1/Pod", "shop/api  missing label owner"],
        ["K8sLabels/owner", "deny", "v1/Pod", "shop/web  missing label owner"],
        ["K8sLabels/team", "warn", "v1/Pod", "shop/api  missing label team"],
        ["K8sLabels/team", "warn", "v1/Pod", "shop/web  missing label team"],
        ["K8sLabels/tier", "scoped(deny,warn)", "v1/Pod", "shop/api  missing label tier"],
        ["K8sLabels/tier", "scoped(deny,warn)", "v1/Pod", "shop/web  missing label tier"],
    ]
    totals = [line.split() for line in lines[8:12]]
    assert totals == [
        ["CONSTRAINT", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS"],
        ["K8sLabels/owner", "deny", "2"],
        ["K8sLabels/team", "warn", "2"],
        ["K8sLabels/tier", "scoped", "2"],
    ]
    assert lines[-1] == "6 violation(s) in 2 object(s), 3 constraint(s): 2 deny, 2 warn, 2 scoped"
    assert run.err == ""


def test_only_warnings_exit_0(cli, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("team", "team", action="warn"))
    objects = tmp_path / "o.json"
    objects.write_text(pods_list(["web"]))
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 0, run.err
    assert run.out.splitlines()[-1] == "1 violation(s) in 1 object(s), 1 constraint(s): 1 warn"


def test_json_gives_the_status_as_the_cluster_would_hold_it_and_every_violation(
    cli, policies: Path, tmp_path: Path
) -> None:
    objects = tmp_path / "pods.json"
    objects.write_text(pods_list([f"p{i}" for i in range(5)]))
    run = cli(
        "audit",
        "--policy-dir",
        str(policies),
        "--objects",
        str(objects),
        "-o",
        "json",
        "--constraint-violations-limit",
        "2",
    )
    assert run.code == 1
    doc = json.loads(run.out)
    assert (doc["objects"], doc["totalViolations"]) == (5, 15)
    assert doc["byEnforcementAction"] == {"deny": 5, "warn": 5, "scoped": 5}
    owner = next(c for c in doc["constraints"] if c["name"] == "owner")
    assert owner["status"]["totalViolations"] == 5
    assert [v["name"] for v in owner["status"]["violations"]] == ["p1", "p0"]  # Gatekeeper's capped order
    assert [v["name"] for v in owner["allViolations"]] == ["p0", "p1", "p2", "p3", "p4"]
    tier = next(c for c in doc["constraints"] if c["name"] == "tier")
    assert tier["allViolations"][0]["enforcementActions"] == ["deny", "warn"]


def test_objects_from_stdin_a_typed_list_and_namespaces_for_namespace_selector(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    selected = "{namespaceSelector: {matchLabels: {env: prod}}}"
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("prod-owner", "owner", match=selected))
    pod_list = {  # as the API returns it (GET /api/v1/pods): items carry no apiVersion/kind
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [
            {"metadata": {"name": "a", "namespace": "prod"}},
            {"metadata": {"name": "b", "namespace": "dev"}},
        ],
    }
    namespaces = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "prod", "labels": {"env": "prod", "owner": "x"}},
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": {"env": "dev"}}},
        ],
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(pod_list) + "\n---\n" + json.dumps(namespaces)))
    run = cli("audit", "--policy-dir", str(folder), "--objects", "-")
    assert run.code == 1, run.err
    assert "v1/Pod prod/a" in run.out and "prod/b" not in run.out and "dev/b" not in run.out
    assert run.out.splitlines()[-1] == "1 violation(s) in 4 object(s), 1 constraint(s): 1 deny"


def test_a_broken_policy_is_reported_with_its_place_and_fails(cli, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE.replace("variables.params.key in", "variables.params.key in in"))
    objects = tmp_path / "o.json"
    objects.write_text(pods_list(["web"]))
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    assert f"celkeeper audit: {folder / 't.yaml'}:" in run.err


def test_the_examples_folder_audits_its_sample_objects(cli) -> None:
    run = cli("audit", "-f", str(EXAMPLES / "required-labels"))
    assert run.code == 1, run.err
    rows = [line.split()[:4] for line in run.out.splitlines()[1:4]]
    assert rows == [
        ["CKRequiredLabels/namespaces-have-owner", "deny", "v1/Namespace", "payments"],
        ["CKRequiredLabels/namespaces-have-owner", "deny", "v1/Namespace", "scratch"],
        ["CKRequiredLabels/workloads-have-app-label", "warn", "apps/v1/Deployment", "team-shop/checkout"],
    ]
    assert run.out.splitlines()[-1] == "3 violation(s) in 7 object(s), 2 constraint(s): 2 deny, 1 warn"


def test_an_object_that_cannot_be_reviewed_is_reported_and_fails(cli, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    objects = tmp_path / "o.yaml"
    objects.write_text("apiVersion: 1\nkind: Pod\nmetadata: {name: odd, namespace: shop}\n")
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    assert (
        "odd: not evaluated for K8sLabels/owner: cannot be reviewed: the object to review has no apiVersion"
        in (run.err)
    )


def test_cluster_and_file_options_do_not_mix(cli, tmp_path: Path) -> None:
    run = cli("audit", "--source", "kubernetes", "--policy-dir", str(tmp_path))
    assert run.code == 1 and "--policy-dir, --objects and -f are for --source files" in run.err
    run = cli("audit", "--source", "files")
    assert run.code == 1 and "needs --policy-dir and --objects, or -f" in run.err
    run = cli("audit", "--source", "kubernetes", "--audit-interval", "0")
    assert run.code == 1 and "--once" in run.err
