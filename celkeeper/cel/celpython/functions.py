"""The function table cel-python evaluates lowered programs with (see celkeeper.cel.celpython.lowering).

Operators keep cel-python's names (`_==_`, `_<_`, ...) and are overridden where cel-python departs
from CEL. Every other function is registered under the lowering's internal names
(`__ck_g_<name>` global, `__ck_m_<name>` member). Behaviour follows cel-cpp (the default engine),
which the differential tests compare against; implementations of the cel-go extensions are in
`celkeeper.cel.celpython.extensions`.
"""

from __future__ import annotations

import datetime
import math
import operator
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, base_functions

from celkeeper.cel.celpython import formatting, library
from celkeeper.cel.celpython.environment import FUNCTIONS
from celkeeper.cel.celpython.extensions import EXTENSIONS
from celkeeper.cel.celpython.library import LibraryRuntime
from celkeeper.cel.celpython.lowering import function_name
from celkeeper.cel.celpython.values import (
    NONE,
    Optional,
    compare,
    equal,
    error,
    is_bool,
    is_number,
    lookup,
    to_cel,
    to_python,
    type_name,
)
from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.regex import RegexCompileError, compile_regex

Fn = Callable[..., Any]


def _errors_first(fn: Fn) -> Fn:
    """An operator whose error operands propagate (as cel-go's do) before it looks at the values."""

    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        return fn(*args)

    call.__name__ = getattr(fn, "__name__", "fn")
    return call


def _propagating(fn: Fn, result: str | None = None) -> Fn:
    """Errors among the arguments propagate; library errors become CEL errors; results become celpy."""

    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        try:
            return to_cel(fn(*args), result)
        except LibraryError as err:
            return error(err.message)
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, ZeroDivisionError) as exc:
            return error(str(exc) or type(exc).__name__)

    call.__name__ = getattr(fn, "__name__", "fn")
    return call


# ------------------------------------------------------------------------------------ operators


