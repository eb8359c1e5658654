"""The semver library (version 1) against Kubernetes 1.34 (golden results), including Kubernetes' table."""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import semver as S
from tests.cel.k8slib.golden_check import Case, check, ids, lit

sv = S.semver

# Kubernetes' library/semver_test.go (1.34), minus the compile-error case.
KUBERNETES_TABLE: list[Case] = [
    ('semver("1.2.3")', lambda: sv("1.2.3")),
    ('semver("v1.0")', lambda: sv("v1.0")),
    ('isSemver("1.2.3-beta.1+build.1")', lambda: S.is_semver("1.2.3-beta.1+build.1")),
    ('isSemver("")', lambda: S.is_semver("")),
    ('isSemver("v1.0.0")', lambda: S.is_semver("v1.0.0")),
    ('isSemver(" 1.0.0")', lambda: S.is_semver(" 1.0.0")),
    ('isSemver("1. 0.0")', lambda: S.is_semver("1. 0.0")),
    ('isSemver("1.0.0 ")', lambda: S.is_semver("1.0.0 ")),
    ('isSemver("01.01.01")', lambda: S.is_semver("01.01.01")),
    ('isSemver("1")', lambda: S.is_semver("1")),
    ('isSemver("1.1")', lambda: S.is_semver("1.1")),
    ('isSemver("", true)', lambda: S.is_semver("", True)),
    ('isSemver(" 1.0.0", true)', lambda: S.is_semver(" 1.0.0", True)),
    ('isSemver("1. 0.0", true)', lambda: S.is_semver("1. 0.0", True)),
    ('isSemver("1.0.0 ", true)', lambda: S.is_semver("1.0.0 ", True)),
    ('isSemver("v1.0.0", true)', lambda: S.is_semver("v1.0.0", True)),
    ('isSemver("01.01.01", true)', lambda: S.is_semver("01.01.01", True)),
    ('isSemver("1", true)', lambda: S.is_semver("1", True)),
    ('isSemver("1.1", true)', lambda: S.is_semver("1.1", True)),
    ('semver("v01.01", true) == semver("1.1.0")', lambda: S.equals(sv("v01.01", True), sv("1.1.0"))),
    ('semver("1.2.3") == semver("1.2.3")', lambda: S.equals(sv("1.2.3"), sv("1.2.3"))),
    ('semver("1.2.3") == semver("1.0.0")', lambda: S.equals(sv("1.2.3"), sv("1.0.0"))),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', lambda: S.is_less_than(sv("1.0.0"), sv("1.2.3"))),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', lambda: S.is_less_than(sv("1.0.0"), sv("1.0.0"))),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', lambda: S.is_greater_than(sv("1.2.3"), sv("1.0.0"))),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', lambda: S.is_greater_than(sv("1.0.0"), sv("1.0.0"))),
    ('semver("1.2.3").compareTo(semver("1.2.3"))', lambda: S.compare_to(sv("1.2.3"), sv("1.2.3"))),
    ('semver("1.0.0").compareTo(semver("1.2.3"))', lambda: S.compare_to(sv("1.0.0"), sv("1.2.3"))),
    ('semver("1.2.3").compareTo(semver("1.0.0"))', lambda: S.compare_to(sv("1.2.3"), sv("1.0.0"))),
    ('semver("1.2.3").major()', lambda: S.major(sv("1.2.3"))),
    ('semver("1.2.3").minor()', lambda: S.minor(sv("1.2.3"))),
    ('semver("1.2.3").patch()', lambda: S.patch(sv("1.2.3"))),
]

INPUTS = [
    "1.2.3",
    "0.0.0",
    "1.2.3-alpha",
    "1.2.3-alpha.1",
    "1.2.3-0.3.7",
    "1.2.3-x.7.z.92",
    "1.2.3+build",
    "1.2.3-rc.1+build.5",
    "1.2.3-",
    "1.2.3+",
    "1.2.3-a..b",
    "1.2.3+a..b",
    "1.2.3-01",
    "1.2.3-0a",
    "1.2.3-a_b",
    "1.2.3+a_b",
    "1.2",
    "1",
    "",
    "v1.2.3",
    "V1.2.3",
    "01.2.3",
    "1.02.3",
    "1.2.03",
    "1.2.3.4",
    "a.b.c",
    "1.2.c",
    "-1.2.3",
    "1.-2.3",
    "1.2.-3",
    "18446744073709551615.0.0",
    "18446744073709551616.0.0",
    "9223372036854775808.1.1",
    "1.2.3-18446744073709551616",
    "\uff11.2.3",
    "1.2.3-ß",
    "v",
    "v.",
    "v1",
    "v1.",
    "v1.2",
    "v01.02",
    "v1.2-rc",
    "v1.2+b",
    "1.0-alpha",
    "0001.0002.0003",
    "00.00.00",
    "0.00.0",
    "v0",
    "vv1.2.3",
    "1..3",
    "1.2.3 ",
    "1.2.3-rc.01",
]

ORDER = [
    ("1.0.0-alpha", "1.0.0-alpha.1"),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
    ("1.0.0-alpha.beta", "1.0.0-beta"),
    ("1.0.0-beta", "1.0.0-beta.2"),
    ("1.0.0-beta.2", "1.0.0-beta.11"),
    ("1.0.0-beta.11", "1.0.0-rc.1"),
    ("1.0.0-rc.1", "1.0.0"),
    ("1.0.0+a", "1.0.0+b"),
    ("1.0.0-Z", "1.0.0-a"),
    ("2.0.0", "10.0.0"),
    ("1.10.0", "1.9.0"),
    ("1.0.10", "1.0.9"),
    ("1.0.0-1", "1.0.0-a"),
    ("1.0.0-a.1", "1.0.0-a"),
]


def _input_cases() -> list[Case]:
    out: list[Case] = []
    for s in INPUTS:
        for norm in (False, True):
            arg = f"{lit(s)}, true" if norm else lit(s)
            out += [
                (f"isSemver({arg})", lambda s=s, n=norm: S.is_semver(s, n)),
                (f"semver({arg})", lambda s=s, n=norm: sv(s, n)),
                (f"semver({arg}).major()", lambda s=s, n=norm: S.major(sv(s, n))),
                (f"semver({arg}).minor()", lambda s=s, n=norm: S.minor(sv(s, n))),
                (f"semver({arg}).patch()", lambda s=s, n=norm: S.patch(sv(s, n))),
            ]
    return out


def _order_cases() -> list[Case]:
    out: list[Case] = []
    for a, b in ORDER:
        for x, y in ((a, b), (b, a)):
            sa, sb = f"semver({lit(x)})", f"semver({lit(y)})"
            out += [
                (f"{sa}.compareTo({sb})", lambda x=x, y=y: S.compare_to(sv(x), sv(y))),
                (f"{sa}.isLessThan({sb})", lambda x=x, y=y: S.is_less_than(sv(x), sv(y))),
                (f"{sa}.isGreaterThan({sb})", lambda x=x, y=y: S.is_greater_than(sv(x), sv(y))),
                (f"{sa} == {sb}", lambda x=x, y=y: S.equals(sv(x), sv(y))),
            ]
    return out


CASES: list[Case] = KUBERNETES_TABLE + _input_cases() + _order_cases()


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]
