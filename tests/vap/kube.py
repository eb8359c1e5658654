"""A control plane of its own for the VAP tests, the example suites' cases, and what the API server answers.

Generated policies match every resource with failurePolicy Fail, and until the API server's admission
plugin has found a new constraint kind (its discovery cache is reset every 30 s) every request they match
is refused with a configuration error: the VAP tests run on a control plane of their own, with an audit
log (a binding's Audit action shows only there), never on the session's shared one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celkeeper.crds import constraint_crd
from celkeeper.documents import Document
from celkeeper.gator.suite import parse_suite
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
    """The constraint CRD of every template (what celkeeper's informer makes in a cluster), established."""
    crds = [constraint_crd(dict(t)) for t in templates]
    apply(cluster, crds)
    for crd in crds:
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", f"crd/{crd['metadata']['name']}"
        )


@dataclass(frozen=True)
class Outcome:
    """What the API server answered a server-side dry-run create: allowed (also when the name is taken:
    admission ran first), the denial (constraint, message) as celkeeper's webhook or a policy words it,
    the warnings, or another error (the object is invalid: nothing to compare)."""

    allowed: bool
    denials: tuple[tuple[str, str], ...] = ()
    warnings: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    error: str = ""


def dry_run_create(cluster: ControlPlane, obj: Mapping[str, Any], bindings: Mapping[str, str]) -> Outcome:
    """`kubectl create --dry-run=server` of `obj`; `bindings` maps a binding's name to its constraint."""
    proc = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=dict(obj), check=False)
    warnings: set[tuple[str, str]] = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("Warning: "):
            continue
        text = line.removeprefix("Warning: ")
        found = _VAP_WARNING.match(text)
        if found:
            warnings.add((bindings.get(found.group(2), found.group(2)), found.group(3)))
            continue
        found = _CONSTRAINT_LINE.match(text)
        if found:
            warnings.add((found.group(1), found.group(2)))
    if proc.returncode == 0 or "AlreadyExists" in proc.stderr or "already exists" in proc.stderr:
        return Outcome(True, warnings=frozenset(warnings))
    errors = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("Warning: "))
    found = _VAP_DENIAL.search(errors)
    if found:
        return Outcome(
            False,
            ((bindings.get(found.group(2), found.group(2)), found.group(3).strip()),),
            frozenset(warnings),
        )
    found = _WEBHOOK_DENIAL.search(errors)
    if found:
        denials = tuple(
            (m.group(1), m.group(2).strip())
            for m in (_CONSTRAINT_LINE.match(line) for line in found.group(1).strip().splitlines())
            if m
        )
        return Outcome(False, denials, frozenset(warnings))
    return Outcome(False, error=errors.strip())


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
