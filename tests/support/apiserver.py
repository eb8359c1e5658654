"""A real Kubernetes control plane for tests: etcd + kube-apiserver on 127.0.0.1, envtest style.

    from tests.support.apiserver import ControlPlane
    with ControlPlane() as cluster:             # ready in 3-4 s on 2 cores
        cluster.kubectl("create", "namespace", "demo")
        core = kubernetes.client.CoreV1Api(cluster.api_client)

Own CA (tests.support.pki), etcd with --unsafe-no-fsync on free loopback ports, kube-apiserver with
RBAC, client-certificate authentication and service-account signing keys, an admin kubeconfig whose
user is in `system:masters`. No controller manager or scheduler runs: namespaces never finish
terminating, nothing is garbage-collected, no service-account tokens or default service accounts are
made (the ServiceAccount admission plugin is off so Pods can still be created), nothing schedules.
Server logs are in `<workdir>/logs/`; `stop()` takes both process groups down.

`ControlPlane(..., with_node=True)` is the control plane of a cluster with controllers and a node
(tests.support.node): the ServiceAccount admission plugin is on, authorization is Node,RBAC with
NodeRestriction, the `kubernetes` Service gets the advertised address as its endpoint, and the API
server can reach kubelets; `address` and `wrap` place it inside the node's network namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.binaries import KubeBinaries, find_binaries
from tests.support.pki import CertificateAuthority, service_account_keys
from tests.support.processes import ManagedProcess, free_port
from tests.support.waiting import wait_for

__all__ = ["ControlPlane", "ControlPlaneError", "KubectlError", "wait_for"]

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
ADMIN_USER = "celkeeper-admin"
_START_ATTEMPTS = 3  # a freshly picked free port can be taken before the server binds it


class ControlPlaneError(RuntimeError):
    """The control plane did not start; the message carries the tail of the server logs."""


class KubectlError(subprocess.CalledProcessError):
    """kubectl exited non-zero; str() shows the command, its exit status, stdout and stderr."""

    def __str__(self) -> str:
        return (
            f"kubectl {' '.join(self.cmd[1:])} exited {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    no_proxy = ",".join(x for x in (env.get("NO_PROXY", ""), "127.0.0.1,localhost") if x)
    env["NO_PROXY"] = env["no_proxy"] = no_proxy
    return env


def _yaml_input(value: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> str | None:
    """kubectl's stdin: text as is; an object as JSON; a list of objects as a v1 List."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(value)
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(value)})


