"""Admission requests: a validated AdmissionReview, or a plain object reviewed as gator reviews it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from celkeeper.errors import ReviewError
from celkeeper.model import JsonObject, JsonValue, unreviewable

API_VERSION = "admission.k8s.io/v1"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
#: what a decoded JSON object is tested against: `dict` first (JSON decoders make dicts), which isinstance
#: answers without the Mapping ABC's subclass check (~0.2 us each, a dozen times per webhook request)
MAPPING = (dict, Mapping)


@dataclass(frozen=True, eq=False)
class AdmissionRequest:
    """An admission request, validated. `cel_request` is what CEL sees as `request`."""

    uid: str
    group: str
    version: str
    kind: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT; "" for a plain object reviewed as gator does
    name: str
    namespace: str
    object: JsonValue  # None on DELETE
    old_object: JsonValue
    cel_request: Mapping[str, JsonValue] = field(repr=False)
    from_review: bool = True  # False: built from a plain object (audit, CLI)
    source: str = "Original"  # "Generated": an object an ExpansionTemplate made (spec.match.source)

    def object_kinds(self) -> set[tuple[str, str]]:
        """(group, kind) of the request and of its objects (matching uses the objects' own)."""
        found = {(self.group, self.kind)}
        for obj in (self.object, self.old_object):
            if isinstance(obj, MAPPING) and isinstance(obj.get("kind"), str):
                group = str(obj.get("apiVersion") or "").rpartition("/")[0]
                found.add((group, obj["kind"]))
        return found


def parse_admission_review(body: JsonValue, *, operation_required: bool = True) -> AdmissionRequest:
    """Validate an admission.k8s.io/v1 AdmissionReview (as decoded JSON) and return its request.

    `operation_required=False` (gator's offline reviews): a request without an operation is reviewed
    as it is, object and oldObject as given."""
    if not isinstance(body, MAPPING):
        raise ReviewError("an AdmissionReview must be a JSON object")
    if body.get("apiVersion") != API_VERSION:
        raise ReviewError(
            f"unsupported AdmissionReview apiVersion {body.get('apiVersion')!r}: "
            f"celkeeper serves {API_VERSION}"
        )
    if body.get("kind") != "AdmissionReview":
        raise ReviewError(f"kind must be AdmissionReview, not {body.get('kind')!r}")
    request = body.get("request")
    if not isinstance(request, MAPPING):
        raise ReviewError("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing")
    kind = _gvk(request.get("kind"), "request.kind", required=True)
    resource = _gvr(request.get("resource"), "request.resource")
    operation = request.get("operation")
    if not operation_required and operation in (None, ""):
        operation = ""
    elif operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    for key in ("name", "namespace", "subResource", "requestSubResource"):
        _optional(request, key, str, "a string")
    obj = _optional(request, "object", MAPPING, "an object")
    old = _optional(request, "oldObject", MAPPING, "an object")
    dry_run = _optional(request, "dryRun", bool, "true or false")
    options = _optional(request, "options", MAPPING, "an object")
    user_info = _user_info(request.get("userInfo"))
    if request.get("requestKind") is not None:
        _gvk(request.get("requestKind"), "request.requestKind", required=False)
    if request.get("requestResource") is not None:
        _gvr(request.get("requestResource"), "request.requestResource")
    if operation == "DELETE":
        obj = None  # Gatekeeper unsets object on DELETE (use variables.anyObject)
    return _build(
        uid=uid,
        kind=kind,
        resource=resource,
        operation=str(operation),
        name=request.get("name") or "",
        namespace=request.get("namespace") or "",
        sub_resource=request.get("subResource") or "",
        obj=obj,
        old=old,
        user_info=user_info,
        dry_run=bool(dry_run),
        options=options,
        from_review=True,
    )


def request_for_object(
    obj: Mapping[str, JsonValue],
    *,
    operation: str = "",
    old_object: Mapping[str, JsonValue] | None = None,
    user_info: Mapping[str, JsonValue] | None = None,
    source: str = "Original",
) -> AdmissionRequest:
    """A review of a plain object (audit, CLI), as gator builds one: kind, name and namespace from the
    object, no resource, and no operation unless one is given. `source`: Original, or Generated for an
    object an ExpansionTemplate made."""
    problem = unreviewable(obj)
    if problem is not None:
        raise ReviewError(problem)
    api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
    if operation and operation not in OPERATIONS:
        raise ReviewError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    group, _, version = api_version.rpartition("/")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    return _build(
        uid="",
        kind={"group": group, "version": version, "kind": kind},
        resource={"group": "", "version": "", "resource": ""},
        operation=operation,
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        sub_resource="",
        obj=None if operation == "DELETE" else obj,
        old=old_object if operation != "DELETE" else (old_object or obj),
        user_info=_user_info(user_info or {}),
        dry_run=False,
        options=None,
        from_review=False,
        source=source,
    )


PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"


def admission_review_for(
    obj: Mapping[str, JsonValue],
    *,
    operation: str = "CREATE",
    old_object: Mapping[str, JsonValue] | None = None,
    namespace: str | None = None,
    resource: Mapping[str, str] | None = None,
    user_info: Mapping[str, JsonValue] | None = None,
) -> JsonObject:
    """The AdmissionReview the API server would send the webhook for writing `obj` (a CREATE, or an
    UPDATE of `old_object`): kind and name from the object, `namespace` (default: the object's) and the
    resource when known (discovery); a placeholder uid. Parse it with parse_admission_review."""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind") or "")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    if namespace is None:
        namespace = str(meta.get("namespace") or "")
    if group == "" and kind == "Namespace":
        namespace = ""  # the API server sends a Namespace's name, not a namespace
    request: JsonObject = {
        "uid": PLACEHOLDER_UID,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": dict(resource) if resource else {"group": group, "version": version, "resource": ""},
        "name": str(meta.get("name") or ""),
        "operation": operation,
        "userInfo": dict(user_info or {}),
        "object": dict(obj) if operation != "DELETE" else None,
        "oldObject": dict(old_object) if old_object is not None else None,
    }
    if namespace:
        request["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": request}


def _build(
    *,
    uid: str,
    kind: Mapping[str, str],
    resource: Mapping[str, str],
    operation: str,
    name: str,
    namespace: str,
    sub_resource: str,
    obj: Any,
    old: Any,
    user_info: Mapping[str, JsonValue],
    dry_run: bool,
    options: Any,
    from_review: bool,
    source: str = "Original",
) -> AdmissionRequest:
    # k8s.io/apiserver admission/plugin/cel CreateAdmissionRequest, as Gatekeeper calls it: the
    # request* fields repeat kind/resource/subResource; empty omitempty fields are left out.
    cel_request: JsonObject = {"kind": dict(kind), "resource": dict(resource)}
    if sub_resource:
        cel_request["subResource"] = sub_resource
    cel_request["requestKind"] = dict(kind)
    cel_request["requestResource"] = dict(resource)
    if sub_resource:
        cel_request["requestSubResource"] = sub_resource
    if name:
        cel_request["name"] = name
    if namespace:
        cel_request["namespace"] = namespace
    cel_request["operation"] = operation
    cel_request["userInfo"] = dict(user_info)
    cel_request["dryRun"] = dry_run
    cel_request["options"] = dict(options) if isinstance(options, MAPPING) else None
    return AdmissionRequest(
        uid=uid,
        group=kind["group"],
        version=kind["version"],
        kind=kind["kind"],
        operation=operation,
        name=name,
        namespace=namespace,
        object=obj,
        old_object=old,
        cel_request=cel_request,
        from_review=from_review,
        source=source,
    )


def _optional(request: Mapping[str, JsonValue], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = request.get(key)
    if value is not None and not isinstance(value, kind):
        raise ReviewError(f"request.{key} must be {what}")
    return value


def _strings(value: Any, where: str, keys: tuple[str, ...]) -> dict[str, str]:
    """`value`'s string fields `keys` ("" when absent)."""
    if not isinstance(value, MAPPING):
        raise ReviewError(f"{where} must be an object with {', '.join(keys[:-1])} and {keys[-1]}")
    out = {}
    for key in keys:
        item = value.get(key, "")
        if not isinstance(item, str):
            raise ReviewError(f"{where}.{key} must be a string")
        out[key] = item
    return out


def _gvk(value: Any, where: str, *, required: bool) -> dict[str, str]:
    out = _strings(value, where, ("group", "version", "kind"))
    if required and not out["kind"]:
        raise ReviewError(f"{where}.kind is missing")
    return out


def _gvr(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {"group": "", "version": "", "resource": ""}
    return _strings(value, where, ("group", "version", "resource"))


def _user_info(value: Any) -> JsonObject:
    if value is None:
        return {}
    if not isinstance(value, MAPPING):
        raise ReviewError("request.userInfo must be an object")
    out: JsonObject = {}
    for key in ("username", "uid"):
        item = value.get(key)
        if item is not None and not isinstance(item, str):
            raise ReviewError(f"request.userInfo.{key} must be a string")
        if item:
            out[key] = item
    groups = value.get("groups")
    if groups is not None:
        if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
            raise ReviewError("request.userInfo.groups must be a list of strings")
        if groups:
            out["groups"] = list(groups)
    extra = value.get("extra")
    if extra is not None:
        if not isinstance(extra, Mapping) or not all(
            isinstance(v, list) and all(isinstance(s, str) for s in v) for v in extra.values()
        ):
            raise ReviewError("request.userInfo.extra must map names to lists of strings")
        if extra:
            out["extra"] = {k: list(v) for k, v in extra.items()}
    return out
