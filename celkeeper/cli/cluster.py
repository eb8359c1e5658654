"""Options and loading shared by the commands that read what a cluster enforces (--cluster)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
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


def read_cluster(args: argparse.Namespace) -> ClusterPolicies:
    """Connect and read the policies; raises CelkeeperError (ApiError) with one line."""
    from celkeeper.incluster.cluster import ClusterReader  # the kubernetes client loads only when needed

    reader = ClusterReader.connect(args.kubeconfig, args.context)
    try:
        found = reader.policies()
    except BaseException:
        reader.close()
        raise
    documents = [Document.from_object(obj, file=where) for where, obj in found.objects]
    return ClusterPolicies(documents, dict(found.namespaces), list(found.notes), reader)
