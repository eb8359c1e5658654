"""Template-shape families: messages and messageExpressions, compile errors in every part, the keys
of the CEL source (matchCondition vs unknown keys), Kubernetes libraries in variables and messages."""

from __future__ import annotations

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

FAILS = "object.metadata.name == 'never-this-name'"  # false for every object here


def _tests(
    prefix: str, templates: list[tuple[str, dict[str, Any]]], cases: dict[str, dict[str, Any]]
) -> tuple[CorpusTest, ...]:
    names = Names()
    out = []
    for i, (label, tmpl) in enumerate(templates):
        kind = tmpl["spec"]["crd"]["spec"]["names"]["kind"]
        out.append(
            CorpusTest(
                name=names(f"{prefix}{i:03d}-{label}"),
                template=tmpl,
                constraint=constraint(kind, "c"),
                cases=tuple(CorpusCase(name, obj) for name, obj in cases.items()),
            )
        )
    return tuple(out)


def _cases() -> dict[str, dict[str, Any]]:
    pods = o.realistic_pods()
    return {"labelled-pod": pods["labelled-pod"], "bare-pod": pods["bare-pod"]}


# -- messages -----------------------------------------------------------------------------------------
MESSAGE_EXPRESSIONS = [
    "'name is ' + object.metadata.name",
    "1",
    "true",
    "object.metadata.name",
    "string(object.metadata.name)",
    "null",
    "''",
    "'   '",
    "'first line\\nsecond line'",
    "'  padded  '",
    "'ends with a newline\\n'",
    "object.metadata.annotations.long",
    "string(object.metadata.?annotations.?long.orValue('short'))",
    "'%s has %d containers'.format([object.metadata.name, size(object.spec.containers)])",
    "string(1 / (size(object.metadata.name) - size(object.metadata.name)))",
    "'label ' + object.metadata.labels['missing']",
    "'label ' + string(object.metadata.labels.missing)",
    "'a' +",
    "undefined_function()",
    "object.metadata.name + 1",
    "dyn('dyn string')",
    "'caf\\u00e9 \\u2713'",
    "'tab\\there'",
    "'\\r'",
    "object.spec.containers.map(c, c.name).join(', ')",
    "'" + "y" * 5120 + "'",
    "'" + "y" * 5121 + "'",
    "'" + "\\u00e9" * 2560 + "'",
    "'" + "\\u00e9" * 2561 + "'",
    "variables.params == null ? 'no params' : 'params'",
]
MESSAGES: dict[str, str | None] = {"none": None, "static": "  static message  ", "blank": "   "}


def messages_family() -> Family:
    templates = []
    index = 0
    for expr in MESSAGE_EXPRESSIONS:
        for label, message in MESSAGES.items():
            validation: dict[str, Any] = {"expression": FAILS, "messageExpression": expr}
            if message is not None:
                validation["message"] = message
            templates.append((f"msg-{label}", template(kind_name("KMsg", index), [validation])))
            index += 1
    for label, message in MESSAGES.items():  # no messageExpression at all
        validation = {"expression": FAILS}
        if message is not None:
            validation["message"] = message
        templates.append((f"plain-{label}", template(kind_name("KMsg", index), [validation])))
        index += 1
    return Family(
        "messages",
        _tests("m", templates, _cases()),
        "messageExpression of every result type, empty, blank, multi-line, long, erroring, not compiling",
    )


# -- compile errors in each part, under Fail, Ignore and the default ----------------------------------
BROKEN = {
    "syntax": "object.metadata.name ==",
    "undeclared": "foo.bar == 1",
    "no-overload": "1 + 'a' == 'b'",
    "not-bool": "object.metadata.name",
    "string-result": "'text'",
    "int-result": "1 + 1",
    "bad-literal": "duration('forever') > duration('1s')",
    "bad-regex-literal": "object.metadata.name.matches('(')",
    "no-cel-bind": "cel.bind(x, 1, x == 1)",
    "no-math": "math.greatest(1, 2) == 2",
    "no-base64": "base64.encode(b'a') == 'YQ=='",
    "authorizer": "authorizer.group('').resource('pods').check('get').allowed()",
    "reverse-v3": "'abc'.reverse() == 'cba'",
    # found by cel-go planning the program (OptOptimize): conversions of constants, find()'s pattern
    "conversion-literal": "int('x') == 1",
    "uint-overflow-literal": "uint(-1) == 1u",
    "find-regex-literal": "object.metadata.name.find('[') == ''",
    # Kubernetes' typed variables: request has no uid; null has no fields
    "request-uid": "request.uid == ''",
    "null-select": "null.x == 1",
}


