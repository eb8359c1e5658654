"""`celkeeper test --cluster` (and `explain --cluster`) against a real kube-apiserver, as a CI identity
bound to exactly deploy/ci-rbac.yaml (a client-certificate user: RBAC applies to it).

The cluster holds policies in both API groups (a celkeeper template and constraint; a Gatekeeper
template, under Gatekeeper's own ConstraintTemplate CRD, and a constraint), an ExpansionTemplate (under
deploy/expansiontemplate-crd.yaml, which must be Gatekeeper's CRD) and Namespaces. Manifests are checked
as CREATEs: a Deployment denied because of its Pod template (the parent-level message), a Pod denied by
the Gatekeeper constraint in a namespace the manifests create (its labels are the manifests'), one in a
namespace that exists nowhere (reported, not checked); exit codes and JSON. --against-live checks an
existing object as an UPDATE of it."""

from __future__ import annotations

import contextlib
import io
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.cli.main import main
from celkeeper.crds import constraint_crd
from tests.incluster.support import (
    ROOT,
    create_namespace,
    install_crds,
    rbac_kubeconfig,
    wait_all_established,
)
from tests.support.apiserver import ControlPlane
from tests.support.examples import example_template
from tests.support.gatekeeper_src import gatekeeper_crd
from tests.support.kubectl import apply
from tests.support.policydocs import expansion_data, template_data

pytestmark = pytest.mark.kube

CI_RBAC = ROOT / "deploy" / "ci-rbac.yaml"
EXPANSION_CRD = ROOT / "deploy" / "expansiontemplate-crd.yaml"


@dataclass
class Setting:
    suffix: str
    live: str  # a namespace that exists (label checked=yes)
    created: str  # a namespace only the manifests create
    ci: Path  # kubeconfig of a user bound to exactly deploy/ci-rbac.yaml
    celkeeper_kind: str
    gatekeeper_kind: str
    expansion: str


def _gatekeeper_template(kind: str) -> dict[str, Any]:
    validation = {
        "expression": "has(object.metadata.labels) && 'owner' in object.metadata.labels",
        "messageExpression": "object.kind + ' ' + object.metadata.name + ' has no owner label'",
    }
    return template_data(kind, [validation])


def _gatekeeper_constraint_crd(template: dict[str, Any]) -> dict[str, Any]:
    """The constraint CRD Gatekeeper's controller makes for a template (here from celkeeper's renderer,
    in Gatekeeper's group: the test has no Gatekeeper controller)."""
    crd = json.loads(
        json.dumps(constraint_crd(template)).replace("constraints.celkeeper.io", "constraints.gatekeeper.sh")
    )
    crd["metadata"].pop("ownerReferences", None)
    return crd


