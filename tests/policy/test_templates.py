"""ConstraintTemplates: structure checks, compile errors with their place in the file, the compile cache."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel.api import Activation, Engine, Program
from celkeeper.documents import Document, parse_documents
from celkeeper.errors import TemplateError
from celkeeper.model import FailurePolicy
from celkeeper.templates import TemplateCompiler, is_template, parse_template

from .helpers import doc, template_data

LIBRARY = Path("/work/shared/samples/gatekeeper-library")


def errors_of(text: str, name: str = "t.yaml") -> list[str]:
    spec, errors = parse_template(doc(text, name))
    assert spec is None
    assert all(isinstance(e, TemplateError) for e in errors)
    return [str(e) for e in errors]


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
    assert errors_of(text) == [
        "t.yaml:18:28: document 1: spec.targets[0].code[0].source.failurePolicy: template k8slabels: "
        "unrecognized failure policy: Sometimes (use Fail or Ignore)",
        "t.yaml:20:23: document 1: spec.targets[0].code[0].source.variables[0].name: template k8slabels: "
        "params is an invalid variable name, 'params' is a reserved keyword",
        "t.yaml:22:23: document 1: spec.targets[0].code[0].source.variables[1].name: template k8slabels: "
        "anyObject is an invalid variable name, 'anyObject' is a reserved keyword",
        "t.yaml:24:23: document 1: spec.targets[0].code[0].source.variables[2].name: template k8slabels: "
        "gatekeeper_internal_x is not a valid variable; cannot have 'gatekeeper_internal_' as a prefix",
        "t.yaml:28:23: document 1: spec.targets[0].code[0].source.variables[4].name: template k8slabels: "
        "variable 'ok' is defined twice",
        "t.yaml:30:23: document 1: spec.targets[0].code[0].source.variables[5].name: template k8slabels: "
        "variable name 'not-an-identifier' is not a CEL identifier (letters, digits and _)",
        "t.yaml:33:23: document 1: spec.targets[0].code[0].source.matchCondition[0].name: template "
        "k8slabels: "
        "gatekeeper_internal_match is not a valid match condition; cannot have 'gatekeeper_internal_' as a "
        "prefix",
    ]


def test_validations_must_not_be_empty_and_unknown_keys_are_reported() -> None:
    text = GOOD.replace("validations:", "validation:")
    assert errors_of(text) == [
        # the missing key is located at the enclosing source
        "t.yaml:14:11: document 1: spec.targets[0].code[0].source.validations: template k8slabels: "
        "validations "
        "must not be empty: a template needs at least one validation",
        "t.yaml:15:13: document 1: spec.targets[0].code[0].source.validation: template k8slabels: unknown "
        "field "
        "'validation' in the K8sNativeValidation source (known: failurePolicy, generateVAP, matchCondition, "
        "matchConditions, resourceOperations, validations, variables)",
    ]


def test_match_condition_keys() -> None:
    both = (
        GOOD
        + """            matchCondition:
              - {name: a, expression: "true"}
            matchConditions:
              - {name: b, expression: "true"}
"""
    )
    assert errors_of(both) == [
        "t.yaml:20:13: document 1: spec.targets[0].code[0].source.matchConditions: template k8slabels: "
        "give matchCondition or matchConditions, not both"
    ]
    for key in ("matchCondition", "matchConditions"):
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
        assert [c.name for c in spec.match_conditions] == ["only-pods"]
        assert (
            spec.match_conditions[0].expression.path == f"spec.targets[0].code[0].source.{key}[0].expression"
        )


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
    files = sorted(LIBRARY.glob("**/template.yaml"))
    if not files:
        pytest.skip(f"the Gatekeeper library samples are not at {LIBRARY}")
    for path in files:
        (document,) = parse_documents(path.read_text(), str(path)).documents
        spec, errors = parse_template(document)
        assert errors == [], [str(e) for e in errors]
        assert spec is not None and spec.validations


# -- compiling ---------------------------------------------------------------------------------------
BROKEN = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sbroken
spec:
  crd:
    spec:
      names:
        kind: K8sBroken
  targets:
    - target: admission.k8s.gatekeeper.sh
      code:
        - engine: K8sNativeValidation
          source:
            variables:
              - name: containers
                expression: object.spec.containers
              - name: bad
                expression: object.spec.nope +
            validations:
              - expression: variables.containers.all(c, has(c.image))
                messageExpression: '"missing image in " + object.metadata.name'
              - expression: |
                  object.metadata.name == "x" &&
                    undefinedThing
                message: multi-line
              - expression: object.spec
              - expression: size(variables.bad) > 0
              - expression: "true"
                messageExpression: object.metadata.labels
            matchConditions:
              - name: typed
                expression: "1 + 1"
"""


