"""`celkeeper audit`: check existing objects against the constraints, as Gatekeeper's audit does.

    celkeeper audit --source kubernetes [--kubeconfig FILE]     the in-cluster singleton (one replica)
    celkeeper audit --policy-dir DIR --objects PATH [-o json]   offline, for CI pipelines
    kubectl get pods -A -o yaml | celkeeper audit --policy-dir policies/ --objects -

In the cluster it audits at start and every --audit-interval seconds and writes each constraint's
status (auditTimestamp, totalViolations, violations), logs one JSON line per violation, optionally
emits Events, and serves /metrics, /healthz and /readyz on --metrics-bind. Offline, it prints every
violation and the totals per constraint; the exit code is 1 when a violation's action is deny (or a
file could not be loaded), else 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from celkeeper.cli.inputs import ADMISSION_REVIEW, NOT_AN_OBJECT, POLICY_DOCUMENT, SUITE
from celkeeper.cli.options import add_engine_option, add_filename_option, engine_name
from celkeeper.cli.output import redirected
from celkeeper.errors import DocumentError
from celkeeper.model import JsonObject

if TYPE_CHECKING:  # imported where they are used (the audit's modules load only for `celkeeper audit`)
    from celkeeper.audit import RunResults, Violation
    from celkeeper.audit.admissionpolicies import AdmissionAudit
    from celkeeper.constraints import Constraint
    from celkeeper.policy import PolicySet

DEFAULT_NAMESPACE = "celkeeper-system"
EXAMPLES = """examples:
  celkeeper audit --source kubernetes --kubeconfig ~/.kube/config --once
  celkeeper audit --policy-dir examples/ --objects manifests/
  celkeeper audit --policy-dir policies/ --objects manifests/ -o html --output-file audit.html
  celkeeper audit --policy-dir policies/ --objects manifests/ -o openreports | kubectl apply -f -
  kubectl get pods,deployments -A -o yaml | celkeeper audit --policy-dir policies/ --objects - -o json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="check existing objects against the constraints (the cluster, or files for CI)",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--source",
        choices=("kubernetes", "files"),
        help="the cluster, or files (default: files when --policy-dir, --objects or -f is "
        "given, else kubernetes)",
    )
    add_engine_option(parser)
    parser.add_argument(
        "--constraint-violations-limit",
        type=int,
        default=20,
        metavar="N",
        help="violations kept on each constraint's status (default 20; offline: in -o json)",
    )
    offline = parser.add_argument_group("files (--source files)")
    offline.add_argument(
        "--policy-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="templates and constraints (file or folder, recursively; repeatable)",
    )
    offline.add_argument(
        "--objects",
        action="append",
        default=[],
        metavar="PATH",
        help="objects to audit (file or folder; - for stdin; `kind: List` is expanded; repeatable)",
    )
    add_filename_option(offline, "templates, constraints and objects together (repeatable)")
    offline.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "openreports", "html"),
        default="text",
        help="output format: text, json, openreports (the Reports the cluster's audit would write, as a "
        "List), html (one self-contained page: totals, charts, every violation)",
    )
    offline.add_argument(
        "--output-file", metavar="FILE", help="write the output to FILE rather than to stdout (e.g. -o html)"
    )
    kube = parser.add_argument_group("kubernetes (--source kubernetes)")
    kube.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig to use (default: the pod's service account, in-cluster)",
    )
    kube.add_argument(
        "--audit-interval",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="seconds from the start of one run to the start of the next (default 60)",
    )
    kube.add_argument(
        "--audit-chunk-size",
        type=int,
        default=500,
        metavar="N",
        help="objects per list request, at most one page held at a time (default 500; 0: unpaged)",
    )
    kube.add_argument("--once", action="store_true", help="one run, then exit (1 when it failed)")
    kube.add_argument(
        "--emit-audit-events",
        action="store_true",
        help="a Kubernetes Event per violation (reason AuditViolation)",
    )
    kube.add_argument(
        "--audit-events-involved-namespace",
        action="store_true",
        help="events in the violating object's namespace (needs the RBAC to create events "
        "there) rather than in --pod-namespace",
    )
    kube.add_argument(
        "--pod-namespace",
        metavar="NS",
        default=os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE,
        help=f"celkeeper's namespace, where events go (default: $POD_NAMESPACE, else {DEFAULT_NAMESPACE})",
    )
    kube.add_argument(
        "--excluded-namespace",
        action="append",
        default=[],
        metavar="NS",
        help="never audit objects in this namespace (globs: prefix*, *suffix; repeatable)",
    )
    kube.add_argument(
        "--excluded-resource",
        action="append",
        default=[],
        metavar="RESOURCE",
        help="never list this resource: plural for the core group, plural.group otherwise, "
        "e.g. events or leases.coordination.k8s.io (repeatable)",
    )
    kube.add_argument(
        "--reports",
        choices=("openreports", "policyreport", "none"),
        default="openreports",
        help="after each run, write every violation as OpenReports (openreports.io/v1alpha1 Report per "
        "namespace, ClusterReport for cluster-scoped objects; nothing when their CRDs are not installed), "
        "as the older wgpolicyk8s.io/v1alpha2 PolicyReports, or none (default openreports)",
    )
    kube.add_argument(
        "--audit-admission-policies",
        action="store_true",
        help="also answer every object audited as the API server answers a CREATE of it, with the "
        "cluster's ValidatingAdmissionPolicies and MutatingAdmissionPolicies (their bindings and "
        "parameters, read afresh each run; Kubernetes' own code): failed validations are violations of "
        "`ValidatingAdmissionPolicy/<policy>/<binding>` in the logs, metrics and reports",
    )
    kube.add_argument(
        "--metrics-bind",
        default="0.0.0.0:8888",
        metavar="HOST:PORT",
        help="/metrics, /healthz and /readyz (default 0.0.0.0:8888; empty: none)",
    )
    kube.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from celkeeper.errors import CelkeeperError

    if args.constraint_violations_limit < 0:
        raise CelkeeperError("--constraint-violations-limit must be 0 or more")
    offline = bool(args.policy_dir or args.objects or args.filenames)
    source = args.source or ("files" if offline else "kubernetes")
    if source == "files":
        if not offline:
            raise CelkeeperError("--source files needs --policy-dir and --objects, or -f")
        return _offline(args)
    if offline:
        raise CelkeeperError("--policy-dir, --objects and -f are for --source files")
    if args.audit_interval <= 0:
        raise CelkeeperError("--audit-interval must be more than 0 seconds (use --once for a single run)")
    if args.audit_chunk_size < 0:
        raise CelkeeperError("--audit-chunk-size must be 0 (unpaged) or more")
    return _cluster(args)


