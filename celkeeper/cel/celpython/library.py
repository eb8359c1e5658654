"""The Kubernetes libraries (pure Python, `celkeeper.cel.k8slib`) as the cel-python engine calls them.

`binding.bind` rewrites checked trees to call internal functions (`@k8s.<overload id>`,
`@k8s.fn.<function>`, `@k8s.eq.<type>`, `@ck.*`); a `LibraryRuntime` implements them for one engine.
Its state (memoised constructor results, compiled
find/findAll patterns) belongs to that runtime; the modules hold only constants (the implementations
themselves are the constant table `celkeeper.cel.celpython.overloads.IMPLEMENTATIONS`). Memoising changes
speed, never results: every memoised function is pure, and errors are not memoised.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from celkeeper.cel.celpython import dispatch, formatting
from celkeeper.cel.celpython.binding import (
    DURATION_STRING,
    FORMAT,
    INTERNAL_SIGNATURES,
    K8S_NAMES,
    MAP_INSERT,
    OPTIONAL_RESULTS,
    SHARED_NAMES,
)
from celkeeper.cel.celpython.environment import FUNCTIONS, OPAQUE_TYPES, Overload
from celkeeper.cel.celpython.overloads import EQUALITY, IMPLEMENTATIONS
from celkeeper.cel.celpython.values import LIBRARY_TYPE_NAMES
from celkeeper.cel.k8slib import LibraryError, lists, regex
from celkeeper.cel.k8slib.celvalues import Uint

__all__ = [
    "DURATION_STRING",
    "FORMAT",
    "INTERNAL_SIGNATURES",
    "MAP_INSERT",
    "OPTIONAL_RESULTS",
    "SHARED_NAMES",
    "Impl",
    "LibraryRuntime",
    "clean_error",
    "map_insert",
]

_STATUS = re.compile(r"^(?:[A-Z_]+: )+")
_SUFFIX = re.compile(r"\s*\[[A-Z_]+\]$")

Impl = Callable[..., Any]

#: constructors and predicates over strings (pure, costly to parse): results memoised per runtime
MEMOISED = frozenset(
    {
        "string_to_quantity",
        "is_quantity_string",
        "string_to_url",
        "is_url_string",
        "string_to_ip",
        "is_ip",
        "string_to_cidr",
        "is_cidr",
        "string_to_semver",
        "string_bool_to_semver",
        "is_semver_string",
        "is_semver_string_bool",
    }
)
#: entries of each memo table (one per memoised function) and of the compiled-pattern table of a
#: runtime; a full table is emptied
MEMO_SIZE = 1024
#: string arguments longer than this are not memoised
MAX_MEMO_TEXT = 256
#: declared result types whose values never need encoding for the engines
_SCALAR_RESULTS = frozenset(
    {"bool", "int", "uint", "double", "string", "google.protobuf.Duration", "google.protobuf.Timestamp"}
)


def clean_error(message: str) -> str:
    """An engine's error text without status-code prefixes or bracketed suffixes."""
    return _SUFFIX.sub("", _STATUS.sub("", message.strip()))


_PLAIN_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "uint": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "double": lambda v: isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
}


def _matches(overload: Overload, args: tuple[Any, ...], type_of: Callable[[Any], str | None]) -> bool:
    """Whether run-time `args` fit `overload` (`type_of`: the library type of a value, or None), as
    cel-go's type guards decide (a list's first element stands for the others)."""
    if len(args) != len(overload.args):
        return False
    for t, v in zip(overload.args, args, strict=True):
        if t in OPAQUE_TYPES:
            if type_of(v) != t:
                return False
        elif t.startswith("list("):
            if not isinstance(v, list):
                return False
            elem = t[5:-1]
            check = _PLAIN_CHECKS.get(elem)
            if v and check is not None and not check(v[0]):
                return False
            if v and elem == "string" and type_of(v[0]) is not None:
                return False
        else:
            check = _PLAIN_CHECKS.get(t)
            if check is not None and not check(v):
                return False
            if t == "string" and type_of(v) is not None:
                return False
    return True


def _bytes(value: Any) -> Any:
    """`value` with every bytearray in it as bytes (k8slib wants bytes)."""
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [_bytes(v) for v in value]
    if isinstance(value, dict):
        return {_bytes(k): _bytes(v) for k, v in value.items()}
    return value


