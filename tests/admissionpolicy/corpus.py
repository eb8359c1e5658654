"""The admission policy differential's corpus: generated policies, bindings, parameters, objects and
requests covering what the API server's admission policy plugins decide (tests/admissionpolicy/
test_policies_apiserver.py sends each to a real kube-apiserver and compares celkeeper's offline answer).

Each family below makes policies (isolated by the `celkeeper-case` label their matchConstraints select)
and cases (a request: CREATE of an object, UPDATE or DELETE of an object the round's setup stores).
Nothing here says what the answer should be: the API server answers, celkeeper must answer the same.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.admissionpolicy.differential import CASE_LABEL

Obj = dict[str, Any]
AR = "admissionregistration.k8s.io/v1"
GROUP = "celkeeper.test"
WIDGET_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer"},
                                    "color": {"type": "string"},
                                    "tags": {"type": "array", "items": {"type": "string"}},
                                    "parts": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "count": {"type": "integer"},
                                                "finish": {"type": "string"},
                                            },
                                        },
                                    },
                                    "options": {
                                        "type": "object",
                                        "x-kubernetes-map-type": "granular",
                                        "additionalProperties": {"type": "string"},
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
KNOB_CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"knobs.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Cluster",
        "names": {"plural": "knobs", "singular": "knob", "kind": "Knob", "listKind": "KnobList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "limit": {"type": "integer"},
                                    "word": {"type": "string"},
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
CRDS = (WIDGET_CRD, KNOB_CRD)


@dataclass
class Case:
    """One request. CREATE: `object`. UPDATE: `existing` is stored by the setup, `change` makes the new
    object from what the API server stored. DELETE: `existing` is stored, then deleted (dry run)."""

    id: str
    operation: str
    object: Obj | None = None
    existing: Obj | None = None
    change: Callable[[Obj], Obj] | None = None


@dataclass
class Round:
    name: str
    namespaces: list[Obj] = field(default_factory=list)
    setup: list[Obj] = field(default_factory=list)  # parameter objects (stored before the policies)
    crds: list[Obj] = field(default_factory=list)  # CRDs the round's parameters need (installed first)
    #: objects the API server refuses even with no policy in force are not admission cases (the examples'
    #: suites hold some): they are left out, counted
    skip_invalid: bool = False
    #: cases not sent, and why (see vap_round)
    left_out: list[str] = field(default_factory=list)
    policies: list[Obj] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def next_id(self, family: str) -> str:
        return f"{self.name}-{family}-{next(self.counter)}"

    @property
    def ns_a(self) -> str:
        return f"{self.name}-a"

    @property
    def ns_b(self) -> str:
        return f"{self.name}-b"


# -- builders --------------------------------------------------------------------------------------------
def rules(
    resources: Sequence[str], groups: Sequence[str] = ("",), ops: Sequence[str] = ("CREATE", "UPDATE")
) -> Obj:
    return {
        "apiGroups": list(groups),
        "apiVersions": ["*"],
        "operations": list(ops),
        "resources": list(resources),
    }


def match_constraints(case: str, resource_rules: Sequence[Obj], **extra: Any) -> Obj:
    selector = copy.deepcopy(extra.pop("objectSelector", {}))
    selector.setdefault("matchLabels", {})[CASE_LABEL] = case
    out: Obj = {"resourceRules": list(resource_rules), "objectSelector": selector}
    out.update(extra)
    return out


def vap(name: str, case: str, spec: Obj, resource_rules: Sequence[Obj] | None = None, **match: Any) -> Obj:
    spec = copy.deepcopy(spec)
    spec["matchConstraints"] = match_constraints(case, resource_rules or [rules(["configmaps"])], **match)
    return {"apiVersion": AR, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}


def vapb(name: str, policy: str, actions: Sequence[str] = ("Deny",), **spec: Any) -> Obj:
    body: Obj = {"policyName": policy, "validationActions": list(actions)}
    body.update(spec)
    return {
        "apiVersion": AR,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": body,
    }


def mutating(
    name: str, case: str, spec: Obj, resource_rules: Sequence[Obj] | None = None, **match: Any
) -> Obj:
    spec = copy.deepcopy(spec)
    spec.setdefault("reinvocationPolicy", "Never")
    spec["matchConstraints"] = match_constraints(case, resource_rules or [rules(["configmaps"])], **match)
    return {"apiVersion": AR, "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}


def mapb(name: str, policy: str, **spec: Any) -> Obj:
    body: Obj = {"policyName": policy}
    body.update(spec)
    return {
        "apiVersion": AR,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": body,
    }


def labelled(obj: Obj, case: str, labels: Mapping[str, str] | None = None) -> Obj:
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    meta.setdefault("labels", {}).update({CASE_LABEL: case, **(labels or {})})
    return obj


def configmap(
    name: str, namespace: str, case: str, data: Mapping[str, str] | None = None, **labels: str
) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    if data is not None:
        obj["data"] = dict(data)
    return labelled(obj, case, labels)


def widget(name: str, namespace: str, case: str, spec: Obj, **labels: str) -> Obj:
    obj: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return labelled(obj, case, labels)


def deployment(
    name: str, namespace: str, case: str, containers: Sequence[Obj], replicas: int = 1, **labels: str
) -> Obj:
    app = {"app": name}
    obj: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": app},
            "template": {"metadata": {"labels": app}, "spec": {"containers": list(containers)}},
        },
    }
    return labelled(obj, case, labels)


def pod(name: str, namespace: str, case: str, containers: Sequence[Obj], **labels: str) -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": list(containers)},
    }
    return labelled(obj, case, labels)


def container(name: str, image: str, **extra: Any) -> Obj:
    return {"name": name, "image": image, **extra}


def with_data(**data: str) -> Callable[[Obj], Obj]:
    def change(stored: Obj) -> Obj:
        out = copy.deepcopy(stored)
        out.setdefault("data", {}).update(data)
        return out

    return change


def with_labels(**labels: str) -> Callable[[Obj], Obj]:
    def change(stored: Obj) -> Obj:
        out = copy.deepcopy(stored)
        out["metadata"].setdefault("labels", {}).update(labels)
        return out

    return change


# -- validating families ---------------------------------------------------------------------------------
MESSAGES: Sequence[tuple[str, Obj]] = (
    ("message", {"message": "size too large"}),
    ("messageExpression", {"messageExpression": "'size is ' + object.data.size"}),
    ("messageExpression-error", {"message": "fallback message", "messageExpression": "'n=' + string(1/0)"}),
    ("messageExpression-empty", {"message": "static", "messageExpression": "''"}),
    ("messageExpression-newline", {"message": "static", "messageExpression": "'two\\nlines'"}),
    ("messageExpression-spaces", {"messageExpression": "'  padded message  '"}),
    ("none", {}),
    ("reason-forbidden", {"message": "forbidden one", "reason": "Forbidden"}),
    ("reason-unauthorized", {"message": "unauthorized one", "reason": "Unauthorized"}),
    ("reason-too-large", {"message": "too large", "reason": "RequestEntityTooLarge"}),
    ("reason-invalid", {"messageExpression": "'invalid ' + object.metadata.name", "reason": "Invalid"}),
)
ACTIONS: Sequence[Sequence[str]] = (("Deny",), ("Warn",), ("Audit",), ("Deny", "Audit"), ("Warn", "Audit"))


def actions_family(r: Round) -> None:
    """Every validation action, with every way a message is made, on objects that pass and that fail."""
    for (mname, message), actions in itertools.product(MESSAGES, ACTIONS):
        case = r.next_id("actions")
        validation = {"expression": "int(object.data.size) < 10", **message}
        r.policies.append(vap(case, case, {"validations": [validation]}))
        r.policies.append(vapb(case, case, actions))
        for size in ("3", "12"):
            r.cases.append(
                Case(
                    f"{case}-{mname}-{size}",
                    "CREATE",
                    configmap(f"{case}-{size}", r.ns_a, case, {"size": size}),
                )
            )


# binding pairs on one policy where no two bindings report the same way: the API server evaluates a
# policy's bindings (and the policies) in the order of its informer cache (Go map order), so with two Deny
# (or two Warn, or two Audit) bindings which one it reports first varies between API servers
BINDING_PAIRS: Sequence[tuple[Sequence[str], Sequence[str]]] = (
    (("Deny",), ("Warn",)),
    (("Deny", "Audit"), ("Warn",)),
    (("Warn", "Audit"), ("Deny",)),
    (("Warn",), ("Audit",)),
    (("Deny",), ("Audit",)),
    (("Audit",), ("Warn",)),
)


def several_validations_family(r: Round) -> None:
    """Several validations, two bindings: the first failing validation's denial, every warning, the
    first failure's audit record."""
    for first, second in BINDING_PAIRS:
        case = r.next_id("several")
        validations = [
            {"expression": "int(object.data.a) < 5", "message": "a too large"},
            {"expression": "int(object.data.b) < 5", "messageExpression": "'b is ' + object.data.b"},
            {"expression": "object.data.c != 'bad'"},
        ]
        r.policies.append(
            vap(
                case,
                case,
                {
                    "validations": validations,
                    "auditAnnotations": [
                        {"key": "sum", "valueExpression": "string(int(object.data.a) + int(object.data.b))"},
                    ],
                },
            )
        )
        r.policies.append(vapb(f"{case}-1", case, first))
        r.policies.append(vapb(f"{case}-2", case, second))
        for a, b, c in (("1", "1", "ok"), ("7", "1", "ok"), ("1", "9", "bad"), ("8", "8", "bad")):
            r.cases.append(
                Case(
                    f"{case}-{a}{b}{c}",
                    "CREATE",
                    configmap(f"{case}-{a}-{b}-{c}", r.ns_a, case, {"a": a, "b": b, "c": c}),
                )
            )


