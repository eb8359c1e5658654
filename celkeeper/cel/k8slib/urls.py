"""Kubernetes' CEL urls library (k8s.io/apiserver/pkg/cel/library/urls.go, 1.34) over the net/url port.

`url(s)` accepts what url.ParseRequestURI accepts (an absolute URI or an absolute path) and then keeps
url.Parse's reading of it (which, unlike ParseRequestURI, splits off a #fragment and reads `//host/p` as
a host). Getters return text; bytes that %-unescape to invalid UTF-8 come back as U+FFFD.
"""

from __future__ import annotations

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.gostrings import go_string
from celkeeper.cel.k8slib.gourl import (
    URL,
    URLError,
    escaped_path,
    parse,
    parse_request_uri,
    query,
    split_host_port,
    to_string,
)

_PARSE_ERROR = "URL parse error during conversion from string: "


def url(s: str) -> URL:
    """url(<string>)."""
    try:
        parse_request_uri(s)
        return parse(s)
    except URLError as e:
        raise LibraryError(_PARSE_ERROR + str(e)) from None


def is_url(s: str) -> bool:
    """isURL(<string>)."""
    try:
        parse_request_uri(s)
    except URLError:
        return False
    return True


def get_scheme(u: URL) -> str:
    """<URL>.getScheme()."""
    return go_string(u.scheme)


def get_host(u: URL) -> str:
    """<URL>.getHost(): host[:port], IPv6 with brackets."""
    return go_string(u.host)


def get_hostname(u: URL) -> str:
    """<URL>.getHostname(): IPv6 without brackets."""
    return go_string(split_host_port(u.host)[0])


def get_port(u: URL) -> str:
    """<URL>.getPort()."""
    return go_string(split_host_port(u.host)[1])


def get_escaped_path(u: URL) -> str:
    """<URL>.getEscapedPath()."""
    return go_string(escaped_path(u))


def get_query(u: URL) -> dict[str, list[str]]:
    """<URL>.getQuery(): each key's values in order (keys and values unescaped)."""
    out: dict[str, list[str]] = {}
    for k, v in query(u):
        out.setdefault(go_string(k), []).append(go_string(v))
    return out


def url_to_string(u: URL) -> str:
    """URL.String() (what `==` compares; not a CEL function in Kubernetes 1.34)."""
    return go_string(to_string(u))


def url_equals(a: URL, b: URL) -> bool:
    """`url == url`: equal String() forms."""
    return to_string(a) == to_string(b)
