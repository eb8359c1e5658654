"""The mutation differential's two sides: two real API servers, one calling Gatekeeper's mutation webhook
(its manager, `--operation=mutation-webhook`, out of cluster), the other celkeeper's (`celkeeper serve
--source kubernetes`, a real process serving POST /v1/mutate over TLS from the mutators its informer
watches), each registered as Gatekeeper's chart registers its webhook.

A round creates its mutators on both API servers with kubectl (Gatekeeper's controllers and celkeeper's
informer load them; a probe request labelled by the round's own mutator says when), then sends the same
requests to both API servers with kubectl - CREATEs as `kubectl create --dry-run=server -o json`, UPDATEs
of objects stored unmutated as `kubectl replace --dry-run=server -o json` - in one kubectl call per batch,
and keeps what each API server would store (or its error), normalised only where two API servers must
differ: uid, creationTimestamp, resourceVersion, managedFields' times, and the random mutation id
(annotation and error messages).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

import celkeeper
from celkeeper.incluster.objects import MUTATOR_ITEM_PREFIX
from tests.e2e.gatekeeper import cases
from tests.incluster.support import KubeServe
from tests.incluster.support import install_crds as install_celkeeper_crds
from tests.support.apiserver import ControlPlane
from tests.support.gatekeeper import (
    NAMESPACE,
    SERVICE_ACCOUNT,
    GatekeeperManager,
    install_crds,
    mutating_webhook,
)
from tests.support.kubectl import wait_established
from tests.support.waiting import wait_for

MUTATOR_CRDS = (
    Path(celkeeper.__file__).parent / "native" / "go" / "mutation" / "crds"
)  # as the chart has them
CELKEEPER_NAMESPACE = "celkeeper-system"
MUTATION_DECISIONS = ("mutated", "unchanged", "error", "exempt")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MUTATOR_RESOURCES = ",".join(
    f"{plural}.mutations.gatekeeper.sh" for plural in ("assign", "assignmetadata", "modifyset", "assignimage")
)
OBJECT_SELECTOR = {"matchExpressions": [{"key": cases.UNMUTATED, "operator": "DoesNotExist"}]}
CONFIG = {
    "apiVersion": "config.gatekeeper.sh/v1alpha1",
    "kind": "Config",
    "metadata": {"name": "config", "namespace": NAMESPACE},
    "spec": {"match": [{"excludedNamespaces": cases.EXCLUDED, "processes": ["mutation-webhook"]}]},
}


@dataclass(frozen=True)
class Outcome:
    """One case on one side: what the API server would store (normalised JSON) or its error."""

    stored: str | None
    error: str | None


@dataclass(frozen=True)
class Case:
    round: str
    operation: str
    key: str  # kind namespace/name
    sent: dict[str, Any]
    baseline: Outcome  # Gatekeeper's API server without mutators
    gatekeeper: Outcome
    celkeeper: Outcome

    @property
    def same(self) -> bool:
        return self.gatekeeper == self.celkeeper

    @property
    def mutated(self) -> bool:
        """Gatekeeper's API server stores something else than it does without mutators (or refuses)."""
        return self.gatekeeper != self.baseline

    def describe(self) -> str:
        return (
            f"{self.round} {self.operation} {self.key}\n  sent: {json.dumps(self.sent, sort_keys=True)}\n"
            f"  gatekeeper: {self.gatekeeper}\n  celkeeper:  {self.celkeeper}"
        )


class Side:
    """An API server with one mutating webhook registered."""

    def __init__(self, name: str, cluster: ControlPlane) -> None:
        self.name = name
        self.cluster = cluster

    def register(self, url: str, ca_pem: bytes) -> None:
        config = mutating_webhook(f"{self.name}-mutation", url, ca_pem, OBJECT_SELECTOR)
        self.cluster.kubectl("apply", "-f", "-", input=config)

    def create_namespaces(self) -> None:
        items = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}
            for name, labels in cases.NAMESPACES.items()
        ]
        self.cluster.kubectl("create", "-f", "-", input=items)

    def store(self, objects: Sequence[Mapping[str, Any]]) -> None:
        if objects:
            self.cluster.kubectl("create", "-f", "-", input=list(objects), timeout=120)

    def send(self, verb: str, objects: Sequence[Mapping[str, Any]]) -> list[Outcome]:
        """`kubectl <verb> --dry-run=server -o json` of `objects` in one call: an outcome per object."""
        done = self.cluster.kubectl(
            verb, "--dry-run=server", "-o", "json", "-f", "-", input=list(objects), check=False, timeout=180
        )
        stored = {_key(obj): obj for obj in _json_stream(done.stdout)}
        out = []
        for obj in objects:
            key = _key(obj)
            if key in stored:
                out.append(Outcome(normalise(stored[key]), None))
            else:
                out.append(self._alone(verb, obj))
        return out

    def _alone(self, verb: str, obj: Mapping[str, Any]) -> Outcome:
        """An object the batch did not return, sent alone: kubectl's words for its refusal (the words of
        several refusals in one batch are not told apart)."""
        done = self.cluster.kubectl(
            verb, "--dry-run=server", "-o", "json", "-f", "-", input=dict(obj), check=False, timeout=60
        )
        if done.returncode == 0:
            return Outcome(normalise(json.loads(done.stdout)), None)
        return Outcome(None, UUID.sub("<uuid>", done.stderr.strip()))

    def probe(self) -> str:
        """The round the probe Secret is labelled with (or the API server's error)."""
        done = self.cluster.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-", input=cases.probe_object(), check=False
        )
        if done.returncode != 0:
            return done.stderr.strip()
        return str(json.loads(done.stdout)["metadata"].get("labels", {}).get(cases.ROUND_LABEL, ""))


