"""The audit as the long-running singleton on a real kube-apiserver: runs at start and every interval,
follows templates and constraints added, changed and deleted between runs, serves its metrics and
probes, and loses nothing when killed in the middle of a run (statuses keep the last complete run; the
next process starts afresh). Uses a control plane of its own.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.audit.support import (
    AUDIT_ROLES,
    AuditServer,
    configmaps,
    constraint,
    events_of,
    install_template,
    labels_template,
    lines_of,
    tier_template,
)
from tests.incluster.support import install_crds, rbac_kubeconfig, status
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.bulk import create_many
from tests.support.kubectl import apply
from tests.support.waiting import wait_for

pytestmark = pytest.mark.kube

LABELS = "RunLabels"
TIER = "RunTier"
CONFIGMAPS = 1200  # in namespace `apps`; every 4th lacks the label `owner`
VIOLATING = len(range(0, CONFIGMAPS, 4))


@pytest.fixture(scope="module")
def cluster(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("kube-audit-process"), kube_binaries) as plane:
        install_crds(plane)
        plane.kubectl("create", "namespace", "celkeeper-system")
        for name, tier in (("apps", "silver"), ("vault", "gold")):
            namespace = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"tier": tier}},
            }
            apply(plane, namespace)
        assert create_many(plane, configmaps("apps", CONFIGMAPS, 4)) == CONFIGMAPS
        install_template(plane, labels_template(LABELS))
        yield plane


@pytest.fixture(scope="module")
def kubeconfig(cluster: ControlPlane) -> Path:
    return rbac_kubeconfig(
        cluster,
        "celkeeper-system",
        f"audit-{secrets.token_hex(3)}",
        roles=AUDIT_ROLES,
    )


def configmaps_in(namespaces: list[str]) -> dict[str, Any]:
    return {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": namespaces}


def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def test_runs_follow_policy_changes_between_runs_and_serve_metrics(
    cluster: ControlPlane, kubeconfig: Path, tmp_path: Path
) -> None:
    apply(cluster, constraint(LABELS, "owner", configmaps_in(["apps"]), {"key": "owner"}))
    apply(cluster, constraint(LABELS, "doomed", configmaps_in(["apps"]), {"key": "owner"}, action="dryrun"))
    server = AuditServer(tmp_path, kubeconfig, "--audit-interval", "2", "--audit-chunk-size", "100").start()
    try:
        first = server.wait_runs(1)[0]
        owner = status(cluster, LABELS.lower(), "owner")
        assert (owner["auditTimestamp"], owner["totalViolations"]) == (first, VIOLATING)
        assert len(owner["violations"]) == 20  # the default limit
        assert probe(server.port, "/readyz") == 200 and probe(server.port, "/healthz") == 200
        found = metrics(server.port)
        assert found['gatekeeper_violations{enforcement_action="deny"}'] == VIOLATING
        assert found['gatekeeper_violations{enforcement_action="dryrun"}'] == VIOLATING
        assert found['celkeeper_audit_objects{group="",kind="ConfigMap",version="v1"}'] >= CONFIGMAPS
        # start of the last run (the next may have begun already: runs follow each other every 2 s) and
        # end of the last complete one, as Gatekeeper's audit sets them
        first_started = datetime.fromisoformat(first).timestamp()
        assert found["gatekeeper_audit_last_run_time"] >= int(first_started)
        assert found["gatekeeper_audit_last_run_end_time"] >= first_started
        assert found['celkeeper_audit_runs_total{result="complete"}'] >= 1

        # between runs: a new template and constraint, a changed constraint, a deleted one
        install_template(cluster, tier_template(TIER))
        apply(cluster, constraint(TIER, "gold-only", configmaps_in(["apps", "vault"])))
        apply(cluster, constraint(LABELS, "owner", configmaps_in(["apps"]), {"key": "team"}))
        cluster.kubectl("delete", LABELS.lower(), "doomed")
        changed_at = time.time()

        def audited_after_the_changes() -> dict[str, Any] | None:
            gold = status(cluster, TIER.lower(), "gold-only")
            stamp = gold.get("auditTimestamp")
            if not stamp or datetime.fromisoformat(stamp).timestamp() < changed_at:
                return None
            return gold

        gold = wait_for(audited_after_the_changes, timeout=60, what="a run after the changes")
        assert gold["totalViolations"] == CONFIGMAPS  # every ConfigMap of apps: its namespace is silver
        assert gold["violations"][0]["message"] == "namespace apps is not gold"
        owner = status(cluster, LABELS.lower(), "owner")
        assert owner["auditTimestamp"] == gold["auditTimestamp"]
        assert owner["totalViolations"] == CONFIGMAPS  # nobody has the label `team`
        found = metrics(server.port)
        assert found['gatekeeper_violations{enforcement_action="dryrun"}'] == 0  # `doomed` is gone
        assert not any("doomed" in key for key in found)
        assert not [line for line in server.lines() if line.get("level") == "error"]
    finally:
        server.stop()


def _killed_in_a_run(cluster: ControlPlane, kubeconfig: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """An audit killed (SIGKILL) once a run of it is seen in progress, after a complete one: the run seen,
    and the runs that completed."""
    # small pages: a run takes hundreds of requests, long enough to be killed in the middle
    server = AuditServer(tmp_path, kubeconfig, "--audit-interval", "3", "--audit-chunk-size", "4").start()
    try:
        complete = server.wait_runs(1)[-1]
        assert status(cluster, LABELS.lower(), "kill-test")["auditTimestamp"] == complete
        offset = server.log_path.stat().st_size  # what the audit logs from here on

        def a_run_in_progress() -> str | None:
            # the next run's start, as soon as it is logged: only the lines added since the last look are
            # read (the whole log, a line per violation of every run, took long enough to parse under load
            # for the run seen starting to end before the kill)
            nonlocal offset
            with server.log_path.open("rb") as log:
                log.seek(offset)
                added = log.read()
            whole = added.rfind(b"\n") + 1
            offset += whole
            started = events_of(lines_of(added[:whole].decode("utf-8", "replace")), "audit_started")
            return str(started[0]["audit_id"]) if started else None

        interrupted = wait_for(a_run_in_progress, timeout=60, interval=0.01, what="a run in progress")
        assert interrupted is not None
        os.killpg(server.process.pid, signal.SIGKILL)
        wait_for(lambda: not server.process.running(), timeout=10, what="the audit to die")
    finally:
        server.stop()
    return interrupted, server.finished_runs()


def test_killed_mid_run_the_statuses_keep_the_last_complete_run(
    cluster: ControlPlane, kubeconfig: Path, tmp_path: Path
) -> None:
    apply(cluster, constraint(LABELS, "kill-test", configmaps_in(["apps"]), {"key": "owner"}))
    # a run seen in progress can still end before the kill lands (each poll reads the whole log): then a
    # fresh audit is killed, up to three in all, rather than the test failing for its own timing
    for _ in range(3):
        interrupted, finished = _killed_in_a_run(cluster, kubeconfig, tmp_path)
        if interrupted not in finished:
            break
    assert interrupted not in finished, "the run completed: the test did not kill it mid-run"
    complete = finished[-1]  # the last run that completed before the kill
    kept = status(cluster, LABELS.lower(), "kill-test")
    assert (kept["auditTimestamp"], kept["totalViolations"]) == (complete, VIOLATING)

    again = AuditServer(tmp_path, kubeconfig, "--audit-interval", "60", "--audit-chunk-size", "100").start()
    try:
        fresh = again.wait_runs(1)[0]
    finally:
        again.stop()
    assert fresh > complete
    after = status(cluster, LABELS.lower(), "kill-test")
    assert (after["auditTimestamp"], after["totalViolations"]) == (fresh, VIOLATING)


def test_stopped_mid_run_it_writes_nothing_of_that_run(
    cluster: ControlPlane, kubeconfig: Path, tmp_path: Path
) -> None:
    apply(cluster, constraint(LABELS, "term-test", configmaps_in(["apps"]), {"key": "owner"}))
    server = AuditServer(tmp_path, kubeconfig, "--audit-interval", "60", "--audit-chunk-size", "4").start()
    try:
        server.wait_started()
        server.stop()  # SIGTERM
        assert server.process.returncode() == 0
    finally:
        server.stop()
    assert not server.finished_runs(), "the run completed: the test did not stop it mid-run"
    assert "auditTimestamp" not in status(cluster, LABELS.lower(), "term-test")
    assert any("stopped before it completed" in line.get("msg", "") for line in server.lines())


def test_a_constraint_deleted_during_a_run_is_not_written_again(
    cluster: ControlPlane, kubeconfig: Path, tmp_path: Path
) -> None:
    apply(cluster, constraint(LABELS, "deleted-mid-run", configmaps_in(["apps"]), {"key": "owner"}))
    apply(cluster, constraint(LABELS, "kept-mid-run", configmaps_in(["apps"]), {"key": "owner"}))
    server = AuditServer(tmp_path, kubeconfig, "--audit-interval", "60", "--audit-chunk-size", "4").start()
    try:
        server.wait_started()
        cluster.kubectl("delete", LABELS.lower(), "deleted-mid-run")
        [run] = server.wait_runs(1)
    finally:
        server.stop()
    assert any("deleted during the run" in line.get("msg", "") for line in server.lines())
    assert not cluster.kubectl("get", LABELS.lower(), "deleted-mid-run", check=False).stdout
    kept = status(cluster, LABELS.lower(), "kept-mid-run")
    assert (kept["auditTimestamp"], kept["totalViolations"]) == (run, VIOLATING)
    assert not [line for line in server.lines() if line.get("level") == "error"]
