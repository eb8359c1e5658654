"""The canonical string of a Quantity: apimachinery's Quantity.String() / CanonicalizeBytes.

Not reachable from CEL in Kubernetes 1.34 (Quantity has no string() conversion there); used for messages,
debugging and tests.
"""

from __future__ import annotations

from celkeeper.cel.k8slib.quantity import (
    _BIN_SUFFIX_OF,
    _DEC_SUFFIX_OF,
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    _cmp,
    _fits,
    _positive_scale,
    _pow10,
)


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
