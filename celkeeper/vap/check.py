"""What celkeeper knows before generating: will the API server take the policy, and will it decide as
celkeeper does?

Errors: the API server would refuse the generated ValidatingAdmissionPolicy or binding, so none is made
(kubernetes pkg/apis/admissionregistration/validation/validation.go, ValidateValidatingAdmissionPolicy and
ValidateValidatingAdmissionPolicyBinding, v1.37.2):

- every expression is compiled when the policy is written; one that does not compile (or whose type is
  not bool, or string for a messageExpression) refuses the whole policy, where Gatekeeper's webhook only
  fails the requests that reach it;
- match conditions are compiled without the policy's variables (a stateless compiler), so a template
  match condition that reads `variables` cannot be one;
- match condition names are qualified names, at most 64 match conditions;
- a validation's message must not be blank or contain a line break;
- a binding's validation actions are unique and never Deny with Warn.

Warnings: the policy is made, but Gatekeeper's transform expresses less than its webhook applies, so the
API server decides some requests otherwise than celkeeper's webhook (and Gatekeeper's):

- the default match covers CREATE and UPDATE of every resource, whatever the template's operations;
- a constraint's spec.match.scope and spec.match.source are not expressed;
- namespaces / excludedNamespaces are applied to namespaced objects only: a Namespace object itself is
  matched by its own name in the webhook, not by the policy;
- objects ExpansionTemplates generate (a Deployment's Pod) are checked by the webhook only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from celkeeper.crds import names
from celkeeper.expansion import Expansions
from celkeeper.match import Match
from celkeeper.model import JsonValue
from celkeeper.templates import CompiledTemplate, TemplateSpec
from celkeeper.vap.transform import ALL_OPERATIONS, Scope

MAX_MATCH_CONDITIONS = 64
DEFAULT_OPERATIONS = frozenset({"CREATE", "UPDATE"})
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LINE_BREAK = re.compile(r"[\n\r]")

# (field path, message): located in the template's or constraint's document by the caller
Finding = tuple[str, str]


def is_qualified_name(value: str) -> bool:
    """Kubernetes' IsQualifiedName: an optional DNS subdomain prefix and `/`, then a name of at most 63
    characters (letters, digits, `-`, `_`, `.`, starting and ending with a letter or digit)."""
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or not names.is_dns1123_subdomain(prefix)):
        return False
    return 0 < len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def references_variables(source: str) -> bool:
    """Whether a CEL source names the identifier `variables` (outside strings and comments, and not as a
    field after a dot)."""
    i, n = 0, len(source)
    previous = ""  # the last significant character before the current token
    while i < n:
        c = source[i]
        if c.isspace():
            i += 1
            continue
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        raw = False
        if c in "rRbB" and i + 1 < n and source[i + 1] in "'\"rRbB":
            j = i
            while j < n and source[j] in "rRbB":
                raw = raw or source[j] in "rR"
                j += 1
            if j < n and source[j] in "'\"":
                i, c = j, source[j]
        if c in "'\"":
            quote = source[i : i + 3] if source.startswith(c * 3, i) else c
            j = i + len(quote)
            while j < n and not source.startswith(quote, j):
                j += 2 if source[j] == "\\" and not raw else 1
            i = j + len(quote)
            previous = "'"
            continue
        if c.isalpha() or c == "_":
            j = i
            while j < n and (source[j].isalnum() or source[j] == "_"):
                j += 1
            if source[i:j] == "variables" and previous != ".":
                return True
            i, previous = j, "a"
            continue
        previous = c
        i += 1
    return False


def template_errors(
    spec: TemplateSpec, compiled: CompiledTemplate, scope: Scope, policy: Mapping[str, JsonValue] | None
) -> list[Finding]:
    """Why the API server would refuse the template's policy (empty: it will take it)."""
    found: list[Finding] = []
    for err in compiled.errors:
        found.append(
            (
                err.location.path or spec.source_path,
                "the API server compiles every expression of a ValidatingAdmissionPolicy when it is "
                f"written, and this one does not compile: {_bare(err.message, spec.name)}",
            )
        )
    for condition in spec.match_conditions:
        where = condition.expression.path.rpartition(".")[0]
        if references_variables(condition.expression.source):
            found.append(
                (
                    condition.expression.path,
                    f"match condition {condition.name!r} reads variables: a ValidatingAdmissionPolicy "
                    "compiles its match conditions without the policy's variables",
                )
            )
        if not is_qualified_name(condition.name):
            found.append(
                (
                    f"{where}.name",
                    f"match condition name {condition.name!r} is not a qualified name (at most 63 "
                    "letters, digits, '-', '_' or '.', beginning and ending with a letter or digit, "
                    "optionally after a DNS subdomain and '/'), as a ValidatingAdmissionPolicy requires",
                )
            )
    for validation in spec.validations:
        message = validation.message
        if message is None or message == "":
            continue
        where = validation.expression.path.rpartition(".")[0] + ".message"
        if not message.strip():
            found.append((where, "a ValidatingAdmissionPolicy's message must not be blank"))
        elif _LINE_BREAK.search(message.strip()):
            found.append((where, "a ValidatingAdmissionPolicy's message must not contain line breaks"))
    if policy is not None:
        count = len(policy["spec"]["matchConditions"])
        if count > MAX_MATCH_CONDITIONS:
            found.append(
                (
                    spec.source_path,
                    f"the policy would have {count} match conditions (the template's and Gatekeeper's); "
                    f"a ValidatingAdmissionPolicy may have at most {MAX_MATCH_CONDITIONS}",
                )
            )
    return found


