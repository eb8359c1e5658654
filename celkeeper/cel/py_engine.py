"""The cel-python backend: celpy's interpreted runner (never its CompiledRunner).

Compiling goes through the shared front end (cel-cpp parses, type-checks and validates, so both
engines accept the same sources with the same errors and types); the bound tree is then lowered to
CEL text cel-python can parse (`celkeeper.cel.lowering`) and run by celpy's InterpretedRunner with
one addition to its evaluator: the `__ck_fold` macro, a general CEL comprehension (cel-python's own
macros follow neither CEL's error semantics nor two-variable comprehensions). Functions cel-python
lacks or gets wrong are in `celkeeper.cel.py_functions` / `py_extensions`.

Variables (`cel.@block` slots) are separate celpy programs, evaluated on first use and memoised
for the evaluation in progress.

Thread and process safety: an engine and its programs may be shared by threads; the evaluation in
progress (parameters, memoised variables) is kept per thread (`threading.local`), so evaluations
may run concurrently in different threads, each with its own activation. An `Activation` converts
request data to celpy values on first use and caches them: use it from one thread at a time.
Nothing is shared across processes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy.evaluation import CELEvalError, Evaluator

from celkeeper.cel import binding, library
from celkeeper.cel.api import Activation, CelError, Program
from celkeeper.cel.ast import Checked, Ident, walk
from celkeeper.cel.environment import VARIABLES
from celkeeper.cel.frontend import Frontend
from celkeeper.cel.library import LibraryRuntime
from celkeeper.cel.lowering import function_name, lower
from celkeeper.cel.py_functions import function_table
from celkeeper.cel.py_values import Optional, to_cel, to_python
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

NAME = "cel-python"


class _Evaluator(Evaluator):
    """celpy's interpreter plus `range.__ck_fold(iter, iter2, accu, init, cond, step, result)`."""

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _Evaluator(ast, activation=self.activation)

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        if tree.children[1] == "__ck_fold":
            return self._fold(tree)
        return super().member_dot_arg(tree)

    def _eval(self, tree: lark.Tree, bindings: dict[str, Any]) -> Any:
        sub = _Evaluator(tree, activation=self.activation)
        sub.set_activation(bindings)
        try:
            return sub.visit(tree)
        except CELEvalError as err:
            return err

    @staticmethod
    def _name(tree: Any) -> str:
        return str(next(tree.find_data("ident")).children[0])

    def _fold(self, tree: lark.Tree) -> Any:
        args = tree.children[2].children
        iter_var, iter_var2, accu_var = (self._name(a) for a in args[:3])
        init, cond, step, result = args[3:]
        rng = self.visit(tree.children[0])
        if isinstance(rng, CELEvalError):
            return rng
        if isinstance(rng, list):
            items: list[tuple[Any, Any]] = [(celpy.celtypes.IntType(i), v) for i, v in enumerate(rng)]
        elif isinstance(rng, dict):
            items = [(k, v) for k, v in rng.items()]
        else:
            return CELEvalError(
                f"expression of type '{type(rng).__name__}' cannot be the range of a comprehension"
            )
        accu = self.visit(init)
        two = iter_var2 != "__ck_none"
        for key, value in items:
            if two:
                bindings = {iter_var: key, iter_var2: value, accu_var: accu}
            else:
                bindings = {iter_var: value if isinstance(rng, list) else key, accu_var: accu}
            ok = self._eval(cond, bindings)
            if isinstance(ok, celpy.celtypes.BoolType | bool) and not ok:
                break
            accu = self._eval(step, bindings)
        return self._eval(result, {accu_var: accu})


class _Runner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _Evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


@dataclass(frozen=True)
class PyProgram:
    source: str
    output_type: str
    runner: Any
    slots: tuple[Any, ...]
    inputs: tuple[str, ...]  # the request variables the program reads
    text: str  # the lowered expression (for debugging)


@dataclass
class _Evaluation:
    program: PyProgram
    context: dict[str, Any]
    params: Any
    constraint: Any
    memo: dict[int, Any] = field(default_factory=dict)


