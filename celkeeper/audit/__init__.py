"""Audit: every existing object checked against the constraints, results on each constraint's status.

    celkeeper audit --source kubernetes     AuditProcess: a singleton (one replica) that audits the cluster
                                            at start and every --audit-interval seconds (process.py)
    celkeeper audit --policy-dir D --objects PATH    the same evaluation over files (cli/audit.py)

Parts:
    evaluate.Evaluator      one object -> its violations at the audit enforcement point (pure decide)
    results.RunResults      a run's totals and capped violation lists, Gatekeeper's way (pure)
    run.audit_cluster       discovery, the kinds the constraints can match, paged lists, evaluation
    run.audit_objects       evaluation of any objects (a page, or files)
    status.write_results    each constraint's status, once per complete run
    logs, events, metrics   Gatekeeper's log lines, Events and metric names
"""

from celkeeper.audit.evaluate import Evaluator, Outcome
from celkeeper.audit.process import AuditProcess, ProcessOptions
from celkeeper.audit.results import ObjectRef, RunResults, Violation, truncate
from celkeeper.audit.run import AuditOptions, Silent, audit_cluster, audit_objects

__all__ = [
    "AuditOptions",
    "AuditProcess",
    "Evaluator",
    "ObjectRef",
    "Outcome",
    "ProcessOptions",
    "RunResults",
    "Silent",
    "Violation",
    "audit_cluster",
    "audit_objects",
    "truncate",
]
