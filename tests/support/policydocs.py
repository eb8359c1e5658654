"""Builders for the policy tests: documents from YAML text (with positions) or from data."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from celkeeper.cel.api import (
    Activation,
    Binding,
    Engine,
    Outcome,
    Program,
    RequestInput,
    TemplateProgram,
    TemplateSource,
)
from celkeeper.documents import Document, parse_documents


def docs(text: str, name: str = "test.yaml") -> list[Document]:
    """The documents of a YAML text (dedented); the text must parse."""
    parsed = parse_documents(textwrap.dedent(text).lstrip("\n"), name)
    assert not parsed.errors, [str(e) for e in parsed.errors]
    return list(parsed.documents)


def doc(text: str, name: str = "test.yaml") -> Document:
    found = docs(text, name)
    assert len(found) == 1
    return found[0]


def template_data(
    kind: str,
    validations: list[dict[str, Any]],
    *,
    variables: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    failure_policy: str | None = None,
    schema: dict[str, Any] | None = None,
    operations: list[str] | None = None,
    api_version: str = "templates.gatekeeper.sh/v1",
) -> dict[str, Any]:
    source: dict[str, Any] = {"validations": validations}
    if variables is not None:
        source["variables"] = variables
    if conditions is not None:
        source["matchCondition"] = conditions
    if failure_policy is not None:
        source["failurePolicy"] = failure_policy
    target: dict[str, Any] = {
        "target": "admission.k8s.gatekeeper.sh",
        "code": [{"engine": "K8sNativeValidation", "source": source}],
    }
    if operations is not None:
        target["operations"] = operations
    crd_spec: dict[str, Any] = {"names": {"kind": kind}}
    if schema is not None:
        crd_spec["validation"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": api_version,
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {"crd": {"spec": crd_spec}, "targets": [target]},
    }


def template_doc(kind: str, validations: list[dict[str, Any]], **options: Any) -> Document:
    return Document.from_object(template_data(kind, validations, **options), file=f"{kind.lower()}.yaml")


def constraint_data(
    kind: str,
    name: str,
    *,
    parameters: Any = None,
    match: dict[str, Any] | None = None,
    action: str | None = None,
    scoped: list[dict[str, Any]] | None = None,
    api_version: str = "constraints.gatekeeper.sh/v1beta1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if match is not None:
        spec["match"] = match
    if parameters is not None:
        spec["parameters"] = parameters
    if action is not None:
        spec["enforcementAction"] = action
    if scoped is not None:
        spec["scopedEnforcementActions"] = scoped
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def constraint_doc(kind: str, name: str, **options: Any) -> Document:
    return Document.from_object(constraint_data(kind, name, **options), file=f"{name}.yaml")


def expansion_data(
    name: str,
    apply_to: Sequence[tuple[str, str, str]],
    generates: tuple[str, str, str] = ("", "v1", "Pod"),
    source: str = "spec.template",
    action: str | None = None,
) -> dict[str, Any]:
    """An ExpansionTemplate: objects of `apply_to` (group, version, kind) generate `generates` from the map
    at `source`; `action` is its enforcementAction override."""
    spec: dict[str, Any] = {
        "applyTo": [{"groups": [g], "versions": [v], "kinds": [k]} for g, v, k in apply_to],
        "templateSource": source,
        "generatedGVK": dict(zip(("group", "version", "kind"), generates, strict=True)),
    }
    if action is not None:
        spec["enforcementAction"] = action
    return {
        "apiVersion": "expansion.gatekeeper.sh/v1beta1",
        "kind": "ExpansionTemplate",
        "metadata": {"name": name},
        "spec": spec,
    }


def expansion_doc(name: str, *args: Any, **options: Any) -> Document:
    return Document.from_object(expansion_data(name, *args, **options), file=f"{name}.yaml")


def pod(
    name: str = "web",
    namespace: str | None = "default",
    labels: dict[str, str] | None = None,
    images: tuple[str, ...] = ("nginx:1.27",),
    **meta: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]},
    }


def admission_review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old: dict[str, Any] | None = None,
    uid: str = "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
    user: str = "alice",
    groups: tuple[str, ...] = ("system:authenticated",),
) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview as the API server sends it."""
    some = obj or old or {}
    group, _, version = str(some.get("apiVersion", "v1")).rpartition("/")
    kind = str(some.get("kind", "Pod"))
    meta = some.get("metadata", {})
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "name": meta.get("name", ""),
        "operation": operation,
        "userInfo": {"username": user, "uid": "u-1", "groups": list(groups)},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if meta.get("namespace"):
        request["namespace"] = meta["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class CountingEngine:
    """Our Engine interface around a real engine, counting template compiles and validate calls."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.compiled: list[TemplateSource] = []
        self.validated: list[int] = []  # the number of bindings of each validate call

    @property
    def name(self) -> str:
        return self.inner.name

    def compile_template(self, source: TemplateSource) -> TemplateProgram:
        self.compiled.append(source)
        return self.inner.compile_template(source)

    def bind(self, program: TemplateProgram, constraint: Mapping[str, Any]) -> Binding:
        return self.inner.bind(program, constraint)

    def validate(self, request: RequestInput, bindings: Sequence[Binding], timeout: float) -> list[Outcome]:
        self.validated.append(len(bindings))
        return self.inner.validate(request, bindings, timeout)

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program:
        return self.inner.compile(source, variables)

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any] | None,
        namespace_object: Any = None,
    ) -> Activation:
        return self.inner.activation(
            object=object, old_object=old_object, request=request, namespace_object=namespace_object
        )

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any:
        return self.inner.evaluate(program, activation, params, constraint)