@pytest.fixture(scope="module")
def setting(kube_cluster: ControlPlane) -> Iterator[Setting]:
    install_crds(kube_cluster)
    kube_cluster.kubectl(
        "apply", "-f", str(gatekeeper_crd("constrainttemplate-customresourcedefinition.yaml"))
    )
    kube_cluster.kubectl("apply", "-f", str(EXPANSION_CRD))
    wait_all_established(
        kube_cluster,
        ["constrainttemplates.templates.gatekeeper.sh", "expansiontemplate.expansion.gatekeeper.sh"],
    )
    suffix = secrets.token_hex(3)
    ck_kind, gk_kind = f"CKPriv{suffix}", f"GKOwner{suffix}"
    live = create_namespace(kube_cluster, f"check-live-{suffix}", {"checked": "yes"})
    created = f"check-new-{suffix}"
    ck_template = example_template("privileged-containers", ck_kind)
    gk_template = _gatekeeper_template(gk_kind)
    ck_crd, gk_crd = constraint_crd(ck_template), _gatekeeper_constraint_crd(gk_template)
    apply(kube_cluster, ck_template)
    apply(kube_cluster, gk_template)
    kube_cluster.kubectl("apply", "-f", "-", input=[ck_crd, gk_crd])
    wait_all_established(kube_cluster, [ck_crd["metadata"]["name"], gk_crd["metadata"]["name"]])
    expansion = f"expand-deployments-{suffix}"
    apply(
        kube_cluster,
        {
            "apiVersion": "constraints.celkeeper.io/v1beta1",
            "kind": ck_kind,
            "metadata": {"name": "no-privileged"},
            "spec": {
                "match": {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}], "namespaces": [f"*{suffix}*"]}
            },
        },
    )
    apply(
        kube_cluster,
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": gk_kind,
            "metadata": {"name": "must-have-owner"},
            "spec": {
                "match": {
                    "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                    "namespaceSelector": {"matchLabels": {"checked": "yes"}},
                }
            },
        },
    )
    apply(
        kube_cluster,
        expansion_data(expansion, [("apps", "v1", "Deployment")]),
    )
    ci = rbac_kubeconfig(kube_cluster, "default", f"ci-{suffix}", roles=(), also=[CI_RBAC])
    try:
        yield Setting(suffix, live, created, ci, ck_kind, gk_kind, expansion)
    finally:  # the session's cluster is shared: nothing of this module may stay active
        kube_cluster.kubectl("delete", "expansiontemplate", expansion, "--ignore-not-found", check=False)
        kube_cluster.kubectl(
            "delete",
            "constrainttemplates.templates.celkeeper.io",
            ck_kind.lower(),
            "--ignore-not-found",
            check=False,
        )
        kube_cluster.kubectl(
            "delete",
            "constrainttemplates.templates.gatekeeper.sh",
            gk_kind.lower(),
            "--ignore-not-found",
            check=False,
        )
        kube_cluster.kubectl(
            "delete",
            "crd",
            ck_crd["metadata"]["name"],
            gk_crd["metadata"]["name"],
            "--ignore-not-found",
            check=False,
        )


def _pod(name: str, namespace: str, labels: dict[str, str], privileged: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/app:1",
                    "securityContext": {"privileged": privileged},
                }
            ]
        },
    }


def _deployment(name: str, namespace: str, privileged: bool) -> dict[str, Any]:
    pod = _pod(name, namespace, {"app": name, "owner": "team-a"}, privileged)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"owner": "team-a"}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": pod["metadata"]["labels"]}, "spec": pod["spec"]},
        },
    }


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_manifests_are_checked_as_the_webhook_would(setting: Setting, tmp_path: Path) -> None:
    manifests = _write(
        tmp_path / "manifests.yaml",
        [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": setting.created, "labels": {"checked": "yes"}},
            },
            _deployment("web", setting.created, privileged=True),
            _pod("unowned", setting.created, {"app": "x"}),
            _pod("elsewhere", f"check-missing-{setting.suffix}", {"app": "x"}),
            _pod("fine", setting.live, {"owner": "team-b"}),
        ],
    )
    code, out, err = _run(
        "test", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(manifests), "-o", "json"
    )
    assert code == 1, err
    rows = {
        (
            r["object"]["kind"],
            r["object"]["name"],
            r["constraint"]["kind"],
            r["message"],
            r["enforcementAction"],
            r["operation"],
        )
        for r in json.loads(out)
    }
    assert rows == {
        (
            "Deployment",
            "web",
            setting.celkeeper_kind,
            f"[Implied by {setting.expansion}] privileged containers are not allowed: app",
            "deny",
            "CREATE",
        ),
        ("Pod", "unowned", setting.gatekeeper_kind, "Pod unowned has no owner label", "deny", "CREATE"),
    }
    assert (
        f"namespace check-missing-{setting.suffix} does not exist in the cluster and the manifests do not "
        "create it" in err
    )
    assert "Traceback" not in err


def test_clean_manifests_exit_0_and_text_lines(setting: Setting, tmp_path: Path) -> None:
    manifests = _write(
        tmp_path / "ok.yaml",
        [
            _deployment("web", setting.live, privileged=False),
            _pod("owned", setting.live, {"owner": "team-b"}),
        ],
    )
    code, out, err = _run("test", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(manifests))
    assert (code, out) == (0, ""), err
    unowned = _write(tmp_path / "warned.yaml", [_pod("unowned", setting.live, {})])
    code, out, _ = _run("test", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(unowned))
    assert code == 1
    assert (
        out
        == f"v1/Pod {setting.live}/unowned: [must-have-owner] Pod unowned has no owner label (deny, CREATE)\n"
    )