def test_every_compile_error_is_reported_with_its_place(cpp_engine: Engine) -> None:
    template, errors = TemplateCompiler(cpp_engine).load(doc(BROKEN, "broken.yaml"))
    assert template is not None  # it still exists: broken expressions fail at request time
    assert not template.compiles
    assert [str(e) for e in errors] == [str(e) for e in template.errors]
    messages = [str(e) for e in errors]
    assert messages[0].startswith(
        "broken.yaml:19:47: document 1: spec.targets[0].code[0].source.variables[1].expression: template "
        "k8sbroken: variable 'bad' does not compile: Syntax error: "
    )
    assert messages[0].endswith("(at 1:19 in the expression)")
    assert messages[1:] == [
        "broken.yaml:25:21: document 1: spec.targets[0].code[0].source.validations[1].expression: template "
        "k8sbroken: validation does not compile: undeclared reference to 'undefinedThing' "
        "(at 2:3 in the expression)",
        "broken.yaml:27:29: document 1: spec.targets[0].code[0].source.validations[2].expression: template "
        "k8sbroken: validation must evaluate to bool, but its type is dyn (convert it, e.g. with string(...) "
        "or a comparison)",
        "broken.yaml:30:36: document 1: spec.targets[0].code[0].source.validations[4].messageExpression: "
        "template k8sbroken: messageExpression must evaluate to string, but its type is dyn (convert it, "
        "e.g. "
        "with string(...) or a comparison)",
        "broken.yaml:33:29: document 1: spec.targets[0].code[0].source.matchConditions[0].expression: "
        "template "
        "k8sbroken: match condition 'typed' must evaluate to bool, but its type is int",
    ]
    # the source line really holds what the error points at
    source = BROKEN.lstrip("\n").splitlines()
    assert source[24].startswith("undefinedThing", 20)
    assert len(source[18]) == 46  # the syntax error is at the end of the expression
    # at request time the broken parts fail as Kubernetes words it
    first, multi, dyn, uses_bad, typed_message = template.validations
    assert first.expression.program is not None and first.message_expression is not None
    assert first.message_expression.program is not None
    assert multi.expression.error == (
        "compilation error: compilation failed: undeclared reference to 'undefinedThing'"
    )
    assert dyn.expression.error == "compilation error: must evaluate to bool"
    assert uses_bad.expression.error is not None
    assert uses_bad.expression.error.startswith("composited variable 'bad' fails to compile: ")
    assert typed_message.expression.program is not None and typed_message.message_expression is not None
    assert typed_message.message_expression.error == "compilation error: must evaluate to string"
    assert template.match_conditions[0].expression.error == "compilation error: must evaluate to bool"


