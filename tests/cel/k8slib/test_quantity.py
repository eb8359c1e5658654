"""The quantity library against Kubernetes 1.34 (golden results), including Kubernetes' own test table."""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib import quantity as Q
from tests.cel.k8slib.golden_check import Case, check, ids, lit, results

q = Q.parse_quantity

# Kubernetes' library/quantity_test.go (1.34), minus the compile-error case.
KUBERNETES_TABLE: list[Case] = [
    ('quantity("12Mi")', lambda: q("12Mi")),
    ('quantity("10Mo")', lambda: q("10Mo")),
    ('quantity("10Mm")', lambda: q("10Mm")),
    ('isQuantity("20")', lambda: Q.is_quantity("20")),
    ('isQuantity("20M")', lambda: Q.is_quantity("20M")),
    ('isQuantity("20Mi")', lambda: Q.is_quantity("20Mi")),
    ('isQuantity("20Mo")', lambda: Q.is_quantity("20Mo")),
    ('isQuantity("10Mm")', lambda: Q.is_quantity("10Mm")),
    ('quantity("200M") == quantity("200M")', lambda: Q.equals(q("200M"), q("200M"))),
    (
        'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")',
        lambda: Q.equals(q("200M"), q("0.2G")) and Q.equals(q("0.2G"), q("200M")),
    ),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
        'quantity("0.002G") == quantity("2000k")',
        lambda: (
            Q.equals(q("2M"), q("0.002G"))
            and Q.equals(q("2000k"), q("2M"))
            and Q.equals(q("0.002G"), q("2000k"))
        ),
    ),
    ('quantity("200M") == quantity("0.3G")', lambda: Q.equals(q("200M"), q("0.3G"))),
    ('quantity("50M").isLessThan(quantity("50Mi"))', lambda: Q.is_less_than(q("50M"), q("50Mi"))),
    ('quantity("50M").isLessThan(quantity("100M"))', lambda: Q.is_less_than(q("50M"), q("100M"))),
    ('quantity("100M").isLessThan(quantity("50M"))', lambda: Q.is_less_than(q("100M"), q("50M"))),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', lambda: Q.is_greater_than(q("50Mi"), q("50M"))),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', lambda: Q.is_greater_than(q("150Mi"), q("100Mi"))),
    ('quantity("50M").isGreaterThan(quantity("100M"))', lambda: Q.is_greater_than(q("50M"), q("100M"))),
    ('quantity("200M").compareTo(quantity("0.2G"))', lambda: Q.compare_to(q("200M"), q("0.2G"))),
    ('quantity("50M").compareTo(quantity("50Mi"))', lambda: Q.compare_to(q("50M"), q("50Mi"))),
    ('quantity("50Mi").compareTo(quantity("50M"))', lambda: Q.compare_to(q("50Mi"), q("50M"))),
    (
        'quantity("50k").add(quantity("20")) == quantity("50.02k")',
        lambda: Q.equals(Q.add(q("50k"), q("20")), q("50.02k")),
    ),
    (
        'quantity("50k").add(20).isLessThan(quantity("50020"))',
        lambda: Q.is_less_than(Q.add_int(q("50k"), 20), q("50020")),
    ),
    (
        'quantity("50k").sub(quantity("20")) == quantity("49.98k")',
        lambda: Q.equals(Q.sub(q("50k"), q("20")), q("49.98k")),
    ),
    ('quantity("50k").sub(20) == quantity("49980")', lambda: Q.equals(Q.sub_int(q("50k"), 20), q("49980"))),
    (
        'quantity("50k").add(20).sub(quantity("100k")).asInteger()',
        lambda: Q.as_integer(Q.sub(Q.add_int(q("50k"), 20), q("100k"))),
    ),
    (
        'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()',
        lambda: Q.as_integer(Q.sub_int(Q.sub(Q.add_int(q("50k"), 20), q("100k")), -50000)),
    ),
    ('quantity("50k").asInteger()', lambda: Q.as_integer(q("50k"))),
    (
        'quantity("9999999999999999999999999999999999999G").asInteger()',
        lambda: Q.as_integer(q("9999999999999999999999999999999999999G")),
    ),
    (
        'quantity("9999999999999999999999999999999999999G").isInteger()',
        lambda: Q.is_integer(q("9999999999999999999999999999999999999G")),
    ),
    ('quantity("50").isInteger()', lambda: Q.is_integer(q("50"))),
    ('quantity("50.703k").asApproximateFloat()', lambda: Q.as_approximate_float(q("50.703k"))),
]

