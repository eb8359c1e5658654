"""A port of the parts of Go 1.26's net/url (the Go release Gatekeeper v3.23.1 is built with, and the
local toolchain that builds the cel-go engine and the goldens, go1.26.8) that Kubernetes' urls and
format libraries reach: Parse, ParseRequestURI, URL.String, Hostname, Port, EscapedPath and Query.
Go strings are bytes, so this works on UTF-8 bytes and decodes at the edges.

Go 1.26 parses hosts more strictly than Go 1.24 (the release Kubernetes 1.34 is built with), all in
parseHost: a "[" anywhere but at the start of the host is an 'invalid IP-literal'
("http://a[::1]/", "http://[[::1]]/"), and for http and https the port starts at the host's first
colon, not its last (GODEBUG urlstrictcolons=1, Go 1.26's default), so "http://::1/",
"http://host:80:90/" and "https://a:b:c/" fail with 'invalid port ... after host'. Other schemes keep
the last colon (go.dev/issue/78077, as go1.26.8 does: "postgres://h1:5432,h2:5432/" still parses).
The rest (the escaping table, unescape, setPath, String, the query parameter limit) is the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from celkeeper.cel.k8slib.gostrings import go_quote_bytes
from celkeeper.cel.k8slib.netip import AddrError, parse_addr

ENCODE_PATH, ENCODE_PATH_SEGMENT, ENCODE_HOST, ENCODE_ZONE = 1, 2, 3, 4
ENCODE_USER_PASSWORD, ENCODE_QUERY_COMPONENT, ENCODE_FRAGMENT = 5, 6, 7

_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_HEXDIGITS = frozenset(b"0123456789abcdefABCDEF")
MAX_QUERY_PARAMS = 10000


class URLError(ValueError):
    """A net/url error; str() is Go's err.Error()."""


@dataclass(frozen=True, slots=True)
class URL:
    """url.URL (fields hold raw bytes, as Go strings do)."""

    scheme: bytes = b""
    opaque: bytes = b""
    user: tuple[bytes, bytes | None] | None = None  # (username, password or None when unset)
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    omit_host: bool = False
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""
    raw_fragment: bytes = b""


def should_escape(c: int, mode: int) -> bool:
    if c in _ALNUM:
        return False
    if mode in (ENCODE_HOST, ENCODE_ZONE) and c in b"!$&'()*+,;=:[]<>\"":
        return False
    if c in b"-_.~":
        return False
    if c in b"$&+,/:;=?@":
        if mode == ENCODE_PATH:
            return c == ord("?")
        if mode == ENCODE_PATH_SEGMENT:
            return c in b"/;,?"
        if mode == ENCODE_USER_PASSWORD:
            return c in b"@/?:"
        if mode == ENCODE_QUERY_COMPONENT:
            return True
        if mode == ENCODE_FRAGMENT:
            return False
    return not (mode == ENCODE_FRAGMENT and c in b"!()*")


_NO_ESCAPE = {
    mode: bytes(c for c in range(256) if not should_escape(c, mode))
    for mode in (
        ENCODE_PATH,
        ENCODE_PATH_SEGMENT,
        ENCODE_HOST,
        ENCODE_ZONE,
        ENCODE_USER_PASSWORD,
        ENCODE_QUERY_COMPONENT,
        ENCODE_FRAGMENT,
    )
}
_HOST_CHARS = _NO_ESCAPE[ENCODE_HOST] + bytes(range(0x80, 0x100))
_USERINFO_CHARS = bytes(sorted(_ALNUM | frozenset(b"-._:~!$&'()*+,;=%@")))


def _escape_error(s: bytes) -> URLError:
    return URLError("invalid URL escape " + go_quote_bytes(s))


def unescape(s: bytes, mode: int) -> bytes:
    plain = 0x25 not in s and (0x2B not in s or mode != ENCODE_QUERY_COMPONENT)
    if plain and (mode not in (ENCODE_HOST, ENCODE_ZONE) or not s.translate(None, _HOST_CHARS)):
        return s
    n = 0
    has_plus = False
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:  # %
            n += 1
            if i + 2 >= len(s) or s[i + 1] not in _HEXDIGITS or s[i + 2] not in _HEXDIGITS:
                raise _escape_error(s[i : i + 3])
            if mode == ENCODE_HOST and int(s[i + 1 : i + 2], 16) < 8 and s[i : i + 3] != b"%25":
                raise _escape_error(s[i : i + 3])
            if mode == ENCODE_ZONE:
                v = int(s[i + 1 : i + 3], 16)
                if s[i : i + 3] != b"%25" and v != 0x20 and should_escape(v, ENCODE_HOST):
                    raise _escape_error(s[i : i + 3])
            i += 3
        elif c == 0x2B:  # +
            has_plus = mode == ENCODE_QUERY_COMPONENT
            i += 1
        else:
            if mode in (ENCODE_HOST, ENCODE_ZONE) and c < 0x80 and should_escape(c, mode):
                raise URLError("invalid character " + go_quote_bytes(s[i : i + 1]) + " in host name")
            i += 1
    if n == 0 and not has_plus:
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(0x20 if c == 0x2B and mode == ENCODE_QUERY_COMPONENT else c)
        i += 1
    return bytes(out)


