"""A real `celkeeper serve` for tests and benchmarks: own certificates, a free loopback port, a state
folder the test can inspect (snapshot, informer and worker statuses).

    server = ServeProcess(workdir, policy_dir, workers=2).start()     # waits until every worker is ready
    server.admit(review) -> (HTTP status, JSON body)                    # a new connection each call
    server.worker_pids(), server.informer_pid(), server.wait_generation(g)
    server.stop()
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import requests

from celkeeper.snapshot import InformerRecord, SnapshotStore, StateDir, WorkerBoard, WorkerStatus
from celkeeper.tls import write_certificates
from tests.support.processes import ManagedProcess, free_port

ROOT = Path(__file__).resolve().parents[2]
POLICIES = Path(__file__).resolve().parent / "policies"  # the policies most webhook tests serve


#: the server's process models, as (--workers, --threads): the default (one worker process, its event
#: loops on two threads) and the one before it (a process per worker, one loop each). Tests of what the
#: worker guarantees (slow clients, deadlines, draining, rolling replacement, balancing) run on both.
PROCESS_MODELS = {"threads": (1, 2), "processes": (2, 1)}


class ServerFailed(RuntimeError):
    pass


class ServeProcess:
    def __init__(
        self,
        workdir: Path,
        policy_dir: Path,
        *,
        workers: int = 2,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        root: Path = ROOT,
        threads: int | None = None,  # None: the server's default
    ) -> None:
        self.workdir = workdir
        self.policy_dir = policy_dir
        self.workers = workers
        self.threads = threads
        self.args = list(args)
        self.certs = write_certificates(workdir / "certs", ["localhost"], ["127.0.0.1"])
        self.state = StateDir(workdir / "state")
        self.board = WorkerBoard(self.state.workers)
        self.port = 0
        self.extra_env = dict(env or {})
        self.root = root  # the source tree `python -m celkeeper` runs from (benchmarks compare trees)
        self.process: ManagedProcess | None = None

    # -- life cycle ---------------------------------------------------------------------------------
    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "celkeeper",
            "serve",
            "--policy-dir",
            str(self.policy_dir),
            "--bind",
            f"127.0.0.1:{self.port}",
            "--cert",
            str(self.certs.cert),
            "--key",
            str(self.certs.key),
            "--state-dir",
            str(self.state.root),
            "--workers",
            str(self.workers),
            *(["--threads", str(self.threads)] if self.threads is not None else []),
            "--poll-interval",
            "0.2",
            *self.args,
        ]

    def start(self, timeout: float = 60.0, wait_ready: bool = True) -> ServeProcess:
        for _attempt in range(3):  # a free port can be taken before the server binds it
            self.port = free_port()
            env = {**os.environ, "PYTHONPATH": str(self.root), **self.extra_env}
            self.process = ManagedProcess(
                "celkeeper-serve", self.argv(), self.workdir / "serve.log", env=env, cwd=self.root
            )
            self.process.start()
            try:
                if wait_ready:
                    self.wait_ready(timeout)
                else:
                    self.wait_listening(timeout)
                return self
            except ServerFailed:
                if "Address already in use" not in self.process.log_tail(200):
                    raise
                self.process.stop()
        raise ServerFailed("could not bind a free port three times")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def log(self, lines: int = 60) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def _check_alive(self) -> None:
        assert self.process is not None
        if not self.process.running():
            raise ServerFailed(f"celkeeper serve exited ({self.process.returncode()}):\n{self.log()}")

    def wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                requests.get(self.url("/healthz"), verify=str(self.certs.ca_cert), timeout=2)
                return
            except requests.RequestException:
                time.sleep(0.1)
        raise ServerFailed(f"not listening after {timeout} s:\n{self.log()}")

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until `workers` workers are ready (each has loaded and compiled a complete snapshot)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            statuses = self.board.read_all()
            if len(statuses) == self.workers and all(s.ready for s in statuses):
                return
            time.sleep(0.1)
        raise ServerFailed(f"workers not ready after {timeout} s: {self.board.read_all()}\n{self.log()}")

    # -- what the server shares through its state folder ---------------------------------------------------
    def worker_statuses(self) -> list[WorkerStatus]:
        return self.board.read_all()

    def worker_pids(self) -> set[int]:
        return {s.pid for s in self.board.read_all()}

    def informer_pid(self) -> int:
        status = InformerRecord(self.state.informer).read()
        assert status is not None, "no informer status yet"
        return status.pid

    def published_generation(self) -> int:
        snap = SnapshotStore(self.state.snapshot).latest()
        return snap.generation if snap else 0

    def wait_generation(self, generation: int, timeout: float = 10.0) -> float:
        """Wait until every worker has loaded `generation` (or later); return the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            statuses = self.board.read_all()
            if len(statuses) == self.workers and all(s.generation >= generation for s in statuses):
                return time.monotonic() - start
            time.sleep(0.02)
        raise AssertionError(f"generation {generation} not loaded by all workers: {self.board.read_all()}")

    # -- HTTP ----------------------------------------------------------------------------------------------
    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def get(self, path: str) -> requests.Response:
        return requests.get(self.url(path), verify=str(self.certs.ca_cert), timeout=10)

    def post(self, path: str, data: bytes, headers: Mapping[str, str] | None = None) -> requests.Response:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        return requests.post(
            self.url(path), data=data, headers=hdrs, verify=str(self.certs.ca_cert), timeout=30
        )

    def admit(self, review: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """POST one AdmissionReview on a new connection (so requests spread over the workers)."""
        response = self.post("/v1/admit", json.dumps(review).encode())
        return response.status_code, response.json()

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs.ca_cert))


def pod(
    name: str = "web",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    image: str = "registry.example.com/web:1.0",
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": image}]},
    }


def review(
    obj: Mapping[str, Any],
    operation: str = "CREATE",
    old: Mapping[str, Any] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it for `obj` (core group objects)."""
    kind = str(obj["kind"])
    meta = obj.get("metadata") or (old and old.get("metadata")) or {}
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    group, _, version = str(obj.get("apiVersion", "v1")).rpartition("/")
    gvk = {"group": group, "version": version, "kind": kind}
    gvr = {"group": group, "version": version, "resource": plural}
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": meta.get("name", ""),
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": None if operation == "DELETE" else dict(obj),
        "oldObject": dict(old) if old is not None else None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if kind == "Namespace":
        request["namespace"] = meta.get("name", "")
    elif meta.get("namespace"):
        request["namespace"] = meta["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
