"""The engine contract (celkeeper.cel.api) on both backends: compiling, variables, the built-in
variables, parameters, errors as values, result conversion."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest

from celkeeper.cel import DEFAULT_ENGINE, ENGINES, CelCompileError, CelError, VariableCompileError, get_engine
from celkeeper.cel.api import Engine
from celkeeper.cel.k8slib.celvalues import Uint
from tests.cel.conftest import engine_named, evaluate
from tests.cel.k8slib.golden_check import encode

POD = {
    "metadata": {"name": "p", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {"name": "a", "image": "nginx:1", "securityContext": {"privileged": True}},
            {"name": "b", "image": "redis:7"},
        ]
    },
}

# the privileged-containers template of the Gatekeeper library, as Gatekeeper ships it
_ALL = "(variables.containers + variables.initContainers + variables.ephemeralContainers)"
PRIVILEGED_VARIABLES = {
    "containers": "has(variables.anyObject.spec.containers) ? variables.anyObject.spec.containers : []",
    "initContainers": (
        "has(variables.anyObject.spec.initContainers) ? variables.anyObject.spec.initContainers : []"
    ),
    "ephemeralContainers": (
        "has(variables.anyObject.spec.ephemeralContainers) ? "
        "variables.anyObject.spec.ephemeralContainers : []"
    ),
    "exemptImagePrefixes": (
        "!has(variables.params.exemptImages) ? [] :\n"
        '  variables.params.exemptImages.filter(image, image.endsWith("*"))'
        '.map(image, string(image).replace("*", ""))'
    ),
    "exemptImageExplicit": (
        "!has(variables.params.exemptImages) ? [] : \n"
        '  variables.params.exemptImages.filter(image, !image.endsWith("*"))'
    ),
    "exemptImages": (
        f"{_ALL}.filter(container,\n"
        "  container.image in variables.exemptImageExplicit ||\n"
        "  variables.exemptImagePrefixes.exists(exemption, string(container.image).startsWith(exemption))\n"
        ").map(container, container.image)"
    ),
    "badContainers": (
        f"{_ALL}.filter(container,\n"
        "  !(container.image in variables.exemptImages) &&\n"
        "  (has(container.securityContext) && has(container.securityContext.privileged) && "
        "container.securityContext.privileged)\n"
        ').map(container, "Privileged container is not allowed: " + container.name '
        '+", securityContext.privileged: true")'
    ),
    "isUpdate": 'has(request.operation) && request.operation == "UPDATE"',
}


def test_engines_are_known_and_default_first() -> None:
    assert ENGINES == ("cel-go", "cel-python")
    assert DEFAULT_ENGINE == "cel-go"
    with pytest.raises(ValueError, match="unknown CEL engine"):
        get_engine("cel-rust")


def test_plain_expression(engine: Engine) -> None:
    assert evaluate(engine, "object.metadata.name == 'p'", object=POD) is True
    assert evaluate(engine, "object.spec.containers.map(c, c.name)", object=POD) == ["a", "b"]


def test_program_knows_its_source_and_type(engine: Engine) -> None:
    program = engine.compile("object.spec.containers.map(c, c.name)")
    assert program.source == "object.spec.containers.map(c, c.name)"
    assert program.output_type == "list(dyn)"
    assert engine.compile("'a' + 'b'").output_type == "string"
    assert engine.compile("object.x").output_type == "dyn"
    assert engine.compile("quantity('1')").output_type == "kubernetes.Quantity"
    assert engine.compile("object.?x").output_type == "optional_type(dyn)"
    assert engine.compile("{'a': [1]}").output_type == "map(string, list(int))"


def test_compile_error_has_line_and_column(engine: Engine) -> None:
    with pytest.raises(CelCompileError) as info:
        engine.compile("object.metadata.name == 'p' &&\n  nope.x")
    assert (info.value.line, info.value.column) == (2, 3)
    assert "undeclared reference to 'nope'" in info.value.message
    assert str(info.value).startswith("2:3: ")


def test_request_and_namespace_are_typed_as_kubernetes_declares_them(engine: Engine) -> None:
    """BuildRequestType has no `uid`; the namespace's type only its declared fields; a comprehension
    variable named `request` is not the request."""
    with pytest.raises(CelCompileError, match="undefined field 'uid'") as info:
        engine.compile("request.uid != ''")
    assert (info.value.line, info.value.column) == (1, 8)
    with pytest.raises(CelCompileError, match="undefined field 'nope'"):
        engine.compile("namespaceObject.metadata.nope == ''")
    with pytest.raises(CelCompileError, match="undefined field 'uid'"):
        engine.compile("has(request.uid)")
    for fine in (
        "request.userInfo.uid == ''",
        "request.kind.kind == 'Pod'",
        "request.options.anything == 1",
        "namespaceObject.metadata.labels.team == 'a'",
        "[{'uid': 1}].all(request, request.uid == 1)",
    ):
        engine.compile(fine)


#: compile errors cel-go (as Kubernetes configures it) reports, in its words and places: planning
#: (OptOptimize) evaluates conversions of constants and compiles find()'s literal pattern
_PLANNING = "1:1: program instantiation failed: "
_TO_INT = "type conversion error from 'string' to 'int'"
PLANNING_AND_SELECTION_ERRORS = [
    ("1 == 1 &&\n  int('x') == 1", _PLANNING + _TO_INT),
    ("uint(-1) == 1u", _PLANNING + "unsigned integer overflow"),
    ("int(string(1.5)) == 1", _PLANNING + _TO_INT),
    ("string(b'\\xff') == ''", _PLANNING + "invalid UTF-8 in bytes, cannot convert to string"),
    ("[1, 2].map(x, int('z'))", _PLANNING + _TO_INT),
    ("'a'.find('[') == ''", _PLANNING + "error parsing regexp: missing closing ]: `[`"),
    ("null.?x", "1:5: type 'null' does not support field selection"),
    ("[1].x", "1:4: type 'list(int)' does not support field selection"),
]


@pytest.mark.parametrize(("source", "error"), PLANNING_AND_SELECTION_ERRORS)
def test_compile_errors_found_planning_and_selecting(engine: Engine, source: str, error: str) -> None:
    with pytest.raises(CelCompileError) as info:
        engine.compile(source)
    assert str(info.value) == error
    assert evaluate(engine, "string(int('2')) == '2' && int(string(2.0)) == 2 && dyn('x') == 'x'") is True


def test_evaluation_errors_are_values(engine: Engine) -> None:
    result = evaluate(engine, "object.spec.nope == 1", object=POD)
    assert isinstance(result, CelError)
    assert result.message
    assert isinstance(evaluate(engine, "1 / 0"), CelError)


def test_result_types(engine: Engine) -> None:
    assert evaluate(engine, "1u + 2u") == 3 and isinstance(evaluate(engine, "1u + 2u"), Uint)
    assert evaluate(engine, "2.5 * 2.0") == 5.0
    assert evaluate(engine, "b'ab\\x00c'") == b"ab\x00c"
    assert evaluate(engine, "null") is None
    assert evaluate(engine, "{'k': [dyn(1), dyn('x')]}.k") == [1, "x"]
    assert evaluate(engine, "duration('90s')") == datetime.timedelta(seconds=90)
    ts = evaluate(engine, "timestamp('2024-01-02T03:04:05Z')")
    assert ts == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    # a library value: the k8slib object (cel-python) or Kubernetes' own text of it (cel-go)
    assert encode(evaluate(engine, "quantity('1.5Gi')")) == {"t": "quantity", "v": "1536Mi"}
    opt = evaluate(engine, "object.?metadata", object=POD)
    assert isinstance(opt, CelError) and "optional" in opt.message


def test_variables_in_order_lazily_and_once(engine: Engine) -> None:
    variables = {
        "names": "object.spec.containers.map(c, c.name)",
        "count": "size(variables.names)",
        "broken": "object.spec.nope.deeper",  # an error, but never used below
    }
    assert evaluate(engine, "variables.count == 2", object=POD, variables=variables) is True
    assert evaluate(engine, "variables.names.join('+')", object=POD, variables=variables) == "a+b"
    assert isinstance(evaluate(engine, "variables.broken", object=POD, variables=variables), CelError)
    # the checker knows each variable's type
    assert engine.compile("variables.count", variables).output_type == "int"
    assert engine.compile("variables.names", variables).output_type == "list(dyn)"


def test_variable_errors_name_the_variable(engine: Engine) -> None:
    with pytest.raises(VariableCompileError) as info:
        engine.compile("true", {"ok": "1", "bad": "1 +\n 'a'"})
    assert info.value.variable == "bad"
    assert (info.value.line, info.value.column) == (1, 3)
    with pytest.raises(CelCompileError, match="undefined field 'nope'"):
        engine.compile("variables.nope", {"ok": "1"})
    with pytest.raises(CelCompileError, match="undefined field 'later'"):
        engine.compile("true", {"first": "variables.later", "later": "1"})
    with pytest.raises(CelCompileError, match="reserved"):
        engine.compile("true", {"params": "1"})


def test_builtin_variables(engine: Engine) -> None:
    constraint = {"kind": "K8sPrivileged", "spec": {"parameters": {"x": 1}}}
    src = "[variables.params.x, params.spec.parameters.x]"
    assert evaluate(engine, src, params={"x": 1}, constraint=constraint) == [1, 1]
    assert evaluate(engine, "variables.params == null") is True
    assert evaluate(engine, "params == null") is True
    delete = {"operation": "DELETE"}
    assert evaluate(engine, "variables.anyObject.metadata.name", old_object=POD, request=delete) == "p"
    assert (
        evaluate(engine, "variables.anyObject.metadata.name", object=POD, request={"operation": "CREATE"})
        == "p"
    )


def test_gatekeeper_privileged_template(engine: Engine) -> None:
    msg = "variables.badContainers.join(', ')"
    ok = "variables.isUpdate || size(variables.badContainers) == 0"
    create = {"operation": "CREATE"}
    assert evaluate(engine, ok, object=POD, request=create, variables=PRIVILEGED_VARIABLES) is False
    assert (
        evaluate(engine, msg, object=POD, request=create, variables=PRIVILEGED_VARIABLES)
        == "Privileged container is not allowed: a, securityContext.privileged: true"
    )
    exempt = {"exemptImages": ["nginx:*"]}
    assert (
        evaluate(engine, ok, object=POD, request=create, params=exempt, variables=PRIVILEGED_VARIABLES)
        is True
    )
    assert (
        evaluate(engine, ok, object=POD, request={"operation": "UPDATE"}, variables=PRIVILEGED_VARIABLES)
        is True
    )


def test_one_activation_for_many_programs_and_params(engine: Engine) -> None:
    act = engine.activation(object=POD, old_object=None, request={"operation": "CREATE"})
    program = engine.compile("object.spec.containers.exists(c, c.image.startsWith(variables.params.prefix))")
    assert engine.evaluate(program, act, params={"prefix": "nginx"}) is True
    assert engine.evaluate(program, act, params={"prefix": "mysql"}) is False
    assert isinstance(engine.evaluate(program, act, params=None), CelError)
    other = engine.compile("object.metadata.labels.app")
    assert engine.evaluate(other, act) == "web"


def test_threads_share_an_engine(engine: Engine) -> None:
    program = engine.compile("variables.params.n * 2")
    errors: list[object] = []

    def work(n: int) -> None:
        act = engine.activation(object=POD, old_object=None, request={})
        for _ in range(50):
            got = engine.evaluate(program, act, params={"n": n})
            if got != n * 2:
                errors.append(got)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_transform_map_works_on_both_engines(engine: Engine) -> None:
    assert evaluate(engine, "{'a': 1, 'b': 2}.transformMap(k, v, v * 10)") == {"a": 10, "b": 20}
    assert evaluate(engine, "[5, 6].transformMapEntry(i, v, {string(v): i})") == {"5": 0, "6": 1}


def test_a_string_is_never_a_library_value(engine: Engine) -> None:
    assert isinstance(evaluate(engine, "dyn('1.5Gi').asApproximateFloat()"), CelError)
    assert evaluate(engine, "'\\x1fQiSv:1:0AAAAAAAAAAAA'") == "\x1fQiSv:1:0AAAAAAAAAAAA"
    assert evaluate(engine, "{'@kubernetes.Quantity': 'iSv:1:0|0'}") == {"@kubernetes.Quantity": "iSv:1:0|0"}
    # a value of another library type is no such overload, as in Kubernetes
    assert isinstance(evaluate(engine, "dyn(quantity('1')).major()"), CelError)
    assert evaluate(engine, "dyn(quantity('1')) == dyn(quantity('1000m'))") is True


def test_string_of_a_dyn_ip_or_cidr_is_its_text(engine: Engine) -> None:
    assert evaluate(engine, "string(dyn(ip('10.0.0.1')))") == "10.0.0.1"
    assert evaluate(engine, "[dyn(cidr('10.0.0.0/8'))].map(c, string(c))") == ["10.0.0.0/8"]
    assert evaluate(engine, "string({'a': dyn(ip('::1')), 'b': dyn(1)}['a'])") == "::1"
    got = evaluate(engine, "[dyn(ip('::1')), dyn(1), dyn('x'), dyn(2.5)].map(v, string(v))")
    assert got == ["::1", "1", "x", "2.5"]
    got = evaluate(engine, "string(dyn(quantity('1')))")
    assert isinstance(got, CelError) and "no such overload" in got.message
    # a user string is converted as any string
    assert evaluate(engine, "string(params.s)", constraint={"s": "10.0.0.1"}) == "10.0.0.1"


def test_memoised_library_calls_never_remember_errors(engine: Engine) -> None:
    act = engine.activation(object=None, old_object=None, request={})
    size = engine.compile("quantity(variables.params.q).isLessThan(quantity('1Gi'))")
    find = engine.compile("'a-b-c'.find(variables.params.re)")
    for q, want in [("bad", None), ("512Mi", True), ("bad", None), ("2Gi", False), ("512Mi", True)]:
        got = engine.evaluate(size, act, params={"q": q})
        if want is None:
            assert isinstance(got, CelError) and "quantities must match" in got.message
        else:
            assert got is want
    for pattern, found in [("-.", "-b"), ("(", None), ("-.", "-b"), ("c$", "c"), ("(", None)]:
        got = engine.evaluate(find, act, params={"re": pattern})
        if found is None:
            assert isinstance(got, CelError) and "Illegal regex" in got.message
        else:
            assert got == found


def _cel_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# (pattern, text, matches, find)
MATCH_CASES = [
    ("^[a-z-]+$", "web-1", False, ""),
    ("^[a-z-]+$", "web", True, "web"),
    ("é.", "caféx", True, "éx"),
    ("^.{5}$", "caféx", True, "caféx"),
    ("", "", True, ""),
    ("^$", "x", False, ""),
    ("(?i)WEB", "web", True, "web"),
    ("\\d{2,}", "a1b22", True, "22"),
    ("^[a-z]+(foo|bar)*[0-9]{0,12}$", "abcbarfoo123", True, "abcbarfoo123"),
]


@pytest.mark.parametrize(("pattern", "text", "matches", "found"), MATCH_CASES)
def test_literal_patterns_match_as_dynamic_ones(
    engine: Engine, pattern: str, text: str, matches: bool, found: str
) -> None:
    # a literal pattern may be compiled with the program, a dynamic one is compiled when evaluated: the
    # answers must not differ
    params = {"t": text, "p": pattern}
    assert evaluate(engine, f"params.t.matches({_cel_string(pattern)})", constraint=params) is matches
    assert evaluate(engine, "params.t.matches(params.p)", constraint=params) is matches
    assert evaluate(engine, f"params.t.find({_cel_string(pattern)})", constraint=params) == found
    assert evaluate(engine, "params.t.find(params.p)", constraint=params) == found


def test_literal_matches_on_a_non_string_is_an_error(engine: Engine) -> None:
    got = evaluate(engine, "object.x.matches('b')", object={"x": 1})
    assert isinstance(got, CelError) and "@ck" not in got.message
    assert got.message == "no such overload"  # cel-go's wording, on both engines


def test_comprehension_variables_shadow_params(engine: Engine) -> None:
    constraint: dict[str, dict[str, dict[str, int]]] = {"spec": {"parameters": {}}}
    assert evaluate(engine, "[1, 2].all(params, params > 0)", constraint=constraint) is True
    assert evaluate(
        engine, "[1].map(params, params + 1) == [2] && params.spec != null", constraint=constraint
    )


def test_checking_environments_are_bounded_and_made_again_when_needed() -> None:
    """One checking environment per set of declared variable types (~400 KiB each once used): the
    frontend keeps a few, not one per template ever compiled."""
    from celkeeper.cel.celpython import frontend as frontend_module
    from celkeeper.cel.celpython.frontend import Frontend

    frontend = Frontend()
    kinds = ["1", "'a'", "[1]", "{'a': 1}", "true", "1.5", "[1].map(x, 'b')"]
    sources = []
    for i in range(frontend_module._ENV_CACHE_SIZE * 2):
        variables = {f"v{i}": kinds[i % len(kinds)], "w": kinds[(i + 1) % len(kinds)]}
        sources.append((f"variables.w == variables.w && variables.v{i} == variables.v{i}", variables))
    for source, variables in sources:
        frontend.compile(source, variables)
    assert len(frontend._envs) == frontend_module._ENV_CACHE_SIZE
    source, variables = sources[0]  # its environment was dropped: made again, same answer
    assert str(frontend.compile(source, variables).output_type) == "bool"


def test_deeply_nested_objects_reach_cel_go() -> None:
    """orjson serialises 254 levels; Kubernetes accepts objects nested 10,000 deep, and so must the
    engine's crossing (celkeeper/cel/celgo/engine.py _deep_dumps)."""
    engine = engine_named("cel-go")
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(3_000):
        node["a"] = [{}]
        node = node["a"][0]
    node["leaf"] = "here"
    program = engine.compile("has(object.a) && object.a[0].a[0].a.size() == 1")
    assert engine.evaluate(program, engine.activation(object=deep, old_object=None, request={})) is True
