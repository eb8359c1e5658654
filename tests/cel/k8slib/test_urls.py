"""The urls library against Kubernetes 1.34 (golden results)."""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib import format as F
from celkeeper.cel.k8slib import urls as U
from celkeeper.cel.k8slib.gourl import URLError, parse, parse_request_uri
from tests.cel.k8slib.golden_check import Case, check, ids, lit

# The expressions of apiextensions-apiserver's CRD validation tests (schema/cel/validation_test.go).
KUBERNETES_TABLE: list[Case] = [
    ("url('/path').getScheme() == ''", lambda: U.get_scheme(U.url("/path")) == ""),
    (
        "url('https://example.com/').getScheme() == 'https'",
        lambda: U.get_scheme(U.url("https://example.com/")) == "https",
    ),
    (
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        lambda: U.get_host(U.url("https://example.com:80/")) == "example.com:80",
    ),
    (
        "url('https://example.com/').getHost() == 'example.com'",
        lambda: U.get_host(U.url("https://example.com/")) == "example.com",
    ),
    (
        "url('https://[::1]:80/').getHost() == '[::1]:80'",
        lambda: U.get_host(U.url("https://[::1]:80/")) == "[::1]:80",
    ),
    ("url('https://[::1]/').getHost() == '[::1]'", lambda: U.get_host(U.url("https://[::1]/")) == "[::1]"),
    ("url('/path').getHost() == ''", lambda: U.get_host(U.url("/path")) == ""),
    (
        "url('https://example.com:80/').getHostname() == 'example.com'",
        lambda: U.get_hostname(U.url("https://example.com:80/")) == "example.com",
    ),
    (
        "url('https://127.0.0.1/').getHostname() == '127.0.0.1'",
        lambda: U.get_hostname(U.url("https://127.0.0.1/")) == "127.0.0.1",
    ),
    (
        "url('https://[::1]/').getHostname() == '::1'",
        lambda: U.get_hostname(U.url("https://[::1]/")) == "::1",
    ),
    ("url('/path').getHostname() == ''", lambda: U.get_hostname(U.url("/path")) == ""),
    (
        "url('https://example.com:80/').getPort() == '80'",
        lambda: U.get_port(U.url("https://example.com:80/")) == "80",
    ),
    ("url('https://example.com/').getPort() == ''", lambda: U.get_port(U.url("https://example.com/")) == ""),
    ("url('/path').getPort() == ''", lambda: U.get_port(U.url("/path")) == ""),
    (
        "url('https://example.com/path').getEscapedPath() == '/path'",
        lambda: U.get_escaped_path(U.url("https://example.com/path")) == "/path",
    ),
    (
        "url('https://example.com/with space/').getEscapedPath() == '/with%20space/'",
        lambda: U.get_escaped_path(U.url("https://example.com/with space/")) == "/with%20space/",
    ),
    (
        "url('https://example.com').getEscapedPath() == ''",
        lambda: U.get_escaped_path(U.url("https://example.com")) == "",
    ),
    (
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == { 'k1': ['a'], 'k2': ['b', 'c']}",
        lambda: (
            U.get_query(U.url("https://example.com/path?k1=a&k2=b&k2=c")) == {"k1": ["a"], "k2": ["b", "c"]}
        ),
    ),
    (
        "url('https://example.com/path?key with spaces=value with spaces').getQuery() == "
        "{ 'key with spaces': ['value with spaces']}",
        lambda: (
            U.get_query(U.url("https://example.com/path?key with spaces=value with spaces"))
            == {"key with spaces": ["value with spaces"]}
        ),
    ),
    (
        "url('https://example.com/path?').getQuery() == {}",
        lambda: U.get_query(U.url("https://example.com/path?")) == {},
    ),
    (
        "url('https://example.com/path').getQuery() == {}",
        lambda: U.get_query(U.url("https://example.com/path")) == {},
    ),
    (
        "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
        lambda: U.is_url("https://user:pass@example.com:80/path?query=val#fragment"),
    ),
    ("isURL('/path') == true", lambda: U.is_url("/path")),
    ("isURL('https://a:b:c/') == false", lambda: not U.is_url("https://a:b:c/")),
    ("isURL('../relative-path') == false", lambda: not U.is_url("../relative-path")),
    (
        "url('https:://kubernetes.io/').getHostname() != 'test'",
        lambda: U.get_hostname(U.url("https:://kubernetes.io/")) != "test",
    ),
]