def compile_errors_family() -> Family:
    templates = []
    index = 0
    for policy in (None, "Fail", "Ignore"):
        tag = policy or "default"
        for label, broken in BROKEN.items():
            kinds = []
            # in the validation
            kinds.append((f"validation-{label}-{tag}", {"validations": [{"expression": broken}]}))
            # in a variable that the validation uses, and one it does not use
            kinds.append(
                (
                    f"variable-used-{label}-{tag}",
                    {
                        "variables": [{"name": "broken", "expression": broken}],
                        "validations": [{"expression": "variables.broken == variables.broken"}],
                    },
                )
            )
            kinds.append(
                (
                    f"variable-unused-{label}-{tag}",
                    {
                        "variables": [{"name": "broken", "expression": broken}],
                        "validations": [{"expression": FAILS, "message": "unused variable"}],
                    },
                )
            )
            # in a match condition
            kinds.append(
                (
                    f"condition-{label}-{tag}",
                    {
                        "match_conditions": [{"name": "broken", "expression": broken}],
                        "validations": [{"expression": FAILS, "message": "condition"}],
                    },
                )
            )
            # in a messageExpression
            kinds.append(
                (
                    f"message-{label}-{tag}",
                    {
                        "validations": [
                            {"expression": FAILS, "messageExpression": broken, "message": "fallback"}
                        ]
                    },
                )
            )
            for name, parts in kinds:
                validations = parts.pop("validations")
                templates.append(
                    (
                        name,
                        template(kind_name("KCompile", index), validations, failure_policy=policy, **parts),
                    )
                )
                index += 1
    # several results: gator's failure text lists their messages sorted (Responses.Results)
    several = [
        {"expression": FAILS, "message": "zeta"},
        {"expression": FAILS, "message": "alpha"},
        {"expression": "int('x') == 1"},
        {"expression": FAILS, "messageExpression": "'Beta ' + object.metadata.name", "message": "m"},
    ]
    templates.append(("several-messages", template(kind_name("KCompile", index), several)))
    return Family(
        "compile-errors",
        _tests("ce", templates, _cases()),
        "compile errors in validations, variables, match conditions and messageExpressions",
    )