def template_warnings(spec: TemplateSpec, scope: Scope) -> list[Finding]:
    """Where the policy decides otherwise than celkeeper's webhook, for every constraint of the template."""
    if scope.webhook is not None:
        return []  # the webhook's own rules, intersected with the template's operations (transform)
    operations = spec.operations
    wanted = DEFAULT_OPERATIONS if operations is None else frozenset(operations)
    if wanted == DEFAULT_OPERATIONS:
        return []
    missing = sorted((wanted - DEFAULT_OPERATIONS) & set(ALL_OPERATIONS), key=ALL_OPERATIONS.index)
    extra = sorted(DEFAULT_OPERATIONS - wanted, key=ALL_OPERATIONS.index)
    parts = []
    if missing:
        parts.append(f"{' and '.join(missing)} requests are not validated")
    if extra:
        parts.append(f"{' and '.join(extra)} requests are validated although the template leaves them out")
    return [
        (
            "spec.targets[0].operations",
            "the policy matches CREATE and UPDATE of every resource (Gatekeeper's default "
            f"matchConstraints ignore the template's operations): {'; '.join(parts)}",
        )
    ]


def constraint_warnings(match: Match, raw: Mapping[str, JsonValue]) -> list[Finding]:
    """Where the binding of a constraint selects otherwise than celkeeper's webhook (spec.match)."""
    found: list[Finding] = []
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    written = spec.get("match") if isinstance(spec, Mapping) else None
    written = written if isinstance(written, Mapping) else {}
    if match.scope in ("Cluster", "Namespaced"):
        found.append(
            (
                "spec.match.scope",
                f"scope {match.scope} is not expressed in the ValidatingAdmissionPolicy (Gatekeeper's "
                "match conditions ignore it): the policy validates namespaced and cluster-scoped objects",
            )
        )
    if "source" in written and match.source != "All":
        found.append(
            (
                "spec.match.source",
                f"source {match.source} is not expressed in the ValidatingAdmissionPolicy (Gatekeeper's "
                "match conditions ignore it)",
            )
        )
    if (match.namespaces or match.excluded_namespaces) and _may_match_namespaces(match):
        field = "namespaces" if match.namespaces else "excludedNamespaces"
        found.append(
            (
                f"spec.match.{field}",
                "namespaces and excludedNamespaces select Namespace objects by their own name in the "
                "webhook, but the ValidatingAdmissionPolicy treats a Namespace as cluster-scoped and "
                "validates every Namespace",
            )
        )
    return found


def expansion_warnings(match: Match, expansions: Expansions) -> list[Finding]:
    """Objects ExpansionTemplates generate that the constraint can select: the webhook checks them (on
    their workload), the API server does not generate them."""
    found: dict[str, set[str]] = {}
    for template in expansions.templates:
        if template.name in expansions.cycles:  # left out: nothing is generated
            continue
        group, _, kind = template.generates
        if not match.kinds or any(s.matches(group, kind) for s in match.kinds):
            found.setdefault(kind, set()).update(k for _, _, k in template.applies_to)
    if not found:
        return []
    made = "; ".join(f"{kind} from {', '.join(sorted(parents))}" for kind, parents in sorted(found.items()))
    return [
        (
            "spec.match.kinds",
            f"objects ExpansionTemplates generate ({made}) are checked by the webhook, which reports them on "
            "the object that generates them; the ValidatingAdmissionPolicy sees only the objects written",
        )
    ]


def binding_errors(actions: Sequence[str]) -> list[Finding]:
    """Why the API server would refuse a binding with these validation actions."""
    found: list[Finding] = []
    duplicates = sorted({a for a in actions if actions.count(a) > 1})
    if duplicates:
        found.append(
            (
                "spec.scopedEnforcementActions",
                f"the binding's validation actions would repeat {', '.join(duplicates)} (one per "
                "scopedEnforcementActions entry for vap.k8s.io or *): the API server refuses duplicates",
            )
        )
    if "Deny" in actions and "Warn" in actions:
        found.append(
            (
                "spec.scopedEnforcementActions",
                "deny and warn at vap.k8s.io would make a binding with both Deny and Warn, which the API "
                "server refuses",
            )
        )
    return found


def _may_match_namespaces(match: Match) -> bool:
    if not match.kinds:
        return True
    return any(
        (s.groups is None or "" in s.groups) and (s.kinds is None or "Namespace" in s.kinds)
        for s in match.kinds
    )


def _bare(message: str, template: str) -> str:
    return message.removeprefix(f"template {template}: ")
