"""The Kubernetes API adapter: the only part of celkeeper that imports the `kubernetes` package.

KubeClient.connect(kubeconfig)          the real API (Client protocol: list, list_page, watch, get, ...)
pages(client, resource, limit)          a list in chunks; an expired continue token restarts it
discover(client)                        every served resource in its preferred version (ApiResource)
Reflector, WatchManager, Event          list+watch per resource; registrars, union of intents, routing
PolicyWatch                             templates, their constraint kinds and namespaces, watched
ConstraintCrdWriter                     a constraint CRD per template (idempotent, leaderless)
StatusAggregator                        template/constraint status.byPod and `enforced`
observe(), pod_status(), Pod            per-pod status objects (pure)
ControllerLoop                          runs the reconcilers on one thread
covers(), with_digest(), up_to_date()   desired versus stored (pure)
write_desired(), delete_if_present()    leaderless writes: conflict -> re-read, stop when current
update_status()                         a status subresource write: conflict -> re-read, ask again
"""

from celkeeper.kube.aggregate import StatusAggregator, constraint_status, template_status
from celkeeper.kube.client import ApiError, Client, KubeClient, Listed, Page, WatchEvent, WatchStream
from celkeeper.kube.compare import covers, for_update, up_to_date, with_digest, with_resource_version
from celkeeper.kube.controller import ControllerLoop
from celkeeper.kube.crdwriter import ConstraintCrdWriter, desired_crd, plan
from celkeeper.kube.discovery import ApiResource, Discovered, discover
from celkeeper.kube.manager import SYNCED, Event, WatchManager
from celkeeper.kube.objects import item_name, namespace_object, policy_object
from celkeeper.kube.paging import pages
from celkeeper.kube.podstatus import (
    Observation,
    ObservationKey,
    ObservationTracker,
    Pod,
    StatusError,
    observe,
    pod_status,
    pod_status_current,
    status_error,
)
from celkeeper.kube.policies import PolicyView, PolicyWatch
from celkeeper.kube.reflector import Reflector, Timing
from celkeeper.kube.resources import (
    CONSTRAINT_CRDS,
    NAMESPACES,
    TEMPLATES,
    Resource,
    constraint_kinds,
    constraint_pod_statuses,
    constraints,
    pods,
    template_pod_statuses,
)
from celkeeper.kube.writes import delete_if_present, update_status, write_desired

__all__ = [
    "CONSTRAINT_CRDS",
    "NAMESPACES",
    "SYNCED",
    "TEMPLATES",
    "ApiError",
    "ApiResource",
    "Client",
    "ConstraintCrdWriter",
    "ControllerLoop",
    "Discovered",
    "Event",
    "KubeClient",
    "Listed",
    "Observation",
    "ObservationKey",
    "ObservationTracker",
    "Page",
    "Pod",
    "PolicyView",
    "PolicyWatch",
    "Reflector",
    "Resource",
    "StatusAggregator",
    "StatusError",
    "Timing",
    "WatchEvent",
    "WatchManager",
    "WatchStream",
    "constraint_kinds",
    "constraint_pod_statuses",
    "constraint_status",
    "constraints",
    "covers",
    "delete_if_present",
    "desired_crd",
    "discover",
    "for_update",
    "item_name",
    "namespace_object",
    "observe",
    "pages",
    "plan",
    "pod_status",
    "pod_status_current",
    "pods",
    "policy_object",
    "status_error",
    "template_pod_statuses",
    "template_status",
    "up_to_date",
    "update_status",
    "with_digest",
    "with_resource_version",
    "write_desired",
]
