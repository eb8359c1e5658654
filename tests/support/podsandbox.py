"""A Deployment's pod run as a local process, as close to a container as this machine allows without a node.

    pod = SandboxPod(cluster, deployment, "celkeeper-webhook-a1b2c", workdir, command_prefix=[celkeeper])
    pod.start()            # own network and mount namespaces, the container's args and env, its user
    pod.ip                 # the pod's address (a veth pair from the host), where the API server calls it
    pod.stop()

What is the pod's, taken from the Deployment's pod template (nothing else is invented):
- the container's `args` (the image's entrypoint is replaced by the local `celkeeper`), its `env`
  (fieldRef metadata.name / metadata.namespace resolved as the kubelet would), its user
  (securityContext.runAsUser / runAsGroup, through setpriv with no capabilities);
- a network namespace of its own with an address on a veth pair to the host: the server binds what the
  args say (0.0.0.0:8443) and the API server reaches it at `ip` through the EndpointSlice the test writes;
- a mount namespace: the root file system read-only (readOnlyRootFilesystem), every emptyDir a tmpfs at
  its mountPath, the service account token (TokenRequest, the real one) and CA at
  /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT pointing at a forwarder on
  the pod's own loopback that carries the connection to the API server's loopback address. celkeeper
  therefore uses its in-cluster configuration, exactly as in a pod;
- what the image carries besides the entrypoint: the cel-go engine's shared library (the image has it
  inside the installed package; the local editable install finds it in a cache under root's home, which
  the pod's user cannot read), bound read-only at /run/celkeeper-native/ and named by CELKEEPER_NATIVE_LIB,
  when the test process has one.

Needs root (namespaces, veth, mounts) and `unshare`, `nsenter`, `setpriv` and `ip` (util-linux,
iproute2). Every address used is the pod's own, inside a network namespace made here; nothing leaves
the machine. The host ends of the veth pairs and the namespaces vanish with the holder process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.apiserver import ControlPlane
from tests.support.processes import ManagedProcess

CLONE_NEWNET = 0x40000000
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
API_FORWARD_PORT = 6443  # on each pod's loopback
SUBNET_PREFIX = "172.31"  # /30s inside 172.31.0.0/16, skipping any the host already routes
TOOLS = ("unshare", "nsenter", "setpriv", "ip", "mount")
CELGO_IN_POD = "/run/celkeeper-native/libcelkeeper.so"


class SandboxUnavailable(Exception):
    """This machine cannot run sandboxed pods; the message says why."""


def check_available() -> None:
    if os.geteuid() != 0:
        raise SandboxUnavailable("sandboxed pods need root (network and mount namespaces, veth pairs)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise SandboxUnavailable(f"missing {', '.join(missing)} (util-linux, iproute2)")


def _interpreter_reachable() -> list[str]:
    """Mount commands that let the pod's user reach this Python's installation, as an image's own
    interpreter is reachable (the pod's processes start others with sys.executable: the informer's
    library child): when it lies below a folder others may not search (a pyenv under /root), that folder
    is covered by a tmpfs in the pod's mounts holding only the installation's top folder, bound back."""
    interpreter = Path(os.path.realpath(sys.executable))
    for locked in interpreter.parents[::-1][1:]:
        if not locked.stat().st_mode & 0o001:
            inner = interpreter.parents[len(interpreter.parents) - len(locked.parts) - 1]
            return [
                "mkdir -p /run/celkeeper-interpreter",
                f"mount --bind {inner} /run/celkeeper-interpreter",
                f"mount -t tmpfs -o mode=0755 tmpfs {locked}",
                f"mkdir -p {inner}",
                f"mount --bind /run/celkeeper-interpreter {inner}",
            ]
    return []


def _celgo_library() -> Path | None:
    """The cel-go library this test process would load, None when it has none."""
    from celkeeper.native.locate import find_library

    return find_library()[0]


def _run(*argv: str, input: str | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=30, check=False)
    if proc.returncode != 0:
        raise SandboxUnavailable(f"{' '.join(argv)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def _routed_subnets() -> set[str]:
    out = _run("ip", "-4", "route", "show")
    return {line.split()[0] for line in out.splitlines() if line.strip()}


class _AddressPool:
    """/30 subnets for pods: host end .1, pod end .2 (one lock: pods start one at a time)."""

    lock = threading.Lock()
    used: set[str] = set()

    @classmethod
    def take(cls) -> tuple[str, str, str]:
        with cls.lock:
            taken = _routed_subnets() | cls.used
            for _ in range(1000):
                third, fourth = random.randrange(16, 255), random.randrange(0, 64) * 4
                subnet = f"{SUBNET_PREFIX}.{third}.{fourth}/30"
                if subnet not in taken and not any(s.startswith(f"{SUBNET_PREFIX}.{third}.") for s in taken):
                    cls.used.add(subnet)
                    base = f"{SUBNET_PREFIX}.{third}"
                    return subnet, f"{base}.{fourth + 1}", f"{base}.{fourth + 2}"
        raise SandboxUnavailable(f"no free /30 in {SUBNET_PREFIX}.0.0/16")

    @classmethod
    def give_back(cls, subnet: str) -> None:
        with cls.lock:
            cls.used.discard(subnet)


def _in_netns(pid: int, make: Any) -> Any:
    """Call `make()` on a thread that has entered process `pid`'s network namespace (sockets made there
    belong to that namespace for good)."""
    libc = ctypes.CDLL(None, use_errno=True)
    result: dict[str, Any] = {}

    def target() -> None:
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                result["error"] = OSError(err, f"setns: {os.strerror(err)}")
                return
            result["value"] = make()
        except BaseException as exc:
            result["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=target, name="setns")
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


class _Forwarder:
    """Connections to 127.0.0.1:API_FORWARD_PORT inside a pod's network namespace, carried to the API
    server's loopback address on the host."""

    def __init__(self, pod_pid: int, target: tuple[str, int]) -> None:
        self.target = target

        def listen() -> socket.socket:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", API_FORWARD_PORT))
            sock.listen(64)
            return sock

        self.listener: socket.socket = _in_netns(pod_pid, listen)
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="api-forward", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                inner, _ = self.listener.accept()
            except OSError:
                return
            try:
                outer = socket.create_connection(self.target, timeout=10)
                outer.settimeout(None)
            except OSError:
                inner.close()
                continue
            with self._lock:
                self._sockets.update((inner, outer))
            for src, dst in ((inner, outer), (outer, inner)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
            self._sockets.clear()


def pod_template(deployment: Mapping[str, Any]) -> dict[str, Any]:
    return dict(deployment["spec"]["template"])


def container(deployment: Mapping[str, Any]) -> dict[str, Any]:
    containers = pod_template(deployment)["spec"]["containers"]
    assert len(containers) == 1, "the webhook Deployment has one container"
    return dict(containers[0])


def resolve_env(env: Sequence[Mapping[str, Any]], pod_name: str, namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet makes it (values, and the fieldRefs used here)."""
    fields = {"metadata.name": pod_name, "metadata.namespace": namespace}
    out: dict[str, str] = {}
    for var in env:
        if "value" in var:
            out[var["name"]] = str(var["value"])
            continue
        field = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if field not in fields:
            raise SandboxUnavailable(f"env {var['name']}: only {', '.join(fields)} fieldRefs are emulated")
        out[var["name"]] = fields[field]
    return out


class SandboxPod:
    def __init__(
        self,
        cluster: ControlPlane,
        deployment: Mapping[str, Any],
        name: str,
        workdir: Path,
        entrypoint: Sequence[str],
        *,
        extra_args: Sequence[str] = (),
        token: str,
    ) -> None:
        self.cluster = cluster
        self.deployment = deployment
        self.name = name
        self.namespace = str(deployment["metadata"]["namespace"])
        self.workdir = workdir
        self.entrypoint = list(entrypoint)
        self.extra_args = list(extra_args)
        self.token = token
        self.ip = ""
        self.holder: ManagedProcess | None = None
        self.process: ManagedProcess | None = None
        self._forwarder: _Forwarder | None = None
        self._subnet = ""
        self._host_if = ""

    # -- what the Deployment says ---------------------------------------------------------------------
    @property
    def args(self) -> list[str]:
        return [*container(self.deployment).get("args", []), *self.extra_args]

    def _user(self) -> tuple[int, int]:
        spec = pod_template(self.deployment)["spec"]
        ctx = dict(spec.get("securityContext") or {})
        ctx.update(container(self.deployment).get("securityContext") or {})
        return int(ctx.get("runAsUser", 0)), int(ctx.get("runAsGroup", ctx.get("runAsUser", 0)))

    def _empty_dirs(self) -> list[str]:
        spec = pod_template(self.deployment)["spec"]
        kinds = {v["name"]: v for v in spec.get("volumes") or []}
        mounts = container(self.deployment).get("volumeMounts") or []
        paths = []
        for mount in mounts:
            volume = kinds.get(mount["name"]) or {}
            if "emptyDir" not in volume:
                raise SandboxUnavailable(f"volume {mount['name']}: only emptyDir volumes are emulated")
            paths.append(str(mount["mountPath"]))
        return paths

    # -- life cycle -----------------------------------------------------------------------------------
    def start(self) -> SandboxPod:
        check_available()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.holder = ManagedProcess(
            f"{self.name}-sandbox",
            ["unshare", "--net", "--mount", "--propagation", "private", "sleep", "infinity"],
            self.workdir / "sandbox.log",
        )
        self.holder.start()
        pid = self.holder.pid
        self._wait_unshared(pid)
        self._network(pid)
        self._forwarder = _Forwarder(pid, ("127.0.0.1", self.cluster.secure_port))
        self._mounts(pid)
        self._exec(pid)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
        if self._forwarder is not None:
            self._forwarder.close()
        if self.holder is not None:
            self.holder.stop()
        if self._host_if:
            subprocess.run(["ip", "link", "del", self._host_if], capture_output=True, check=False)
        if self._subnet:
            _AddressPool.give_back(self._subnet)

    def running(self) -> bool:
        return self.process is not None and self.process.running()

    def log(self, lines: int = 80) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def full_log(self) -> str:
        return self.process.log_path.read_text(encoding="utf-8", errors="replace") if self.process else ""

    # -- set-up ---------------------------------------------------------------------------------------
    def _wait_unshared(self, pid: int, timeout: float = 10.0) -> None:
        """Until the holder runs in its own namespaces (unshare has made them and exec'd)."""
        deadline = time.monotonic() + timeout
        ours = [os.readlink(f"/proc/self/ns/{ns}") for ns in ("net", "mnt")]
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                theirs = [os.readlink(f"/proc/{pid}/ns/{ns}") for ns in ("net", "mnt")]
                if all(a != b for a, b in zip(ours, theirs, strict=True)):
                    return
            time.sleep(0.01)
        raise SandboxUnavailable(f"unshare did not make new namespaces for pod {self.name}")

    def _network(self, pid: int) -> None:
        self._subnet, host_ip, self.ip = _AddressPool.take()
        tag = secrets.token_hex(3)
        self._host_if, peer = f"ckh{tag}", f"ckp{tag}"
        _run("ip", "link", "add", self._host_if, "type", "veth", "peer", "name", peer, "netns", str(pid))
        _run("ip", "addr", "add", f"{host_ip}/30", "dev", self._host_if)
        _run("ip", "link", "set", self._host_if, "up")
        inside = ["nsenter", "-t", str(pid), "-n", "ip"]
        _run(*inside, "link", "set", peer, "name", "eth0")
        _run(*inside, "addr", "add", f"{self.ip}/30", "dev", "eth0")
        _run(*inside, "link", "set", "eth0", "up")
        _run(*inside, "link", "set", "lo", "up")

    def _mounts(self, pid: int) -> None:
        """Service account files, the read-only root, then a tmpfs per emptyDir (missing mount points are
        made on the host first, as a runtime makes them in the image: empty directories)."""
        uid, gid = self._user()
        sa = self.workdir / "serviceaccount"
        sa.mkdir(exist_ok=True)
        (sa / "token").write_text(self.token, encoding="utf-8")
        (sa / "ca.crt").write_bytes(self.cluster.ca_pem)
        (sa / "namespace").write_text(self.namespace, encoding="utf-8")
        for path in sa.iterdir():
            path.chmod(0o644)
        empty_dirs = self._empty_dirs()
        for path in empty_dirs:
            Path(path).mkdir(parents=True, exist_ok=True)
        celgo = _celgo_library()
        script = [
            "set -e",
            "mount -t tmpfs -o mode=0755 tmpfs /run",
            f"mkdir -p {TOKEN_DIR}",
            f"mount --bind {sa} {TOKEN_DIR}",
            f"mount -o remount,bind,ro {TOKEN_DIR}",
        ]
        if celgo is not None:
            script += [
                f"mkdir -p {Path(CELGO_IN_POD).parent}",
                f"touch {CELGO_IN_POD}",
                f"mount --bind {celgo} {CELGO_IN_POD}",
                f"mount -o remount,bind,ro {CELGO_IN_POD}",
            ]
        script += _interpreter_reachable()
        script += [
            "mount -o remount,bind,ro /",
            *(f"mount -t tmpfs -o mode=0770,uid={uid},gid={gid} tmpfs {path}" for path in empty_dirs),
        ]
        _run("nsenter", "-t", str(pid), "-m", "sh", "-c", "\n".join(script))

    def _exec(self, pid: int) -> None:
        uid, gid = self._user()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(API_FORWARD_PORT),
            **resolve_env(container(self.deployment).get("env") or [], self.name, self.namespace),
        }
        if _celgo_library() is not None:
            env["CELKEEPER_NATIVE_LIB"] = CELGO_IN_POD
        argv = [
            "nsenter",
            "-t",
            str(pid),
            "-n",
            "-m",
            "--",
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            *self.entrypoint,
            *self.args,
        ]
        self.process = ManagedProcess(self.name, argv, self.workdir / "pod.log", env=env, cwd=Path("/"))
        self.process.start()
