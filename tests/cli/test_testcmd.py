"""`celkeeper test` (gator test-like reviews of files)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import EXAMPLES, run_unprivileged, write_dedented


def test_denying_results_are_printed_and_exit_1(cli, engine: str) -> None:
    # gator test's text: `<apiVersion>/<Kind> <ns>/<name>: ["<constraint>"] Message: "<message>"`
    folder = EXAMPLES / "allowed-registries"
    run = cli("test", "-f", str(folder), "--engine", engine)
    assert run.code == 1, run.err
    lines = run.out.splitlines()
    assert (
        'v1/Pod shop/web: ["pods-from-approved-registries"] Message: "images must come from an allowed '
        "registry (registry.example.com/, mirror.gcr.io/): quay.io/prometheus/node-exporter:v1.8.0, "
        'docker.io/library/busybox:1.36"'
    ) in lines
    assert any(line.startswith('v1/Pod shop/lookalike: ["pods-from-approved-registries"] ') for line in lines)
    assert any(
        line.startswith('v1/Pod shop/debug-target: ["pods-from-approved-registries"] ') for line in lines
    )
    assert len(lines) == 3  # the allowed Pod and the kube-system Pod produce nothing
    assert run.err == "celkeeper test: summary: 8 objects read, 8 reviewed, 0 not reviewed, 0 errors\n"


def test_warn_results_do_not_fail(cli) -> None:
    run = cli("test", "-f", str(EXAMPLES / "disallow-latest-tag"))
    assert run.code == 0, run.err
    assert run.out.splitlines() == [  # ordered by action, then message, as gator orders them
        'v1/Pod shop/api: ["no-latest-images"] Message: "container api: image '
        'registry.example.com/shop/api:latest uses disallowed tag latest"',
        'v1/Pod shop/cache: ["no-latest-images"] Message: "container cache: image '
        "registry.example.com:5000/library/redis has no tag (means :latest); container init: image "
        'registry.example.com/shop/init:dev uses disallowed tag dev"',
    ]


def test_cluster_scoped_objects_and_json_output(cli) -> None:
    # gator test's JSON: target, msg, constraint (with its default action), enforcementAction,
    # scopedActions (when scoped), violatingObject, trace
    run = cli("test", "-f", str(EXAMPLES / "required-labels"), "-o", "json")
    assert run.code == 1
    rows = json.loads(run.out)
    by_name = {(r["violatingObject"]["kind"], r["violatingObject"]["metadata"]["name"]): r for r in rows}
    scratch = by_name[("Namespace", "scratch")]
    assert list(scratch) == ["target", "msg", "constraint", "enforcementAction", "violatingObject", "trace"]
    assert scratch["target"] == "admission.k8s.gatekeeper.sh" and scratch["trace"] is None
    assert scratch["enforcementAction"] == "deny"
    assert scratch["msg"] == "Namespace scratch is missing required labels: owner, cost-center"
    assert scratch["violatingObject"]["metadata"] == {"name": "scratch", "labels": {"purpose": "experiments"}}
    assert scratch["constraint"]["kind"] == "CKRequiredLabels"
    assert scratch["constraint"]["metadata"]["name"] == "namespaces-have-owner"
    assert scratch["constraint"]["spec"]["enforcementAction"] == "deny"  # defaulted, as gator shows it
    warn = by_name[("Deployment", "checkout")]
    assert (
        warn["enforcementAction"] == "warn"
        and warn["violatingObject"]["metadata"]["namespace"] == "team-shop"
    )
    text = cli("test", "-f", str(EXAMPLES / "required-labels"))
    assert (
        'v1/Namespace scratch: ["namespaces-have-owner"] Message: "Namespace scratch is missing required '
        'labels: owner, cost-center"' in text.out.splitlines()
    )


def test_deny_only_and_multiple_inputs(cli, tmp_path: Path) -> None:
    pod = write_dedented(
        tmp_path / "pod.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: bad, namespace: shop}
        spec:
          containers: [{name: c, image: "docker.io/nginx:latest"}]
        """,
    )
    run = cli(
        "test",
        "-f",
        str(EXAMPLES / "allowed-registries" / "template.yaml"),
        "-f",
        str(EXAMPLES / "allowed-registries" / "constraint.yaml"),
        "-f",
        str(EXAMPLES / "disallow-latest-tag" / "template.yaml"),
        "-f",
        str(EXAMPLES / "disallow-latest-tag" / "constraint.yaml"),
        "-f",
        str(pod),
        "--deny-only",
    )
    assert run.code == 1
    assert run.out.splitlines() == [
        'v1/Pod shop/bad: ["pods-from-approved-registries"] Message: "images must come from an allowed '
        'registry (registry.example.com/, mirror.gcr.io/): docker.io/nginx:latest"'
    ]


def test_namespace_selector_uses_namespaces_among_the_inputs(cli) -> None:
    run = cli("test", "-f", str(EXAMPLES / "seccomp"))
    assert run.code == 1
    names = sorted(set(re.findall(r"^v1/Pod (\S+): ", run.out, re.M)))
    assert names == ["payments/api"]  # sandbox is not selected; payments is