# -- the cluster ----------------------------------------------------------------------------------------
def _cluster(args: argparse.Namespace) -> int:
    from celkeeper.audit import AuditOptions, AuditProcess, ProcessOptions
    from celkeeper.audit.logs import JsonFormatter
    from celkeeper.audit.metrics import AuditMetrics, HealthServer
    from celkeeper.errors import CelkeeperError
    from celkeeper.kube import KubeClient
    from celkeeper.settings import Settings

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler], force=True)
    options = ProcessOptions(
        audit=AuditOptions(
            chunk_size=args.audit_chunk_size,
            violations_limit=args.constraint_violations_limit,
            excluded_namespaces=frozenset(args.excluded_namespace),
            excluded_resources=frozenset(args.excluded_resource),
        ),
        interval=args.audit_interval,
        settings=Settings(engine=engine_name(args)),
        namespace=args.pod_namespace,
        emit_events=args.emit_audit_events,
        events_in_involved_namespace=args.audit_events_involved_namespace,
        reports=args.reports,
        admission_policies=args.audit_admission_policies,
    )
    if not args.audit_admission_policies:
        # the native library's variant without Kubernetes' admission policies: lighter (docs/performance.md)
        from celkeeper.native import ffi, locate

        ffi.prefer(locate.GATEKEEPER)
    client = KubeClient.connect(args.kubeconfig)
    metrics = AuditMetrics()
    process = AuditProcess(client, options, metrics)
    stop = threading.Event()
    looping = threading.Event()
    server = None
    if args.metrics_bind:
        host, _, port = args.metrics_bind.rpartition(":")
        try:
            server = HealthServer(
                (host or "0.0.0.0", int(port)), metrics, ready=lambda: process.ready, alive=looping.is_set
            )
        except (OSError, ValueError) as err:
            raise CelkeeperError(f"cannot serve metrics on {args.metrics_bind!r}: {err}") from err
        server.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    process.start()
    looping.set()
    try:
        if args.once:
            try:
                return 0 if process.run_once(stop) is not None else 1
            except Exception:
                logging.getLogger("celkeeper.audit").exception("audit run failed")
                return 1
        process.loop(stop)
        return 0
    finally:
        looping.clear()
        process.close()
        if server is not None:
            server.stop()
        client.close()