def escape(s: bytes, mode: int) -> bytes:
    if not s.translate(None, _NO_ESCAPE[mode]):
        return s
    out = bytearray()
    for c in s:
        if c == 0x20 and mode == ENCODE_QUERY_COMPONENT:
            out.append(0x2B)
        elif should_escape(c, mode):
            out += b"%" + f"{c:02X}".encode()
        else:
            out.append(c)
    return bytes(out)


def _get_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == 0x3A:
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return b"", raw
    return b"", raw


def valid_optional_port(port: bytes) -> bool:
    if not port:
        return True
    return port[0] == 0x3A and all(0x30 <= c <= 0x39 for c in port[1:])


def _valid_userinfo(s: bytes) -> bool:
    return not s.translate(None, _USERINFO_CHARS)


def _parse_host(scheme: bytes, host: bytes) -> bytes:
    """parseHost (Go 1.26): "[" may only open the host, and an http(s) port starts at the first colon."""
    open_idx = host.rfind(b"[")
    if open_idx > 0:
        raise URLError("invalid IP-literal")
    if open_idx == 0:
        close_idx = host.rfind(b"]")
        if close_idx < 0:
            raise URLError("missing ']' in host")
        colon_port = host[close_idx + 1 :]
        if not valid_optional_port(colon_port):
            raise URLError(f"invalid port {go_quote_bytes(colon_port)} after host")
        unescaped_port = unescape(colon_port, ENCODE_HOST)
        hostname = host[open_idx + 1 : close_idx]
        zone_idx = hostname.find(b"%25")
        if zone_idx >= 0:
            unescaped = unescape(hostname[:zone_idx], ENCODE_HOST) + unescape(
                hostname[zone_idx:], ENCODE_ZONE
            )
        else:
            unescaped = unescape(hostname, ENCODE_HOST)
        try:
            addr = parse_addr(unescaped.decode("utf-8", "surrogateescape"))
        except AddrError as e:
            raise URLError(f"invalid host: {e}") from None
        if addr.is4:
            raise URLError("invalid IP-literal")
        return b"[" + unescaped + b"]" + unescaped_port
    i = host.find(b":")
    if i != -1:
        if scheme not in (b"http", b"https"):
            i = host.rfind(b":")
        if not valid_optional_port(host[i:]):
            raise URLError(f"invalid port {go_quote_bytes(host[i:])} after host")
    return unescape(host, ENCODE_HOST)


def _parse_authority(scheme: bytes, authority: bytes) -> tuple[tuple[bytes, bytes | None] | None, bytes]:
    i = authority.rfind(b"@")
    host = _parse_host(scheme, authority if i < 0 else authority[i + 1 :])
    if i < 0:
        return None, host
    userinfo = authority[:i]
    if not _valid_userinfo(userinfo):
        raise URLError("net/url: invalid userinfo")
    if b":" not in userinfo:
        return (unescape(userinfo, ENCODE_USER_PASSWORD), None), host
    username, _, password = userinfo.partition(b":")
    return (unescape(username, ENCODE_USER_PASSWORD), unescape(password, ENCODE_USER_PASSWORD)), host


def _path_fields(p: bytes) -> dict[str, bytes]:
    path = unescape(p, ENCODE_PATH)
    return {"path": path, "raw_path": b"" if escape(path, ENCODE_PATH) == p else p}


