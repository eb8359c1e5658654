"""The Kubernetes 1.34 CEL environment, as declarations for cel-python's front end (cel-cpp).

Kubernetes builds its environment in k8s.io/apiserver/pkg/cel/environment/base.go: cel-go's standard
library with cross-type numeric comparisons and optional types, the extensions strings (version 2),
sets, two-variable comprehensions and lists (version 3, which adds only cost accounting to 2), and
the Kubernetes libraries (lists, regex, urls, quantity, ip, cidr, format, semver). Nothing else:
no `math`, `base64`, `cel.bind`, `authorizer`.

Two cel-cpp environments are built from this module:

- the checking environment, from `checker_yaml()`: cel-cpp's stdlib minus the overloads Kubernetes
  declares differently (the relational operators, to add the cross-type numeric ones; `string`, to
  add `string(<net.IP>)` and `string(<net.CIDR>)`), the extensions without `strings` (whose
  functions are redeclared here together with the Kubernetes `indexOf`/`lastIndexOf` on lists),
  every Kubernetes library function with its exact signature and opaque result types
  (kubernetes.Quantity, net.IP, ...), and cel-go's optional (version 2) `optional.unwrap` /
  `unwrapOpt`, which cel-cpp's optional extension lacks. A YAML `functions:` block only declares,
  it registers nothing at run time, so no clash with the runtime's own overloads is possible.
- the literal environment, from `runtime_yaml()`: the stdlib and the extensions including `strings`,
  in which the front end evaluates duration and timestamp literals at compile time.
  Calls to Kubernetes functions are renamed (see `celkeeper.cel.celpython.library`) to internal `@k8s.<id>`
  functions implemented in Python; an internal name cannot be written in a CEL source (`@` is not
  an identifier character), so it adds nothing users can reach.

`FUNCTIONS` lists the Kubernetes library overloads; the engine binds their implementations by
overload id.
"""

from __future__ import annotations

from dataclasses import dataclass

QUANTITY = "kubernetes.Quantity"
URL = "kubernetes.URL"
IP = "net.IP"
CIDR = "net.CIDR"
SEMVER = "kubernetes.Semver"
FORMAT = "kubernetes.NamedFormat"
OPAQUE_TYPES = (QUANTITY, URL, IP, CIDR, SEMVER, FORMAT)

DURATION = "google.protobuf.Duration"
TIMESTAMP = "google.protobuf.Timestamp"

#: Variables every expression may use (all dyn), as Kubernetes/Gatekeeper declare them.
VARIABLES = ("object", "oldObject", "request", "params", "namespaceObject")

# The format.<name>() constants of the Kubernetes format library.
FORMAT_NAMES = (
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
)


@dataclass(frozen=True)
class Overload:
    """One overload: `args` include the receiver first when `member`."""

    function: str
    id: str
    args: tuple[str, ...]
    result: str
    member: bool = False


def _o(function: str, oid: str, args: tuple[str, ...], result: str, member: bool = False) -> Overload:
    return Overload(function, oid, args, result, member)


_COMPARABLE = (
    ("int", "int"),
    ("uint", "uint"),
    ("double", "double"),
    ("bool", "bool"),
    ("duration", DURATION),
    ("timestamp", TIMESTAMP),
    ("string", "string"),
    ("bytes", "bytes"),
)
_SUMMABLE = (("int", "int"), ("uint", "uint"), ("double", "double"), ("duration", DURATION))


