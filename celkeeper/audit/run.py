"""One audit run: every object of every kind the constraints can match, listed in pages and evaluated.

    results = audit_cluster(client, evaluator, namespaces, options, report)   # the cluster
    audit_objects(evaluator, objects, namespaces, results, report)            # any objects (offline too)

Which kinds: discovery (the preferred version of every resource that can be listed), then each kind
some constraint with an action at the audit point can select (through the policy set's kind index:
an explicit kind, `*`, or no kinds at all, which selects every kind), minus celkeeper's own API groups
and `excluded_resources`. Gatekeeper lists every kind (or the kinds named by the constraints with
--audit-match-kind-only); listing only what can match finds the same violations for less.

Per kind, pages of `chunk_size` objects (kube.pages: a 410 Gone restarts the list without delivering an
object twice); only one page is held at a time. An API error on one kind is an error of the constraints
that could match it (the run goes on with the other kinds); a kind no longer served (404: its CRD was
deleted since discovery) has nothing to audit. Objects in `excluded_namespaces` (globs, like
Gatekeeper's Config `match[].processes: [audit]`; for a Namespace, its own name) are skipped, and so are
namespaced objects whose Namespace cannot be found (Gatekeeper's audit skips them too).

Kubernetes' admission policies (`admission`, the in-cluster audit's --audit-admission-policies): read
for the run from discovery's resources (audit.admissionpolicies.read_cluster); the resources their
resourceRules name are listed too, and each object audited is also answered as a CREATE, a page's objects
in batches; a failed validation is recorded and reported as a violation, a `mutate` row reported as a
change (Reporter.change).

Synced data: when a template reads synced data (celkeeper's extension), the run first lists every kind
such templates declare (in the version they name, wherever discovery serves that group and kind) into
a store of its own (snapshot.datastore), written and closed before the engine opens it, removed after
the run: the audit reads the cluster as it was at the start of the run, as Gatekeeper's audit reads its
sync cache. A kind that is not served or cannot be listed is not synced: the templates that need it
fail under their failurePolicy, as in a webhook pod that has not synced it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from celkeeper.audit.admissionpolicies import MUTATE, AdmissionAudit, Pending, Problems, RunProblems
from celkeeper.audit.evaluate import Evaluator, Outcome
from celkeeper.audit.results import ConstraintKey, ObjectRef, RunResults, Violation
from celkeeper.cel.inventory import Gvk, Put, describe, requirement_kinds, unmet
from celkeeper.crds import names
from celkeeper.kube import ApiError, Client, discover, pages
from celkeeper.kube.discovery import ApiResource
from celkeeper.match import wildcard_matches
from celkeeper.model import JsonValue
from celkeeper.policy import PolicySet
from celkeeper.review import SyncedData
from celkeeper.snapshot.datastore import DataStore

log = logging.getLogger("celkeeper.audit")

OWN_GROUPS = frozenset({names.TEMPLATES_GROUP, names.CONSTRAINTS_GROUP, names.STATUS_GROUP})
DEFAULT_CHUNK_SIZE = 500

NamespaceOf = Callable[[str], Mapping[str, JsonValue] | None]


class Reporter(Protocol):
    def violation(self, violation: Violation) -> None:
        """One violation found (logs, events)."""

    def error(self, constraint: ConstraintKey, ref: ObjectRef, message: str) -> None:
        """An object that could not be evaluated for a constraint."""

    def page(self, resource: ApiResource, objects: int) -> None:
        """A page of `objects` objects of `resource` was evaluated (progress, liveness)."""

    def change(self, change: Violation) -> None:
        """What a MutatingAdmissionPolicy would change in an object (a `mutate` row: no violation)."""


class Silent:
    def violation(self, violation: Violation) -> None:
        del violation

    def error(self, constraint: ConstraintKey, ref: ObjectRef, message: str) -> None:
        log.warning("%s could not be evaluated for %s %s: %s", ref, *constraint, message)

    def page(self, resource: ApiResource, objects: int) -> None:
        del resource, objects

    def change(self, change: Violation) -> None:
        del change


@dataclass(frozen=True)
class AuditOptions:
    chunk_size: int = DEFAULT_CHUNK_SIZE  # 0: one list without paging
    violations_limit: int = 20
    excluded_namespaces: frozenset[str] = frozenset()
    # resources never listed: `plural` (core group) or `plural.group`, e.g. events, leases.coordination.k8s.io
    excluded_resources: frozenset[str] = frozenset()


def excluded_namespace(patterns: Iterable[str], obj: Mapping[str, JsonValue]) -> bool:
    """Gatekeeper's process excluder: the namespace (a Namespace's own name) matches a glob."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    is_namespace = obj.get("kind") == "Namespace" and obj.get("apiVersion") == "v1"
    namespace = str(meta.get("name") if is_namespace else meta.get("namespace") or "")
    return bool(namespace) and any(wildcard_matches(p, namespace) for p in patterns)