# Inputs that walk Go's net/url: schemes, opaque forms, authority and userinfo, IPv6 literals and the
# bracket and colon checks of Go 1.26, ports, escapes in host/path/query/fragment, control characters,
# ForceQuery.
URL_INPUTS = [
    "https://user:pass@example.com:80/path?query=val#fragment",
    "/absolute-path",
    "https://a:b:c/",
    "../relative-path",
    "x",
    "",
    "*",
    "/",
    "//",
    "///",
    "//example.com/p",
    "///x",
    "http:/x",
    "http:x",
    "mailto:someone@example.com",
    "HTTPS://EXAMPLE.com/A",
    "1http://x",
    "-x:y",
    ":foo",
    "a:b",
    "http://[::1]",
    "http://[::1]:80",
    "http://[::1]:",
    "http://[::1]x",
    "http://[::1",
    "http://::1/",
    "http://[fe80::1%25en0]/",
    "http://[fe80::1%en0]/",
    "http://[fe80::1%25]/",
    "https://[1.2.3.4]/",
    "https://[::ffff:1.2.3.4]/",
    "http://a[::1]/",
    "http://[::1]]/",
    "http://[[::1]]/",
    "https://127.0.0.1:80/",
    "http://host:port/",
    "http://host:/",
    "http://host:08080/",
    "http://user@host/",
    "http://us%zzer@host/",
    "http://us%20er:p%40ss@host/",
    "http://a@b@c/",
    "http://user name@host/",
    "http://ho%20st/",
    "http://ho%41st/",
    "http://h%C3%A9st/",
    "http://hé/",
    "http://host/p%2fq",
    "http://host/p%2Fq/r",
    "http://host/%",
    "http://host/%zz",
    "http://host/a b",
    "http://host/a?b c",
    "http://host/?a=1&a=2&b=%20&c",
    "http://host/?a;b=1&c=2",
    "http://host/?&&x=1&",
    "http://host/?%zz=1&y=%41",
    "http://host/?k=v1+v2",
    "http://host/?=v",
    "http://host/??",
    "http://host/p?",
    "http://host/p?a?",
    "http://host/#frag%zz",
    "http://host/#frag%20x",
    "http://host/#",
    "http://host/p#a#b",
    "http://h/\x7f",
    "http://h/\tx",
    "http://[::1]:80%2F/",
    "http://é.example/é?é=é#é",
    "https://example.com/path with spaces/",
    "https://kubernetes.io:80/docs/home?k1=a&k2=b&k2=c",
    "http://host/%C3%A9",
    "http://host/%e9",
    "http://host/?%e9=%ff",
    "http://[::1%2525]/",
    "http://host:80:90/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[%ff::1]/",
    "http://[::%c3%a9]/",
    "http://%ff/",
    "http://[2001:DB8::1]:443/x",
    "http://host/a/../b/./c",
    "http://host/p;a=b",
]


def _url_cases() -> list[Case]:
    out: list[Case] = []
    for s in URL_INPUTS:
        u = f"url({lit(s)})"
        out += [
            (f"isURL({lit(s)})", lambda s=s: U.is_url(s)),
            (u, lambda s=s: U.url(s)),
            (f"{u}.getScheme()", lambda s=s: U.get_scheme(U.url(s))),
            (f"{u}.getHost()", lambda s=s: U.get_host(U.url(s))),
            (f"{u}.getHostname()", lambda s=s: U.get_hostname(U.url(s))),
            (f"{u}.getPort()", lambda s=s: U.get_port(U.url(s))),
            (f"{u}.getEscapedPath()", lambda s=s: U.get_escaped_path(U.url(s))),
            (f"{u}.getQuery()", lambda s=s: U.get_query(U.url(s))),
        ]
    return out


