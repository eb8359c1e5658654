"""The cel-python engine: celpy's interpreted runner (never its CompiledRunner), for machines without
Go; the cel-go engine is the reference it is cross-checked against.

Compiling goes through the front end (cel-cpp, through cel-expr-python, parses, type-checks and
validates against a declared copy of Kubernetes' environment: `frontend`, `environment`,
`validators`); the bound tree is then lowered to CEL text cel-python can parse (`lowering`) and run
by celpy's InterpretedRunner with one addition to its evaluator: the `__ck_fold` macro, a general CEL
comprehension (cel-python's own macros follow neither CEL's error semantics nor two-variable
comprehensions), which also counts the cost budget (`validator.CostBudget`). Functions cel-python
lacks or gets wrong are in `functions` / `extensions`; templates are decided by `validator`, a port
of Kubernetes' validator.

Variables (`cel.@block` slots) are separate celpy programs, evaluated on first use and memoised
for the evaluation in progress.

Thread and process safety: an engine and its programs may be shared by threads; the evaluation in
progress (parameters, memoised variables) is kept per thread (`threading.local`), so evaluations
may run concurrently in different threads, each with its own activation. An `Activation` converts
request data to celpy values on first use and caches them: use it from one thread at a time.
Nothing is shared across processes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy.evaluation import CELEvalError, Evaluator, NameContainer

from celkeeper.cel.api import Activation, CelError, Explained, Outcome, Program, RequestInput, TemplateSource
from celkeeper.cel.celpython import binding, dispatch, library, validator
from celkeeper.cel.celpython.ast import Checked, Ident, walk
from celkeeper.cel.celpython.environment import VARIABLES
from celkeeper.cel.celpython.frontend import Frontend
from celkeeper.cel.celpython.functions import function_table
from celkeeper.cel.celpython.inventory import PyInventory
from celkeeper.cel.celpython.library import LibraryRuntime
from celkeeper.cel.celpython.lowering import function_name, lower, mangle
from celkeeper.cel.celpython.validator import PyBinding, PyTemplate
from celkeeper.cel.celpython.values import Optional, to_cel, to_python
from celkeeper.cel.inventory import DATA_VARIABLE
from celkeeper.cel.k8slib import netip
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

NAME = "cel-python"


class _Evaluator(Evaluator):
    """celpy's interpreter plus `range.__ck_fold(iter, iter2, accu, init, cond, step, result)`.
    `state` is the engine's thread-local state (`budget`: the CostBudget in force, or None)."""

    state: Any = None

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        return type(self)(ast, activation=self.activation)

    def expr(self, tree: lark.Tree[Any]) -> Any:
        """`c ? a : b`: an error condition is the result (cel-go), before either branch is looked at."""
        if len(tree.children) == 3:
            condition = self.visit(tree.children[0])
            if isinstance(condition, CELEvalError):
                return condition
            if isinstance(condition, celpy.celtypes.BoolType | bool):
                return self.visit(tree.children[1] if condition else tree.children[2])
            return CELEvalError("no such overload")
        return super().expr(tree)

    def member_dot(self, tree: lark.Tree[Any]) -> Any:
        """`e.f`: a map's entry, else cel-go's error (dispatch.select)."""
        member = self.visit(tree.children[0])
        if isinstance(member, NameContainer):  # a dotted name celpy resolves itself
            return super().member_dot(tree)
        return dispatch.select(member, str(tree.children[1]))

    def member_dot_arg(self, tree: lark.Tree[Any]) -> Any:
        if tree.children[1] == "__ck_fold":
            return self._fold(tree)
        return super().member_dot_arg(tree)

    def _eval(self, tree: lark.Tree[Any], bindings: dict[str, Any]) -> Any:
        sub = type(self)(tree, activation=self.activation)
        sub.set_activation(bindings)
        try:
            return sub.visit(tree)
        except CELEvalError as err:
            return err

    @staticmethod
    def _name(tree: Any) -> str:
        return str(next(tree.find_data("ident")).children[0])

    def _fold(self, tree: lark.Tree[Any]) -> Any:
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
            return dispatch.not_iterable(rng)
        accu = self.visit(init)
        two = iter_var2 != "__ck_none"
        budget = getattr(self.state, "budget", None)
        step_cost = _step_cost(cond, step) if budget is not None else 0
        for key, value in items:
            if budget is not None:
                budget.spend(step_cost)
            if two:
                bindings = {iter_var: key, iter_var2: value, accu_var: accu}
            else:
                bindings = {iter_var: value if isinstance(rng, list) else key, accu_var: accu}
            ok = self._eval(cond, bindings)
            if isinstance(ok, celpy.celtypes.BoolType | bool) and not ok:
                break
            accu = self._eval(step, bindings)
        return self._eval(result, {accu_var: accu})


