"""ConstraintTemplates: structure checks, each problem located in the file (compiling: test_compiler.py)."""

from __future__ import annotations

import pytest

from celkeeper.documents import Document
from celkeeper.errors import TemplateError, TemplateWarning
from celkeeper.model import FailurePolicy
from celkeeper.templates import is_template, parse_template
from tests.support.policydocs import doc, template_data
from tests.support.samples import library, read_documents, templates


def errors_of(text: str, name: str = "t.yaml") -> list[str]:
    spec, errors = parse_template(doc(text, name))
    assert spec is None
    assert all(isinstance(e, TemplateError) for e in errors)
    return [str(e) for e in errors]


def warnings_of(text: str, name: str = "t.yaml") -> list[str]:
    """The warnings of a template that loads (as Gatekeeper loads it)."""
    spec, errors = parse_template(doc(text, name))
    assert errors == [] and spec is not None
    assert all(isinstance(w, TemplateWarning) for w in spec.warnings)
    return [str(w) for w in spec.warnings]


GOOD = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8slabels
spec:
  crd:
    spec:
      names:
        kind: K8sLabels
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            validations:
              - expression: has(object.metadata.labels)
                message: labels are required
"""


def test_a_good_template_parses() -> None:
    spec, errors = parse_template(doc(GOOD))
    assert errors == []
    assert spec is not None
    assert (spec.name, spec.kind, spec.failure_policy) == ("k8slabels", "K8sLabels", FailurePolicy.FAIL)
    assert spec.source_path == "spec.targets[0].code[0].source"
    (validation,) = spec.validations
    assert validation.expression.path == "spec.targets[0].code[0].source.validations[0].expression"
    assert validation.message == "labels are required"
    assert spec.operations is None


@pytest.mark.parametrize("api_version", ["templates.gatekeeper.sh/v1beta1", "templates.celkeeper.io/v1"])
def test_other_api_versions_are_accepted(api_version: str) -> None:
    spec, errors = parse_template(doc(GOOD.replace("templates.gatekeeper.sh/v1", api_version)))
    assert errors == [] and spec is not None
    assert is_template(spec.document)


def test_unsupported_api_version() -> None:
    assert errors_of(GOOD.replace("templates.gatekeeper.sh/v1", "templates.gatekeeper.sh/v2")) == [
        "t.yaml:1:13: document 1: apiVersion: template k8slabels: unsupported apiVersion "
        "'templates.gatekeeper.sh/v2' for a ConstraintTemplate; use templates.gatekeeper.sh/v1 or "
        "templates.celkeeper.io/v1"
    ]


def test_name_must_be_the_lowercase_kind() -> None:
    assert errors_of(GOOD.replace("name: k8slabels", "name: labels")) == [
        "t.yaml:4:9: document 1: metadata.name: template labels: metadata.name 'labels' must be the "
        "lowercase "
        "of spec.crd.spec.names.kind 'K8sLabels': 'k8slabels'"
    ]


def test_kind_is_required() -> None:
    assert errors_of(GOOD.replace("kind: K8sLabels", "shortNames: [x]")) == [
        "t.yaml:8:7: document 1: spec.crd.spec.names.kind: template k8slabels: spec.crd.spec.names.kind is "
        "required"
    ]


def test_exactly_one_target() -> None:
    two = (
        GOOD
        + """    - target: admission.k8s.gatekeeper.sh
      code: []