# -- files ----------------------------------------------------------------------------------------------
def _offline(args: argparse.Namespace) -> int:
    from celkeeper.audit import Evaluator, RunResults
    from celkeeper.cli import audit_admissionpolicies
    from celkeeper.cli.inputs import Inputs
    from celkeeper.documents import Document
    from celkeeper.gator.backend import PolicyBackend
    from celkeeper.gator.kinds import is_policy_document
    from celkeeper.model import EnforcementPoint

    inputs: Inputs[_Audited] = Inputs("audit", "audited")
    admission: AdmissionAudit | None = None
    try:
        policy_sources = inputs.sources([*args.policy_dir, *args.filenames])
        separate = bool(args.objects)  # objects only from --objects; policies only from the others
        object_sources = inputs.sources(args.objects) if separate else policy_sources
        object_ids = {id(s) for s in object_sources}
        documents = inputs.policies(
            policy_sources, is_policy=_is_policy, report=lambda s: id(s) not in object_ids
        )
        backend = PolicyBackend(engine_name(args), EnforcementPoint.AUDIT)
        loaded = backend.build([d for d in documents if is_policy_document(d)])
        for error in loaded.errors:
            inputs.error(error)
        # Kubernetes' admission policies among the policies (audit.admissionpolicies), with the
        # parameter objects and Namespaces among every input (a pass of their own, only when there are such
        # policies): each object audited is also answered as a CREATE
        given = (*(policy_sources if separate else ()), *object_sources)
        admission = audit_admissionpolicies.build(inputs, documents, inputs.stream_data(given))
        results = RunResults(args.constraint_violations_limit)
        # templates that read synced data read every object given (as `celkeeper test` gives them)
        data_objects = (Document.from_object(o) for o in inputs.stream_data(object_sources) if _auditable(o))
        with backend.inventory(loaded.policies, data_objects) as data:
            # in one set of files (-f), the admission policies and bindings are policies, not objects
            sink = _AuditSink(
                inputs, Evaluator(loaded.policies, data), results, admission, skip_admission=not separate
            )
            inputs.consume(object_sources, sink)
        if admission is not None:
            for unconfigured in admission.finish():  # (its objects were counted, one error each)
                inputs.error(unconfigured)
    finally:
        inputs.close()
        if admission is not None:
            admission.close()
    ordered = sorted(sink.violations, key=_row_order)
    changes = sorted(sink.changes, key=_row_order)
    listed = _listed(loaded.policies.constraints, results, admission, len(changes))
    with redirected(args.output_file):
        if args.output in ("openreports", "html"):  # violations (what would change is no violation)
            sys.stdout.write(
                formatted(args.output, loaded.policies, results, ordered, inputs.done, listed=listed)
            )
        elif args.output == "json":
            print(json.dumps(_json(listed, results, ordered, changes, inputs), indent=2))
        else:
            _table(listed, results, sorted([*ordered, *changes], key=_row_order), inputs.done, len(changes))
    print(inputs.summary(), file=sys.stderr)
    denied = any(v.denies for v in sink.violations)
    return 1 if denied or inputs.errors else 0


