"""Kubernetes' CEL quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go, Kubernetes 1.34) over a
port of apimachinery's resource.Quantity (pkg/api/resource: quantity.go, amount.go, math.go, suffix.go).

A Quantity remembers what Go's does, because results depend on it:
- its representation: an int64 mantissa with a base-10 scale (`dec=False`, Go's int64Amount) or an
  arbitrary-precision decimal (`dec=True`, Go's inf.Dec). `isInteger`/`asInteger` only succeed on the
  int64 form with a scale >= 0 that fits: `quantity("1.5Gi").isInteger()` is false although 1.5Gi is whole,
  because ParseQuantity takes the inf.Dec path for a binary suffix with a fraction; `quantity("1.0")` is
  not an integer either (int64 10 at scale -1).
- its format (DecimalSI, BinarySI, DecimalExponent), used only by the canonical string.
- whether it came from add/sub (`from_arith`): Go returns those as *Quantity, and Kubernetes' Quantity.Equal
  only accepts a non-pointer operand, so `q == x.add(y)` is a "no such overload" error (see `equals`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.gostrings import (
    INT64_MAX,
    INT64_MIN,
    decimal_to_int,
    go_pow10,
    go_pow10_int,
    parse_go_int,
    wrap_int32,
    wrap_int64,
)

DECIMAL_EXPONENT = "DecimalExponent"
BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT_WRONG = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NOT_INTEGER = "cannot convert value to integer"
NO_SUCH_OVERLOAD = "no such overload"

# Go would materialise 10**n for these; beyond this many digits celkeeper refuses instead of hanging.
MAX_DIGITS = 10_000
ERR_TOO_LARGE = "quantity exponent too large to evaluate"

_DEC_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BIN_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC_SUFFIX_OF = {v: k for k, v in _DEC_SUFFIXES.items()}
_BIN_SUFFIX_OF = {v: k for k, v in _BIN_SUFFIXES.items()}


@dataclass(frozen=True, slots=True)
class Quantity:
    """Value = unscaled * 10**exp10 (Go: int64Amount{value, scale} or inf.Dec with scale -exp10)."""

    unscaled: int
    exp10: int
    dec: bool
    format: str
    from_arith: bool = field(default=False, compare=False)
    text: str = field(default="", compare=False)  # Go caches the input as String() when it is canonical

    def __str__(self) -> str:
        if self.text:
            return self.text
        return canonical_string(self)


def _fits(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def _ndigits(v: int) -> int:
    """The number of decimal digits of |v| (0 for 0), without converting it to text."""
    v = abs(v)
    bits = v.bit_length()
    if bits < 3000:
        return len(str(v)) if v else 0
    n = (bits - 1) * 30103 // 100000 + 1  # 10**(n-1) <= 2**(bits-1) <= v, n at most one too small
    return n + 1 if v >= go_pow10_int(n) else n


def _pow10(n: int) -> int:
    if n > MAX_DIGITS:
        raise LibraryError(ERR_TOO_LARGE)
    return int(10**n)  # int ** int is Any to mypy (a negative power is a float); n >= 0 here


# ---------------------------------------------------------------- parsing (ParseQuantity)


_DIGITS = frozenset("0123456789")
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")


def _span(s: str, start: int, allowed: frozenset[str]) -> int:
    """The end of the run of `allowed` characters starting at `start`."""
    end = start
    n = len(s)
    while end < n and s[end] in allowed:
        end += 1
    return end


def _scan(s: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString (apimachinery pkg/api/resource/quantity.go): (positive, value, num, denom,
    suffix); raises ErrFormatWrong. A scanner over the text, as Go's: linear time."""
    positive = True
    pos = 0
    end = len(s)
    if s[:1] in ("-", "+"):
        positive = s[0] == "+"
        pos = 1
    while pos < end and s[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    i = _span(s, pos, _DIGITS)
    if i >= end:
        return positive, s, s[pos:], "", ""
    num = s[pos:i] or "0"
    pos = i
    denom = ""
    if s[pos] == ".":
        pos += 1
        i = _span(s, pos, _DIGITS)
        if i >= end:
            return positive, s, num, s[pos:], ""
        denom = s[pos:i]
        pos = i
    value = s[:pos]
    suffix_start = pos
    pos = _span(s, pos, _SUFFIX_LETTERS)
    if pos < end and s[pos] in "-+":
        pos += 1
    pos = _span(s, pos, _DIGITS)
    if pos != end:
        raise LibraryError(ERR_FORMAT_WRONG)
    return positive, value, num, denom, s[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """suffixer.interpret: (base, exponent, format); raises ErrSuffix."""
    if suffix in _DEC_SUFFIXES:
        return 10, _DEC_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BIN_SUFFIXES:
        return 2, _BIN_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        parsed = parse_go_int(suffix[1:])
        if parsed is not None:
            return 10, wrap_int32(parsed), DECIMAL_EXPONENT
    raise LibraryError(ERR_SUFFIX)


def _dec_digits(value: str) -> tuple[bool, str, int]:
    """inf.Dec.SetString for [sign]digits[.digits]: (negative, the digits without leading zeros, inf
    scale); raises ErrNumeric."""
    body = value
    neg = body[:1] == "-"
    if body[:1] in "+-":
        body = body[1:]
    whole, _, frac = body.partition(".")
    if not whole and not frac:
        raise LibraryError(ERR_NUMERIC)
    return neg, (whole + frac).lstrip("0"), len(frac)


def parse_quantity(s: str) -> Quantity:
    """resource.ParseQuantity. Raises LibraryError with Kubernetes' message."""
    if not s:
        raise LibraryError(ERR_FORMAT_WRONG)
    if s == "0":
        return Quantity(0, 0, False, DECIMAL_SI, text=s)
    positive, value, num, denom, suf = _scan(s)
    base, exponent, fmt = _interpret(suf)

    precision = 0
    scale = 0
    mantissa = 1
    if fmt in (DECIMAL_EXPONENT, DECIMAL_SI):
        scale = exponent
        precision = 18 - (len(num) + len(denom))  # apimachinery's maxInt64Factors is 18
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - (exponent * 3) // 10 - 1
    else:
        precision = -1

    if precision >= 0:
        scale = wrap_int32(scale - len(denom))
        if scale >= -9:
            shifted = parse_go_int(num + denom)
            if shifted is None:
                raise LibraryError(ERR_NUMERIC)
            result = shifted * mantissa
            if _fits(result):
                digits = num + denom
                if fmt == BINARY_SI:
                    canonical = exponent % 10 == 0 and shifted & 0x07 != 0
                else:
                    canonical = scale % 3 == 0 and not digits.endswith("000") and digits[0] != "0"
                return Quantity(
                    result if positive else -result, scale, False, fmt, text=s if canonical else ""
                )

    negative, digits, inf_scale = _dec_digits(value)
    if base == 10:
        inf_scale = wrap_int32(inf_scale + wrap_int32(-exponent))
        if digits and inf_scale > 9:
            # Round(9, RoundUp) on the text: drop the digits past the 9th decimal, rounding up when any
            # of them is not zero (no big division)
            drop = inf_scale - 9
            unscaled = (
                1
                if drop >= len(digits)
                else (decimal_to_int(digits[:-drop]) + (1 if digits[-drop:].strip("0") else 0))
            )
            inf_scale = 9
        else:
            unscaled = decimal_to_int(digits) if digits else 0
    else:
        unscaled = (decimal_to_int(digits) if digits else 0) << exponent
    if unscaled:
        unscaled, inf_scale = _round_up_to_nano(unscaled, inf_scale)
    if fmt == BINARY_SI and _cmp(unscaled, -inf_scale, INT64_MAX, 0) > 0:
        unscaled, inf_scale = INT64_MAX, 0
    if fmt == BINARY_SI and unscaled and _cmp(unscaled, -inf_scale, 1, 0) < 0:
        fmt = DECIMAL_SI
    return Quantity(-unscaled if negative else unscaled, -inf_scale, True, fmt)


def _round_up_to_nano(unscaled: int, inf_scale: int) -> tuple[int, int]:
    """inf.Dec.Round(x, 9, RoundUp) of a positive x: rescale to 9 decimals, rounding away from zero."""
    if inf_scale <= 9:
        return unscaled * _pow10(9 - inf_scale), 9
    drop = inf_scale - 9
    if drop > _ndigits(unscaled):
        return 1, 9
    q, r = divmod(unscaled, 10**drop)
    return (q + 1 if r else q), 9


# ---------------------------------------------------------------- arithmetic and comparison


def _cmp(u1: int, e1: int, u2: int, e2: int) -> int:
    """Exact comparison of u1*10**e1 and u2*10**e2 (what both of Go's Cmp paths compute)."""
    if e1 == e2:
        return (u1 > u2) - (u1 < u2)
    s1 = (u1 > 0) - (u1 < 0)
    s2 = (u2 > 0) - (u2 < 0)
    if s1 != s2 or s1 == 0:
        return (s1 > s2) - (s1 < s2)
    m1, m2 = _ndigits(u1) + e1, _ndigits(u2) + e2  # 10**(m-1) <= |value| < 10**m
    if m1 != m2:
        return s1 if m1 > m2 else -s1
    if e1 >= e2:
        a, b = u1 * int(10 ** (e1 - e2)), u2
    else:
        a, b = u1, u2 * int(10 ** (e2 - e1))
    return (a > b) - (a < b)


def compare(a: Quantity, b: Quantity) -> int:
    """Quantity.Cmp: -1, 0 or 1."""
    return _cmp(a.unscaled, a.exp10, b.unscaled, b.exp10)


def _positive_scale(base: int, k: int) -> int | None:
    """positiveScaleInt64: base * 10**k if it fits in int64."""
    if base == 0 or k == 0:
        return base
    if k > 19:
        return None
    v = base * 10**k
    return v if _fits(v) else None


def _int_add(a: Quantity, bv: int, bs: int) -> tuple[int, int] | None:
    """int64Amount.Add: the new (value, scale), or None when Go falls back to inf.Dec."""
    av, as_ = a.unscaled, a.exp10
    if bv == 0:
        return av, as_
    if av == 0:
        return bv, bs
    if as_ == bs:
        c = av + bv
        return (c, as_) if _fits(c) else None
    if as_ > bs:
        scaled = _positive_scale(av, wrap_int32(as_ - bs))
        if scaled is None or not _fits(scaled + bv):
            return None
        return scaled + bv, bs
    scaled = _positive_scale(bv, wrap_int32(bs - as_))
    if scaled is None or not _fits(av + scaled):
        return None
    return av + scaled, as_


def _dec_sum(a: Quantity, bu: int, be: int, fmt: str) -> Quantity:
    exp = min(a.exp10, be)
    u = a.unscaled * _pow10(a.exp10 - exp) + bu * _pow10(be - exp)
    return Quantity(u, exp, True, fmt, True)


def add(q: Quantity, y: Quantity) -> Quantity:
    """<Quantity>.add(<Quantity>): Quantity.Add on a copy."""
    fmt = q.format
    if not q.dec and not y.dec:
        if q.unscaled == 0:
            fmt = y.format
        r = _int_add(q, y.unscaled, y.exp10)
        if r is not None:
            return Quantity(r[0], r[1], False, fmt, True)
    elif q.unscaled == 0:
        fmt = y.format
    return _dec_sum(q, y.unscaled, y.exp10, fmt)


def sub(q: Quantity, y: Quantity) -> Quantity:
    """<Quantity>.sub(<Quantity>): Quantity.Sub on a copy."""
    fmt = y.format if q.unscaled == 0 else q.format
    if not q.dec and not y.dec:
        r = _int_add(q, wrap_int64(-y.unscaled), y.exp10)
        if r is not None:
            return Quantity(r[0], r[1], False, fmt, True)
    return _dec_sum(q, -y.unscaled, y.exp10, fmt)


def add_int(q: Quantity, v: int) -> Quantity:
    """<Quantity>.add(<int>): adds NewQuantity(v, DecimalExponent)."""
    return add(q, Quantity(v, 0, False, DECIMAL_EXPONENT))


def sub_int(q: Quantity, v: int) -> Quantity:
    """<Quantity>.sub(<int>)."""
    return sub(q, Quantity(v, 0, False, DECIMAL_EXPONENT))


def _as_int64(q: Quantity) -> int | None:
    if q.dec or q.exp10 < 0:
        return None
    return _positive_scale(q.unscaled, q.exp10)


def is_integer(q: Quantity) -> bool:
    """<Quantity>.isInteger(): AsInt64 succeeds."""
    return _as_int64(q) is not None


def as_integer(q: Quantity) -> int:
    """<Quantity>.asInteger(); raises 'cannot convert value to integer'."""
    v = _as_int64(q)
    if v is None:
        raise LibraryError(ERR_NOT_INTEGER)
    return v


def sign(q: Quantity) -> int:
    """sign(<Quantity>) (a global function in Kubernetes, not a method)."""
    return (q.unscaled > 0) - (q.unscaled < 0)


def as_approximate_float(q: Quantity) -> float:
    """<Quantity>.asApproximateFloat(): AsApproximateFloat64."""
    try:
        base = float(q.unscaled)
    except OverflowError:
        base = float("inf") if q.unscaled > 0 else float("-inf")
    if q.exp10 == 0:
        return base
    return base * go_pow10(q.exp10)


# ---------------------------------------------------------------- the CEL functions


def quantity(s: str) -> Quantity:
    """quantity(<string>)."""
    return parse_quantity(s)


def is_quantity(s: str) -> bool:
    """isQuantity(<string>)."""
    try:
        parse_quantity(s)
    except LibraryError:
        return False
    return True


def compare_to(a: Quantity, b: Quantity) -> int:
    """<Quantity>.compareTo(<Quantity>)."""
    return compare(a, b)


def is_greater_than(a: Quantity, b: Quantity) -> bool:
    """<Quantity>.isGreaterThan(<Quantity>)."""
    return compare(a, b) == 1


def is_less_than(a: Quantity, b: Quantity) -> bool:
    """<Quantity>.isLessThan(<Quantity>)."""
    return compare(a, b) == -1


def equals(lhs: Quantity, rhs: Quantity) -> bool:
    """`lhs == rhs` as Kubernetes 1.34 evaluates it: Cmp == 0, but a "no such overload" error when the
    right operand came from add/sub (a *Quantity, which Quantity.Equal's type assertion rejects)."""
    if rhs.from_arith:
        raise LibraryError(NO_SUCH_OVERLOAD)
    return compare(lhs, rhs) == 0


def not_equals(lhs: Quantity, rhs: Quantity) -> bool:
    """`lhs != rhs`: cel-go answers `Equal(lhs, rhs) != true`, so the error case above is simply true."""
    return rhs.from_arith or compare(lhs, rhs) != 0


# -- The canonical string: apimachinery's Quantity.String() / CanonicalizeBytes. Not reachable from CEL in
# Kubernetes (Quantity has no string() conversion there); used for messages, debugging and tests.


def _go_rem(a: int, b: int) -> int:
    """Go's % (the remainder takes the dividend's sign)."""
    r = abs(a) % b
    return -r if a < 0 else r


def _go_div10(v: int) -> int:
    q = abs(v) // 10
    return -q if v < 0 else q


def _negative_scale(base: int, scale: int) -> tuple[int, bool]:
    """negativeScaleInt64: base / 10**scale rounded away from zero, and whether that was exact."""
    if scale == 0:
        return base, True
    value = base
    fraction = False
    for _ in range(scale):
        if not fraction and _go_rem(value, 10) != 0:
            fraction = True
        value = _go_div10(value)
        if value == 0:
            if fraction:
                return (1 if base > 0 else -1), False
            return 0, True
    if fraction:
        value += 1 if base > 0 else -1
    return value, not fraction


def _remove_factors(value: int, base: int, int64_path: bool) -> tuple[int, int]:
    """removeInt64Factors / removeBigIntFactors: value == result * base**times."""
    times = 0
    result = abs(value)
    while result and result % base == 0 and (not int64_path or result >= base):
        result //= base
        times += 1
    return (-result if value < 0 else result), times


def _canonical_bytes(q: Quantity) -> tuple[str, int]:
    """AsCanonicalBytes: a mantissa and a base-10 exponent that is a multiple of 3."""
    if not q.dec:
        amount, times = _remove_factors(q.unscaled, 10, True)
        exponent = q.exp10 + times
        r = _go_rem(exponent, 3)
        if r in (1, -2, 2, -1):
            shift = 1 if r in (1, -2) else 2
            if _fits(amount * 10**shift):
                return str(amount * 10**shift), exponent - shift
        else:
            return str(amount), exponent
    amount, times = _remove_factors(q.unscaled, 10, False)
    exponent = q.exp10 + times
    while exponent % 3 != 0:
        amount *= 10
        exponent -= 1
    return str(amount), exponent


def _as_scale0(q: Quantity) -> tuple[Quantity, bool]:
    """AsScale(0): the value rounded away from zero to a whole number, and whether that was exact."""
    if not q.dec:
        if q.exp10 >= 0:
            return q, True
        v, exact = _negative_scale(q.unscaled, -q.exp10)
        return Quantity(v, 0, False, q.format), exact
    if q.exp10 >= 0:
        return Quantity(q.unscaled * _pow10(q.exp10), 0, True, q.format), True
    div = 10**-q.exp10
    mag, rem = divmod(abs(q.unscaled), div)
    if rem:
        mag += 1
    return Quantity(-mag if q.unscaled < 0 else mag, 0, True, q.format), rem == 0


def _canonical_base1024(r: Quantity) -> tuple[str, int]:
    """AsCanonicalBase1024Bytes of a whole number."""
    if not r.dec:
        value: int | None
        if r.exp10 < 0:
            value = _negative_scale(r.unscaled, -r.exp10)[0]
        else:
            value = _positive_scale(r.unscaled, r.exp10)
        if value is not None:
            amount, times = _remove_factors(value, 1024, True)
            return str(amount), times
    whole = r.unscaled * _pow10(r.exp10) if r.exp10 >= 0 else _as_scale0(r)[0].unscaled
    amount, times = _remove_factors(whole, 1024, False)
    return str(amount), times


def canonical_string(q: Quantity) -> str:
    """Quantity.String()."""
    if q.unscaled == 0:
        return "0"
    fmt = q.format
    rounded = q
    if fmt == BINARY_SI:
        if _cmp(q.unscaled, q.exp10, -1024, 0) > 0 and _cmp(q.unscaled, q.exp10, 1024, 0) < 0:
            fmt = DECIMAL_SI
        else:
            rounded, exact = _as_scale0(q)
            if not exact:
                fmt = DECIMAL_SI
    elif fmt not in (DECIMAL_SI, DECIMAL_EXPONENT):
        fmt = DECIMAL_EXPONENT
    if fmt == BINARY_SI:
        number, exponent = _canonical_base1024(rounded)
        return number + _BIN_SUFFIX_OF.get(exponent * 10, "")
    number, exponent = _canonical_bytes(q)
    if fmt == DECIMAL_SI:
        return number + _DEC_SUFFIX_OF.get(exponent, "")
    return number + (f"e{exponent}" if exponent else "")