# Strings chosen to walk every branch of ParseQuantity: signs, zero stripping, fractions without
# digits, every suffix, exponents, the int64 fast path and its limits, the inf.Dec path and BinarySI caps.
PARSE_INPUTS = [
    "0",
    "00",
    "-0",
    "+0",
    "-",
    "+",
    ".",
    "-.",
    ".5",
    "5.",
    "1.",
    "1.5.5",
    "1,5",
    "",
    " 1",
    "1 ",
    "1",
    "-1",
    "+1",
    "0001",
    "1.0",
    "1.50",
    "1000m",
    "1.5",
    "0.1m",
    "0.0001n",
    "1n",
    "1u",
    "1m",
    "1k",
    "1K",
    "1M",
    "1G",
    "1T",
    "1P",
    "1E",
    "1000E",
    "12E",
    "1.01E",
    "1Ki",
    "1Mi",
    "1Gi",
    "1Ti",
    "1Pi",
    "1Ei",
    "10Ei",
    "8Ei",
    "1ki",
    "1KI",
    "1.5Ki",
    "0.5Ki",
    "1.1Gi",
    "1.5Gi",
    "-1.5Gi",
    "1024Ki",
    "1023",
    "1025",
    "1536Mi",
    "0.001Ki",
    "12Mi",
    "100Mi",
    "1e3",
    "1E3",
    "1e+3",
    "1e-3",
    "1e",
    "1E-",
    "1e3e",
    "1e0",
    "1e-9",
    "1e-10",
    "1e-20",
    "1.5e-9",
    "1e18",
    "1e19",
    "1e400",
    "2e-400",
    "1.5e1000",
    "1e2147483647",
    "1e9999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775807",
    "9999999999999999999",
    "999999999999999999",
    "1234567890123456789",
    "12345678901234567890",
    "0.123456789012345678",
    "123456789012345678.9",
    "18446744073709551616",
    "99999999999999999999e400",
    "9999999999999999999999999999999999999G",
    "50.703k",
    "0.2G",
    "200M",
    "50Mi",
    "10Mm",
    "10Mo",
    "Mi",
    "Three",
    "1Mi5",
    "5.5.5",
    "1.5G",
    "200k",
    "200K",
    "1,3G",
    "10000k",
    "0.000000001",
    "0.0000000001",
    "123.456m",
    "-0.0000000001",
    "1Ki-",
    "1Gi1",
    "\u0661",
    "1\u00a0",
]


def _parse_cases() -> list[Case]:
    out: list[Case] = []
    for s in PARSE_INPUTS:
        lit_s = lit(s)
        out += [
            (f"isQuantity({lit_s})", lambda s=s: Q.is_quantity(s)),
            (f"quantity({lit_s}).isInteger()", lambda s=s: Q.is_integer(q(s))),
            (f"quantity({lit_s}).asInteger()", lambda s=s: Q.as_integer(q(s))),
            (f"quantity({lit_s}).asApproximateFloat()", lambda s=s: Q.as_approximate_float(q(s))),
            (f"sign(quantity({lit_s}))", lambda s=s: Q.sign(q(s))),
        ]
    return out


PAIRS = [
    ("1", "1"),
    ("1", "1000m"),
    ("1k", "1000"),
    ("1Ki", "1024"),
    ("1Ki", "1k"),
    ("1.5Gi", "1536Mi"),
    ("1.5Gi", "1.5Gi"),
    ("-1", "1"),
    ("0", "-0"),
    ("1e400", "1e399"),
    ("1e-20", "1n"),
    ("1n", "2e-9"),
    ("9223372036854775807", "1"),
    ("-9223372036854775807", "9223372036854775807"),
    ("9999999999999999999999999999999999999G", "1"),
    ("1e18", "1E"),
    ("0.5", "500m"),
    ("100Mi", "0.1Gi"),
    ("1m", "1u"),
    ("50k", "20"),
    ("0", "1.5Gi"),
    ("1Ei", "1Ei"),
    ("8Ei", "1"),
    ("1.5", "0.5"),
]


def _pair_cases() -> list[Case]:
    out: list[Case] = []
    for a, b in PAIRS:
        qa, qb = f"quantity({lit(a)})", f"quantity({lit(b)})"
        out += [
            (f"{qa}.add({qb})", lambda a=a, b=b: Q.add(q(a), q(b))),
            (f"{qa}.sub({qb})", lambda a=a, b=b: Q.sub(q(a), q(b))),
            (f"{qa}.compareTo({qb})", lambda a=a, b=b: Q.compare_to(q(a), q(b))),
            (f"{qa}.isGreaterThan({qb})", lambda a=a, b=b: Q.is_greater_than(q(a), q(b))),
            (f"{qa}.isLessThan({qb})", lambda a=a, b=b: Q.is_less_than(q(a), q(b))),
            (f"{qa} == {qb}", lambda a=a, b=b: Q.equals(q(a), q(b))),
            (f"{qa}.add({qb}).isInteger()", lambda a=a, b=b: Q.is_integer(Q.add(q(a), q(b)))),
            (
                f"{qa}.add({qb}).asApproximateFloat()",
                lambda a=a, b=b: Q.as_approximate_float(Q.add(q(a), q(b))),
            ),
            (f"{qa}.sub({qb}).isInteger()", lambda a=a, b=b: Q.is_integer(Q.sub(q(a), q(b)))),
            (f"{qa}.sub({qb}).asInteger()", lambda a=a, b=b: Q.as_integer(Q.sub(q(a), q(b)))),
            (f"{qa}.sub({qb}).compareTo({qa})", lambda a=a, b=b: Q.compare_to(Q.sub(q(a), q(b)), q(a))),
            (f"sign({qa}.sub({qb}))", lambda a=a, b=b: Q.sign(Q.sub(q(a), q(b)))),
        ]
    return out


