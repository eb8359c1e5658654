"""celkeeper installed on the test node as a user installs it: its image (hack/image/build.sh) imported into
the node's containerd, `kubectl apply -f deploy/celkeeper.yaml`, policies applied with kubectl.

Shared by the end-to-end tests (tests/e2e/node/test_install.py) and the benchmark (bench/node_install.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.apiserver import KubectlError
from tests.support.binaries import ROOT, BinariesUnavailable
from tests.support.node import NodeCluster
from tests.support.requirements import NODE
from tests.support.waiting import wait_for

MANIFEST = ROOT / "deploy" / "celkeeper.yaml"
IMAGE_BUILD = ROOT / "hack" / "image" / "build.sh"
NAMESPACE = "celkeeper-system"
DEPLOYMENT = "celkeeper-webhook"
SELECTOR = "app.kubernetes.io/name=celkeeper,app.kubernetes.io/component=webhook"
AUDIT_SELECTOR = "app.kubernetes.io/name=celkeeper,app.kubernetes.io/component=audit"
POLICY = ROOT / "examples" / "privileged-containers"
CONSTRAINT_KIND = "CKPrivilegedContainers"
CONSTRAINT = "no-privileged-containers"
DENIAL = f"[{CONSTRAINT}] privileged containers are not allowed: app"

T = TypeVar("T")


def image_archive() -> Path:
    """celkeeper's image as an OCI archive, where hack/image/build.sh leaves it."""
    cache = os.environ.get("CELKEEPER_IMAGE_CACHE") or str(Path.home() / ".cache" / "celkeeper-image")
    archive = Path(cache) / "celkeeper.oci.tar"
    if not archive.is_file():
        raise BinariesUnavailable(f"celkeeper's image is not built ({archive}): run {IMAGE_BUILD} as root")
    return archive


def prepare(node: NodeCluster, what: str, sources: Sequence[Path], find: Callable[[], T]) -> T:
    """Skip unless this tree has `sources` (a fact of the tree, not of the machine: never required); fail
    or skip (NODE) when `find()` or celkeeper's image is missing; import the image; return `find()`'s."""
    absent = [str(s) for s in sources if not s.exists()]
    if absent:
        pytest.skip(f"{', '.join(absent)} not in this tree (the install, issue 14)")
    try:
        found = find()
        archive = image_archive()
    except BinariesUnavailable as exc:
        NODE.unavailable(what, exc)
    node.import_image(archive)
    return found


def replicas() -> int:
    """The webhook Deployment's replicas in deploy/celkeeper.yaml (= its pods' --expected-pods)."""
    for doc in _documents(MANIFEST.read_text()):
        if doc.get("kind") == "Deployment" and doc["metadata"]["name"] == DEPLOYMENT:
            return int(doc["spec"]["replicas"])
    raise AssertionError(f"no Deployment {DEPLOYMENT} in {MANIFEST}")


def _documents(text: str) -> list[dict[str, Any]]:
    from celkeeper.documents import parse_documents

    return [d.data for d in parse_documents(text, str(MANIFEST)).documents if isinstance(d.data, dict)]


def install(node: NodeCluster) -> None:
    node.kubectl("apply", "-f", str(MANIFEST), timeout=120)


def uninstall(node: NodeCluster) -> None:
    """Everything the manifest made, gone: first its namespace, its pods stopped at once (a test's
    teardown needs no preStop sleep nor drain) while the CRDs its objects belong to still exist (the
    namespace controller then finds every kind it must empty), then the cluster-scoped rest."""
    node.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
    node.kubectl(
        "delete", "pods", "--all", "-n", NAMESPACE, "--force", "--grace-period=0", "--wait=false", check=False
    )
    node.kubectl("wait", "--for=delete", f"namespace/{NAMESPACE}", "--timeout=120s", check=False, timeout=130)
    node.kubectl("delete", "-f", str(MANIFEST), "--ignore-not-found", "--wait=true", check=False, timeout=180)


