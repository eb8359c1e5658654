"""cel-go's runtime dispatch for the cel-python engine: what a value of each runtime type supports, and
cel-go's words when it does not.

The front end types most of a policy's values `dyn` (objects are JSON), so whether `x + 1`, `x > 0`,
`x.name`, `has(x.name)` or `int(x)` works is decided at run time, by the value. celpy is lenient where
cel-go is strict (`true + 1` is 2 there, `int(null)` 0, `'s' || false` is 's'), and words its errors
in Python's terms. Here the operations follow cel-go v0.30 (the version Gatekeeper v3.23.1 runs):

- operators (common/stdlib/standard.go): a singleton binding guarded by a trait of the first
  operand (interpreter/interpretable.go evalBinary): without the trait the error is
  `no such overload: <operator>` (or `no such overload` when the operand is a traits.Receiver);
  with it, the operand's method decides, and an operand of the wrong type is `no such overload`;
- `||` and `&&` (evalOr, evalAnd): a non-boolean operand is `no such overload` unless the other
  operand decides; the first error wins;
- field selection, indexing and presence tests (interpreter/attributes.go refQualify): a missing key
  is `no such key: <key>`, any scalar or null selects nothing (`has()` is false, `.?f` none), a list
  takes only integral indexes (`unsupported index type 'string' in list`);
- comprehensions over a value that is not a list or map: `got '<Go type>', expected iterable type`;
- type conversions (`int`, `string`, ...; per-overload bindings guarded by their signatures,
  common/decls/decls.go): an argument of another type is `no such overload: int(list)`; the
  conversion's own errors are common/types' (`type conversion error from 'string' to 'int'`,
  `integer overflow`, `invalid RFC 3339 timestamp "x"`).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from celkeeper.cel.celpython import formatting
from celkeeper.cel.celpython.values import (
    LIBRARY_TYPE_NAMES,
    NONE,
    Optional,
    compare,
    equal,
    lookup,
    type_name,
)
from celkeeper.cel.k8slib.gostrings import go_quote, parse_go_int

Fn = Callable[..., Any]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

ADDER, COMPARER, CONTAINER, DIVIDER, MODDER = "adder", "comparer", "container", "divider", "modder"
MULTIPLIER, NEGATER, RECEIVER, SUBTRACTOR = "multiplier", "negater", "receiver", "subtractor"
TIMESTAMP, DURATION = "google.protobuf.Timestamp", "google.protobuf.Duration"

#: the traits of each runtime type (common/types/types.go, list.go, map.go)
TRAITS: dict[str, frozenset[str]] = {
    "bool": frozenset({COMPARER, NEGATER}),
    "bytes": frozenset({ADDER, COMPARER}),
    "double": frozenset({ADDER, COMPARER, DIVIDER, MULTIPLIER, NEGATER, SUBTRACTOR}),
    DURATION: frozenset({ADDER, COMPARER, NEGATER, RECEIVER, SUBTRACTOR}),
    "int": frozenset({ADDER, COMPARER, DIVIDER, MODDER, MULTIPLIER, NEGATER, SUBTRACTOR}),
    "list": frozenset({ADDER, CONTAINER}),
    "map": frozenset({CONTAINER}),
    "string": frozenset({ADDER, COMPARER, RECEIVER}),
    TIMESTAMP: frozenset({ADDER, COMPARER, RECEIVER, SUBTRACTOR}),
    "uint": frozenset({ADDER, COMPARER, DIVIDER, MODDER, MULTIPLIER, SUBTRACTOR}),
}

#: Go's %T of the runtime values (for `got '%T', expected iterable type`)
_GO_TYPES = {
    "null_type": "types.Null",
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    TIMESTAMP: "types.Timestamp",
    DURATION: "types.Duration",
    "optional_type": "*types.Optional",
    "type": "*types.Type",
}


def error(message: str) -> CELEvalError:
    return CELEvalError(message)


NO_SUCH_OVERLOAD = "no such overload"


_PLAIN_TYPES = {
    "float": "double",
    "str": "string",
    "dict": "map",
    "tuple": "list",
    "datetime": TIMESTAMP,
    "timedelta": DURATION,
    "Uint": "uint",
}


def runtime_type(v: Any) -> str:
    """The name of a value's runtime type as cel-go's TypeName() says it (celpy values, or the plain
    values the Kubernetes libraries take)."""
    if isinstance(v, type | ct.TypeType):
        return "type"
    name = type_name(v)
    return _PLAIN_TYPES.get(name, name)


def _fits(declared: str, v: Any) -> bool:
    """Type.IsAssignableRuntimeType: a list's (map's) first element (entry) stands for the others."""
    if declared == "dyn" or declared.startswith("~"):
        return True
    t = runtime_type(v)
    if declared.startswith("list("):
        return t == "list" and (not v or _fits(declared[5:-1], v[0]))
    if declared.startswith("map("):
        if t != "map":
            return False
        if not v:
            return True
        key_type, value_type = (p.strip() for p in declared[4:-1].split(",", 1))
        key = next(iter(v))
        return _fits(key_type, key) and _fits(value_type, v[key])
    return t == declared


def guarded(function: str, signatures: tuple[tuple[str, ...], ...], fn: Fn) -> Fn:
    """A function with per-overload bindings, as cel-go guards them (decls.go): arguments that fit
    no signature (receiver first) are `no such overload: fn(<types>)`."""

    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, CELEvalError):
                return a
        for signature in signatures:
            if len(signature) == len(args) and all(_fits(d, a) for d, a in zip(signature, args, strict=True)):
                return fn(*args)
        return no_such_overload(function, *args)

    call.__name__ = getattr(fn, "__name__", function)
    return call


def _traits(v: Any) -> frozenset[str]:
    return TRAITS.get(runtime_type(v), frozenset())


def no_such_overload(function: str, *args: Any) -> CELEvalError:
    """decls.MaybeNoSuchOverload: `no such overload: fn(int, list)` (an error argument wins)."""
    for a in args:
        if isinstance(a, CELEvalError):
            return a
    return error(f"{NO_SUCH_OVERLOAD}: {function}({', '.join(runtime_type(a) for a in args)})")


def key_text(key: Any) -> str:
    """Go's %v of a CEL key (`no such key: %v`)."""
    if key is None:
        return "NULL_VALUE"
    if isinstance(key, ct.BoolType | bool):
        return "true" if key else "false"
    if isinstance(key, float):
        return formatting.go_g(float(key))
    if isinstance(key, int):
        return str(int(key))
    return str(key)


