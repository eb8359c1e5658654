"""The audit gives back the native library's code pages that loading and compiling its policies mapped
(the library's initialisation and compiler touch megabytes of its file that evaluating never uses): each
run's policy set is ready with them unmapped, and the run evaluates as before, mapping again only what
evaluating uses. In a fresh process, as the audit's own: what a process has mapped depends on what it ran."""

from __future__ import annotations

from tests.support.native import in_fresh_process, require_celgo

PROGRAM = r"""
import copy, json
from celkeeper.audit import AuditProcess, Evaluator, ProcessOptions
from celkeeper.audit import process as audit_process
from celkeeper.incluster import PolicyView
from tests.audit.support import constraint, labels_template
from tests.kube.fakes import FakeClient
from tests.support.native import library_file_bytes, record_releases

mapped = record_releases(audit_process)  # the library's file bytes resident before and after each release

def stored(data, uid):
    out = copy.deepcopy(data)
    out["metadata"].update(generation=1, resourceVersion="1", uid=uid)
    return out

pods = {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]}
objects = (
    stored(labels_template("K8sPages"), "t-1"),
    stored(constraint("K8sPages", "owner", pods, {"key": "owner"}), "c-1"),
)
view = PolicyView(
    objects=objects, namespaces={}, synced=True, namespaces_synced=True, templates_missing=False
)
process = AuditProcess(FakeClient(), ProcessOptions())
policies = process._policies_for_run(view)
after_release = library_file_bytes()
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"}}
namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
outcome = Evaluator(policies).evaluate(pod, namespace)
print(json.dumps({
    "mapped": mapped,
    "messages": [v.message for v in outcome.violations],
    "after_release": after_release,
    "after_evaluation": library_file_bytes(),
}))
"""


def test_a_runs_policies_are_ready_with_the_library_code_they_ran_unmapped() -> None:
    require_celgo()
    figures = in_fresh_process(PROGRAM)
    assert len(figures["mapped"]) == 1  # once, as the run's policies are ready
    ((before, after),) = figures["mapped"]
    assert before > 8 << 20  # the library's initialisation and the compiler ran
    assert after < before // 4  # unmapped (the Go runtime's threads may touch a few pages again at once)
    assert figures["messages"] == ["Pod web lacks owner"]  # it evaluates as before
    assert figures["after_evaluation"] > figures["after_release"]  # mapping again what evaluating uses
