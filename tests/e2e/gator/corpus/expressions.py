"""Expression families: one template per expression (a single validation without message, so the
message is Kubernetes' `failed expression: ...` fallback or the evaluation error), reviewed with
several constraints and objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.e2e.gator.corpus import objects as o
from tests.e2e.gator.corpus.model import (
    CorpusCase,
    CorpusTest,
    Family,
    Names,
    constraint,
    kind_name,
    template,
)

PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "integer"},
        "flag": {"type": "boolean"},
        "nested": {"type": "object", "properties": {"deep": {"type": "string"}}},
    },
}


def expression_family(
    name: str,
    prefix: str,
    expressions: Sequence[str],
    cases: Mapping[str, Mapping[str, Any]],
    *,
    constraints: Mapping[str, Mapping[str, Any]] | None = None,
    schema: Mapping[str, Any] | None = None,
    failure_policies: Sequence[str | None] = (None,),
    doc: str = "",
) -> Family:
    """Every expression x failure policy x constraint (`constraints`: name -> keyword arguments of
    model.constraint) reviewing every case object."""
    names = Names()
    tests = []
    index = 0
    for expression in expressions:
        for policy in failure_policies:
            kind = kind_name(prefix, index)
            index += 1
            tmpl = template(kind, [{"expression": expression}], failure_policy=policy, schema=schema)
            for cname, kwargs in (constraints or {"c": {}}).items():
                tests.append(
                    CorpusTest(
                        name=names(f"{kind}-{cname}"),
                        template=tmpl,
                        constraint=constraint(kind, cname, **kwargs),
                        cases=tuple(CorpusCase(case, obj) for case, obj in cases.items()),
                    )
                )
    return Family(name, tuple(tests), doc)


# -- params: constraints without parameters (variables.params is null) ----------------------------
PARAMS_EXPRESSIONS = [
    "has(variables.params.labels)",
    "!has(variables.params.labels)",
    "variables.params == null",
    "variables.params != null",
    "variables.params.?labels.orValue([]).size() == 0",
    "variables.params.?labels.hasValue()",
    "!has(variables.params.labels) || variables.params.labels.size() > 0",
    "'labels' in variables.params",
    "variables.params['labels'].size() > 0",
    "variables.params.labels.size() > 0",
    "variables.params.?labels[?0].orValue('none') != ''",
    "variables.params.?limit.orValue(3) > 2",
    "size(variables.params) > 0",
    "variables.params.exists(k, k == 'labels')",
    "variables.params.?labels.orValue([]).all(l, has(object.metadata.labels) && l in object.metadata.labels)",
    "has(variables.params.labels) && "
    "variables.params.labels.all(l, l in object.metadata.?labels.orValue({}))",
    "variables.params.?nested.?deep.orValue('x') == 'x'",
    "type(variables.params) == null_type",
    "type(variables.params) == map",
    "variables.params.limit > 2",
    "variables.params.?flag.orValue(false) == false",
    "!variables.params.?flag.orValue(false)",
    "variables.params.?labels.optMap(l, l.size()).orValue(0) >= 0",
    "has(variables.params.nested.deep)",
    "variables.params.?nested.deep == 'y'",
    "variables.params.labels == null",
    "variables.params.?labels == optional.none()",
    "[variables.params].exists(p, p == null)",
]

PARAMS_CONSTRAINTS: dict[str, dict[str, Any]] = {
    "no-parameters": {},
    "empty-parameters": {"parameters": {}},
    "full-parameters": {
        "parameters": {"labels": ["owner"], "limit": 5, "flag": True, "nested": {"deep": "y"}}
    },
    "empty-labels": {"parameters": {"labels": []}},
}


def params_family() -> Family:
    pods = o.realistic_pods()
    cases = {
        "labelled-pod": pods["labelled-pod"],
        "bare-pod": pods["bare-pod"],
        "namespace": o.namespace("shop", {"owner": "me"}),
    }
    return expression_family(
        "params",
        "KParams",
        PARAMS_EXPRESSIONS,
        cases,
        constraints=PARAMS_CONSTRAINTS,
        schema=PARAMS_SCHEMA,
        doc="variables.params null, empty and set, with has(), ?., orValue, in, indexing",
    )


# -- fields: absent, null and empty values of every JSON type ----------------------------------------
FIELD_EXPRESSIONS = [
    "has(object.spec.value)",
    "object.spec.value == null",
    "object.spec.?value.hasValue()",
    "object.spec.?value.orValue('default') == 'default'",
    "object.spec.value != ''",
    "object.spec.value == 0",
    "object.spec.value == 0.0",
    "object.spec.value == false",
    "size(object.spec.value) > 0",
    "!object.spec.value",
    "object.spec.value || false",
    "object.spec.value && true",
    "object.spec.value > 0",
    "type(object.spec.value) == string",
    "string(object.spec.value) != ''",
    "object.spec.value in [0, '', false, null]",
    "has(object.spec.value.a)",
    "object.spec.value.?a.orValue(0) == 0",
    "object.spec.?value.?a.hasValue()",
    "object.spec.value[0] == 1",
    "object.spec.?value[?0].hasValue()",
    "int(object.spec.value) >= 0",
    "object.spec.value.size() == 0",
    "optional.ofNonZeroValue(object.spec.value).hasValue()",
    "has(object.spec) && !has(object.spec.value)",
    "object.spec.value == []",
    "object.spec.value == {}",
    "'a' in object.spec.value",
]


def fields_family() -> Family:
    return expression_family(
        "fields",
        "KField",
        FIELD_EXPRESSIONS,
        o.widgets(),
        doc="absent, null and empty fields of every JSON type",
    )


# -- optional selection and indexing on null, maps and lists ---------------------------------------
OPTIONAL_EXPRESSIONS = [
    "dyn(null).?x.hasValue()",
    "dyn(null).?x.orValue(1) == 1",
    "{'a': 1}.?a.orValue(0) == 1",
    "{'a': 1}.?b.orValue(0) == 0",
    "[1, 2][?5].orValue(0) == 0",
    "[1, 2][?1].orValue(0) == 2",
    "{'a': 1}[?'b'].hasValue()",
    "object.metadata.?labels[?'app'].orValue('') == 'web'",
    "object.?spec.?containers[?0].?name.orValue('') != ''",
    "object.spec.?nodeSelector.orValue({}).size() == 0",
    "optional.none().orValue(3) == 3",
    "optional.of(null).hasValue()",
    "optional.ofNonZeroValue('').hasValue()",
    "optional.ofNonZeroValue([]).hasValue()",
    "optional.ofNonZeroValue(0).hasValue()",
    "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()",
    "optional.ofNonZeroValue(timestamp('1970-01-01T00:00:00Z')).hasValue()",
    "optional.ofNonZeroValue(duration('0s')).hasValue()",
    "[?optional.none(), ?optional.of(1)].size() == 1",
    "{?'a': optional.none()}.size() == 0",
    "object.metadata.labels.?missing.hasValue()",
    "object.metadata.?annotations.?x.hasValue()",
    "dyn(object.metadata).?labels.?app.hasValue()",
    "object.spec.containers[?10].hasValue()",
    "object.spec.containers.map(c, c.?securityContext.?privileged.orValue(false)).exists(p, p)",
    "object.metadata.?labels.?app.orValue('') == object.metadata.?labels.?tier.orValue('')",
    "object.?status.?phase.orValue('Pending') == 'Pending'",
    "object.spec.?hostNetwork.orValue(false) == false",
    "object.spec.containers.all(c, c.?resources.?limits.?memory.hasValue())",
    "object.metadata.?labels.orValue({}).?app.value() == 'web'",
    "optional.none().value() == 1",
    "dyn(null)[?'x'].hasValue()",
]


def optional_family() -> Family:
    return expression_family(
        "optional",
        "KOpt",
        OPTIONAL_EXPRESSIONS,
        o.realistic_pods(),
        doc="optional selection and indexing on null, maps and lists",
    )


# -- runtime errors of every kind ------------------------------------------------------------------
ZERO = "(size(object.metadata.name) - size(object.metadata.name))"
RUNTIME_ERROR_EXPRESSIONS = [
    f"1 / {ZERO} == 0",
    f"10 % {ZERO} == 0",
    f"1u / uint({ZERO}) == 0u",
    f"1.0 / double({ZERO}) > 0.0",
    "object.metadata.labels['missing'] == 'x'",
    "object.metadata.labels.missing == 'x'",
    "object.metadata.missing.deeper == 'x'",
    "{'a': 1}['b'] == 1",
    "9223372036854775807 + size(object.metadata.name) > 0",
    "-9223372036854775807 - 1 - size(object.metadata.name) < 0",
    "9223372036854775807 * (size(object.metadata.name) + 1) > 0",
    "uint(-1 * size(object.metadata.name)) > 0u",
    "int(18446744073709551615u - uint(size(object.metadata.name))) > 0",
    "int('abc' + object.metadata.name) > 0",
    "double('x' + object.metadata.name) > 0.0",
    "duration(object.metadata.name) > duration('1s')",
    "timestamp(object.metadata.name) > timestamp('2020-01-01T00:00:00Z')",
    "bool(object.metadata.name)",
    "dyn(object.metadata.name) + 1 == 2",
    "object.metadata.name + dyn(1) == ''",
    "object.metadata.name.matches(object.metadata.annotations['bad-pattern'])",
    "object.metadata.name.matches(object.metadata.annotations.pattern)",
    "object.spec.containers[10].name == ''",
    "object.spec.containers[-1].name == ''",
    "quantity(object.metadata.name).isInteger()",
    "url(object.metadata.name).getHost() == ''",
    "ip(object.metadata.name).family() == 4",
    "cidr(object.metadata.name).prefixLength() > 0",
    "semver(object.metadata.name).major() > 0",
    "object.metadata.name.substring(10, 5) == ''",
    "object.metadata.name.charAt(1000) == ''",
    "object.spec.containers.map(c, c.name).filter(n, n == 'nope').min() == ''",
    "object.metadata.name.split('-')[9] == ''",
    "object.spec.containers[0].ports[0].containerPort / 0 == 0",
    "int(object.metadata.annotations.n) / 0 == 0",
    "object.metadata.labels.app.size() / (size(object.metadata.labels) - size(object.metadata.labels)) == 0",
    "object.spec.containers.all(c, c.securityContext.privileged == false)",
    "lists.range(size(object.metadata.name)).map(i, 10 / (i - 1)).size() > 0",
]


def runtime_errors_family() -> Family:
    pods = o.realistic_pods()
    return expression_family(
        "runtime-errors",
        "KErr",
        RUNTIME_ERROR_EXPRESSIONS,
        {"labelled-pod": pods["labelled-pod"], "privileged-pod": pods["privileged-pod"]},
        failure_policies=(None, "Fail", "Ignore"),
        doc="runtime errors of every kind and their texts, under the default, Fail and Ignore",
    )


# -- deeply nested comprehensions over realistic Pods --------------------------------------------------
COMPREHENSIONS = [
    # four levels, the shape of gatekeeper-library's checks over containers x ports
    "object.spec.containers.all(c, c.ports.all(p, object.spec.containers.all(d, "
    "d.ports.all(q, c.name == d.name || p.containerPort != q.containerPort))))",
    "object.spec.containers.all(c, c.env.all(e, e.name.split('_').all(part, "
    "part.size() > 0 && part.split('').all(ch, ch != ' '))))",
    "object.spec.containers.all(c, object.spec.containers.exists_one(d, d.name == c.name))",
    "object.spec.containers.map(c, c.name).all(n, object.spec.containers.map(d, d.name)"
    ".filter(m, m == n).size() == 1)",
    "object.spec.containers.map(c, c.ports.map(p, p.containerPort)).flatten().all(p, p < 9000)",
    "object.spec.containers.exists(c, c.?securityContext.?privileged.orValue(false))",
    "!object.spec.containers.exists(c, c.env.exists(e, e.value.contains('secret')))",
    "object.spec.containers.all(c, c.resources.limits.all(k, k in c.resources.requests))",
    "object.spec.containers.all(c, c.volumeMounts.all(m, object.spec.?volumes.orValue([])"
    ".exists(v, v.name == m.name)))",
    "object.spec.containers.filter(c, c.image.endsWith(':latest')).size() == 0",
    "object.spec.containers.all(i, c, object.spec.containers.all(j, d, i == j || c.name != d.name))",
    "object.spec.containers.transformList(i, c, c.name).size() == size(object.spec.containers)",
    "object.metadata.labels.transformMap(k, v, v.size()).all(k, object.metadata.labels[k].size() >= 0)",
    "object.spec.containers.all(c, c.ports.all(p, c.env.all(e, c.volumeMounts.all(m, "
    "p.containerPort > 0 && e.name != '' && m.mountPath.startsWith('/')))))",
    "object.spec.containers.map(c, c.name).distinct().size() == size(object.spec.containers)",
]


def comprehensions_family() -> Family:
    pods = o.realistic_pods()
    cases = {
        "labelled-pod": pods["labelled-pod"],
        "privileged-pod": pods["privileged-pod"],
        "pod-10-containers": o.big_pod(10),
        "pod-100-containers": o.big_pod(100),
    }
    return expression_family(
        "comprehensions",
        "KComp",
        COMPREHENSIONS,
        cases,
        doc="deeply nested comprehensions (four levels) over realistic Pods, up to 100 containers",
    )