def _json_stream(text: str) -> list[dict[str, Any]]:
    decoder = json.JSONDecoder()
    out, at = [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return out
        obj, at = decoder.raw_decode(text, at)
        if obj.get("kind") == "List":
            out.extend(obj.get("items") or [])
        else:
            out.append(obj)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {meta.get('namespace', '')}/{meta.get('name')}"


def normalise(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    for key in ("uid", "creationTimestamp", "resourceVersion"):
        meta.pop(key, None)
    for entry in meta.get("managedFields") or ():
        entry.pop("time", None)
    annotations = meta.get("annotations") or {}
    if UUID.fullmatch(annotations.get("gatekeeper.sh/mutation-id", "")):
        annotations["gatekeeper.sh/mutation-id"] = "<uuid>"
    return json.dumps(obj, sort_keys=True)


class Differential:
    """Both sides, set up: Gatekeeper's CRDs and Config, celkeeper's CRDs and Gatekeeper's mutator CRDs as
    celkeeper's chart installs them, the namespaces, the webhooks."""

    def __init__(self, manager_binary: Path, workdir: Path, binaries: Any) -> None:
        self.workdir = workdir
        self.gatekeeper_cluster = ControlPlane(workdir / "gatekeeper-kube", binaries)
        self.celkeeper_cluster = ControlPlane(workdir / "celkeeper-kube", binaries)
        self.manager_binary = manager_binary
        self.manager: GatekeeperManager | None = None
        self.server: KubeServe | None = None
        self.annotations = False
        self.previous: list[Mapping[str, Any]] = []
        self._served = 0.0  # requests answered by celkeeper's servers already stopped
        self._starts = 0

    def start(self) -> None:
        gk, ck = self.gatekeeper_cluster, self.celkeeper_cluster
        gk.start()
        ck.start()
        install_crds(gk)
        gk.kubectl("create", "namespace", NAMESPACE)
        gk.kubectl("create", "-f", "-", input=CONFIG)
        install_celkeeper_crds(ck)
        ck.kubectl("apply", "-f", str(MUTATOR_CRDS))
        for plural in MUTATOR_RESOURCES.split(","):
            wait_established(ck, plural)
        ck.kubectl("create", "namespace", CELKEEPER_NAMESPACE)
        self.gatekeeper = Side("gatekeeper", gk)
        self.celkeeper = Side("celkeeper", ck)
        self.gatekeeper.create_namespaces()
        self.celkeeper.create_namespaces()
        self.manager = GatekeeperManager(self.manager_binary, gk, self.workdir / "gatekeeper")
        self.manager.start()
        self.gatekeeper.register(self.manager.url, self.manager.ca_pem)
        self._serve(annotations=False)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
        if self.manager is not None:
            self.manager.stop()
        self.gatekeeper_cluster.stop()
        self.celkeeper_cluster.stop()

    def served(self) -> int:
        """How many mutation requests celkeeper's webhook answered."""
        return int(self._served + (self._answered(self.server) if self.server is not None else 0))

    def _serve(self, annotations: bool) -> None:
        """(Re)start celkeeper's webhook with Gatekeeper's options of this round and register it. Gatekeeper's
        Config excludes cases.EXCLUDED from its mutation webhook; celkeeper's way to leave namespaces
        alone is --exempt-namespace."""
        if self.server is not None:
            self._served += self._answered(self.server)
            self.server.stop()
        self._starts += 1
        args = ["--self-username", SERVICE_ACCOUNT]
        for pattern in cases.EXCLUDED:
            args += ["--exempt-namespace", pattern]
        if annotations:
            args.append("--mutation-annotations")
        self.server = KubeServe(
            self.workdir / f"celkeeper-{self._starts}",
            self.celkeeper_cluster.kubeconfig_path,
            "celkeeper-0",
            CELKEEPER_NAMESPACE,
            args=args,
        ).start(timeout=120)
        self.celkeeper.register(self.server.url("/v1/mutate"), self.server.certs.ca_cert.read_bytes())
        self.annotations = annotations

    @staticmethod
    def _answered(server: KubeServe) -> float:
        """Mutation requests the server counted (its workers write their counts every second)."""
        time.sleep(1.5)
        text = server.get("/metrics").text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "celkeeper_admission_requests_total"
            and sample.labels.get("decision") in MUTATION_DECISIONS
        )

    def clear(self, annotations: bool) -> None:
        """No mutator on either side (both webhooks restarted when the annotations flag changes)."""
        assert self.manager is not None and self.server is not None

        def delete(cluster: ControlPlane) -> Callable[[], object]:
            return lambda: cluster.kubectl("delete", MUTATOR_RESOURCES, "--all", "--wait=true", timeout=120)

        _both(delete(self.gatekeeper_cluster), delete(self.celkeeper_cluster))
        self.manager.wait_mutators({})
        if annotations != self.annotations:
            args = ["--operation=mutation-webhook"] + (["--mutation-annotations"] if annotations else [])
            self.manager.restart(args)
            self._serve(annotations)
        wait_for(lambda: self._celkeeper_has(set()), timeout=60, what="celkeeper's webhook without mutators")

    def install(self, round_: cases.Round) -> None:
        """Create the round's mutators on both API servers; wait until both webhooks answer with them."""
        assert self.manager is not None and self.server is not None

        def create(cluster: ControlPlane) -> Callable[[], object]:
            return lambda: cluster.kubectl("create", "-f", "-", input=round_.mutators, timeout=120)

        _both(create(self.gatekeeper_cluster), create(self.celkeeper_cluster))
        self.manager.wait_mutators({(m["kind"], m["metadata"]["name"]): 1 for m in round_.mutators})

        def answering(side: Side) -> Callable[[], object]:
            what = f"{side.name} at {round_.name}"
            return lambda: wait_for(lambda: side.probe() == round_.name, timeout=60, what=what)

        _both(answering(self.gatekeeper), answering(self.celkeeper))
        # the probe reached one worker; the batch may reach any: wait until every worker has the round
        wanted = {
            f"{MUTATOR_ITEM_PREFIX}{m['kind'].lower()}/{m['metadata']['name']}" for m in round_.mutators
        }
        wait_for(
            lambda: self._celkeeper_has(wanted), timeout=60, what=f"every celkeeper worker at {round_.name}"
        )

    def _celkeeper_has(self, items: set[str]) -> bool:
        """Every worker loaded a snapshot that holds exactly these mutators."""
        assert self.server is not None
        snapshot = self.server.snapshot()
        if snapshot is None:
            return False
        held = {item.name for item in snapshot.items if item.name.startswith(MUTATOR_ITEM_PREFIX)}
        return held == items and self.server.loaded() >= snapshot.generation

    def run(self, round_: cases.Round) -> list[Case]:
        """The round's requests without mutators (Gatekeeper's side: the baseline), then on both sides
        with the round's mutators."""
        self.clear(round_.annotations)
        bases = [base for base, _ in round_.updates]
        _both(lambda: self.gatekeeper.store(bases), lambda: self.celkeeper.store(bases))
        batches = [
            ("create", "CREATE", round_.creates),
            ("replace", "UPDATE", [new for _, new in round_.updates]),
        ]
        baseline = {verb: self.gatekeeper.send(verb, objects) for verb, _, objects in batches if objects}
        self.install(round_)
        out = []
        for verb, operation, objects in batches:
            if not objects:
                continue
            theirs, ours = _both(
                _sending(self.gatekeeper, verb, objects), _sending(self.celkeeper, verb, objects)
            )
            for obj, b, g, c in zip(objects, baseline[verb], theirs, ours, strict=True):
                out.append(Case(round_.name, operation, _key(obj), obj, b, g, c))
        return out


def _sending(side: Side, verb: str, objects: Sequence[Mapping[str, Any]]) -> Callable[[], list[Outcome]]:
    return lambda: side.send(verb, objects)


_T = TypeVar("_T")


def _both(first: Callable[[], _T], second: Callable[[], _T]) -> tuple[_T, _T]:
    """The two sides' calls at once (each its own API server and webhook): their results, in order; the
    first exception of either is raised."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        one, two = pool.submit(first), pool.submit(second)
        return one.result(), two.result()
