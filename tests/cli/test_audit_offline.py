"""`celkeeper audit` over files (for CI pipelines): every violation, totals per constraint, Lists from
kubectl expanded, Namespaces among the objects seen by namespaceSelector; exit 1 on a deny violation."""

from __future__ import annotations

import io
import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import EXAMPLES, run_unprivileged

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
    assert run.err == "celkeeper audit: summary: 2 objects read, 2 audited, 0 not audited, 0 errors\n"


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


# -- every object accounted for ------------------------------------------------------------------------------


def kubectl_list(names: list[str], namespace: str = "shop") -> str:
    """`kubectl get pods -o yaml`: a List whose items come before its kind."""
    items = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": namespace}} for n in names
    ]
    return yaml.safe_dump(
        {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    )


SUMMARY = (
    "celkeeper audit: summary: {read} objects read, {audited} audited, {not_audited} not audited{why}, "
    "{errors} errors"
)


def summary(read: int, audited: int, errors: int = 0, **why: int) -> str:
    reasons = ", ".join(f"{reason.replace('_', ' ')}: {n}" for reason, n in why.items())
    return SUMMARY.format(
        read=read,
        audited=audited,
        not_audited=read - audited,
        why=f" ({reasons})" if reasons else "",
        errors=errors,
    )


@pytest.mark.parametrize("form", ["list", "stream", "folder", "stdin", "json"])
def test_every_pod_of_every_form_is_audited(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    names = [f"pod-{i:04d}" for i in range(600)]
    objects = tmp_path / "objects"
    if form in ("list", "stdin"):
        objects.write_text(kubectl_list(names))
    elif form == "stream":
        pods = [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "namespace": "shop"}} for n in names
        ]
        objects.write_text("---\n".join(yaml.safe_dump(p) for p in pods))
    elif form == "json":
        objects.write_text(json.dumps(yaml.safe_load(kubectl_list(names)), indent=4))
    else:
        objects.mkdir()
        for start in range(0, len(names), 100):
            (objects / f"pods-{start}.yaml").write_text(kubectl_list(names[start : start + 100]))
    target = str(objects)
    if form == "stdin":
        monkeypatch.setattr("sys.stdin", io.StringIO(objects.read_text()))
        target = "-"
    run = cli("audit", "--policy-dir", str(folder), "--objects", target, "-o", "json")
    assert run.code == 0, run.err
    assert run.err == summary(600, 600) + "\n"
    doc = json.loads(run.out)
    assert (doc["read"], doc["objects"], doc["notAudited"], doc["errors"]) == (600, 600, {}, 0)
    assert doc["totalViolations"] == 600


def test_an_object_over_a_limit_is_named_and_the_run_fails(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celkeeper.documents import stream

    monkeypatch.setattr(stream, "MAX_OBJECT_VALUES", 150)  # the policies have fewer
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    items = yaml.safe_load(kubectl_list(["a", "big", "c"]))
    items["items"][1]["data"] = {f"k{i}": "v" for i in range(200)}
    objects = tmp_path / "pods.yaml"
    objects.write_text(yaml.safe_dump(items))
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    errors = run.err.splitlines()
    assert errors[-1] == summary(3, 2, errors=1, too_large=1)
    (limit,) = errors[:-1]
    assert re.fullmatch(
        rf"celkeeper audit: {objects}:\d+:3: document 1: items\[1\]: the object has more than 150 values .*",
        limit,
    )
    assert run.out.splitlines()[-1] == "2 violation(s) in 2 object(s), 1 constraint(s): 2 warn"


def test_documents_that_are_not_objects_are_counted_with_their_reason(cli, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    objects = tmp_path / "o.yaml"
    objects.write_text(
        "\n---\n".join(
            [
                TEMPLATE,  # a policy document among the objects: not an object that exists
                "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest: {}",
                "apiVersion: v1\nmetadata: {name: no-kind}",
                "- a list",
                "apiVersion: v1\nkind: Pod\nmetadata: {name: ok, namespace: shop}",
            ]
        )
    )
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    errors = run.err.splitlines()
    assert errors[-1] == summary(5, 1, errors=2, policy_document=1, AdmissionReview=1, not_an_object=2), (
        errors
    )
    assert any(
        e.startswith(f"celkeeper audit: {objects}:")
        and e.endswith(": document 3: not a Kubernetes object (apiVersion and kind are required)")
        for e in errors
    ), errors
    assert any("document 4: a document must be a mapping" in e for e in errors)


def test_a_syntax_error_is_located_and_what_came_before_is_counted(cli, tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    objects = tmp_path / "o.yaml"
    objects.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x}\n---\nkind: [\n")
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    errors = run.err.splitlines()
    assert errors[0].startswith(f"celkeeper audit: {objects}:6:1: document 2: YAML/JSON syntax error: ")
    assert errors[-1] == summary(1, 1, errors=1)


def test_a_template_that_does_not_compile_fails_the_run_with_its_place(cli, tmp_path: Path) -> None:
    # a template cut short: its YAML reads, its CEL does not compile
    folder = tmp_path / "p"
    folder.mkdir()
    head = TEMPLATE[: TEMPLATE.index("        - expression:")]
    line = head.count("\n") + 1
    cut = head + "        - expression: has(object.metadata.labels) &&\n"
    (folder / "t.yaml").write_text(cut + "---\n" + constraint("owner", "owner", action="warn"))
    objects = tmp_path / "o.json"
    objects.write_text(pods_list(["web"]))
    run = cli("audit", "--policy-dir", str(folder), "--objects", str(objects))
    assert run.code == 1
    assert re.search(
        rf"^celkeeper audit: {folder}/t.yaml:{line}:\d+: document 1: spec\.targets\[0\]\.code\[0\]\.source\."
        r"validations\[0\]\.expression: template k8slabels: validation does not compile: ",
        run.err,
        re.M,
    ), run.err


def test_a_folder_that_cannot_be_read_is_an_error(shared_tmp: Path) -> None:
    folder = shared_tmp / "p"
    folder.mkdir()
    (folder / "t.yaml").write_text(TEMPLATE + "---\n" + constraint("owner", "owner", action="warn"))
    objects = shared_tmp / "objects"
    hidden = objects / "hidden"
    hidden.mkdir(parents=True)
    (objects / "pods.json").write_text(pods_list(["web"]))
    (hidden / "more.json").write_text(pods_list(["api"]))
    for path in shared_tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    hidden.chmod(0)
    run = run_unprivileged(
        "audit", "--policy-dir", str(folder), "--objects", str(objects), "--engine", "cel-python"
    )
    assert run.code == 1, run.err
    errors = run.err.splitlines()
    assert errors[0] == f"celkeeper audit: {hidden}: cannot list: Permission denied", errors
    assert errors[-1] == summary(1, 1, errors=1)