# ------------------------------------------------------------------------------------ operators


def binary(name: str, trait: str, impl: Fn) -> Fn:
    """An operator as evalBinary runs a singleton binding with an operand trait."""

    def call(a: Any, b: Any) -> Any:
        if isinstance(a, CELEvalError):
            return a
        if isinstance(b, CELEvalError):
            return b
        traits = _traits(a)
        if trait in traits:
            return impl(a, b)
        return error(NO_SUCH_OVERLOAD if RECEIVER in traits else f"{NO_SUCH_OVERLOAD}: {name}")

    call.__name__ = name
    return call


def _int(v: int) -> Any:
    return ct.IntType(v) if INT64_MIN <= v <= INT64_MAX else error("integer overflow")


def _uint(v: int) -> Any:
    return ct.UintType(v) if 0 <= v <= UINT64_MAX else error("unsigned integer overflow")


def _go_div(a: int, b: int) -> int:
    """Go's integer division (truncated toward zero)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _time(op: Fn, a: Any, b: Any) -> Any:
    """Timestamp and duration arithmetic, as celpy computes it, in cel-go's words when it overflows."""
    try:
        value = op(a, b)
    except (OverflowError, ValueError):
        timestamps = TIMESTAMP in (runtime_type(a), runtime_type(b))
        return error("timestamp overflow" if timestamps else "integer overflow")
    if isinstance(value, datetime.datetime) and not isinstance(value, ct.TimestampType):
        value = ct.TimestampType(value)
    if isinstance(value, datetime.timedelta) and not isinstance(value, ct.DurationType):
        value = ct.DurationType(value)
    return value


