"""Options and loading shared by the commands that read what a cluster enforces (--cluster)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from celkeeper.documents import Document
from celkeeper.model import JsonObject

if TYPE_CHECKING:  # the kubernetes client loads only when needed
    from celkeeper.incluster.cluster import ClusterReader


def add_cluster_options(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_argument_group("cluster (--cluster)")
    group.add_argument(
        "--cluster",
        action="store_true",
        help=f"{what} (read-only: get/list, see deploy/ci-rbac.yaml)",
    )
    group.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config)"
    )
    group.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current one)")


@dataclass
class ClusterPolicies:
    documents: list[Document]  # templates, constraints, ExpansionTemplates
    namespaces: dict[str, JsonObject]
    notes: list[str]
    reader: ClusterReader  # open: close it
    #: Kubernetes' admission policies and bindings, and the CRDs of their parameter kinds and of the kinds
    #: reviewed (for cli.admissionpolicies.AdmissionReviewer.build; empty unless asked for)
    admission: list[Document] = field(default_factory=list)
    #: the admission policies' parameter objects, as stored
    params: list[JsonObject] = field(default_factory=list)


def read_cluster(
    args: argparse.Namespace, admission_kinds: Iterable[tuple[str, str]] | None = None
) -> ClusterPolicies:
    """Connect and read the policies; raises CelkeeperError (ApiError) with one line. With
    `admission_kinds` ((group, kind)s of the objects to be reviewed), Kubernetes' admission policies too,
    with their parameter objects and the CRDs they and these kinds need (what cannot be read: a note)."""
    from celkeeper.incluster.cluster import ClusterReader  # the kubernetes client loads only when needed

    reader = ClusterReader.connect(args.kubeconfig, args.context)
    try:
        found = reader.policies()
        admission = reader.admission_policies(admission_kinds) if admission_kinds is not None else None
    except BaseException:
        reader.close()
        raise
    documents = [Document.from_object(obj, file=where) for where, obj in found.objects]
    cluster = ClusterPolicies(documents, dict(found.namespaces), list(found.notes), reader)
    if admission is not None:
        cluster.admission = [Document.from_object(obj, file=where) for where, obj in admission.policies]
        cluster.params = list(admission.params)
        cluster.notes += admission.notes
    return cluster