def test_no_policies_no_results(cli, tmp_path: Path) -> None:
    write_dedented(tmp_path / "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    run = cli("test", "-f", str(tmp_path))
    assert (run.code, run.out) == (0, "")
    assert run.err == "celkeeper test: summary: 1 objects read, 1 reviewed, 0 not reviewed, 0 errors\n"


def test_broken_inputs_are_error_lines(cli, tmp_path: Path) -> None:
    write_dedented(tmp_path / "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    shutil.copy(EXAMPLES / "allowed-registries" / "template.yaml", tmp_path / "template.yaml")
    write_dedented(
        tmp_path / "constraint.yaml",
        """\
        apiVersion: constraints.celkeeper.io/v1beta1
        kind: CKAllowedRegistries
        metadata: {name: typo}
        spec:
          parameters:
            registry: ["x/"]
        """,
    )
    run = cli("test", "-f", str(tmp_path))
    assert run.code == 1
    errors = run.err.splitlines()
    assert any(
        e.startswith(f"celkeeper test: {tmp_path}/broken.yaml:4:1: document 1: YAML/JSON syntax error")
        for e in errors
    ), errors
    assert any(
        e.startswith(f"celkeeper test: {tmp_path}/constraint.yaml:") and "registry" in e for e in errors
    ), errors
    assert "Traceback" not in run.err
    run = cli("test", "-f", str(tmp_path / "missing.yaml"))
    assert (
        run.code == 1 and run.err == f"celkeeper test: {tmp_path}/missing.yaml: no such file or directory\n"
    )


# -- every input accounted for ------------------------------------------------------------------------------


def test_a_truncated_template_is_a_located_error_and_fails(cli, tmp_path: Path) -> None:
    # gator loads a template whose CEL does not compile (the policy does nothing here: no validation is
    # left); celkeeper says where and exits 1
    folder = tmp_path / "required-labels"
    shutil.copytree(EXAMPLES / "required-labels", folder)
    text = (folder / "template.yaml").read_text()
    cut = text[: text.index("              - name: missing")]
    (folder / "template.yaml").write_text(
        cut.rstrip()
        + "\n              - name: missing\n                expression: >-\n"
        + "                  variables.required.filter(\n"
    )
    run = cli("test", "-f", str(folder))
    assert run.code == 1
    errors = run.err.splitlines()
    assert re.fullmatch(
        rf"celkeeper test: {folder}/template.yaml:\d+:\d+: document 1: "
        r"spec\.targets\[0\]\.code\[0\]\.source\."
        r"variables\[2\]\.expression: template ckrequiredlabels: variable 'missing' does not compile: .*",
        errors[0],
    ), errors
    assert errors[-1].startswith("celkeeper test: summary: ") and errors[-1].endswith(", 1 errors")


def test_a_list_is_reviewed_item_by_item(cli, tmp_path: Path) -> None:
    # what kubectl prints (`kubectl get pods -o yaml`); gator reviews the List as one object
    shutil.copy(EXAMPLES / "allowed-registries" / "template.yaml", tmp_path / "template.yaml")
    shutil.copy(EXAMPLES / "allowed-registries" / "constraint.yaml", tmp_path / "constraint.yaml")
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "shop"},
            "spec": {"containers": [{"name": "c", "image": "docker.io/nginx:1"}]},
        }
        for i in range(3)
    ]
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "items": pods, "kind": "List"}))
    run = cli("test", "-f", str(tmp_path))
    assert run.code == 1
    assert sorted(re.findall(r"^v1/Pod shop/(p\d):", run.out, re.M)) == ["p0", "p1", "p2"]
    assert run.err == "celkeeper test: summary: 5 objects read, 5 reviewed, 0 not reviewed, 0 errors\n"


def test_no_input_is_an_error_as_in_gator(cli, tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    run = cli("test", "-f", str(tmp_path))
    assert run.code == 1
    assert run.err.splitlines() == [
        "celkeeper test: no input data identified",
        "celkeeper test: summary: 0 objects read, 0 reviewed, 0 not reviewed, 1 errors",
    ]


def test_a_folder_that_cannot_be_read_is_an_error(shared_tmp: Path) -> None:
    folder = shared_tmp / "policies"
    shutil.copytree(EXAMPLES / "allowed-registries", folder)
    hidden = folder / "more"
    hidden.mkdir()
    shutil.copy(EXAMPLES / "allowed-registries" / "template.yaml", hidden / "template.yaml")
    for path in shared_tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    hidden.chmod(0)
    run = run_unprivileged("test", "-f", str(folder), "--engine", "cel-python")
    assert run.code == 1, run.err
    errors = run.err.splitlines()
    assert errors[0] == f"celkeeper test: {hidden}: cannot list: Permission denied", errors
    assert errors[-1].endswith(", 1 errors")


_IMPORTS = (
    "import sys\n"
    "from celkeeper.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "imported = 'celkeeper.admissionpolicy.policies' in sys.modules\n"
    "print('admission policies imported:', imported, file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def test_kubernetes_admission_policies_are_imported_only_for_files_holding_some(tmp_path: Path) -> None:
    """A `test -f` run over Gatekeeper's policies alone does not import the admission policies' evaluation
    (start-up per file, as pre-commit runs it); one whose files hold an admission policy does, and answers."""
    without = subprocess.run(
        [sys.executable, "-c", _IMPORTS, "test", "-f", str(EXAMPLES / "required-labels")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "admission policies imported: False" in without.stderr, without.stderr
    assert "objects read" in without.stderr and without.returncode == 1
    suite = Path(__file__).resolve().parents[1] / "admissionpolicy" / "suite"
    with_policies = subprocess.run(
        [sys.executable, "-c", _IMPORTS, "test", "-f", str(suite)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "admission policies imported: True" in with_policies.stderr, with_policies.stderr
    assert "ValidatingAdmissionPolicy 'replica-limit'" in with_policies.stdout, with_policies.stdout
