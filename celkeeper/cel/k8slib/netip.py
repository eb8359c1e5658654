"""A port of what Kubernetes' ip/cidr libraries and Go's net/url use from Go 1.24's net/netip:
ParseAddr, ParsePrefix, Addr.String, the Is* predicates, Prefix.Masked/Contains/Overlaps/String.
Error messages are netip's, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from celkeeper.cel.k8slib.gostrings import go_quote


class AddrError(ValueError):
    """A netip parse error; str() is Go's err.Error()."""


@dataclass(frozen=True, slots=True)
class Addr:
    """An IP address: 32 bits (is4) or 128 bits, with an optional IPv6 zone. Equality is Go's Addr ==."""

    value: int
    is4: bool
    zone: str = ""

    @property
    def is6(self) -> bool:
        return not self.is4

    @property
    def bit_len(self) -> int:
        return 32 if self.is4 else 128

    def is_4in6(self) -> bool:
        return self.is6 and (self.value >> 32) == 0xFFFF

    def unmap(self) -> Addr:
        return Addr(self.value & 0xFFFFFFFF, True) if self.is_4in6() else self

    def _u16(self, i: int) -> int:
        return (self.value >> (16 * (7 - i))) & 0xFFFF

    def __str__(self) -> str:
        if self.is4:
            v = self.value
            return f"{v >> 24 & 255}.{v >> 16 & 255}.{v >> 8 & 255}.{v & 255}"
        zone = f"%{self.zone}" if self.zone else ""
        if self.is_4in6():
            return "::ffff:" + str(self.unmap()) + zone
        zero_start, zero_end = 255, 255
        for i in range(8):
            j = i
            while j < 8 and self._u16(j) == 0:
                j += 1
            if j - i >= 2 and j - i > zero_end - zero_start:
                zero_start, zero_end = i, j
        out = []
        i = 0
        while i < 8:
            if i == zero_start:
                out.append("::")
                i = zero_end
                if i >= 8:
                    break
            elif i > 0:
                out.append(":")
            out.append(f"{self._u16(i):x}")
            i += 1
        return "".join(out) + zone

    def is_unspecified(self) -> bool:
        return self.value == 0 and not self.zone

    def is_loopback(self) -> bool:
        ip = self.unmap()
        return (ip.value >> 24) == 127 if ip.is4 else ip.value == 1

    def is_multicast(self) -> bool:
        ip = self.unmap()
        return (ip.value >> 28) == 0xE if ip.is4 else (ip.value >> 120) == 0xFF

    def is_link_local_multicast(self) -> bool:
        ip = self.unmap()
        if ip.is4:
            return (ip.value >> 8) == 0xE00000
        return (ip._u16(0) & 0xFF0F) == 0xFF02

    def is_link_local_unicast(self) -> bool:
        ip = self.unmap()
        if ip.is4:
            return (ip.value >> 16) == 0xA9FE
        return (ip._u16(0) & 0xFFC0) == 0xFE80

    def is_global_unicast(self) -> bool:
        ip = self.unmap()
        if ip.is4 and ip.value in (0, 0xFFFFFFFF):
            return False
        if ip.is6 and ip.value == 0 and not ip.zone:
            return False
        return not ip.is_loopback() and not ip.is_multicast() and not ip.is_link_local_unicast()


def _err(s: str, msg: str, at: str = "") -> AddrError:
    if at:
        return AddrError(f"ParseAddr({go_quote(s)}): {msg} (at {go_quote(at)})")
    return AddrError(f"ParseAddr({go_quote(s)}): {msg}")