ERRORS: Sequence[tuple[str, Obj]] = (
    ("division", {"validations": [{"expression": "1 / (size(object.data) - size(object.data)) == 1"}]}),
    ("nokey", {"validations": [{"expression": "object.data.missing == 'x'"}]}),
    (
        "variable",
        {
            "variables": [{"name": "bad", "expression": "object.data.missing"}],
            "validations": [{"expression": "variables.bad == 'x'"}],
        },
    ),
    (
        "variable-unused",
        {
            "variables": [{"name": "bad", "expression": "object.data.missing"}],
            "validations": [{"expression": "object.data.size == '1'"}],
        },
    ),
    (
        "matchcondition",
        {
            "matchConditions": [{"name": "explodes", "expression": "object.data.missing == 'x'"}],
            "validations": [{"expression": "false", "message": "matched"}],
        },
    ),
    (
        "audit-annotation",
        {
            "validations": [{"expression": "true"}],
            "auditAnnotations": [{"key": "broken", "valueExpression": "object.data.missing"}],
        },
    ),
    (
        "audit-annotation-null",
        {
            "validations": [{"expression": "true"}],
            "auditAnnotations": [{"key": "nothing", "valueExpression": "null"}],
        },
    ),
    (
        "message-expression",
        {"validations": [{"expression": "false", "messageExpression": "object.data.missing"}]},
    ),
    ("type", {"validations": [{"expression": "object.data.size > 3"}]}),
    ("int-parse", {"validations": [{"expression": "int(object.data.word) > 1"}]}),
    (
        "cost",
        {
            "validations": [
                {
                    "expression": "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10]"
                    ".all(c, [1,2,3,4,5,6,7,8,9,10].all(d, object.data.word.matches('^(a|b)+$') || a+b+c+d > 0))))",
                }
            ]
        },
    ),
)
FAILURE_POLICIES: Sequence[str | None] = ("Fail", "Ignore", None)


def failures_family(r: Round) -> None:
    """Runtime errors in every part, under every failurePolicy and action."""
    for (ename, spec), policy, actions in itertools.product(
        ERRORS, FAILURE_POLICIES, (("Deny",), ("Warn",), ("Audit",))
    ):
        case = r.next_id("failure")
        body = copy.deepcopy(spec)
        if policy is not None:
            body["failurePolicy"] = policy
        r.policies.append(vap(case, case, body))
        r.policies.append(vapb(case, case, actions))
        r.cases.append(
            Case(f"{case}-{ename}", "CREATE", configmap(case, r.ns_a, case, {"size": "1", "word": "abab"}))
        )


def match_conditions_family(r: Round) -> None:
    """Match conditions true, false and failing, on every operation, under both failure policies."""
    conditions = {
        "true": [{"name": "always", "expression": "true"}],
        "false": [{"name": "never", "expression": "false"}],
        "labelled": [
            {
                "name": "labelled",
                "expression": "has(object.metadata.labels) && 'check' in object.metadata.labels",
            }
        ],
        "update-only": [{"name": "update", "expression": "request.operation == 'UPDATE'"}],
        "two": [
            {"name": "first", "expression": "true"},
            {"name": "second", "expression": "oldObject == null || oldObject.data.size != object.data.size"},
        ],
        "error": [{"name": "oops", "expression": "object.data.nothing == 'x'"}],
        "error-then-false": [
            {"name": "oops", "expression": "object.data.nothing == 'x'"},
            {"name": "no", "expression": "false"},
        ],
    }
    ops = ("CREATE", "UPDATE", "DELETE")
    for (cname, conds), policy in itertools.product(conditions.items(), ("Fail", "Ignore")):
        case = r.next_id("matchcond")
        spec = {
            "failurePolicy": policy,
            "matchConditions": conds,
            "validations": [
                {
                    "expression": "request.operation == 'DELETE' || int(object.data.size) < 5",
                    "message": "too big",
                }
            ],
        }
        # DELETE: object is null, so match conditions reading object fail there (as they do in the API server)
        r.policies.append(vap(case, case, spec, [rules(["configmaps"], ops=ops)]))
        r.policies.append(vapb(case, case, ("Deny",)))
        for size in ("1", "9"):
            r.cases.append(
                Case(
                    f"{case}-{cname}-create-{size}",
                    "CREATE",
                    configmap(f"{case}-c{size}", r.ns_a, case, {"size": size}, check="yes"),
                )
            )
            r.cases.append(
                Case(
                    f"{case}-update-{size}",
                    "UPDATE",
                    existing=configmap(f"{case}-u{size}", r.ns_a, case, {"size": "2"}),
                    change=with_data(size=size),
                )
            )
        r.cases.append(
            Case(f"{case}-delete", "DELETE", existing=configmap(f"{case}-d", r.ns_a, case, {"size": "2"}))
        )


