"""Compiling ConstraintTemplates: every compile error with its place in the file (and how the broken part
fails at request time), the compile cache, and the Gatekeeper library templates on each engine."""

from __future__ import annotations

import threading

from celkeeper.cel.api import Engine, TemplateProgram, TemplateSource
from celkeeper.documents import Document
from celkeeper.errors import is_warning
from celkeeper.policy import build_policy_set
from celkeeper.review import decide, parse_admission_review
from celkeeper.templates import TemplateCompiler
from tests.support.policydocs import CountingEngine, admission_review, constraint_doc, doc, pod, template_data
from tests.support.samples import library, read_documents, templates

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
            matchCondition:
              - name: typed
                expression: "1 + 1"
"""


def test_every_compile_error_is_reported_with_its_place(default_engine: Engine) -> None:
    template, errors = TemplateCompiler(default_engine).load(doc(BROKEN, "broken.yaml"))
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
        "k8sbroken: validation does not compile: undeclared reference to 'undefinedThing' (in container '') "
        "(at 2:3 in the expression)",
        "broken.yaml:27:29: document 1: spec.targets[0].code[0].source.validations[2].expression: template "
        "k8sbroken: validation does not compile: must evaluate to bool but got dyn",
        "broken.yaml:30:36: document 1: spec.targets[0].code[0].source.validations[4].messageExpression: "
        "template k8sbroken: messageExpression does not compile: must evaluate to string but got dyn (the "
        "message falls back to `message`)",
        "broken.yaml:33:29: document 1: spec.targets[0].code[0].source.matchCondition[0].expression: "
        "template k8sbroken: match condition 'typed' does not compile: must evaluate to bool but got int",
    ]
    # the source line really holds what the error points at
    source = BROKEN.lstrip("\n").splitlines()
    assert source[24].startswith("undefinedThing", 20)
    assert len(source[18]) == 46  # the syntax error is at the end of the expression
    # at request time the match condition fails as Kubernetes words it (matcher.go, activation.go)
    policies = build_policy_set(
        [doc(BROKEN, "broken.yaml"), constraint_doc("K8sBroken", "c")], TemplateCompiler(default_engine)
    )
    decision = decide(
        parse_admission_review(admission_review(pod())), policies, lambda _: None, "validation.gatekeeper.sh"
    )
    assert [r.message for r in decision.results] == ["compilation error: must evaluate to bool but got int"]
    # and without the condition, each broken part fails (or falls back) as Kubernetes words it
    policies = build_policy_set(
        [
            doc(BROKEN.split("            matchCondition:", maxsplit=1)[0], "broken.yaml"),
            constraint_doc("K8sBroken", "c"),
        ],
        TemplateCompiler(default_engine),
    )
    decision = decide(
        parse_admission_review(admission_review(pod())), policies, lambda _: None, "validation.gatekeeper.sh"
    )
    assert [r.message for r in decision.results] == [
        "compilation error: compilation failed: ERROR: <input>:2:3: undeclared reference to 'undefinedThing' "
        "(in container '')\n |   undefinedThing\n | ..^",
        "compilation error: must evaluate to bool but got dyn",
        "expression 'size(variables.bad) > 0' resulted in error: composited variable \"bad\" fails to "
        "compile: compilation failed: ERROR: <input>:1:19: Syntax error: mismatched input '<EOF>' expecting "
        "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
        "BYTES, IDENTIFIER}\n | object.spec.nope +\n | ..................^",
    ]
    assert all(is_warning(e) for e in errors)  # Gatekeeper loads the template: nothing refuses it


def test_unchanged_content_is_not_compiled_again(default_engine: Engine) -> None:
    counting = CountingEngine(default_engine)
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
    assert compiled_once == 1  # the whole template, once
    # the same content again, from another file and with other metadata: no compiling at all
    data2 = {**data, "metadata": {"name": "k8scached", "labels": {"changed": "yes"}}}
    second, _ = compiler.load(Document.from_object(data2, file="b.yaml"))
    assert second is not None and len(counting.compiled) == compiled_once
    assert second.program is first.program
    assert second.document.file == "b.yaml"
    assert (compiler.hits, compiler.misses) == (1, 1)
    # changed code compiles again
    data3 = template_data(
        "K8sCached",
        [{"expression": "variables.n > 1"}],
        variables=[{"name": "n", "expression": "size(object.metadata.name)"}],
    )
    compiler.load(Document.from_object(data3))
    assert len(counting.compiled) == compiled_once + 1


class _HeldEngine(CountingEngine):
    """A real engine whose first template compilation waits until the test releases it."""

    def __init__(self, inner: Engine) -> None:
        super().__init__(inner)
        self.entered = threading.Event()
        self.release = threading.Event()

    def compile_template(self, source: TemplateSource) -> TemplateProgram:
        first = not self.compiled
        program = super().compile_template(source)
        if first:
            self.entered.set()
            self.release.wait()
        return program


def test_a_source_being_compiled_is_waited_for_not_compiled_again(default_engine: Engine) -> None:
    held = _HeldEngine(default_engine)
    compiler = TemplateCompiler(held)
    document = doc(BROKEN, "broken.yaml")
    spec = compiler.parse(document)
    assert spec is not None
    ahead = threading.Thread(target=compiler.prepare, args=(spec,))
    ahead.start()
    assert held.entered.wait(30)
    loaded: list[tuple[object, list[str]]] = []
    loader = threading.Thread(target=lambda: loaded.append(_loaded(compiler, document)))
    loader.start()
    loader.join(0.2)
    # waiting for the compilation under way (compiling again, it would have returned: only the first
    # compilation is held)
    assert loader.is_alive()
    held.release.set()
    ahead.join()
    loader.join()
    assert len(held.compiled) == 1
    ((program, messages),) = loaded
    alone, errors = TemplateCompiler(default_engine).load(document)
    assert alone is not None and program is not None
    assert messages == [str(e) for e in errors]  # what it found is reported as without compiling ahead
    assert (compiler.hits, compiler.misses) == (1, 1)


def _loaded(compiler: TemplateCompiler, document: Document) -> tuple[object, list[str]]:
    template, errors = compiler.load(document)
    return (template.program if template is not None else None), [str(e) for e in errors]


def test_compile_errors_of_cached_templates_are_located_per_document(default_engine: Engine) -> None:
    compiler = TemplateCompiler(default_engine)
    _, first = compiler.load(doc(BROKEN, "one.yaml"))
    _, second = compiler.load(doc("# moved down\n\n" + BROKEN.lstrip("\n"), "two.yaml"))
    assert compiler.hits == 1
    assert [e.location.file for e in second] == ["two.yaml"] * len(first)
    assert [e.location.line for e in second] == [e.location.line + 2 for e in first if e.location.line]


def test_cache_is_bounded(default_engine: Engine) -> None:
    compiler = TemplateCompiler(default_engine, max_entries=2)
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
