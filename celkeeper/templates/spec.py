"""Reading a ConstraintTemplate document into a TemplateSpec, with every structural problem located.

Accepted: Gatekeeper's `templates.gatekeeper.sh/v1` (and v1beta1, v1alpha1) and celkeeper's
`templates.celkeeper.io/v1`, kind ConstraintTemplate, unchanged. The rules follow Gatekeeper
(frameworks crds/validate.go and client.go, gatekeeper pkg/drivers/k8scel/schema/schema.go):
exactly one target `admission.k8s.gatekeeper.sh`, metadata.name equal to the lowercase of
spec.crd.spec.names.kind, a `K8sNativeValidation` code entry, no `gatekeeper_internal_` names, no
user variables named `params` or `anyObject`, failurePolicy Fail or Ignore. Where Gatekeeper silently
accepts a mistake (unknown keys such as the plural `matchConditions`, no validations, odd variable
names) the template loads as in Gatekeeper and the mistake is a warning (TemplateSpec.warnings).

No CEL here: compiling is templates.compiler's job.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.inventory import SYNC_ANNOTATION, Requirement, RequirementsError, parse_requirements
from celkeeper.documents import Document, field_path, index_path, key_path
from celkeeper.errors import TemplateError, TemplateWarning
from celkeeper.model import FailurePolicy, JsonObject
from celkeeper.templates.celsource import (
    NamedExpression,
    Problems,
    ValidationSpec,
    read_source,
    string_list,
)
from celkeeper.templates.parameters import ParameterSchema, SchemaProblem, Verdicts

KIND = "ConstraintTemplate"
GATEKEEPER_GROUP = "templates.gatekeeper.sh"
CELKEEPER_GROUP = "templates.celkeeper.io"
VERSIONS = {GATEKEEPER_GROUP: ("v1", "v1beta1", "v1alpha1"), CELKEEPER_GROUP: ("v1",)}
TARGET = "admission.k8s.gatekeeper.sh"
ENGINE = "K8sNativeValidation"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
# a CRD kind "may have mixed case, but should otherwise match" a DNS-1035 label
_KIND = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def is_template(document: Document) -> bool:
    """Whether the document is a ConstraintTemplate of an API group celkeeper reads."""
    return document.kind == KIND and document.group in VERSIONS


@dataclass(frozen=True, eq=False)
class TemplateSpec:
    """A structurally valid template, not compiled yet."""

    name: str
    kind: str
    document: Document
    source_path: str  # spec.targets[0].code[i].source
    source: JsonObject  # the K8sNativeValidation source as written
    validations: tuple[ValidationSpec, ...]
    variables: tuple[NamedExpression, ...]
    match_conditions: tuple[NamedExpression, ...]
    failure_policy: FailurePolicy
    operations: frozenset[str] | None  # None: every operation
    parameters: ParameterSchema
    code_hash: str  # content hash of everything compiling depends on
    # the synced data it reads (Gatekeeper's requires-sync-data annotation; celkeeper gives such a
    # template `data`): each requirement met by any of its kinds
    requirements: tuple[Requirement, ...] = ()
    # what Gatekeeper accepts silently (see the module doc), and a malformed requires-sync-data
    # annotation (read as Gatekeeper reads it, i.e. no data): problems that do not refuse the template
    warnings: tuple[TemplateWarning, ...] = ()


def parse_template(
    document: Document, verdicts: Verdicts | None = None
) -> tuple[TemplateSpec | None, list[TemplateError]]:
    """Read and check a ConstraintTemplate document; the spec is None when anything is wrong.
    `verdicts`: known results of the parameter schema's checks (templates.parameters.Verdicts)."""
    data = document.data if isinstance(document.data, dict) else {}
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    problems = Problems(document, name if isinstance(name, str) else "")

    group, _, version = document.api_version.rpartition("/")
    if document.kind != KIND or group not in VERSIONS or version not in VERSIONS[group]:
        problems.add(
            f"unsupported apiVersion {document.api_version!r} for a ConstraintTemplate; use "
            f"{GATEKEEPER_GROUP}/v1 or {CELKEEPER_GROUP}/v1",
            "apiVersion",
        )
        return None, problems.errors
    if not isinstance(name, str) or not name:
        problems.add("metadata.name is required", "metadata.name")
    spec = data.get("spec")
    if not isinstance(spec, dict):
        problems.add("spec is required and must be a map", "spec")
        return None, problems.errors

    kind = _kind(spec, name, problems)
    parameters = _parameters(spec, version, problems, verdicts)
    target_path, target = _target(spec, problems)
    operations = _operations(target, target_path, problems) if target is not None else None
    source_path, source = _source(target, target_path, problems) if target is not None else ("", None)
    if source is None:
        return None, problems.errors

    read = read_source(source, source_path, problems)
    failure_policy = read.failure_policy

    if problems.errors or kind is None or parameters is None or failure_policy is None:
        return None, sorted(problems.errors, key=lambda e: (e.location.line or 0, e.location.column or 0))
    requirements, warnings = _requirements(document, meta, str(name))
    code_hash = hashlib.sha256(
        json.dumps(
            [source_path, source, [sorted(map(str, r)) for r in requirements]], sort_keys=True, default=str
        ).encode()
    ).hexdigest()
    return TemplateSpec(
        name=str(name),
        kind=kind,
        document=document,
        source_path=source_path,
        source=source,
        validations=read.validations,
        variables=read.variables,
        match_conditions=read.match_conditions,
        failure_policy=failure_policy,
        operations=operations,
        parameters=parameters,
        code_hash=code_hash,
        requirements=requirements,
        warnings=(*problems.warnings, *warnings),
    ), []


