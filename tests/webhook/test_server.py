"""`celkeeper serve` for real: Gunicorn, TLS on loopback, the informer process, live policy reload.

One server (2 workers) serves the whole module; tests that change the policy folder or kill
processes put things back before they end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509

from celkeeper.cel import engine_available
from celkeeper.settings import DEFAULT_ENGINE, FALLBACK_ENGINE, MAX_REVIEW_BYTES
from celkeeper.tls import write_certificates
from celkeeper.webhook.metrics import FLUSH_INTERVAL
from tests.support.serve import POLICIES, ServeProcess, pod, review

pytestmark = pytest.mark.server

LABELLED = {"owner": "alice", "team": "shop", "cost-center": "cc-1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    workdir = tmp_path_factory.mktemp("serve")
    policy_dir = workdir / "policies"
    shutil.copytree(POLICIES, policy_dir)
    namespaces = workdir / "namespaces.yaml"
    namespaces.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: legacy\n"
        "  labels:\n    admission.celkeeper.io/ignore: 'true'\n"
    )
    args = ["--exempt-namespace", "kube-*", "--ignore-label-namespace", "legacy"]
    args += ["--namespaces", str(namespaces)]
    proc = ServeProcess(workdir, policy_dir, workers=2, args=args)
    proc.start()
    yield proc
    proc.stop()


def _metric(server: ServeProcess, name: str, **labels: str) -> float:
    """The value of one sample of /metrics (0 when absent)."""
    text = server.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0] if "{" in line else ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _settled_metric(server: ServeProcess, name: str, **labels: str) -> float:
    """`_metric` once every worker has written what it gathered (they write every FLUSH_INTERVAL)."""
    time.sleep(FLUSH_INTERVAL + 0.3)
    return _metric(server, name, **labels)


def _metric_reaching(server: ServeProcess, name: str, value: float, **labels: str) -> float:
    """`_metric` once it has reached `value` (at most 5 s: workers write every FLUSH_INTERVAL), then
    a little later (so that a value going past `value` is seen)."""
    deadline = time.monotonic() + 5
    while _metric(server, name, **labels) < value and time.monotonic() < deadline:
        time.sleep(0.1)
    return _settled_metric(server, name, **labels)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


# -- the answer contract --------------------------------------------------------------------------------


def test_a_compliant_pod_is_allowed_and_the_uid_echoed(server: ServeProcess) -> None:
    status, body = server.admit(review(pod(labels=LABELLED), uid="uid-allow-1"))
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"] == {"uid": "uid-allow-1", "allowed": True}


def test_deny_answers_403_with_one_line_per_violation(server: ServeProcess) -> None:
    status, body = server.admit(review(pod(labels={}, image="docker.io/library/nginx:1.27"), uid="uid-deny"))
    assert status == 200
    response = body["response"]
    assert response["uid"] == "uid-deny"
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    lines = response["status"]["message"].split("\n")
    assert sorted(lines) == [
        "[no-docker-hub] images from this registry are not allowed",
        "[pods-need-owner] missing labels: owner",
    ]
    # warn results come along as warnings; dryrun results are never shown
    assert response["warnings"] == ["[pods-should-have-team] missing labels: team"]


def test_warn_results_are_warnings_and_the_request_is_allowed(server: ServeProcess) -> None:
    _, body = server.admit(review(pod(labels={"owner": "alice", "cost-center": "cc-1"})))
    assert body["response"]["allowed"] is True
    assert body["response"]["warnings"] == ["[pods-should-have-team] missing labels: team"]
    assert "status" not in body["response"]


def test_dryrun_results_are_allowed_logged_and_counted(server: ServeProcess) -> None:
    dryrun = {"action": "dryrun", "constraint": "pods-should-have-cost-center"}
    before = _settled_metric(server, "celkeeper_violations_total", **dryrun)
    obj = pod(name="no-cost-center", labels={"owner": "a", "team": "b"})
    _, body = server.admit(review(obj, uid="uid-dry"))
    assert body["response"] == {"uid": "uid-dry", "allowed": True}
    after = _metric_reaching(server, "celkeeper_violations_total", before + 1, **dryrun)
    assert after == before + 1
    deadline = time.monotonic() + 5
    while "dryrun violation (uid uid-dry" not in server.log(400) and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(x for x in server.log(400).splitlines() if "dryrun violation (uid uid-dry" in x)
    assert "[pods-should-have-cost-center] missing labels: cost-center" in line
    assert "CREATE Pod default/no-cost-center" in line


def test_exempt_namespaces_and_the_ignore_label(server: ServeProcess) -> None:
    _, body = server.admit(review(pod(namespace="kube-system", labels={})))  # --exempt-namespace kube-*
    assert body["response"]["allowed"] is True and "warnings" not in body["response"]
    _, body = server.admit(review(pod(namespace="legacy", labels={})))  # labelled in --namespaces
    assert body["response"]["allowed"] is True and "warnings" not in body["response"]
    _, body = server.admit(review(pod(namespace="kube", labels={})))
    assert body["response"]["allowed"] is False
    plain = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scratch"}}
    _, body = server.admit(review(plain))
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == "[namespaces-need-owner] missing labels: owner"
    ignored = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "legacy", "labels": {"admission.celkeeper.io/ignore": "yes"}},
    }
    _, body = server.admit(review(ignored))  # allowed to carry the label (--ignore-label-namespace legacy)
    assert body["response"]["allowed"] is True
    ignored["metadata"]["name"] = "scratch"  # type: ignore[index]
    _, body = server.admit(review(ignored))  # not allowed to: the label changes nothing
    assert body["response"]["allowed"] is False


def test_bad_requests_get_4xx_with_a_reason_and_the_server_stays_up(server: ServeProcess) -> None:
    resp = server.post("/v1/admit", b"{not json")
    assert resp.status_code == 400 and resp.json()["error"].startswith("malformed JSON")
    wrong = review(pod(labels=LABELLED))
    wrong["apiVersion"] = "admission.k8s.io/v1beta1"
    resp = server.post("/v1/admit", json.dumps(wrong).encode())
    assert resp.status_code == 400 and "apiVersion" in resp.json()["error"]
    no_uid = review(pod(labels=LABELLED))
    del no_uid["request"]["uid"]
    resp = server.post("/v1/admit", json.dumps(no_uid).encode())
    assert resp.status_code == 400 and "uid" in resp.json()["error"]
    no_request = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    assert server.post("/v1/admit", json.dumps(no_request).encode()).status_code == 400
    huge = review(pod(labels=LABELLED))
    huge["request"]["object"]["metadata"]["annotations"] = {"blob": "x" * (MAX_REVIEW_BYTES + 1)}
    resp = server.post("/v1/admit", json.dumps(huge).encode())
    assert resp.status_code == 413 and "too large" in resp.json()["error"]
    get = requests.get(server.url("/v1/admit"), verify=str(server.certs.ca_cert), timeout=5)
    assert get.status_code == 405
    # still serving, on both workers
    for _ in range(6):
        assert server.admit(review(pod(labels=LABELLED)))[1]["response"]["allowed"] is True
    assert server.get("/healthz").text == "ok\n"


# -- metrics and readiness --------------------------------------------------------------------------------


def test_metrics_add_up_across_workers(server: ServeProcess) -> None:
    labels = {"decision": "allow", "operation": "UPDATE"}
    before = _settled_metric(server, "celkeeper_admission_requests_total", **labels)
    count_before = _metric(server, "celkeeper_admission_request_duration_seconds_count", **labels)
    for _ in range(20):  # new connections: the kernel hands them to both workers
        obj = pod(labels=LABELLED)
        server.admit(review(obj, operation="UPDATE", old=obj))
    # each worker writes its request metrics within FLUSH_INTERVAL
    after = _metric_reaching(server, "celkeeper_admission_requests_total", before + 20, **labels)
    assert after == before + 20
    count = _metric(server, "celkeeper_admission_request_duration_seconds_count", **labels)
    assert count == count_before + 20
    assert _metric(server, "celkeeper_constraint_evaluation_seconds_count", kind="TestRequiredLabels") > 0
    assert _metric(server, "celkeeper_workers") == 2
    assert _metric(server, "celkeeper_workers_ready") == 2
    assert _metric(server, "celkeeper_templates_loaded") == 2
    assert _metric(server, "celkeeper_constraints_loaded") == 5
    assert _metric(server, "celkeeper_snapshot_generation") >= 1
    assert _metric(server, "celkeeper_snapshot_loaded_generation") == server.published_generation()
    assert _metric(server, "celkeeper_snapshot_age_seconds") >= 0
    assert _metric(server, "celkeeper_informer_up") == 1
    workers_with_files = {int(p.stem.split("_")[-1]) for p in server.state.metrics.glob("counter_*.db")}
    assert server.worker_pids() <= workers_with_files


def test_readyz_reports_what_the_worker_enforces(server: ServeProcess) -> None:
    resp = server.get("/readyz")
    assert resp.status_code == 200
    detail = resp.json()
    assert detail["ready"] is True
    # the engine serve picked: the default when this installation has its library, else the fallback
    assert detail["engine"] == (DEFAULT_ENGINE if engine_available(DEFAULT_ENGINE)[0] else FALLBACK_ENGINE)
    assert detail["templates"] == 2 and detail["constraints"] == 5
    assert detail["generation"] == server.published_generation()
    assert detail["problems"] == []


# -- live policy changes ----------------------------------------------------------------------------------


def test_an_edited_policy_is_enforced_within_two_seconds(server: ServeProcess) -> None:
    constraints = server.policy_dir / "required-labels-constraints.yaml"
    only_owner = review(pod(labels={"owner": "alice", "team": "t", "cost-center": "c"}))
    assert server.admit(only_owner)[1]["response"]["allowed"] is True
    generation = server.published_generation()
    start = time.monotonic()
    _edit(constraints, 'labels: ["owner"]', 'labels: ["owner", "app"]')
    try:
        server.wait_generation(generation + 1, timeout=5)
        took = time.monotonic() - start
        assert took <= 2.0, f"took {took:.2f} s"
        for _ in range(4):
            body = server.admit(only_owner)[1]
            assert body["response"]["allowed"] is False
            assert body["response"]["status"]["message"] == "[pods-need-owner] missing labels: app"
    finally:
        _edit(constraints, 'labels: ["owner", "app"]', 'labels: ["owner"]')
        server.wait_generation(generation + 2)
    assert server.admit(only_owner)[1]["response"]["allowed"] is True


def test_a_broken_file_is_reported_and_the_rest_stays_enforced(server: ServeProcess) -> None:
    generation = server.published_generation()
    broken_yaml = server.policy_dir / "broken.yaml"
    broken_cel = server.policy_dir / "broken-cel.yaml"
    template = (POLICIES / "disallowed-images.yaml").read_text().split("\n---\n")[0]
    broken_cel.write_text(
        template.replace("testdisallowedimages", "testbrokencel")
        .replace("TestDisallowedImages", "TestBrokenCel")
        .replace("containers.exists(c,", "containers.exists(c")  # a CEL syntax error
    )
    broken_yaml.write_text("apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: [TestRequiredLabels\n")
    try:
        server.wait_generation(generation + 1)
        detail = server.get("/readyz").json()
        assert detail["ready"] is True
        problems = "\n".join(detail["problems"])
        assert "broken.yaml" in problems and "broken-cel.yaml" in problems
        assert _metric(server, "celkeeper_policy_load_errors") >= 2
        body = server.admit(review(pod(labels={}, image="docker.io/x:1")))[1]
        assert body["response"]["allowed"] is False
        assert sorted(body["response"]["status"]["message"].split("\n")) == [
            "[no-docker-hub] images from this registry are not allowed",
            "[pods-need-owner] missing labels: owner",
        ]
        assert server.admit(review(pod(labels=LABELLED)))[1]["response"]["allowed"] is True
    finally:
        broken_yaml.unlink()
        broken_cel.unlink()
        server.wait_generation(generation + 2)
    assert server.get("/readyz").json()["problems"] == []


# -- processes --------------------------------------------------------------------------------------------


def test_a_killed_worker_is_replaced_and_requests_keep_succeeding(server: ServeProcess) -> None:
    before = server.worker_pids()
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pids = server.worker_pids()
        if victim not in pids and len(pids) == 2 and all(s.ready for s in server.worker_statuses()):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"worker {victim} not replaced: {server.worker_statuses()}\n{server.log()}")
    assert len(server.worker_pids() - before) == 1
    for _ in range(10):
        status, body = server.admit(review(pod(labels={})))
        assert status == 200 and body["response"]["allowed"] is False


def test_a_killed_informer_is_restarted_and_workers_keep_the_last_snapshot(server: ServeProcess) -> None:
    old = server.informer_pid()
    generation = server.published_generation()
    os.kill(old, signal.SIGKILL)
    # meanwhile the workers keep enforcing what they have
    for _ in range(5):
        assert server.admit(review(pod(labels={})))[1]["response"]["allowed"] is False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            pid = server.informer_pid()
        except AssertionError:
            pid = old
        if pid != old:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"informer not restarted\n{server.log()}")
    os.kill(pid, 0)  # alive
    assert server.published_generation() == generation  # nothing changed: nothing republished
    # the new informer follows the folder
    constraints = server.policy_dir / "required-labels-constraints.yaml"
    _edit(constraints, 'labels: ["team"]', 'labels: ["team", "tier"]')
    try:
        server.wait_generation(generation + 1)
        warnings_ = server.admit(review(pod(labels={"owner": "a", "team": "b"})))[1]["response"]["warnings"]
        assert warnings_ == ["[pods-should-have-team] missing labels: tier"]
    finally:
        _edit(constraints, 'labels: ["team", "tier"]', 'labels: ["team"]')
        server.wait_generation(generation + 2)


# -- TLS ---------------------------------------------------------------------------------------------------


def _tls11_client() -> ssl.SSLContext:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.minimum_version = ssl.TLSVersion.TLSv1_1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    return ctx


def test_tls_1_1_is_refused(server: ServeProcess) -> None:
    # control: this client does speak TLS 1.1 with a server that allows it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        permissive = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        permissive.minimum_version = ssl.TLSVersion.TLSv1_1
        permissive.set_ciphers("DEFAULT:@SECLEVEL=0")
    permissive.load_cert_chain(server.certs.cert, server.certs.key)
    left, right = socket.socketpair()
    thread = threading.Thread(target=lambda: _accept_quietly(permissive, right))
    thread.start()
    with _tls11_client().wrap_socket(left) as conn:
        assert conn.version() == "TLSv1.1"
    thread.join(5)
    # celkeeper refuses it
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, pytest.raises(ssl.SSLError):
        _tls11_client().wrap_socket(raw).close()
    # and speaks TLS 1.2+
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        server.client_context().wrap_socket(raw, server_hostname="localhost") as conn,
    ):
        assert conn.version() in ("TLSv1.2", "TLSv1.3")


def _accept_quietly(ctx: ssl.SSLContext, sock: socket.socket) -> None:
    try:
        with ctx.wrap_socket(sock, server_side=True):
            pass
    except (OSError, ssl.SSLError):
        pass


def _served_serial(server: ServeProcess) -> int:
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        server.client_context().wrap_socket(raw, server_hostname="localhost") as conn,
    ):
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_rotated_certificate_is_served_without_a_restart(server: ServeProcess) -> None:
    before = _served_serial(server)
    rotated = write_certificates(server.certs.cert.parent, ["localhost"], ["127.0.0.1"])  # same CA
    expected = x509.load_pem_x509_certificate(rotated.cert.read_bytes()).serial_number
    assert expected != before
    deadline = time.monotonic() + 10
    reloaded: set[int] = set()
    while time.monotonic() < deadline:  # every worker serves the new one (new connections spread)
        assert {_served_serial(server) for _ in range(4)} == {expected}
        log = server.log(400)
        note = "[INFO] celkeeper.tls: TLS certificate reloaded"
        reloaded = {pid for pid in server.worker_pids() if f"[{pid}] {note}" in log}
        if reloaded == server.worker_pids():
            break
    assert reloaded == server.worker_pids()
    assert server.admit(review(pod(labels=LABELLED)))[1]["response"]["allowed"] is True