EQUALITY: list[Case] = [
    (
        "url('https://example.com') == url('https://example.com')",
        lambda: U.url_equals(U.url("https://example.com"), U.url("https://example.com")),
    ),
    (
        "url('https://example.com') == url('https://example.com/')",
        lambda: U.url_equals(U.url("https://example.com"), U.url("https://example.com/")),
    ),
    (
        "url('HTTPS://example.com/') == url('https://example.com/')",
        lambda: U.url_equals(U.url("HTTPS://example.com/"), U.url("https://example.com/")),
    ),
    (
        "url('http://h/a%2Fb') == url('http://h/a/b')",
        lambda: U.url_equals(U.url("http://h/a%2Fb"), U.url("http://h/a/b")),
    ),
    (
        "url('http://h/%41') == url('http://h/A')",
        lambda: U.url_equals(U.url("http://h/%41"), U.url("http://h/A")),
    ),
]

CASES: list[Case] = KUBERNETES_TABLE + _url_cases() + EQUALITY


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]


def test_relative_urls_are_rejected_as_design_md_says() -> None:
    assert not U.is_url("x")
    assert U.is_url("/x")


# Go 1.26's net/url (parseHost): a "[" may only open the host, and an http(s) host's port starts at its
# first colon (GODEBUG urlstrictcolons=1). Error texts as the goldens (Gatekeeper v3.23.1) give them;
# the HTTP:// and ftp:// ones as go1.26.8's url.Parse does.
GO_126_REJECTIONS = [
    ("http://::1/", 'parse "http://::1/": invalid port "::1" after host'),
    ("http://host:80:90/", 'parse "http://host:80:90/": invalid port ":80:90" after host'),
    ("https://a:b:c/", 'parse "https://a:b:c/": invalid port ":b:c" after host'),
    ("HTTP://host:1:2/", 'parse "HTTP://host:1:2/": invalid port ":1:2" after host'),
    ("http://a[::1]/", 'parse "http://a[::1]/": invalid IP-literal'),
    ("http://[[::1]]/", 'parse "http://[[::1]]/": invalid IP-literal'),
    ("ftp://ho[st/", 'parse "ftp://ho[st/": invalid IP-literal'),
]


@pytest.mark.parametrize(("s", "message"), GO_126_REJECTIONS)
def test_go_126_rejects_extra_colons_and_text_around_an_ip_literal(s: str, message: str) -> None:
    assert not U.is_url(s)
    with pytest.raises(LibraryError) as e:
        U.url(s)
    assert str(e.value) == "URL parse error during conversion from string: " + message
    with pytest.raises(URLError) as e2:
        parse_request_uri(s)
    assert str(e2.value) == message


def test_format_uri_reports_go_126_port_error() -> None:
    errors = F.validate(F.FORMATS["uri"], "http://a:b:c/")
    assert errors == ['parse "http://a:b:c/": invalid port ":b:c" after host']


def test_go_126_keeps_the_last_colon_for_other_schemes() -> None:
    # go.dev/issue/78077: database URLs list hosts with ports; only http and https are strict
    # (checked against go1.26.8's url.Parse).
    u = U.url("postgres://h1:5432,h2:5433/db")
    assert (U.get_host(u), U.get_hostname(u), U.get_port(u)) == ("h1:5432,h2:5433", "h1:5432,h2", "5433")
    assert U.is_url("mongodb://a:1:2/")
    with pytest.raises(URLError, match='invalid port ":x" after host'):
        parse("mongodb://a:1:x/")
    # An IPv6 literal still needs its brackets in http(s) URLs, and a bracketed host may carry a port.
    assert U.get_port(U.url("http://[::1]:8080/")) == "8080"
