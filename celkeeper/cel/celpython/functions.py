"""The function table cel-python evaluates lowered programs with (see celkeeper.cel.celpython.lowering).

Operators keep cel-python's names (`_==_`, `_<_`, ...) and are overridden where cel-python departs
from CEL. Every other function is registered under the lowering's internal names
(`__ck_g_<name>` global, `__ck_m_<name>` member). Behaviour follows cel-go (Kubernetes' CEL, the
default engine), which the differential tests compare against; implementations of the cel-go extensions are in
`celkeeper.cel.celpython.extensions`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError, base_functions

from celkeeper.cel.celpython import dispatch, formatting, library
from celkeeper.cel.celpython.environment import FUNCTIONS, authz_overloads
from celkeeper.cel.celpython.extensions import EXTENSIONS
from celkeeper.cel.celpython.library import LibraryRuntime
from celkeeper.cel.celpython.lowering import function_name
from celkeeper.cel.celpython.values import (
    NONE,
    Optional,
    equal,
    error,
    is_bool,
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


def _eq(a: Any, b: Any) -> Any:
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    return ct.BoolType(equal(a, b))


def _ne(a: Any, b: Any) -> Any:
    r = _eq(a, b)
    return r if isinstance(r, CELEvalError) else ct.BoolType(not r)


#: the operators: equality here, the others as cel-go dispatches them (dispatch.OPERATORS)
OPERATORS: dict[str, Fn] = {
    "_==_": _eq,
    "_!=_": _ne,
    "_[_]": dispatch.index,
    **dispatch.OPERATORS,
}


# ----------------------------------------------------------------------------------- helpers


def _opt_item(value: Any, key: Any) -> Any:
    """`o[k]` on an optional: none stays none; a list index out of range is an error (as cel-cpp)."""
    o = value
    if not isinstance(o, Optional):
        return dispatch.index(o, key)
    if not o.present:
        return NONE
    if isinstance(o.value, list):
        item = dispatch.index(o.value, key)
        return item if isinstance(item, CELEvalError) else Optional(item)
    return dispatch.optional_qualify(o, key)


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


_STRING_TYPES = frozenset(
    {"string", "bool", "bytes", "double", "int", "uint", dispatch.TIMESTAMP, dispatch.DURATION}
)
_STRING_LIBRARY_TYPES = frozenset({"net.IP", "net.CIDR"})


def _string_conv(runtime: LibraryRuntime) -> Fn:
    opaque_string = runtime.dispatcher("string")
    type_of = runtime.codec.type_of

    def string_conv(value: Any) -> Any:
        """string(x), with cel-go's forms of doubles, durations and timestamps; net.IP and net.CIDR
        (Kubernetes' overloads); any other argument is `no such overload: string(<type>)`."""
        if type_of(value) is not None:
            if type_name(value) not in _STRING_LIBRARY_TYPES:
                return dispatch.no_such_overload("string", value)
            return opaque_string(to_python(value))
        if dispatch.runtime_type(value) not in _STRING_TYPES:
            return dispatch.no_such_overload("string", value)
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
    library_fn = runtime.dispatcher(k8s)
    strings = dispatch.guarded(k8s, (("string", "string"), ("string", "string", "int")), std)

    def fn(target: Any, *args: Any) -> Any:
        if isinstance(target, list):
            return library_fn(to_python(target), *(to_python(a) for a in args))
        return strings(target, *args)

    return fn


#: cel-go's per-overload bindings of the extensions (receiver first): arguments that fit none are
#: `no such overload: <fn>(<types>)` (strings v2, lists, sets, as Kubernetes' environment has them)
SIGNATURES: dict[str, tuple[tuple[str, ...], ...]] = {
    "charAt": (("string", "int"),),
    "lowerAscii": (("string",),),
    "upperAscii": (("string",),),
    "replace": (("string", "string", "string"), ("string", "string", "string", "int")),
    "split": (("string", "string"), ("string", "string", "int")),
    "substring": (("string", "int"), ("string", "int", "int")),
    "trim": (("string",),),
    "join": (("list(string)",), ("list(string)", "string")),
    "format": (("string", "list"),),
    "strings.quote": (("string",),),
    "slice": (("list", "int", "int"),),
    "flatten": (("list",), ("list", "int")),
    "sort": (("list",),),
    "@sortByAssociatedKeys": (("list", "list"),),
    "distinct": (("list",),),
    "reverse": (("list",),),
    "lists.range": (("int",),),
    "first": (("list",),),
    "last": (("list",),),
    "optional.unwrap": (("list(optional_type)",),),  # cel-go: list(optional_type(V))
    "unwrapOpt": (("list(optional_type)",),),
    "sets.contains": (("list", "list"),),
    "sets.equivalent": (("list", "list"),),
    "sets.intersects": (("list", "list"),),
}


def _authz_signatures() -> dict[str, tuple[tuple[str, ...], ...]]:
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for o in authz_overloads():
        out[o.function] = (*out.get(o.function, ()), o.args)
    return out


def _unreachable(*args: Any) -> Any:
    raise AssertionError("no value has an authorization type")


def _strings_only(fn: Fn) -> Fn:
    """contains / startsWith / endsWith / matches: cel-go binds them without type guards; an
    argument that is not a string is `no such overload`."""

    def call(*args: Any) -> Any:
        if not all(isinstance(a, str) for a in args):
            return error(dispatch.NO_SUCH_OVERLOAD)
        return fn(*args)

    return call


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
            "contains": _strings_only(lambda s, sub: sub in s),
            "startsWith": _strings_only(lambda s, p: s.startswith(p)),
            "endsWith": _strings_only(lambda s, p: s.endswith(p)),
            "matches": _strings_only(_matches(cache)),
            "string": _string_conv(runtime),
            "dyn": lambda v: v,
            "@not_strictly_false": lambda v: not (is_bool(v) and not v),
        }
    )
    plain["indexOf"] = _shared(runtime, "indexOf", EXTENSIONS["indexOf"])
    plain["lastIndexOf"] = _shared(runtime, "lastIndexOf", EXTENSIONS["lastIndexOf"])
    for name, signatures in SIGNATURES.items():
        plain[name] = dispatch.guarded(name, signatures, plain[name])
    for name, signatures in _authz_signatures().items():  # no value can have their types
        plain[name] = dispatch.guarded(name, signatures, _unreachable)
    plain.update(dispatch.CONVERSIONS)
    for name in (
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

    table: dict[str, Fn] = dict(OPERATORS)  # each handles error operands as cel-go does
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
            "__ck_has": _errors_first(dispatch.has),
            "__ck_select": _errors_first(dispatch.select),
            "__ck_opt_select": _errors_first(dispatch.optional_qualify),
            "__ck_opt_index": _errors_first(dispatch.optional_qualify),
            "__ck_opt_item": _propagating(_opt_item),
            "__ck_opt_list": _propagating(_opt_list),
            "__ck_opt_map": _propagating(_opt_map),
        }
    )
    return table
