"""Compiling ConstraintTemplates: every compile error with its place in the file (and how the broken part
fails at request time), the compile cache, and the Gatekeeper library templates on each engine."""

from __future__ import annotations

from celkeeper.cel.api import Engine
from celkeeper.documents import Document
from celkeeper.templates import TemplateCompiler
from tests.support.samples import library, read_documents, templates

from .helpers import CountingEngine, doc, template_data

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
    library()
    compiler = TemplateCompiler(engine)
    for path in templates():
        (document,) = read_documents(path)
        template, errors = compiler.load(document)
        assert errors == [], [str(e) for e in errors]
        assert template is not None and template.compiles