def variables_family(r: Round) -> None:
    """Variables composed of variables, used by validations, messages and audit annotations."""
    specs = [
        {
            "variables": [
                {"name": "size", "expression": "int(object.data.size)"},
                {"name": "double", "expression": "variables.size * 2"},
                {"name": "big", "expression": "variables.double > 10"},
            ],
            "validations": [
                {
                    "expression": "!variables.big",
                    "messageExpression": "'double is ' + string(variables.double)",
                }
            ],
            "auditAnnotations": [{"key": "double", "valueExpression": "string(variables.double)"}],
        },
        {
            "variables": [
                {"name": "keys", "expression": "object.data.map(k, k)"},
                {"name": "sorted", "expression": "variables.keys.sort()"},
            ],
            "validations": [
                {
                    "expression": "variables.sorted.size() < 3",
                    "messageExpression": "'keys: ' + variables.sorted.join(',')",
                }
            ],
        },
        {
            "variables": [{"name": "name", "expression": "object.metadata.name"}],
            "validations": [
                {
                    "expression": "!variables.name.endsWith('-9')",
                    "messageExpression": "variables.name + ' ends in 9'",
                }
            ],
        },
        {
            "variables": [
                {"name": "word", "expression": "object.data.?word.orValue('none')"},
                {"name": "upper", "expression": "variables.word.upperAscii()"},
            ],
            "validations": [{"expression": "variables.upper != 'NONE'", "message": "no word"}],
        },
        {
            "variables": [{"name": "qty", "expression": "quantity(object.data.?mem.orValue('1Mi'))"}],
            "validations": [
                {
                    "expression": "variables.qty.isLessThan(quantity('1Gi'))",
                    "messageExpression": "'memory ' + object.data.?mem.orValue('?')",
                }
            ],
        },
        {
            "variables": [{"name": "ips", "expression": "object.data.?cidr.orValue('10.0.0.0/8')"}],
            "validations": [
                {"expression": "cidr(variables.ips).containsIP('10.1.2.3')", "message": "not in range"}
            ],
        },
    ]
    datas = [
        {"size": "2"},
        {"size": "9", "word": "hi"},
        {"size": "1", "a": "1", "b": "2"},
        {"size": "3", "mem": "2Gi"},
        {"size": "4", "cidr": "192.168.0.0/16"},
    ]
    for index, spec in enumerate(specs):
        case = r.next_id("variables")
        r.policies.append(vap(case, case, spec))
        r.policies.append(vapb(case, case, ("Deny", "Audit")))
        for n, data in enumerate(datas):
            r.cases.append(Case(f"{case}-{n}", "CREATE", configmap(f"{case}-{n}", r.ns_a, case, data)))
        r.cases.append(Case(f"{case}-9", "CREATE", configmap(f"{case}-9", r.ns_a, case, {"size": "1"})))
        del index


def params_family(r: Round) -> None:
    """Parameters: ConfigMaps (namespaced) by name and by selector, Knobs (cluster-scoped), found or not,
    with both parameterNotFoundActions, and bindings without paramRef."""
    r.setup += [
        configmap(
            "limits-small", r.ns_a, "params", {"max": "3", "word": "small"}, tier="params", size="small"
        ),
        configmap(
            "limits-large", r.ns_a, "params", {"max": "8", "word": "large"}, tier="params", size="large"
        ),
        configmap("limits-b", r.ns_b, "params", {"max": "5", "word": "b"}, tier="params", size="small"),
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Knob",
            "metadata": {"name": f"{r.name}-knob-low", "labels": {"knob": r.name, "level": "low"}},
            "spec": {"limit": 2, "word": "low"},
        },
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Knob",
            "metadata": {"name": f"{r.name}-knob-high", "labels": {"knob": r.name, "level": "high"}},
            "spec": {"limit": 7, "word": "high"},
        },
    ]
    cm_kind = {"apiVersion": "v1", "kind": "ConfigMap"}
    knob_kind = {"apiVersion": f"{GROUP}/v1", "kind": "Knob"}
    refs: list[tuple[str, Obj, Obj | None]] = []
    for action in ("Allow", "Deny"):
        refs += [
            (f"name-{action}", cm_kind, {"name": "limits-small", "parameterNotFoundAction": action}),
            (
                f"name-ns-{action}",
                cm_kind,
                {"name": "limits-b", "namespace": r.ns_b, "parameterNotFoundAction": action},
            ),
            (f"missing-{action}", cm_kind, {"name": "nothing", "parameterNotFoundAction": action}),
            (
                f"selector-one-{action}",
                cm_kind,
                {"selector": {"matchLabels": {"size": "large"}}, "parameterNotFoundAction": action},
            ),
            (
                f"selector-two-{action}",
                cm_kind,
                {"selector": {"matchLabels": {"tier": "params"}}, "parameterNotFoundAction": action},
            ),
            (
                f"selector-none-{action}",
                cm_kind,
                {"selector": {"matchLabels": {"tier": "nothing"}}, "parameterNotFoundAction": action},
            ),
            (f"selector-all-{action}", cm_kind, {"selector": {}, "parameterNotFoundAction": action}),
            (
                f"knob-name-{action}",
                knob_kind,
                {"name": f"{r.name}-knob-high", "parameterNotFoundAction": action},
            ),
            (f"knob-missing-{action}", knob_kind, {"name": "nothing", "parameterNotFoundAction": action}),
            (
                f"knob-selector-{action}",
                knob_kind,
                {"selector": {"matchLabels": {"knob": r.name}}, "parameterNotFoundAction": action},
            ),
            (
                f"knob-ns-{action}",
                knob_kind,
                {"name": f"{r.name}-knob-low", "namespace": r.ns_a, "parameterNotFoundAction": action},
            ),
        ]
    refs.append(("no-ref", cm_kind, None))
    for (rname, kind, ref), policy in itertools.product(refs, ("Fail", "Ignore")):
        case = r.next_id("params")
        if kind["kind"] == "ConfigMap":
            limit = "params == null ? true : int(object.data.size) <= int(params.data.max)"
            message = "'size ' + object.data.size + ' over ' + (params == null ? 'none' : params.data.max)"
            annotation = "params == null ? 'no params' : params.data.word"
        else:
            limit = "params == null ? true : int(object.data.size) <= params.spec.limit"
            message = "'size ' + object.data.size + ' over ' + (params == null ? 'none' : string(params.spec.limit))"
            annotation = "params == null ? 'no params' : params.spec.word"
        spec = {
            "failurePolicy": policy,
            "paramKind": kind,
            "validations": [{"expression": limit, "messageExpression": message}],
            "auditAnnotations": [{"key": "param", "valueExpression": annotation}],
        }
        r.policies.append(vap(case, case, spec))
        binding: Obj = {}
        if ref is not None:
            binding["paramRef"] = ref
        r.policies.append(vapb(case, case, ("Deny", "Audit"), **binding))
        for size in ("1", "4", "9"):
            r.cases.append(
                Case(
                    f"{case}-{rname}-{size}",
                    "CREATE",
                    configmap(f"{case}-{size}", r.ns_a, case, {"size": size}),
                )
            )
        r.cases.append(
            Case(f"{case}-{rname}-b", "CREATE", configmap(f"{case}-b", r.ns_b, case, {"size": "4"}))
        )


