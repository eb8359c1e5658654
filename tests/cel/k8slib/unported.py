"""Kubernetes library cases whose answer changed between Kubernetes 1.34 (k8s.io/apimachinery v0.34,
Go 1.24, what celkeeper.cel.k8slib ports) and what Gatekeeper v3.23.1 runs (k8s.io/apimachinery
v0.36.2, built with Go 1.26), found when the goldens were regenerated. The Python port (used by the
cel-python engine) still answers as before: these cases are strict expected failures there until it
is updated (the cel-go engine answers them as Gatekeeper does).
"""

from __future__ import annotations

GO_126_URL = (
    "Go 1.26 net/url rejects hosts with extra colons or text around an IP literal ('invalid port', "
    "'invalid IP-literal'); celkeeper.cel.k8slib.gourl ports Go 1.24's parser"
)

UNPORTED: dict[str, str] = {
    'format.uri().validate("http://a:b:c/")': GO_126_URL,
    'isURL("http://::1/")': GO_126_URL,
    'isURL("http://a[::1]/")': GO_126_URL,
    'isURL("http://host:80:90/")': GO_126_URL,
    'url("http://::1/")': GO_126_URL,
    'url("http://::1/").getEscapedPath()': GO_126_URL,
    'url("http://::1/").getHost()': GO_126_URL,
    'url("http://::1/").getHostname()': GO_126_URL,
    'url("http://::1/").getPort()': GO_126_URL,
    'url("http://::1/").getQuery()': GO_126_URL,
    'url("http://::1/").getScheme()': GO_126_URL,
    'url("http://[[::1]]/")': GO_126_URL,
    'url("http://[[::1]]/").getEscapedPath()': GO_126_URL,
    'url("http://[[::1]]/").getHost()': GO_126_URL,
    'url("http://[[::1]]/").getHostname()': GO_126_URL,
    'url("http://[[::1]]/").getPort()': GO_126_URL,
    'url("http://[[::1]]/").getQuery()': GO_126_URL,
    'url("http://[[::1]]/").getScheme()': GO_126_URL,
    'url("http://a[::1]/")': GO_126_URL,
    'url("http://a[::1]/").getEscapedPath()': GO_126_URL,
    'url("http://a[::1]/").getHost()': GO_126_URL,
    'url("http://a[::1]/").getHostname()': GO_126_URL,
    'url("http://a[::1]/").getPort()': GO_126_URL,
    'url("http://a[::1]/").getQuery()': GO_126_URL,
    'url("http://a[::1]/").getScheme()': GO_126_URL,
    'url("http://host:80:90/")': GO_126_URL,
    'url("http://host:80:90/").getEscapedPath()': GO_126_URL,
    'url("http://host:80:90/").getHost()': GO_126_URL,
    'url("http://host:80:90/").getHostname()': GO_126_URL,
    'url("http://host:80:90/").getPort()': GO_126_URL,
    'url("http://host:80:90/").getQuery()': GO_126_URL,
    'url("http://host:80:90/").getScheme()': GO_126_URL,
    'url("https://a:b:c/")': GO_126_URL,
    'url("https://a:b:c/").getEscapedPath()': GO_126_URL,
    'url("https://a:b:c/").getHost()': GO_126_URL,
    'url("https://a:b:c/").getHostname()': GO_126_URL,
    'url("https://a:b:c/").getPort()': GO_126_URL,
    'url("https://a:b:c/").getQuery()': GO_126_URL,
    'url("https://a:b:c/").getScheme()': GO_126_URL,
}


def unported(expr: str) -> str | None:
    """Why the Python port answers `expr` differently from Gatekeeper's Kubernetes, or None."""
    return UNPORTED.get(expr)