def audit_objects(
    evaluator: Evaluator,
    objects: Iterable[Mapping[str, JsonValue]],
    namespaces: NamespaceOf,
    results: RunResults,
    report: Reporter,
    *,
    excluded_namespaces: frozenset[str] = frozenset(),
    skip_unknown_namespaces: bool = True,
    admission: AdmissionAudit | None = None,
) -> int:
    """Evaluate objects into `results`; returns how many were audited. `skip_unknown_namespaces`:
    leave out namespaced objects whose Namespace is not found (the cluster); else evaluate them without
    one (files, as `gator test` does: namespaceSelector then cannot match them). With `admission`, each
    object audited is also answered by Kubernetes' admission policies (audit.admissionpolicies; answered
    in batches, recorded once the objects are evaluated)."""
    audited = 0
    pending: list[Pending] = []
    for obj in objects:
        if excluded_namespaces and excluded_namespace(excluded_namespaces, obj):
            continue
        meta = obj.get("metadata")
        namespace_name = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
        namespace = namespaces(namespace_name) if namespace_name else None
        if namespace_name and namespace is None and skip_unknown_namespaces:
            log.debug("skipping %s: its namespace %s was not found", ObjectRef.of(obj), namespace_name)
            continue
        outcome = evaluator.evaluate(obj, namespace)
        audited += 1
        _record(outcome, obj, results, report)
        if admission is not None:
            pending.append(admission.submit(dict(obj)))
    for submitted in pending:
        assert admission is not None
        found = admission.take(submitted)
        for violation in found.violations:
            if violation.enforcement_action == MUTATE:
                report.change(violation)
            else:
                results.add(violation)
                report.violation(violation)
        # what the policies could not answer: errors of the object, as a constraint's
        for key, message in (*found.errors, *found.refused):
            results.add_error(key, found.ref, message)
            report.error(key, found.ref, message)
    return audited


def _record(outcome: Outcome, obj: Mapping[str, JsonValue], results: RunResults, report: Reporter) -> None:
    results.counted(*ObjectRef.kind_of(obj))  # a reference is made only for errors (violations have theirs)
    for violation in outcome.violations:
        results.add(violation)
        report.violation(violation)
    if not outcome.errors:
        return
    ref = ObjectRef.of(obj)
    for key, message in outcome.errors:
        results.add_error(key, ref, message)
        report.error(key, ref, message)


def selected_resources(
    evaluator: Evaluator,
    resources: Iterable[ApiResource],
    excluded: frozenset[str],
    admission: AdmissionAudit | None = None,
) -> list[ApiResource]:
    """The listable resources some audited constraint (or, with `admission`, some admission policy) can
    select, minus celkeeper's own and `excluded`."""
    chosen = []
    for resource in resources:
        if not resource.listable or resource.group in OWN_GROUPS or str(resource) in excluded:
            continue
        if evaluator.audited(resource.group, resource.kind) or (
            admission is not None and admission.selects(resource.group, resource.plural)
        ):
            chosen.append(resource)
    return chosen


def audit_cluster(
    client: Client,
    evaluator: Evaluator,
    namespaces: NamespaceOf,
    options: AuditOptions,
    report: Reporter,
    *,
    admission: Callable[[Sequence[ApiResource], Problems], AdmissionAudit | None] | None = None,
) -> RunResults:
    """One complete run over the cluster (the results; nothing is written). Raises ApiError when
    discovery itself fails (nothing can be audited). `admission`: the cluster's admission policies for
    this run, from discovery's resources (audit.admissionpolicies.read_cluster), when they are audited;
    their problems are logged, and the errors among them counted in the run's results (RunProblems)."""
    results = RunResults(options.violations_limit)
    found = discover(client)
    for problem in found.errors:
        log.warning("discovery: %s (its resources are not audited)", problem)
        results.discovery_errors.append(problem)
    policies = admission(found.resources, RunProblems(results)) if admission is not None else None
    try:
        with synced_data(client, evaluator.policies, found.resources, options.chunk_size) as data:
            _audit_resources(
                client,
                evaluator.with_data(data),
                namespaces,
                options,
                report,
                resources=found.resources,
                results=results,
                admission=policies,
            )
        if policies is not None:
            for unconfigured in policies.finish():  # (its objects were counted, one error each)
                log.warning("admission policies: %s", unconfigured)
    finally:
        if policies is not None:
            policies.close()
    return results


