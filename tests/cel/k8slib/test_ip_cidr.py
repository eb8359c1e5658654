"""The ip and cidr libraries against Kubernetes 1.34 (golden results), including Kubernetes' test tables."""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import ip as I
from tests.cel.k8slib.golden_check import Case, check, ids, lit

# Kubernetes' library/ip_test.go and cidr_test.go (1.34), minus compile-error and type() cases.
KUBERNETES_TABLE: list[Case] = [
    ('ip("192.168.0.1")', lambda: I.ip("192.168.0.1")),
    ('ip("192.168.0.1.0")', lambda: I.ip("192.168.0.1.0")),
    ('isIP("192.168.0.1")', lambda: I.is_ip("192.168.0.1")),
    ('isIP("192.168.0.1.0")', lambda: I.is_ip("192.168.0.1.0")),
    ('ip.isCanonical("127.0.0.1")', lambda: I.ip_is_canonical("127.0.0.1")),
    ('ip.isCanonical("127.0.0.1.0")', lambda: I.ip_is_canonical("127.0.0.1.0")),
    ('ip("192.168.0.1").family()', lambda: I.family(I.ip("192.168.0.1"))),
    ('ip("0.0.0.0").isUnspecified()', lambda: I.is_unspecified(I.ip("0.0.0.0"))),
    ('ip("127.0.0.1").isUnspecified()', lambda: I.is_unspecified(I.ip("127.0.0.1"))),
    ('ip("127.0.0.1").isLoopback()', lambda: I.is_loopback(I.ip("127.0.0.1"))),
    ('ip("1.2.3.4").isLoopback()', lambda: I.is_loopback(I.ip("1.2.3.4"))),
    ('ip("224.0.0.1").isLinkLocalMulticast()', lambda: I.is_link_local_multicast(I.ip("224.0.0.1"))),
    ('ip("224.0.1.1").isLinkLocalMulticast()', lambda: I.is_link_local_multicast(I.ip("224.0.1.1"))),
    ('ip("169.254.169.254").isLinkLocalUnicast()', lambda: I.is_link_local_unicast(I.ip("169.254.169.254"))),
    ('ip("192.168.0.1").isLinkLocalUnicast()', lambda: I.is_link_local_unicast(I.ip("192.168.0.1"))),
    ('ip("192.168.0.1").isGlobalUnicast()', lambda: I.is_global_unicast(I.ip("192.168.0.1"))),
    ('ip("255.255.255.255").isGlobalUnicast()', lambda: I.is_global_unicast(I.ip("255.255.255.255"))),
    ('ip("2001:db8::68")', lambda: I.ip("2001:db8::68")),
    ('ip("2001:db8:::68")', lambda: I.ip("2001:db8:::68")),
    ('isIP("2001:db8::68")', lambda: I.is_ip("2001:db8::68")),
    ('isIP("2001:db8:::68")', lambda: I.is_ip("2001:db8:::68")),
    ('ip.isCanonical("2001:db8::68")', lambda: I.ip_is_canonical("2001:db8::68")),
    ('ip.isCanonical("2001:DB8::68")', lambda: I.ip_is_canonical("2001:DB8::68")),
    ('ip.isCanonical("2001:db8:::68")', lambda: I.ip_is_canonical("2001:db8:::68")),
    ('ip("2001:db8::68").family()', lambda: I.family(I.ip("2001:db8::68"))),
    ('ip("::").isUnspecified()', lambda: I.is_unspecified(I.ip("::"))),
    ('ip("::1").isUnspecified()', lambda: I.is_unspecified(I.ip("::1"))),
    ('ip("::1").isLoopback()', lambda: I.is_loopback(I.ip("::1"))),
    ('ip("2001:db8::abcd").isLoopback()', lambda: I.is_loopback(I.ip("2001:db8::abcd"))),
    ('ip("ff02::1").isLinkLocalMulticast()', lambda: I.is_link_local_multicast(I.ip("ff02::1"))),
    ('ip("fd00::1").isLinkLocalMulticast()', lambda: I.is_link_local_multicast(I.ip("fd00::1"))),
    ('ip("fe80::1").isLinkLocalUnicast()', lambda: I.is_link_local_unicast(I.ip("fe80::1"))),
    ('ip("fd80::1").isLinkLocalUnicast()', lambda: I.is_link_local_unicast(I.ip("fd80::1"))),
    ('ip("2001:db8::abcd").isGlobalUnicast()', lambda: I.is_global_unicast(I.ip("2001:db8::abcd"))),
    ('ip("ff00::1").isGlobalUnicast()', lambda: I.is_global_unicast(I.ip("ff00::1"))),
    ('string(ip("192.168.0.1"))', lambda: I.ip_to_string(I.ip("192.168.0.1"))),
    ('cidr(dyn("192.168.0.0/24"))', lambda: I.cidr("192.168.0.0/24")),
    ('cidr("192.168.0.0/")', lambda: I.cidr("192.168.0.0/")),
    (
        'cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))',
        lambda: I.contains_ip(I.cidr("192.168.0.0/24"), I.ip("192.168.0.1")),
    ),
    (
        'cidr("192.168.0.0/24").containsIP(ip("192.168.1.1"))',
        lambda: I.contains_ip(I.cidr("192.168.0.0/24"), I.ip("192.168.1.1")),
    ),
    (
        'cidr("192.168.0.0/24").containsIP("192.168.0.1")',
        lambda: I.contains_ip(I.cidr("192.168.0.0/24"), "192.168.0.1"),
    ),
    (
        'cidr("192.168.0.0/24").containsIP("192.168.1.1")',
        lambda: I.contains_ip(I.cidr("192.168.0.0/24"), "192.168.1.1"),
    ),
    (
        'cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/25"))',
        lambda: I.contains_cidr(I.cidr("192.168.0.0/24"), I.cidr("192.168.0.0/25")),
    ),
    (
        'cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.0/23"))',
        lambda: I.contains_cidr(I.cidr("192.168.0.0/24"), I.cidr("192.168.0.0/23")),
    ),
    (
        'cidr("192.168.0.0/24").containsCIDR("192.168.0.0/25")',
        lambda: I.contains_cidr(I.cidr("192.168.0.0/24"), "192.168.0.0/25"),
    ),
    (
        'cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")',
        lambda: I.contains_cidr(I.cidr("192.168.0.0/24"), "192.168.0.0/23"),
    ),
    ('cidr("192.168.0.0/24").ip()', lambda: I.cidr_ip(I.cidr("192.168.0.0/24"))),
    ('cidr("192.168.0.0/24").masked()', lambda: I.masked(I.cidr("192.168.0.0/24"))),
    ('cidr("192.168.0.1/24").masked()', lambda: I.masked(I.cidr("192.168.0.1/24"))),
    ('cidr("192.168.0.0/24").prefixLength()', lambda: I.prefix_length(I.cidr("192.168.0.0/24"))),
    ('cidr("2001:db8::/32")', lambda: I.cidr("2001:db8::/32")),
    ('cidr("2001:db8::/")', lambda: I.cidr("2001:db8::/")),
    (
        'cidr("2001:db8::/32").containsIP(ip("2001:db8::1"))',
        lambda: I.contains_ip(I.cidr("2001:db8::/32"), I.ip("2001:db8::1")),
    ),
    (
        'cidr("2001:db8::/32").containsIP(ip("2001:dc8::1"))',
        lambda: I.contains_ip(I.cidr("2001:db8::/32"), I.ip("2001:dc8::1")),
    ),
    (
        'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/33"))',
        lambda: I.contains_cidr(I.cidr("2001:db8::/32"), I.cidr("2001:db8::/33")),
    ),
    (
        'cidr("2001:db8::/32").containsCIDR(cidr("2001:db8::/31"))',
        lambda: I.contains_cidr(I.cidr("2001:db8::/32"), I.cidr("2001:db8::/31")),
    ),
    ('cidr("2001:db8::/32").ip()', lambda: I.cidr_ip(I.cidr("2001:db8::/32"))),
    ('cidr("2001:db8:1::/32").masked()', lambda: I.masked(I.cidr("2001:db8:1::/32"))),
    ('cidr("2001:db8::/32").prefixLength()', lambda: I.prefix_length(I.cidr("2001:db8::/32"))),
    ('string(cidr("192.168.0.0/24"))', lambda: I.cidr_to_string(I.cidr("192.168.0.0/24"))),
]

