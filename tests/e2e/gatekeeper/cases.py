"""The generated cases of the mutation differential: rounds, each a set of Gatekeeper mutators and the
requests (CREATEs and UPDATEs) sent with them installed.

Every mutator kind in every version Gatekeeper serves; locations of every form (plain fields, list globs
`[name:*]`, keyed list elements `[name:main]`, whole keyed elements, quoted keys, nested lists); values,
`fromMetadata`, ModifySet merge/prune and its default, AssignImage domain/path/tag; pathTests MustExist
and MustNotExist; applyTo with other versions and with operations; match by kinds, scope, namespaces and
excludedNamespaces (globs), label and namespace selectors, name, source; several mutators on one field
(Gatekeeper's order decides), mutators that feed each other (iterations), schema conflicts, mutators
Gatekeeper refuses and mutators that fail on an object. `assignIf` does not exist in v3.23.1's API (its
CRDs reject it as an unknown field): the path tests are what guards an assignment there.

The same seed gives the same cases. Objects: Pods, Deployments, ConfigMaps, Namespaces and ClusterRoles
in namespaces with different labels, with fields already set or absent.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

#: objects carrying this label are created without mutation (the webhooks' objectSelector skips them):
#: the stored objects UPDATE cases start from
UNMUTATED = "celkeeper.test/unmutated"
ROUND_LABEL = "celkeeper.test/round"

#: namespace -> labels; created once on each API server before any mutator exists
NAMESPACES: dict[str, dict[str, str]] = {
    "team-a": {"team": "a", "env": "prod"},
    "team-b": {"team": "b", "env": "dev"},
    "sandbox-1": {"env": "dev", "sandbox": "true"},
    "excluded-1": {"env": "prod"},
}
#: the Config's exclusion (Gatekeeper's process excluder, mutation-webhook process)
EXCLUDED = ["excluded-*"]

POD = ("", "v1", "Pod")
DEPLOYMENT = ("apps", "v1", "Deployment")
CONFIGMAP = ("", "v1", "ConfigMap")
NAMESPACE = ("", "v1", "Namespace")
CLUSTERROLE = ("rbac.authorization.k8s.io", "v1", "ClusterRole")

VERSIONS = ("v1", "v1beta1", "v1alpha1")
IMAGES = (
    "nginx",
    "nginx:1.25",
    "docker.io/library/nginx:1.25",
    "registry.example.com:5000/team/app:v1",
    "gcr.io/proj/app@sha256:" + "a" * 64,
    "localhost/app",
)


@dataclass
class Round:
    """Mutators installed together, and the requests sent while they are."""

    name: str
    mutators: list[dict[str, Any]]
    creates: list[dict[str, Any]] = field(default_factory=list)
    # (the object stored first, unmutated; the object the UPDATE sends)
    updates: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    annotations: bool = False

    @property
    def cases(self) -> int:
        return len(self.creates) + len(self.updates)


def apply_to(gvk: tuple[str, str, str], rng: random.Random) -> list[dict[str, Any]]:
    group, version, kind = gvk
    entry: dict[str, Any] = {"groups": [group], "versions": [version], "kinds": [kind]}
    roll = rng.random()
    if roll < 0.15:
        entry["versions"] = [version, "v2"]
    elif roll < 0.25:
        entry["operations"] = [rng.choice(["CREATE", "UPDATE"])]
    elif roll < 0.3:
        entry["versions"] = ["v1beta9"]  # applies to no version requested: never mutates
    return [entry]


def match(rng: random.Random, gvk: tuple[str, str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if gvk is not None and rng.random() < 0.3:
        out["kinds"] = [{"apiGroups": [gvk[0]], "kinds": [gvk[2]]}]
    roll = rng.random()
    if roll < 0.12:
        out["namespaces"] = [rng.choice(["team-*", "team-a", "*-1", "default"])]
    elif roll < 0.22:
        out["excludedNamespaces"] = [rng.choice(["sandbox-*", "team-b", "default"])]
    if rng.random() < 0.15:
        out["labelSelector"] = {"matchLabels": {"app": rng.choice(["web", "db"])}}
    if rng.random() < 0.15:
        selector = rng.choice(
            [
                {"matchLabels": {"env": "prod"}},
                {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
                {"matchExpressions": [{"key": "sandbox", "operator": "DoesNotExist"}]},
            ]
        )
        out["namespaceSelector"] = selector
    if rng.random() < 0.1:
        out["scope"] = rng.choice(["Namespaced", "Cluster", "*"])
    if rng.random() < 0.1:
        out["source"] = rng.choice(["All", "Original", "Generated"])
    if rng.random() < 0.08:
        out["name"] = rng.choice(["web-*", "*-2", "db-1"])
    return out


def path_tests(location: str, rng: random.Random) -> list[dict[str, str]]:
    if rng.random() > 0.3:
        return []
    # a prefix of the location (cut at a dot outside brackets) or the location itself
    cuts = [
        i
        for i, c in enumerate(location)
        if c == "." and location.count("[", 0, i) == location.count("]", 0, i)
    ]
    sub = location[: rng.choice(cuts)] if cuts and rng.random() < 0.5 else location
    return [{"subPath": sub, "condition": rng.choice(["MustExist", "MustNotExist"])}]


# (gvk, location, value makers) of Assign
ASSIGN_TARGETS: list[tuple[tuple[str, str, str], str, list[Any]]] = [
    (POD, "spec.containers[name:*].imagePullPolicy", ["Always", "IfNotPresent", "Never"]),
    (POD, "spec.containers[name:main].imagePullPolicy", ["Always", "Never"]),
    (POD, 'spec.containers[name:"sidecar"].securityContext.runAsNonRoot', [True, False]),
    (POD, "spec.containers[name:*].securityContext.allowPrivilegeEscalation", [False]),
    (POD, "spec.securityContext.runAsUser", [1000, 2000]),
    (POD, "spec.dnsPolicy", ["Default", "ClusterFirst"]),
    (POD, "spec.containers[name:*].resources.limits.memory", ["128Mi", "1Gi"]),
    (POD, "spec.tolerations", [[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]]),
    (
        POD,
        "spec.containers[name:extra]",
        [{"name": "extra", "image": "busybox:1.36", "args": ["sleep", "1"]}],
    ),
    (POD, "spec.initContainers[name:*].imagePullPolicy", ["Always"]),
    (POD, "spec.priorityClassName", ["{namespace}", "{name}"]),
    (DEPLOYMENT, "spec.template.spec.containers[name:*].imagePullPolicy", ["Always", "IfNotPresent"]),
    (DEPLOYMENT, "spec.replicas", [3, 1]),
    (DEPLOYMENT, "spec.template.spec.securityContext.runAsNonRoot", [True]),
    (DEPLOYMENT, "spec.template.metadata.labels.mutated", ["yes"]),
    (CONFIGMAP, "data.added", ["x", "y"]),
    (CONFIGMAP, "data.color", ["blue", "{name}"]),
    (NAMESPACE, "spec.finalizers", [["kubernetes"]]),
    (CLUSTERROLE, "rules[apiGroups:*].verbs", [["get"]]),
]
# conflicting shapes: the same fields read as a map where others read a list
CONFLICTING_TARGETS: list[tuple[tuple[str, str, str], str, Any]] = [
    (POD, "spec.containers.main.imagePullPolicy", "Never"),
    (DEPLOYMENT, "spec.template.spec.containers.main.image", "nginx"),
    (CONFIGMAP, "data.added.nested", "z"),
]
MODIFYSET_TARGETS: list[tuple[tuple[str, str, str], str, list[list[Any]]]] = [
    (POD, "spec.containers[name:*].args", [["--verbose"], ["--log=json", "--port=80"]]),
    (POD, "spec.containers[name:main].command", [["/bin/sh"]]),
    (POD, "spec.imagePullSecrets", [[{"name": "regcred"}]]),
    (DEPLOYMENT, "spec.template.spec.containers[name:*].args", [["--verbose"]]),
    (CLUSTERROLE, "rules[apiGroups:*].verbs", [["list", "watch"], ["get"]]),
]
IMAGE_TARGETS: list[tuple[tuple[str, str, str], str]] = [
    (POD, "spec.containers[name:*].image"),
    (POD, "spec.containers[name:main].image"),
    (POD, "spec.initContainers[name:*].image"),
    (DEPLOYMENT, "spec.template.spec.containers[name:*].image"),
    (POD, "spec.containers[name:*].resources"),  # not a string: the mutation fails
]
METADATA_LOCATIONS = (
    "metadata.labels.owner",
    "metadata.labels.team",
    "metadata.annotations.note",
    "metadata.labels.app",
)


def api_version(kind: str, rng: random.Random) -> str:
    version = "v1alpha1" if kind == "AssignImage" else rng.choice(VERSIONS)
    return f"mutations.gatekeeper.sh/{version}"


def assign(name: str, rng: random.Random) -> dict[str, Any]:
    gvk, location, values = rng.choice(ASSIGN_TARGETS)
    value = rng.choice(values)
    parameters: dict[str, Any] = {}
    if isinstance(value, str) and value.startswith("{"):
        parameters["assign"] = {"fromMetadata": {"field": value.strip("{}")}}
    else:
        parameters["assign"] = {"value": copy.deepcopy(value)}
    tests = path_tests(location, rng)
    if tests:
        parameters["pathTests"] = tests
    return mutator("Assign", name, rng, gvk, location, parameters)


def conflicting(name: str, rng: random.Random) -> dict[str, Any]:
    gvk, location, value = rng.choice(CONFLICTING_TARGETS)
    return mutator("Assign", name, rng, gvk, location, {"assign": {"value": value}})


def modify_set(name: str, rng: random.Random) -> dict[str, Any]:
    gvk, location, values = rng.choice(MODIFYSET_TARGETS)
    parameters: dict[str, Any] = {"values": {"fromList": copy.deepcopy(rng.choice(values))}}
    operation = rng.choice([None, "merge", "prune"])
    if operation is not None:
        parameters["operation"] = operation
    tests = path_tests(location, rng)
    if tests:
        parameters["pathTests"] = tests
    return mutator("ModifySet", name, rng, gvk, location, parameters)


def assign_image(name: str, rng: random.Random) -> dict[str, Any]:
    gvk, location = rng.choice(IMAGE_TARGETS)
    parameters: dict[str, Any] = {}
    choices = {
        "assignDomain": ["registry.example.com", "mirror.local:5000", "localhost"],
        "assignPath": ["team/app", "library/nginx", "mirror"],
        "assignTag": [":v2", ":latest", "@sha256:" + "b" * 64],
    }
    for key, options in choices.items():
        if rng.random() < 0.6:
            parameters[key] = rng.choice(options)
    if not parameters:
        parameters["assignTag"] = ":v9"
    tests = path_tests(location, rng)
    if tests:
        parameters["pathTests"] = tests
    return mutator("AssignImage", name, rng, gvk, location, parameters)


def assign_metadata(name: str, rng: random.Random) -> dict[str, Any]:
    location = rng.choice(METADATA_LOCATIONS)
    roll = rng.random()
    if roll < 0.25:
        assigned: dict[str, Any] = {"fromMetadata": {"field": rng.choice(["namespace", "name"])}}
    elif roll < 0.3:
        assigned = {"value": 7}  # not a string: Gatekeeper refuses the mutator
    else:
        assigned = {"value": rng.choice(["platform", "web", "checked"])}
    doc = {
        "apiVersion": api_version("AssignMetadata", rng),
        "kind": "AssignMetadata",
        "metadata": {"name": name},
        "spec": {"match": match(rng, None), "location": location, "parameters": {"assign": assigned}},
    }
    if not doc["spec"]["match"]:
        del doc["spec"]["match"]
    return doc


def mutator(
    kind: str,
    name: str,
    rng: random.Random,
    gvk: tuple[str, str, str],
    location: str,
    parameters: dict[str, Any],
) -> dict[str, Any]:
    spec: dict[str, Any] = {"applyTo": apply_to(gvk, rng), "location": location, "parameters": parameters}
    found = match(rng, gvk)
    if found:
        spec["match"] = found
    return {"apiVersion": api_version(kind, rng), "kind": kind, "metadata": {"name": name}, "spec": spec}


def probe(round_name: str) -> dict[str, Any]:
    """The mutator that says a round's mutators are in place: it labels the Secret `probe` (a kind only
    AssignMetadata mutators of the rounds touch, so none makes the probe invalid)."""
    return {
        "apiVersion": "mutations.gatekeeper.sh/v1",
        "kind": "AssignMetadata",
        "metadata": {"name": f"{round_name}-probe"},
        "spec": {
            "match": {"name": "probe", "kinds": [{"apiGroups": [""], "kinds": ["Secret"]}]},
            "location": f'metadata.labels."{ROUND_LABEL}"',
            "parameters": {"assign": {"value": round_name}},
        },
    }


def probe_object() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "probe", "namespace": "default"}}


# -- objects ---------------------------------------------------------------------------------------------


def containers(rng: random.Random) -> list[dict[str, Any]]:
    names = ["main", *rng.sample(["sidecar", "extra", "helper"], rng.randint(0, 2))]
    out = []
    for name in names:
        c: dict[str, Any] = {"name": name, "image": rng.choice(IMAGES)}
        if rng.random() < 0.3:
            c["imagePullPolicy"] = rng.choice(["Always", "IfNotPresent"])
        if rng.random() < 0.2:
            c["args"] = rng.choice([["--verbose"], ["--port=80", "--verbose"], []])
        if rng.random() < 0.15:
            c["securityContext"] = {"runAsNonRoot": rng.choice([True, False])}
        if rng.random() < 0.15:
            c["resources"] = {"limits": {"memory": "64Mi"}}
        out.append(c)
    return out


def labels(rng: random.Random) -> dict[str, str]:
    out = {}
    if rng.random() < 0.6:
        out["app"] = rng.choice(["web", "db"])
    if rng.random() < 0.2:
        out["owner"] = "someone"
    return out


def pod(name: str, namespace: str, rng: random.Random) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers(rng)}
    if rng.random() < 0.2:
        spec["initContainers"] = [{"name": "init", "image": rng.choice(IMAGES)}]
    if rng.random() < 0.2:
        spec["securityContext"] = {"runAsUser": 500}
    if rng.random() < 0.15:
        spec["dnsPolicy"] = "ClusterFirst"
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels(rng)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def deployment(name: str, namespace: str, rng: random.Random) -> dict[str, Any]:
    selector = {"app": name}
    template_spec: dict[str, Any] = {"containers": containers(rng)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(rng)},
        "spec": {
            "replicas": rng.choice([1, 2]),
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": dict(selector)}, "spec": template_spec},
        },
    }


def configmap(name: str, namespace: str, rng: random.Random) -> dict[str, Any]:
    data = {"color": rng.choice(["red", "green"])} if rng.random() < 0.6 else {}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels(rng)},
        "data": data,
    }


def namespace(name: str, rng: random.Random) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels(rng)}}


def clusterrole(name: str, rng: random.Random) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": rng.choice([["get"], ["get", "list"]])}]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels(rng)},
        "rules": rules,
    }


def some_object(name: str, rng: random.Random) -> dict[str, Any]:
    ns = rng.choice([*NAMESPACES, "default"])
    maker = rng.choices(
        ["pod", "deployment", "configmap", "namespace", "clusterrole"], weights=[5, 3, 2, 1, 1]
    )[0]
    if maker == "pod":
        return pod(name, ns, rng)
    if maker == "deployment":
        return deployment(name, ns, rng)
    if maker == "configmap":
        return configmap(name, ns, rng)
    if maker == "namespace":
        return namespace(name, rng)
    return clusterrole(name, rng)


def updated(base: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """What an UPDATE sends: the stored object without the label that kept it unmutated, changed."""
    obj = copy.deepcopy(base)
    obj["metadata"]["labels"].pop(UNMUTATED, None)
    obj["metadata"].setdefault("annotations", {})["revision"] = str(rng.randint(2, 9))
    if obj["kind"] == "ConfigMap":
        obj["data"]["color"] = rng.choice(["red", "blue"])
    elif obj["kind"] == "Deployment":
        obj["spec"]["replicas"] = rng.choice([1, 2, 4])
    return obj


def updatable(name: str, rng: random.Random) -> dict[str, Any]:
    """An object whose UPDATEs the API server accepts with the mutators' changes (not a Pod: its spec
    is immutable; the API server would refuse both sides alike, which tells little)."""
    ns = rng.choice([*NAMESPACES, "default"])
    maker = rng.choice(["deployment", "deployment", "configmap", "clusterrole", "namespace"])
    if maker == "deployment":
        obj = deployment(name, ns, rng)
    elif maker == "configmap":
        obj = configmap(name, ns, rng)
    elif maker == "namespace":
        obj = namespace(name, rng)
    else:
        obj = clusterrole(name, rng)
    obj["metadata"]["labels"][UNMUTATED] = "true"
    return obj


MAKERS = [(assign, 5), (modify_set, 3), (assign_image, 2), (assign_metadata, 3)]


def rounds(seed: int, count: int, creates: int, updates: int, annotated: int = 2) -> list[Round]:
    """`count` rounds of mutators, each with `creates` CREATEs and `updates` UPDATEs; the last
    `annotated` with Gatekeeper's --mutation-annotations."""
    rng = random.Random(seed)
    out = []
    for number in range(count):
        name = f"r{number:02d}"
        docs = [probe(name)]
        for i in range(rng.randint(4, 9)):
            maker = rng.choices([m for m, _ in MAKERS], weights=[w for _, w in MAKERS])[0]
            docs.append(maker(f"{name}-m{i}", rng))
        if rng.random() < 0.3:
            docs.append(conflicting(f"{name}-conflict", rng))
        r = Round(name, docs, annotations=number >= count - annotated)
        for i in range(creates):
            r.creates.append(some_object(f"{name}-c{i}", rng))
        for i in range(updates):
            base = updatable(f"{name}-u{i}", rng)
            r.updates.append((base, updated(base, rng)))
        out.append(r)
    return out


