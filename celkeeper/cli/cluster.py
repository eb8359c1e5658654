"""Options and loading shared by the commands that read what a cluster enforces (--cluster)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.gator.kinds import is_namespace
from celkeeper.gator.reviews import is_admission_review
from celkeeper.model import JsonObject, JsonValue

if TYPE_CHECKING:  # the kubernetes client loads only when needed
    from celkeeper.cli.admissionpolicies import AdmissionReviewer
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


def manifest_object(document: Document) -> Mapping[str, JsonValue]:
    """A manifest's object: the object itself, or an AdmissionReview's object/oldObject."""
    if is_admission_review(document):
        request = document.data.get("request") or {}
        obj = request.get("object") or request.get("oldObject") or {}
        return obj if isinstance(obj, dict) else {}
    return document.data if isinstance(document.data, dict) else {}


def admission_kinds(manifests: Sequence[Document]) -> list[tuple[str, str]]:
    """(group, kind) of each manifest's object (read_cluster's `admission_kinds`)."""
    found = []
    for document in manifests:
        obj = manifest_object(document)
        found.append((str(obj.get("apiVersion") or "").rpartition("/")[0], str(obj.get("kind") or "")))
    return found


def cluster_admission(
    cluster: ClusterPolicies, manifests: Sequence[Document], problems: list[str], notes: list[str]
) -> AdmissionReviewer | None:
    """The cluster's admission policies (cli.admissionpolicies), with its parameter objects and its
    Namespaces, those the manifests create as the manifests say; None when it holds none. What the API
    server would refuse goes to `problems`, what follows from the rest to `notes`."""
    from celkeeper.cli.admissionpolicies import AdmissionReviewer

    if not cluster.admission:
        return None
    created = [d.data for d in manifests if is_namespace(d) and d.name and isinstance(d.data, dict)]
    objects = [*cluster.params, *cluster.namespaces.values(), *created]  # the last Namespace of a name wins
    try:
        reviewer = AdmissionReviewer.build(cluster.admission, objects)
    except CelkeeperError as err:  # the native library cannot run here
        problems.append(f"in the cluster: {err}")
        return None
    if reviewer is not None:
        problems += [f"in the cluster: {e}" for e in reviewer.errors()]
        notes += [str(n) for n in reviewer.notes()]
    return reviewer