def _kubernetes_overloads() -> list[Overload]:
    out: list[Overload] = []
    # lists (k8s.io/apiserver/pkg/cel/library/lists.go, version 0 as base.go uses it)
    for name, t in _COMPARABLE:
        out.append(_o("isSorted", f"list_{name}_is_sorted_bool", (f"list({t})",), "bool", True))
    for name, t in _SUMMABLE:
        out.append(_o("sum", f"list_{name}_sum_{name}", (f"list({t})",), t, True))
    for name, t in _COMPARABLE:
        out.append(_o("max", f"list_{name}_max_{name}", (f"list({t})",), t, True))
        out.append(_o("min", f"list_{name}_min_{name}", (f"list({t})",), t, True))
    out.append(_o("indexOf", "list_a_index_of_int", ("list(~A)", "~A"), "int", True))
    out.append(_o("lastIndexOf", "list_a_last_index_of_int", ("list(~A)", "~A"), "int", True))
    # regex
    out += [
        _o("find", "string_find_string", ("string", "string"), "string", True),
        _o("findAll", "string_find_all_string", ("string", "string"), "list(string)", True),
        _o("findAll", "string_find_all_string_int", ("string", "string", "int"), "list(string)", True),
    ]
    # urls
    out.append(_o("url", "string_to_url", ("string",), URL))
    for fn, oid in (
        ("getScheme", "url_get_scheme"),
        ("getHost", "url_get_host"),
        ("getHostname", "url_get_hostname"),
        ("getPort", "url_get_port"),
        ("getEscapedPath", "url_get_escaped_path"),
    ):
        out.append(_o(fn, oid, (URL,), "string", True))
    out.append(_o("getQuery", "url_get_query", (URL,), "map(string, list(string))", True))
    out.append(_o("isURL", "is_url_string", ("string",), "bool"))
    # quantity (the 1.34 set: no mul/div)
    out += [
        _o("quantity", "string_to_quantity", ("string",), QUANTITY),
        _o("isQuantity", "is_quantity_string", ("string",), "bool"),
        _o("sign", "quantity_sign", (QUANTITY,), "int"),
        _o("isGreaterThan", "quantity_is_greater_than", (QUANTITY, QUANTITY), "bool", True),
        _o("isLessThan", "quantity_is_less_than", (QUANTITY, QUANTITY), "bool", True),
        _o("compareTo", "quantity_compare_to", (QUANTITY, QUANTITY), "int", True),
        _o("asApproximateFloat", "quantity_get_float", (QUANTITY,), "double", True),
        _o("asInteger", "quantity_get_int", (QUANTITY,), "int", True),
        _o("isInteger", "quantity_is_integer", (QUANTITY,), "bool", True),
        _o("add", "quantity_add", (QUANTITY, QUANTITY), QUANTITY, True),
        _o("add", "quantity_add_int", (QUANTITY, "int"), QUANTITY, True),
        _o("sub", "quantity_sub", (QUANTITY, QUANTITY), QUANTITY, True),
        _o("sub", "quantity_sub_int", (QUANTITY, "int"), QUANTITY, True),
    ]
    # ip
    out += [
        _o("ip", "string_to_ip", ("string",), IP),
        _o("family", "ip_family", (IP,), "int", True),
        _o("ip.isCanonical", "ip_is_canonical", ("string",), "bool"),
        _o("isUnspecified", "ip_is_unspecified", (IP,), "bool", True),
        _o("isLoopback", "ip_is_loopback", (IP,), "bool", True),
        _o("isLinkLocalMulticast", "ip_is_link_local_multicast", (IP,), "bool", True),
        _o("isLinkLocalUnicast", "ip_is_link_local_unicast", (IP,), "bool", True),
        _o("isGlobalUnicast", "ip_is_global_unicast", (IP,), "bool", True),
        _o("isIP", "is_ip", ("string",), "bool"),
        _o("string", "ip_to_string", (IP,), "string"),
    ]
    # cidr
    out += [
        _o("cidr", "string_to_cidr", ("string",), CIDR),
        _o("containsIP", "cidr_contains_ip_string", (CIDR, "string"), "bool", True),
        _o("containsIP", "cidr_contains_ip_ip", (CIDR, IP), "bool", True),
        _o("containsCIDR", "cidr_contains_cidr_string", (CIDR, "string"), "bool", True),
        _o("containsCIDR", "cidr_contains_cidr", (CIDR, CIDR), "bool", True),
        _o("ip", "cidr_ip", (CIDR,), IP, True),
        _o("prefixLength", "cidr_prefix_length", (CIDR,), "int", True),
        _o("masked", "cidr_masked", (CIDR,), CIDR, True),
        _o("isCIDR", "is_cidr", ("string",), "bool"),
        _o("string", "cidr_to_string", (CIDR,), "string"),
    ]
    # format
    out += [
        _o("validate", "format-validate", (FORMAT, "string"), "optional_type(list(string))", True),
        _o("format.named", "format-named", ("string",), f"optional_type({FORMAT})"),
    ]
    for name in FORMAT_NAMES:
        out.append(_o(f"format.{name}", f"format.{name}", (), FORMAT))
    # semver (version 1)
    out += [
        _o("semver", "string_to_semver", ("string",), SEMVER),
        _o("semver", "string_bool_to_semver", ("string", "bool"), SEMVER),
        _o("isSemver", "is_semver_string", ("string",), "bool"),
        _o("isSemver", "is_semver_string_bool", ("string", "bool"), "bool"),
        _o("isGreaterThan", "semver_is_greater_than", (SEMVER, SEMVER), "bool", True),
        _o("isLessThan", "semver_is_less_than", (SEMVER, SEMVER), "bool", True),
        _o("compareTo", "semver_compare_to", (SEMVER, SEMVER), "int", True),
        _o("major", "semver_major", (SEMVER,), "int", True),
        _o("minor", "semver_minor", (SEMVER,), "int", True),
        _o("patch", "semver_patch", (SEMVER,), "int", True),
    ]
    return out


