"""`celkeeper test --cluster` with Kubernetes' admission policies the cluster holds, against a real
kube-apiserver at the native library's Kubernetes version (the admission policy differential's:
tests/admissionpolicy/differential.py).

The API server holds ValidatingAdmissionPolicies taking parameters (a ConfigMap found through a paramRef
naming no namespace, so in the request's; a cluster-scoped custom Knob) with their bindings (Deny, and
Warn), a MutatingAdmissionPolicy with its binding when the server serves MutatingAdmissionPolicy v1, and
the CRDs of the custom kinds (Widget objects are tested, Knobs are parameters). `celkeeper test --cluster
-f` on objects must print what the API server answers a server-side dry-run create of each (its status
when it refuses, its warnings; with -o json the object after mutation), and the same lines as `celkeeper
test -f` given the cluster's policies, parameters, Namespaces and CRDs as files. A user not allowed to read
some of these gets a note for each, and the rest is still tested.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from celkeeper.cli.main import main
from tests.admissionpolicy import corpus
from tests.admissionpolicy.differential import (
    DRY_RUN,
    Server,
    discover,
    native_binaries,
    start_control_plane,
    strip_server_fields,
    wait_ready,
)
from tests.support.apiserver import ControlPlane
from tests.support.binaries import BinariesUnavailable
from tests.support.native import require_celgo
from tests.support.requirements import KUBE

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
CASE = "apcluster"
AR = "/apis/admissionregistration.k8s.io/v1"
MUTATING = ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings")


@dataclass
class Setting:
    cluster: ControlPlane
    srv: Server
    limited: str  # the namespace holding the ConfigMap parameter
    bare: str  # a namespace without one
    mutating: bool  # the server serves MutatingAdmissionPolicy v1
    #: what `celkeeper test -f` is given instead of the cluster: policies, bindings, parameters,
    #: Namespaces and CRDs, as the API server stores them
    stored: list[dict[str, Any]]


def _policies(mutating: bool) -> list[dict[str, Any]]:
    deployments = [corpus.rules(["deployments"], ["apps"])]
    widgets = [corpus.rules(["widgets"], [corpus.GROUP])]
    replicas = {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "validations": [
            {
                "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'",
            }
        ],
    }
    team = {"validations": [{"expression": "'team' in object.metadata.labels", "message": "no team label"}]}
    size = {
        "paramKind": {"apiVersion": f"{corpus.GROUP}/v1", "kind": "Knob"},
        "validations": [
            {
                "expression": "object.spec.size <= params.spec.limit",
                "messageExpression": "'size above ' + string(params.spec.limit)",
            }
        ],
    }
    found = [
        corpus.vap("apc-replicas", CASE, replicas, deployments),
        corpus.vapb(
            "apc-replicas", "apc-replicas", paramRef={"name": "limits", "parameterNotFoundAction": "Deny"}
        ),
        corpus.vap("apc-team", CASE, team, deployments),
        corpus.vapb("apc-team", "apc-team", ("Warn",)),
        corpus.vap("apc-size", CASE, size, widgets),
        corpus.vapb("apc-size", "apc-size", paramRef={"name": "apc-knob", "parameterNotFoundAction": "Deny"}),
    ]
    if mutating:
        owner = "Object{metadata: Object.metadata{labels: {'owner': 'platform'}}}"
        mutations = [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": owner}}]
        found += [
            corpus.mutating("apc-owner", CASE, {"mutations": mutations}, deployments),
            corpus.mapb("apc-owner", "apc-owner"),
        ]
    return found


def _objects(setting: Setting) -> list[dict[str, Any]]:
    app = [corpus.container("app", "registry.example.com/app:1")]
    return [
        corpus.deployment("big", setting.limited, CASE, app, replicas=5, team="a"),
        corpus.deployment("small", setting.limited, CASE, app, replicas=1),
        corpus.deployment("lost", setting.bare, CASE, app, replicas=1, team="a"),
        corpus.widget("huge", setting.limited, CASE, {"size": 20}),
        corpus.widget("tiny", setting.limited, CASE, {"size": 1}),
    ]


def _post(srv: Server, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    reply = srv.call("POST", path, obj)
    assert reply.code == 201, reply.body
    body: dict[str, Any] = reply.body
    return body


def _dry_run(srv: Server, obj: dict[str, Any]) -> Any:
    kind = discover(srv).of(obj)
    return srv.call("POST", kind.collection(obj["metadata"].get("namespace", "")), obj, DRY_RUN)


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    require_celgo()
    try:
        binaries = native_binaries()
    except BinariesUnavailable as err:
        KUBE.unavailable("the API server at the native library's version", err)
    cluster = start_control_plane(binaries, tmp_path_factory.mktemp("apcluster"))
    try:
        srv = Server(cluster)
        stored = [
            _post(srv, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", c) for c in corpus.CRDS
        ]
        wait_ready(lambda: {"Widget", "Knob"} <= {k for _, k in discover(srv).by_kind}, "the CRDs served")
        stored = [  # as the API server serves them once established
            srv.call(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{c['metadata']['name']}"
            ).body
            for c in stored
        ]
        limited, bare = f"{CASE}-limited", f"{CASE}-bare"
        for name in (limited, bare):
            stored.append(
                _post(
                    srv,
                    "/api/v1/namespaces",
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                )
            )
        params = [
            corpus.configmap("limits", limited, CASE, {"maxReplicas": "3"}),
            {
                "apiVersion": f"{corpus.GROUP}/v1",
                "kind": "Knob",
                "metadata": {"name": "apc-knob"},
                "spec": {"limit": 10},
            },
        ]
        stored.append(_post(srv, f"/api/v1/namespaces/{limited}/configmaps", params[0]))
        stored.append(_post(srv, f"/apis/{corpus.GROUP}/v1/knobs", params[1]))
        served = {k for v, k in discover(srv).by_kind if v == "admissionregistration.k8s.io/v1"}
        mutating = "MutatingAdmissionPolicy" in served
        for policy in _policies(mutating):
            stored.append(_post(srv, f"{AR}/{_plural(policy['kind'])}", policy))
        found = Setting(cluster, srv, limited, bare, mutating, stored)
        objects = {o["metadata"]["name"]: o for o in _objects(found)}

        def in_force() -> bool:
            answers = {name: _dry_run(srv, obj) for name, obj in objects.items()}
            labels = answers["small"].body.get("metadata", {}).get("labels", {})
            return (
                answers["big"].code == 422
                and answers["huge"].code == 422
                and bool(answers["small"].warnings)
                and (not mutating or labels.get("owner") == "platform")
            )

        wait_ready(in_force, "the admission policies in force", timeout=180)
        yield found
        srv.close()
    finally:
        cluster.stop()


def _ci_rules() -> list[dict[str, Any]]:
    """deploy/ci-rbac.yaml's rules, without those on admissionregistration.k8s.io."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "ci-rbac.yaml").read_text(encoding="utf-8"))
    (role,) = [d for d in docs if d and d["kind"] == "ClusterRole"]
    return [r for r in role["rules"] if "admissionregistration.k8s.io" not in r["apiGroups"]]


