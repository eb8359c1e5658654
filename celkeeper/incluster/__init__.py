"""celkeeper's own controllers in the cluster: what its pods (the informer of `serve --source
kubernetes`) and its offline tools do with the API, through the adapter (celkeeper.kube) only: this
package imports neither the `kubernetes` client nor an HTTP library (import-linter checks it).

resources     TEMPLATES, constraints(kind), pod statuses: celkeeper's own resources
objects       item_name(), policy_object(), namespace_object(): API objects as policy sources
policies      PolicyWatch, PolicyView: templates, their constraint kinds and namespaces, watched
controller    ControllerLoop: runs the reconcilers below on one thread
crdwriter     ConstraintCrdWriter: a constraint CRD per template (idempotent, leaderless)
podstatus     observe(), pod_status(), Pod: per-pod status objects (pure)
podreporter   PodStatusReporter: this pod's status objects, written once its workers load a snapshot
aggregate     StatusAggregator: template/constraint status.byPod and `enforced`
vapwriter     VapWriter: generated ValidatingAdmissionPolicies and bindings
certrotator   CertRotator: the webhook's CA and serving certificate
syncconfig    sync_config(): which kinds to cache for templates that read synced data
datasync      DataSync: their watches, written to the data store
syncstatus    SyncStatusWriter: this pod's SyncPodStatus
cluster       ClusterReader: a cluster's policies, discovery and live objects, read once (test --cluster)
listing       policy_objects(): every template and constraint, once (vap --cluster)
"""

from celkeeper.incluster.aggregate import StatusAggregator, constraint_status, template_status
from celkeeper.incluster.controller import ControllerLoop
from celkeeper.incluster.crdwriter import ConstraintCrdWriter, desired_crd, plan
from celkeeper.incluster.objects import item_name, namespace_object, policy_object
from celkeeper.incluster.podreporter import PodStatusReporter
from celkeeper.incluster.podstatus import (
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
from celkeeper.incluster.policies import PolicyView, PolicyWatch
from celkeeper.incluster.resources import (
    CONSTRAINT_CRDS,
    EXPANSION_TEMPLATES,
    MUTATORS,
    TEMPLATES,
    constraint_kinds,
    constraint_pod_statuses,
    constraints,
    template_pod_statuses,
)

__all__ = [
    "CONSTRAINT_CRDS",
    "EXPANSION_TEMPLATES",
    "MUTATORS",
    "TEMPLATES",
    "ConstraintCrdWriter",
    "ControllerLoop",
    "Observation",
    "ObservationKey",
    "ObservationTracker",
    "Pod",
    "PodStatusReporter",
    "PolicyView",
    "PolicyWatch",
    "StatusAggregator",
    "StatusError",
    "constraint_kinds",
    "constraint_pod_statuses",
    "constraint_status",
    "constraints",
    "desired_crd",
    "item_name",
    "namespace_object",
    "observe",
    "plan",
    "pod_status",
    "pod_status_current",
    "policy_object",
    "status_error",
    "template_pod_statuses",
    "template_status",
]
