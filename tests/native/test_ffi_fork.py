"""The cel-go library and fork: a real `celkeeper serve` (Gunicorn, 2 workers, TLS) never loads the Go
runtime in its master, each forked worker loads it itself and decides correctly with it; and a
process that forks after loading it is refused in the child rather than hanging there."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from celkeeper.native import ffi
from celkeeper.native.ffi import ForkedLibraryError, load
from tests.support.native import require_celgo
from tests.support.serve import POLICIES, ServeProcess, pod, review

pytestmark = pytest.mark.server

LIBRARY = "libcelkeeper"


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    require_celgo()
    workdir = tmp_path_factory.mktemp("serve-celgo")
    policy_dir = workdir / "policies"
    shutil.copytree(POLICIES, policy_dir)
    proc = ServeProcess(workdir, policy_dir, workers=2, args=["--engine", "cel-go"])
    proc.start()
    yield proc
    proc.stop()


def test_forked_workers_decide_with_the_go_runtime_the_master_never_loads(server: ServeProcess) -> None:
    for _ in range(6):  # both workers answer some of them
        status, body = server.admit(review(pod(labels={})))
        assert status == 200
        response = body["response"]
        assert response["allowed"] is False and response["status"]["code"] == 403
        assert "missing labels" in response["status"]["message"] or "[" in response["status"]["message"]
        labelled = pod(labels={"owner": "alice", "team": "shop", "cost-center": "c"})
        status, body = server.admit(review(labelled))
        assert status == 200 and body["response"]["allowed"] is True
    assert server.process is not None
    master = server.process.pid
    assert LIBRARY not in _maps(master)  # the master forks: it must never hold the Go runtime
    workers = server.worker_pids()
    assert len(workers) == 2
    for pid in workers:
        assert LIBRARY in _maps(pid)  # each worker loaded it after its fork


def test_a_child_forked_after_loading_is_refused() -> None:
    require_celgo()
    library = load()
    assert library.info()["github.com/open-policy-agent/gatekeeper/v3"] == "v3.23.1"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: any call into the library must be refused, not attempted
        try:
            library.info()
            code = b"called"
        except ForkedLibraryError:
            code = b"refused"
        os.write(write, code)
        os._exit(0)
    os.close(write)
    answer = os.read(read, 16)
    os.waitpid(pid, 0)
    assert answer == b"refused"
    assert library.info()["compatibilityVersion"] == "1.35"  # the parent goes on using it


def test_a_child_forked_after_loading_neither_releases_nor_unmaps_the_parents_library() -> None:
    """What a process does to its own library (free a handle, close a store, return the Go heap's free
    memory, unmap the library's code pages) is nothing in a child forked after loading: those pages are
    resident in the child too, and the parent's runtime is not the child's to call."""
    require_celgo()
    library = load()
    library.info()  # it has run: its code pages are mapped
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            library.release(1 << 40)
            library.store_close(1 << 40)
            ffi.trim()
            unmapped = library.release_file_pages() + ffi.release_file_pages()
            os.write(write, f"unmapped {unmapped}".encode())
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 64)
    os.waitpid(pid, 0)
    assert answer == b"unmapped 0"
    assert library.release_file_pages() > 0  # the parent's own: unmapped
    assert library.info()["compatibilityVersion"] == "1.35"  # and it goes on using the library
