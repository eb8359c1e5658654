"""The admission policy differential's harness: a real kube-apiserver at the native library's Kubernetes
version (hack/admissionpolicy/build.sh) with an audit log, answering server-side dry runs, and celkeeper's
offline answers to the same requests.

A round installs its setup (Namespaces, parameter objects, CRDs, the objects UPDATE and DELETE requests
act on) with no policy in force, reads back what the API server stored (the offline side gets exactly
those objects), installs its policies and bindings (recording what the API server refuses), waits until
they are in force (sentinel policies: one with a parameter of every kind the round uses, so that the API
server's discovery knows the custom ones), then sends every case as a dry run and reads each request's
audit annotations from the audit log by its audit ID. Cases are isolated from each other by a label
(`celkeeper-case`) their policies select and their objects carry, so that one set of policies serves a
whole round on both sides.
"""

from __future__ import annotations

import copy
import http.client
import json
import ssl
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.apiserver import ControlPlane
from tests.support.binaries import BinariesUnavailable, KubeBinaries, find_kubectl
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "admissionpolicy" / "build.sh"
NATIVE_GOMOD = ROOT / "celkeeper" / "native" / "go" / "go.mod"
CASE_LABEL = "celkeeper-case"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": ["create", "update", "delete"]}, {"level": "None"}],
}
#: what the API server's registry sets on every object it stores, after admission (not compared)
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation")
DRY_RUN = {"dryRun": ["All"]}


def native_binaries() -> KubeBinaries:
    """kube-apiserver at the native library's version; raises BinariesUnavailable when not built.
    CELKEEPER_ADMISSIONPOLICY_APISERVER names another directory holding kube-apiserver and etcd (to measure
    how another Kubernetes version answers: docs/known-issues.md, "One Kubernetes version")."""
    import os
    import subprocess

    other = os.environ.get("CELKEEPER_ADMISSIONPOLICY_APISERVER")
    if other:
        where = Path(other)
        return KubeBinaries(where / "kube-apiserver", where / "etcd", find_kubectl(), where.name)

    printed = subprocess.run([str(BUILD), "--print"], capture_output=True, text=True, check=True)
    where = Path(printed.stdout.strip())
    if subprocess.run([str(BUILD), "--check"], capture_output=True, check=False).returncode != 0:
        raise BinariesUnavailable(f"kube-apiserver at the native library's version is not built: run {BUILD}")
    etcd = where / "etcd"
    if not etcd.exists():
        raise BinariesUnavailable(f"no etcd in {where}: run hack/kube/build.sh then {BUILD}")
    return KubeBinaries(where / "kube-apiserver", etcd, find_kubectl(), where.name)


@dataclass
class Reply:
    """An API server response: status code, body, warnings (Warning headers' texts), audit ID."""

    code: int
    body: Any
    warnings: list[str]
    audit_id: str


def parse_warning(header: str) -> str:
    """The text of a `299 - "text"` Warning header (k8s.io/apimachinery/pkg/util/net ParseWarningHeader)."""
    _, _, rest = header.partition(" ")
    _, _, quoted = rest.partition(" ")
    assert quoted.startswith('"') and quoted.endswith('"'), header
    out, escaped = [], False
    for char in quoted[1:-1]:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            out.append(char)
    return "".join(out)


class Server:
    """HTTP to the control plane as its admin user, with an audit log."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        context = ssl.create_default_context(cafile=str(cluster.ca_path))
        context.load_cert_chain(str(cluster.pki_dir / "admin.crt"), str(cluster.pki_dir / "admin.key"))
        self._context = context
        parsed = urllib.parse.urlparse(cluster.server_url)
        self._host, self._port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self._conn: http.client.HTTPSConnection | None = None
        self.audit_log = cluster.workdir / "audit.log"
        self._audit_offset = 0
        self._annotations: dict[str, dict[str, str]] = {}

    def call(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None) -> Reply:
        if query:
            path += "?" + urllib.parse.urlencode(query, doseq=True)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        for attempt in range(2):
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, context=self._context, timeout=30
                )
            try:
                self._conn.request(method, path, body=data, headers=headers)
                resp = self._conn.getresponse()
                raw = resp.read()
            except (http.client.HTTPException, OSError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
                continue
            warnings = [parse_warning(h) for h in resp.headers.get_all("Warning") or []]
            parsed = json.loads(raw) if raw else None
            return Reply(resp.status, parsed, warnings, resp.headers.get("Audit-Id", ""))
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def annotations(self, audit_id: str, timeout: float = 10.0) -> dict[str, str]:
        """The audit annotations the API server recorded for a request (its ResponseComplete event)."""
        deadline = time.monotonic() + timeout
        while audit_id not in self._annotations:
            self._read_audit()
            if audit_id in self._annotations:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"no audit event for request {audit_id}")
            time.sleep(0.05)
        return self._annotations[audit_id]

    def _read_audit(self) -> None:
        if not self.audit_log.exists():
            return
        with self.audit_log.open("rb") as handle:
            handle.seek(self._audit_offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self._audit_offset += end
        for line in data[:end].splitlines():
            event = json.loads(line)
            if event.get("stage") == "ResponseComplete":
                self._annotations[event["auditID"]] = event.get("annotations") or {}


def start_control_plane(binaries: KubeBinaries, workdir: Path) -> ControlPlane:
    workdir.mkdir(parents=True, exist_ok=True)
    policy = workdir / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY), encoding="utf-8")
    cluster = ControlPlane(
        workdir,
        binaries,
        apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={workdir / 'audit.log'}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
        ],
    )
    return cluster.start()


# -- resources -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    resource: str
    namespaced: bool

    def collection(self, namespace: str) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.resource}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


@dataclass
class Kinds:
    by_kind: dict[tuple[str, str], Kind] = field(default_factory=dict)

    def add(self, kind: Kind) -> None:
        self.by_kind[(kind.api_version, kind.kind)] = kind

    def of(self, obj: Mapping[str, Any]) -> Kind:
        return self.by_kind[(obj["apiVersion"], obj["kind"])]


def discover(server: Server) -> Kinds:
    """Every resource the API server serves (its own and the CRDs' installed), by apiVersion and kind."""
    kinds = Kinds()
    paths = ["/api/v1"]
    groups = server.call("GET", "/apis").body["groups"]
    paths += [f"/apis/{v['groupVersion']}" for g in groups for v in g["versions"]]
    for path in paths:
        listing = server.call("GET", path).body
        for res in listing["resources"]:
            if "/" not in res["name"]:
                kinds.add(Kind(listing["groupVersion"], res["kind"], res["name"], res["namespaced"]))
    return kinds


def strip_server_fields(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    out = copy.deepcopy(dict(obj))
    meta = out.get("metadata") or {}
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    return out


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def wait_ready(check: Any, what: str, timeout: float = 120.0) -> None:
    wait_for(check, timeout=timeout, interval=0.5, what=what)


def as_list(value: Iterable[Any]) -> list[Any]:
    return list(value)
