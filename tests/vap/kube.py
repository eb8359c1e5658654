"""A control plane of its own for the VAP tests, the example suites' cases, and what the API server answers.

Generated policies match every resource with failurePolicy Fail, and until the API server's admission
plugin has found a new constraint kind (its discovery cache is reset every 30 s) every request they match
is refused with a configuration error: the VAP tests run on a control plane of their own, with an audit
log (a binding's Audit action shows only there), never on the session's shared one.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celkeeper.crds import constraint_crd
from celkeeper.documents import Document
from celkeeper.gator.suite import parse_suite
from tests.incluster.support import wait_all_established
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.waiting import wait_for
from tests.vap import cases

AUDIT_POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}
_WEBHOOK_DENIAL = re.compile(r'admission webhook "[^"]+" denied the request: (.*)', re.S)
_VAP_DENIAL = re.compile(
    r"ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: (.*)", re.S
)
_VAP_WARNING = re.compile(
    r"Validation failed for ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)': (.*)"
)
_CONSTRAINT_LINE = re.compile(r"\[([^\]]+)\] (.*)")
_WARNING_HEADER = re.compile(r'^\d{3} \S+ "((?:[^"\\]|\\.)*)"')


def start_cluster(binaries: KubeBinaries, workdir: Path) -> ControlPlane:
    """A control plane whose API server writes an audit log (Metadata level) to `workdir/audit.log`."""
    workdir.mkdir(parents=True, exist_ok=True)
    policy = workdir / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY), encoding="utf-8")
    cluster = ControlPlane(
        workdir,
        binaries,
        apiserver_args=[f"--audit-policy-file={policy}", f"--audit-log-path={workdir / 'audit.log'}"],
    )
    return cluster.start()


def audit_events(cluster: ControlPlane) -> Iterator[dict[str, Any]]:
    path = cluster.workdir / "audit.log"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)


def apply(cluster: ControlPlane, objects: Iterable[Mapping[str, Any]], *args: str) -> None:
    items = list(objects)
    if items:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", *args, "-f", "-", input=items)


def install_constraint_crds(cluster: ControlPlane, templates: Iterable[Mapping[str, Any]]) -> None:
    """The constraint CRD of every template (what celkeeper's informer makes in a cluster), established
    (one `kubectl get` of them all per poll, not a `kubectl wait` process per CRD)."""
    crds = [constraint_crd(dict(t)) for t in templates]
    apply(cluster, crds)
    wait_all_established(cluster, [crd["metadata"]["name"] for crd in crds])


@dataclass(frozen=True)
class Outcome:
    """What the API server answered a server-side dry-run create: allowed (also when the name is taken:
    admission ran first), the denial (constraint, message) as celkeeper's webhook or a policy words it,
    the warnings, or another error (the object is invalid: nothing to compare)."""

    allowed: bool
    denials: tuple[tuple[str, str], ...] = ()
    warnings: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    error: str = ""


class DryRunClient:
    """Server-side dry-run creates as `kubectl create --dry-run=server -f -` sends them (`dryRun=All`,
    `fieldValidation=Strict`, field manager `kubectl-create`, a namespaced object without a namespace in
    `default`), made over HTTPS by this process: the differential test replays every example case several
    times, and a kubectl process per create cost most of its time. The kind's resource comes from the API
    server's discovery of its group version (read once)."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        self._context = ssl.create_default_context(cafile=str(cluster.ca_path))
        self._context.load_cert_chain(str(cluster.pki_dir / "admin.crt"), str(cluster.pki_dir / "admin.key"))
        self._resources: dict[str, dict[str, tuple[str, bool]]] = {}

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any, list[str]]:
        """(status, decoded JSON body, the Warning headers) of one request."""
        connection = http.client.HTTPSConnection(
            self.cluster.address, self.cluster.secure_port, context=self._context, timeout=60
        )
        try:
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data or b"{}"), response.headers.get_all("Warning") or []
        finally:
            connection.close()

    def _resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """(path of the kind's collection without the namespace part, namespaced) or None if not served."""
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if api_version not in self._resources:
            status, found, _ = self._request("GET", prefix)
            served = found.get("resources", []) if status == 200 else []
            self._resources[api_version] = {
                r["kind"]: (f"{prefix}/{{}}{r['name']}", bool(r["namespaced"]))
                for r in served
                if "/" not in r["name"]
            }
        return self._resources[api_version].get(kind)

    def create(self, obj: Mapping[str, Any]) -> tuple[int, str, list[str]]:
        """(HTTP status, the Status message when refused, the warnings' texts as kubectl prints them)."""
        api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
        resource = self._resource(api_version, kind)
        if resource is None:
            return 404, f'no matches for kind "{kind}" in version "{api_version}"', []
        template, namespaced = resource
        namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        path = template.format(f"namespaces/{namespace}/" if namespaced else "")
        query = "?dryRun=All&fieldValidation=Strict&fieldManager=kubectl-create"
        status, body, warnings = self._request("POST", path + query, json.dumps(dict(obj)).encode())
        message = "" if status < 300 else str(body.get("message", body))
        return status, message, [_warning_text(w) for w in warnings]