def webhook_pods(node: NodeCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = node.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", SELECTOR)["items"]
    return items


def audit_pods(node: NodeCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = node.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", AUDIT_SELECTOR)[
        "items"
    ]
    return items


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def wait_ready(node: NodeCluster, count: int, timeout: float = 300) -> list[dict[str, Any]]:
    """Wait until exactly `count` webhook pods exist, none terminating, all Ready; return them."""

    def check() -> list[dict[str, Any]] | None:
        pods = webhook_pods(node)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(pods) == count and all(ready(p) for p in live) else None

    pods = wait_for(check, timeout=timeout, interval=1, what=f"{count} ready webhook pods")
    assert pods is not None
    return pods


def apply_template(node: NodeCluster, path: Path = POLICY / "template.yaml") -> None:
    node.kubectl("apply", "-f", str(path))


def apply_constraint(node: NodeCluster, doc: Mapping[str, Any] | Path, timeout: float = 120) -> None:
    """Apply a constraint once celkeeper has made its kind's CRD (from the template) and it is served."""

    def attempt() -> bool:
        proc = node.kubectl(
            "apply",
            "-f",
            str(doc) if isinstance(doc, Path) else "-",
            input=None if isinstance(doc, Path) else doc,
            check=False,
        )
        if proc.returncode == 0:
            return True
        if "no matches for kind" in proc.stderr or "ensure CRDs are installed" in proc.stderr:
            return False
        raise KubectlError(proc.returncode, ["kubectl", "apply"], proc.stdout, proc.stderr)

    wait_for(attempt, timeout=timeout, interval=0.5, what="the constraint's CRD to be served")


def constraint_status(
    node: NodeCluster, name: str = CONSTRAINT, kind: str = CONSTRAINT_KIND
) -> dict[str, Any]:
    proc = node.kubectl("get", f"{kind.lower()}.constraints.celkeeper.io", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return {}
    return dict(json.loads(proc.stdout).get("status") or {})


def enforced_by(node: NodeCluster, pods: int, name: str = CONSTRAINT, kind: str = CONSTRAINT_KIND) -> bool:
    """The constraint reports enforced, by `pods` pods each enforcing its current generation."""
    status = constraint_status(node, name, kind)
    by_pod = status.get("byPod") or []
    return bool(status.get("enforced")) and sum(1 for e in by_pod if e.get("enforced")) >= pods


def mutator_enforced_by(node: NodeCluster, pods: int, kind: str, name: str) -> bool:
    """The mutator's status reports it enforced, at its current generation, by `pods` pods."""
    proc = node.kubectl("get", f"{kind.lower()}.mutations.gatekeeper.sh", name, "-o", "json", check=False)
    if proc.returncode != 0:
        return False
    mutator = json.loads(proc.stdout)
    meta = mutator.get("metadata") or {}
    by_pod = (mutator.get("status") or {}).get("byPod") or []
    current = [
        e
        for e in by_pod
        if e.get("enforced") is True
        and e.get("mutatorUID") == meta.get("uid")
        and e.get("observedGeneration") == meta.get("generation")
    ]
    return len(current) >= pods


def privileged_pod(name: str, namespace: str) -> dict[str, Any]:
    """A Pod the example policy denies (container `app` runs privileged), of the node's test image."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "celkeeper.test/nodetest:1",
                    "args": ["serve"],
                    "imagePullPolicy": "Never",
                    "securityContext": {"privileged": True},
                }
            ]
        },
    }


def create(node: NodeCluster, obj: Mapping[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return node.kubectl("create", *args, "-f", "-", input=obj, check=False)


def denied(node: NodeCluster, namespace: str, name: str = "probe") -> bool:
    """A server-side dry-run create of a privileged Pod is refused with the constraint's message."""
    proc = create(node, privileged_pod(name, namespace), "--dry-run=server")
    if proc.returncode == 0:
        return False
    assert DENIAL in proc.stderr, proc.stderr
    return True


class Sampler:
    """In the background: how many webhook pods exist (live = not being deleted), and whether a violating
    dry-run create is still refused (with failurePolicy Ignore, an unanswered call would be allowed)."""

    def __init__(self, node: NodeCluster, namespace: str) -> None:
        self.node, self.namespace = node, namespace
        self.live: list[int] = []
        self.total: list[int] = []
        self.verdicts: list[bool] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._pods), threading.Thread(target=self._admission)]

    def __enter__(self) -> Sampler:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _pods(self) -> None:
        while not self._stop.is_set():
            pods = webhook_pods(self.node)
            self.total.append(len(pods))
            self.live.append(sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")))
            time.sleep(0.2)

    def _admission(self) -> None:
        while not self._stop.is_set():
            try:
                verdict = denied(self.node, self.namespace, f"probe-{len(self.verdicts)}")
            except Exception as exc:  # refused otherwise than by the constraint: recorded, not lost
                self.errors.append(repr(exc))
                verdict = False
            self.verdicts.append(verdict)


def time_until(predicate: Any, timeout: float, what: str) -> float:
    t0 = time.monotonic()
    wait_for(predicate, timeout=timeout, interval=0.2, what=what)
    return time.monotonic() - t0
