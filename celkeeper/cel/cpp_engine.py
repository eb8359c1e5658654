"""The cel-expr-python backend: Google's cel-cpp runtime (the default engine).

Compiling goes through the shared front end (`celkeeper.cel.frontend`); the checked tree is then
bound (`celkeeper.cel.binding.bind`: Kubernetes library calls become internal `@k8s.*` calls,
`cel.@mapInsert` - which cel-cpp 0.1.3 declares for `transformMap`/`transformMapEntry` but does not
implement - becomes a Python function) and loaded into the runtime environment with
`Env.deserialize()`. The internal functions are Python callbacks (~1 us each, ~2 us more for each map
argument or result).

Thread and process safety: an engine (its environments and programs) may be shared by the
threads of one process: cel-cpp evaluates under the GIL, compiled programs are immutable, the
parameters of the evaluation in progress are kept per thread and the library runtime's caches are
safe to share. An `Activation` belongs to one request and is meant for one thread at a time (cel-cpp
converts its variables lazily). Nothing is shared across processes: each (forked) worker builds its
own engine (with its own MAC key for library values, see `celkeeper.cel.opaque`); programs do not
pickle (recompile, or serialize the source).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from celkeeper.cel import ast, astcodec, binding, library
from celkeeper.cel.api import Activation, CelError, Program
from celkeeper.cel.ast import Call, Checked, Comprehension, Const, Expr, Ident, ListExpr, Select
from celkeeper.cel.environment import FUNCTIONS, OPAQUE_TYPES, VARIABLES, runtime_yaml
from celkeeper.cel.frontend import Compiled, Frontend
from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.celvalues import Uint
from celkeeper.cel.library import LibraryRuntime
from celkeeper.cel.opaque import OpaqueCodec
from celkeeper.settings import CelLimits

NAME = "cel-expr-python"
OPTIONAL_RESULT = "cannot convert an optional result (use orValue() or hasValue())"
_T = cel.Type


@dataclass(frozen=True)
class CppProgram:
    source: str
    output_type: str
    expression: Any  # cel.Expression
    compiled: Compiled


class CppActivation:
    """One admission request's inputs; converted by cel-cpp lazily, on first use of each variable."""

    __slots__ = ("_act",)

    def __init__(self, env: Any, data: dict[str, Any]) -> None:
        self._act = env.Activation(data)


class _InProgress(threading.local):
    """The parameters of the evaluation in progress, per thread: what `@ck.params()` and
    `@ck.constraint()` return (functions registered once, on the engine's environment, rather than
    bound to each activation)."""

    params: Any = None
    constraint: Any = None


_RESULT_TYPES = {
    "bool": _T.BOOL,
    "int": _T.INT,
    "uint": _T.UINT,
    "double": _T.DOUBLE,
    "string": _T.STRING,
    "bytes": _T.BYTES,
    "google.protobuf.Duration": _T.DURATION,
    "google.protobuf.Timestamp": _T.TIMESTAMP,
}


def _result_type(result: str) -> Any:
    if result in OPAQUE_TYPES:
        return _T.MAP
    if result.startswith("list("):
        return _T.LIST
    if result.startswith("map("):
        return _T.MAP
    return _RESULT_TYPES.get(result, _T.DYN)


def _guard(name: str, fn: library.Impl, plain: bool = False) -> library.Impl:
    """Kubernetes' error messages as the exception text cel-cpp turns into an error value. `plain`:
    the result never holds bytes (a scalar other than bytes, or an opaque value), so is not walked."""

    if plain:

        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except LibraryError as err:
                raise ValueError(err.message) from None

    else:

        def call(*args: Any) -> Any:
            try:
                return _for_cpp(fn(*args))
            except LibraryError as err:
                raise ValueError(err.message) from None

    call.__name__ = name
    return call


def _for_cpp(value: Any) -> Any:
    """cel-expr-python 0.1.3 truncates Python bytes at the first NUL byte; a bytearray survives."""
    if isinstance(value, bytes):
        return bytearray(value)
    if isinstance(value, list):
        return [_for_cpp(v) for v in value]
    if isinstance(value, dict):
        return {k: _for_cpp(v) for k, v in value.items()}
    return value


# declared results whose values hold no bytes
_PLAIN_RESULTS = frozenset({"bool", "int", "uint", "double", "string", *OPAQUE_TYPES})