def params_cluster_scoped_family(r: Round) -> None:
    """A namespaced paramKind for a cluster-scoped object (a Namespace): the API server's configuration error."""
    for ref, policy in itertools.product(
        (
            {"name": "limits-small", "parameterNotFoundAction": "Deny"},
            {"name": "limits-small", "namespace": r.ns_a, "parameterNotFoundAction": "Deny"},
            {"selector": {}, "parameterNotFoundAction": "Allow"},
        ),
        ("Fail", "Ignore"),
    ):
        case = r.next_id("nsparams")
        spec = {
            "failurePolicy": policy,
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "validations": [
                {
                    "expression": "params == null || object.metadata.name.size() < int(params.data.max) * 10",
                    "message": "name too long",
                }
            ],
        }
        r.policies.append(vap(case, case, spec, [rules(["namespaces"])]))
        r.policies.append(vapb(case, case, ("Deny",), paramRef=ref))
        r.cases.append(
            Case(
                case,
                "CREATE",
                labelled(
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": f"{case}-namespace-with-a-long-name"},
                    },
                    case,
                ),
            )
        )


def matching_family(r: Round) -> None:
    """namespaceSelector, objectSelector, excludeResourceRules, resourceNames, operations, matchPolicy,
    and the binding's matchResources."""
    deny = {
        "validations": [
            {
                "expression": "false",
                "messageExpression": "'matched ' + request.resource.resource + '/' + request.name",
            }
        ]
    }
    variants: list[tuple[str, Obj, Obj]] = [
        ("ns-prod", {"namespaceSelector": {"matchLabels": {"env": "prod"}}}, {}),
        (
            "ns-not-prod",
            {
                "namespaceSelector": {
                    "matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]
                }
            },
            {},
        ),
        (
            "ns-exists",
            {"namespaceSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}},
            {},
        ),
        ("obj-label", {"objectSelector": {"matchLabels": {"pick": "me"}}}, {}),
        (
            "obj-notin",
            {
                "objectSelector": {
                    "matchExpressions": [{"key": "pick", "operator": "NotIn", "values": ["me"]}]
                }
            },
            {},
        ),
        (
            "exclude",
            {
                "excludeResourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["*"],
                        "resources": ["configmaps"],
                        "resourceNames": ["skip-me"],
                    }
                ]
            },
            {},
        ),
        (
            "names",
            {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["configmaps"],
                        "resourceNames": ["only-me"],
                    }
                ]
            },
            {},
        ),
        ("binding-ns", {}, {"matchResources": {"namespaceSelector": {"matchLabels": {"env": "dev"}}}}),
        ("binding-obj", {}, {"matchResources": {"objectSelector": {"matchLabels": {"pick": "me"}}}}),
        (
            "binding-exclude",
            {},
            {
                "matchResources": {
                    "excludeResourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["*"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                }
            },
        ),
        (
            "binding-rules",
            {},
            {
                "matchResources": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["*"],
                            "operations": ["UPDATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                }
            },
        ),
        ("ops-update", {"resourceRules": [rules(["configmaps"], ops=["UPDATE"])]}, {}),
        ("ops-all", {"resourceRules": [rules(["configmaps"], ops=["*"])]}, {}),
        ("wildcard", {"resourceRules": [rules(["*"], groups=["*"], ops=["CREATE"])]}, {}),
        (
            "exact",
            {
                "matchPolicy": "Exact",
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["configmaps"],
                    }
                ],
            },
            {},
        ),
        (
            "equivalent-events",
            {
                "matchPolicy": "Equivalent",
                "resourceRules": [
                    {
                        "apiGroups": ["events.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["events"],
                    }
                ],
            },
            {},
        ),
        (
            "exact-events",
            {
                "matchPolicy": "Exact",
                "resourceRules": [
                    {
                        "apiGroups": ["events.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["events"],
                    }
                ],
            },
            {},
        ),
    ]
    for vname, policy_match, binding in variants:
        case = r.next_id("matching")
        resource_rules = policy_match.pop("resourceRules", None)
        r.policies.append(vap(case, case, deny, resource_rules, **policy_match))
        r.policies.append(vapb(case, case, ("Deny",), **binding))
        for ns, name, labels in (
            (r.ns_a, "plain", {}),
            (r.ns_b, "plain", {}),
            (r.ns_a, "pick", {"pick": "me"}),
            (r.ns_a, "skip-me", {}),
            (r.ns_b, "only-me", {}),
        ):
            r.cases.append(
                Case(
                    f"{case}-{vname}-{ns[-1]}-{name}",
                    "CREATE",
                    configmap(name if "me" in name else f"{case}-{name}", ns, case, {"size": "1"}, **labels),
                )
            )
        r.cases.append(
            Case(
                f"{case}-{vname}-update",
                "UPDATE",
                existing=configmap(f"{case}-u", r.ns_a, case, {"size": "1"}, pick="me"),
                change=with_data(size="2"),
            )
        )
        r.cases.append(
            Case(
                f"{case}-{vname}-event",
                "CREATE",
                labelled(
                    {
                        "apiVersion": "v1",
                        "kind": "Event",
                        "metadata": {"name": f"{case}-event", "namespace": r.ns_a},
                        "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": r.ns_a},
                        "reason": "Test",
                        "message": "hello",
                        "type": "Normal",
                    },
                    case,
                ),
            )
        )


def operations_family(r: Round) -> None:
    """UPDATE and DELETE: oldObject, transition rules, DELETE's null object, and what request carries."""
    specs = {
        "transition": {
            "validations": [
                {
                    "expression": "oldObject == null || int(object.data.size) >= int(oldObject.data.size)",
                    "messageExpression": "'size may not shrink from ' + oldObject.data.size + ' to ' + object.data.size",
                }
            ]
        },
        "immutable": {
            "validations": [
                {
                    "expression": "request.operation != 'UPDATE' || object.data.?locked == oldObject.data.?locked",
                    "message": "locked is immutable",
                }
            ]
        },
        "delete-guard": {
            "validations": [
                {
                    "expression": "request.operation != 'DELETE' || !has(oldObject.metadata.labels) || oldObject.metadata.labels.?protected.orValue('') != 'true'",
                    "messageExpression": "'cannot delete ' + oldObject.metadata.name",
                }
            ]
        },
        "request": {
            "validations": [
                {
                    "expression": "request.namespace != 'nothing'",
                }
            ],
            "auditAnnotations": [
                {
                    "key": "op",
                    "valueExpression": "request.operation + ' ' + request.kind.kind + ' ' + request.resource.resource + ' ' + request.name + ' ' + request.namespace",
                },
                {"key": "user", "valueExpression": "request.userInfo.username"},
                {"key": "dry", "valueExpression": "string(request.dryRun)"},
                {"key": "options", "valueExpression": "request.options.kind"},
                {"key": "object", "valueExpression": "object == null ? 'null' : object.metadata.name"},
            ],
        },
        "namespace-object": {
            "validations": [
                {
                    "expression": "namespaceObject.metadata.labels.?env.orValue('') != 'prod' || object == null || object.data.?size.orValue('0') != '9'",
                    "messageExpression": "'not in ' + namespaceObject.metadata.name",
                }
            ],
            "auditAnnotations": [
                {
                    "key": "ns",
                    "valueExpression": "namespaceObject.metadata.name + ':' + namespaceObject.status.phase",
                }
            ],
        },
    }
    for sname, spec in specs.items():
        case = r.next_id("ops")
        r.policies.append(vap(case, case, spec, [rules(["configmaps"], ops=["CREATE", "UPDATE", "DELETE"])]))
        r.policies.append(vapb(case, case, ("Deny", "Audit")))
        for ns in (r.ns_a, r.ns_b):
            base = configmap(f"{case}-{ns[-1]}", ns, case, {"size": "5", "locked": "a"}, protected="true")
            r.cases.append(
                Case(
                    f"{case}-{sname}-create-{ns[-1]}",
                    "CREATE",
                    configmap(f"{case}-c{ns[-1]}", ns, case, {"size": "9"}),
                )
            )
            r.cases.append(
                Case(f"{case}-{sname}-grow-{ns[-1]}", "UPDATE", existing=base, change=with_data(size="7"))
            )
            r.cases.append(
                Case(
                    f"{case}-{sname}-shrink-{ns[-1]}",
                    "UPDATE",
                    existing=configmap(f"{case}-s{ns[-1]}", ns, case, {"size": "5", "locked": "a"}),
                    change=with_data(size="2", locked="b"),
                )
            )
            r.cases.append(
                Case(
                    f"{case}-{sname}-delete-{ns[-1]}",
                    "DELETE",
                    existing=configmap(f"{case}-d{ns[-1]}", ns, case, {"size": "5"}, protected="true"),
                )
            )
            r.cases.append(
                Case(
                    f"{case}-{sname}-delete-free-{ns[-1]}",
                    "DELETE",
                    existing=configmap(f"{case}-f{ns[-1]}", ns, case, {"size": "5"}),
                )
            )


