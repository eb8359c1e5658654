"""Connections are spread over the workers (celkeeper.webhook.balance, the workers' load board): with plain
gthread one worker accepts nearly every connection even while busy, and keep-alive connections stay
with it. Each connection asks /readyz which worker answers it."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.server.harness import ServeProcess, pod, review

pytestmark = pytest.mark.server

POLICIES = Path(__file__).parent / "policies"
CONNECTIONS = 6


def test_concurrent_connections_land_on_every_worker(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(POLICIES, policies)
    server = ServeProcess(tmp_path / "srv", policies, workers=2).start()
    try:
        ctx = ssl.create_default_context(cafile=str(server.certs.ca_cert))
        body = json.dumps(review(pod(labels={"owner": "a", "team": "b", "cost-center": "c"}), uid="u1"))
        owners: list[int] = []
        start = threading.Barrier(CONNECTIONS)
        errors: list[BaseException] = []

        def client() -> None:
            try:
                conn = http.client.HTTPSConnection("localhost", server.port, context=ctx, timeout=20)
                start.wait()
                for _ in range(20):  # keep this connection (and its worker) busy with reviews
                    conn.request("POST", "/v1/admit", body, {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    resp.read()
                    assert resp.status == 200
                conn.request("GET", "/readyz")
                answer = conn.getresponse()
                owners.append(json.loads(answer.read())["worker"])
                conn.close()
            except BaseException as err:  # reported below
                errors.append(err)

        threads = [threading.Thread(target=client) for _ in range(CONNECTIONS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(owners) == CONNECTIONS
        per_worker = Counter(owners)
        assert set(per_worker) == server.worker_pids(), per_worker
        assert min(per_worker.values()) >= 2, per_worker  # plain gthread: typically 6 and 0
    finally:
        server.stop()