def formatted(
    output: str,
    policies: PolicySet,
    results: RunResults,
    violations: list[Violation],
    audited: int,
    *,
    listed: Sequence[Listed] | None = None,
) -> str:
    """-o openreports (celkeeper.audit.openreports: the Reports as a List), -o html (cli/output_html.py);
    `listed`: the constraints (and admission policy bindings) with their totals, for the page."""
    import time

    from celkeeper.audit.status import audit_id

    now = time.time()
    if output == "openreports":
        from celkeeper.audit.openreports import reports, result_row

        templates = {c.constraint.kind: c.template.name for c in policies.all_candidates}
        rows = [result_row(v, templates.get(v.constraint[0], "")) for v in violations]
        return (
            json.dumps({"apiVersion": "v1", "kind": "List", "items": reports(rows, int(now))}, indent=2)
            + "\n"
        )
    from celkeeper.cli.output_html import PageConstraint, audit_page, render

    extra = [PageConstraint(f"{c.kind}/{c.name}", c.action, c.total) for c in listed or () if c.binding]
    return render(
        audit_page(policies.constraints, results, violations, audited, generated=audit_id(now), extra=extra)
    )


def _is_policy(document: Any) -> bool:
    """A policy document: Gatekeeper's (gator.kinds), or Kubernetes' admission policies, bindings and the
    CRDs that define their objects' kinds (cli.admissionpolicies)."""
    from celkeeper.admissionpolicy import is_admission_input  # not the policies' evaluation
    from celkeeper.gator.kinds import is_policy_document

    return is_policy_document(document) or is_admission_input(document)


def _auditable(obj: JsonObject) -> bool:
    """An object the audit evaluates (not a policy document, a Suite or an AdmissionReview)."""
    return _skipped(obj) is None and bool(obj.get("apiVersion") and obj.get("kind"))


def _is_admission_policy_object(obj: JsonObject) -> bool:
    from celkeeper.admissionpolicy.documents import is_admission_policy_object

    return is_admission_policy_object(obj)


#: the start of the message of a `mutate` row (audit.admissionpolicies), before its merge patch
_WOULD_CHANGE = "would change: "

#: documents among the objects that are not objects that exist, by (API group, kind): not audited
_NOT_OBJECTS = {
    **{
        (group, "ConstraintTemplate"): POLICY_DOCUMENT
        for group in ("templates.gatekeeper.sh", "templates.celkeeper.io")
    },
    ("expansion.gatekeeper.sh", "ExpansionTemplate"): POLICY_DOCUMENT,
    ("test.gatekeeper.sh", "Suite"): SUITE,
    ("admission.k8s.io", "AdmissionReview"): ADMISSION_REVIEW,  # `celkeeper test` reviews those
}
_CONSTRAINT_GROUPS = frozenset({"constraints.gatekeeper.sh", "constraints.celkeeper.io"})


def _skipped(obj: JsonObject) -> str | None:
    """Why a document among the objects is not audited by design (it is not an object that exists)."""
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    if group in _CONSTRAINT_GROUPS:
        return POLICY_DOCUMENT
    kind = obj.get("kind")
    return _NOT_OBJECTS.get((group, kind)) if isinstance(kind, str) else None


# an object audited: its (group, version, kind), and when it is not clean its outcome and reference;
# or why it is not audited (a reason, and the error to report)
_Audited = tuple[Any, ...]


