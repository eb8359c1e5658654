"""cel-python value helpers: conversion to and from celpy values, CEL equality and ordering.

cel-python's own `==` and `<` do not follow CEL for values of different types (`1 == 1.0` and
`1 < 2.5` are errors there); these helpers implement CEL's rules (heterogeneous equality: values
of different types are unequal, numbers compare by value; ordering across int, uint and double).
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from celkeeper.cel.celpython.overloads import EQUALITY
from celkeeper.cel.k8slib import format as fmt
from celkeeper.cel.k8slib import gourl, netip, quantity, semver
from celkeeper.cel.k8slib.celvalues import Uint

#: the Kubernetes library values, which celpy holds as the k8slib objects: class -> CEL type name
LIBRARY_TYPE_NAMES: dict[type, str] = {
    quantity.Quantity: "kubernetes.Quantity",
    netip.Addr: "net.IP",
    netip.Prefix: "net.CIDR",
    gourl.URL: "kubernetes.URL",
    semver.Semver: "kubernetes.Semver",
    fmt.Format: "kubernetes.NamedFormat",
}

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class Optional:
    """CEL optional values (optional.of / optional.none)."""

    __slots__ = ("value",)
    _ABSENT = object()

    def __init__(self, value: Any = _ABSENT) -> None:
        self.value = value

    @property
    def present(self) -> bool:
        return self.value is not Optional._ABSENT

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional):
            return False
        if self.present != other.present:
            return False
        return not self.present or equal(self.value, other.value)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE = Optional()


def error(message: str) -> CELEvalError:
    return CELEvalError(message)


def to_cel(value: Any, result: str | None = None) -> Any:
    """Plain Python data (or celpy values) as celpy values; `result` hints int vs uint. Maps and lists
    nested deeper than Python's recursion limit (the API server stores objects up to 10,000 levels
    deep) are converted without recursion."""
    try:
        return _to_cel(value, result)
    except RecursionError:
        return _to_cel_deep(value, result)


def _to_cel_deep(value: Any, result: str | None) -> Any:
    """to_cel with an explicit stack: each map's keys in their order, each list's items at their place."""
    root: list[Any] = [None]
    pending: list[tuple[Any, str | None, Any, Any]] = [(value, result, root, 0)]
    while pending:
        item, hint, parent, key = pending.pop()
        converted: Any
        if isinstance(item, dict):
            converted = ct.MapType()
            for k, v in item.items():
                ck = _to_cel(k)
                converted[ck] = None  # the key's place in the map's order, its value below
                pending.append((v, None, converted, ck))
        elif isinstance(item, list | tuple):
            inner = _item_hint(hint)
            converted = ct.ListType([None] * len(item))
            pending.extend((v, inner, converted, i) for i, v in enumerate(item))
        else:
            converted = _to_cel(item, hint)
        parent[key] = converted
    return root[0]


def _to_cel(value: Any, result: str | None = None) -> Any:
    if value is None or isinstance(value, CELEvalError | Optional | ct.TypeType | ct.BoolType):
        return value
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, ct.UintType | ct.IntType):
        return value
    if isinstance(value, Uint):
        return ct.UintType(value)
    if isinstance(value, int):
        return ct.UintType(value) if result == "uint" else ct.IntType(value)
    if isinstance(value, float):
        return ct.DoubleType(value)
    if isinstance(value, str):
        return value if isinstance(value, ct.StringType) else ct.StringType(value)
    if isinstance(value, bytes):
        return value if isinstance(value, ct.BytesType) else ct.BytesType(value)
    if isinstance(value, datetime.datetime):
        if isinstance(value, ct.TimestampType):
            return value
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return ct.TimestampType(value)
    if isinstance(value, datetime.timedelta):
        return value if isinstance(value, ct.DurationType) else ct.DurationType(value)
    if isinstance(value, dict):
        return ct.MapType({_to_cel(k): _to_cel(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        inner = _item_hint(result)
        return ct.ListType([_to_cel(v, inner) for v in value])
    return value


def _item_hint(result: str | None) -> str | None:
    """The hint for a list's items: `uint` of `list(uint)`."""
    return result[5:-1] if result and result.startswith("list(") else None