class CountingEngine:
    """Our Engine interface around a real engine, counting compile calls."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.compiled: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> Program:
        self.compiled.append(source)
        return self.inner.compile(source, variables)

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any],
        namespace_object: Any = None,
    ) -> Activation:
        return self.inner.activation(
            object=object, old_object=old_object, request=request, namespace_object=namespace_object
        )

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any:
        return self.inner.evaluate(program, activation, params, constraint)


def test_unchanged_content_is_not_compiled_again(cpp_engine: Engine) -> None:
    counting = CountingEngine(cpp_engine)
    compiler = TemplateCompiler(counting)
    data = template_data(
        "K8sCached",
        [{"expression": "variables.n > 0", "messageExpression": "'n is ' + string(variables.n)"}],
        variables=[{"name": "n", "expression": "size(object.metadata.name)"}],
        conditions=[{"name": "pods", "expression": "request.kind.kind == 'Pod'"}],
    )
    first, _ = compiler.load(Document.from_object(data, file="a.yaml"))
    assert first is not None and first.compiles
    compiled_once = len(counting.compiled)
    assert compiled_once == 4  # the variable, the validation, its message, the match condition
    # the same content again, from another file and with other metadata: no compiling at all
    data2 = {**data, "metadata": {"name": "k8scached", "labels": {"changed": "yes"}}}
    second, _ = compiler.load(Document.from_object(data2, file="b.yaml"))
    assert second is not None and len(counting.compiled) == compiled_once
    assert second.validations[0].expression.program is first.validations[0].expression.program
    assert second.document.file == "b.yaml"
    assert (compiler.hits, compiler.misses) == (1, 1)
    # changed code compiles again
    data3 = template_data(
        "K8sCached",
        [{"expression": "variables.n > 1"}],
        variables=[{"name": "n", "expression": "size(object.metadata.name)"}],
    )
    compiler.load(Document.from_object(data3))
    assert len(counting.compiled) == compiled_once + 2


def test_compile_errors_of_cached_templates_are_located_per_document(cpp_engine: Engine) -> None:
    compiler = TemplateCompiler(cpp_engine)
    _, first = compiler.load(doc(BROKEN, "one.yaml"))
    _, second = compiler.load(doc("# moved down\n\n" + BROKEN.lstrip("\n"), "two.yaml"))
    assert compiler.hits == 1
    assert [e.location.file for e in second] == ["two.yaml"] * len(first)
    assert [e.location.line for e in second] == [e.location.line + 2 for e in first if e.location.line]


def test_cache_is_bounded(cpp_engine: Engine) -> None:
    compiler = TemplateCompiler(cpp_engine, max_entries=2)
    for n in range(3):
        compiler.load(Document.from_object(template_data("K8sB", [{"expression": f"{n} == {n}"}])))
    compiler.load(Document.from_object(template_data("K8sB", [{"expression": "0 == 0"}])))
    assert compiler.misses == 4  # the oldest was evicted


def test_library_templates_compile(engine: Engine) -> None:
    files = sorted(LIBRARY.glob("**/template.yaml"))
    if not files:
        pytest.skip(f"the Gatekeeper library samples are not at {LIBRARY}")
    compiler = TemplateCompiler(engine)
    for path in files:
        (document,) = parse_documents(path.read_text(), str(path)).documents
        template, errors = compiler.load(document)
        assert errors == [], [str(e) for e in errors]
        assert template is not None and template.compiles


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


@pytest.mark.parametrize(("api_version", "legacy"), [
    ("templates.gatekeeper.sh/v1", False),
    ("templates.gatekeeper.sh/v1beta1", True),
    ("templates.celkeeper.io/v1", False),
])
def test_legacy_schema_default_follows_the_version(api_version: str, legacy: bool) -> None:
    data = template_data("K8sL", [{"expression": "true"}],
                         schema={"type": "object", "properties": {"a": {"type": "string"}}},
                         api_version=api_version)
    spec, errors = parse_template(Document.from_object(data))
    assert errors == [] and spec is not None
    assert spec.parameters.legacy is legacy
    assert (spec.parameters.errors({"b": 1}) == []) is legacy
    data["spec"]["crd"]["spec"]["validation"]["legacySchema"] = not legacy
    spec, _ = parse_template(Document.from_object(data))
    assert spec is not None and spec.parameters.legacy is (not legacy)
