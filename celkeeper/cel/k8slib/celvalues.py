"""cel-go's runtime semantics for plain values, as the lists library relies on them (cel-go v0.26.0,
common/types): Compare (the traits.Comparer types), Equal (heterogeneous equality) and Add.

Values: bool, int, `Uint`, float, str, bytes, None (null), list/tuple, dict, datetime (timestamp),
timedelta (duration) and this package's Quantity, Addr (IP), Prefix (CIDR), URL, Semver, Format.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib import format as fmt_lib
from celkeeper.cel.k8slib import quantity as q_lib
from celkeeper.cel.k8slib import semver as sv_lib
from celkeeper.cel.k8slib.gostrings import INT64_MAX, INT64_MIN, UINT64_MAX
from celkeeper.cel.k8slib.gourl import URL, to_string
from celkeeper.cel.k8slib.netip import Addr, Prefix

NO_SUCH_OVERLOAD = "no such overload"
NAN_ORDER = "NaN values cannot be ordered"


class Uint(int):
    """A CEL uint (Python has a single int type; engines wrap uint values in this)."""

    __slots__ = ()


def kind(v: object) -> str:
    """The CEL type of a value, for dispatch."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, Uint):
        return "uint"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "double"
    if isinstance(v, str):
        return "string"
    if isinstance(v, bytes):
        return "bytes"
    if v is None:
        return "null"
    if isinstance(v, datetime):
        return "timestamp"
    if isinstance(v, timedelta):
        return "duration"
    if isinstance(v, list | tuple):
        return "list"
    if isinstance(v, Mapping):
        return "map"
    return type(v).__name__


COMPARABLE = frozenset({"bool", "int", "uint", "double", "string", "bytes", "timestamp", "duration"})


def _cmp(a: float | int, b: float | int) -> int:
    return (a > b) - (a < b)


def _cmp_double_int(d: float, i: int) -> int:
    if d < -(2.0**63):
        return -1
    if d > 2.0**63:
        return 1
    return _cmp(d, float(i))


def _cmp_double_uint(d: float, u: int) -> int:
    if d < 0:
        return -1
    if d > 2.0**64:
        return 1
    return _cmp(d, float(u))


def compare(a: object, b: object) -> int:
    """a.Compare(b) for a comparable `a`; raises LibraryError where cel-go returns an error value."""
    ka, kb = kind(a), kind(b)
    if ka == "double" and math.isnan(a):  # type: ignore[arg-type]
        raise LibraryError(NAN_ORDER)
    if ka in ("int", "uint", "double") and kb in ("int", "uint", "double"):
        if kb == "double" and math.isnan(b):  # type: ignore[arg-type]
            raise LibraryError(NAN_ORDER)
        if ka == "double" and kb == "double":
            return _cmp(a, b)  # type: ignore[arg-type]
        if ka == "double":
            return (_cmp_double_int if kb == "int" else _cmp_double_uint)(a, b)  # type: ignore[arg-type]
        if kb == "double":
            return -(_cmp_double_int if ka == "int" else _cmp_double_uint)(b, a)  # type: ignore[arg-type]
        return _cmp(a, b)  # type: ignore[arg-type]
    if ka != kb or ka not in COMPARABLE:
        raise LibraryError(NO_SUCH_OVERLOAD)
    if isinstance(a, str) and isinstance(b, str):  # ka == kb == "string"
        ab, bb = a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass")
        return (ab > bb) - (ab < bb)
    return int((a > b) - (a < b))  # type: ignore[operator]


def equal(a: object, b: object) -> bool:
    """types.Equal(a, b) == True. Raises LibraryError where Equal yields an error (e.g. a Quantity compared
    with a Quantity that came from add/sub, or a library type compared with another type)."""
    if a is None or b is None:
        return a is None and b is None
    ka, kb = kind(a), kind(b)
    if ka in ("int", "uint", "double"):
        if kb not in ("int", "uint", "double"):
            return False
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            return False
        return compare(a, b) == 0
    if ka in ("bool", "string", "bytes", "timestamp", "duration"):
        return ka == kb and a == b
    if isinstance(a, list | tuple):  # ka == "list"
        if not isinstance(b, list | tuple) or len(a) != len(b):
            return False
        return all(_not_false(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):  # ka == "map"
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, other = _find(b, k)
            if not found or not _not_false(v, other):
                return False
        return True
    return _library_equal(a, b)


def _not_false(x: object, y: object) -> bool:
    """List and map equality skip element comparisons that error (cel-go only stops on False)."""
    try:
        return equal(x, y)
    except LibraryError:
        return True


def _find(m: Mapping[object, object], key: object) -> tuple[bool, object]:
    for k, v in m.items():
        if kind(k) == kind(key) and k == key:
            return True, v
    if kind(key) in ("int", "uint", "double"):
        for k, v in m.items():
            if kind(k) in ("int", "uint", "double") and equal(k, key):
                return True, v
    return False, None


def _library_equal(a: object, b: object) -> bool:
    if isinstance(a, q_lib.Quantity):
        if not isinstance(b, q_lib.Quantity):
            raise LibraryError(NO_SUCH_OVERLOAD)
        return q_lib.equals(a, b)
    if isinstance(a, Addr | Prefix | URL | sv_lib.Semver | fmt_lib.Format):
        if type(a) is not type(b):
            raise LibraryError(NO_SUCH_OVERLOAD)
        if isinstance(a, URL) and isinstance(b, URL):
            return to_string(a) == to_string(b)
        if isinstance(a, sv_lib.Semver) and isinstance(b, sv_lib.Semver):
            return sv_lib.equals(a, b)
        if isinstance(a, fmt_lib.Format) and isinstance(b, fmt_lib.Format):
            return fmt_lib.equals(a, b)
        return a == b
    return a == b


def add(a: object, b: object) -> object:
    """a.Add(b) for the summable kinds (int, uint, double, duration); raises cel-go's errors."""
    ka, kb = kind(a), kind(b)
    if ka == "int" and kb == "int":
        s = a + b  # type: ignore[operator]
        if not INT64_MIN <= s <= INT64_MAX:
            raise LibraryError("integer overflow")
        return s
    if ka == "uint" and kb == "uint":
        s = a + b  # type: ignore[operator]
        if s > UINT64_MAX:
            raise LibraryError("unsigned integer overflow")
        return Uint(s)
    if ka == "double" and kb == "double":
        return a + b  # type: ignore[operator]
    if ka == "duration" and kb == "duration":
        total = a + b  # type: ignore[operator]
        if abs(total) > timedelta(microseconds=INT64_MAX // 1000):
            raise LibraryError("integer overflow")
        return total
    if ka == "duration" and kb == "timestamp":
        return b + a  # type: ignore[operator]
    if ka == "timestamp" and kb == "duration":
        return a + b  # type: ignore[operator]
    raise LibraryError(NO_SUCH_OVERLOAD)
