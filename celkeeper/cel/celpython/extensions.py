"""cel-go's extensions (strings v2, lists, sets, optional types) for cel-python, which lacks them.

Plain functions over celpy values; errors are raised as LibraryError and become CEL errors.
Behaviour and error cases follow cel-go's ext package (`format` is celkeeper.cel.celpython.formatting).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from celkeeper.cel.celpython.dispatch import key_text
from celkeeper.cel.celpython.formatting import string_format
from celkeeper.cel.celpython.values import NONE, Optional, compare, equal, is_number, type_name
from celkeeper.cel.k8slib import LibraryError

# Go's unicode.IsSpace, which strings.TrimSpace (cel-go's trim) uses
_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)


def _int(v: Any, what: str = "index") -> int:
    if not is_number(v) or isinstance(v, float):
        raise LibraryError(f"no such overload: {what} of type {type_name(v)}")
    return int(v)


# --------------------------------------------------------------------------------------- strings


def char_at(s: str, i: Any) -> str:
    i = _int(i)
    if i < 0 or i > len(s):
        raise LibraryError(f"index out of range: {i}")
    return s[i : i + 1]


def index_of(s: str, sub: str, start: Any = 0) -> int:
    start = _int(start)
    if start < 0 or start > len(s):
        raise LibraryError(f"index out of range: {start}")
    return s.find(sub, start)


def last_index_of(s: str, sub: str, start: Any = None) -> int:
    last = len(s) if start is None else _int(start)
    if last < 0 or last > len(s):
        raise LibraryError(f"index out of range: {last}")
    if sub == "":
        return last
    return s.rfind(sub, 0, last + len(sub))


def _ascii(s: str, upper: bool) -> str:
    table = str.maketrans(
        "abcdefghijklmnopqrstuvwxyz" if upper else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if upper else "abcdefghijklmnopqrstuvwxyz",
    )
    return s.translate(table)


def replace(s: str, old: str, new: str, n: Any = -1) -> str:
    n = _int(n, "count")
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: str, sep: str, n: Any = -1) -> list[str]:
    n = _int(n, "limit")
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        if 0 < n < len(parts):
            parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
        return parts
    return s.split(sep, n - 1) if n > 0 else s.split(sep)


def substring(s: str, start: Any, end: Any = None) -> str:
    """cel-go's substr / substrRange, their checks in their order."""
    start = _int(start)
    stop = len(s) if end is None else _int(end)
    if end is not None and start > stop:
        raise LibraryError(f"invalid substring range. start: {start}, end: {stop}")
    if start < 0 or start > len(s):
        raise LibraryError(f"index out of range: {start}")
    if stop < 0 or stop > len(s):
        raise LibraryError(f"index out of range: {stop}")
    return s[start:stop]


def join(items: list[Any], sep: str = "") -> str:
    if not all(isinstance(i, str) for i in items):
        raise LibraryError("join: list elements must be strings")
    return sep.join(items)