def _scaled(stored: Obj) -> Obj:
    out = copy.deepcopy(stored)
    out["spec"]["replicas"] = out["spec"].get("replicas", 1) + 2
    return out


def _resized(stored: Obj) -> Obj:
    out = copy.deepcopy(stored)
    out["spec"]["size"] = out["spec"].get("size", 0) * 3 + 1
    out["spec"]["parts"] = [*out["spec"].get("parts", []), {"name": "extra", "count": 1}]
    return out


def _retagged(stored: Obj) -> Obj:
    out = copy.deepcopy(stored)
    out["spec"]["containers"][0]["image"] = "nginx:1.29"
    return out


UPDATES: Mapping[str, Callable[[Obj], Obj]] = {"deploy": _scaled, "widget": _resized, "pod": _retagged}


def kinds_family(r: Round) -> None:
    """Policies on Deployments, Pods (the API server's defaults are in the object), custom Widgets and
    Namespaces."""
    cases: list[tuple[str, Sequence[Obj], Obj, list[Obj]]] = [
        (
            "deploy",
            [rules(["deployments"], groups=["apps"])],
            {
                "validations": [
                    {
                        "expression": "object.spec.replicas <= 3",
                        "messageExpression": "'replicas ' + string(object.spec.replicas)",
                    },
                    {
                        "expression": "object.spec.template.spec.containers.all(c, c.image.contains(':'))",
                        "message": "images need a tag",
                    },
                    {
                        "expression": "object.spec.template.spec.containers.all(c, c.imagePullPolicy == 'IfNotPresent')",
                        "messageExpression": "'pull policies: ' + object.spec.template.spec.containers.map(c, c.imagePullPolicy).join(',')",
                    },
                    {"expression": "object.spec.strategy.type == 'RollingUpdate'", "message": "strategy"},
                ]
            },
            [
                deployment("d1", r.ns_a, "", [container("app", "nginx:1.27")]),
                deployment("d2", r.ns_a, "", [container("app", "nginx")], replicas=5),
                deployment(
                    "d3",
                    r.ns_b,
                    "",
                    [
                        container("app", "nginx:1.27", imagePullPolicy="Always"),
                        container("side", "busybox:1"),
                    ],
                ),
            ],
        ),
        (
            "pod",
            [rules(["pods"])],
            {
                "validations": [
                    {
                        "expression": "object.spec.containers.all(c, has(c.securityContext) && c.securityContext.?runAsNonRoot.orValue(false))",
                        "messageExpression": "'containers run as root: ' + object.spec.containers.filter(c, !has(c.securityContext)).map(c, c.name).join(', ')",
                    },
                    {"expression": "object.spec.restartPolicy == 'Always'", "message": "restartPolicy"},
                    {"expression": "object.spec.dnsPolicy == 'ClusterFirst'", "message": "dnsPolicy"},
                    {
                        "expression": "object.spec.containers.all(c, c.terminationMessagePath == '/dev/termination-log')",
                        "message": "terminationMessagePath",
                    },
                ]
            },
            [
                pod("p1", r.ns_a, "", [container("app", "nginx:1", securityContext={"runAsNonRoot": True})]),
                pod("p2", r.ns_a, "", [container("app", "nginx:1"), container("b", "busybox")]),
                pod("p3", r.ns_b, "", [container("app", "nginx:1", securityContext={"runAsNonRoot": False})]),
            ],
        ),
        (
            "widget",
            [rules(["widgets"], groups=[GROUP])],
            {
                "validations": [
                    {
                        "expression": "object.spec.size <= 10",
                        "messageExpression": "'size ' + string(object.spec.size)",
                    },
                    {
                        "expression": "!has(object.spec.parts) || object.spec.parts.all(p, p.count > 0)",
                        "message": "empty part",
                    },
                    {
                        "expression": "object.spec.?color.orValue('red') in ['red', 'blue']",
                        "messageExpression": "'color ' + object.spec.?color.orValue('?')",
                    },
                ]
            },
            [
                widget("w1", r.ns_a, "", {"size": 3, "color": "red"}),
                widget("w2", r.ns_a, "", {"size": 30, "parts": [{"name": "a", "count": 0}]}),
                widget("w3", r.ns_b, "", {"size": 1, "color": "green", "tags": ["x"]}),
            ],
        ),
        (
            "namespace",
            [rules(["namespaces"])],
            {
                "validations": [
                    {
                        "expression": "has(object.metadata.labels) && 'owner' in object.metadata.labels",
                        "messageExpression": "'namespace ' + object.metadata.name + ' has no owner'",
                    },
                    {
                        "expression": "object.metadata.labels['kubernetes.io/metadata.name'] == object.metadata.name",
                        "message": "defaulted label",
                    },
                ],
                "auditAnnotations": [
                    {"key": "ns", "valueExpression": "namespaceObject == null ? 'none' : 'some'"}
                ],
            },
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n1"}},
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": "n2", "labels": {"owner": "me"}},
                },
            ],
        ),
    ]
    for kname, resource_rules, spec, objects in cases:
        for policy in ("Fail", "Ignore"):
            case = r.next_id("kinds")
            body = {**copy.deepcopy(spec), "failurePolicy": policy}
            r.policies.append(vap(case, case, body, resource_rules))
            r.policies.append(vapb(case, case, ("Deny", "Audit")))
            for index, template in enumerate(objects):
                obj = labelled(template, case)
                obj["metadata"]["name"] = f"{case}-{index}"
                r.cases.append(Case(f"{case}-{kname}-{index}", "CREATE", obj))
                if kname in UPDATES:
                    existing = copy.deepcopy(obj)
                    existing["metadata"]["name"] = f"{case}-{index}-u"
                    r.cases.append(
                        Case(
                            f"{case}-{kname}-{index}-update",
                            "UPDATE",
                            existing=existing,
                            change=UPDATES[kname],
                        )
                    )