def _step_cost(cond: Any, step: Any) -> int:
    """The cost one comprehension step adds to the budget: about what Kubernetes' cost model charges
    for the loop's condition and step (one unit per operation or value read), estimated as half
    their tokens (identifiers, operators, literals): e.g. 6 for `exists_one(d, d.name == c.name)`,
    where Kubernetes charges 5, and 4 for `all(c, c.image == 'x')`, where it charges 6."""
    tokens = sum(1 for t in (cond, step) if not isinstance(t, lark.Tree))
    tokens += sum(
        len(tree.children) - sum(isinstance(c, lark.Tree) for c in tree.children)
        for t in (cond, step)
        if isinstance(t, lark.Tree)
        for tree in t.iter_subtrees()
    )
    return max(1, tokens // 2)


class _Runner(celpy.InterpretedRunner):
    evaluator: type[_Evaluator] = _Evaluator

    def evaluate(self, context: Any) -> Any:
        return self.evaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


@dataclass(frozen=True)
class PyProgram:
    source: str
    output_type: str
    runner: Any
    slots: tuple[Any, ...]
    slot_names: tuple[str, ...]  # what each slot holds: a variable's name, "params", "@constraint"
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

    def __init__(self, data: dict[str, Any], converted: dict[str, Any] | None = None) -> None:
        self._raw = data
        self._converted: dict[str, Any] = {} if converted is None else converted
        self._data: Any = None

    def with_data(self, data: Any) -> PyActivation:
        """The same inputs plus `data` (a template's synced data, plain Python data), sharing what
        has been converted already."""
        child = PyActivation(self._raw, self._converted)
        child._data = data
        return child

    def context(self, names: tuple[str, ...]) -> dict[str, Any]:
        out = {}
        for name in names:
            if name == DATA_VARIABLE:
                if self._data is not None and not isinstance(self._data, _Converted):
                    self._data = _Converted(to_cel(self._data))
                out[name] = self._data.value if self._data is not None else None
                continue
            if name in _TYPE_CONSTANTS:
                out[name] = _TYPE_CONSTANTS[name]
                continue
            if name not in self._converted:
                self._converted[name] = to_cel(self._raw.get(name))
            out[name] = self._converted[name]
        return out


@dataclass(frozen=True)
class _Converted:
    value: Any


_INPUTS = (*VARIABLES, DATA_VARIABLE)


#: type identifiers with dots, by the name the lowering gives them: the values `type()` returns
_TYPE_CONSTANTS: dict[str, Any] = {
    mangle("net.IP"): netip.Addr,
    mangle("net.CIDR"): netip.Prefix,
    mangle("google.protobuf.Timestamp"): celpy.celtypes.TimestampType,
    mangle("google.protobuf.Duration"): celpy.celtypes.DurationType,
}


def _inputs(checked: Checked) -> tuple[str, ...]:
    """The request variables and dotted type identifiers the program reads."""
    names = {n.name for n in walk(checked.expr) if isinstance(n, Ident)}
    types = tuple(mangle(n) for n in sorted(names) if mangle(n) in _TYPE_CONSTANTS)
    return tuple(v for v in _INPUTS if v in names) + types


class CelPythonEngine:
    """The cel-python engine. See the module docstring for thread safety."""

    name = NAME

    def __init__(self, limits: CelLimits | None = None, frontend: Frontend | None = None) -> None:
        self.frontend = frontend or Frontend(limits)
        self._state = threading.local()
        evaluator = type("_EngineEvaluator", (_Evaluator,), {"state": self._state})
        runner = type("_EngineRunner", (_Runner,), {"evaluator": evaluator})
        self._env = celpy.Environment(runner_class=runner)
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
                value = ev.program.slots[index].evaluate(ev.context)
            except CELEvalError as err:
                value = err
            if isinstance(value, CELEvalError):  # worded as composition.go's variableAccessor does
                name = ev.program.slot_names[index]
                value = CELEvalError(f'composited variable "{name}" fails to evaluate: {_message(value)}')
            ev.memo[index] = value
        return ev.memo[index]

    def _parse(self, text: str, source: str) -> Any:
        try:
            return self._env.program(self._env.compile(text), functions=self._functions)
        except Exception as exc:  # a lowering bug: report it as a compile error, not a crash
            raise CelCompileError(
                f"cel-python cannot run this expression (internal lowering error: {exc})"
            ) from exc

    def compile(
        self, source: str, variables: Mapping[str, str] | None = None, *, data: bool = False
    ) -> PyProgram:
        compiled = self.frontend.compile(source, variables, data=data)
        checked = binding.bind(_copy(compiled.checked))
        text, slot_texts = lower(checked)
        runner = self._parse(text, source)
        slots = tuple(self._parse(t, source) for t in slot_texts)
        return PyProgram(
            source, str(compiled.output_type), runner, slots, compiled.slots, _inputs(checked), text
        )

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any] | None,
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

    # -- templates ------------------------------------------------------------------------------
    def compile_template(self, source: TemplateSource) -> PyTemplate:
        data = bool(source.data_kinds)

        def compile_one(text: str, variables: Mapping[str, str]) -> PyProgram:
            return self.compile(text, variables, data=data)

        return validator.compile_template(compile_one, self.frontend.undeclared_params, source)

    def open_inventory(self, path: str) -> PyInventory:
        return PyInventory(path)

    def bind(self, program: Any, constraint: Mapping[str, Any]) -> PyBinding:
        assert isinstance(program, PyTemplate)
        return validator.bind(program, constraint)

    def validate(self, request: RequestInput, bindings: Sequence[Any], timeout: float) -> list[Outcome]:
        return validator.Validator(self, request, self._state, timeout).run(bindings)

    def explain(self, request: RequestInput, bindings: Sequence[Any], timeout: float) -> list[Explained]:
        return validator.Validator(self, request, self._state, timeout).explain(bindings)

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