def cpp_extension(runtime: LibraryRuntime, current: _InProgress) -> Any:
    """The internal functions of a bound tree (implemented by `runtime`; the parameters of the
    evaluation in progress from `current`), for the cel-cpp runtime."""
    decls = []
    for name, impl in runtime.internal_functions().items():
        if name == library.MAP_INSERT:
            overloads = [
                cel.Overload("ck_map_insert", _T.MAP, [_T.MAP, _T.DYN, _T.DYN], impl=_guard(name, impl)),
                cel.Overload("ck_map_insert_map", _T.MAP, [_T.MAP, _T.MAP], impl=_guard(name, impl)),
            ]
        elif name in library.INTERNAL_SIGNATURES:
            arity, result_name = library.INTERNAL_SIGNATURES[name]
            overloads = [
                cel.Overload(name, _result_type(result_name), [_T.DYN] * arity, impl=_guard(name, impl))
            ]
        elif name.startswith(("@k8s.eq.", "@k8s.ne.")):
            overloads = [cel.Overload(name, _T.BOOL, [_T.DYN, _T.DYN], impl=_guard(name, impl, True))]
        elif name.startswith("@k8s.fn."):  # any arity of that function
            arities = sorted(
                {len(o.args) for o in FUNCTIONS.values() if o.function == name[len("@k8s.fn.") :]}
            )
            overloads = [
                cel.Overload(f"{name}_{n}", _T.DYN, [_T.DYN] * n, impl=_guard(name, impl)) for n in arities
            ]
        else:  # @k8s.<overload id>
            o = FUNCTIONS[name[len("@k8s.") :]]
            optional = o.id in library.OPTIONAL_RESULTS
            result = _T.DYN if optional else _result_type(o.result)
            plain = o.result in _PLAIN_RESULTS and not optional
            overloads = [cel.Overload(name, result, [_T.DYN] * len(o.args), impl=_guard(name, impl, plain))]
        decls.append(cel.FunctionDecl(name, overloads))
    # Kubernetes overloads of names shared with the standard library, for dyn arguments
    index_of = runtime.dispatcher("indexOf")
    last_index_of = runtime.dispatcher("lastIndexOf")
    decls += [
        cel.FunctionDecl(
            "string",
            [
                cel.Overload(
                    "ck_string_opaque",
                    _T.STRING,
                    [_T.MAP],
                    impl=_guard("string", runtime.opaque_string, True),
                )
            ],
        ),
        cel.FunctionDecl(
            "indexOf",
            [
                cel.Overload(
                    "ck_list_index_of",
                    _T.INT,
                    [_T.LIST, _T.DYN],
                    is_member=True,
                    impl=_guard("indexOf", index_of),
                )
            ],
        ),
        cel.FunctionDecl(
            "lastIndexOf",
            [
                cel.Overload(
                    "ck_list_last_index_of",
                    _T.INT,
                    [_T.LIST, _T.DYN],
                    is_member=True,
                    impl=_guard("lastIndexOf", last_index_of),
                )
            ],
        ),
        cel.FunctionDecl(
            library.MATCHES,
            [
                cel.Overload(
                    "ck_matches_string",
                    _T.BOOL,
                    [_T.STRING, _T.STRING],
                    is_member=True,
                    impl=_guard("matches", runtime.matches, True),
                )
            ],
        ),
        cel.FunctionDecl("@ck.params", [cel.Overload("ck_params", _T.DYN, [], impl=lambda: current.params)]),
        cel.FunctionDecl(
            "@ck.constraint",
            [cel.Overload("ck_constraint", _T.DYN, [], impl=lambda: current.constraint)],
        ),
    ]
    return cel.CelExtension("celkeeper", decls)


class CelExprPythonEngine:
    """The default engine (cel-expr-python 0.1.x). See the module docstring for thread safety."""

    name = NAME

    def __init__(self, limits: CelLimits | None = None, frontend: Frontend | None = None) -> None:
        self.frontend = frontend or Frontend(limits)
        self._runtime = LibraryRuntime()
        self._current = _InProgress()
        self._env = cel.NewEnv(
            config=cel.NewEnvConfigFromYaml(runtime_yaml()),
            variables=dict.fromkeys(VARIABLES, _T.DYN),
            extensions=[cpp_extension(self._runtime, self._current)],
        )

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> CppProgram:
        compiled = self.frontend.compile(source, variables)
        checked = _literal_matches(_null_safe_has(binding.bind(_copy(compiled.checked))))
        expression = self._env.deserialize(astcodec.encode_checked(checked))
        return CppProgram(source, str(compiled.output_type), expression, compiled)

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any],
        namespace_object: Any = None,
    ) -> CppActivation:
        data = {
            "object": object,
            "oldObject": old_object,
            "request": request if isinstance(request, dict) or request is None else dict(request),
            "namespaceObject": namespace_object,
            "params": None,
        }
        return CppActivation(self._env, data)

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any | CelError:
        assert isinstance(program, CppProgram) and isinstance(activation, CppActivation)
        current = self._current
        current.params = params
        current.constraint = constraint
        try:
            value = program.expression.eval(activation._act)
        except RuntimeError as exc:
            return CelError(library.clean_error(str(exc)))
        finally:
            current.params = None
            current.constraint = None
        if program.output_type == "bool":  # the common case, without asking the value its type
            plain = value.value()  # a bool, or an error's text
            if plain is True or plain is False:
                return plain
        return to_python(value, self._runtime.codec)