# -- mutating families -----------------------------------------------------------------------------------
JSON_PATCHES: Sequence[tuple[str, str]] = (
    ("add-label", "[JSONPatch{op: 'add', path: '/metadata/labels/added', value: 'yes'}]"),
    ("add-annotations", "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'a': 'b'}}]"),
    ("replace-data", "[JSONPatch{op: 'replace', path: '/data/size', value: '100'}]"),
    (
        "add-label-escaped",
        "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('example.com/role'), value: 'x'}]",
    ),
    ("remove-data", "[JSONPatch{op: 'remove', path: '/data/size'}]"),
    ("remove-missing", "[JSONPatch{op: 'remove', path: '/data/missing'}]"),
    (
        "test-fails",
        "[JSONPatch{op: 'test', path: '/data/size', value: 'nope'}, JSONPatch{op: 'add', path: '/data/x', value: 'y'}]",
    ),
    (
        "test-passes",
        "[JSONPatch{op: 'test', path: '/data/size', value: '3'}, JSONPatch{op: 'add', path: '/data/x', value: 'y'}]",
    ),
    ("copy", "[JSONPatch{op: 'copy', from: '/data/size', path: '/data/copied'}]"),
    ("move", "[JSONPatch{op: 'move', from: '/data/size', path: '/data/moved'}]"),
    ("bad-path", "[JSONPatch{op: 'add', path: '/nothing/here/x', value: 'y'}]"),
    ("runtime-error", "[JSONPatch{op: 'add', path: '/data/x', value: string(1/0)}]"),
    (
        "conditional",
        "object.data.size == '3' ? [JSONPatch{op: 'add', path: '/data/three', value: 'true'}] : []",
    ),
    (
        "name-to-data",
        "[JSONPatch{op: 'add', path: '/data/name', value: object.metadata.name + '/' + namespaceObject.metadata.name}]",
    ),
    ("bad-type", "[JSONPatch{op: 'add', path: '/data/n', value: 1}]"),
)


def json_patch_family(r: Round) -> None:
    for (pname, expression), policy in itertools.product(JSON_PATCHES, ("Fail", "Ignore")):
        case = r.next_id("jsonpatch")
        spec = {
            "failurePolicy": policy,
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}],
        }
        r.policies.append(mutating(case, case, spec))
        r.policies.append(mapb(case, case))
        r.cases.append(Case(f"{case}-{pname}", "CREATE", configmap(case, r.ns_a, case, {"size": "3"})))
        r.cases.append(
            Case(
                f"{case}-{pname}-update",
                "UPDATE",
                existing=configmap(f"{case}-u", r.ns_a, case, {"size": "3"}),
                change=with_data(size="4"),
            )
        )


APPLY: Sequence[tuple[str, Sequence[Obj], str, list[Obj]]] = ()


def apply_configuration_family(r: Round) -> None:
    """ApplyConfiguration on ConfigMaps, Deployments, Pods and custom Widgets: maps, lists with merge keys
    (containers, env, ports by name; a CRD's list-type map), atomic lists, the API server's defaults after."""
    families: list[tuple[str, Sequence[Obj], list[str], list[Obj]]] = [
        (
            "cm",
            [rules(["configmaps"])],
            [
                "Object{data: {'added': 'yes'}}",
                "Object{metadata: Object.metadata{labels: {'mutated': 'true'}}}",
                "Object{metadata: Object.metadata{annotations: {'size': object.data.?size.orValue('none')}}}",
                "Object{data: {'size': string(int(object.data.size) * 2)}}",
                "Object{data: {'bad': 1/0 == 1 ? 'a' : 'b'}}",
            ],
            [configmap("c", r.ns_a, "", {"size": "3"}), configmap("c", r.ns_b, "", {"other": "x"})],
        ),
        (
            "deploy",
            [rules(["deployments"], groups=["apps"])],
            [
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'sidecar', image: 'busybox:1.36'}]}}}}",
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'app', image: 'nginx:1.28'}]}}}}",
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'app', env: [Object.spec.template.spec.containers.env{name: 'MODE', value: 'prod'}]}]}}}}",
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: [Object.spec.template.spec.containers{name: 'app', ports: [Object.spec.template.spec.containers.ports{containerPort: 8080, name: 'http'}]}]}}}}",
                "Object{spec: Object.spec{replicas: 2, template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {'mutated': 'yes'}}}}}",
                "Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{tolerations: [Object.spec.template.spec.tolerations{key: 'k', operator: 'Exists'}]}}}}",
            ],
            [
                deployment(
                    "d", r.ns_a, "", [container("app", "nginx:1.27", env=[{"name": "A", "value": "1"}])]
                ),
                deployment(
                    "d",
                    r.ns_b,
                    "",
                    [container("app", "nginx:1.27"), container("sidecar", "busybox:1.35")],
                    replicas=3,
                ),
            ],
        ),
        (
            "pod",
            [rules(["pods"])],
            [
                "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'sidecar', image: 'busybox:1.36', args: ['sleep', '1']}]}}",
                "Object{spec: Object.spec{initContainers: [Object.spec.initContainers{name: 'init', image: 'busybox:1.36'}]}}",
                "Object{spec: Object.spec{volumes: [Object.spec.volumes{name: 'scratch', emptyDir: Object.spec.volumes.emptyDir{}}]}}",
                "Object{spec: Object.spec{containers: [Object.spec.containers{name: 'app', securityContext: Object.spec.containers.securityContext{runAsNonRoot: true}}]}}",
                "Object{metadata: Object.metadata{labels: {'team': object.metadata.namespace}}}",
            ],
            [
                pod("p", r.ns_a, "", [container("app", "nginx:1.27")]),
                pod(
                    "p", r.ns_b, "", [container("app", "nginx"), container("other", "busybox:1", args=["a"])]
                ),
            ],
        ),
        (
            "widget",
            [rules(["widgets"], groups=[GROUP])],
            [
                "Object{spec: Object.spec{parts: [Object.spec.parts{name: 'bolt', count: 4}]}}",
                "Object{spec: Object.spec{parts: [Object.spec.parts{name: 'nut', finish: 'matte'}]}}",
                "Object{spec: Object.spec{tags: ['replaced']}}",
                "Object{spec: Object.spec{options: {'mode': 'fast'}}}",
                "Object{spec: Object.spec{size: object.spec.size + 1, color: 'blue'}}",
            ],
            [
                widget(
                    "w",
                    r.ns_a,
                    "",
                    {
                        "size": 1,
                        "parts": [{"name": "nut", "count": 2}],
                        "tags": ["a", "b"],
                        "options": {"x": "y"},
                    },
                ),
                widget("w", r.ns_b, "", {"size": 5}),
            ],
        ),
    ]
    for fname, resource_rules, expressions, objects in families:
        for index, expression in enumerate(expressions):
            for policy in ("Fail", "Ignore"):
                case = r.next_id("apply")
                spec = {
                    "failurePolicy": policy,
                    "mutations": [
                        {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}
                    ],
                }
                r.policies.append(mutating(case, case, spec, resource_rules))
                r.policies.append(mapb(case, case))
                for n, template in enumerate(objects):
                    obj = labelled(template, case)
                    obj["metadata"]["name"] = f"{case}-{n}"
                    r.cases.append(Case(f"{case}-{fname}{index}-{n}", "CREATE", obj))
                if fname == "cm":
                    r.cases.append(
                        Case(
                            f"{case}-{fname}{index}-update",
                            "UPDATE",
                            existing=configmap(f"{case}-u", r.ns_a, case, {"size": "5"}),
                            change=with_labels(changed="yes"),
                        )
                    )


