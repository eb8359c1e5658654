"""Go standard-library string behaviour the Kubernetes libraries lean on.

Kubernetes builds its error messages with Go's `%q` (strconv.Quote) and `%v`; reproducing those
messages byte for byte needs the same quoting. Only what the libraries use is here.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by int_to_decimal, for the ints too large for str(): not by go_quote's callers
    import decimal

_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(s: str) -> str:
    """strconv.Quote: a double-quoted Go string literal, printable runes kept as they are.

    Go's unicode.IsPrint and Python's str.isprintable agree (letters, marks, numbers, punctuation,
    symbols and U+0020); they can differ only for code points assigned after Python's Unicode version.
    U+DC80..U+DCFF stand for the invalid bytes 0x80..0xFF (Python's surrogateescape) and are written
    as \\xNN, as Go writes invalid bytes; other lone surrogates become \\ufffd.
    """
    if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'  # the common case, without a loop per character
    out = ['"']
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
            continue
        if ch.isprintable():
            out.append(ch)
            continue
        cp = ord(ch)
        if cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif 0xDC80 <= cp <= 0xDCFF:  # a byte of invalid UTF-8 kept by the surrogateescape codec
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\\ufffd")
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def go_quote_bytes(b: bytes) -> str:
    """strconv.Quote of a Go string holding arbitrary bytes: invalid UTF-8 bytes become \\xNN."""
    try:
        return go_quote(b.decode("utf-8"))  # valid UTF-8 (Python's decoder, like Go's, refuses surrogates)
    except UnicodeDecodeError:
        pass
    out = ['"']
    i = 0
    while i < len(b):
        ch, width = _decode_rune(b, i)
        if ch is None:
            out.append(f"\\x{b[i]:02x}")
        else:
            out.append(go_quote(ch)[1:-1])
        i += width
    out.append('"')
    return "".join(out)


def _decode_rune(b: bytes, i: int) -> tuple[str | None, int]:
    """utf8.DecodeRune at b[i:]: (the rune, its width) or (None, 1) for an invalid byte."""
    lead = b[i]
    if lead < 0x80:
        return chr(lead), 1
    width = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    if width:
        try:
            return b[i : i + width].decode("utf-8"), width
        except UnicodeDecodeError:
            pass
    return None, 1


def go_string(b: bytes) -> str:
    """A Go string's bytes as Python text, each invalid UTF-8 byte replaced by U+FFFD (as Go's
    encoding/json and range loops see it)."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out = []
    i = 0
    while i < len(b):
        ch, width = _decode_rune(b, i)
        out.append("\ufffd" if ch is None else ch)
        i += width
    return "".join(out)


def go_utf8_len(s: str) -> int:
    """len(s) of the Go string: its length in UTF-8 bytes."""
    if s.isascii():
        return len(s)
    try:
        return len(s.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(s.encode("utf-8", "surrogatepass"))


INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT64_MAX = (1 << 64) - 1


def wrap_int64(v: int) -> int:
    """Two's-complement wrap to int64, as a Go conversion or overflowing arithmetic does."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def wrap_int32(v: int) -> int:
    """Two's-complement wrap to int32."""
    v &= (1 << 32) - 1
    return v - (1 << 32) if v >= 1 << 31 else v


def parse_go_int(s: str, bits: int = 64, unsigned: bool = False) -> int | None:
    """strconv.ParseInt / ParseUint in base 10: an optional sign (signed only), ASCII digits, in range.

    Returns None where Go returns an error (syntax or range).
    """
    body = s
    neg = False
    if not unsigned and body[:1] in ("+", "-"):
        neg = body[0] == "-"
        body = body[1:]
    if not body or not body.isascii() or not body.isdigit():
        return None
    body = body.lstrip("0") or "0"  # Go accepts leading zeros; past 20 digits it is out of range
    if len(body) > 20:
        return None
    v = int(body)
    if neg:
        v = -v
    if unsigned:
        return v if v < (1 << bits) else None
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return v if lo <= v <= hi else None


def go_parse_uint_error(s: str) -> str:
    """The message of strconv.ParseUint(s, 10, 64)'s error (syntax or range)."""
    reason = "value out of range" if s and s.isascii() and s.isdigit() else "invalid syntax"
    return f"strconv.ParseUint: parsing {go_quote(s)}: {reason}"


_POW10TAB = [float(f"1e{i}") for i in range(32)]
_POW10POSTAB32 = [float(f"1e{32 * i}") for i in range(10)]
_POW10NEGTAB32 = [float(f"1e-{32 * i}") for i in range(11)]


def go_pow10(n: int) -> float:
    """math.Pow10, with Go's table products (not always the correctly rounded power)."""
    if 0 <= n <= 308:
        return _POW10POSTAB32[n // 32] * _POW10TAB[n % 32]
    if -323 <= n <= 0:
        return _POW10NEGTAB32[-n // 32] / _POW10TAB[-n % 32]
    return float("inf") if n > 0 else 0.0


# -- decimal text <-> int in sub-quadratic time --------------------------------------------------------
# int(text) and str(n) are quadratic in CPython 3.11 and refuse more than 4,300 digits
# (sys.int_info.default_max_str_digits); Go's math/big converts any length (inf.Dec, big.Int). These
# split the work so that each int()/str() call stays small: divide and conquer with cached powers,
# O(M(n) log n) (Karatsuba products for text -> int; libmpdec's for int -> text, as CPython 3.12's
# _pylong does).

_DIRECT_DIGITS = 2_000  # at most this many digits go through int()/str() in one call


@lru_cache(maxsize=64)
def go_pow10_int(n: int) -> int:
    """10**n, the last few cached."""
    return int(10**n)  # int ** int is Any to mypy (a negative power is a float); n >= 0 here


def decimal_to_int(digits: str) -> int:
    """int(digits) for a string of ASCII digits of any length."""
    if len(digits) <= _DIRECT_DIGITS:
        return int(digits)
    width = _DIRECT_DIGITS
    while width * 2 < len(digits):
        width *= 2  # the low part's width: a power-of-two multiple of the base size (cached powers)

    def convert(start: int, end: int, low: int) -> int:
        if end - start <= _DIRECT_DIGITS:
            return int(digits[start:end])
        while low >= end - start:
            low //= 2
        mid = end - low
        return convert(start, mid, low // 2) * go_pow10_int(low) + convert(mid, end, low // 2)

    return convert(0, len(digits), width)


def int_to_decimal(n: int) -> str:
    """str(n) for an int of any size."""
    if n.bit_length() <= _DIRECT_DIGITS * 3:  # below ~900 digits: str() is fast and allowed
        return str(n)
    import decimal

    ctx = decimal.Context(
        prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, traps=[decimal.Inexact]
    )
    powers: dict[int, decimal.Decimal] = {}

    def power(bits: int) -> decimal.Decimal:
        found = powers.get(bits)
        if found is None:
            found = powers[bits] = ctx.power(decimal.Decimal(2), bits)
        return found

    def convert(v: int, bits: int) -> decimal.Decimal:
        if bits <= _DIRECT_DIGITS * 3:
            return decimal.Decimal(v)
        half = bits // 2
        high = v >> half
        upper = ctx.multiply(convert(high, bits - half), power(half))
        return ctx.add(upper, convert(v - (high << half), half))

    text = str(convert(abs(n), n.bit_length()))
    return "-" + text if n < 0 else text