def data_resources(policies: PolicySet, resources: Iterable[ApiResource]) -> dict[Gvk, ApiResource | None]:
    """Every kind the templates that read synced data declare, and the resource serving it (in the
    version the template names) or None when no listable resource of that group and kind is served."""
    served = {(r.group, r.kind): r for r in resources if r.listable}
    wanted = requirement_kinds(r for t in policies.templates.values() for r in t.requirements)
    out: dict[Gvk, ApiResource | None] = {}
    for gvk in wanted:
        found = served.get((gvk.group, gvk.kind))
        out[gvk] = dataclasses.replace(found, version=gvk.version) if found is not None else None
    return out


@contextlib.contextmanager
def synced_data(
    client: Client, policies: PolicySet, resources: Iterable[ApiResource], chunk_size: int
) -> Iterator[SyncedData | None]:
    """The run's synced data (None when no template reads any): the kinds templates declare, listed
    into a store of the run's own, opened by the policies' engine."""
    wanted = data_resources(policies, resources)
    if not wanted:
        yield None
        return
    synced: set[Gvk] = set()
    with tempfile.TemporaryDirectory(prefix="celkeeper-audit-data-") as directory:
        path = Path(directory) / "data.db"
        store = DataStore(path)
        try:
            for gvk, resource in wanted.items():
                if resource is None:  # (one of a requirement's alternatives, perhaps)
                    log.debug("synced data: %s is not served", gvk)
                    continue
                try:
                    for page in pages(client, resource.resource(), chunk_size):
                        store.apply(Put(o) for o in page.items)
                        del page  # not held while the next is read
                except ApiError as err:
                    if err.not_found:  # that version is not served (discovery names the preferred one)
                        log.debug("synced data: %s is not served", gvk)
                    else:
                        log.error("synced data: listing %s failed: %s", gvk, err)
                    store.drop(gvk)
                    continue
                synced.add(gvk)
            store.settle()
            for template in policies.templates.values():
                for requirement in unmet(template.requirements, frozenset(synced)):
                    log.warning(
                        "synced data: template %s reads %s, which this run could not list: "
                        "it fails under its failurePolicy",
                        template.name,
                        describe(requirement),
                    )
        finally:
            store.close()  # before the engine opens it (one SQLite copy per file: docs/known-issues.md)
        opened = policies.engine.open_inventory(str(path))
        try:
            yield SyncedData(opened, frozenset(synced))
        finally:
            opened.close()


def _audit_resources(
    client: Client,
    evaluator: Evaluator,
    namespaces: NamespaceOf,
    options: AuditOptions,
    report: Reporter,
    *,
    resources: Iterable[ApiResource],
    results: RunResults,
    admission: AdmissionAudit | None = None,
) -> None:
    for resource in selected_resources(evaluator, resources, options.excluded_resources, admission):
        try:
            for page in pages(client, resource.resource(), options.chunk_size):
                audited = audit_objects(
                    evaluator,
                    page.items,
                    namespaces,
                    results,
                    report,
                    excluded_namespaces=options.excluded_namespaces,
                    admission=admission,
                )
                del page  # one page at a time: not held while the next is read and parsed
                report.page(resource, audited)
        except ApiError as err:
            if err.not_found:  # it went away since discovery (a CRD deleted): nothing to audit
                log.info("%s is no longer served: not audited", resource)
                continue
            _list_failed(evaluator, resource, err, results)


def _list_failed(evaluator: Evaluator, resource: ApiResource, err: ApiError, results: RunResults) -> None:
    log.error("listing %s failed: %s (its objects are not audited in this run)", resource, err)
    results.list_errors[(resource.group, resource.version, resource.kind)] = str(err)
    ref = ObjectRef(resource.group, resource.version, resource.kind, "", "")
    for candidate in evaluator.audited(resource.group, resource.kind):
        results.add_error(
            (candidate.constraint.kind, candidate.constraint.name), ref, f"listing {resource} failed: {err}"
        )
