"""The Kubernetes library overloads' implementations over k8slib values: constant tables of pure
functions, indexed by cel-go overload id (`celkeeper.cel.celpython.environment.FUNCTIONS`). How the
engine calls them (argument decoding, results in its value form, memoising) is
`celkeeper.cel.celpython.library`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celkeeper.cel.celpython.environment import FUNCTIONS
from celkeeper.cel.k8slib import format as fmt
from celkeeper.cel.k8slib import ip, lists, regex, semver, urls
from celkeeper.cel.k8slib import quantity as q

Impl = Callable[..., Any]


def _implementations() -> dict[str, Impl]:
    """overload id -> implementation over k8slib values."""
    table: dict[str, Impl] = {
        "list_a_index_of_int": lists.index_of,
        "list_a_last_index_of_int": lists.last_index_of,
        "string_find_string": regex.find,
        "string_find_all_string": regex.find_all,
        "string_find_all_string_int": regex.find_all,
        "string_to_url": urls.url,
        "is_url_string": urls.is_url,
        "url_get_scheme": urls.get_scheme,
        "url_get_host": urls.get_host,
        "url_get_hostname": urls.get_hostname,
        "url_get_port": urls.get_port,
        "url_get_escaped_path": urls.get_escaped_path,
        "url_get_query": urls.get_query,
        "string_to_quantity": q.quantity,
        "is_quantity_string": q.is_quantity,
        "quantity_sign": q.sign,
        "quantity_is_greater_than": q.is_greater_than,
        "quantity_is_less_than": q.is_less_than,
        "quantity_compare_to": q.compare_to,
        "quantity_get_float": q.as_approximate_float,
        "quantity_get_int": q.as_integer,
        "quantity_is_integer": q.is_integer,
        "quantity_add": q.add,
        "quantity_add_int": q.add_int,
        "quantity_sub": q.sub,
        "quantity_sub_int": q.sub_int,
        "string_to_ip": ip.ip,
        "ip_family": ip.family,
        "ip_is_canonical": ip.ip_is_canonical,
        "ip_is_unspecified": ip.is_unspecified,
        "ip_is_loopback": ip.is_loopback,
        "ip_is_link_local_multicast": ip.is_link_local_multicast,
        "ip_is_link_local_unicast": ip.is_link_local_unicast,
        "ip_is_global_unicast": ip.is_global_unicast,
        "is_ip": ip.is_ip,
        "ip_to_string": ip.ip_to_string,
        "string_to_cidr": ip.cidr,
        "cidr_contains_ip_string": ip.contains_ip,
        "cidr_contains_ip_ip": ip.contains_ip,
        "cidr_contains_cidr_string": ip.contains_cidr,
        "cidr_contains_cidr": ip.contains_cidr,
        "cidr_ip": ip.cidr_ip,
        "cidr_prefix_length": ip.prefix_length,
        "cidr_masked": ip.masked,
        "is_cidr": ip.is_cidr,
        "cidr_to_string": ip.cidr_to_string,
        "format-validate": fmt.validate,
        "format-named": fmt.named,
        "string_to_semver": semver.semver,
        "string_bool_to_semver": semver.semver,
        "is_semver_string": semver.is_semver,
        "is_semver_string_bool": semver.is_semver,
        "semver_is_greater_than": semver.is_greater_than,
        "semver_is_less_than": semver.is_less_than,
        "semver_compare_to": semver.compare_to,
        "semver_major": semver.major,
        "semver_minor": semver.minor,
        "semver_patch": semver.patch,
    }
    for key in fmt.FORMATS:
        table[f"format.{key}"] = lambda key=key: fmt.FORMATS[key]
    for oid, o in FUNCTIONS.items():
        if o.function in ("isSorted", "min", "max", "sum"):
            kind = oid.split("_")[1]
            fn = {"isSorted": lists.is_sorted, "min": lists.min_, "max": lists.max_}.get(o.function)
            table[oid] = fn if fn is not None else (lambda values, kind=kind: lists.sum_(values, kind))
    return table


def _equalities() -> dict[str, tuple[Impl, Impl]]:
    def negate(fn: Impl) -> Impl:
        return lambda a, b: not fn(a, b)

    def url_eq(a: Any, b: Any) -> bool:
        return bool(urls.url_to_string(a) == urls.url_to_string(b))

    out: dict[str, Impl] = {
        "net.IP": ip.ip_equals,
        "net.CIDR": ip.cidr_equals,
        "kubernetes.URL": url_eq,
        "kubernetes.Semver": semver.equals,
        "kubernetes.NamedFormat": fmt.equals,
    }
    result: dict[str, tuple[Impl, Impl]] = {t: (fn, negate(fn)) for t, fn in out.items()}
    result["kubernetes.Quantity"] = (q.equals, q.not_equals)
    return result


#: overload id -> implementation
IMPLEMENTATIONS: dict[str, Impl] = _implementations()
#: library type name -> (==, !=) as Kubernetes' Equal evaluates them
EQUALITY: dict[str, tuple[Impl, Impl]] = _equalities()