#: celpy's wording of runtime errors -> cel-go's (users see these texts in denial messages)
_CEL_GO_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^no such member in mapping: '(.*)'$", re.S), r"no such key: \1"),
    (re.compile(r"^found no matching overload for .*", re.S), "no such overload"),
    (re.compile(r"^return error for overflow$"), "integer overflow"),
    (re.compile(r"^invalid literal for int\(\).*", re.S), "type conversion error from 'string' to 'int'"),
    (
        re.compile(r"^could not convert string to float.*", re.S),
        "type conversion error from 'string' to 'double'",
    ),
    (
        re.compile(r"^Invalid duration .*", re.S),
        "type conversion error from 'string' to 'google.protobuf.Duration'",
    ),
    (re.compile(r"^invalid regular expression: (error parsing regexp: .*)$", re.S), r"\1"),
    (
        re.compile(r"^ListType\(.* does not support field selection$", re.S),
        "unsupported index type 'string' in list",
    ),
)


def _message(err: CELEvalError) -> str:
    text = library.clean_error(str(err.args[0]) if err.args else "evaluation error")
    if text.startswith("None with type:") and text.endswith("does not support field selection"):
        tree = getattr(err, "tree", None)  # the member_dot node: its last child names the field
        field = str(tree.children[-1]) if isinstance(tree, lark.Tree) and tree.children else ""
        return f"no such key: {field}" if field else "no such key"
    for pattern, words in _CEL_GO_WORDS:
        if pattern.match(text):
            return pattern.sub(words, text)
    return text


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
