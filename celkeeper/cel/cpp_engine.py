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
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from celkeeper.cel import appends, astcodec, binding, cpp_rewrites, fusion, library
from celkeeper.cel.api import Activation, CelError, Program
from celkeeper.cel.ast import Checked
from celkeeper.cel.cpp_bridge import CallBridge
from celkeeper.cel.cpp_extension import InProgress, cpp_extension
from celkeeper.cel.environment import VARIABLES, runtime_yaml
from celkeeper.cel.frontend import Compiled, Frontend
from celkeeper.cel.k8slib.celvalues import Uint
from celkeeper.cel.library import LibraryRuntime
from celkeeper.cel.opaque import OpaqueCodec
from celkeeper.cel.specialise import specialise
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
    bound: Checked | None = field(default=None, repr=False)  # the tree loaded into cel-cpp


@dataclass(frozen=True, eq=False)
class Prepared:
    """Programs specialised for several bindings (`CelExprPythonEngine.prepare`)."""

    expression: Any  # cel.Expression: a list of `outputs` booleans per distinct binding
    outputs: int
    layout: tuple[int, ...]  # per binding given: its distinct binding
    distinct: int


class CppActivation:
    """One admission request's inputs; converted by cel-cpp lazily, on first use of each variable."""

    __slots__ = ("_act",)

    def __init__(self, env: Any, data: dict[str, Any]) -> None:
        self._act = env.Activation(data)


class CelExprPythonEngine:
    """The default engine (cel-expr-python 0.1.x). See the module docstring for thread safety."""

    name = NAME

    def __init__(self, limits: CelLimits | None = None, frontend: Frontend | None = None) -> None:
        self.frontend = frontend or Frontend(limits)
        self._runtime = LibraryRuntime()
        self._current = InProgress()
        self._bridge = CallBridge()
        self._lock = self._bridge.lock
        self._settle_needed = self._bridge.pending  # a list: non-empty when results wait for release
        # evaluate_all's list programs: key -> (the programs (kept alive: their ids are the key), list)
        self._groups: dict[tuple[int, ...], tuple[tuple[Program, ...], CppProgram | None]] = {}
        # prepare's programs: (program ids, bindings) -> (the programs (kept alive), prepared)
        self._prepared: dict[tuple[tuple[int, ...], str], tuple[tuple[Program, ...], Prepared | None]] = {}
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
        checked = appends.linear_appends(checked)
        checked = self._bridge.rewrite(checked)
        expression = self._env.deserialize(astcodec.encode_checked(checked))
        return CppProgram(
            source, str(compiled.output_type), expression, compiled, tuple((variables or {}).items()), checked
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
                plain = self._booleans(group.expression, activation, params, constraint)
                if plain is not None and len(plain) == len(programs):
                    return plain
        return [self.evaluate(p, activation, params, constraint) for p in programs]

    def prepare(self, programs: Sequence[Program], bindings: Sequence[tuple[Any, Any]]) -> Prepared | None:
        """`programs` (boolean, compiled with the same variables: a template's validations) for every
        (params, constraint) of `bindings` at once, their parameters folded in as constants
        (`celkeeper.cel.specialise`): one evaluation for all, what does not depend on the parameters
        computed once. None when they do not qualify. Compiled programs are cached by the engine."""
        if not programs or not bindings:
            return None
        try:
            key = (tuple(map(id, programs)), json.dumps(list(bindings), allow_nan=True))
        except (TypeError, ValueError):
            return None
        hit = self._prepared.get(key)
        if hit is not None:
            return hit[1]
        prepared: Prepared | None = None
        base = programs[0] if len(programs) == 1 else self._group(programs)
        if (
            isinstance(base, CppProgram)
            and base.bound is not None
            and all(isinstance(p, CppProgram) and p.output_type == "bool" for p in programs)
        ):
            spec = specialise(base.bound, len(programs), bindings)
            if spec is not None:
                try:
                    expression = self._env.deserialize(astcodec.encode_checked(spec.checked))
                except (RuntimeError, ValueError):
                    expression = None
                if expression is not None:
                    prepared = Prepared(expression, spec.outputs, spec.layout, spec.distinct)
        if len(self._prepared) >= GROUP_CACHE_SIZE:
            self._prepared.clear()
        self._prepared[key] = (tuple(programs), prepared)
        return prepared

    def evaluate_prepared(self, prepared: Prepared, activation: Activation) -> list[list[bool]] | None:
        """The values of `prepare`d programs, per binding (in order): one list of booleans each; None
        when any program errs or is not boolean (then evaluate them one by one for the details)."""
        plain = self._booleans(prepared.expression, activation)
        m = prepared.outputs
        if plain is None or len(plain) != m * prepared.distinct:
            return None
        if prepared.distinct == 1:
            return [plain] * len(prepared.layout)  # the same values for every binding: shared, read-only
        return [plain[k * m : (k + 1) * m] for k in prepared.layout]

    def _booleans(
        self, expression: Any, activation: Activation, params: Any = None, constraint: Any = None
    ) -> list[Any] | None:
        """The value of a list program when every item is a boolean, else None (an error included)."""
        assert isinstance(activation, CppActivation)
        current = self._current
        with self._lock:
            current.params = params
            current.constraint = constraint
            try:
                value = expression.eval(activation._act)
                plain = value.plain_value() if value.type().name().startswith("LIST") else None
            except (RuntimeError, TypeError, ValueError):
                plain = None
            finally:
                current.params = current.constraint = None
                if self._settle_needed:
                    self._bridge.settle()
        if type(plain) is not list:
            return None
        for v in plain:
            if v is not True and v is not False:
                return None
        return plain

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