IP_INPUTS = [
    "0.0.0.0",
    "127.0.0.1",
    "127.255.0.9",
    "10.0.0.1",
    "169.254.0.1",
    "169.255.0.1",
    "224.0.0.251",
    "224.0.1.1",
    "239.255.255.255",
    "240.0.0.1",
    "255.255.255.255",
    "1.2.3",
    "1.2.3.4.5",
    "1.2.3.04",
    "01.2.3.4",
    "1.2.3.256",
    "1..2.3",
    ".1.2.3",
    "1.2.3.",
    "1.2.3.4 ",
    "1.2.3.a",
    "",
    "abc",
    "%eth0",
    "::",
    "::1",
    "::2",
    "1::",
    "::ffff:1.2.3.4",
    "::ffff:0102:0304",
    "::1.2.3.4",
    "64:ff9b::1.2.3.4",
    "fe80::1%eth0",
    "fe80::1%",
    "fe80::1",
    "febf::1",
    "fec0::1",
    "ff02::1",
    "ff01::1",
    "ff0e::1",
    "ff12::1",
    "fd00::1",
    "2001:db8::1",
    "2001:DB8::1",
    "2001:db8:0:0:0:0:0:1",
    "2001:db8::0:1",
    "1:2:3:4:5:6:7:8",
    "1:2:3:4:5:6:7:8:9",
    "1:2:3:4:5:6:7::",
    "::2:3:4:5:6:7:8",
    "1:0:0:4:0:0:0:8",
    "1:0:0:4:5:0:0:8",
    "0:0:1:0:0:1:0:0",
    "12345::1",
    "1:::2",
    "1::2::3",
    ":1::2",
    "1:2:3:4:5:6:1.2.3.4",
    "1:2:3:4:5:1.2.3.4",
    "::1.2.3.4.5",
    "1::1.2.3.4",
    "::ffff:1.2.3.4%eth0",
    "g::1",
    "1:2:3:4:5:6:7:8:",
    "2001:db8::abcd",
    "::ffff:ffff:ffff",
    "fe80::",
    "\u0661.\u0662.\u0663.\u0664",
]