def _arith(op: str) -> Fn:
    def impl(a: Any, b: Any) -> Any:
        ta, tb = runtime_type(a), runtime_type(b)
        if ta == "int" and tb == "int":
            x, y = int(a), int(b)
            if op in "/%" and y == 0:
                return error("division by zero" if op == "/" else "modulus by zero")
            if op == "+":
                return _int(x + y)
            if op == "-":
                return _int(x - y)
            if op == "*":
                return _int(x * y)
            q = _go_div(x, y)
            return _int(q) if op == "/" else _int(x - y * q) if q <= INT64_MAX else error("integer overflow")
        if ta == "uint" and tb == "uint":
            x, y = int(a), int(b)
            if op in "/%" and y == 0:
                return error("division by zero" if op == "/" else "modulus by zero")
            result = {"+": x + y, "-": x - y, "*": x * y, "/": x // y if y else 0, "%": x % y if y else 0}[op]
            return _uint(result)
        if ta == "double" and tb == "double" and op != "%":
            f, g = float(a), float(b)
            if op == "/":
                if g != 0.0:
                    return ct.DoubleType(f / g)
                if f == 0.0 or math.isnan(f):
                    return ct.DoubleType(math.nan)
                return ct.DoubleType(math.copysign(math.inf, f) * math.copysign(1.0, g))
            return ct.DoubleType({"+": f + g, "-": f - g, "*": f * g}[op])
        if op == "+" and ta == tb and ta in ("string", "bytes", "list"):
            if ta == "string":
                return ct.StringType(str(a) + str(b))
            if ta == "bytes":
                return ct.BytesType(bytes(a) + bytes(b))
            return ct.ListType([*a, *b])
        if op == "+" and {ta, tb} <= {TIMESTAMP, DURATION} and (ta, tb) != (TIMESTAMP, TIMESTAMP):
            return _time(lambda x, y: x + y, a, b)
        if op == "-" and (ta, tb) in ((DURATION, DURATION), (TIMESTAMP, DURATION), (TIMESTAMP, TIMESTAMP)):
            return _time(lambda x, y: x - y, a, b)
        return error(NO_SUCH_OVERLOAD)

    return impl


def negate(v: Any) -> Any:
    """`-_`: a singleton unary binding with the Negater trait; bools have it but refuse."""
    if isinstance(v, CELEvalError):
        return v
    t = runtime_type(v)
    traits = TRAITS.get(t, frozenset())
    if NEGATER not in traits:
        return error(NO_SUCH_OVERLOAD if RECEIVER in traits else f"{NO_SUCH_OVERLOAD}: -_")
    if t == "bool":
        return error(NO_SUCH_OVERLOAD)
    if t == "int":
        return _int(-int(v))
    if t == "double":
        return ct.DoubleType(-float(v))
    return _time(lambda x, _: -x, v, None)


def _relation(test: Callable[[int], bool]) -> Fn:
    def impl(a: Any, b: Any) -> Any:
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            return ct.BoolType(False)
        if not _comparable(a, b):
            return error(NO_SUCH_OVERLOAD)
        return ct.BoolType(test(compare(a, b)))

    return impl


_NUMBERS = frozenset({"int", "uint", "double"})


def _comparable(a: Any, b: Any) -> bool:
    ta, tb = runtime_type(a), runtime_type(b)
    return ta == tb or (ta in _NUMBERS and tb in _NUMBERS)


def logical_not(v: Any) -> Any:
    if isinstance(v, CELEvalError):
        return v
    if isinstance(v, ct.BoolType | bool):
        return ct.BoolType(not v)
    return error(NO_SUCH_OVERLOAD)


def _logical(stop: bool) -> Fn:
    """`||` (stop on true) and `&&` (stop on false), as evalOr / evalAnd: the first error (or
    non-boolean operand, as `no such overload`) is the result unless an operand decides."""

    def call(a: Any, b: Any) -> Any:
        first: Any = None
        for v in (a, b):
            if isinstance(v, ct.BoolType | bool):
                if bool(v) is stop:
                    return ct.BoolType(stop)
            elif first is None:
                first = v if isinstance(v, CELEvalError) else error(NO_SUCH_OVERLOAD)
        return first if first is not None else ct.BoolType(not stop)

    return call


def contains(item: Any, container: Any) -> Any:
    """`@in` (inAggregate): lists and maps only."""
    if isinstance(item, CELEvalError):
        return item
    if isinstance(container, CELEvalError):
        return container
    if isinstance(container, list):
        return ct.BoolType(any(equal(item, x) for x in container))
    if isinstance(container, dict):
        return ct.BoolType(lookup(container, item)[0])
    return error(NO_SUCH_OVERLOAD)


OPERATORS: dict[str, Fn] = {
    "_+_": binary("_+_", ADDER, _arith("+")),
    "_-_": binary("_-_", SUBTRACTOR, _arith("-")),
    "_*_": binary("_*_", MULTIPLIER, _arith("*")),
    "_/_": binary("_/_", DIVIDER, _arith("/")),
    "_%_": binary("_%_", MODDER, _arith("%")),
    "_<_": binary("_<_", COMPARER, _relation(lambda c: c < 0)),
    "_<=_": binary("_<=_", COMPARER, _relation(lambda c: c <= 0)),
    "_>_": binary("_>_", COMPARER, _relation(lambda c: c > 0)),
    "_>=_": binary("_>=_", COMPARER, _relation(lambda c: c >= 0)),
    "-_": negate,
    "!_": logical_not,
    "_||_": _logical(True),
    "_&&_": _logical(False),
    "_in_": contains,
}


# ------------------------------------------------------------------------ selection and indexing


def _list_index(key: Any) -> int | CELEvalError:
    """types.IndexOrError."""
    t = runtime_type(key)
    if t in ("int", "uint"):
        return int(key)
    if t == "double":
        f = float(key)
        if f.is_integer() and INT64_MIN <= f <= INT64_MAX:
            return int(f)
        return error(f"unsupported index value {formatting.go_g(f)} in list")
    return error(f"unsupported index type '{t}' in list")


def qualify(value: Any, key: Any, presence: bool) -> tuple[bool, Any]:
    """refQualify: (found, value), or (False, error). `presence`: a presence test (has(), `.?`,
    `[?]`), where a missing key or a value that cannot hold one is not found, without an error."""
    if isinstance(value, CELEvalError):
        return False, value
    if isinstance(value, dict):
        found, item = lookup(value, key)
        if found:
            return True, item
        return False, None if presence else error(f"no such key: {key_text(key)}")
    if isinstance(value, list):
        index = _list_index(key)
        if isinstance(index, CELEvalError):
            return False, index
        if 0 <= index < len(value):
            return True, value[index]
        return False, None if presence else error(f"index out of bounds: {key_text(key)}")
    return False, None if presence else error(f"no such key: {key_text(key)}")


def select(value: Any, field: str) -> Any:
    return qualify(value, ct.StringType(field), False)[1]


def index(value: Any, key: Any) -> Any:
    if isinstance(key, CELEvalError):
        return key
    return qualify(value, key, False)[1]


def has(value: Any, field: str) -> Any:
    found, item = qualify(value, ct.StringType(field), True)
    return item if isinstance(item, CELEvalError) else ct.BoolType(found)


def optional_qualify(value: Any, key: Any) -> Any:
    """`v.?f`, `v[?k]`: optional.none() when v (or the optional it holds) has nothing there."""
    if isinstance(key, CELEvalError):
        return key
    if isinstance(value, Optional):
        if not value.present:
            return NONE
        value = value.value
    found, item = qualify(value, key, True)
    if isinstance(item, CELEvalError):
        return item
    return Optional(item) if found else NONE


def not_iterable(value: Any) -> CELEvalError:
    """A comprehension's range that is not a list or map (evalFold)."""
    if isinstance(value, CELEvalError):
        return value
    t = runtime_type(value)
    go = _GO_TYPES.get(t) or _library_go_type(value)
    return error(f"got '{go}', expected iterable type")


def _library_go_type(value: Any) -> str:
    name = LIBRARY_TYPE_NAMES.get(type(value), type(value).__name__)
    return {
        "kubernetes.Quantity": "cel.Quantity",
        "net.IP": "cel.IP",
        "net.CIDR": "cel.CIDR",
        "kubernetes.URL": "cel.URL",
        "kubernetes.Semver": "cel.Semver",
    }.get(name, name)


# ----------------------------------------------------------------------------------- conversions

_GO_FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE)
_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9}
_UNITS["h"] = 3600 * 10**9
_DURATION_PART = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
_RFC3339 = re.compile(
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[Tt]([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?"
    r"([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)\Z"
)
MIN_UNIX, MAX_UNIX = -62135596800, 253402300799
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _conversion_error(source: str, target: str) -> CELEvalError:
    return error(f"type conversion error from '{source}' to '{target}'")


def parse_go_duration(text: str) -> int | None:
    """time.ParseDuration in nanoseconds, or None where Go refuses the text."""
    s = text
    neg = False
    if s[:1] in ("+", "-"):
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        return None
    total = 0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None or (not m.group(1) and not m.group(2)):
            return None
        whole = int(m.group(1) or "0")
        frac = m.group(2) or ""
        unit = _UNITS[m.group(3)]
        nanos = whole * unit
        if frac:
            nanos += int(frac) * unit // 10 ** len(frac)
        total += nanos
        if total > 2**63 - (0 if neg else 1):
            return None
        pos = m.end()
    return -total if neg else total


def _to_int(v: Any) -> Any:
    t = runtime_type(v)
    if t == "int":
        return v
    if t == "uint":
        return _int(int(v))
    if t == "double":  # doubleToInt64Checked
        f = float(v)
        if math.isnan(f) or not -(2.0**63) < f < 2.0**63:
            return error("integer overflow")
        return _int(int(f))
    if t == "string":
        n = parse_go_int(str(v))
        return _conversion_error("string", "int") if n is None else ct.IntType(n)
    if t == TIMESTAMP:  # Unix seconds (floored, as Go's Time.Unix)
        return ct.IntType((v - _EPOCH) // datetime.timedelta(seconds=1))
    if t == DURATION:
        return ct.IntType(v // datetime.timedelta(microseconds=1) * 1000)
    return no_such_overload("int", v)


def _to_uint(v: Any) -> Any:
    t = runtime_type(v)
    if t == "uint":
        return v
    if t == "int":
        return _uint(int(v))
    if t == "double":  # doubleToUint64Checked
        f = float(v)
        if math.isnan(f) or not 0.0 <= f < 2.0**64:
            return error("unsigned integer overflow")
        return _uint(int(f))
    if t == "string":
        n = parse_go_int(str(v), unsigned=True)
        return _conversion_error("string", "uint") if n is None else ct.UintType(n)
    return no_such_overload("uint", v)


def _to_double(v: Any) -> Any:
    t = runtime_type(v)
    if t == "double":
        return v
    if t in ("int", "uint"):
        return ct.DoubleType(float(int(v)))
    if t == "string":  # strconv.ParseFloat: a finite text out of range is an error
        s = str(v)
        if not _GO_FLOAT.match(s):
            return _conversion_error("string", "double")
        f = float(s)
        if math.isinf(f) and "inf" not in s.lower():
            return _conversion_error("string", "double")
        return ct.DoubleType(f)
    return no_such_overload("double", v)


def _to_bool(v: Any) -> Any:
    t = runtime_type(v)
    if t == "bool":
        return v
    if t == "string":
        found = _GO_BOOLS.get(str(v))
        return _conversion_error("string", "bool") if found is None else ct.BoolType(found)
    return no_such_overload("bool", v)


def _to_bytes(v: Any) -> Any:
    t = runtime_type(v)
    if t == "bytes":
        return v
    if t == "string":
        return ct.BytesType(str(v).encode("utf-8", "surrogatepass"))
    return no_such_overload("bytes", v)


def _to_duration(v: Any) -> Any:
    t = runtime_type(v)
    if t == DURATION:
        return v
    if t == "string":
        nanos = parse_go_duration(str(v))
        if nanos is None:
            return _conversion_error("string", DURATION)
        return ct.DurationType(datetime.timedelta(microseconds=_go_div(nanos, 1000)))
    return no_such_overload("duration", v)


def _to_timestamp(v: Any) -> Any:
    t = runtime_type(v)
    if t == TIMESTAMP:
        return v
    if t == "int":
        if not MIN_UNIX <= int(v) <= MAX_UNIX:
            return error("timestamp overflow")
        return ct.TimestampType(_EPOCH + datetime.timedelta(seconds=int(v)))
    if t == "string":
        return _parse_timestamp(str(v))
    return no_such_overload("timestamp", v)


def _parse_timestamp(s: str) -> Any:
    """String.ConvertToType(TimestampType): strict RFC 3339, in the years 1 to 9999 (UTC)."""
    m = _RFC3339.match(s)
    if m is None:
        return error(f"invalid RFC 3339 timestamp {go_quote(s)}")
    try:  # time.Parse: calendar checks (day of month, leap years; no leap second)
        date = datetime.datetime.strptime(s[:19].upper(), "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return _conversion_error("string", TIMESTAMP)
    fraction = m.group(5) or ""
    zone = m.group(6).upper()
    offset = datetime.timedelta(0)
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        offset = sign * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    seconds = (date - datetime.datetime(1970, 1, 1)) // datetime.timedelta(seconds=1)
    unix = seconds - offset // datetime.timedelta(seconds=1)
    if not MIN_UNIX <= unix <= MAX_UNIX:
        return error("timestamp overflow")
    micros = int((fraction[1:] + "000000")[:6]) if fraction else 0
    return ct.TimestampType(_EPOCH + datetime.timedelta(seconds=unix, microseconds=micros))


#: the conversions, by name: a function of one argument returning the value or an error (None:
#: the argument is valid; the caller converts it)
CONVERSIONS: dict[str, Fn] = {
    "int": _to_int,
    "uint": _to_uint,
    "double": _to_double,
    "bool": _to_bool,
    "bytes": _to_bytes,
    "duration": _to_duration,
    "timestamp": _to_timestamp,
}
