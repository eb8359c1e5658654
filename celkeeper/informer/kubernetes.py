"""Policies from the cluster: `celkeeper serve --source kubernetes`.

    source = KubernetesSource(KubernetesOptions(kubeconfig=None, pod=..., state=StateDir(...)))

Feeds the informer exactly like the folder source: `listing()` is the complete current content
(templates and constraints as JSON objects, Namespace objects), `wait()` returns on a watch event.
Inside, in the informer process:

- a WatchManager with seven registrars: the policies (templates, one constraint kind per template,
  namespaces), the constraint CRD writer (templates, constraint CRDs), the ValidatingAdmissionPolicy writer
  (templates, constraint CRDs, policies and bindings), the status aggregator (templates, constraint kinds,
  pod statuses, constraint CRDs), this pod's status reporter (pod statuses), the synced data (the sync
  configuration - Gatekeeper's Config and SyncSets, celkeeper's SyncSets - and every kind it names,
  written to the data store the workers' engines read: celkeeper.incluster.datasync) and its SyncPodStatus
  writer; and, when celkeeper manages the webhook's certificate, the certificate rotator (its Secret and
  webhook configurations). A template that appears or goes starts or stops the watch of its constraint
  kind, and a kind added to or removed from the sync configuration its watch, without a restart.
- a controller thread running the certificate rotator (Secret, caBundle, files) when there is one, the
  CRD writer, the policy writer, the pod status reporter and the
  aggregator. The policy writer works from the plan (celkeeper.vap.plan_vap) of each policy set the
  informer builds; this pod's outcome goes into its status objects (vapGenerationStatus,
  enforcementPointsStatus).

The listing is `synced` once the templates, the namespaces and every constraint kind of the templates
listed at that moment have been listed, and the sync configuration and every kind it named then are in
the data store: the workers become ready only with a snapshot that holds all of them (a pod does not
serve until it has bootstrapped everything that existed at its start). The snapshot also says which
kinds are synced: a template reading a kind that is not fails under its failurePolicy, and its
constraints are reported not enforced.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celkeeper.cel.inventory import Gvk
from celkeeper.errors import CelkeeperError
from celkeeper.incluster import (
    ConstraintCrdWriter,
    ControllerLoop,
    Pod,
    StatusAggregator,
    item_name,
    namespace_object,
    observe,
    policy_object,
)
from celkeeper.incluster.admissionpolicies import AdmissionPolicyWatch
from celkeeper.incluster.certrotator import CertConfig, CertRotator
from celkeeper.incluster.datasync import DataSync
from celkeeper.incluster.podreporter import PodStatusReporter
from celkeeper.incluster.podstatus import Observation
from celkeeper.incluster.policies import PolicyWatch
from celkeeper.incluster.syncstatus import SyncStatusWriter
from celkeeper.incluster.vapwriter import VapSyncOptions, VapWriter
from celkeeper.informer.source import Listing
from celkeeper.kube import Client, KubeClient, Timing, WatchManager
from celkeeper.snapshot import ORIGIN_OBJECT, Snapshot, SnapshotItem, StateDir, WorkerBoard
from celkeeper.snapshot.datastore import DataStore
from celkeeper.vap.plan import VapOptions, plan_vap

if TYPE_CHECKING:
    from celkeeper.policy import PolicySet

log = logging.getLogger("celkeeper.informer")

BATCH = 0.05  # after a change, wait this long for more (one `kubectl apply -f dir` is many events)


@dataclass(frozen=True)
class KubernetesOptions:
    state: StateDir
    pod_name: str
    pod_namespace: str = "celkeeper-system"
    expected_pods: int = 1
    kubeconfig: str | None = None
    timing: Timing | None = None
    resync: float = 60.0
    vap: VapOptions = field(default_factory=VapOptions)  # which policies and bindings to generate
    vap_sync: VapSyncOptions = field(default_factory=VapSyncOptions)
    certificates: CertConfig | None = None  # celkeeper manages the webhook's certificate (--cert-dir)
    # the webhook enforces Kubernetes' admission policies: they and their parameters are in the snapshots
    admission_policies: bool = False


class KubernetesSource:
    def __init__(self, options: KubernetesOptions, client: Client | None = None) -> None:
        self.options = options
        self.client: Client = client if client is not None else KubeClient.connect(options.kubeconfig)
        self.manager = WatchManager(self.client, options.timing)
        self.policies = PolicyWatch(self.manager, on_change=self._changed_now)
        self.crds = ConstraintCrdWriter(self.client, self.manager, on_change=self._wake_controllers)
        self.aggregator = StatusAggregator(
            self.client,
            self.manager,
            options.pod_namespace,
            options.expected_pods,
            on_change=self._wake_controllers,
        )
        self.vaps = VapWriter(
            self.client,
            self.manager,
            options.vap_sync,
            on_change=self._wake_controllers,
            on_status=self._vap_status_changed,
        )
        self.reporter = PodStatusReporter(
            self.client,
            self.manager,
            Pod(options.pod_name, options.pod_namespace, expected_pods=options.expected_pods),
            WorkerBoard(options.state.workers),
            on_change=self._wake_controllers,
            vap_status=self._vap_status,
        )
        # the second set of dynamic watches: the kinds the sync configuration names, into the store the
        # workers' engines read (templates that read synced data)
        self.store = DataStore(options.state.data)
        self.data = DataSync(
            self.client, self.manager, self.store, options.pod_namespace, on_change=self._data_changed
        )
        self.sync_status = SyncStatusWriter(
            self.client, self.manager, lambda: self.reporter.pod, self.data, options.state.data_status
        )
        reconcilers: list[Any] = [self.crds, self.vaps, self.data, self.reporter, self.sync_status]
        self.admission: AdmissionPolicyWatch | None = None
        if options.admission_policies:
            self.admission = AdmissionPolicyWatch(
                self.client, self.manager, on_change=self._admission_changed
            )
            reconcilers.append(self.admission)
        reconcilers.append(self.aggregator)
        self.certificates: CertRotator | None = None
        if options.certificates is not None:
            self.certificates = CertRotator(
                self.client, options.certificates, on_change=self._wake_controllers
            )
            reconcilers.insert(0, self.certificates)
        self.controllers = ControllerLoop(reconcilers, resync=options.resync)
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._synced = False
        self._items: dict[str, tuple[str, SnapshotItem]] = {}  # item name -> (resourceVersion, item)

    @property
    def description(self) -> str:
        return f"kubernetes:{self.client.server}"

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.policies.register()
        self.crds.register()
        self.vaps.register()
        self.aggregator.register()
        self.reporter.register()
        self.data.register()
        self.sync_status.register()
        if self.admission is not None:
            self.admission.register()
        self.data.start()
        if self.certificates is not None:
            self.certificates.register(self.manager)
        self.manager.start()
        self.controllers.start()
        log.info(
            "watching %s as pod %s/%s (%d pod(s) expected)",
            self.client.server,
            self.options.pod_namespace,
            self.options.pod_name,
            self.options.expected_pods,
        )

    def close(self) -> None:
        self._stop.set()
        self._changed.set()
        self.controllers.stop()
        self.manager.stop()
        self.data.stop()
        self.store.close()

    def wait(self, timeout: float) -> None:
        if self._changed.wait(timeout) and not self._stop.is_set():
            self._changed.clear()
            time.sleep(BATCH)

    def _changed_now(self) -> None:
        self._changed.set()

    def _wake_controllers(self) -> None:
        self.controllers.wake()

    def _admission_changed(self) -> None:
        self._changed.set()  # the policies are part of the snapshot
        controllers = getattr(self, "controllers", None)
        if controllers is not None:  # their parameter kinds are resolved by the controller loop
            controllers.wake()

    def _data_changed(self) -> None:
        self._changed.set()  # which kinds are synced is part of the snapshot
        # the SyncPodStatus reports them too: written now, not at the next resync (a kind listed, or a
        # SyncSet that only adds a source to a kind synced already, leaves its writer neither dirty nor busy)
        self.sync_status.dirty = True
        self.controllers.wake()

    def _vap_status(self, observation: Observation) -> Mapping[str, Any] | None:
        if observation.is_template:
            return self.vaps.template_status(observation.name)
        return self.vaps.constraint_status(observation.kind, observation.name)

    def _vap_status_changed(self) -> None:
        self.reporter.dirty = True  # this pod's status objects carry the outcome
        self.controllers.wake()

    # -- the listing ------------------------------------------------------------------------------
    def _item(self, obj: Mapping[str, Any]) -> SnapshotItem | None:
        name = item_name(obj)
        if name is None:
            return None
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        cached = self._items.get(name)
        if cached is not None and cached[0] == version and version:
            return cached[1]
        text = json.dumps(policy_object(obj), sort_keys=True, indent=1)
        item = SnapshotItem(name=name, text=text, origin=ORIGIN_OBJECT)
        self._items[name] = (version, item)
        return item

    def listing(self) -> Listing:
        view = self.policies.view()
        admission: list[tuple[str, dict[str, Any]]] = []
        admission_synced = True
        admission_problems: tuple[str, ...] = ()
        if self.admission is not None:
            admission, admission_synced, admission_problems = self.admission.view()
        if view.synced and admission_synced and self.data.bootstrapped() and not self._synced:
            self._synced = True
            log.info(
                "listed every template, constraint and namespace (%d object(s)) and the synced data "
                "of the kinds configured at start",
                len(view.objects),
            )
        items = [item for item in (self._item(obj) for obj in view.objects) if item is not None]
        items.extend(
            SnapshotItem(name=name, text=json.dumps(obj, sort_keys=True, indent=1), origin=ORIGIN_OBJECT)
            for name, obj in admission
        )
        names = {item.name for item in items}
        self._items = {k: v for k, v in self._items.items() if k in names}
        problems: tuple[str, ...] = ()
        if view.templates_missing:
            problems = (
                "the ConstraintTemplate CRD (constrainttemplates.templates.celkeeper.io) is not installed: "
                "apply crds/ first",
            )
        problems = (*problems, *admission_problems)
        return Listing(
            items=tuple(sorted(items, key=lambda i: i.name)),
            synced=self._synced,
            namespaces={name: namespace_object(ns) for name, ns in view.namespaces.items()},
            namespaces_complete=view.namespaces_synced,
            problems=problems,
            synced_kinds=tuple(sorted(str(g) for g in self.data.synced_kinds())),
        )

    # -- what the workers are given (PublicationListener) -----------------------------------------
    def published(
        self, snapshot: Snapshot, policies: PolicySet | None, errors: Sequence[CelkeeperError]
    ) -> None:
        objects: dict[str, dict[str, Any]] = {}
        for item in snapshot.items:
            if item.origin != ORIGIN_OBJECT:
                continue
            try:
                obj = json.loads(item.text)
            except ValueError:
                continue
            if isinstance(obj, dict):
                objects[item.name] = obj
        if policies is not None:  # before the reporter hears of it: its status then carries the outcome
            self.vaps.published(plan_vap(policies, self.options.vap))
        synced = frozenset(Gvk.parse(k) for k in snapshot.synced_kinds)
        self.reporter.published(
            snapshot.generation, snapshot.synced, observe(objects, policies, errors, synced)
        )
        self.controllers.wake()