class PyActivation:
    """One request's inputs, converted to celpy values on first use (then cached)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._raw = data
        self._converted: dict[str, Any] = {}

    def context(self, names: tuple[str, ...]) -> dict[str, Any]:
        out = {}
        for name in names:
            if name not in self._converted:
                self._converted[name] = to_cel(self._raw.get(name))
            out[name] = self._converted[name]
        return out


def _inputs(checked: Checked) -> tuple[str, ...]:
    names = {n.name for n in walk(checked.expr) if isinstance(n, Ident)}
    return tuple(v for v in VARIABLES if v in names)


class CelPythonEngine:
    """The cel-python engine. See the module docstring for thread safety."""

    name = NAME

    def __init__(self, limits: CelLimits | None = None, frontend: Frontend | None = None) -> None:
        self.frontend = frontend or Frontend(limits)
        self._env = celpy.Environment(runner_class=_Runner)
        self._state = threading.local()
        self._runtime = LibraryRuntime()
        self._functions = function_table(self._runtime)
        self._functions.update(
            {
                "__ck_slot": self._slot,
                function_name("@ck.params", False): lambda: to_cel(self._current().params),
                function_name("@ck.constraint", False): lambda: to_cel(self._current().constraint),
            }
        )

    def _current(self) -> _Evaluation:
        stack: list[_Evaluation] = self._state.stack
        return stack[-1]

    def _slot(self, n: Any) -> Any:
        ev = self._current()
        index = int(n)
        if index not in ev.memo:
            try:
                ev.memo[index] = ev.program.slots[index].evaluate(ev.context)
            except CELEvalError as err:
                ev.memo[index] = err
        return ev.memo[index]

    def _parse(self, text: str, source: str) -> Any:
        try:
            return self._env.program(self._env.compile(text), functions=self._functions)
        except Exception as exc:  # a lowering bug: report it as a compile error, not a crash
            raise CelCompileError(
                f"cel-python cannot run this expression (internal lowering error: {exc})"
            ) from None

    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> PyProgram:
        compiled = self.frontend.compile(source, variables)
        checked = binding.bind(_copy(compiled.checked))
        text, slot_texts = lower(checked)
        runner = self._parse(text, source)
        slots = tuple(self._parse(t, source) for t in slot_texts)
        return PyProgram(source, str(compiled.output_type), runner, slots, _inputs(checked), text)

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any],
        namespace_object: Any = None,
    ) -> PyActivation:
        return PyActivation(
            {
                "object": object,
                "oldObject": old_object,
                "request": dict(request) if request is not None else None,
                "namespaceObject": namespace_object,
                "params": None,
            }
        )

    def evaluate_all(
        self,
        programs: Sequence[Program],
        activation: Activation,
        params: Any = None,
        constraint: Any = None,
    ) -> list[Any | CelError]:
        """One by one (see `celkeeper.cel.api`)."""
        return [self.evaluate(p, activation, params, constraint) for p in programs]

    def prepare(self, programs: Sequence[Program], bindings: Sequence[tuple[Any, Any]]) -> None:
        """Nothing to prepare: this engine evaluates one program at a time (see `celkeeper.cel.api`)."""

    def evaluate_prepared(self, prepared: Any, activation: Activation) -> None:
        """Never called: `prepare` prepares nothing."""

    def evaluate(
        self, program: Program, activation: Activation, params: Any = None, constraint: Any = None
    ) -> Any | CelError:
        assert isinstance(program, PyProgram) and isinstance(activation, PyActivation)
        context = activation.context(program.inputs)
        stack = getattr(self._state, "stack", None)
        if stack is None:
            stack = self._state.stack = []
        stack.append(_Evaluation(program, context, params, constraint))
        try:
            value = program.runner.evaluate(context)
        except CELEvalError as err:
            return CelError(_message(err))
        except RecursionError:
            return CelError("expression too deeply nested to evaluate")
        finally:
            stack.pop()
        if isinstance(value, CELEvalError):
            return CelError(_message(value))
        if isinstance(value, Optional):
            return CelError("cannot convert an optional result (use orValue() or hasValue())")
        return self._runtime.codec.decode_result(to_python(value))


def _message(err: CELEvalError) -> str:
    return library.clean_error(str(err.args[0]) if err.args else "evaluation error")


def _copy(checked: Checked) -> Checked:
    import copy

    return Checked(
        copy.deepcopy(checked.expr),
        checked.types,
        dict(checked.references),
        checked.positions,
        checked.line_offsets,
        checked.raw_types,
    )
