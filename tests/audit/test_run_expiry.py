"""A list that expires while the audit pages through it: the API server restarts with etcd compacted past
the revision the list started at, so the next `continue` gets a real 410 Gone. The audit lists that kind
again and still counts every object exactly once. Uses a control plane of its own (it is restarted).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from celkeeper.audit import AuditOptions, Evaluator, Silent, audit_cluster
from celkeeper.audit.results import Violation
from celkeeper.cel import DEFAULT_ENGINE, get_engine
from celkeeper.documents import Document
from celkeeper.kube import KubeClient
from celkeeper.kube.discovery import ApiResource
from celkeeper.policy import TemplateCompiler, build_policy_set
from tests.audit.support import configmaps, constraint, labels_template
from tests.incluster.support import etcd_compact
from tests.kube.test_reflector_expiry import etcd_put
from tests.support.apiserver import ControlPlane
from tests.support.binaries import KubeBinaries
from tests.support.bulk import create_many

pytestmark = pytest.mark.kube

KIND = "ExpiryAudit"
CONFIGMAPS = 240  # every 3rd lacks the label `owner`
CHUNK = 25


@pytest.fixture(scope="module")
def cluster(kube_binaries: KubeBinaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("kube-audit-expiry"), kube_binaries) as plane:
        yield plane


class RestartOnce(Silent):
    """A reporter that, after the first page of ConfigMaps, restarts the API server with etcd compacted."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        self.restarted = False
        self.violations: list[Violation] = []

    def violation(self, violation: Violation) -> None:
        self.violations.append(violation)

    def page(self, resource: ApiResource, objects: int) -> None:
        del objects
        if resource.kind == "ConfigMap" and not self.restarted:
            self.restarted = True

            def compact_everything() -> None:
                etcd_put(self.cluster, "/celkeeper-test/after-the-first-page")
                etcd_compact(self.cluster)

            self.cluster.restart_apiserver(while_down=compact_everything)


def test_a_list_that_expires_mid_way_is_listed_again_and_counted_once(
    cluster: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.kubectl("create", "namespace", "apps")
    assert create_many(cluster, configmaps("apps", CONFIGMAPS, 3)) == CONFIGMAPS
    documents = [
        Document.from_object(labels_template(KIND)),
        Document.from_object(
            constraint(
                KIND,
                "owner",
                {"kinds": [{"apiGroups": [""], "kinds": ["ConfigMap"]}], "namespaces": ["apps"]},
                {"key": "owner"},
            )
        ),
    ]
    policies = build_policy_set(documents, TemplateCompiler(get_engine(DEFAULT_ENGINE)))
    assert not policies.errors

    def namespace(name: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}

    client = KubeClient.connect(str(cluster.kubeconfig_path))
    reporter = RestartOnce(cluster)
    try:
        with caplog.at_level(logging.INFO, logger="celkeeper.kube"):
            results = audit_cluster(
                client, Evaluator(policies), namespace, AuditOptions(chunk_size=CHUNK), reporter
            )
    finally:
        client.close()
    assert reporter.restarted
    assert "the continue token expired" in caplog.text, "no 410 Gone: the test did not provoke what it must"
    assert not results.list_errors
    existing = cluster.kubectl("get", "configmaps", "-A", "--no-headers").stdout.splitlines()
    assert len(existing) > CONFIGMAPS  # the API server's own ConfigMaps too
    assert results.objects[("", "v1", "ConfigMap")] == len(existing)  # every one, once
    names = sorted(v.ref.name for v in reporter.violations)
    assert names == [f"cm-{i:04d}" for i in range(0, CONFIGMAPS, 3)]  # each exactly once
    assert results.status_fields((KIND, "owner"))["totalViolations"] == len(names)
