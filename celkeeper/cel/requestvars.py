"""What CEL sees as `request` and `namespaceObject`, in plain Python (the cel-python engine's port of
Kubernetes' conversions; the cel-go engine runs Kubernetes' own code).

- `cel_request(fields)`: k8s.io/apiserver plugin/cel/condition.go CreateAdmissionRequest (as
  Gatekeeper's validator calls it: the request* fields repeat kind/resource/subResource) then
  runtime.DefaultUnstructuredConverter.ToUnstructured: `uid` is "" (not copied), `object` and
  `oldObject` are null (not exposed through `request`), `dryRun` is always there, `options` is the
  operation options object or null, and empty optional fields are left out.
- `namespace_object(namespace)`: CreateNamespaceObject (metadata subset, spec, status; no
  apiVersion or kind), as Gatekeeper converts the request's Namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celkeeper.model import JsonObject, JsonValue

_NAMESPACE_META = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "finalizers",
)


def _strings(value: Any, keys: tuple[str, ...]) -> dict[str, str]:
    value = value if isinstance(value, Mapping) else {}
    return {k: str(value.get(k) or "") for k in keys}


def _user_info(value: Any) -> JsonObject:
    value = value if isinstance(value, Mapping) else {}
    out: JsonObject = {}
    for key in ("username", "uid"):
        if value.get(key):
            out[key] = str(value[key])
    if value.get("groups"):
        out["groups"] = list(value["groups"])
    if value.get("extra"):
        out["extra"] = {k: list(v) for k, v in value["extra"].items()}
    return out


def cel_request(fields: Mapping[str, JsonValue]) -> JsonObject:
    """`request` for an AdmissionRequest given as its JSON fields (see the module docstring)."""
    kind = _strings(fields.get("kind"), ("group", "version", "kind"))
    resource = _strings(fields.get("resource"), ("group", "version", "resource"))
    sub_resource = str(fields.get("subResource") or "")
    out: JsonObject = {"uid": "", "kind": kind, "resource": resource}
    if sub_resource:
        out["subResource"] = sub_resource
    out["requestKind"] = dict(kind)
    out["requestResource"] = dict(resource)
    if sub_resource:
        out["requestSubResource"] = sub_resource
    for key in ("name", "namespace"):
        if fields.get(key):
            out[key] = str(fields[key])
    out["operation"] = str(fields.get("operation") or "")
    out["userInfo"] = _user_info(fields.get("userInfo"))
    out["object"] = None
    out["oldObject"] = None
    out["dryRun"] = bool(fields.get("dryRun"))
    options = fields.get("options")
    out["options"] = dict(options) if isinstance(options, Mapping) else None
    return out


def namespace_object(namespace: Mapping[str, JsonValue] | None) -> JsonObject | None:
    """`namespaceObject` for the request's Namespace (None: null)."""
    if not isinstance(namespace, Mapping):
        return None
    meta = namespace.get("metadata") if isinstance(namespace.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    out: JsonObject = {
        "metadata": {k: meta[k] for k in _NAMESPACE_META if meta.get(k) not in (None, "", {}, [])}
    }
    for key in ("spec", "status"):
        if isinstance(namespace.get(key), Mapping) and namespace[key]:
            out[key] = namespace[key]
    return out