def _requirements(
    document: Document, meta: Any, name: str
) -> tuple[tuple[Requirement, ...], tuple[TemplateWarning, ...]]:
    """The synced data a template declares (celkeeper.cel.inventory). A malformed annotation is a
    problem of the template, which is then loaded as Gatekeeper loads it: without data."""
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    text = annotations.get(SYNC_ANNOTATION) if isinstance(annotations, dict) else None
    if text is None:
        return (), ()
    path = key_path(key_path("metadata", "annotations"), SYNC_ANNOTATION)
    if not isinstance(text, str):
        problem = "must be a string"
    else:
        try:
            return parse_requirements(text), ()
        except RequirementsError as err:
            problem = str(err)
    error = document.error(
        TemplateWarning,
        f"template {name}: annotation {SYNC_ANNOTATION} is not Gatekeeper's requires-sync-data format "
        f"({problem}); the template reads no synced data",
        path,
    )
    return (), (error,)


def _kind(spec: JsonObject, name: Any, problems: Problems) -> str | None:
    path = "spec.crd.spec.names.kind"
    crd = spec.get("crd")
    crd_spec = crd.get("spec") if isinstance(crd, dict) else None
    names = crd_spec.get("names") if isinstance(crd_spec, dict) else None
    kind = names.get("kind") if isinstance(names, dict) else None
    if not isinstance(kind, str) or not kind:
        problems.add("spec.crd.spec.names.kind is required", path)
        return None
    if not _KIND.match(kind.lower()) or len(kind) > 63:
        problems.add(f"kind {kind!r} is not a valid kind (letters and digits, starting with a letter)", path)
        return None
    if isinstance(name, str) and name and name != kind.lower():
        problems.add(
            f"metadata.name {name!r} must be the lowercase of spec.crd.spec.names.kind "
            f"{kind!r}: {kind.lower()!r}",
            "metadata.name",
        )
    return kind


def _parameters(
    spec: JsonObject, version: str, problems: Problems, verdicts: Verdicts | None
) -> ParameterSchema | None:
    path = "spec.crd.spec.validation"
    crd = spec.get("crd")
    crd_spec = crd.get("spec") if isinstance(crd, dict) else None
    validation = crd_spec.get("validation") if isinstance(crd_spec, dict) else None
    if validation is None:
        return ParameterSchema(None, legacy=False)
    if not isinstance(validation, dict):
        problems.add("spec.crd.spec.validation must be a map", path)
        return None
    legacy = validation.get("legacySchema", version != "v1")
    if not isinstance(legacy, bool):
        problems.add("legacySchema must be true or false", key_path(path, "legacySchema"))
        return None
    schema = validation.get("openAPIV3Schema")
    schema_path = key_path(path, "openAPIV3Schema")
    try:
        return ParameterSchema(schema, legacy=legacy, verdicts=verdicts)
    except SchemaProblem as err:
        where = (
            f"{schema_path}.{err.path}"
            if err.path and not err.path.startswith("[")
            else schema_path + err.path
        )
        problems.add(f"invalid parameter schema: {err.message}", where)
        return None


def _target(spec: JsonObject, problems: Problems) -> tuple[str, JsonObject | None]:
    targets = spec.get("targets")
    if targets is None:
        problems.add('field "targets" not specified in ConstraintTemplate spec', "spec.targets")
        return "", None
    if not isinstance(targets, list):
        problems.add("spec.targets must be a list", "spec.targets")
        return "", None
    if len(targets) != 1:
        problems.add(
            "no targets specified: ConstraintTemplate must specify one target"
            if not targets
            else "multi-target templates are not supported: give exactly one target",
            "spec.targets",
        )
        return "", None
    path = field_path("spec", "targets", 0)
    target = targets[0]
    if not isinstance(target, dict):
        problems.add("a target must be a map", path)
        return path, None
    if target.get("target") != TARGET:
        problems.add(f"target must be {TARGET!r}, not {target.get('target')!r}", key_path(path, "target"))
    return path, target


def _operations(target: JsonObject, path: str, problems: Problems) -> frozenset[str] | None:
    operations = target.get("operations")
    if operations is None or operations == []:
        return None
    where = key_path(path, "operations")
    if not string_list(operations):
        problems.add("operations must be a list of CREATE, UPDATE, DELETE, CONNECT or *", where)
        return None
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            problems.add(
                f"unknown operation {op!r}: use CREATE, UPDATE, DELETE, CONNECT or *", index_path(where, i)
            )
    return None if "*" in operations else frozenset(operations)


def _source(target: JsonObject, path: str, problems: Problems) -> tuple[str, JsonObject | None]:
    code = target.get("code")
    code_path = key_path(path, "code")
    entries = code if isinstance(code, list) else []
    if code is not None and not isinstance(code, list):
        problems.add("code must be a list", code_path)
        return "", None
    found = [
        i for i, entry in enumerate(entries) if isinstance(entry, dict) and entry.get("engine") == ENGINE
    ]
    if not found:
        has_rego = bool(target.get("rego")) or any(
            isinstance(e, dict) and e.get("engine") == "Rego" for e in entries
        )
        if has_rego:
            problems.add("Rego is not supported; add K8sNativeValidation code", code_path if code else path)
        else:
            problems.add(
                "no K8sNativeValidation code: add an entry with engine: K8sNativeValidation to "
                "spec.targets[0].code",
                code_path if code is not None else path,
            )
        return "", None
    if len(found) > 1:
        problems.warn(
            "more than one K8sNativeValidation code entry: only the first is used",
            index_path(code_path, found[1]),
        )
    source_path = key_path(index_path(code_path, found[0]), "source")
    source = entries[found[0]].get("source")
    if not isinstance(source, dict):
        problems.add("the K8sNativeValidation source must be a map", source_path)
        return source_path, None
    return source_path, source
