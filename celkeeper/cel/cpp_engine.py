"""The cel-expr-python backend: Google's cel-cpp runtime (the default engine).

Compiling goes through the shared front end (`celkeeper.cel.frontend`); the checked tree is then
bound (`celkeeper.cel.binding.bind`: Kubernetes library calls become internal `@k8s.*` calls,
`cel.@mapInsert` - which cel-cpp 0.1.3 declares for `transformMap`/`transformMapEntry` but does not
implement - becomes a Python function) and loaded into the runtime environment with
`Env.deserialize()`. The internal functions are Python callbacks (~1-2 us each), registered through
`celkeeper.cel.cpp_bridge.CallBridge`, which takes back the references cel-expr-python 0.1.3 leaks
on every Python call (the calls are rewritten for it: `celkeeper.cel.cpp_rewrites`).

Thread and process safety: an engine (its environments and programs) may be shared by the
threads of one process: evaluations run one at a time under the bridge's lock (cel-cpp holds the GIL
for an evaluation anyway), compiled programs are immutable, and the library runtime's caches are
safe to share. An `Activation` belongs to one request and is meant for one thread at a time (cel-cpp
converts its variables lazily). Nothing is shared across processes: each (forked) worker builds its
own engine (with its own MAC key for library values, see `celkeeper.cel.opaque`); programs do not
pickle (recompile, or serialize the source).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from celkeeper.cel import astcodec, binding, cpp_rewrites, fusion, library
from celkeeper.cel.api import Activation, CelError, Program
from celkeeper.cel.ast import Checked
from celkeeper.cel.cpp_bridge import CallBridge
from celkeeper.cel.environment import FUNCTIONS, OPAQUE_TYPES, VARIABLES, runtime_yaml
from celkeeper.cel.frontend import Compiled, Frontend
from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.celvalues import Uint
from celkeeper.cel.library import LibraryRuntime
from celkeeper.cel.opaque import OpaqueCodec
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

NAME = "cel-expr-python"
#: list programs of evaluate_all an engine keeps (emptied when full)
GROUP_CACHE_SIZE = 4096
OPTIONAL_RESULT = "cannot convert an optional result (use orValue() or hasValue())"
_T = cel.Type


@dataclass(frozen=True)
class CppProgram:
    source: str
    output_type: str
    expression: Any  # cel.Expression
    compiled: Compiled
    variables: tuple[tuple[str, str], ...] = ()  # as compiled with (name, source), in order


class CppActivation:
    """One admission request's inputs; converted by cel-cpp lazily, on first use of each variable."""

    __slots__ = ("_act",)

    def __init__(self, env: Any, data: dict[str, Any]) -> None:
        self._act = env.Activation(data)


class _InProgress:
    """The parameters of the evaluation in progress: what `@ck.params()` and `@ck.constraint()`
    return (functions registered once, on the engine's environment, rather than bound to each
    activation). One evaluation at a time: the engine evaluates under its bridge's lock."""

    __slots__ = ("constraint", "params")

    def __init__(self) -> None:
        self.params: Any = None
        self.constraint: Any = None


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
        return _T.STRING  # a token (celkeeper.cel.opaque)
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


def _library_signature(name: str) -> tuple[Any, int, bool]:
    """(result type, arity, plain result) of `@k8s.<overload id>` or `@k8s.eq|ne.<type>`."""
    if name.startswith(("@k8s.eq.", "@k8s.ne.")):
        return _T.BOOL, 2, True
    o = FUNCTIONS[name[len("@k8s.") :]]
    optional = o.id in library.OPTIONAL_RESULTS
    result = _T.DYN if optional else _result_type(o.result)
    return result, len(o.args), o.result in _PLAIN_RESULTS and not optional


def cpp_extension(runtime: LibraryRuntime, current: _InProgress, bridge: CallBridge) -> Any:
    """The internal functions of a bound tree (implemented by `runtime`; the parameters of the
    evaluation in progress from `current`), for the cel-cpp runtime, registered through `bridge`."""
    decls: list[Any] = []

    def add(name: str, overloads: list[tuple[str, Any, list[Any], bool]], impl: library.Impl) -> None:
        decls.extend(bridge.functions(name, overloads, impl))

    for name, impl in runtime.internal_functions().items():
        if name == library.MAP_INSERT:
            overloads = [
                ("ck_map_insert", _T.MAP, [_T.MAP, _T.DYN, _T.DYN], False),
                ("ck_map_insert_map", _T.MAP, [_T.MAP, _T.MAP], False),
            ]
            add(name, overloads, _guard(name, impl))
        elif name in library.INTERNAL_SIGNATURES:
            arity, result_name = library.INTERNAL_SIGNATURES[name]
            add(name, [(name, _result_type(result_name), [_T.DYN] * arity, False)], _guard(name, impl))
        elif name.startswith("@k8s.fn."):  # any arity of that function
            arities = sorted(
                {len(o.args) for o in FUNCTIONS.values() if o.function == name[len("@k8s.fn.") :]}
            )
            add(name, [(f"{name}_{n}", _T.DYN, [_T.DYN] * n, False) for n in arities], _guard(name, impl))
        else:  # @k8s.<overload id>, @k8s.eq.<type>, @k8s.ne.<type>
            result, arity, plain = _library_signature(name)
            add(name, [(name, result, [_T.DYN] * arity, False)], _guard(name, impl, plain))
    for name, impl in fusion.fused_functions(runtime).items():
        result, arity, plain = _library_signature(name[: name.index("<")])
        add(name, [(name, result, [_T.DYN] * arity, False)], _guard(name, impl, plain))
    add(
        cpp_rewrites.STRING_OF_STRING,
        [("ck_string_of_string", _T.STRING, [_T.STRING], False)],
        _guard("string", runtime.string_of_string, True),
    )
    add(
        library.MATCHES,
        [("ck_matches_string", _T.BOOL, [_T.STRING, _T.STRING], True)],
        _guard("matches", runtime.matches, True),
    )
    add("@ck.params", [("ck_params", _T.DYN, [], False)], lambda: current.params)
    add("@ck.constraint", [("ck_constraint", _T.DYN, [], False)], lambda: current.constraint)
    # Kubernetes overloads of names shared with the standard library, for list receivers of calls
    # that reach the engine unrewritten (cpp_rewrites.dyn_list_index rewrites the ones it can tell):
    # called directly, so leaky (docs/known-issues.md)
    for shared in ("indexOf", "lastIndexOf"):
        decls.append(
            cel.FunctionDecl(
                shared,
                [
                    cel.Overload(
                        f"ck_list_{shared}",
                        _T.INT,
                        [_T.LIST, _T.DYN],
                        is_member=True,
                        impl=_guard(shared, runtime.dispatcher(shared)),
                    )
                ],
            )
        )
    return cel.CelExtension("celkeeper", decls)