def quote(s: str) -> str:
    escapes = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
    escapes.update({"\\": "\\\\", '"': '\\"'})
    body = "".join(escapes.get(ch, "\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch) for ch in s)
    return f'"{body}"'


# ----------------------------------------------------------------------------------------- lists


def list_slice(items: list[Any], start: Any, end: Any) -> list[Any]:
    s, e = _int(start), _int(end)
    if s < 0 or e < 0:
        raise LibraryError(f"cannot slice({s}, {e}), negative indexes not supported")
    if s > e:
        raise LibraryError(f"cannot slice({s}, {e}), start index must be less than or equal to end index")
    if len(items) < e:
        raise LibraryError(f"cannot slice({s}, {e}), list is length {len(items)}")
    return list(items[s:e])


def flatten(items: list[Any], depth: Any = 1) -> list[Any]:
    d = _int(depth, "depth")
    if d < 0:
        raise LibraryError("level must be non-negative")
    out: list[Any] = []
    for item in items:
        if isinstance(item, list) and d > 0:
            out.extend(flatten(item, d - 1))
        else:
            out.append(item)
    return out


def sort_by_keys(items: list[Any], keys: list[Any]) -> list[Any]:
    if len(items) != len(keys):
        raise LibraryError(
            "@sortByAssociatedKeys() expected a list of the same size as the associated keys list, "
            f"but got {len(items)} and {len(keys)} elements respectively"
        )
    if not items:
        return list(items)
    first = type_name(keys[0])
    if any(type_name(k) != first for k in keys):
        raise LibraryError("list elements must have the same type")
    try:
        order = sorted(range(len(keys)), key=_cmp_key(keys))
    except TypeError:
        raise LibraryError("list elements must be comparable") from None
    return [items[i] for i in order]


def _cmp_key(keys: list[Any]) -> Callable[[int], Any]:
    import functools

    return functools.cmp_to_key(lambda i, j: compare(keys[i], keys[j]))


def distinct(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if not any(equal(item, seen) for seen in out):
            out.append(item)
    return out


def lists_range(n: Any) -> list[int]:
    n = _int(n, "size")
    if n < 0:
        raise LibraryError(f"lists.range: size must be non-negative, got {n}")
    return list(range(n))


# ------------------------------------------------------------------------------- sets, optional


def _contains_all(a: list[Any], b: list[Any]) -> bool:
    return all(any(equal(x, y) for y in a) for x in b)


_GO_ZERO_TIME = datetime.datetime(1, 1, 1, tzinfo=datetime.UTC)


def _zero(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, datetime.timedelta):
        return v == datetime.timedelta(0)
    if isinstance(v, datetime.datetime):  # Go's zero time: 0001-01-01T00:00:00Z (IsZeroValue)
        return v == _GO_ZERO_TIME
    if isinstance(v, bool | int | float | str | bytes | list | dict):
        return not v
    return False


def _optional(v: Any) -> Optional:
    if not isinstance(v, Optional):
        raise LibraryError(f"no such overload: {type_name(v)} is not an optional")
    return v


def _value(o: Any) -> Any:
    o = _optional(o)
    if not o.present:
        raise LibraryError("optional.none() dereference")
    return o.value


def _go_native_text(v: Any) -> str:
    """Go's %v of a plain Go value inside request data (`map[k:v]`, `[a b]`, `<nil>`)."""
    if v is None:
        return "<nil>"
    if isinstance(v, list):
        return "[" + " ".join(_go_native_text(x) for x in v) + "]"
    if isinstance(v, dict):
        items = sorted((key_text(k), _go_native_text(x)) for k, x in v.items())
        return "map[" + " ".join(f"{k}:{x}" for k, x in items) + "]"
    return key_text(v)


def _go_value_text(v: Any) -> str:
    """Go's %v of a CEL value as cel-go's `value %v is not optional` prints it: null is 0 (types.Null
    has no String method), a list `[a, b]` (its elements as Go prints Kubernetes' unstructured
    data), a map `{k: v}` (its values CEL values; cel-go's order is Go's map order, sorted here)."""
    if v is None:
        return "0"
    if isinstance(v, list):
        return "[" + ", ".join(_go_native_text(x) for x in v) + "]"
    if isinstance(v, dict):
        items = sorted((key_text(k), _go_value_text(x)) for k, x in v.items())
        return "{" + ", ".join(f"{k}: {x}" for k, x in items) + "}"
    return key_text(v)


def unwrap_optionals(items: list[Any]) -> list[Any]:
    """`optional.unwrap(l)` / `l.unwrapOpt()` (cel-go's optUnwrap, optional library version 2): the
    values of the present optionals in order; an element that is not optional is an error."""
    out: list[Any] = []
    for v in items:
        if not isinstance(v, Optional):
            raise LibraryError(f"value {_go_value_text(v)} is not optional")
        if v.present:
            out.append(v.value)
    return out


EXTENSIONS: dict[str, Callable[..., Any]] = {
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lambda s: _ascii(s, False),
    "upperAscii": lambda s: _ascii(s, True),
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": lambda s: s.strip(_SPACE),
    "join": join,
    "format": string_format,
    "strings.quote": quote,
    "slice": list_slice,
    "flatten": flatten,
    "sort": lambda items: sort_by_keys(items, items),
    "@sortByAssociatedKeys": sort_by_keys,
    "distinct": distinct,
    "reverse": lambda items: list(reversed(items)),
    "lists.range": lists_range,
    "first": lambda items: Optional(items[0]) if items else NONE,
    "last": lambda items: Optional(items[-1]) if items else NONE,
    "sets.contains": _contains_all,
    "sets.equivalent": lambda a, b: _contains_all(a, b) and _contains_all(b, a),
    "sets.intersects": lambda a, b: any(any(equal(x, y) for y in a) for x in b),
    "optional.of": Optional,
    "optional.none": lambda: NONE,
    "optional.ofNonZeroValue": lambda v: NONE if _zero(v) else Optional(v),
    "hasValue": lambda o: _optional(o).present,
    "value": _value,
    "orValue": lambda o, d: _optional(o).value if _optional(o).present else d,
    "or": lambda o, other: o if _optional(o).present else _optional(other),
    "optional.unwrap": unwrap_optionals,
    "unwrapOpt": unwrap_optionals,
}