CIDR_INPUTS = [
    "192.168.0.0/16",
    "192.168.0.1/16",
    "192.168.0.0/24",
    "10.0.0.0/8",
    "0.0.0.0/0",
    "1.2.3.4/32",
    "1.2.3.4/33",
    "1.2.3.4/-1",
    "1.2.3.4/+1",
    "1.2.3.4/01",
    "1.2.3.4/0",
    "1.2.3.4/",
    "1.2.3.4",
    "1.2.3.4/8/8",
    "1.2.3.4/99999999999999999999",
    "1.2.3.4/4294967297",
    "::/0",
    "::1/128",
    "::1/129",
    "2001:db8::/32",
    "2001:db8:1::/32",
    "2001:db8::/48",
    "fe80::1%eth0/64",
    "::ffff:1.2.3.4/120",
    "::ffff:1.2.3.0/24",
    "1.2.3.0/24 ",
    "a/8",
    "/8",
]


def _ip_cases() -> list[Case]:
    out: list[Case] = []
    for s in IP_INPUTS:
        ip = f"ip({lit(s)})"
        out += [
            (f"isIP({lit(s)})", lambda s=s: I.is_ip(s)),
            (ip, lambda s=s: I.ip(s)),
            (f"ip.isCanonical({lit(s)})", lambda s=s: I.ip_is_canonical(s)),
            (f"{ip}.family()", lambda s=s: I.family(I.ip(s))),
            (f"{ip}.isUnspecified()", lambda s=s: I.is_unspecified(I.ip(s))),
            (f"{ip}.isLoopback()", lambda s=s: I.is_loopback(I.ip(s))),
            (f"{ip}.isLinkLocalMulticast()", lambda s=s: I.is_link_local_multicast(I.ip(s))),
            (f"{ip}.isLinkLocalUnicast()", lambda s=s: I.is_link_local_unicast(I.ip(s))),
            (f"{ip}.isGlobalUnicast()", lambda s=s: I.is_global_unicast(I.ip(s))),
            (f"string({ip})", lambda s=s: I.ip_to_string(I.ip(s))),
        ]
    return out


