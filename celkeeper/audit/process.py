"""The audit process (`celkeeper audit --source kubernetes`): a singleton that audits the cluster now and
then and reports on each constraint's status.

    process = AuditProcess(client, ProcessOptions(...))
    process.start()                # watches: templates, every constraint kind, namespaces
    process.loop(stop)             # a run at once, then one every `interval` seconds (start to start)

The policies come from the same watches as the webhook pods' (kube.PolicyWatch), built into a policy
set at the start of each run (templates are compiled once and kept while unchanged). Each run: log
`audit_started`, audit every kind (audit.run), log one `violation_audited` line per violation (and an
Event with --emit-audit-events), log `constraint_audited` per constraint with violations, write the
OpenReports (every violation: audit.reportwriter), write every constraint's status (audit.status), update
the metrics, log `audit_finished`. A run is written only
once it is complete: stopped or killed mid-run, nothing of it is written, and the statuses keep the
last complete run; the next run starts afresh.

With `admission_policies` (--audit-admission-policies), each run also reads the cluster's
ValidatingAdmissionPolicies, MutatingAdmissionPolicies, their bindings and parameters afresh, and
answers every object it audits (and those of the resources the policies match) as the API server answers
a CREATE of it (audit.admissionpolicies): a failed validation is a violation of the "constraint"
`ValidatingAdmissionPolicy/<policy>/<binding>` (its log line, metrics, report result; no status: a
binding has none), what a MutatingAdmissionPolicy would change a `mutation_audited` line; what the
policies cannot answer is an error of the run, counted as a constraint's (audit.admissionpolicies.RunProblems
for the policies', Found for an object's). A policy resource that cannot be listed (a 403, a version not
served) is a logged note: the constraints' audit goes on.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from celkeeper.audit.admissionpolicies import AdmissionAudit, Problems, read_cluster
from celkeeper.audit.evaluate import Evaluator
from celkeeper.audit.events import EventSink
from celkeeper.audit.logs import (
    change_line,
    constraint_annotations,
    constraint_line,
    go_duration,
    run_line,
    violation_line,
)
from celkeeper.audit.metrics import AuditMetrics
from celkeeper.audit.openreports import APIS, MAX_RESULTS, error_row, result_row
from celkeeper.audit.reportrows import ReportRows
from celkeeper.audit.reportwriter import ReportsWritten, write_reports
from celkeeper.audit.results import ConstraintKey, ObjectRef, RunResults, Violation
from celkeeper.audit.run import AuditOptions, audit_cluster
from celkeeper.audit.status import Audited, audit_id, write_results
from celkeeper.cel import get_engine
from celkeeper.crds import names
from celkeeper.documents import Document
from celkeeper.incluster import PolicyView, PolicyWatch, constraints, item_name, policy_object
from celkeeper.kube import NAMESPACES, ApiError, Client, Timing, WatchManager
from celkeeper.kube.discovery import ApiResource
from celkeeper.kube.resources import generation_of, uid_of
from celkeeper.native.ffi import release_file_pages
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from celkeeper.settings import Settings

log = logging.getLogger("celkeeper.audit")


class Interrupted(Exception):
    """The run was stopped before it completed: nothing of it is written."""


@dataclass(frozen=True)
class ProcessOptions:
    audit: AuditOptions = field(default_factory=AuditOptions)
    interval: float = 60.0  # seconds from the start of a run to the start of the next
    settings: Settings = field(default_factory=Settings)
    namespace: str = "celkeeper-system"  # where events go
    emit_events: bool = False
    events_in_involved_namespace: bool = False
    timing: Timing | None = None
    reports: str = "openreports"  # every violation after each run: openreports, policyreport, or none
    report_max_results: int = MAX_RESULTS  # results per report
    # the cluster's ValidatingAdmissionPolicies and MutatingAdmissionPolicies too (audit.admissionpolicies)
    admission_policies: bool = False


class _Namespaces:
    """Namespace objects for one run: the watched ones, else read once from the API (None: not found)."""

    def __init__(self, manager: WatchManager, client: Client) -> None:
        self.manager = manager
        self.client = client
        self._read: dict[str, Mapping[str, Any] | None] = {}

    def __call__(self, name: str) -> Mapping[str, Any] | None:
        found = self.manager.get(NAMESPACES, name)
        if found is not None:
            return found
        if name not in self._read:
            try:
                self._read[name] = self.client.get(NAMESPACES, name)
            except ApiError as err:
                if not err.not_found:
                    log.warning("could not read namespace %s: %s", name, err)
                self._read[name] = None
        return self._read[name]


class _Reporter:
    def __init__(
        self,
        run_id: str,
        annotations: Mapping[ConstraintKey, dict[str, str] | None],
        events: EventSink | None,
        stop: threading.Event,
        heartbeat: Callable[[], None],
        *,
        rows: ReportRows | None = None,
        templates: Mapping[str, str] | None = None,
    ) -> None:
        self.run_id = run_id
        self.annotations = annotations
        self.events = events
        self.stop = stop
        self.heartbeat = heartbeat
        self.rows = rows  # every result, for the reports
        self.templates = templates or {}  # constraint kind -> its template

    def violation(self, violation: Violation) -> None:
        message, extra = violation_line(violation, self.run_id, self.annotations.get(violation.constraint))
        log.info(message, extra=extra)
        if self.events is not None:
            self.events.emit(violation, self.run_id)
        if self.rows is not None:
            self.rows.add(result_row(violation, self.templates.get(violation.constraint[0], "")))

    def change(self, change: Violation) -> None:
        message, extra = change_line(change, self.run_id)
        log.info(message, extra=extra)

    def error(self, constraint: ConstraintKey, ref: ObjectRef, message: str) -> None:
        log.warning("%s could not be evaluated for %s %s: %s", ref, *constraint, message)
        if self.rows is not None:
            row = error_row(constraint, ref, message, self.templates.get(constraint[0], ""))
            if row is not None:
                self.rows.add(row)

    def page(self, resource: ApiResource, objects: int) -> None:
        del resource, objects
        self.heartbeat()
        if self.stop.is_set():
            raise Interrupted


class AuditProcess:
    def __init__(
        self,
        client: Client,
        options: ProcessOptions,
        metrics: AuditMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.options = options
        self.metrics = metrics if metrics is not None else AuditMetrics()
        self.clock = clock
        self.manager = WatchManager(client, options.timing)
        self.policies = PolicyWatch(self.manager, name="audit-policies")
        settings = options.settings
        self.compiler = TemplateCompiler(get_engine(settings.engine, settings.limits))
        self.events = (
            EventSink(client, options.namespace, involved_namespace=options.events_in_involved_namespace)
            if options.emit_events
            else None
        )
        self.runs = 0  # complete runs
        self.last: RunResults | None = None
        self.heartbeat = 0.0
        self._problems: set[str] = set()
        self._synced = threading.Event()
        self._built: tuple[tuple[tuple[str, str], ...], PolicySet] | None = None  # (versions, policy set)

    # -- life cycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        self.policies.register()
        self.manager.start()
        if self.events is not None:
            self.events.start()
        log.info("audit watching %s", self.client.server)

    def close(self) -> None:
        self.manager.stop()
        if self.events is not None:
            self.events.close()

    @property
    def ready(self) -> bool:
        return self._synced.is_set()

    def loop(self, stop: threading.Event, once: bool = False) -> None:
        """Run now, then every `interval` seconds, until `stop` is set (or after one run with `once`)."""
        while not stop.is_set():
            started = self.clock()
            try:
                self.run_once(stop)
            except Interrupted:
                log.info("audit run stopped before it completed: nothing of it is written")
                return
            except Exception:  # a failed run is reported; the next one starts on time
                self.metrics.failed()
                log.exception("audit run failed")
            if once:
                return
            stop.wait(max(0.0, started + self.options.interval - self.clock()))

    def wait_synced(self, stop: threading.Event) -> PolicyView | None:
        while not stop.is_set():
            view = self.policies.view()
            if view.synced:
                self._synced.set()
                return view
            stop.wait(0.1)
        return None

    # -- one run --------------------------------------------------------------------------------------
    def run_once(self, stop: threading.Event) -> RunResults | None:
        """One complete run, written; None when stopped before the policies were listed."""
        view = self.wait_synced(stop)
        if view is None:
            return None
        if view.templates_missing:
            log.warning(
                "the ConstraintTemplate CRD (constrainttemplates.templates.celkeeper.io) is not "
                "installed: nothing to audit"
            )
            return None
        policies = self._policies_for_run(view)
        audited, annotations = self._constraints(view)
        started = self.clock()
        run_id = audit_id(started)
        self.heartbeat = started
        self.metrics.started(started)
        log.info("auditing constraints and violations", extra=run_line("audit_started", run_id))
        api = APIS.get(self.options.reports)
        rows = ReportRows.temporary() if api is not None else None
        try:
            templates = {c.constraint.kind: c.template.name for c in policies.all_candidates}
            reporter = _Reporter(
                run_id, annotations, self.events, stop, self._beat, rows=rows, templates=templates
            )
            results = audit_cluster(
                self.client,
                Evaluator(policies),
                _Namespaces(self.manager, self.client),
                self.options.audit,
                reporter,
                admission=self._admission_policies if self.options.admission_policies else None,
            )
            for (kind, name), found in sorted(results.constraints.items()):
                if found.total:
                    log.info(
                        "audit results for constraint",
                        extra=constraint_line(kind, name, found.action, found.total, run_id),
                    )
            reports_began = self.clock()
            reports = (
                write_reports(self.client, rows, int(started), self.options.report_max_results, api=api)
                if rows is not None and api is not None
                else ReportsWritten(installed=False)
            )
            reports_took = self.clock() - reports_began
        finally:
            if rows is not None:
                rows.close()
        latest = [(a, self.manager.get(a.resource, a.name)) for a in audited]
        written = write_results(
            self.client,
            latest,
            results,
            run_id,
            reports=api if reports.installed and not reports.failed else None,
        )
        ended = self.clock()
        self.metrics.finished(results, started, ended)
        self.metrics.reports_written(reports.counts())
        if self.events is not None:
            sink = self.events
            self.metrics.events_seen(sink.emitted, sink.failed, sink.dropped, sink.suppressed)
        self.runs += 1
        self.last = results
        log.info(
            "auditing is complete",
            extra=run_line(
                "audit_finished",
                run_id,
                duration=go_duration(ended - started),
                objects=sum(results.objects.values()),
                violations=results.total,
                errors=results.errors,
                constraints_written=written.written,
                constraints_failed=len(written.failed),
                **{f"reports_{operation}": n for operation, n in reports.counts().items()},
                reports_duration=go_duration(reports_took),
            ),
        )
        return results

    def _admission_policies(
        self, resources: Sequence[ApiResource], problems: Problems
    ) -> AdmissionAudit | None:
        """The cluster's admission policies for this run, read afresh (what cannot be read is an error of
        the run: the constraints' audit goes on)."""
        namespaces = self.manager.objects(NAMESPACES)
        if not namespaces:  # not watched (yet): read once
            try:
                namespaces = list(self.client.list(NAMESPACES).items)
            except ApiError as err:
                problems.error(f"cannot list the Namespaces ({err}): not audited in this run")
                return None
        return read_cluster(self.client, resources, namespaces, problems)

    def _beat(self) -> None:
        self.heartbeat = self.clock()

    def _policies_for_run(self, view: PolicyView) -> PolicySet:
        """The run's policy set (`_policy_set`), and the native library's code and data pages that loading
        it and compiling ran unmapped: the run's evaluation maps again only what it uses
        (ffi.release_file_pages; docs/performance.md, the audit's memory)."""
        policies = self._policy_set(view)
        release_file_pages()
        return policies

    def _policy_set(self, view: PolicyView) -> PolicySet:
        """The policy set of the view; the last one again when no template or constraint changed."""
        # generation moves with the spec only: the status writes (this audit's, the pods' byPod) do not count
        versions = tuple(
            sorted(
                (name, f"{uid_of(obj)}/{generation_of(obj)}")
                for obj in view.objects
                if (name := item_name(obj))
            )
        )
        if self._built is not None and self._built[0] == versions:
            return self._built[1]
        documents = []
        for obj in view.objects:
            name = item_name(obj)
            if name is not None:
                documents.append(Document.from_object(copy.deepcopy(policy_object(obj)), file=name))
        policies = build_policy_set(documents, self.compiler)
        problems = {str(e) for e in policies.errors}
        for problem in sorted(problems - self._problems):
            log.warning("policy problem (not audited): %s", problem)
        self._problems = problems
        self._built = (versions, policies)
        return policies

    def _constraints(
        self, view: PolicyView
    ) -> tuple[list[Audited], dict[ConstraintKey, dict[str, str] | None]]:
        """Every constraint in the view (written at the end of the run), and their annotations (logs)."""
        audited: list[Audited] = []
        annotations: dict[ConstraintKey, dict[str, str] | None] = {}
        for obj in view.objects:
            kind = str(obj.get("kind") or "")
            if not str(obj.get("apiVersion") or "").startswith(f"{names.CONSTRAINTS_GROUP}/") or not kind:
                continue
            entry = Audited.of(constraints(kind), obj)
            audited.append(entry)
            annotations[entry.key] = constraint_annotations(obj)
        audited.sort(key=lambda a: a.key)
        return audited, annotations