def reinvocation_family(r: Round) -> None:
    """Reinvocation: a policy (IfNeeded) whose output depends on what a second one adds, whichever runs
    first (the API server's order of policies is its informer cache's: only outcomes that do not depend on
    it are compared), and a policy reinvoked by its own change; a validating policy sees the result."""
    count_keys = "Object{data: {'keys': object.data.map(k, k).filter(k, k != 'keys').sort().join(',')}}"
    add_b = "[JSONPatch{op: 'add', path: '/data/b', value: 'x'}]"
    increment = "[JSONPatch{op: 'add', path: '/data/n', value: string(int(object.data.?n.orValue('0')) + 1)}]"
    for second_policy in ("Never", "IfNeeded"):
        case = r.next_id("reinvoke")
        first = mutating(
            f"{case}-a",
            case,
            {
                "reinvocationPolicy": "IfNeeded",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": count_keys}}
                ],
            },
        )
        second = mutating(
            f"{case}-b",
            case,
            {
                "reinvocationPolicy": second_policy,
                "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": add_b}}],
            },
        )
        check = vap(
            f"{case}-check",
            case,
            {
                "validations": [
                    {
                        "expression": "object.data.?keys.orValue('') == 'b,size'",
                        "messageExpression": "'keys=' + object.data.?keys.orValue('-')",
                    },
                ]
            },
        )
        r.policies += [
            first,
            mapb(f"{case}-a", f"{case}-a"),
            second,
            mapb(f"{case}-b", f"{case}-b"),
            check,
            vapb(f"{case}-check", f"{case}-check", ("Warn",)),
        ]
        r.cases.append(
            Case(f"{case}-{second_policy}", "CREATE", configmap(case, r.ns_a, case, {"size": "1"}))
        )
        r.cases.append(
            Case(
                f"{case}-{second_policy}-update",
                "UPDATE",
                existing=configmap(f"{case}-u", r.ns_a, case, {"size": "1"}),
                change=with_data(size="2"),
            )
        )
    for policy in ("Never", "IfNeeded"):
        case = r.next_id("reinvoke")
        r.policies += [
            mutating(
                case,
                case,
                {
                    "reinvocationPolicy": policy,
                    "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": increment}}],
                },
            ),
            mapb(case, case),
        ]
        r.cases.append(Case(f"{case}-self-{policy}", "CREATE", configmap(case, r.ns_a, case, {"size": "1"})))
        r.cases.append(
            Case(f"{case}-self-{policy}-n", "CREATE", configmap(f"{case}-n", r.ns_a, case, {"n": "5"}))
        )


def mutating_extras_family(r: Round) -> None:
    """Mutating policies with parameters, variables, match conditions, several mutations, and a validating
    policy checking their result."""
    r.setup.append(
        configmap("mutate-params", r.ns_a, "params", {"team": "blue", "mode": "strict"}, tier="mutate")
    )
    specs: list[tuple[str, Obj, Obj]] = [
        (
            "params",
            {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{metadata: Object.metadata{labels: {'team': params.data.team}}}"
                        },
                    }
                ],
            },
            {"paramRef": {"name": "mutate-params", "namespace": r.ns_a, "parameterNotFoundAction": "Deny"}},
        ),
        (
            "params-missing",
            {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{metadata: Object.metadata{labels: {'team': params.data.team}}}"
                        },
                    }
                ],
            },
            {"paramRef": {"name": "nothing", "parameterNotFoundAction": "Deny"}},
        ),
        (
            "params-missing-allow",
            {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{metadata: Object.metadata{labels: {'team': params.data.team}}}"
                        },
                    }
                ],
            },
            {"paramRef": {"name": "nothing", "parameterNotFoundAction": "Allow"}},
        ),
        (
            "params-selector",
            {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "mutations": [
                    {
                        "patchType": "JSONPatch",
                        "jsonPatch": {
                            "expression": "[JSONPatch{op: 'add', path: '/data/' + params.metadata.name, value: params.data.mode}]"
                        },
                    }
                ],
            },
            {
                "paramRef": {
                    "selector": {"matchLabels": {"tier": "mutate"}},
                    "namespace": r.ns_a,
                    "parameterNotFoundAction": "Allow",
                }
            },
        ),
        (
            "variables",
            {
                "variables": [{"name": "size", "expression": "int(object.data.?size.orValue('0'))"}],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{data: {'doubled': string(variables.size * 2)}}"
                        },
                    }
                ],
            },
            {},
        ),
        (
            "match-conditions",
            {
                "matchConditions": [
                    {"name": "has-size", "expression": "has(object.data) && 'size' in object.data"}
                ],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'sized': 'yes'}}"},
                    }
                ],
            },
            {},
        ),
        (
            "match-condition-error",
            {
                "failurePolicy": "Fail",
                "matchConditions": [{"name": "explodes", "expression": "object.data.nothing == 'x'"}],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'never': 'yes'}}"},
                    }
                ],
            },
            {},
        ),
        (
            "match-condition-error-ignore",
            {
                "failurePolicy": "Ignore",
                "matchConditions": [{"name": "explodes", "expression": "object.data.nothing == 'x'"}],
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'never': 'yes'}}"},
                    }
                ],
            },
            {},
        ),
        (
            "several",
            {
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'one': '1'}}"},
                    },
                    {
                        "patchType": "JSONPatch",
                        "jsonPatch": {
                            "expression": "[JSONPatch{op: 'add', path: '/data/two', value: object.data.one + '2'}]"
                        },
                    },
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{data: {'three': object.data.two + '3'}}"
                        },
                    },
                ],
            },
            {},
        ),
        (
            "several-failing",
            {
                "failurePolicy": "Ignore",
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'one': '1'}}"},
                    },
                    {
                        "patchType": "JSONPatch",
                        "jsonPatch": {"expression": "[JSONPatch{op: 'remove', path: '/data/none'}]"},
                    },
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'three': '3'}}"},
                    },
                ],
            },
            {},
        ),
        (
            "binding-match",
            {
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {"expression": "Object{data: {'bound': 'yes'}}"},
                    }
                ],
            },
            {"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}},
        ),
        (
            "authorizer-free-user",
            {
                "mutations": [
                    {
                        "patchType": "ApplyConfiguration",
                        "applyConfiguration": {
                            "expression": "Object{metadata: Object.metadata{annotations: {'by': request.userInfo.username}}}"
                        },
                    }
                ],
            },
            {},
        ),
    ]
    for sname, spec, binding in specs:
        case = r.next_id("mutx")
        r.policies.append(mutating(case, case, spec))
        r.policies.append(mapb(case, case, **binding))
        check = vap(
            f"{case}-v",
            case,
            {
                "validations": [
                    {"expression": "!has(object.data) || !('never' in object.data)", "message": "never"}
                ],
                "auditAnnotations": [
                    {
                        "key": "keys",
                        "valueExpression": "has(object.data) ? object.data.map(k, k).sort().join(',') : 'none'",
                    }
                ],
            },
        )
        r.policies += [check, vapb(f"{case}-v", f"{case}-v", ("Audit",))]
        for ns in (r.ns_a, r.ns_b):
            r.cases.append(
                Case(
                    f"{case}-{sname}-{ns[-1]}",
                    "CREATE",
                    configmap(f"{case}-{ns[-1]}", ns, case, {"size": "4"}),
                )
            )
            r.cases.append(
                Case(f"{case}-{sname}-{ns[-1]}-bare", "CREATE", configmap(f"{case}-{ns[-1]}-bare", ns, case))
            )