class CelExprPythonEngine:
    """The default engine (cel-expr-python 0.1.x). See the module docstring for thread safety."""

    name = NAME

    def __init__(self, limits: CelLimits | None = None, frontend: Frontend | None = None) -> None:
        self.frontend = frontend or Frontend(limits)
        self._runtime = LibraryRuntime()
        self._current = _InProgress()
        self._bridge = CallBridge()
        self._lock = self._bridge.lock
        self._settle_needed = self._bridge.pending  # a list: non-empty when results wait for release
        # evaluate_all's list programs: key -> (the programs (kept alive: their ids are the key), list)
        self._groups: dict[tuple[int, ...], tuple[tuple[Program, ...], CppProgram | None]] = {}
        self._env = cel.NewEnv(
            config=cel.NewEnvConfigFromYaml(runtime_yaml()),
            variables=dict.fromkeys(VARIABLES, _T.DYN),
            extensions=[cpp_extension(self._runtime, self._current, self._bridge)],
        )

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> CppProgram:
        compiled = self.frontend.compile(source, variables)
        checked = fusion.fuse(binding.bind(_copy(compiled.checked)))
        checked = cpp_rewrites.literal_matches(cpp_rewrites.null_safe_has(checked))
        checked = cpp_rewrites.dyn_list_index(cpp_rewrites.dyn_string(checked))
        checked = self._bridge.rewrite(checked)
        expression = self._env.deserialize(astcodec.encode_checked(checked))
        return CppProgram(
            source, str(compiled.output_type), expression, compiled, tuple((variables or {}).items())
        )

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
        with self._lock:
            current.params = params
            current.constraint = constraint
            try:
                value = program.expression.eval(activation._act)
            except RuntimeError as exc:
                return CelError(library.clean_error(str(exc)))
            finally:
                current.params = current.constraint = None
                if self._settle_needed:
                    self._bridge.settle()
        if program.output_type == "bool":  # the common case, without asking the value its type
            plain = value.value()  # a bool, or an error's text
            if plain is True or plain is False:
                return plain
        return to_python(value, self._runtime.codec)

    def evaluate_all(
        self,
        programs: Sequence[Program],
        activation: Activation,
        params: Any = None,
        constraint: Any = None,
    ) -> list[Any | CelError]:
        """`[evaluate(p, ...) for p in programs]`; boolean programs compiled with the same variables
        (a template's validations) are evaluated as one list, so that the variables they share are
        computed once. Any other outcome of the list (an error, a non-boolean) falls back to one by
        one, which then gives each program's own result or error."""
        if len(programs) > 1:
            group = self._group(programs)
            if group is not None:
                assert isinstance(activation, CppActivation)
                current = self._current
                with self._lock:
                    current.params = params
                    current.constraint = constraint
                    try:
                        value = group.expression.eval(activation._act)
                        plain = value.plain_value() if value.type().name().startswith("LIST") else None
                    except (RuntimeError, TypeError, ValueError):
                        plain = None
                    finally:
                        current.params = current.constraint = None
                        if self._settle_needed:
                            self._bridge.settle()
                if (
                    isinstance(plain, list)
                    and len(plain) == len(programs)
                    and all(v is True or v is False for v in plain)
                ):
                    return plain
        return [self.evaluate(p, activation, params, constraint) for p in programs]

    def _group(self, programs: Sequence[Program]) -> CppProgram | None:
        """The list program of `programs` (all boolean, same variables), compiled once; None when
        they do not qualify or the list does not compile (a safety limit)."""
        key = tuple(map(id, programs))  # exact: an entry keeps its programs (and so their ids) alive
        hit = self._groups.get(key)
        if hit is not None:
            return hit[1]
        group: CppProgram | None = None
        first = programs[0]
        if all(
            isinstance(p, CppProgram)
            and p.output_type == "bool"
            and p.variables == getattr(first, "variables", ())
            for p in programs
        ):
            source = "[" + ", ".join(f"({p.source}\n)" for p in programs) + "]"
            try:
                group = self.compile(source, dict(getattr(first, "variables", ())))
            except CelCompileError:
                group = None
        if len(self._groups) >= GROUP_CACHE_SIZE:
            self._groups.clear()
        self._groups[key] = (tuple(programs), group)
        return group


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