def _warning_text(header: str) -> str:
    """The text of a `Warning: 299 - "text"` header (RFC 7234 quoting), as kubectl prints it."""
    found = _WARNING_HEADER.match(header)
    return re.sub(r"\\(.)", r"\1", found.group(1)) if found else header


def dry_run_create(client: DryRunClient, obj: Mapping[str, Any], bindings: Mapping[str, str]) -> Outcome:
    """A server-side dry-run create of `obj`; `bindings` maps a binding's name to its constraint."""
    status, message, texts = client.create(obj)
    warnings: set[tuple[str, str]] = set()
    for text in texts:
        found = _VAP_WARNING.match(text)
        if found:
            warnings.add((bindings.get(found.group(2), found.group(2)), found.group(3)))
            continue
        found = _CONSTRAINT_LINE.match(text)
        if found:
            warnings.add((found.group(1), found.group(2)))
    if status < 300 or status == 409:  # 409 AlreadyExists: admission ran first
        return Outcome(True, warnings=frozenset(warnings))
    found = _VAP_DENIAL.search(message)
    if found:
        return Outcome(
            False,
            ((bindings.get(found.group(2), found.group(2)), found.group(3).strip()),),
            frozenset(warnings),
        )
    found = _WEBHOOK_DENIAL.search(message)
    if found:
        denials = tuple(
            (m.group(1), m.group(2).strip())
            for m in (_CONSTRAINT_LINE.match(line) for line in found.group(1).strip().splitlines())
            if m
        )
        return Outcome(False, denials, frozenset(warnings))
    return Outcome(False, error=message.strip())


@dataclass(frozen=True)
class SuiteCase:
    id: str  # folder/test/case
    folder: str
    object: dict[str, Any]
    inventory: tuple[dict[str, Any], ...]


def example_cases() -> tuple[list[SuiteCase], list[str]]:
    """The cases of every example suite that a create can replay (plain objects and CREATE reviews), and the
    ids of the others (UPDATE and DELETE reviews: a dry-run create cannot replay them)."""
    found: list[SuiteCase] = []
    skipped: list[str] = []
    for suite_path in sorted(cases.EXAMPLES.glob("*/suite.yaml")):
        (document,) = cases.documents(suite_path)
        suite = parse_suite(document, str(suite_path))
        for test in suite.tests:
            for case in test.cases:
                case_id = f"{suite_path.parent.name}/{test.name}/{case.name}"
                (obj,) = (d.data for d in cases.documents(suite_path.parent / case.object))
                if obj.get("kind") == "AdmissionReview":
                    request = obj["request"]
                    if request.get("operation") != "CREATE":
                        skipped.append(case_id)
                        continue
                    obj = request["object"]
                inventory = tuple(
                    d.data for path in case.inventory for d in cases.documents(suite_path.parent / path)
                )
                found.append(SuiteCase(case_id, suite_path.parent.name, obj, inventory))
    return found, skipped


def namespaces_of(suite_cases: Iterable[SuiteCase]) -> dict[str, dict[str, Any]]:
    """Every Namespace the cases need: those of their inventories (with labels) and those their objects are
    in; an object without a namespace goes to `default`."""
    found: dict[str, dict[str, Any]] = {}
    for case in suite_cases:
        for item in case.inventory:
            if item.get("kind") == "Namespace":
                found[item["metadata"]["name"]] = {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": item["metadata"]["name"],
                        "labels": item["metadata"].get("labels", {}),
                    },
                }
        namespace = (case.object.get("metadata") or {}).get("namespace")
        if namespace and namespace not in found and case.object.get("kind") != "Namespace":
            found[namespace] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    return found


def wait_until(cluster: ControlPlane, what: str, check: Any, timeout: float = 90.0) -> None:
    """Poll `check()` (True when done); the generated policies need the API server's discovery cache, reset
    every 30 s, to know a new constraint kind."""
    wait_for(check, timeout=timeout, interval=0.5, what=what)


def documents_of(paths: Iterable[Path]) -> list[Document]:
    return [d for p in paths for d in cases.documents(p)]