def _uint(value: Any) -> Any:
    value = _bytes(value)
    return Uint(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _uint_list(value: Any) -> Any:
    value = _bytes(value)
    if isinstance(value, list):
        return [Uint(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


def _insert(out: dict[Any, Any], items: Any) -> None:
    for k, v in items:
        if k in out:
            raise LibraryError(f"insert failed: key {k} already exists")
        out[k] = v


def map_insert(m: dict[Any, Any], key: Any, value: Any = None, *rest: Any) -> dict[Any, Any]:
    """cel.@mapInsert(map, key, value) and cel.@mapInsert(map, map)."""
    out = dict(m)
    _insert(out, key.items() if isinstance(key, dict) and value is None and not rest else [(key, value)])
    return out


def _applier(fn: Impl, coercers: tuple[Callable[[Any], Any], ...]) -> Impl:
    """`fn` over its arguments coerced (one coercer per declared parameter; the engine calls internal
    functions with exactly the declared arity)."""
    if len(coercers) == 1:
        (c0,) = coercers
        return lambda a: fn(c0(a))
    if len(coercers) == 2:
        c0, c1 = coercers
        return lambda a, b: fn(c0(a), c1(b))
    return lambda *args: fn(*[c(a) for c, a in zip(coercers, args, strict=True)])


def _memoised(impl: Impl, arity: int) -> Impl:
    """`impl` (pure) remembering its results for short string (and bool) arguments, in a table of its
    own (a closure: it belongs to the runtime that builds the implementation). Errors raise: they are
    never remembered."""
    memo: dict[Any, Any] = {}

    def remember(key: Any, args: tuple[Any, ...]) -> Any:
        hit = memo.get(key)
        if hit is None:
            hit = impl(*args)
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[key] = hit
        return hit

    if arity == 1:

        def memoised_1(a: Any) -> Any:
            if type(a) is str and len(a) <= MAX_MEMO_TEXT:
                hit = memo.get(a)
                return hit if hit is not None else remember(a, (a,))
            return impl(a)

        return memoised_1

    def memoised(*args: Any) -> Any:
        for a in args:
            if not (type(a) is bool or (type(a) is str and len(a) <= MAX_MEMO_TEXT)):
                return impl(*args)
        return remember(args, args)

    return memoised


def _guard(overload: Overload, fn: Impl, type_of: Callable[[Any], str | None]) -> Impl:
    """An overload's implementation behind cel-go's type guard (the checker may have chosen it for
    `dyn` arguments: the run-time values decide)."""

    def guarded(*args: Any) -> Any:
        if not _matches(overload, args, type_of):
            raise LibraryError(_no_such_overload(overload.function, args))
        return fn(*args)

    return guarded


def _no_such_overload(function: str, args: tuple[Any, ...]) -> str:
    return str(dispatch.no_such_overload(function, *args).args[0])


class NoSuchOverload(LibraryError):
    def __init__(self) -> None:
        super().__init__("no such overload")


_CLASSES = {name: cls for cls, name in LIBRARY_TYPE_NAMES.items()}


def library_type(value: Any) -> str | None:
    """The CEL type name of a library value (a k8slib object), or None for any other value."""
    return LIBRARY_TYPE_NAMES.get(type(value))


class ObjectCodec:
    """Library values in the engine are the k8slib objects themselves (celpy holds Python objects):
    encoding is the identity and decoding checks the type (a value of another type is `no such
    overload`, as in Kubernetes)."""

    @staticmethod
    def encode(value: Any, payload: str | None = None) -> Any:
        del payload
        return value

    @staticmethod
    def decoder(type_name: str) -> Callable[[Any], Any]:
        cls = _CLASSES[type_name]

        def decode(value: Any) -> Any:
            if type(value) is not cls:
                raise NoSuchOverload()
            return value

        return decode

    @staticmethod
    def type_of(value: Any) -> str | None:
        return library_type(value)

    @staticmethod
    def decode_any(value: Any) -> Any:
        return value

    @staticmethod
    def decode_result(value: Any) -> Any:
        return value


class LibraryRuntime:
    """The internal functions of bound trees, for one engine (see the module docstring).

    Thread safety: may be shared by the threads of one process (the tables are dicts, emptied
    when full; every cached value is immutable)."""

    def __init__(self) -> None:
        self.codec = ObjectCodec()
        self._patterns: dict[str, Any] = {}
        self._table = dict(IMPLEMENTATIONS)
        self._table["string_find_string"] = self._find
        self._table["string_find_all_string"] = self._find_all
        self._table["string_find_all_string_int"] = self._find_all
        self._impls: dict[str, Impl] = {oid: self._implementation(oid) for oid in FUNCTIONS}

    # ------------------------------------------------------------------------- find / findAll

    def _pattern(self, pattern: str) -> Any:
        prog = self._patterns.get(pattern) if type(pattern) is str else None
        if prog is None:
            prog = regex.compile_pattern(pattern)
            if type(pattern) is str and len(pattern) <= MAX_MEMO_TEXT * 4:
                if len(self._patterns) >= MEMO_SIZE:
                    self._patterns.clear()
                self._patterns[pattern] = prog
        return prog

    def _find(self, s: str, pattern: str) -> str:
        return regex.find_compiled(self._pattern(pattern), s)

    def _find_all(self, s: str, pattern: str, n: int = -1) -> list[str]:
        return regex.find_all_compiled(self._pattern(pattern), s, n)

    # ------------------------------------------------------------------------ @k8s.<overload>

    def _coercer(self, declared: str) -> Callable[[Any], Any]:
        """An engine value as the k8slib value the declared parameter type asks for."""
        if declared in OPAQUE_TYPES:
            return self.codec.decoder(declared)
        if declared == "uint":
            return _uint
        if declared == "list(uint)":
            return _uint_list
        if declared.startswith(("list(", "~")):
            decode_any = self.codec.decode_any
            return lambda v: decode_any(_bytes(v))
        return _bytes

    def implementation(self, overload_id: str) -> Impl:
        """`@k8s.<overload id>`: checks the library arguments' types, calls k8slib.

        Raises LibraryError (Kubernetes' message) for CEL errors; the engine turns it into an error value.
        Results may be shared between calls: callers must not change them.
        """
        return self._impls[overload_id]

    def _implementation(self, overload_id: str, guard: bool = True) -> Impl:
        overload = FUNCTIONS[overload_id]
        fn = self._table.get(overload_id)
        name = "k8s_" + re.sub(r"\W", "_", overload_id)
        if fn is None:

            def missing(*args: Any) -> Any:
                raise LibraryError(f"{overload.function}: not implemented in this build of celkeeper")

            missing.__name__ = name
            return missing
        coercers = tuple(self._coercer(t) for t in overload.args)
        apply = _applier(fn, coercers)
        if guard:
            apply = _guard(overload, apply, self.codec.type_of)
        encode = self.codec.encode
        impl: Impl
        if overload_id == "string_to_url":  # the URL keeps its source text as its payload

            def impl(s: Any) -> Any:
                return encode(apply(s), str(s))

        elif overload_id in OPTIONAL_RESULTS:  # None is optional.none

            def impl(*args: Any) -> Any:
                result = apply(*args)
                return None if result is None else encode(result)

        elif overload.result in _SCALAR_RESULTS:
            impl = apply
        else:

            def impl(*args: Any) -> Any:
                return encode(apply(*args))

        if overload_id in MEMOISED:
            impl = _memoised(impl, len(overload.args))
        impl.__name__ = name
        return impl

    # ----------------------------------------------------------------- other internal functions

    def dispatcher(self, function: str) -> Impl:
        """`@k8s.fn.<function>`: the overload whose argument types match the run-time values; none
        matching is `no such overload: <function>(<types>)`, as cel-go's type guards say it."""
        candidates = [o for o in FUNCTIONS.values() if o.function == function]
        if function in ("sum", "isSorted", "min", "max"):
            # on a list(dyn) the library dispatches on the elements itself
            codec = self.codec
            if function == "sum":
                one: Impl = lambda values: codec.encode(lists.sum_(codec.decode_any(_bytes(values))))  # noqa: E731
            else:  # one implementation for every element type (any list reaches it)
                one = self._implementation(candidates[0].id, guard=False)

            def on_lists(values: Any) -> Any:
                if not isinstance(values, list):
                    raise LibraryError(_no_such_overload(function, (values,)))
                return one(values)

            return on_lists
        impls = [(o, self._impls[o.id]) for o in candidates]
        type_of = self.codec.type_of

        def impl(*args: Any) -> Any:
            for o, fn in impls:
                if _matches(o, args, type_of):
                    return fn(*args)
            raise LibraryError(_no_such_overload(function, args))

        return impl

    def equality(self, type_name: str, negate: bool) -> Impl:
        """`==` / `!=` between two values the checker typed `type_name` (Kubernetes' Equal)."""
        eq = EQUALITY[type_name][1 if negate else 0]
        decode = self.codec.decoder(type_name)

        def impl(a: Any, b: Any) -> Any:
            return eq(decode(a), decode(b))

        return impl

    def opaque_string(self, value: Any) -> Any:
        """`string(x)` of an engine-form IP or CIDR (the overloads `string` shares with the stdlib)."""
        t = self.codec.type_of(value)
        oid = {"net.IP": "ip_to_string", "net.CIDR": "cidr_to_string"}.get(t or "")
        if oid is None:
            raise NoSuchOverload()
        return self._impls[oid](value)

    def string_of_string(self, value: str) -> str:
        """`string(s)` of a run-time value that may be a library value: an IP's or CIDR's text, an error for
        another library value (no such overload, as in Kubernetes), else `s` itself."""
        if self.codec.type_of(value) is None:
            return value
        return str(self.opaque_string(value))

    def internal_functions(self) -> dict[str, Impl]:
        """Every internal function a bound tree may call (besides the shared-name overloads)."""
        out: dict[str, Impl] = {
            MAP_INSERT: map_insert,
            FORMAT: lambda fmt, args: formatting.string_format(str(fmt), list(_bytes(args))),
            DURATION_STRING: formatting.duration_text,
        }
        for oid in FUNCTIONS:
            out["@k8s." + oid] = self._impls[oid]
        for name in K8S_NAMES:
            out["@k8s.fn." + name] = self.dispatcher(name)
        for t in OPAQUE_TYPES:
            out[f"@k8s.eq.{t}"] = self.equality(t, False)
            out[f"@k8s.ne.{t}"] = self.equality(t, True)
        return out