def _parse_v4_fields(whole: str, off: int, end: int) -> int:
    s = whole[off:end]
    val = pos = dig_len = 0
    fields = [0, 0, 0, 0]
    for i, ch in enumerate(s):
        if "0" <= ch <= "9":
            if dig_len == 1 and val == 0:
                raise _err(whole, "IPv4 field has octet with leading zero")
            val = val * 10 + ord(ch) - 48
            dig_len += 1
            if val > 255:
                raise _err(whole, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _err(whole, "IPv4 field must have at least one digit", s[i:])
            if pos == 3:
                raise _err(whole, "IPv4 address too long")
            fields[pos] = val
            pos += 1
            val = dig_len = 0
        else:
            raise _err(whole, "unexpected character", s[i:])
    if pos < 3:
        raise _err(whole, "IPv4 address too short")
    fields[3] = val
    return fields[0] << 24 | fields[1] << 16 | fields[2] << 8 | fields[3]


_HEX = {c: int(c, 16) for c in "0123456789abcdefABCDEF"}


def _parse_v6(whole: str) -> Addr:
    s, zone = whole, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _err(whole, "zone must be a non-empty string")
    ip = [0] * 16
    ellipsis = -1
    if len(s) >= 2 and s[0] == ":" and s[1] == ":":
        ellipsis = 0
        s = s[2:]
        if not s:
            return Addr(0, False, zone)
    i = 0
    while i < 16:
        off = acc = 0
        while off < len(s) and s[off] in _HEX:
            acc = (acc << 4) + _HEX[s[off]]
            if off > 3:
                raise _err(whole, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _err(whole, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _err(whole, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _err(whole, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise _err(whole, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            end = len(whole) - (len(zone) + 1 if zone else 0)
            v4 = _parse_v4_fields(whole, end - len(s), end)
            ip[i : i + 4] = [v4 >> 24 & 255, v4 >> 16 & 255, v4 >> 8 & 255, v4 & 255]
            s = ""
            i += 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 255
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _err(whole, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _err(whole, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _err(whole, "multiple :: in address", s)
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        raise _err(whole, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _err(whole, "address string too short")
        n = 16 - i
        ip = ip[:ellipsis] + [0] * n + ip[ellipsis:i]
    elif ellipsis >= 0:
        raise _err(whole, "the :: must expand to at least one field of zeros")
    return Addr(int.from_bytes(bytes(ip), "big"), False, zone)


def parse_addr(s: str) -> Addr:
    """netip.ParseAddr; raises AddrError."""
    for ch in s:
        if ch == ".":
            return Addr(_parse_v4_fields(s, 0, len(s)), True)
        if ch == ":":
            return _parse_v6(s)
        if ch == "%":
            raise _err(s, "missing IPv6 address")
    raise _err(s, "unable to parse IP")


@dataclass(frozen=True, slots=True)
class Prefix:
    """A netip.Prefix as ParsePrefix builds it (the address is not masked). Equality is Go's Prefix ==."""

    addr: Addr
    bits: int

    def __str__(self) -> str:
        return f"{self.addr}/{self.bits}"

    def masked(self) -> Prefix:
        return Prefix(_mask(self.addr, self.bits), self.bits)

    def contains(self, ip: Addr) -> bool:
        if ip.zone or ip.bit_len != self.addr.bit_len:
            return False
        return _mask(ip, self.bits).value == _mask(self.addr, self.bits).value

    def overlaps(self, o: Prefix) -> bool:
        if self == o:
            return True
        if self.addr.is4 != o.addr.is4:
            return False
        min_bits = min(self.bits, o.bits)
        if min_bits == 0:
            return True
        return _mask(self.addr, min_bits) == _mask(o.addr, min_bits)


def _mask(a: Addr, bits: int) -> Addr:
    width = a.bit_len
    keep = ((1 << bits) - 1) << (width - bits) if bits else 0
    return Addr(a.value & keep, a.is4)


def parse_prefix(s: str) -> Prefix:
    """netip.ParsePrefix; raises AddrError."""
    i = s.rfind("/")
    if i < 0:
        raise AddrError(f"netip.ParsePrefix({go_quote(s)}): no '/'")
    try:
        ip = parse_addr(s[:i])
    except AddrError as e:
        raise AddrError(f"netip.ParsePrefix({go_quote(s)}): {e}") from None
    if ip.zone:
        raise AddrError(f"netip.ParsePrefix({go_quote(s)}): IPv6 zones cannot be present in a prefix")
    bits_str = s[i + 1 :]
    bad = AddrError(f"netip.ParsePrefix({go_quote(s)}): bad bits after slash: {go_quote(bits_str)}")
    if len(bits_str) > 1 and not ("1" <= bits_str[0] <= "9"):
        raise bad
    body = bits_str[1:] if bits_str[:1] in ("+", "-") else bits_str
    if not body or not body.isascii() or not body.isdigit() or len(body) > 19:
        raise bad
    bits = int(bits_str)
    if not -(1 << 63) <= bits < 1 << 63:
        raise bad
    if bits < 0 or bits > ip.bit_len:
        raise AddrError(f"netip.ParsePrefix({go_quote(s)}): prefix length out of range")
    return Prefix(ip, bits)
