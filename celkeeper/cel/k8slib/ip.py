"""Kubernetes' CEL ip and cidr libraries (k8s.io/apiserver/pkg/cel/library/ip.go and cidr.go, 1.34) over
the net/netip port. IP values are `netip.Addr`, CIDR values are `netip.Prefix` (the address as written,
not masked: `cidr('192.168.0.1/24').ip()` is 192.168.0.1).
"""

from __future__ import annotations

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.gostrings import go_quote
from celkeeper.cel.k8slib.netip import Addr, AddrError, Prefix, parse_addr, parse_prefix

NO_SUCH_OVERLOAD = "no such overload"


def _parse_ip(raw: str) -> Addr:
    """parseIPAddr: netip.ParseAddr, then reject zones and IPv4-mapped IPv6."""
    try:
        addr = parse_addr(raw)
    except AddrError as e:
        raise LibraryError(
            f"IP Address {go_quote(raw)} parse error during conversion from string: {e}"
        ) from None
    if addr.zone:
        raise LibraryError(f"IP address {go_quote(raw)} with zone value is not allowed")
    if addr.is_4in6():
        raise LibraryError(f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return addr


def _parse_cidr(raw: str) -> Prefix:
    """parseCIDR followed by stringToCIDR's wrapping (the prefix appears twice, as in Kubernetes)."""
    lead = "network address parse error during conversion from string: "
    try:
        net = parse_prefix(raw)
    except AddrError as e:
        raise LibraryError(lead + lead + str(e)) from None
    if net.addr.is_4in6():
        raise LibraryError(lead + f"IPv4-mapped IPv6 address {go_quote(raw)} is not allowed")
    return net


# ---------------------------------------------------------------- ip


def ip(s: str) -> Addr:
    """ip(<string>)."""
    return _parse_ip(s)


def is_ip(s: str) -> bool:
    """isIP(<string>)."""
    try:
        _parse_ip(s)
    except LibraryError:
        return False
    return True


def ip_is_canonical(s: str) -> bool:
    """ip.isCanonical(<string>): raises the ip() parse error for an invalid address."""
    return str(_parse_ip(s)) == s


def ip_to_string(a: Addr) -> str:
    """string(<IP>)."""
    return str(a)


def family(a: Addr) -> int:
    """<IP>.family(): 4 or 6."""
    return 4 if a.is4 else 6


def is_unspecified(a: Addr) -> bool:
    """<IP>.isUnspecified()."""
    return a.is_unspecified()


def is_loopback(a: Addr) -> bool:
    """<IP>.isLoopback()."""
    return a.is_loopback()


def is_link_local_multicast(a: Addr) -> bool:
    """<IP>.isLinkLocalMulticast()."""
    return a.is_link_local_multicast()


def is_link_local_unicast(a: Addr) -> bool:
    """<IP>.isLinkLocalUnicast()."""
    return a.is_link_local_unicast()


def is_global_unicast(a: Addr) -> bool:
    """<IP>.isGlobalUnicast()."""
    return a.is_global_unicast()


def ip_equals(a: Addr, b: Addr) -> bool:
    """`ip == ip`: the same address (and zone)."""
    return a == b


# ---------------------------------------------------------------- cidr


def cidr(s: str) -> Prefix:
    """cidr(<string>)."""
    return _parse_cidr(s)


def is_cidr(s: str) -> bool:
    """isCIDR(<string>)."""
    try:
        _parse_cidr(s)
    except LibraryError:
        return False
    return True


def cidr_to_string(p: Prefix) -> str:
    """string(<CIDR>)."""
    return str(p)


def contains_ip(p: Prefix, other: Addr | str) -> bool:
    """<CIDR>.containsIP(<IP> or <string>).

    With a string that is not a valid IP, Kubernetes answers "no such overload" (the parse error is
    dropped: cidrContainsIP reports MaybeNoSuchOverloadErr of the CIDR operand), not the parse error.
    """
    if isinstance(other, str):
        try:
            other = _parse_ip(other)
        except LibraryError:
            raise LibraryError(NO_SUCH_OVERLOAD) from None
    return p.contains(other)


def contains_cidr(p: Prefix, other: Prefix | str) -> bool:
    """<CIDR>.containsCIDR(<CIDR> or <string>); an invalid string raises cidr()'s parse error."""
    if isinstance(other, str):
        other = _parse_cidr(other)
    return p.overlaps(other) and p.bits <= other.bits


def cidr_ip(p: Prefix) -> Addr:
    """<CIDR>.ip(): the address as written."""
    return p.addr


def prefix_length(p: Prefix) -> int:
    """<CIDR>.prefixLength()."""
    return p.bits


def masked(p: Prefix) -> Prefix:
    """<CIDR>.masked()."""
    return p.masked()


def cidr_equals(a: Prefix, b: Prefix) -> bool:
    """`cidr == cidr`: the same address as written and the same length (not masked)."""
    return a == b