class _AuditSink:
    """Each object evaluated against the constraints, and submitted to the admission policies (answered in
    batches: a result holds the object's Pending until it is recorded)."""

    def __init__(
        self,
        inputs: Any,
        evaluator: Any,
        results: RunResults,
        admission: AdmissionAudit | None = None,
        *,
        skip_admission: bool = False,
    ) -> None:
        from celkeeper.audit import ObjectRef
        from celkeeper.audit.evaluate import NOTHING

        self.object_ref = ObjectRef
        self.inputs = inputs
        self.evaluator = evaluator
        self.namespaces = inputs.namespaces  # as far as they are read (cli.inputs)
        self.results = results
        self.violations: list[Violation] = []
        self.changes: list[Violation] = []  # what the mutating admission policies would change
        self.admission = admission
        self.skip_admission = skip_admission and admission is not None
        self._nothing = NOTHING
        self._kinds: dict[tuple[str, str, str], tuple[Any, ...]] = {}  # one tuple per kind, shared

    def evaluate(self, piece: Any) -> _Audited:
        obj = piece.data
        reason = _skipped(obj)
        if reason is None and self.skip_admission and _is_admission_policy_object(obj):
            reason = POLICY_DOCUMENT
        if reason is not None:
            return ("skip", reason, None)
        if not (obj.get("apiVersion") and obj.get("kind")):
            error = DocumentError(
                "not a Kubernetes object (apiVersion and kind are required)", piece.location()
            )
            return ("skip", NOT_AN_OBJECT, error)
        meta = obj.get("metadata")
        namespace_name = str(meta.get("namespace") or "") if isinstance(meta, dict) else ""
        namespace = self.namespaces.get(namespace_name) if namespace_name else None
        outcome = self.evaluator.evaluate(obj, namespace)
        kind = self.object_ref.kind_of(obj)
        pending = self.admission.submit(obj, piece.location()) if self.admission is not None else None
        if outcome is self._nothing:
            if pending is not None:
                return ("ok", kind, pending)
            found = self._kinds.get(kind)
            if found is None:
                found = self._kinds[kind] = ("ok", kind, None)
            return found
        return ("found", kind, outcome, self.object_ref.of(obj), piece.location(), pending)

    def record(self, result: _Audited) -> None:
        if result[0] == "skip":
            self.inputs.not_evaluated(result[1], result[2])
            return
        self.inputs.read += 1
        self.inputs.done += 1
        self.results.counted(*result[1])
        if result[-1] is not None:
            self._admitted(result[-1])
        if result[0] == "ok":
            return
        _, _, outcome, ref, where, _ = result
        for violation in outcome.violations:
            self.results.add(violation)
            self.violations.append(dataclasses.replace(violation, labels={}))
        for key, message in outcome.errors:
            self.results.add_error(key, ref, message)
            self.inputs.error(f"{where}: {ref}: not evaluated for {key[0]}/{key[1]}: {message}")

    def _admitted(self, pending: Any) -> None:
        from celkeeper.audit.admissionpolicies import MUTATE

        assert self.admission is not None
        found = self.admission.take(pending)
        for violation in found.violations:
            if violation.enforcement_action == MUTATE:
                self.changes.append(violation)
            else:
                self.results.add(violation)
                self.violations.append(violation)
        # what the policies could not answer: errors of the object, as a constraint's; a binding that
        # refused it because it cannot be configured is said once, by AdmissionAudit.finish
        where = f"{pending.location}: " if pending.location is not None else ""
        for key, message in found.errors:
            self.results.add_error(key, found.ref, message)
            self.inputs.error(f"{where}{found.ref}: {message}")
        for key, message in found.refused:
            self.results.add_error(key, found.ref, message)


def _row_order(violation: Violation) -> tuple[str, ...]:
    ref = violation.ref
    return (
        *violation.constraint,
        ref.group,
        ref.version,
        ref.kind,
        ref.namespace,
        ref.name,
        violation.message,
    )


def _action(violation: Violation) -> str:
    if violation.enforcement_actions:
        return f"{violation.enforcement_action}({','.join(violation.enforcement_actions)})"
    return str(violation.enforcement_action)


@dataclasses.dataclass(frozen=True)
class Listed:
    """A constraint, or an admission policy binding, with its total: a line of the totals."""

    kind: str
    name: str
    action: str  # the constraint's enforcement action; a binding's validationActions (Deny,Audit)
    total: int
    extra: bool = False  # an admission policy binding (or the mutating policies)
    binding: Any = None  # audit.admissionpolicies.Binding, for -o json


