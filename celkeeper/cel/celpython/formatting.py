"""cel-go's `<string>.format(<list>)` (ext/formatting.go, cel-go v0.26 as Kubernetes 1.34 uses it)
and the CEL string forms it relies on, for the cel-python engine (the cel-go engine runs cel-go's own).

Quirks reproduced on purpose: `%f` groups thousands (golang.org/x/text, locale en_US); `%e` prints
`1.234500\u00d710⁰³` (a multiplication sign, superscript exponent) and treats the precision as a
field width (`%.2e` keeps six decimals); inside lists and maps, strings are quoted, doubles print
with six decimals, durations and timestamps as `duration("...")` / `timestamp("...")`, and map
entries sort by their printed key.

Values: bool, int, Uint, float, str, bytes, None, list, dict, datetime, timedelta.
"""

from __future__ import annotations

import datetime
import math
from decimal import Decimal
from typing import Any

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.celvalues import kind
from celkeeper.cel.k8slib.gostrings import go_quote

_TIMES = "\u00d7"  # MULTIPLICATION SIGN, as x/text prints scientific notation
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def go_g(f: float) -> str:
    """Go's strconv.FormatFloat(f, 'g', -1, 64): CEL's string(double)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = Decimal(repr(f)).normalize().as_tuple()
    text = "".join(str(d) for d in digits)
    nd = len(text)
    dp = int(exponent) + nd  # position of the decimal point
    exp = dp - 1
    neg = "-" if sign else ""
    if exp < -4 or exp >= 6:  # shortest: Go decides with a precision of 6
        mantissa = text[0] + ("." + text[1:] if nd > 1 else "")
        return f"{neg}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if dp <= 0:
        return f"{neg}0.{'0' * -dp}{text}"
    if dp >= nd:
        return f"{neg}{text}{'0' * (dp - nd)}"
    return f"{neg}{text[:dp]}.{text[dp:]}"


def duration_text(d: datetime.timedelta) -> str:
    """cel-go's string(duration): seconds with the shortest decimals, e.g. 1.5s, -5400s."""
    micros = d // datetime.timedelta(microseconds=1)
    seconds = Decimal(micros) / Decimal(1_000_000)
    text = format(seconds.normalize(), "f")
    return f"{text}s"


def timestamp_text(t: datetime.datetime) -> str:
    """RFC 3339 with the shortest fraction (Go's time.RFC3339Nano), in UTC."""
    if t.tzinfo is not None:
        t = t.astimezone(datetime.UTC)
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    if t.microsecond:
        base += "." + f"{t.microsecond:06d}".rstrip("0")
    return base + "Z"


_CELPY_TYPES = {
    "BoolType": "bool",
    "IntType": "int",
    "UintType": "uint",
    "DoubleType": "double",
    "StringType": "string",
    "BytesType": "bytes",
    "ListType": "list",
    "MapType": "map",
    "TimestampType": "google.protobuf.Timestamp",
    "DurationType": "google.protobuf.Duration",
    "NoneType": "null_type",
    "TypeType": "type",
}


def type_value_name(v: Any) -> str | None:
    """The CEL name of a type value (`type(1)` is int): cel-python hands over the value class itself."""
    if isinstance(v, type):
        return _CELPY_TYPES.get(v.__name__, v.__name__)
    return None


#: celvalues.kind's names that Kubernetes' format errors spell out in full
_FORMAT_KINDS = {"timestamp": "google.protobuf.Timestamp", "duration": "google.protobuf.Duration"}


def _kind(v: Any) -> str:
    """celvalues.kind, with type values, bytearray (as bytes) and the full names of timestamps and
    durations."""
    if type_value_name(v) is not None:
        return "type"
    if isinstance(v, bytearray):
        return "bytes"
    k = kind(v)
    return _FORMAT_KINDS.get(k, k)


def string_of(v: Any) -> str:
    """FormatString: the %s of one value."""
    k = _kind(v)
    if k == "list":
        return _format_list(v)
    if k == "map":
        return _format_map(v)
    if k == "null":
        return "null"
    if k == "bool":
        return "true" if v else "false"
    if k in ("int", "uint"):
        return str(int(v))
    if k == "double":
        return go_g(float(v))
    if k == "string":
        return str(v)
    if k == "bytes":
        return bytes(v).decode("utf-8", errors="replace")
    if k == "google.protobuf.Timestamp":
        return timestamp_text(v)
    if k == "google.protobuf.Duration":
        return duration_text(v)
    if k == "type":
        return str(type_value_name(v))
    raise LibraryError(
        "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
        f"durations, and timestamps, was given {k}"
    )