def test_against_live_checks_an_update(kube_cluster: ControlPlane, setting: Setting, tmp_path: Path) -> None:
    live = _deployment("api", setting.live, privileged=True)
    kube_cluster.kubectl("apply", "-f", "-", input=live)  # stored as it is (no webhook in this test)
    manifests = _write(tmp_path / "update.yaml", [live])
    # the role does not allow reading Deployments: --against-live needs `get` on the manifests' kinds
    code, _, err = _run(
        "test", "--cluster", "--kubeconfig", str(setting.ci), "--against-live", "-f", str(manifests)
    )
    assert code == 1 and "403" in err and "deployments" in err and "Traceback" not in err
    reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"ci-deployments-{setting.suffix}"},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"ci-deployments-{setting.suffix}"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": reader["metadata"]["name"],
        },
        "subjects": [
            {"kind": "User", "name": f"ci-{setting.suffix}", "apiGroup": "rbac.authorization.k8s.io"}
        ],
    }
    kube_cluster.kubectl("apply", "-f", "-", input=[reader, binding])
    # the privileged-containers template does not re-check UPDATEs: as an update the Deployment passes
    code, out, err = _run(
        "test",
        "--cluster",
        "--kubeconfig",
        str(setting.ci),
        "--against-live",
        "-f",
        str(manifests),
        "-o",
        "json",
    )
    assert (code, json.loads(out)) == (0, []), err
    code, out, _ = _run(
        "test", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(manifests), "-o", "json"
    )
    assert code == 1 and [r["operation"] for r in json.loads(out)] == ["CREATE"]


def test_explain_against_the_cluster(setting: Setting, tmp_path: Path) -> None:
    manifest = _write(tmp_path / "d.yaml", [_deployment("web", setting.live, privileged=True)])
    code, out, err = _run(
        "explain", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(manifest), "-o", "json"
    )
    assert code == 1, err
    (explained,) = json.loads(out)
    kinds = [(o["kind"], o["source"], o.get("impliedBy", "")) for o in explained["objects"]]
    assert kinds == [("Deployment", "Original", ""), ("Pod", "Generated", setting.expansion)]
    pod = explained["objects"][1]
    (entry,) = [c for c in pod["constraints"] if c["kind"] == setting.celkeeper_kind]
    assert entry["status"] == "violated" and entry["location"]["file"].startswith("cluster:")


def test_without_the_role_one_clear_error(
    kube_cluster: ControlPlane, setting: Setting, tmp_path: Path
) -> None:
    nobody = kube_cluster.kubeconfig_for(f"nobody-{setting.suffix}")
    manifests = _write(tmp_path / "m.yaml", [_pod("p", setting.live, {})])
    code, out, err = _run("test", "--cluster", "--kubeconfig", str(nobody), "-f", str(manifests))
    assert code == 1 and out == ""
    assert err.startswith("celkeeper test: ") and "403" in err and len(err.strip().splitlines()) == 1, err


def test_the_expansion_crd_is_gatekeepers() -> None:
    ours = [d for d in yaml.safe_load_all(EXPANSION_CRD.read_text()) if d is not None]
    theirs = gatekeeper_crd("expansion.gatekeeper.sh_expansiontemplate.yaml").read_text()
    assert ours == [d for d in yaml.safe_load_all(theirs) if d is not None]


def test_manifests_are_read_as_kubectl_reads_them(setting: Setting, tmp_path: Path) -> None:
    # a List item by item and `privileged: on` a boolean, as `kubectl apply -f` sends them
    listed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [_deployment("web", setting.live, privileged=True)],
    }
    text = yaml.safe_dump(listed).replace("privileged: true", "privileged: on")
    assert "privileged: on" in text
    (tmp_path / "list.yaml").write_text(text)
    code, out, err = _run(
        "test", "--cluster", "--kubeconfig", str(setting.ci), "-f", str(tmp_path / "list.yaml")
    )
    assert code == 1, err
    assert out == (
        f"apps/v1/Deployment {setting.live}/web: [no-privileged] "
        f"[Implied by {setting.expansion}] privileged containers are not allowed: app (deny, CREATE)\n"
    )
