"""YAML scalars and map keys as kubectl reads them, for the object reader (documents/stream.py).

kubectl reads a manifest with sigs.k8s.io/yaml v1.6.0: go-yaml v2 (go.yaml.in/yaml/v2 v2.4.4) decodes each
document into Go values by its YAML 1.1-like rules (resolve.go: `resolve`; decode.go: `scalar`,
`mapping`, `merge`), sigs.k8s.io/yaml turns them into JSON (yaml.go: `convertToJSONableObject`, then
encoding/json's Marshal), and kubectl decodes that JSON as unstructured data (k8s.io/apimachinery
util/json: a number is an int64 when its JSON text is an integer that fits, else a float64). What an
object's policy sees is that last value; this module gives it for one scalar, in the same steps:

- plain scalars without a tag: `y`/`Y`/`yes`/`on`/`true`... are booleans, `n`/`no`/`off`/`false`...
  too, `~`/`null`/empty are null; numbers as Go's strconv reads them after removing `_` (`0777` and
  `0o777` octal, `0x` hex, `0b` binary, signs, `1e3`, `.5`), an integer over int64 an uint64, a decimal
  beyond both a float; `.inf`/`.nan` are floats (no JSON value: the document is refused, as encoding/json
  refuses them); timestamps and everything else stay strings as written;
- quoted and block scalars are strings; `!` (the non-specific tag) and tags of other names give the text;
  `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!timestamp` resolve the text (quoted too) and refuse
  what is not of their type (go-yaml's `cannot decode !!str `x` as a !!int`); `!!binary` is base64;
- numbers as JSON carries them: a float whose JSON text is an integer is an int (`1.0`, `1e3`), an
  uint64 a float;
- map keys: strings as the value would be read, booleans `"true"`/`"false"`, integers in decimal,
  floats as Go's `FormatFloat(f, 'g', -1, 32)` writes them; a null key or an uint64 one is refused.

Each function raises ScalarError with go-yaml's or encoding/json's words; the reader locates it.
tests/documents/test_stream_kubectl.py compares the reader's objects with real kubectl's on a corpus of
every scalar form.
"""

from __future__ import annotations

import binascii
import math
import re
import struct
from typing import Any

TAG = "tag:yaml.org,2002:"
MERGE_TAG = TAG + "merge"
_INT64_MIN, _INT64_END, _UINT64_END = -(1 << 63), 1 << 63, 1 << 64