#: The Kubernetes library overloads, by overload id.
FUNCTIONS: dict[str, Overload] = {o.id: o for o in _kubernetes_overloads()}


def _strings_v2_overloads() -> list[Overload]:
    """cel-go ext.Strings(version 2), redeclared for the checker (evaluated by `extensions`)."""
    s = "string"
    return [
        _o("charAt", "string_char_at_int", (s, "int"), s, True),
        _o("indexOf", "string_index_of_string", (s, s), "int", True),
        _o("indexOf", "string_index_of_string_int", (s, s, "int"), "int", True),
        _o("lastIndexOf", "string_last_index_of_string", (s, s), "int", True),
        _o("lastIndexOf", "string_last_index_of_string_int", (s, s, "int"), "int", True),
        _o("lowerAscii", "string_lower_ascii", (s,), s, True),
        _o("upperAscii", "string_upper_ascii", (s,), s, True),
        _o("replace", "string_replace_string_string", (s, s, s), s, True),
        _o("replace", "string_replace_string_string_int", (s, s, s, "int"), s, True),
        _o("split", "string_split_string", (s, s), "list(string)", True),
        _o("split", "string_split_string_int", (s, s, "int"), "list(string)", True),
        _o("substring", "string_substring_int", (s, "int"), s, True),
        _o("substring", "string_substring_int_int", (s, "int", "int"), s, True),
        _o("trim", "string_trim", (s,), s, True),
        _o("join", "list_join", ("list(string)",), s, True),
        _o("join", "list_join_string", ("list(string)", s), s, True),
        _o("format", "string_format", (s, "list(dyn)"), s, True),
        _o("strings.quote", "strings_quote", (s,), s),
    ]


def optional_v2_unwrap_overloads() -> list[Overload]:
    """cel-go's optional library (version 2) `optional.unwrap` / `unwrapOpt` (cel/library.go), which
    cel-cpp's optional extension lacks: declared for the checker, evaluated by
    `celkeeper.cel.celpython.extensions.unwrap_optionals`."""
    return [
        _o("optional.unwrap", "optional_unwrap", ("list(optional_type(~V))",), "list(~V)"),
        _o("unwrapOpt", "optional_unwrapOpt", ("list(optional_type(~V))",), "list(~V)", True),
    ]


def _redeclared_stdlib_overloads() -> list[Overload]:
    out: list[Overload] = []
    relations = {"_<_": "less", "_<=_": "less_equals", "_>_": "greater", "_>=_": "greater_equals"}
    same = (
        ("bool", "bool"),
        ("int64", "int"),
        ("uint64", "uint"),
        ("double", "double"),
        ("string", "string"),
        ("bytes", "bytes"),
        ("timestamp", TIMESTAMP),
        ("duration", DURATION),
    )
    numeric = (("int64", "int"), ("uint64", "uint"), ("double", "double"))
    for op, prefix in relations.items():
        for tid, t in same:
            out.append(_o(op, f"{prefix}_{tid}", (t, t), "bool"))
        # cross-type numeric comparisons (cel.CrossTypeNumericComparisons(true))
        for aid, a in numeric:
            for bid, b in numeric:
                if aid != bid:
                    out.append(_o(op, f"{prefix}_{aid}_{bid}", (a, b), "bool"))
    for tid, t in (
        ("string", "string"),
        ("int64", "int"),
        ("uint64", "uint"),
        ("double", "double"),
        ("bool", "bool"),
        ("bytes", "bytes"),
        ("timestamp", TIMESTAMP),
        ("duration", DURATION),
    ):
        oid = "string_to_string" if tid == "string" else f"{tid}_to_string"
        out.append(_o("string", oid, (t,), "string"))
    return out


# ------------------------------------------------------------------------------------------ YAML


def _type_yaml(t: str) -> str:
    """A type string (list(string), map(string, dyn), ~A for a type parameter) as a YAML flow map."""
    t = t.strip()
    if t.startswith("~"):
        return f"{{type_name: {t[1:]}, is_type_param: true}}"
    if "(" in t:
        name, rest = t.split("(", 1)
        params = split_types(rest[:-1])
        return f"{{type_name: '{name}', params: [{', '.join(_type_yaml(p) for p in params)}]}}"
    return f"{{type_name: '{t}'}}"