def _plural(kind: str) -> str:
    lower = kind.lower()
    return f"{lower}s" if lower.endswith("binding") else f"{lower[:-1]}ies"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _head(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['apiVersion']}/{obj['kind']} {meta['namespace']}/{meta['name']}"


def _write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def _without_status(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if obj is None else {k: v for k, v in obj.items() if k != "status"}


def test_the_clusters_admission_policies_answer_as_the_api_server(setting: Setting, tmp_path: Path) -> None:
    objects = _objects(setting)
    manifests = _write(tmp_path / "objects.yaml", objects)
    kubeconfig = str(setting.cluster.kubeconfig_path)
    code, out, err = _run("test", "--cluster", "--kubeconfig", kubeconfig, "-f", str(manifests))
    assert "Traceback" not in err
    # what the API server answers a dry-run create of each object, as `celkeeper test` prints it
    expected: list[str] = []
    mutated: dict[str, dict[str, Any] | None] = {}
    for obj in objects:
        reply = _dry_run(setting.srv, obj)
        head = _head(obj)
        if reply.code >= 400:
            body = reply.body
            expected.append(f"{head}: denied ({reply.code} {body['reason']}): {body['message']}")
        expected += [f"{head}: Warning: {w}" for w in reply.warnings]
        if reply.code < 400:
            mutated[obj["metadata"]["name"]] = _without_status(strip_server_fields(reply.body))
    printed = out.splitlines()
    assert [line for line in printed if ": mutated: " not in line] == expected, err
    assert code == 1  # big, lost and huge are denied
    assert sum(": denied (" in line for line in printed) == 3
    assert any(": Warning: " in line for line in printed)
    assert (": mutated: " in out) == setting.mutating

    # -o json: the object after mutation is the API server's
    code, out, err = _run("test", "--cluster", "--kubeconfig", kubeconfig, "-f", str(manifests), "-o", "json")
    rows = json.loads(out)
    assert code == 1 and all(r["operation"] == "CREATE" for r in rows)
    for row in rows:
        answer = row["admissionPolicies"]
        name = row["object"]["name"]
        if answer["allowed"] and "patchedObject" in answer:
            assert _without_status(answer["patchedObject"]) == mutated[name], name
    patched = {r["object"]["name"] for r in rows if "patchedObject" in r["admissionPolicies"]}
    assert patched == ({"small"} if setting.mutating else set())

    # the same documents as files: the same lines
    given = _write(tmp_path / "stored.yaml", setting.stored)
    code_files, out_files, err_files = _run("test", "-f", str(given), "-f", str(manifests))
    assert "Traceback" not in err_files
    assert (code_files, sorted(out_files.splitlines())) == (1, sorted(printed)), err_files


def test_explain_reads_the_clusters_admission_policies(setting: Setting, tmp_path: Path) -> None:
    objects = {o["metadata"]["name"]: o for o in _objects(setting)}
    kubeconfig = str(setting.cluster.kubeconfig_path)
    given = _write(tmp_path / "stored.yaml", setting.stored)
    for name in ("big", "small"):
        manifest = _write(tmp_path / f"{name}.yaml", [objects[name]])
        code, out, err = _run(
            "explain", "--cluster", "--kubeconfig", kubeconfig, "-f", str(manifest), "-o", "json"
        )
        assert "Traceback" not in err
        (row,) = json.loads(out)
        answer = row["admissionPolicies"]
        reply = _dry_run(setting.srv, objects[name])
        if name == "big":  # denied, in the API server's words
            assert (code, answer["answer"]["allowed"]) == (1, False), answer
            assert answer["answer"]["status"]["message"] == reply.body["message"]
        else:
            assert code == 0 and answer["answer"]["allowed"] is True, answer
            assert answer["answer"]["warnings"] == reply.warnings
        # the same documents as files: the same explanation
        code_files, out_files, err_files = _run("explain", "-f", str(manifest), str(given), "-o", "json")
        assert "Traceback" not in err_files
        assert (code_files, json.loads(out_files)[0]["admissionPolicies"]) == (code, answer)


def test_without_permission_a_note_and_the_rest_tested(setting: Setting, tmp_path: Path) -> None:
    """A user who may read what deploy/ci-rbac.yaml grants but the MutatingAdmissionPolicies and the CRDs
    (so it may read the ValidatingAdmissionPolicies, their bindings and the Namespaces), and not the
    parameter objects."""
    user = f"{CASE}-limited-reader"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": user},
        "rules": [
            *(r for r in _ci_rules() if "customresourcedefinitions" not in r["resources"]),
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
                "verbs": ["get", "list"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
    }
    setting.cluster.kubectl("apply", "-f", "-", input=[role, binding])
    kubeconfig = setting.cluster.kubeconfig_for(user)
    objects = _objects(setting)
    manifests = _write(tmp_path / "objects.yaml", objects)

    def run() -> tuple[int, str, str]:
        return _run("test", "--cluster", "--kubeconfig", str(kubeconfig), "-f", str(manifests))

    wait_ready(lambda: "apc-replicas" in run()[1], "the role in force")
    code, out, err = run()
    assert "Traceback" not in err
    notes = [line for line in err.splitlines() if "403" in line]
    assert any(line.startswith("celkeeper test: note: cannot list configmaps/v1 (403") for line in notes), err
    assert any("cannot list knobs.celkeeper.test/v1 (403" in line for line in notes), err
    assert any("cannot get the CRD widgets.celkeeper.test (403" in line for line in notes), err
    if setting.mutating:
        assert any(
            "cannot list mutatingadmissionpolicies.admissionregistration.k8s.io/v1 (403" in n for n in notes
        )
    # the policies it could read still answer: without their parameters, as the API server would
    # (parameterNotFoundAction: Deny), and the Warn binding as it does
    printed = out.splitlines()
    big = _head(objects[0])
    assert code == 1
    assert any(line.startswith(f"{big}: denied (") and "no params found" in line for line in printed), out
    assert f"{_head(objects[1])}: Warning: Validation failed for ValidatingAdmissionPolicy 'apc-team'" in out
    assert ": mutated: " not in out


def test_a_version_the_server_does_not_serve_is_a_note(tmp_path: Path) -> None:
    """An API server not serving MutatingAdmissionPolicy v1 (as before Kubernetes 1.36): noted, and the
    ValidatingAdmissionPolicies still answer as the API server does."""
    require_celgo()
    try:
        binaries = native_binaries()
    except BinariesUnavailable as err:
        KUBE.unavailable("the API server at the native library's version", err)
    off = ",".join(f"admissionregistration.k8s.io/v1/{r}=false" for r in MUTATING)
    cluster = ControlPlane(
        tmp_path / "cluster",
        binaries,
        apiserver_args=[f"--runtime-config={off}", "--disable-admission-plugins=MutatingAdmissionPolicy"],
    ).start()
    try:
        srv = Server(cluster)
        served = {k for v, k in discover(srv).by_kind if v == "admissionregistration.k8s.io/v1"}
        assert "MutatingAdmissionPolicy" not in served and "ValidatingAdmissionPolicy" in served
        team = {"validations": [{"expression": "'team' in object.metadata.labels", "message": "no team"}]}
        deployments = [corpus.rules(["deployments"], ["apps"])]
        for policy in (corpus.vap("apc-team", CASE, team, deployments), corpus.vapb("apc-team", "apc-team")):
            _post(srv, f"{AR}/{_plural(policy['kind'])}", policy)
        app = [corpus.container("app", "registry.example.com/app:1")]
        obj = corpus.deployment("web", "default", CASE, app)
        wait_ready(lambda: _dry_run(srv, obj).code == 422, "the policy in force")
        reply = _dry_run(srv, obj)
        manifests = _write(tmp_path / "objects.yaml", [obj])
        code, out, err = _run(
            "test", "--cluster", "--kubeconfig", str(cluster.kubeconfig_path), "-f", str(manifests)
        )
        assert "Traceback" not in err
        assert (code, out) == (
            1,
            f"{_head(obj)}: denied ({reply.code} {reply.body['reason']}): {reply.body['message']}\n",
        ), err
        for resource in MUTATING:
            assert (
                f"celkeeper test: note: {resource}.admissionregistration.k8s.io/v1 is not served by the "
                "cluster (" in err
            ), err
        srv.close()
    finally:
        cluster.stop()
