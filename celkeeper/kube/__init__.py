"""The Kubernetes API adapter: the only part of celkeeper that imports the `kubernetes` package.

    KubeClient.connect(kubeconfig)          the real API (Client protocol: list, watch, get, create, ...)
    Reflector, WatchManager, Event          list+watch per resource; registrars, union of intents, routing
    ConstraintCrdWriter                     a constraint CRD per template (idempotent, leaderless)
    StatusAggregator                        template/constraint status.byPod and `enforced`
    observe(), pod_status(), Pod            per-pod status objects (pure)
    ControllerLoop                          runs the reconcilers on one thread
    covers(), with_digest(), up_to_date()   desired versus stored (pure)
    write_desired(), delete_if_present()    leaderless writes: conflict -> re-read, stop when current
"""

from celkeeper.kube.aggregate import StatusAggregator, constraint_status, template_status
from celkeeper.kube.client import ApiError, Client, KubeClient, Listed, WatchEvent, WatchStream
from celkeeper.kube.compare import covers, for_update, up_to_date, with_digest, with_resource_version
from celkeeper.kube.controller import ControllerLoop
from celkeeper.kube.crdwriter import ConstraintCrdWriter, desired_crd, plan
from celkeeper.kube.manager import SYNCED, Event, WatchManager
from celkeeper.kube.objects import item_name, namespace_object, policy_object
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
from celkeeper.kube.writes import delete_if_present, write_desired

__all__ = [
    "CONSTRAINT_CRDS",
    "NAMESPACES",
    "SYNCED",
    "TEMPLATES",
    "ApiError",
    "Client",
    "ConstraintCrdWriter",
    "ControllerLoop",
    "Event",
    "KubeClient",
    "Listed",
    "Observation",
    "ObservationKey",
    "ObservationTracker",
    "Pod",
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
    "for_update",
    "item_name",
    "namespace_object",
    "observe",
    "plan",
    "pod_status",
    "pod_status_current",
    "pods",
    "policy_object",
    "status_error",
    "template_pod_statuses",
    "template_status",
    "up_to_date",
    "with_digest",
    "with_resource_version",
    "write_desired",
]