def _relation(test: Callable[[int], bool]) -> Fn:
    def rel(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        try:
            return ct.BoolType(test(compare(a, b)))
        except ValueError:  # NaN: every ordering is false
            return ct.BoolType(False)

    return rel


def _eq(a: Any, b: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    return ct.BoolType(equal(a, b))


def _ne(a: Any, b: Any) -> Any:
    r = _eq(a, b)
    return r if isinstance(r, CELEvalError) else ct.BoolType(not r)


def _in(item: Any, container: Any) -> Any:
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, list):
        return ct.BoolType(any(equal(item, x) for x in container))
    if isinstance(container, dict):
        return ct.BoolType(lookup(container, item)[0])
    return error(f"no such overload: {type_name(item)} in {type_name(container)}")


def _index(container: Any, key: Any) -> Any:
    if isinstance(container, CELEvalError):
        return container
    if isinstance(key, CELEvalError):
        return key
    if isinstance(container, list):
        if isinstance(key, float) and key == int(key):
            key = int(key)
        if not is_number(key) or isinstance(key, float):
            return error(f"no such overload: list[{type_name(key)}]")
        if not 0 <= key < len(container):
            return error(f"index out of bounds: {int(key)}")
        return container[int(key)]
    if isinstance(container, dict):
        found, value = lookup(container, key)
        if not found:
            return error(f"no such key: {key}")
        return value
    return error(f"no such overload: {type_name(container)}[{type_name(key)}]")


def _arithmetic(op: Callable[[Any, Any], Any], zero: str) -> Fn:
    """`/` or `%` with cel-go's errors: integer division by zero is `division by zero` / `modulus by
    zero`; double division follows IEEE 754 (1.0 / 0.0 is +Inf)."""

    def apply(left: Any, right: Any) -> Any:
        if isinstance(left, float) and isinstance(right, float) and right == 0.0:
            if zero.startswith("modulus"):
                return error("no such overload")
            return math.copysign(math.inf, left) * math.copysign(1.0, right) if left != 0.0 else math.nan
        integers = isinstance(left, int) and isinstance(right, int)
        if integers and not isinstance(left, bool) and not isinstance(right, bool) and right == 0:
            return error(zero)
        return op(left, right)

    return apply


OPERATORS: dict[str, Fn] = {
    "_/_": _arithmetic(operator.truediv, "division by zero"),
    "_%_": _arithmetic(operator.mod, "modulus by zero"),
    "_==_": _eq,
    "_!=_": _ne,
    "_<_": _relation(lambda c: c < 0),
    "_<=_": _relation(lambda c: c <= 0),
    "_>_": _relation(lambda c: c > 0),
    "_>=_": _relation(lambda c: c >= 0),
    "_in_": _in,
    "_[_]": _index,
}


# ----------------------------------------------------------------------------------- helpers


def _has(value: Any, field: str) -> Any:
    if value is None:  # cel-go: has() on null is false
        return False
    if isinstance(value, dict):
        return value.__contains__(field)
    return error(f"no such overload: has() on {type_name(value)}")


def _select(value: Any, field: str) -> Any:
    if isinstance(value, dict):
        found, v = lookup(value, field)
        return v if found else error(f"no such key: {field}")
    return error(f"no such overload: {type_name(value)}.{field}")


def _opt_select(value: Any, field: str) -> Any:
    if isinstance(value, Optional):
        if not value.present:
            return NONE
        value = value.value
    if value is None:  # cel-go: an optional selection on null is optional.none()
        return NONE
    if isinstance(value, dict):
        found, v = lookup(value, field)
        return Optional(v) if found else NONE
    return error(f"no such overload: {type_name(value)}.?{field}")


def _opt_index(value: Any, key: Any) -> Any:
    if isinstance(value, Optional):
        if not value.present:
            return NONE
        value = value.value
    if value is None:  # cel-go: an optional index on null is optional.none()
        return NONE
    if isinstance(value, list):
        if not is_number(key) or isinstance(key, float):
            return error(f"no such overload: list[?{type_name(key)}]")
        return Optional(value[int(key)]) if 0 <= key < len(value) else NONE
    if isinstance(value, dict):
        found, v = lookup(value, key)
        return Optional(v) if found else NONE
    return error(f"no such overload: {type_name(value)}[?{type_name(key)}]")


def _opt_item(value: Any, key: Any) -> Any:
    """`o[k]` on an optional: none stays none; a list index out of range is an error (as cel-cpp)."""
    o = value
    if not isinstance(o, Optional):
        return _index(o, key)
    if not o.present:
        return NONE
    if isinstance(o.value, list):
        item = _index(o.value, key)
        return item if isinstance(item, CELEvalError) else Optional(item)
    return _opt_index(o, key)


def _opt_list(flags: list[Any], values: list[Any]) -> Any:
    out = []
    for flag, v in zip(flags, values, strict=True):
        if not flag:
            out.append(v)
        elif not isinstance(v, Optional):
            return error("no such overload: optional list element is not an optional")
        elif v.present:
            out.append(v.value)
    return ct.ListType(out)


def _opt_map(keys: list[Any], values: list[Any], flags: list[Any]) -> Any:
    out = ct.MapType()
    for k, v, flag in zip(keys, values, flags, strict=True):
        item = v
        if flag:
            if not isinstance(v, Optional):
                return error("no such overload: optional map entry is not an optional")
            if not v.present:
                continue
            item = v.value
        if lookup(out, k)[0]:
            return error(f"Failed with repeated key: {k}")
        out[k] = item
    return out


def _matches(cache: dict[str, Any]) -> Fn:
    def matches(text: str, pattern: str) -> bool:
        compiled = cache.get(pattern)
        if compiled is None:
            try:
                compiled = compile_regex(pattern)
            except RegexCompileError as err:
                raise LibraryError(f"invalid regular expression: {err.message}") from None
            if len(cache) > 256:
                cache.clear()
            cache[pattern] = compiled
        return compiled.search(text) is not None

    return matches


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    raise LibraryError("no such overload: size")  # cel-go's words


def _string_conv(runtime: LibraryRuntime) -> Fn:
    opaque_string = runtime.dispatcher("string")
    type_of = runtime.codec.type_of

    def string_conv(value: Any) -> Any:
        """string(x), with cel-go's forms of doubles, durations and timestamps."""
        if type_of(value) is not None:
            return opaque_string(to_python(value))
        plain = to_python(value)
        if isinstance(plain, bool | float | datetime.datetime | datetime.timedelta):
            return formatting.string_of(plain)
        if isinstance(plain, bytes):
            try:
                return plain.decode("utf-8")
            except UnicodeDecodeError:
                raise LibraryError("invalid UTF-8 in bytes, cannot convert to string") from None
        return base_functions["string"](value)

    return string_conv


def _shared(runtime: LibraryRuntime, k8s: str, std: Fn) -> Fn:
    """indexOf / lastIndexOf: the Kubernetes list overload, else the strings extension."""
    dispatch = runtime.dispatcher(k8s)

    def fn(target: Any, *args: Any) -> Any:
        if isinstance(target, list):
            return dispatch(to_python(target), *(to_python(a) for a in args))
        return std(target, *args)

    return fn


def _k8s(name: str, impl: Fn) -> Fn:
    """A library function: celpy arguments as the plain values k8slib expects (celpy's BoolType is
    not a bool, its UintType is k8slib's Uint), the result back as celpy values."""
    oid = name[len("@k8s.") :]
    result = FUNCTIONS[oid].result if oid in FUNCTIONS and oid not in library.OPTIONAL_RESULTS else None

    def call(*args: Any) -> Any:
        return impl(*(to_python(a) for a in args))

    return _propagating(call, result)


def function_table(runtime: LibraryRuntime) -> dict[str, Fn]:
    """A fresh table for one engine (its own regex cache; the library functions of `runtime`)."""
    cache: dict[str, Any] = {}
    plain: dict[str, Fn] = dict(EXTENSIONS)
    plain.update(
        {
            "size": _size,
            "contains": lambda s, sub: sub in s,
            "startsWith": lambda s, p: s.startswith(p),
            "endsWith": lambda s, p: s.endswith(p),
            "matches": _matches(cache),
            "string": _string_conv(runtime),
            "dyn": lambda v: v,
            "@not_strictly_false": lambda v: not (is_bool(v) and not v),
        }
    )
    plain["indexOf"] = _shared(runtime, "indexOf", EXTENSIONS["indexOf"])
    plain["lastIndexOf"] = _shared(runtime, "lastIndexOf", EXTENSIONS["lastIndexOf"])
    for name in (
        "int",
        "uint",
        "double",
        "bytes",
        "bool",
        "duration",
        "timestamp",
        "type",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getMonth",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getSeconds",
    ):
        plain.setdefault(name, base_functions[name])

    table: dict[str, Fn] = {name: _errors_first(fn) for name, fn in OPERATORS.items()}
    for name, fn in plain.items():
        wrapped = _propagating(fn, "uint" if name == "uint" else None)
        table[function_name(name, False)] = wrapped
        table[function_name(name, True)] = wrapped
    for name, fn in runtime.internal_functions().items():
        if name.startswith("@k8s.") or name in library.INTERNAL_SIGNATURES:
            wrapped = _k8s(name, fn)  # plain values in (celpy's BoolType is no bool), celpy values out
        else:
            wrapped = _propagating(fn)
        table[function_name(name, False)] = wrapped
    table.update(
        {
            "__ck_has": _propagating(_has),
            "__ck_select": _propagating(_select),
            "__ck_opt_select": _propagating(_opt_select),
            "__ck_opt_index": _propagating(_opt_index),
            "__ck_opt_item": _propagating(_opt_item),
            "__ck_opt_list": _propagating(_opt_list),
            "__ck_opt_map": _propagating(_opt_map),
        }
    )
    return table