def to_python(value: Any) -> Any:
    """celpy values as plain Python data."""
    if value is None:
        return None
    if isinstance(value, ct.BoolType | bool):
        return bool(value)
    if isinstance(value, ct.UintType):
        return Uint(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, datetime.datetime):
        return datetime.datetime.fromtimestamp(value.timestamp(), tz=datetime.UTC).replace(
            microsecond=value.microsecond
        )
    if isinstance(value, datetime.timedelta):
        return datetime.timedelta(seconds=value.total_seconds())
    if isinstance(value, dict):
        return {to_python(k): to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value


def is_bool(v: Any) -> bool:
    return isinstance(v, ct.BoolType | bool)


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not is_bool(v)


def _num(v: Any) -> int | float:
    """A celpy number as a plain Python one (celpy's own operators refuse mixed types)."""
    return float(v) if isinstance(v, float) else int(v)


def _same_kind(a: Any, b: Any) -> bool:
    kinds = (str, bytes, datetime.datetime, datetime.timedelta, list, dict)
    return any(isinstance(a, k) and isinstance(b, k) for k in kinds)


def equal(a: Any, b: Any) -> bool:
    """CEL `==` (heterogeneous equality)."""
    if a is None or b is None:
        return a is None and b is None
    if is_bool(a) or is_bool(b):
        return is_bool(a) and is_bool(b) and bool(a) == bool(b)
    if is_number(a) or is_number(b):
        if not (is_number(a) and is_number(b)):
            return False
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            return False
        return _num(a) == _num(b)
    if isinstance(a, Optional) or isinstance(b, Optional):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        for k, v in a.items():
            found, other = lookup(b, k)
            if not found or not equal(v, other):
                return False
        return True
    if (isinstance(a, str) and isinstance(b, str)) or (isinstance(a, bytes) and isinstance(b, bytes)):
        return bool(a == b)
    library = LIBRARY_TYPE_NAMES.get(type(a))
    if library is not None and type(a) is type(b):  # Kubernetes' Equal (e.g. quantities by value)
        return bool(EQUALITY[library][0](a, b))
    if _same_kind(a, b) or type(a) is type(b):
        return bool(a == b)
    return False


def lookup(m: dict[Any, Any], key: Any) -> tuple[bool, Any]:
    """A map lookup with CEL's numeric key equivalence (1, 1u and 1.0 find the same entry)."""
    if is_number(key):
        for k, v in m.items():
            if is_number(k) and _num(k) == _num(key):
                return True, v
        return False, None
    if is_bool(key):
        for k, v in m.items():
            if is_bool(k) and bool(k) == bool(key):
                return True, v
        return False, None
    try:
        if key in m:
            return True, m[key]
    except TypeError:
        pass
    return False, None


def compare(a: Any, b: Any) -> int:
    """CEL ordering: -1, 0 or 1; TypeError when the operands do not compare."""
    if is_number(a) and is_number(b):
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            raise ValueError("NaN")
        x, y = _num(a), _num(b)
        return (x > y) - (x < y)
    if is_bool(a) and is_bool(b):
        return (bool(a) > bool(b)) - (bool(a) < bool(b))
    if _same_kind(a, b) and not isinstance(a, list | dict):
        return int((a > b) - (a < b))
    raise TypeError(f"no such overload: {type(a).__name__} < {type(b).__name__}")


def type_name(v: Any) -> str:
    """A CEL type name for messages."""
    if v is None:
        return "null_type"
    for cls, name in (
        (ct.BoolType, "bool"),
        (ct.UintType, "uint"),
        (ct.IntType, "int"),
        (ct.DoubleType, "double"),
        (ct.StringType, "string"),
        (ct.BytesType, "bytes"),
        (ct.ListType, "list"),
        (ct.MapType, "map"),
        (ct.TimestampType, "google.protobuf.Timestamp"),
        (ct.DurationType, "google.protobuf.Duration"),
        (Optional, "optional_type"),
    ):
        if isinstance(v, cls):
            return name
    return LIBRARY_TYPE_NAMES.get(type(v), type(v).__name__)