# -- keys of the CEL source -----------------------------------------------------------------------------
def keys_family() -> Family:
    name_is_web = "object.metadata.name.startsWith('web')"
    shapes: list[tuple[str, dict[str, Any], list[dict[str, Any]]]] = [
        ("singular-match-condition", {"matchCondition": [{"name": "web", "expression": name_is_web}]}, []),
        ("plural-match-conditions", {"matchConditions": [{"name": "web", "expression": name_is_web}]}, []),
        (
            "both-keys",
            {
                "matchCondition": [{"name": "web", "expression": name_is_web}],
                "matchConditions": [{"name": "never", "expression": "false"}],
            },
            [],
        ),
        ("unknown-key", {"validation": [{"expression": "true"}], "extra": 1}, []),
        ("false-condition", {"matchCondition": [{"name": "no", "expression": "false"}]}, []),
        (
            "two-conditions",
            {
                "matchCondition": [
                    {"name": "a", "expression": "true"},
                    {"name": "b", "expression": name_is_web},
                ]
            },
            [],
        ),
        (
            "erroring-condition",
            {"matchCondition": [{"name": "e", "expression": "object.metadata.labels.nope == 'x'"}]},
            [],
        ),
        (
            "erroring-condition-ignore",
            {
                "matchCondition": [{"name": "e", "expression": "object.metadata.labels.nope == 'x'"}],
                "failurePolicy": "Ignore",
            },
            [],
        ),
        (
            "two-erroring-conditions",
            {
                "matchCondition": [
                    {"name": "e1", "expression": "object.metadata.labels.nope == 'x'"},
                    {
                        "name": "e2",
                        "expression": "1 / (size(object.metadata.name) - size(object.metadata.name)) == 0",
                    },
                ]
            },
            [],
        ),
        (
            "condition-false-and-error",
            {
                "matchCondition": [
                    {"name": "e1", "expression": "object.metadata.labels.nope == 'x'"},
                    {"name": "f", "expression": "false"},
                ]
            },
            [],
        ),
        (
            "condition-reads-params",
            {"matchCondition": [{"name": "p", "expression": "variables.params == null"}]},
            [],
        ),
        (
            "condition-reads-variable",
            {
                "variables": [{"name": "web", "expression": name_is_web}],
                "matchCondition": [{"name": "v", "expression": "variables.web"}],
            },
            [],
        ),
        ("empty-validations", {"validations": []}, None),
        ("no-validations-key", {}, None),
        (
            "duplicate-variables",
            {
                "variables": [
                    {"name": "v", "expression": "1"},
                    {"name": "v", "expression": "2"},
                ]
            },
            [{"expression": "variables.v == 1", "message": "v is not 1"}],
        ),
        ("variable-named-with-dash", {"variables": [{"name": "my-var", "expression": "1"}]}, []),
        (
            "variable-reads-later-variable",
            {
                "variables": [
                    {"name": "a", "expression": "variables.b + 1"},
                    {"name": "b", "expression": "1"},
                ]
            },
            [{"expression": "variables.a == 2", "message": "a is not 2"}],
        ),
        (
            "variable-reads-earlier-variable",
            {
                "variables": [
                    {"name": "a", "expression": "1"},
                    {"name": "b", "expression": "variables.a + 1"},
                ]
            },
            [{"expression": "variables.b == 3", "message": "b is not 3"}],
        ),
        ("validation-without-expression", {}, [{"message": "no expression"}]),
        (
            "two-validations-one-error",
            {},
            [
                {"expression": "object.metadata.labels.nope == 'x'"},
                {"expression": FAILS, "message": "second"},
            ],
        ),
        (
            "three-validations",
            {},
            [
                {"expression": FAILS, "message": "first"},
                {"expression": "true", "message": "never"},
                {"expression": FAILS, "messageExpression": "'third ' + object.metadata.name"},
            ],
        ),
        ("generate-vap-flag", {"generateVAP": True}, []),
        ("lowercase-failure-policy", {"failurePolicy": "fail"}, []),
    ]
    templates = []
    for i, (label, extra, validations) in enumerate(shapes):
        if validations is None:
            vals: list[dict[str, Any]] = []
        else:
            vals = validations or [{"expression": FAILS, "message": f"{label} violated"}]
        tmpl = template(kind_name("KKeys", i), vals, extra_source=extra)
        source = tmpl["spec"]["targets"][0]["code"][0]["source"]
        if label == "no-validations-key":
            source.pop("validations")
        if label == "validation-without-expression":
            source["validations"] = [{"message": "no expression"}]
        templates.append((label, tmpl))
    pods = o.realistic_pods()
    cases = {
        "labelled-pod": pods["labelled-pod"],
        "bare-pod": pods["bare-pod"],
        "namespace": o.namespace("shop"),
    }
    return Family(
        "source-keys",
        _tests("k", templates, cases),
        "matchCondition vs unknown keys (the plural matchConditions), match condition errors, odd sources",
    )