def _cidr_cases() -> list[Case]:
    out: list[Case] = []
    for s in CIDR_INPUTS:
        c = f"cidr({lit(s)})"
        out += [
            (f"isCIDR({lit(s)})", lambda s=s: I.is_cidr(s)),
            (c, lambda s=s: I.cidr(s)),
            (f"{c}.prefixLength()", lambda s=s: I.prefix_length(I.cidr(s))),
            (f"{c}.ip()", lambda s=s: I.cidr_ip(I.cidr(s))),
            (f"{c}.masked()", lambda s=s: I.masked(I.cidr(s))),
            (f"string({c}.masked())", lambda s=s: I.cidr_to_string(I.masked(I.cidr(s)))),
            (f"{c} == {c}.masked()", lambda s=s: I.cidr_equals(I.cidr(s), I.masked(I.cidr(s)))),
        ]
    return out


CONTAINS = [
    ("10.0.0.0/8", "10.1.2.3"),
    ("10.0.0.0/8", "11.0.0.0"),
    ("10.1.0.0/8", "10.200.0.1"),
    ("0.0.0.0/0", "255.255.255.255"),
    ("0.0.0.0/0", "::1"),
    ("::/0", "1.2.3.4"),
    ("::/0", "::1"),
    ("2001:db8::/32", "2001:db8:ffff::1"),
    ("2001:db8::/32", "2001:db9::1"),
    ("1.2.3.4/32", "1.2.3.4"),
    ("10.0.0.0/8", "not-an-ip"),
    ("10.0.0.0/8", "::ffff:10.0.0.1"),
    ("fe80::/10", "fe80::1%eth0"),
]
CONTAINS_CIDR = [
    ("10.0.0.0/8", "10.1.0.0/16"),
    ("192.168.0.0/16", "192.168.0.1/32"),
    ("10.0.0.0/8", "10.0.0.0/8"),
    ("10.0.0.0/16", "10.0.0.0/8"),
    ("10.1.2.3/8", "10.200.0.0/16"),
    ("0.0.0.0/0", "::/0"),
    ("::/0", "2001:db8::/32"),
    ("2001:db8::/32", "2001:db8:1::/48"),
    ("10.0.0.0/8", "11.0.0.0/16"),
    ("10.0.0.0/8", "bad/8"),
    ("10.0.0.0/8", "::ffff:10.0.0.0/104"),
]


def _contains_cases() -> list[Case]:
    out: list[Case] = []
    for net, addr in CONTAINS:
        c = f"cidr({lit(net)})"
        out.append((f"{c}.containsIP({lit(addr)})", lambda n=net, a=addr: I.contains_ip(I.cidr(n), a)))
        out.append(
            (f"{c}.containsIP(ip({lit(addr)}))", lambda n=net, a=addr: I.contains_ip(I.cidr(n), I.ip(a)))
        )
    for net, other in CONTAINS_CIDR:
        c = f"cidr({lit(net)})"
        out.append((f"{c}.containsCIDR({lit(other)})", lambda n=net, o=other: I.contains_cidr(I.cidr(n), o)))
        out.append(
            (
                f"{c}.containsCIDR(cidr({lit(other)}))",
                lambda n=net, o=other: I.contains_cidr(I.cidr(n), I.cidr(o)),
            )
        )
    return out


EQUALITY: list[Case] = [
    ('ip("::1") == ip("0:0:0:0:0:0:0:1")', lambda: I.ip_equals(I.ip("::1"), I.ip("0:0:0:0:0:0:0:1"))),
    (
        'ip("1.2.3.4") == cidr("1.2.3.4/32").ip()',
        lambda: I.ip_equals(I.ip("1.2.3.4"), I.cidr_ip(I.cidr("1.2.3.4/32"))),
    ),
    (
        'cidr("10.0.0.1/8") == cidr("10.0.0.1/8")',
        lambda: I.cidr_equals(I.cidr("10.0.0.1/8"), I.cidr("10.0.0.1/8")),
    ),
    (
        'cidr("10.0.0.1/8") == cidr("10.0.0.0/8")',
        lambda: I.cidr_equals(I.cidr("10.0.0.1/8"), I.cidr("10.0.0.0/8")),
    ),
]

CASES: list[Case] = KUBERNETES_TABLE + _ip_cases() + _cidr_cases() + _contains_cases() + EQUALITY


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]
