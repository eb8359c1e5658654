"""Kubernetes 1.34's CEL libraries (k8s.io/apiserver/pkg/cel/library at v0.34.4) as plain Python.

No CEL engine is imported here: backends bind these functions. Every function takes and returns plain
values or the small frozen classes below, and raises `LibraryError(message)` where Kubernetes' function
returns an error; `str(err)` is Kubernetes' message byte for byte (checked against real Kubernetes: see
tests/cel/k8slib). Python values for CEL types: bool, int, celvalues.Uint, float, str, bytes, None (null),
list, dict, datetime (timestamp), timedelta (duration).

Where Kubernetes' answers changed by v0.36.2 (what Gatekeeper v3.23.1 builds with, with Go 1.26), the port
gives the new ones: the format library's validation messages are k8s.io/apimachinery v0.36.2's
(format.labelValue() and format.qualifiedName() state lengths in bytes: see format.py), and URLs are parsed
as Go 1.26's net/url parses them (see gourl.py).

Binding table (module: CEL function -> Python callable; "q" Quantity, "u" URL, "a" Addr (IP), "p" Prefix
(CIDR), "v" Semver, "f" Format):

quantity      quantity(string)           -> quantity.quantity(s) -> Quantity
              isQuantity(string)         -> quantity.is_quantity(s) -> bool
              sign(q)  [global only]     -> quantity.sign(q) -> int
              q.isInteger()              -> quantity.is_integer(q) -> bool
              q.asInteger()              -> quantity.as_integer(q) -> int
              q.asApproximateFloat()     -> quantity.as_approximate_float(q) -> float
              q.add(q2) / q.add(int)     -> quantity.add(q, q2) / quantity.add_int(q, n) -> Quantity
              q.sub(q2) / q.sub(int)     -> quantity.sub(q, q2) / quantity.sub_int(q, n) -> Quantity
              q.compareTo(q2)            -> quantity.compare_to(q, q2) -> int
              q.isGreaterThan(q2)        -> quantity.is_greater_than(q, q2) -> bool
              q.isLessThan(q2)           -> quantity.is_less_than(q, q2) -> bool
              q == q2 / q != q2          -> quantity.equals(q, q2) / quantity.not_equals(q, q2) -> bool
              (its text)                 -> str(q) is Quantity.String()
urls          url(string)                -> urls.url(s) -> gourl.URL (re-create it from its source string)
              isURL(string)              -> urls.is_url(s) -> bool
              u.getScheme/getHost/getHostname/getPort/getEscapedPath()
                                         -> urls.get_scheme(u) ... urls.get_escaped_path(u) -> str
              u.getQuery()               -> urls.get_query(u) -> dict[str, list[str]]
              u == u2                    -> urls.url_equals(u, u2) -> bool
ip            ip(string)                 -> ip.ip(s) -> netip.Addr (str(a) is the canonical form)
              isIP(string)               -> ip.is_ip(s) -> bool
              ip.isCanonical(string)     -> ip.ip_is_canonical(s) -> bool
              string(a)                  -> ip.ip_to_string(a) -> str
              a.family()                 -> ip.family(a) -> int
              a.isUnspecified/isLoopback/isLinkLocalMulticast/isLinkLocalUnicast/isGlobalUnicast()
                                         -> ip.is_unspecified(a) ... ip.is_global_unicast(a) -> bool
              a == a2                    -> ip.ip_equals(a, a2) -> bool
cidr          cidr(string)               -> ip.cidr(s) -> netip.Prefix (str(p) is its string form)
              isCIDR(string)             -> ip.is_cidr(s) -> bool
              string(p)                  -> ip.cidr_to_string(p) -> str
              p.containsIP(a | string)   -> ip.contains_ip(p, a_or_s) -> bool
              p.containsCIDR(p2 | string)-> ip.contains_cidr(p, p2_or_s) -> bool
              p.ip()                     -> ip.cidr_ip(p) -> Addr
              p.prefixLength()           -> ip.prefix_length(p) -> int
              p.masked()                 -> ip.masked(p) -> Prefix
              p == p2                    -> ip.cidr_equals(p, p2) -> bool
semver        semver(string[, bool])     -> semver.semver(s, normalize=False) -> Semver
              isSemver(string[, bool])   -> semver.is_semver(s, normalize=False) -> bool
              v.major/minor/patch()      -> semver.major(v) / minor(v) / patch(v) -> int
              v.compareTo/isGreaterThan/isLessThan(v2)
                                         -> semver.compare_to / is_greater_than / is_less_than(v, v2)
              v == v2                    -> semver.equals(v, v2) -> bool
format        format.named(string)       -> format.named(name) -> Format | None (None = optional.none)
              format.<name>()            -> format.FORMATS[name] -> Format
              f.validate(string)         -> format.validate(f, s) -> list[str] | None (None = optional.none)
              f == f2                    -> format.equals(f, f2) -> bool
lists         l.isSorted()               -> lists.is_sorted(l) -> bool
              l.sum()                    -> lists.sum_(l, static_kind=None) -> element type
              l.min() / l.max()          -> lists.min_(l) / lists.max_(l) -> element
              l.indexOf(x) / l.lastIndexOf(x)
                                         -> lists.index_of(l, x) / lists.last_index_of(l, x) -> int
regex         s.find(re)                 -> regex.find(s, re) -> str
              s.findAll(re[, n])         -> regex.find_all(s, re, n=-1) -> list[str]
              a literal pattern, at program build time
                                         -> regex.compile_regex(re) (raises RegexCompileError, Go's text);
                                            then regex.find_compiled / find_all_compiled
              a pattern at run time      -> regex.compile_pattern(re) (LibraryError "Illegal regex: ...")
              s.matches(re) (CEL's)      -> regex.search(compiled, s) -> bool

Not in Kubernetes 1.34 and so not here: Quantity mul/div/divInt and the image library (later releases),
authz and authz selectors (Gatekeeper has no authorizer). celvalues holds cel-go's compare/equal/add.
"""

from __future__ import annotations


class LibraryError(Exception):
    """A CEL evaluation error raised by a Kubernetes library function; str() is Kubernetes' message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