"""
    )
    assert errors_of(two) == [
        "t.yaml:11:5: document 1: spec.targets: template k8slabels: multi-target templates are not "
        "supported: "
        "give exactly one target"
    ]
    none = GOOD.split("  targets:", maxsplit=1)[0] + "  targets: []\n"
    assert errors_of(none) == [
        "t.yaml:10:12: document 1: spec.targets: template k8slabels: no targets specified: "
        "ConstraintTemplate must specify one target"
    ]


def test_target_name() -> None:
    assert errors_of(GOOD.replace("- target: admission.k8s.gatekeeper.sh", "- target: admission.k8s.io")) == [
        "t.yaml:11:15: document 1: spec.targets[0].target: template k8slabels: target must be "
        "'admission.k8s.gatekeeper.sh', not 'admission.k8s.io'"
    ]


def test_rego_only_template_is_refused() -> None:
    rego = GOOD.split("      code:", maxsplit=1)[0] + "      rego: |\n        package k8slabels\n"
    assert errors_of(rego) == [
        "t.yaml:11:7: document 1: spec.targets[0]: template k8slabels: Rego is not supported; "
        "add K8sNativeValidation code"
    ]
    rego_code = (
        GOOD.split("        - engine", maxsplit=1)[0]
        + "        - engine: Rego\n          source: {rego: package x}\n"
    )
    assert errors_of(rego_code) == [
        "t.yaml:13:9: document 1: spec.targets[0].code: template k8slabels: Rego is not supported; "
        "add K8sNativeValidation code"
    ]


def test_template_with_both_engines_uses_the_cel_code() -> None:
    both = GOOD.split("        - engine", maxsplit=1)[0] + (
        "        - engine: Rego\n          source: {rego: package x}\n"
        + "        - engine"
        + GOOD.split("        - engine")[1]
    )
    spec, errors = parse_template(doc(both))
    assert errors == [] and spec is not None
    assert spec.source_path == "spec.targets[0].code[1].source"


def test_reserved_names_and_failure_policy() -> None:
    text = (
        GOOD
        + """            failurePolicy: Sometimes
            variables:
              - name: params
                expression: "1"
              - name: anyObject
                expression: "2"
              - name: gatekeeper_internal_x
                expression: "3"
              - name: ok
                expression: "4"
              - name: ok
                expression: "5"
              - name: not-an-identifier
                expression: "6"
            matchCondition:
              - name: gatekeeper_internal_match
                expression: "true"
"""
    )
    # what Gatekeeper refuses (schema.go) is an error; a repeated or unusable name only a warning
    assert errors_of(text) == [
        "t.yaml:18:28: document 1: spec.targets[0].code[0].source.failurePolicy: template k8slabels: "
        "unrecognized failure policy: Sometimes (use Fail or Ignore)",
        "t.yaml:20:23: document 1: spec.targets[0].code[0].source.variables[0].name: template k8slabels: "
        "params is an invalid variable name, 'params' is a reserved keyword",
        "t.yaml:22:23: document 1: spec.targets[0].code[0].source.variables[1].name: template k8slabels: "
        "anyObject is an invalid variable name, 'anyObject' is a reserved keyword",
        "t.yaml:24:23: document 1: spec.targets[0].code[0].source.variables[2].name: template k8slabels: "
        "gatekeeper_internal_x is not a valid variable; cannot have 'gatekeeper_internal_' as a prefix",
        "t.yaml:33:23: document 1: spec.targets[0].code[0].source.matchCondition[0].name: template "
        "k8slabels: "
        "gatekeeper_internal_match is not a valid match condition; cannot have 'gatekeeper_internal_' as a "
        "prefix",
    ]
    loads = text.replace("failurePolicy: Sometimes", "failurePolicy: Fail")
    for reserved in ("params", "anyObject", "gatekeeper_internal_x", "gatekeeper_internal_match"):
        loads = loads.replace(f"name: {reserved}\n", f"name: x_{reserved.lower()}\n")
    assert warnings_of(loads) == [
        "t.yaml:28:23: document 1: spec.targets[0].code[0].source.variables[4].name: template k8slabels: "
        "variable 'ok' is defined twice: the last definition is used",
        "t.yaml:30:23: document 1: spec.targets[0].code[0].source.variables[5].name: template k8slabels: "
        "variable name 'not-an-identifier' is not a CEL identifier (letters, digits and _): no expression "
        "can use it",
    ]


def test_no_validations_and_unknown_keys_are_warnings() -> None:
    # Gatekeeper loads such a template (unknown keys are ignored; it checks nothing): a warning each
    text = GOOD.replace("validations:", "validation:")
    assert warnings_of(text) == [
        "t.yaml:15:13: document 1: spec.targets[0].code[0].source.validation: template k8slabels: unknown "
        "field "
        "'validation' in the K8sNativeValidation source, ignored (known: failurePolicy, generateVAP, "
        "matchCondition, resourceOperations, validations, variables)",
        # the missing key is located at the enclosing source
        "t.yaml:14:11: document 1: spec.targets[0].code[0].source.validations: template k8slabels: "
        "no validations: the template checks nothing",
    ]


def test_match_condition_keys() -> None:
    # the key is matchCondition (singular); Gatekeeper silently ignores the plural: so does celkeeper,
    # with a warning (tests/e2e/gator corpus: source-keys)
    both = (
        GOOD
        + """            matchCondition:
              - {name: a, expression: "true"}
            matchConditions:
              - {name: b, expression: "true"}