def split_types(types: str) -> list[str]:
    """`a, b, c` (types, possibly parameterised: `map(string, int)`) as ["a", " b", " c"]."""
    params: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(types):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            params.append(types[start:i])
            start = i + 1
    params.append(types[start:])
    return params


def _functions_yaml(overloads: list[Overload]) -> str:
    by_name: dict[str, list[Overload]] = {}
    for o in overloads:
        by_name.setdefault(o.function, []).append(o)
    lines = ["functions:"]
    for name, group in by_name.items():
        lines.append(f"  - name: '{name}'")
        lines.append("    overloads:")
        for o in group:
            lines.append(f"      - id: '{o.id}'")
            args = list(o.args)
            if o.member:
                lines.append(f"        target: {_type_yaml(args.pop(0))}")
            if args:
                lines.append(f"        args: [{', '.join(_type_yaml(a) for a in args)}]")
            lines.append(f"        return: {_type_yaml(o.result)}")
    return "\n".join(lines) + "\n"


_EXTENSIONS_COMMON = """\
  - {name: optional, version: 2}
  - {name: sets}
  - {name: lists, version: 2}
  - {name: two-var-comprehensions}
"""


def checker_yaml() -> str:
    """The checking environment (declarations only for everything Kubernetes adds)."""
    excluded = ("_<_", "_<=_", "_>_", "_>=_", "string")
    head = "stdlib:\n  exclude_functions:\n" + "".join(f"    - name: '{n}'\n" for n in excluded)
    head += "extensions:\n" + _EXTENSIONS_COMMON
    overloads = _redeclared_stdlib_overloads() + _strings_v2_overloads() + list(FUNCTIONS.values())
    overloads += optional_v2_unwrap_overloads() + authz_overloads()
    return head + _functions_yaml(overloads) + _type_identifiers_yaml()


def authz_overloads() -> list[Overload]:
    """Kubernetes' authz library (library/authz.go, in the base environment Gatekeeper compiles
    with): declared for checking only. Gatekeeper declares no `authorizer`, so no expression can
    reach them with a value of their types; they matter for compile errors (`authorizer.group(...)`
    is one undeclared reference, as in Kubernetes, not five)."""
    authz = "kubernetes.authorization."
    authorizer, path, group = authz + "Authorizer", authz + "PathCheck", authz + "GroupCheck"
    resource, decision = authz + "ResourceCheck", authz + "Decision"
    return [
        _o("path", "authorizer_path", (authorizer, "string"), path, True),
        _o("group", "authorizer_group", (authorizer, "string"), group, True),
        _o("serviceAccount", "authorizer_serviceaccount", (authorizer, "string", "string"), authorizer, True),
        _o("resource", "groupcheck_resource", (group, "string"), resource, True),
        _o("subresource", "resourcecheck_subresource", (resource, "string"), resource, True),
        _o("namespace", "resourcecheck_namespace", (resource, "string"), resource, True),
        _o("name", "resourcecheck_name", (resource, "string"), resource, True),
        _o("check", "pathcheck_check", (path, "string"), decision, True),
        _o("check", "resourcecheck_check", (resource, "string"), decision, True),
        _o("errored", "decision_errored", (decision,), "bool", True),
        _o("error", "decision_error", (decision,), "string", True),
        _o("allowed", "decision_allowed", (decision,), "bool", True),
        _o("reason", "decision_reason", (decision,), "string", True),
        _o("fieldSelector", "authorizer_fieldselector", (resource, "string"), resource, True),
        _o("labelSelector", "authorizer_labelselector", (resource, "string"), resource, True),
    ]


#: library types Kubernetes' environment names as identifiers (`type(ip("::1")) == net.IP`: the ip
#: and cidr libraries declare them; the other library types have no name in CEL sources)
TYPE_IDENTIFIERS = (IP, CIDR)


def _type_identifiers_yaml() -> str:
    lines = ["variables:"]
    for name in TYPE_IDENTIFIERS:
        lines.append(f"  - name: '{name}'")
        lines.append("    type_name: 'type'")
        lines.append(f"    params: [{{type_name: '{name}'}}]")
    return "\n".join(lines) + "\n"


def runtime_yaml() -> str:
    """The runtime environment: the stdlib and the extensions, strings included."""
    return "extensions:\n" + _EXTENSIONS_COMMON + "  - {name: strings, version: 2}\n"