# -- policies the API server refuses ---------------------------------------------------------------------
def refused_policies(r: Round) -> list[Obj]:
    """Documents the API server refuses on create (their errors compared word for word)."""
    case = "refused"
    bad: list[Obj] = [
        vap(f"{r.name}-syntax", case, {"validations": [{"expression": "object.data.size <"}]}),
        vap(f"{r.name}-undeclared", case, {"validations": [{"expression": "nothing.here == 1"}]}),
        vap(f"{r.name}-not-bool", case, {"validations": [{"expression": "'a string'"}]}),
        vap(
            f"{r.name}-message-type",
            case,
            {"validations": [{"expression": "true", "messageExpression": "1"}]},
        ),
        vap(f"{r.name}-no-validations", case, {}),
        vap(
            f"{r.name}-bad-variable",
            case,
            {"variables": [{"name": "v", "expression": "object.("}], "validations": [{"expression": "true"}]},
        ),
        vap(
            f"{r.name}-variable-name",
            case,
            {"variables": [{"name": "1bad", "expression": "1"}], "validations": [{"expression": "true"}]},
        ),
        vap(
            f"{r.name}-match-condition",
            case,
            {"matchConditions": [{"name": "c", "expression": "1"}], "validations": [{"expression": "true"}]},
        ),
        vap(
            f"{r.name}-audit-key",
            case,
            {
                "validations": [{"expression": "true"}],
                "auditAnnotations": [{"key": "Bad Key!", "valueExpression": "'x'"}],
            },
        ),
        vap(
            f"{r.name}-failure-policy",
            case,
            {"failurePolicy": "Maybe", "validations": [{"expression": "true"}]},
        ),
        vap(f"{r.name}-reason", case, {"validations": [{"expression": "true", "reason": "Teapot"}]}),
        vap(f"{r.name}-params-undeclared", case, {"validations": [{"expression": "params.x == 1"}]}),
        vap(f"{r.name}-authorizer-type", case, {"validations": [{"expression": "authorizer"}]}),
        vap(f"{r.name}-math", case, {"validations": [{"expression": "math.greatest(1, 2) == 2"}]}),
        vapb(f"{r.name}-no-actions", "x", ()),
        vapb(f"{r.name}-deny-warn", "x", ("Deny", "Warn")),
        vapb(f"{r.name}-bad-action", "x", ("Shout",)),
        vapb(
            f"{r.name}-ref-both",
            "x",
            ("Deny",),
            paramRef={"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"},
        ),
        vapb(f"{r.name}-ref-action", "x", ("Deny",), paramRef={"name": "a"}),
        vapb(f"{r.name}-no-policy-name", "", ("Deny",)),
        mutating(f"{r.name}-no-mutations", case, {}),
        mutating(f"{r.name}-bad-patch-type", case, {"mutations": [{"patchType": "Merge"}]}),
        mutating(
            f"{r.name}-jsonpatch-type",
            case,
            {"mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "'not a list'"}}]},
        ),
        mutating(
            f"{r.name}-apply-syntax",
            case,
            {
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{"}}
                ]
            },
        ),
        mutating(
            f"{r.name}-apply-not-object",
            case,
            {"mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "'x'"}}]},
        ),
        mutating(
            f"{r.name}-reinvocation",
            case,
            {
                "reinvocationPolicy": "Sometimes",
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}
                ],
            },
        ),
        mapb(f"{r.name}-map-no-policy", ""),
        {
            **vap(f"{r.name}-unknown-field", case, {"validations": [{"expression": "true"}]}),
            "spec": {"validations": [{"expression": "true"}], "surprise": 1},
        },
        {
            "apiVersion": AR,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": f"{r.name}-bad-rule"},
            "spec": {
                "validations": [{"expression": "true"}],
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["EXPLODE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
            },
        },
        {
            "apiVersion": AR,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": f"{r.name}-no-match"},
            "spec": {
                "validations": [{"expression": "true"}],
            },
        },
    ]
    return bad


FAMILIES: Mapping[str, Sequence[Callable[[Round], None]]] = {
    "v1": (
        actions_family,
        several_validations_family,
        failures_family,
        match_conditions_family,
        variables_family,
    ),
    "v2": (params_family, params_cluster_scoped_family, matching_family, operations_family, kinds_family),
    "m1": (json_patch_family, apply_configuration_family, reinvocation_family, mutating_extras_family),
}


def rounds() -> list[Round]:
    out = []
    for name, families in FAMILIES.items():
        r = Round(f"ap{name}")
        r.namespaces = [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": r.ns_a, "labels": {"env": "prod", "tier": "web"}},
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": r.ns_b, "labels": {"env": "dev"}}},
        ]
        for family in families:
            family(r)
        out.append(r)
    vap = vap_round()
    vap.skip_invalid = True
    out.append(vap)  # last: its policies read parameters of the constraint CRDs it installs
    return out


def count(found: Iterable[Round]) -> int:
    return sum(len(r.cases) for r in found)


# -- the policies `celkeeper vap` generates --------------------------------------------------------------
def vap_round() -> Round:
    """The policies and bindings `celkeeper vap examples/` writes (Gatekeeper's transform of the examples'
    templates and constraints), their constraints as parameters (on the constraint CRDs), and every object
    of the examples' suites. The generated bindings match every resource: an objectSelector for their
    example's label is added to each (their policies are as generated), and each suite's objects carry the
    label of their example, so that an object meets only its own example's policies (with several denying
    policies the one the API server reports depends on the order of its informer cache)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from celkeeper.crds import constraint_crd
    from tests.vap import cases as vap_cases
    from tests.vap.kube import example_cases, namespaces_of

    r = Round("apvap")
    constraints = vap_cases.example_constraints()
    folder_of = {c.name: Path(c.file).parent.name for c in constraints}
    proc = subprocess.run(
        [sys.executable, "-m", "celkeeper", "vap", str(vap_cases.EXAMPLES), "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    generated = json.loads(proc.stdout)["items"]
    for doc in generated:
        if doc["kind"] == "ValidatingAdmissionPolicyBinding":
            selector = doc["spec"].setdefault("matchResources", {}).setdefault("objectSelector", {})
            selector.setdefault("matchLabels", {})[CASE_LABEL] = (
                f"vap-{folder_of[doc['spec']['paramRef']['name']]}"
            )
    r.policies = generated
    r.crds = [constraint_crd(dict(t.data)) for t in vap_cases.example_templates()]
    r.setup = [dict(c.data) for c in constraints]
    suite_cases, _ = example_cases()
    names = {n: ns for n, ns in namespaces_of(suite_cases).items() if n not in ("default", "kube-system")}
    r.namespaces = [*names.values(), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": r.ns_a}}]
    for number, case in enumerate(suite_cases):
        if case.object.get("kind") == "Service":
            # a Service's registry allocates its cluster IPs and node ports between mutating and validating
            # admission, and warns of deprecated fields: what the validating policies see and what the API
            # server answers depends on them, and celkeeper does not run the registry offline
            # (docs/known-issues.md, "Offline, the object is admission's")
            r.left_out.append(f"apvap-{case.id}-{number}")
            continue
        obj = labelled(case.object, f"vap-{case.folder}")
        meta = obj["metadata"]
        if obj.get("kind") != "Namespace":
            meta.setdefault("namespace", "default")
        meta["name"] = f"{meta.get('name', 'x')}-{number}"
        r.cases.append(Case(f"apvap-{case.id}-{number}", "CREATE", obj))
    return r