"""
    )
    spec, errors = parse_template(doc(both, "t.yaml"))
    assert errors == [] and spec is not None
    assert [c.name for c in spec.match_conditions] == ["a"]
    assert [str(w) for w in spec.warnings] == [
        "t.yaml:20:13: document 1: spec.targets[0].code[0].source.matchConditions: template k8slabels: "
        "matchConditions is not a key of the K8sNativeValidation source: Gatekeeper ignores it (and so "
        "does celkeeper); match conditions go under matchCondition (singular)"
    ]
    for key, names in (("matchCondition", ["only-pods"]), ("matchConditions", [])):
        spec, errors = parse_template(
            doc(
                GOOD
                + f"""            {key}:
              - name: only-pods
                expression: request.kind.kind == "Pod"
"""
            )
        )
        assert errors == [] and spec is not None
        assert [c.name for c in spec.match_conditions] == names
    assert spec.warnings


def test_operations_of_the_target() -> None:
    text = GOOD.replace(
        "    - target: admission.k8s.gatekeeper.sh\n",
        "    - target: admission.k8s.gatekeeper.sh\n      operations: [CREATE, UPDATE]\n",
    )
    spec, errors = parse_template(doc(text))
    assert errors == [] and spec is not None and spec.operations == frozenset({"CREATE", "UPDATE"})
    bad = text.replace("[CREATE, UPDATE]", "[CREATE, PATCH]")
    assert errors_of(bad) == [
        "t.yaml:12:28: document 1: spec.targets[0].operations[1]: template k8slabels: unknown operation "
        "'PATCH': "
        "use CREATE, UPDATE, DELETE, CONNECT or *"
    ]


def test_library_templates_parse() -> None:
    library()
    for path in templates():
        (document,) = read_documents(path)
        spec, errors = parse_template(document)
        assert errors == [], [str(e) for e in errors]
        assert spec is not None and spec.validations


def test_parameter_schema_errors_are_template_errors() -> None:
    text = GOOD.replace(
        "        kind: K8sLabels\n",
        "        kind: K8sLabels\n      validation:\n        openAPIV3Schema:\n          type: object\n"
        "          properties:\n            labels:\n              type: strng\n",
    )
    assert errors_of(text) == [
        "t.yaml:15:21: document 1: spec.crd.spec.validation.openAPIV3Schema.properties.labels.type: template "
        "k8slabels: invalid parameter schema: 'strng' is not valid under any of the given schemas"
    ]


@pytest.mark.parametrize(
    ("api_version", "legacy"),
    [
        ("templates.gatekeeper.sh/v1", False),
        ("templates.gatekeeper.sh/v1beta1", True),
        ("templates.celkeeper.io/v1", False),
    ],
)
def test_legacy_schema_default_follows_the_version(api_version: str, legacy: bool) -> None:
    data = template_data(
        "K8sL",
        [{"expression": "true"}],
        schema={"type": "object", "properties": {"a": {"type": "string"}}},
        api_version=api_version,
    )
    spec, errors = parse_template(Document.from_object(data))
    assert errors == [] and spec is not None
    assert spec.parameters.legacy is legacy
    assert (spec.parameters.errors({"b": 1}) == []) is legacy
    data["spec"]["crd"]["spec"]["validation"]["legacySchema"] = not legacy
    spec, _ = parse_template(Document.from_object(data))
    assert spec is not None and spec.parameters.legacy is (not legacy)