INTS = [0, 1, -1, 20, 1000, 9223372036854775807, -9223372036854775807 - 1]
INT_BASES = ["0", "1", "50k", "1.5", "1.5Gi", "9223372036854775807", "-9223372036854775807", "1e18", "1m"]


def _int_cases() -> list[Case]:
    out: list[Case] = []
    for base in INT_BASES:
        for n in INTS:
            qb = f"quantity({lit(base)})"
            lit_n = str(n) if n != -(1 << 63) else "-9223372036854775807 - 1"
            out += [
                (f"{qb}.add({lit_n})", lambda b=base, n=n: Q.add_int(q(b), n)),
                (f"{qb}.sub({lit_n})", lambda b=base, n=n: Q.sub_int(q(b), n)),
                (f"{qb}.add({lit_n}).asInteger()", lambda b=base, n=n: Q.as_integer(Q.add_int(q(b), n))),
                (f"{qb}.sub({lit_n}).asInteger()", lambda b=base, n=n: Q.as_integer(Q.sub_int(q(b), n))),
                (
                    f"{qb}.add({lit_n}).asApproximateFloat()",
                    lambda b=base, n=n: Q.as_approximate_float(Q.add_int(q(b), n)),
                ),
            ]
    return out


# Equality as cel-go evaluates it: Kubernetes' Quantity.Equal rejects the *Quantity that add/sub return.
EQUALITY: list[Case] = [
    ('quantity("1").add(0) == quantity("1")', lambda: Q.equals(Q.add_int(q("1"), 0), q("1"))),
    ('quantity("1") == quantity("1").add(0)', lambda: Q.equals(q("1"), Q.add_int(q("1"), 0))),
    (
        'quantity("1").add(1) == quantity("1").add(1)',
        lambda: Q.equals(Q.add_int(q("1"), 1), Q.add_int(q("1"), 1)),
    ),
    ('quantity("1") != quantity("1").add(0)', lambda: Q.not_equals(q("1"), Q.add_int(q("1"), 0))),
    ('quantity("1") != quantity("2")', lambda: Q.not_equals(q("1"), q("2"))),
    ('quantity("1") != quantity("1000m")', lambda: Q.not_equals(q("1"), q("1000m"))),
    (
        'quantity("1.5Gi").sub(quantity("0.5Gi")).isInteger()',
        lambda: Q.is_integer(Q.sub(q("1.5Gi"), q("0.5Gi"))),
    ),
    ('quantity("1Gi").sub(quantity("1Gi")).isInteger()', lambda: Q.is_integer(Q.sub(q("1Gi"), q("1Gi")))),
]

CASES: list[Case] = KUBERNETES_TABLE + _parse_cases() + _pair_cases() + _int_cases() + EQUALITY

QUANTITY_STRINGS = [*PARSE_INPUTS, "1536Mi", "3e2", "1024Mi", "1.5G", "0.5", "100m", "-100m", "2Gi", "1025Ki"]


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]


@pytest.mark.parametrize("s", QUANTITY_STRINGS)
def test_canonical_string_matches_apimachinery(s: str) -> None:
    """Quantity.String() (apimachinery caches the input string when it is already canonical)."""
    golden = results()[f"quantity_string:{s}"]
    try:
        actual = {"t": "string", "v": str(q(s))}
    except LibraryError as e:
        actual = {"t": "error", "v": str(e)}
    assert golden == actual


def test_canonical_strings_of_arithmetic() -> None:
    assert str(Q.add(q("1Ki"), q("1Ki"))) == "2Ki"
    assert str(Q.add_int(q("0"), 5)) == "5"  # a zero receiver takes the addend's DecimalExponent format
    assert str(Q.sub(q("1.5Gi"), q("0.5Gi"))) == "1Gi"


def test_the_quirks_design_md_names() -> None:
    assert Q.is_integer(q("1.5Gi")) is False
    with pytest.raises(LibraryError, match="quantities must match the regular expression"):
        q("1.5.5")


def test_absurd_exponents_are_refused_instead_of_hanging() -> None:
    # Kubernetes would materialise 10**2147483657 here; celkeeper refuses with a clear error.
    with pytest.raises(LibraryError, match="too large"):
        Q.add(q("1e2147483647"), q("1.5Gi"))
    with pytest.raises(LibraryError, match="too large"):
        q("11111111111111111111e2000000000")
