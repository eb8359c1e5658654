"""The mutation differential's two sides: two real API servers, one calling Gatekeeper's mutation webhook
(its manager, `--operation=mutation-webhook`, out of cluster), the other celkeeper's (review.mutate
behind tests/support/mutationserver.py), each registered as Gatekeeper's chart registers its webhook.

A round installs its mutators on Gatekeeper's API server (Gatekeeper's controllers load them; the
MutatorPodStatuses say when) and gives the same documents to celkeeper's server, then sends the same
requests to both API servers with kubectl - CREATEs as `kubectl create --dry-run=server -o json`, UPDATEs
of objects stored unmutated as `kubectl replace --dry-run=server -o json` - in one kubectl call per batch,
and keeps what each API server would store (or its error), normalised only where two API servers must
differ: uid, creationTimestamp, resourceVersion, managedFields' times, and the random mutation id
(annotation and error messages).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celkeeper.documents import Document
from celkeeper.mutation import MutationOptions, build_mutator_set
from tests.e2e.gatekeeper import cases
from tests.support.apiserver import ControlPlane
from tests.support.gatekeeper import (
    NAMESPACE,
    SERVICE_ACCOUNT,
    GatekeeperManager,
    install_crds,
    mutating_webhook,
)
from tests.support.mutationserver import MutationServer
from tests.support.waiting import wait_for

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
    """Both sides, set up: Gatekeeper's CRDs and Config, the namespaces, the webhooks."""

    def __init__(self, manager_binary: Path, workdir: Path, binaries: Any) -> None:
        self.workdir = workdir
        self.gatekeeper_cluster = ControlPlane(workdir / "gatekeeper-kube", binaries)
        self.celkeeper_cluster = ControlPlane(workdir / "celkeeper-kube", binaries)
        self.manager_binary = manager_binary
        self.manager: GatekeeperManager | None = None
        self.server: MutationServer | None = None
        self.annotations = False
        self.previous: list[Mapping[str, Any]] = []

    def start(self) -> None:
        gk, ck = self.gatekeeper_cluster, self.celkeeper_cluster
        gk.start()
        ck.start()
        install_crds(gk)
        gk.kubectl("create", "namespace", NAMESPACE)
        gk.kubectl("create", "-f", "-", input=CONFIG)
        self.gatekeeper = Side("gatekeeper", gk)
        self.celkeeper = Side("celkeeper", ck)
        self.gatekeeper.create_namespaces()
        self.celkeeper.create_namespaces()
        self.manager = GatekeeperManager(self.manager_binary, gk, self.workdir / "gatekeeper")
        self.manager.start()
        self.server = MutationServer(self._namespace).__enter__()
        self.gatekeeper.register(self.manager.url, self.manager.ca_pem)
        self.celkeeper.register(self.server.url, self.server.ca_pem)

    def stop(self) -> None:
        if self.server is not None:
            self.server.__exit__(None, None, None)
        if self.manager is not None:
            self.manager.stop()
        self.gatekeeper_cluster.stop()
        self.celkeeper_cluster.stop()

    def served(self) -> int:
        """How many requests celkeeper's webhook answered."""
        return self.server.requests if self.server is not None else 0

    def _namespace(self, name: str) -> Mapping[str, Any] | None:
        """The Namespace as celkeeper's API server has it (Gatekeeper reads its own the same way)."""
        status, body = self.celkeeper_cluster.request(f"/api/v1/namespaces/{name}")
        if status == 404:
            return None
        if status != 200:
            raise RuntimeError(f"reading namespace {name}: {status} {body}")
        found: Mapping[str, Any] = json.loads(body)
        return found

    def options(self, annotations: bool) -> MutationOptions:
        return MutationOptions(
            annotations=annotations, self_username=SERVICE_ACCOUNT, exclusions=(CONFIG["spec"]["match"][0],)
        )

    def clear(self, annotations: bool) -> None:
        """No mutator on either side (Gatekeeper's manager restarted when the annotations flag changes)."""
        assert self.manager is not None and self.server is not None
        self.gatekeeper_cluster.kubectl("delete", MUTATOR_RESOURCES, "--all", "--wait=true", timeout=120)
        self.manager.wait_mutators({})
        if annotations != self.annotations:
            args = ["--operation=mutation-webhook"] + (["--mutation-annotations"] if annotations else [])
            self.manager.restart(args)
            self.annotations = annotations
        self.server.mutators = build_mutator_set([], self.options(annotations))

    def install(self, round_: cases.Round) -> None:
        """Install the round's mutators on both sides; wait until both webhooks answer with them."""
        assert self.manager is not None and self.server is not None
        self.gatekeeper_cluster.kubectl("create", "-f", "-", input=round_.mutators, timeout=120)
        self.manager.wait_mutators({(m["kind"], m["metadata"]["name"]): 1 for m in round_.mutators})
        self.server.mutators = build_mutator_set(
            [Document.from_object(m, f"{round_.name}.yaml", i + 1) for i, m in enumerate(round_.mutators)],
            self.options(round_.annotations),
        )
        for side in (self.gatekeeper, self.celkeeper):
            wait_for(
                lambda s=side: s.probe() == round_.name, timeout=60, what=f"{side.name} at {round_.name}"
            )

    def run(self, round_: cases.Round) -> list[Case]:
        """The round's requests without mutators (Gatekeeper's side: the baseline), then on both sides
        with the round's mutators."""
        self.clear(round_.annotations)
        bases = [base for base, _ in round_.updates]
        self.gatekeeper.store(bases)
        self.celkeeper.store(bases)
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
            theirs = self.gatekeeper.send(verb, objects)
            ours = self.celkeeper.send(verb, objects)
            for obj, b, g, c in zip(objects, baseline[verb], theirs, ours, strict=True):
                out.append(Case(round_.name, operation, _key(obj), obj, b, g, c))
        return out