def _parse(raw: bytes, via_request: bool) -> URL:
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise URLError("empty url")
    if raw == b"*":
        return URL(path=b"*")
    scheme, rest = _get_scheme(raw)
    scheme = scheme.lower()
    force_query = False
    raw_query = b""
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        force_query = True
        rest = rest[:-1]
    else:
        rest, _, raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if scheme:
            return URL(scheme=scheme, opaque=rest, force_query=force_query, raw_query=raw_query)
        if via_request:
            raise URLError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise URLError("first path segment in URL cannot contain colon")
    user = None
    host = b""
    omit_host = False
    if (scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, rest = rest[2:], b""
        j = authority.find(b"/")
        if j >= 0:
            authority, rest = authority[:j], authority[j:]
        user, host = _parse_authority(scheme, authority)
    elif scheme and rest.startswith(b"/"):
        omit_host = True
    return URL(
        scheme=scheme,
        user=user,
        host=host,
        omit_host=omit_host,
        force_query=force_query,
        raw_query=raw_query,
        **_path_fields(rest),
    )


def _wrap(raw: bytes, err: URLError) -> URLError:
    return URLError(f"parse {go_quote_bytes(raw)}: {err}")


def parse_request_uri(raw: str) -> URL:
    """url.ParseRequestURI: an absolute URI or an absolute path, no fragment handling."""
    b = raw.encode("utf-8", "surrogatepass")
    try:
        return _parse(b, True)
    except URLError as e:
        raise _wrap(b, e) from None


def parse(raw: str) -> URL:
    """url.Parse: any URI reference; the fragment is cut off first."""
    b = raw.encode("utf-8", "surrogatepass")
    u, _, frag = b.partition(b"#")
    try:
        url = _parse(u, False)
    except URLError as e:
        raise _wrap(u, e) from None
    if not frag:
        return url
    try:
        fragment = unescape(frag, ENCODE_FRAGMENT)
    except URLError as e:
        raise _wrap(b, e) from None
    raw_fragment = b"" if escape(fragment, ENCODE_FRAGMENT) == frag else frag
    return _replace(url, fragment=fragment, raw_fragment=raw_fragment)


def _replace(u: URL, **changes: bytes) -> URL:
    fields = {name: getattr(u, name) for name in URL.__slots__}
    fields.update(changes)
    return URL(**fields)


def _valid_encoded(s: bytes, mode: int) -> bool:
    return all(c in b"!$&'()*+,;=:@[]%" or not should_escape(c, mode) for c in s)


def escaped_path(u: URL) -> bytes:
    if u.raw_path and _valid_encoded(u.raw_path, ENCODE_PATH):
        try:
            if unescape(u.raw_path, ENCODE_PATH) == u.path:
                return u.raw_path
        except URLError:
            pass
    if u.path == b"*":
        return b"*"
    return escape(u.path, ENCODE_PATH)


def _escaped_fragment(u: URL) -> bytes:
    if u.raw_fragment and _valid_encoded(u.raw_fragment, ENCODE_FRAGMENT):
        try:
            if unescape(u.raw_fragment, ENCODE_FRAGMENT) == u.fragment:
                return u.raw_fragment
        except URLError:
            pass
    return escape(u.fragment, ENCODE_FRAGMENT)


def to_string(u: URL) -> bytes:
    """URL.String()."""
    buf = bytearray()
    if u.scheme:
        buf += u.scheme + b":"
    if u.opaque:
        buf += u.opaque
    else:
        if (u.scheme or u.host or u.user is not None) and not (u.omit_host and not u.host and u.user is None):
            if u.host or u.path or u.user is not None:
                buf += b"//"
            if u.user is not None:
                name, password = u.user
                buf += escape(name, ENCODE_USER_PASSWORD)
                if password is not None:
                    buf += b":" + escape(password, ENCODE_USER_PASSWORD)
                buf += b"@"
            if u.host:
                buf += escape(u.host, ENCODE_HOST)
        path = escaped_path(u)
        if path and path[0] != 0x2F and u.host:
            buf += b"/"
        if not buf and b":" in path.partition(b"/")[0]:
            buf += b"./"
        buf += path
    if u.force_query or u.raw_query:
        buf += b"?" + u.raw_query
    if u.fragment:
        buf += b"#" + _escaped_fragment(u)
    return bytes(buf)


def split_host_port(host_port: bytes) -> tuple[bytes, bytes]:
    host, port = host_port, b""
    colon = host.rfind(b":")
    if colon != -1 and valid_optional_port(host[colon:]):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith(b"[") and host.endswith(b"]"):
        host = host[1:-1]
    return host, port


def query(u: URL) -> list[tuple[bytes, bytes]]:
    """URL.Query() as (key, value) pairs in order; malformed pairs are dropped, as Go does."""
    q = u.raw_query
    if q.count(b"&") + 1 > MAX_QUERY_PARAMS:
        return []
    pairs: list[tuple[bytes, bytes]] = []
    while q:
        key, _, q = q.partition(b"&")
        if b";" in key or not key:
            continue
        k, _, v = key.partition(b"=")
        try:
            pairs.append((unescape(k, ENCODE_QUERY_COMPONENT), unescape(v, ENCODE_QUERY_COMPONENT)))
        except URLError:
            continue
    return pairs