# -- apply time: mutators Gatekeeper's validating webhook (or the API server, with its CRDs) refuses ------

#: (what, a change of a generated mutator's document) - each may make it invalid, or leave it valid
CORRUPTIONS: list[tuple[str, Any]] = [
    ("location syntax", lambda d: d["spec"].__setitem__("location", d["spec"]["location"] + "[")),
    ("location unclosed key", lambda d: d["spec"].__setitem__("location", "spec.containers[name:*")),
    ("location empty", lambda d: d["spec"].__setitem__("location", "")),
    ("metadata root", lambda d: d["spec"].__setitem__("location", "metadata.labels.x")),
    ("spec root", lambda d: d["spec"].__setitem__("location", "spec.team")),
    ("a key changed", lambda d: d["spec"].__setitem__("location", "spec.containers[name:main].name")),
    ("a glob list terminal", lambda d: d["spec"].__setitem__("location", "spec.containers[name:*]")),
    ("a keyed list terminal", lambda d: d["spec"].__setitem__("location", "spec.containers[name:main]")),
    (
        "pathTests not a prefix",
        lambda d: (
            d["spec"]
            .setdefault("parameters", {})
            .__setitem__("pathTests", [{"subPath": "status.phase", "condition": "MustExist"}])
        ),
    ),
    (
        "pathTests bad condition",
        lambda d: (
            d["spec"]
            .setdefault("parameters", {})
            .__setitem__("pathTests", [{"subPath": "spec", "condition": "Sometimes"}])
        ),
    ),
    ("no applyTo", lambda d: d["spec"].pop("applyTo", None)),
    (
        "applyTo without versions",
        lambda d: d["spec"].__setitem__("applyTo", [{"groups": [""], "kinds": ["Pod"]}]),
    ),
    (
        "applyTo operation DELETE",
        lambda d: d["spec"].__setitem__(
            "applyTo", [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"], "operations": ["DELETE"]}]
        ),
    ),
    ("match source", lambda d: d["spec"].setdefault("match", {}).__setitem__("source", "Elsewhere")),
    ("match scope", lambda d: d["spec"].setdefault("match", {}).__setitem__("scope", "Everywhere")),
    ("a long name", lambda d: d["metadata"].__setitem__("name", "n" * 64)),
    ("a name with capitals", lambda d: d["metadata"].__setitem__("name", "Upper")),
    (
        "a value of the wrong type",
        lambda d: (
            d["spec"]
            .setdefault("parameters", {})
            .setdefault("assign", {})
            .__setitem__("value", {"not": "a string"})
        ),
    ),
    (
        "fromMetadata field",
        lambda d: (
            d["spec"].setdefault("parameters", {}).__setitem__("assign", {"fromMetadata": {"field": "uid"}})
        ),
    ),
    (
        "value and fromMetadata",
        lambda d: (
            d["spec"]
            .setdefault("parameters", {})
            .__setitem__("assign", {"value": "x", "fromMetadata": {"field": "name"}})
        ),
    ),
    ("no value", lambda d: d["spec"].setdefault("parameters", {}).__setitem__("assign", {})),
    (
        "an object to a keyed list, other key",
        lambda d: (
            d["spec"].__setitem__("location", "spec.containers[name:a]"),
            d["spec"].setdefault("parameters", {}).__setitem__("assign", {"value": {"name": "b"}}),
        ),
    ),
    (
        "ModifySet operation",
        lambda d: d["spec"].setdefault("parameters", {}).__setitem__("operation", "replace"),
    ),
    ("image tag", lambda d: d["spec"].setdefault("parameters", {}).__setitem__("assignTag", "v2")),
    (
        "image domain with a tag",
        lambda d: (
            d["spec"].setdefault("parameters", {}).__setitem__("assignDomain", "registry.example.com:v1")
        ),
    ),
    (
        "image path like a domain",
        lambda d: (
            d["spec"].setdefault("parameters", {}).__setitem__("assignPath", "registry.example.com/app")
        ),
    ),
    (
        "image path with a tag",
        lambda d: d["spec"].setdefault("parameters", {}).__setitem__("assignPath", "app:v1"),
    ),
    ("nothing", lambda d: None),
]


def apply_time_mutators(seed: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` mutator documents, each a generated mutator with one change (or none), named uniquely."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        maker = rng.choices([m for m, _ in MAKERS], weights=[w for _, w in MAKERS])[0]
        doc = maker(f"v{i:03d}", rng)
        what, change = CORRUPTIONS[i % len(CORRUPTIONS)]
        change(doc)
        out.append((what, doc))
    return out