# -- Kubernetes libraries in variables and messageExpressions -------------------------------------------
LIBRARY_VALUES = [
    "quantity('1.5Gi').asApproximateFloat()",
    "quantity(object.spec.containers[0].resources.limits.memory).asInteger()",
    "quantity('1.5Gi').isInteger()",
    "quantity('100m').add(quantity('1')).compareTo(quantity('1100m'))",
    "quantity('2').sub(1).asInteger()",
    "sign(quantity('-3'))",
    "isQuantity('1Ki')",
    "quantity('1Gi').isGreaterThan(quantity('1G'))",
    "url('https://example.com:8443/a/b?x=1&y=2').getHost()",
    "url('https://example.com:8443/a/b?x=1&y=2').getPort()",
    "url('https://example.com/a%20b').getEscapedPath()",
    "url('https://example.com/?x=1&x=2').getQuery()",
    "isURL('not a url')",
    "ip('10.0.0.1').family()",
    "ip('::1').isLoopback()",
    "string(ip('10.0.0.1'))",
    "isIP('1.2.3.4')",
    "ip.isCanonical('2001:db8::1')",
    "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
    "cidr('10.0.0.0/8').prefixLength()",
    "string(cidr('10.1.2.3/8').masked())",
    "cidr('192.168.0.0/16').containsCIDR('192.168.1.0/24')",
    "semver('1.2.3').major()",
    "semver('1.2.3').compareTo(semver('1.10.0'))",
    "isSemver('v1.2.3', true)",
    "format.dns1123Label().validate('Bad_Name')",
    "format.named('dns1123Subdomain').value().validate('ok.example.com')",
    "[3, 1, 2].isSorted()",
    "[1, 2, 3].sum()",
    "[1.5, 2.5].max()",
    "['a', 'b', 'a'].indexOf('a')",
    "['a', 'b', 'a'].lastIndexOf('a')",
    "'abc 123 def 456'.find('[0-9]+')",
    "'abc 123 def 456'.findAll('[0-9]+')",
    "'hello'.charAt(1)",
    "'Hello World'.lowerAscii()",
    "'a,b,c'.split(',')",
    "['a', 'b'].join('-')",
    "'  trim me  '.trim()",
    "'hello'.substring(1, 3)",
    "'x=%d y=%s'.format([1, 'two'])",
    "strings.quote('a\"b')",
    "'hello'.indexOf('l')",
    "'a.b.c'.replace('.', '/')",
    "sets.contains([1, 2, 3], [2])",
    "sets.equivalent([1, 2], [2, 1, 1])",
    "sets.intersects(['a'], ['b'])",
    "[[1], [2, 3]].flatten()",
    "[3, 1, 2].sort()",
    "['bb', 'a'].sortBy(s, s.size())",
    "[1, 1, 2].distinct()",
    "[1, 2, 3].reverse()",
    "lists.range(3)",
    "[1, 2, 3, 4].slice(1, 3)",
    "{'a': 1}.transformMapEntry(k, v, {k + k: v * 2})",
    "type(ip('1.2.3.4')) == net.IP",
    "type(quantity('1')) == kubernetes.Quantity",
    "type(cidr('10.0.0.0/8')) == net.CIDR",
    "type(url('https://a')) == kubernetes.URL",
    "type(semver('1.0.0')) == kubernetes.Semver",
    "optional.ofNonZeroValue(timestamp('0001-01-01T00:00:00Z')).hasValue()",
    "duration('0')",
    "duration('1h30m').getMinutes()",
    "timestamp('2024-02-29T12:00:00Z').getDayOfYear()",
    "'%v'.format([object.metadata.name])",
    "'%.2f'.format([1.005])",
    "'%e'.format([1234.5])",
    "'%x'.format(['hi'])",
    "'%o'.format([8])",
    "'%b'.format([5])",
    "'%s'.format([[1, 'a']])",
    "'%s'.format([{'k': 1}])",
    "'%s'.format([duration('90s')])",
    "'%s'.format([timestamp('2024-01-01T00:00:00Z')])",
    "'%s'.format([null])",
    "'%s'.format([1.0])",
    "'%d'.format([3u])",
]


def libraries_family() -> Family:
    templates = []
    for i, value in enumerate(LIBRARY_VALUES):
        # in a variable, shown by the message
        templates.append(
            (
                "variable",
                template(
                    kind_name("KLibVar", i),
                    [{"expression": FAILS, "messageExpression": "'value: ' + string(variables.v)"}],
                    variables=[{"name": "v", "expression": value}],
                ),
            )
        )
        # in the messageExpression itself
        templates.append(
            (
                "message",
                template(
                    kind_name("KLibMsg", i),
                    [
                        {
                            "expression": FAILS,
                            "messageExpression": f"'value: ' + string({value})",
                            "message": "fb",
                        }
                    ],
                ),
            )
        )
    return Family(
        "libraries",
        _tests("lib", templates, _cases()),
        "every Kubernetes CEL library (and cel-go extension) in variables and messageExpressions",
    )
