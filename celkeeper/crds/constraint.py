"""The constraint CRD of a template, `<lowerkind>.constraints.celkeeper.io` (CRDs that create CRDs).

Mirrors frameworks' CreateCRD/createSchema: cluster-scoped, v1beta1 stored with v1alpha1 and v1 served,
categories `constraint` and `constraints`, a status subresource, Gatekeeper's printer columns, and a spec
of match, enforcementAction (default deny), scopedEnforcementActions and parameters (the template's
schema). Works on a template as a plain dict, celkeeper's or Gatekeeper's (any of its API versions).
"""

from __future__ import annotations

from typing import Any

from celkeeper.crds import names
from celkeeper.crds.schema import (
    Schema,
    array,
    boolean,
    int64,
    match_schema,
    obj,
    printer_column,
    scoped_enforcement_actions_schema,
    status_error,
    string,
)
from celkeeper.crds.static import Manifest, crd, enforcement_point_status, version
from celkeeper.crds.structural import add_preserve_unknown_fields, fill_missing_types, structural_errors
from celkeeper.errors import Location, TemplateError
from celkeeper.model import JsonObject

SCHEMA_PATH = "spec.crd.spec.validation.openAPIV3Schema"
# Gatekeeper's constraint names are at most 63 characters (they become label values in status objects)
MAX_CONSTRAINT_NAME = 63


def _error(message: str, path: str) -> TemplateError:
    return TemplateError(message, Location(path=path))


def _mapping(value: Any, path: str) -> JsonObject:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _error(f"must be a mapping, not {type(value).__name__}", path)
    return value


def template_kind(template: JsonObject) -> str:
    """The constraint kind a template defines (spec.crd.spec.names.kind), checked as a CRD kind."""
    spec = _mapping(template.get("spec"), "spec")
    crd_spec = _mapping(_mapping(spec.get("crd"), "spec.crd").get("spec"), "spec.crd.spec")
    kind = _mapping(crd_spec.get("names"), "spec.crd.spec.names").get("kind")
    path = "spec.crd.spec.names.kind"
    if not isinstance(kind, str) or not kind:
        raise _error("the constraint kind is missing", path)
    if not names.is_dns1035_label(kind.lower()):
        raise _error(
            f"{kind!r} cannot be a Kubernetes kind: it must start with a letter, contain only letters, "
            "digits and '-', not end with '-', and be at most 63 characters",
            path,
        )
    return kind


def _short_names(template: JsonObject) -> list[str]:
    path = "spec.crd.spec.names.shortNames"
    value = template["spec"]["crd"]["spec"]["names"].get("shortNames")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _error("must be a list of strings", path)
    for i, short in enumerate(value):
        if not names.is_dns1035_label(short.lower()):
            raise _error(f"{short!r} is not a valid short name (a DNS-1035 label)", f"{path}[{i}]")
    return list(value)


def legacy_schema(template: JsonObject) -> bool:
    """Whether the parameter schema is legacy (made fully open): spec.crd.spec.validation.legacySchema, which
    defaults to false for v1 templates and true for Gatekeeper's v1beta1 and v1alpha1.
    """
    template_kind(template)
    validation = _mapping(template["spec"]["crd"]["spec"].get("validation"), "spec.crd.spec.validation")
    value = validation.get("legacySchema")
    if value is None:
        version_ = str(template.get("apiVersion", "")).rpartition("/")[2]
        return version_ in ("v1beta1", "v1alpha1")
    if not isinstance(value, bool):
        raise _error("must be true or false", "spec.crd.spec.validation.legacySchema")
    return value


def parameters_schema(template: JsonObject) -> Schema | None:
    """The schema of spec.parameters in the template's constraints, made structural; None when the template
    has no schema and is not legacy (then, as in Gatekeeper, parameters are not kept).

    Legacy schemas get x-kubernetes-preserve-unknown-fields on every object and untyped node (frameworks'
    AddPreserveUnknownFields). Other schemas are kept as written, except that nodes the API server would
    refuse for lack of a type keep any value. Whatever remains non-structural raises TemplateError at the
    offending field.
    """
    template_kind(template)
    validation = _mapping(template["spec"]["crd"]["spec"].get("validation"), "spec.crd.spec.validation")
    raw = validation.get("openAPIV3Schema")
    legacy = legacy_schema(template)
    if raw is None:
        return {"x-kubernetes-preserve-unknown-fields": True} if legacy else None
    if not isinstance(raw, dict):
        raise _error("must be a mapping (an OpenAPI v3 schema)", SCHEMA_PATH)
    schema = add_preserve_unknown_fields(raw) if legacy else fill_missing_types(raw)
    problems = structural_errors(schema, SCHEMA_PATH)
    if problems:
        path, message = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise _error(f"the parameter schema is not accepted by Kubernetes: {message}{more}", path)
    return schema


def _object_ref() -> dict[str, Schema]:
    return {
        "group": string("API group of the object."),
        "version": string("API version of the object."),
        "kind": string("Kind of the object."),
        "namespace": string("Namespace of the object (none when cluster-scoped)."),
        "name": string("Name of the object."),
    }