class ScalarError(Exception):
    """A scalar or key kubectl does not read (its words)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _words() -> dict[str, tuple[str, Any]]:
    """go-yaml's resolveMap: the words a plain scalar is looked up by (resolve.go, init)."""
    table: dict[str, tuple[str, Any]] = {}
    for value, tag, words in (
        (True, "bool", ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")),
        (False, "bool", ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")),
        (None, "null", ("", "~", "null", "Null", "NULL")),
        (math.nan, "float", (".nan", ".NaN", ".NAN")),
        (math.inf, "float", (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")),
        (-math.inf, "float", ("-.inf", "-.Inf", "-.INF")),
        ("<<", "merge", ("<<",)),
    ):
        table.update(dict.fromkeys(words, (tag, value)))
    return table


_WORDS = _words()

#: resolveTable's hints: the first characters resolve looks further at ("" too: null)
_SIGN_OR_DIGIT = frozenset("+-0123456789")
_LOOKED_AT = frozenset("yYnNtTfFoO~.") | _SIGN_OR_DIGIT
#: the fast path (what plain() and plain_key() give, in fewer steps): a plain scalar is one of the
#: words of PLAIN_WORDS (booleans, nulls), or a number, an infinity, NaN or a text if it starts with one
#: of NUMBER_FIRST (plain_number), or its own text; a plain key is its own text unless it is one of
#: KEY_WORDS or starts with one of NUMBER_FIRST
#: how every number resolve reads ends (`_`: removed; infinities and NaN are words)
_NUMBER_LAST = frozenset("0123456789abcdefABCDEF._")
PLAIN_WORDS: dict[str, Any] = {w: v for w, (t, v) in _WORDS.items() if t in ("bool", "null")}
NUMBER_FIRST = frozenset(".") | _SIGN_OR_DIGIT
KEY_WORDS = frozenset(PLAIN_WORDS) | {"<<"}

#: Go's strconv.ParseInt/ParseUint with base 0, underscores removed before: a sign (ParseInt only), then
#: 0b/0o/0x with at least one digit, a 0 followed by octal digits, or decimal digits
_GO_INT = re.compile(r"([-+]?)(?:0[bB]([01]+)|0[oO]([0-7]+)|0[xX]([0-9a-fA-F]+)|(0[0-7]*)|([1-9][0-9]*))\Z")
#: resolve.go's yamlStyleFloat (the text's underscores removed)
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
#: what Go's strconv.ParseFloat reads of a text starting with `.` (resolve's `.` hint, underscores kept:
#: ParseFloat takes them between digits)
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+(?:_[0-9]+)*)?\Z")


# -- resolve.go -----------------------------------------------------------------------------------------


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), else strconv.ParseUint(text, 0, 64) (an uint64), else None."""
    found = _GO_INT.match(text)
    if found is None:
        return None
    sign, binary, octal, hexadecimal, zero, decimal = found.groups()
    if binary is not None:
        value = int(binary, 2)
    elif octal is not None:
        value = int(octal, 8)
    elif hexadecimal is not None:
        value = int(hexadecimal, 16)
    elif zero is not None:
        value = int(zero, 8)
    else:
        value = int(decimal)
    if sign == "-":
        value = -value
    if _INT64_MIN <= value < _INT64_END:
        return value
    if not sign and value < _UINT64_END:  # ParseUint takes no sign
        return value
    return None


def _number(text: str, tag: str) -> tuple[str, Any] | None:
    """resolve's `D`/`S` branch: a timestamp, an int, a float. Without a tag a timestamp is not looked
    for: it would be kept as written, as a text that is neither an int nor a float is."""
    if tag == "timestamp" and is_timestamp(text):
        return "timestamp", text
    plain = text.replace("_", "")
    found = _go_int(plain)
    if found is not None:
        return "int", found
    if _YAML_FLOAT.match(plain):
        value = float(plain)
        if not math.isinf(value):  # ParseFloat's range error: not a float
            return "float", value
    return None


def _resolve(tag: str, text: str) -> tuple[str, Any]:
    """go-yaml's resolve for a resolvable tag ("" for none, else the short name): its tag and value."""
    first = text[:1]
    if tag != "str" and (first in _LOOKED_AT or not text):
        word = _WORDS.get(text)
        if word is not None:
            return word
        if first == ".":
            if _DOT_FLOAT.match(text):
                value = float(text.replace("_", ""))
                if not math.isinf(value):
                    return "float", value
        elif first in _SIGN_OR_DIGIT:
            found = _number(text, tag)
            if found is not None:
                return found
    return "str", text


_RESOLVABLE = frozenset(("str", "bool", "int", "float", "null", "timestamp"))


def _tagged(tag: str, text: str) -> tuple[str, Any]:
    """decode.go's scalar for a scalar with a tag: resolve's answer, checked against the tag."""
    short = tag[len(TAG) :] if tag.startswith(TAG) else None
    if short == "binary":
        return "str", _binary(text)
    if short is None or short not in _RESOLVABLE:  # `!`, `!thing`, `!!set`...: the text
        return "str", text
    found, value = _resolve(short, text)
    if short in (found, "str"):
        return found, value
    if short == "float" and found == "int" and value < _INT64_END:  # an int, not an uint64
        return "float", float(value)
    raise ScalarError(f"cannot decode !!{found} `{text}` as a !!{short}")


def _binary(text: str) -> str:
    """`!!binary`: Go's base64.StdEncoding (line breaks ignored), the bytes as encoding/json writes them
    (each byte of invalid UTF-8 as U+FFFD)."""
    try:
        data = binascii.a2b_base64(text.replace("\r", "").replace("\n", ""), strict_mode=True)
    except (binascii.Error, ValueError):
        raise ScalarError("!!binary value contains invalid base64 data") from None
    return _go_string(data)


def _go_string(data: bytes) -> str:
    """Bytes as encoding/json makes them a string: every byte utf8.DecodeRune refuses is U+FFFD."""
    out: list[str] = []
    start = 0
    while True:
        try:
            out.append(data[start:].decode("utf-8"))
            return "".join(out)
        except UnicodeDecodeError as err:
            out.append(data[start : start + err.start].decode("utf-8"))
            out.append("\ufffd" * (err.end - err.start))
            start += err.end


# -- timestamps (resolve.go's parseTimestamp: time.Parse with four layouts) ------------------------------

_DATE = r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
_CLOCK = r"([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,][0-9]+)?"
_TIMESTAMPS = (
    re.compile(_DATE + "[Tt]" + _CLOCK + r"(?:Z|[-+]([0-9]{2}):([0-9]{2}))\Z"),  # RFC 3339, short fields
    re.compile(_DATE + " " + _CLOCK + r"\Z"),  # space separated, no time zone
    re.compile(_DATE + r"\Z"),  # date only
)
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_timestamp(text: str) -> bool:
    """Whether go-yaml takes `text` for a timestamp (Go's time.Parse: fields in range, the day in its
    month)."""
    if len(text) < 5 or text[4] != "-" or not text[:4].isdigit():
        return False
    for layout in _TIMESTAMPS:
        found = layout.match(text)
        if found is None:
            continue
        fields = [int(f) for f in found.groups() if f is not None]
        year, month, day = fields[:3]
        if not 1 <= month <= 12 or day < 1:
            continue
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        if day > (_DAYS[month - 1] if month != 2 or leap else 28):
            continue
        if len(fields) > 3:
            hour, minute, second = fields[3:6]
            if hour > 23 or minute > 59 or second > 59:
                continue
            if len(fields) > 6 and (fields[6] > 24 or fields[7] > 60):  # the zone's offset
                continue
        return True
    return False


# -- to JSON, and back as kubectl holds it ----------------------------------------------------------------


def _json_number(value: float) -> int | float:
    """A float64 as kubectl holds it after encoding/json wrote it: an int when its text is an integer (no
    exponent below 1e21, shortest digits) that fits in an int64."""
    if math.isnan(value) or math.isinf(value):
        raise ScalarError(f"json: unsupported value: {_go_float_name(value)}")
    if value.is_integer() and abs(value) < 1e21:
        if abs(value) < 2**53:
            return int(value)
        from decimal import Decimal  # (an import of ~1 ms) only for floats of 2**53 and above

        whole = int(Decimal(repr(value)))  # encoding/json's digits: the shortest, then zeros
        if _INT64_MIN <= whole < _INT64_END:
            return whole
    return value


def json_int(text: str) -> int | float:
    """A JSON integer as kubectl decodes it (json.Decoder's parse_int): an int64, else a float64."""
    value = int(text)
    if _INT64_MIN <= value < _INT64_END:
        return value
    try:
        return float(value)
    except OverflowError:
        raise ScalarError(_cannot_unmarshal(text)) from None


def json_float(text: str) -> int | float:
    """A JSON number with a fraction or an exponent as kubectl holds it (json.Decoder's parse_float)."""
    value = float(text)
    if math.isinf(value):
        raise ScalarError(_cannot_unmarshal(text))
    return _json_number(value)


def _cannot_unmarshal(text: str) -> str:
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"json: cannot unmarshal number {shown} into Go value of type float64 (out of its range)"


def _go_float_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def _value(tag: str, value: Any) -> Any:
    """A resolved scalar as the JSON value kubectl decodes."""
    if tag == "int":
        return value if _INT64_MIN <= value < _INT64_END else float(value)  # an uint64: a float64
    if tag == "float":
        return _json_number(value)
    return value  # a timestamp too: kept as written (decode.go: into interface{}, a string)


def plain(text: str) -> Any:
    """An untagged plain scalar's value."""
    value = PLAIN_WORDS.get(text, text)
    if value is text and text[:1] in NUMBER_FIRST:
        return plain_number(text)
    return value


def plain_number(text: str) -> Any:
    """An untagged plain scalar that starts with one of NUMBER_FIRST's value."""
    if text.isdigit():  # decimal digits: an int64 when short and without a leading 0 (octal)
        if text.isascii() and len(text) <= 18 and (text[0] != "0" or text == "0"):
            return int(text)
    elif text[-1] not in _NUMBER_LAST and text not in _WORDS:  # no number ends so (`500m`, `64Mi`)
        return text
    tag, value = _resolve("", text)
    return _value(tag, value) if tag != "str" else value


def tagged(tag: str, text: str) -> Any:
    """A scalar with a tag (any style)'s value."""
    found, value = _tagged(tag, text)
    return _value(found, value)


def _key(tag: str, value: Any) -> str:
    """A resolved key as sigs.k8s.io/yaml's convertToJSONableObject writes it."""
    if tag in ("str", "timestamp", "merge"):
        return str(value)
    if value is None:
        raise ScalarError("unsupported map key of type: <nil> (a key that is null: ~, null or empty)")
    if tag == "bool":
        return "true" if value else "false"
    if tag == "int":
        if value >= _INT64_END:
            raise ScalarError(f"unsupported map key of type: uint64, key: {value}")
        return str(value)
    return _float32_g(value)


def plain_key(text: str) -> str:
    """An untagged plain key's text (the merge key `<<` is told apart by the caller)."""
    if text not in KEY_WORDS and text[:1] not in NUMBER_FIRST:
        return text
    tag, value = _resolve("", text)
    return _key(tag, value)


def tagged_key(tag: str, text: str) -> str:
    found, value = _tagged(tag, text)
    return _key(found, value)


def excessive_aliasing(aliased: int, decoded: int) -> bool:
    """Whether go-yaml v2 refuses a document for its aliases (decode.go, unmarshal and
    allowedAliasRatio): of more than 1,000 nodes decoded, over 100 and over 99% decoded through an alias
    (a share that falls to 10% from 400,000 to 4,000,000 nodes)."""
    if aliased <= 100 or decoded <= 1000:
        return False
    if decoded <= 400_000:
        allowed = 0.99
    elif decoded >= 4_000_000:
        allowed = 0.10
    else:
        allowed = 0.99 - 0.89 * ((decoded - 400_000) / 3_600_000)
    return aliased / decoded > allowed


def is_merge(tag: str | None, style: str | None, text: str) -> bool:
    """decode.go's isMerge: `<<` plain (or with the non-specific tag `!`), or tagged `!!merge`."""
    return text == "<<" and ((tag is None and not style) or tag in ("!", MERGE_TAG))


def _float32(value: float) -> float:
    """Go's float32(value): the nearest float32, an infinity beyond its range."""
    try:
        single: float = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    return single


def _float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32), as sigs.k8s.io/yaml writes a float key (±Inf, NaN as
    `.inf`, `-.inf`, `.nan`)."""
    if math.isnan(value):
        return ".nan"
    single = _float32(value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    if single == 0:
        return "-0" if math.copysign(1.0, single) < 0 else "0"
    text = ""
    for precision in range(9):  # the shortest digits that read back as the same float32
        text = f"{single:.{precision}e}"
        if _float32(float(text)) == single:
            break
    mantissa, exponent_text = text.split("e")
    negative = mantissa.startswith("-")
    digits = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    sign = "-" if negative else ""
    if exponent < -4 or exponent >= 6:  # %e (Go's shortest 'g' decides with precision 6)
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    point = exponent + 1  # digits before the decimal point
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"