def _listed(
    constraints: Sequence[Constraint], results: RunResults, admission: AdmissionAudit | None, changes: int
) -> list[Listed]:
    """The totals: each constraint, then each ValidatingAdmissionPolicyBinding, then what the mutating
    policies would change."""

    def total(key: tuple[str, str]) -> int:
        found = results.constraints.get(key)
        return found.total if found else 0

    listed = [
        Listed(c.kind, c.name, str(c.enforcement_action), total((c.kind, c.name)))
        for c in sorted(constraints, key=lambda c: (c.kind, c.name))
    ]
    if admission is not None:
        for b in sorted(admission.validating(), key=lambda b: b.key):
            listed.append(Listed(*b.key, b.enforcement_action, total(b.key), True, b))
        if admission.mutates:
            listed.append(Listed(*admission.mutation_key, "mutate", changes, True))
    return listed


def _table(
    listed: Sequence[Listed], results: RunResults, violations: list[Violation], audited: int, changes: int
) -> None:
    rows: list[tuple[str, ...]] = [("CONSTRAINT", "ACTION", "OBJECT", "MESSAGE")]
    rows += [(f"{v.constraint[0]}/{v.constraint[1]}", _action(v), str(v.ref), v.message) for v in violations]
    if violations:
        _print_rows(rows)
        print()
    totals: list[tuple[str, ...]] = [("CONSTRAINT", "ENFORCEMENT-ACTION", "TOTAL-VIOLATIONS")]
    totals += [(f"{c.kind}/{c.name}", c.action, str(c.total)) for c in listed]
    _print_rows(totals)
    by_action = ", ".join(f"{n} {a}" for a, n in results.by_action.items() if n)
    constraints = sum(1 for c in listed if not c.extra)
    bindings = sum(1 for c in listed if c.binding is not None)
    print(
        f"\n{results.total} violation(s) in {audited} object(s), {constraints} constraint(s)"
        + (f", {bindings} admission policy binding(s)" if bindings else "")
        + (f": {by_action}" if by_action else "")
        + (f"; {changes} object(s) a mutating admission policy would change" if changes else "")
    )


def _print_rows(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1])


def _json(
    listed: Sequence[Listed],
    results: RunResults,
    violations: list[Violation],
    changes: list[Violation],
    inputs: Any,
) -> JsonObject:
    from celkeeper.audit.results import status_violation

    out = []
    for entry in listed:
        if entry.extra and entry.binding is None:
            continue  # the mutating policies: under wouldChange
        key = (entry.kind, entry.name)
        found: JsonObject = {"kind": entry.kind, "name": entry.name}
        if entry.binding is not None:  # policy/binding: the policy's name, the binding's and its actions
            found = {
                "kind": entry.kind,
                "name": entry.binding.policy,
                "binding": entry.binding.name,
                "validationActions": list(entry.binding.actions),
            }
        else:
            found["enforcementAction"] = entry.action
        out.append(
            {
                **found,
                "status": results.status_fields(key),
                "allViolations": [status_violation(v) for v in violations if v.constraint == key],
            }
        )
    found_all: JsonObject = {
        "objects": inputs.done,
        "read": inputs.read,
        "notAudited": dict(inputs.not_done),
        "errors": inputs.errors,
        "totalViolations": results.total,
        "byEnforcementAction": {a: n for a, n in results.by_action.items() if n},
        "constraints": out,
    }
    if any(entry.extra and entry.binding is None for entry in listed):
        # what the MutatingAdmissionPolicies would change in each object: a JSON merge patch
        found_all["wouldChange"] = [
            {
                **_object_fields(v.ref),
                "policies": v.constraint[1].split(","),
                "patch": json.loads(v.message.removeprefix(_WOULD_CHANGE)),
            }
            for v in changes
        ]
    return found_all


def _object_fields(ref: Any) -> JsonObject:
    fields: JsonObject = {"group": ref.group, "version": ref.version, "kind": ref.kind, "name": ref.name}
    if ref.namespace:
        fields["namespace"] = ref.namespace
    return fields