class ControlPlane:
    """etcd + kube-apiserver for one test session. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        workdir: Path | None = None,
        binaries: KubeBinaries | None = None,
        apiserver_args: Sequence[str] = (),
        keep_workdir: bool = False,
        address: str = LOOPBACK,
        wrap: Callable[[Sequence[str]], list[str]] = list,
        with_node: bool = False,
    ) -> None:
        self.binaries = binaries or find_binaries()
        self.address = address
        self.wrap = wrap
        self.with_node = with_node
        self._own_workdir = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="celkeeper-kube-")) if workdir is None else workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.keep_workdir = keep_workdir
        self.extra_apiserver_args = list(apiserver_args)
        self.ca = CertificateAuthority("celkeeper-test-ca")
        self.pki_dir = self.workdir / "pki"
        self.log_dir = self.workdir / "logs"
        self.ca_path = self.pki_dir / "ca.crt"
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self.etcd: ManagedProcess | None = None
        self.apiserver: ManagedProcess | None = None
        self.etcd_port = 0
        self.secure_port = 0
        self.startup_seconds: dict[str, float] = {}
        self._api_client: Any = None
        self._write_pki()

    # -- facts tests use -----------------------------------------------------------------------------

    @property
    def ca_pem(self) -> bytes:
        """The CA that signed the API server's certificate and its users' client certificates."""
        return self.ca.cert_pem

    @property
    def server_url(self) -> str:
        return f"https://{self.address}:{self.secure_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://{self.address}:{self.etcd_port}"

    @property
    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` for the admin user (made on first use, closed by stop())."""
        if self._api_client is None:
            self._api_client = self.new_api_client()
        return self._api_client

    def new_api_client(self, kubeconfig: Path | None = None) -> Any:
        """A fresh `kubernetes.client.ApiClient` from `kubeconfig` (default: the admin's)."""
        from kubernetes import config as k8s_config

        return k8s_config.new_client_from_config(config_file=str(kubeconfig or self.kubeconfig_path))

    def kubectl_env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        env = _child_env()
        env["KUBECONFIG"] = str(kubeconfig or self.kubeconfig_path)
        env["KUBECACHEDIR"] = str(self.workdir / "kubectl-cache")
        return env

    def kubectl(
        self,
        *args: str,
        input: str | Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        check: bool = True,
        timeout: float = 60.0,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this control plane; `input` (text, object or list) is stdin.

        With check=True a non-zero exit raises KubectlError (showing stdout and stderr).
        """
        cmd = [str(self.binaries.kubectl), *args]
        proc = subprocess.run(
            cmd,
            input=_yaml_input(input),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.kubectl_env(kubeconfig),
            check=False,
        )
        if check and proc.returncode != 0:
            raise KubectlError(proc.returncode, cmd, proc.stdout, proc.stderr)
        return proc

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """Write a kubeconfig for a client-certificate user (RBAC applies to it) and return its path."""
        pair = self.ca.client_cert(user, groups)
        path = self.workdir / f"kubeconfig-{user.replace(':', '_')}"
        self._write_kubeconfig(path, user, pair.cert_pem, pair.key_pem)
        return path

    def request(self, path: str, method: str = "GET", timeout: float = 10.0) -> tuple[int, str]:
        """An admin HTTPS request to the API server without the client library: (status, body)."""
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        req = urllib.request.Request(self.server_url + path, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8", "replace")

    def pids(self) -> list[int]:
        return [p.pid for p in (self.etcd, self.apiserver) if p is not None]

    def logs(self, lines: int = 40) -> str:
        """The tail of both server logs, for failure messages."""
        parts = []
        for proc in (self.etcd, self.apiserver):
            if proc is not None:
                parts.append(f"--- {proc.name} ({proc.log_path}), last {lines} lines\n{proc.log_tail(lines)}")
        return "\n".join(parts)

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 120.0) -> ControlPlane:
        """Start etcd, then kube-apiserver; return once /readyz answers ok. Raises ControlPlaneError."""
        t0 = time.monotonic()
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once(timeout)
            except ControlPlaneError as err:
                port_race = "address already in use" in str(err)
                self._stop_servers()
                if not port_race or attempt == _START_ATTEMPTS:
                    raise
                continue
            break
        self.startup_seconds["total"] = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop both servers (their whole process groups) and remove temporary data. Idempotent."""
        if self._api_client is not None:
            try:
                self._api_client.close()
            finally:
                self._api_client = None
        self._stop_servers()
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            shutil.rmtree(self.workdir / "etcd-data", ignore_errors=True)

    def restart_apiserver(
        self, while_down: Callable[[], object] | None = None, timeout: float = 60.0
    ) -> None:
        """Stop kube-apiserver, run `while_down()` (etcd stays up), start it again on the same port."""
        assert self.apiserver is not None, "the control plane is not running"
        self.apiserver.stop()
        if while_down is not None:
            while_down()
        self.apiserver = ManagedProcess(
            "kube-apiserver",
            self.wrap(self._apiserver_argv()),
            self.log_dir / "kube-apiserver.log",
            env=_child_env(),
            cwd=self.workdir,
        )
        self.apiserver.start()
        self._wait_ready(
            self.apiserver,
            self._apiserver_ready,
            time.monotonic() + timeout,
            "kube-apiserver /readyz after a restart",
        )

    # -- internals -----------------------------------------------------------------------------------

    def _stop_servers(self) -> None:
        # The API server first: it would otherwise log etcd connection errors while shutting down.
        for proc in (self.apiserver, self.etcd):
            if proc is not None:
                proc.stop()

    def _write_pki(self) -> None:
        self.pki_dir.mkdir(parents=True, exist_ok=True)
        self.ca_path.write_bytes(self.ca.cert_pem)
        hosts = [
            LOOPBACK,
            "localhost",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        if self.address not in hosts:
            hosts.insert(0, self.address)
        self.ca.serving_cert(hosts, "kube-apiserver").write(self.pki_dir, "apiserver")
        self._admin = self.ca.client_cert(ADMIN_USER, ["system:masters"])
        self._admin.write(self.pki_dir, "admin")
        service_account_keys().write(self.pki_dir, "service-account")
        if self.with_node:  # how the API server authenticates to kubelets (logs, exec, port-forward)
            self.ca.client_cert("kube-apiserver-kubelet-client", ["system:masters"]).write(
                self.pki_dir, "apiserver-kubelet-client"
            )

    def _write_kubeconfig(self, path: Path, user: str, cert_pem: bytes, key_pem: bytes) -> None:
        import base64

        def b64(data: bytes) -> str:
            return base64.b64encode(data).decode("ascii")

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "celkeeper-test",
                    "cluster": {
                        "server": self.server_url,
                        "certificate-authority-data": b64(self.ca.cert_pem),
                    },
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)},
                }
            ],
            "contexts": [
                {
                    "name": "celkeeper-test",
                    "context": {"cluster": "celkeeper-test", "user": user, "namespace": "default"},
                }
            ],
            "current-context": "celkeeper-test",
        }
        path.touch(mode=0o600)
        path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")

    def _start_once(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self.etcd_port, peer_port, self.secure_port = free_port(), free_port(), free_port()
        t0 = time.monotonic()
        self.etcd = ManagedProcess(
            "etcd",
            self.wrap(self._etcd_argv(peer_port)),
            self.log_dir / "etcd.log",
            env=_child_env(),
            cwd=self.workdir,
        )
        self.etcd.start()
        self._wait_ready(self.etcd, self._etcd_healthy, deadline, "etcd /health")
        t1 = time.monotonic()
        self.startup_seconds["etcd"] = t1 - t0
        self.apiserver = ManagedProcess(
            "kube-apiserver",
            self.wrap(self._apiserver_argv()),
            self.log_dir / "kube-apiserver.log",
            env=_child_env(),
            cwd=self.workdir,
        )
        self.apiserver.start()
        self._wait_ready(self.apiserver, self._apiserver_ready, deadline, "kube-apiserver /readyz")
        self.startup_seconds["kube-apiserver"] = time.monotonic() - t1
        self._write_kubeconfig(self.kubeconfig_path, ADMIN_USER, self._admin.cert_pem, self._admin.key_pem)

    def _etcd_argv(self, peer_port: int) -> list[str]:
        client = self.etcd_url
        peer = f"http://{self.address}:{peer_port}"
        data_dir = self.workdir / "etcd-data"
        shutil.rmtree(data_dir, ignore_errors=True)
        return [
            str(self.binaries.etcd),
            "--name=default",
            f"--data-dir={data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki_dir
        if self.with_node:
            node_args = [
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={self.ca_path}",
                "--kubelet-preferred-address-types=InternalIP",
            ]
        else:
            node_args = [
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                # Loopback addresses may not be endpoints of the `kubernetes` Service; nothing needs them.
                "--endpoint-reconciler-type=none",
            ]
        return [
            str(self.binaries.kube_apiserver),
            f"--advertise-address={self.address}",
            f"--bind-address={self.address}",
            f"--secure-port={self.secure_port}",
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={self.ca_path}",
            f"--service-account-key-file={pki / 'service-account.crt'}",
            f"--service-account-signing-key-file={pki / 'service-account.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            *node_args,
            "--profiling=false",
            *self.extra_apiserver_args,
        ]

    def _etcd_healthy(self) -> bool:
        with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
            return bool(json.loads(resp.read()).get("health") == "true")

    def _apiserver_ready(self) -> bool:
        status, body = self.request("/readyz", timeout=5)
        self._last_readyz = body
        return status == 200

    def _wait_ready(
        self, proc: ManagedProcess, probe: Callable[[], bool], deadline: float, what: str
    ) -> None:
        self._last_readyz = ""
        last_error: BaseException | None = None
        while True:
            code = proc.returncode()
            if code is not None:
                raise ControlPlaneError(
                    f"{proc.name} exited with status {code} before {what} was ok\n{self.logs()}"
                )
            try:
                if probe():
                    return
            except (OSError, ValueError) as exc:
                last_error = exc
            if time.monotonic() >= deadline:
                detail = self._last_readyz.strip() or repr(last_error)
                raise ControlPlaneError(f"timed out waiting for {what}: {detail}\n{self.logs()}")
            time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.support.apiserver [--workdir DIR]`: run a control plane until ^C or SIGTERM."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m tests.support.apiserver", description=main.__doc__)
    parser.add_argument("--workdir", type=Path, help="keep certificates, kubeconfig and logs here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwind through the with-block
    with ControlPlane(args.workdir, keep_workdir=True) as cluster:
        print(f"server {cluster.server_url} ready in {cluster.startup_seconds['total']:.1f}s")
        print(f"pids {' '.join(str(pid) for pid in cluster.pids())}")
        print(f"export KUBECONFIG={cluster.kubeconfig_path}")
        print(f"logs in {cluster.log_dir}; Ctrl-C stops both servers", flush=True)
        try:
            while all(p.running() for p in (cluster.etcd, cluster.apiserver) if p is not None):
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