def constraint_schema(template: JsonObject) -> Schema:
    """The openAPIV3Schema of the template's constraints."""
    spec_properties: dict[str, Schema] = {
        "match": match_schema(),
        "enforcementAction": string(
            "What to do with a violation: deny (default), dryrun, warn, or scoped "
            "(see scopedEnforcementActions).",
            default="deny",
        ),
        "scopedEnforcementActions": scoped_enforcement_actions_schema(),
    }
    parameters = parameters_schema(template)
    if parameters is not None:
        spec_properties["parameters"] = parameters
    by_pod = obj(
        {
            "id": string("The pod that reported."),
            "constraintUID": string("The constraint's UID."),
            "observedGeneration": int64("The generation of the constraint this pod has loaded."),
            "enforced": boolean("This pod enforces that generation."),
            "expectedPods": int64("How many pods this pod expects to enforce the constraint."),
            "operations": array(string(), "The operations this pod performs."),
            "snapshotGeneration": int64("The generation of the pod's policy snapshot that includes it."),
            "errors": array(status_error(), "Errors this pod met loading it."),
            "enforcementPointsStatus": array(
                enforcement_point_status(), "Its state per enforcement point (vap.k8s.io: the binding)."
            ),
        },
        "What one pod observed.",
        preserve_unknown=True,
    )
    status = obj(
        {
            "byPod": array(by_pod, "What each celkeeper pod has loaded of this constraint."),
            "enforced": boolean(
                "True when the expected number of celkeeper pods (the largest expectedPods of byPod) "
                "enforce the current generation."
            ),
            "totalViolations": int64("The number of violations found by the last audit."),
            "auditTimestamp": string("When the last audit ran (its start, RFC 3339)."),
            "violations": array(
                obj(
                    {
                        **_object_ref(),
                        "message": string("What is wrong (at most 256 bytes)."),
                        "enforcementAction": string("The constraint's enforcement action."),
                        "enforcementActions": array(
                            string(), "A scoped constraint's actions at the audit enforcement point."
                        ),
                    },
                    preserve_unknown=True,
                ),
                "Violations found by the last audit: at most --constraint-violations-limit of them.",
            ),
            "totalAuditErrors": int64(
                "Objects (or whole kinds) the last audit could not evaluate for this constraint."
            ),
            "auditErrors": array(
                obj(
                    {**_object_ref(), "message": string("Why it could not be evaluated.")},
                    preserve_unknown=True,
                ),
                "What the last audit could not evaluate: at most --constraint-violations-limit entries.",
            ),
        },
        "The observed state of the constraint.",
        preserve_unknown=True,
    )
    return obj(
        {
            "apiVersion": string("The versioned schema of this object (group/version)."),
            "kind": string("The kind of this object."),
            "metadata": obj({"name": string(maxLength=MAX_CONSTRAINT_NAME)}),
            "spec": obj(spec_properties, "What the constraint checks and what to do about violations."),
            "status": status,
        },
        f"A {template_kind(template)} constraint.",
    )


def constraint_crd(template: JsonObject) -> Manifest:
    """The CRD `<lowerkind>.constraints.celkeeper.io` for a template given as a plain dict.

    Labels: the template's own, plus celkeeper.io/constraint=yes and celkeeper.io/template=<name>.
    ownerReferences: the template (controller), when metadata.uid is present.
    Raises TemplateError (with the field path) for a template that cannot define a valid CRD.
    """
    kind = template_kind(template)
    short_names = _short_names(template)
    schema = constraint_schema(template)
    columns = [
        printer_column(
            "enforcement-action", "string", ".spec.enforcementAction", "How violations are handled."
        ),
        printer_column(
            "total-violations", "integer", ".status.totalViolations", "Violations found by audit."
        ),
        printer_column(
            "enforced", "boolean", ".status.enforced", "Enforced by every expected celkeeper pod."
        ),
        printer_column("audited", "date", ".status.auditTimestamp", "When the last audit ran.", priority=1),
    ]
    versions = [
        version(
            v,
            schema,
            storage=v == names.CONSTRAINTS_STORAGE_VERSION,
            columns=columns,
            status_subresource=True,
        )
        for v in names.CONSTRAINTS_VERSIONS
    ]
    metadata = _mapping(template.get("metadata"), "metadata")
    name = metadata.get("name") or kind.lower()
    labels = {str(k): str(v) for k, v in _mapping(metadata.get("labels"), "metadata.labels").items()}
    labels[names.CONSTRAINT_CRD_LABEL] = "yes"
    labels[names.TEMPLATE_LABEL] = str(name)
    manifest = crd(
        names.CONSTRAINTS_GROUP,
        kind,
        kind.lower(),
        "Cluster",
        versions,
        short_names=short_names,
        categories=list(names.CONSTRAINT_CATEGORIES),
        labels=labels,
    )
    uid = metadata.get("uid")
    if uid:
        manifest["metadata"]["ownerReferences"] = [
            {
                "apiVersion": str(template.get("apiVersion") or names.TEMPLATES_API_VERSION),
                "kind": str(template.get("kind") or names.TEMPLATE_KIND),
                "name": str(name),
                "uid": str(uid),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return manifest