def _member(v: Any) -> str:
    """A list element or map value: clauseForType, then quoteForCEL."""
    k = _kind(v)
    if k == "double":
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return go_quote(go_g(f))
        return f"{f:.6f}"
    if k == "google.protobuf.Timestamp":
        return f'timestamp("{timestamp_text(v)}")'
    if k == "google.protobuf.Duration":
        return f'duration("{duration_text(v)}")'
    text = string_of(v)
    if k == "string":
        return go_quote(text)
    if k == "bytes":
        return "b" + go_quote(text)
    return text


def _format_list(items: Any) -> str:
    return "[" + ", ".join(_member(v) for v in items) + "]"


def _format_map(m: Any) -> str:
    pairs = []
    for key, value in m.items():
        k = _kind(key)
        if k not in ("string", "bool", "int", "uint"):
            raise LibraryError(f"no formatting function for map key of type {k}")
        key_text = go_quote(str(key)) if k == "string" else string_of(key)
        pairs.append((key_text, _member(value)))
    pairs.sort(key=lambda p: p[0].encode("utf-8"))
    return "{" + ", ".join(f"{k}:{v}" for k, v in pairs) + "}"


def _grouped(text: str) -> str:
    """x/text's en_US digit grouping of a %f result."""
    sign = "-" if text.startswith("-") else ""
    body = text[len(sign) :]
    whole, dot, frac = body.partition(".")
    groups: list[str] = []
    while len(whole) > 3:
        groups.insert(0, whole[-3:])
        whole = whole[:-3]
    groups.insert(0, whole)
    return sign + ",".join(groups) + dot + frac


def _float_arg(v: Any, clause: str) -> float:
    if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
        return float(v.replace("Infinity", "inf"))
    if _kind(v) != "double":
        name = "fixed-point" if clause == "f" else "scientific"
        raise LibraryError(f"{name} clause can only be used on doubles, was given {_kind(v)}")
    return float(v)


def _special(f: float) -> str | None:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "∞" if f > 0 else "-∞"
    return None


def _fixed(v: Any, precision: int | None) -> str:
    f = _float_arg(v, "f")
    return _special(f) or _grouped(f"{f:.{6 if precision is None else precision}f}")


def _scientific(v: Any, precision: int | None) -> str:
    f = _float_arg(v, "e")
    width = 6 if precision is None else precision  # cel-go builds "%<precision>e": a width
    text = _special(f)
    if text is None:
        mantissa, _, exponent = f"{f:.6e}".partition("e")
        sign = "-" if exponent.startswith("-") else ""
        digits = exponent.lstrip("+-")
        text = f"{mantissa}{_TIMES}10{(sign + digits).translate(_SUPERSCRIPT)}"
    return text.rjust(width)


def _clause(verb: str, precision: int | None, arg: Any) -> str:
    k = _kind(arg)
    if verb == "s":
        return string_of(arg)
    if verb == "d":
        if k not in ("int", "uint"):
            raise LibraryError(f"decimal clause can only be used on integers, was given {k}")
        return str(int(arg))
    if verb == "f":
        return _fixed(arg, precision)
    if verb == "e":
        return _scientific(arg, precision)
    if verb == "b":
        if k == "bool":
            return "1" if arg else "0"
        if k not in ("int", "uint"):
            raise LibraryError(f"only integers and bools can be formatted as binary, was given {k}")
        return format(int(arg), "b")
    if verb in "xX":
        if k in ("string", "bytes"):
            data = arg.encode("utf-8") if k == "string" else bytes(arg)
            text = data.hex()
        elif k in ("int", "uint"):
            text = format(int(arg), "x")
        else:
            raise LibraryError(
                f"only integers, byte buffers, and strings can be formatted as hex, was given {k}"
            )
        return text.upper() if verb == "X" else text
    if verb == "o":
        if k not in ("int", "uint"):
            raise LibraryError(f"octal clause can only be used on integers, was given {k}")
        return format(int(arg), "o")
    raise LibraryError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')


def string_format(fmt: str, args: list[Any]) -> str:
    """`fmt.format(args)`, errors as cel-go words them."""
    out: list[str] = []
    data = fmt
    i = 0
    used = 0
    while i < len(data):
        ch = data[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        if i + 1 < len(data) and data[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if i + 1 >= len(data):
            raise LibraryError("unexpected end of string")
        if used >= len(args):
            raise LibraryError(f"index {used} out of range")
        j = i + 1
        precision = None
        if data[j] == ".":
            j += 1
            start = j
            while j < len(data) and data[j].isascii() and data[j].isdigit():
                j += 1
            if j >= len(data):
                raise LibraryError(
                    "could not parse formatting clause: error while parsing precision: "
                    "could not find end of precision specifier"
                )
            precision = int(data[start:j] or "0")
        verb = data[j]
        try:
            out.append(_clause(verb, precision, args[used]))
        except LibraryError as err:
            if err.message.startswith("could not parse"):
                raise
            raise LibraryError(f"error during formatting: {err.message}") from None
        used += 1
        i = j + 1
    return "".join(out)