def _null_safe_has(checked: Checked) -> Checked:
    """cel-go answers `has(e.f)` with false when `e` is null; cel-cpp with an error. Rewrite
    `has(e.f)` as `e == null ? false : has(e.f)` (binding `e` once unless it is a plain selection)."""
    counter = [checked.max_id() + 1]

    def fresh() -> int:
        counter[0] += 1
        return counter[0]

    def plain(node: Expr) -> bool:
        while isinstance(node, Select) and not node.test_only:
            node = node.operand
        return isinstance(node, Ident)

    def clone(node: Expr) -> Expr:
        copied = copy.deepcopy(node)
        for n in ast.walk(copied):
            old = n.id
            n.id = fresh()
            if old in checked.references:
                checked.references[n.id] = checked.references[old]
        return copied

    def guarded(operand: Expr, test: Select) -> Expr:
        is_null = Call(fresh(), "_==_", [operand, Const(fresh(), "null", None)])
        return Call(fresh(), "_?_:_", [is_null, Const(fresh(), "bool", False), test])

    def fix(node: Expr) -> Expr:
        if not (isinstance(node, Select) and node.test_only):
            return node
        if plain(node.operand):
            return guarded(clone(node.operand), node)
        name = f"@ck.has{fresh()}"
        test = Select(node.id, Ident(fresh(), name), node.field, True)
        return Comprehension(
            fresh(),
            iter_var="@ck.unused",
            iter_range=ListExpr(fresh(), []),
            accu_var=name,
            accu_init=node.operand,
            loop_condition=Const(fresh(), "bool", False),
            loop_step=Ident(fresh(), name),
            result=guarded(Ident(fresh(), name), test),
        )

    root = fix(checked.expr)
    for n in list(ast.walk(root)):
        ast.replace_children(n, fix)
    checked.expr = root
    return checked


def _literal_matches(checked: Checked) -> Checked:
    """`s.matches('<literal>')` as `s.@ck.matches('<literal>')`: cel-cpp compiles the pattern on every
    call (~5-25 us); the runtime's `matches` keeps it compiled (same RE2, same partial match). Literal
    patterns were compiled when the expression was checked (validators), so this call cannot meet an
    invalid one; a receiver that is not a string still finds no overload (cel-cpp dispatches on the
    declared string parameters, and `clean_error` gives the message back its public name)."""
    for node in ast.walk(checked.expr):
        if (
            isinstance(node, Call)
            and node.function == "matches"
            and node.target is not None
            and len(node.args) == 1
            and isinstance(node.args[0], Const)
            and node.args[0].kind == "string"
        ):
            ref = checked.references.get(node.id)
            if ref is not None and ref.overload_ids == ["matches_string"]:
                node.function = library.MATCHES
                checked.references.pop(node.id, None)
    return checked


def _copy(checked: Checked) -> Checked:
    return Checked(
        copy.deepcopy(checked.expr),
        checked.types,
        dict(checked.references),
        checked.positions,
        checked.line_offsets,
        checked.raw_types,
    )


def to_python(value: Any, codec: OpaqueCodec) -> Any | CelError:
    """A cel.Value as plain Python data (opaque Kubernetes values decoded), or a CelError."""
    kind = value.type().name()
    if kind == "BOOL":
        return bool(value.value())
    if kind == "ERROR":
        try:
            return CelError(library.clean_error(str(value.value())))
        except TypeError:  # cel-expr-python reports optional values as ERROR and cannot convert them
            return CelError(OPTIONAL_RESULT)
    try:
        plain = _plain(value, kind)
    except (RuntimeError, TypeError, ValueError) as exc:
        return CelError(f"cannot convert a {kind.lower()} result: {library.clean_error(str(exc))}")
    return codec.decode_result(plain)


def _plain(value: Any, kind: str) -> Any:
    """Like Value.plain_value(), but uint values stay distinguishable (as k8slib's Uint)."""
    if kind == "UINT":
        return Uint(value.value())
    if kind.startswith("LIST"):
        return [_plain(v, v.type().name()) for v in value.value()]
    if kind.startswith("MAP"):
        return {k: _plain(v, v.type().name()) for k, v in value.value().items()}
    plain = value.plain_value()
    return bytes(plain) if isinstance(plain, bytearray) else plain
