"""Objects and AdmissionReviews the corpus reviews: realistic Pods, custom resources with every JSON
type in one field, Namespaces, cluster-scoped objects, and requests of every operation."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.pods import container

LONG_VALUE = "x" * 6000


def pod(
    name: str = "web-1",
    namespace: str | None = "shop",
    *,
    containers: int = 2,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    body: dict[str, Any] = {
        "containers": [
            container(
                "web" if i == 0 else f"side-{i}",
                f"registry.example.com/shop/app-{i}:1.{i}.0",
                ports=[{"name": "http", "containerPort": 8080 + i, "protocol": "TCP"}],
            )
            for i in range(containers)
        ]
    }
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def realistic_pods() -> dict[str, dict[str, Any]]:
    """A few Pods as found in clusters: labelled, bare, privileged, with annotations."""
    labelled = pod(
        "web-7d9f8b6c5-x2x4k",
        labels={"app": "web", "owner": "shop-team", "tier": "frontend"},
        annotations={"pattern": "^web-.*$", "bad-pattern": "(", "long": LONG_VALUE, "n": "12"},
        serviceAccountName="web",
        securityContext={"runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        volumes=[{"name": "config", "configMap": {"name": "web-config"}}],
    )
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "shop"}, "spec": {}}
    bare["spec"]["containers"] = [{"name": "only", "image": "busybox"}]
    privileged = pod("priv", containers=3, labels={"app": "debug"})
    privileged["spec"]["containers"][1]["securityContext"] = {"privileged": True}
    privileged["spec"]["hostNetwork"] = True
    return {"labelled-pod": labelled, "bare-pod": bare, "privileged-pod": privileged}


def big_pod(count: int, name: str | None = None) -> dict[str, Any]:
    return pod(name or f"big-{count}", containers=count, labels={"app": "big"})


# every JSON type, in absent / null / empty / non-empty forms, in one field: spec.value
VALUE_STATES: dict[str, Any] = {
    "null": None,
    "empty-string": "",
    "blank-string": "  ",
    "string": "text",
    "numeric-string": "42",
    "zero": 0,
    "int": 5,
    "negative": -3,
    "zero-float": 0.0,
    "float": 1.5,
    "false": False,
    "true": True,
    "empty-list": [],
    "list": [1, 2],
    "list-of-strings": ["a", ""],
    "empty-map": {},
    "map": {"a": 1, "b": None},
}


def widgets() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    base = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "shop"}}
    absent = copy.deepcopy(base)
    absent["metadata"]["name"] = "absent"
    absent["spec"] = {"other": 1}
    out["absent"] = absent
    no_spec = copy.deepcopy(base)
    no_spec["metadata"]["name"] = "no-spec"
    out["no-spec"] = no_spec
    for state, value in VALUE_STATES.items():
        w = copy.deepcopy(base)
        w["metadata"]["name"] = state
        w["spec"] = {"value": value}
        out[state] = w
    return out


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def review(
    operation: str | None,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    kind: tuple[str, str, str] | None = None,
    resource: tuple[str, str, str] | None = None,
    sub_resource: str | None = None,
    name: str | None = None,
    namespace_name: str | None = None,
    user: str = "alice",
    groups: tuple[str, ...] = ("system:authenticated",),
    dry_run: bool | None = None,
    options: dict[str, Any] | None = None,
    version: str = "v1",
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it (request.kind/resource from the object unless given)."""
    subject = obj if obj is not None else old or {}
    group, _, ver = str(subject.get("apiVersion", "")).rpartition("/")
    k = kind or (group, ver, str(subject.get("kind", "")))
    request: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": k[0], "version": k[1], "kind": k[2]},
        "resource": dict(
            zip(("group", "version", "resource"), resource or (k[0], k[1], k[2].lower() + "s"), strict=True)
        ),
        "name": name if name is not None else subject.get("metadata", {}).get("name", ""),
        "namespace": namespace_name
        if namespace_name is not None
        else subject.get("metadata", {}).get("namespace", ""),
        "userInfo": {"username": user, "groups": list(groups)},
    }
    if operation is not None:
        request["operation"] = operation
    if sub_resource is not None:
        request["subResource"] = sub_resource
    if obj is not None:
        request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    if dry_run is not None:
        request["dryRun"] = dry_run
    if options is not None:
        request["options"] = options
    return {"apiVersion": f"admission.k8s.io/{version}", "kind": "AdmissionReview", "request": request}
