"""Python callbacks for cel-expr-python without its reference leak (docs/known-issues.md).

cel-expr-python 0.1.3 (`PyCelFunctionAdapter::Invoke`) builds a tuple of the converted arguments for
every call of a Python function and never releases it, nor the function's result: each call leaks
the tuple, every argument object in it (a string, a list or a map copied out of CEL) and the result
(unless that is an object that lives on anyway). A worker evaluating library calls grows by
kilobytes per review.

The bridge takes both references back, for exactly the functions registered through it:

- *arguments*: each function keeps its declared name and overloads (so cel-cpp dispatches and words
  its errors as before), but the implementation cel-cpp calls is `BaseException.__init__` bound to
  one instance (`self.args = args`: the very tuple the binding built, no Python frame in between).
  `rewrite()` turns every call `f(a, b)` into `f(a, b) == null ? f#run() : null`; the zero-argument
  runner takes the tuple from the instance, releases the reference the binding keeps and calls the
  real implementation. A zero-argument call leaks nothing: its tuple is the shared empty tuple.
- *results*: the runner (and any function with `results=True`) records what it returns; `settle()`
  (after each evaluation, when cel-cpp has copied every result into its own values) releases the
  one reference the binding keeps of each.

Both releases are calibrated, not assumed: `probe()` measures, on a scratch environment, whether the
installed binding keeps the argument tuple and the result (exactly one reference each). Where it
does not (a fixed release, another interpreter), nothing is released and calls are registered
directly: the bridge can make a leak go away, never cause a double release.

Thread safety: the argument tuple travels through one shared slot between `f(...)` and `f#run()`,
so evaluations through one bridge must not interleave: the engine evaluates under `lock` (cel-cpp
holds the GIL for a whole evaluation except inside Python callbacks, so this costs no parallelism).
"""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from celkeeper.cel import ast
from celkeeper.cel.ast import Call, Checked, Const, Expr
from celkeeper.cel.rewrite_util import Fresh

RUN = "#run"
_T = cel.Type


def _lasting(value: Any) -> bool:
    """Objects the interpreter never frees (an extra reference to them costs nothing)."""
    return value is True or value is False or value is None or (type(value) is int and -5 <= value <= 256)


class _Slot(BaseException):
    """Holds the argument tuple of the call in progress (`BaseException.__init__` stores it as is)."""


@dataclass(frozen=True)
class Leaks:
    """What the installed binding keeps of each Python call (measured by `probe`)."""

    arguments: bool
    results: bool


def _decref() -> Callable[[Any], None] | None:
    if sys.implementation.name != "cpython":
        return None
    fn = ctypes.pythonapi.Py_DecRef
    fn.argtypes = [ctypes.py_object]
    fn.restype = None
    return fn


def probe() -> Leaks:
    """Measure the binding: one call that stores its argument tuple, one that returns a sentinel."""
    if _decref() is None:
        return Leaks(False, False)
    slot = _Slot()
    sentinel = "".join(["ck-", "probe"])  # a string of its own (not interned)
    capture = slot.__init__  # type: ignore[misc]
    decls = [
        cel.FunctionDecl("ck_probe_args", [cel.Overload("ck_probe_args", _T.DYN, [_T.DYN], impl=capture)]),
        cel.FunctionDecl(
            "ck_probe_result", [cel.Overload("ck_probe_res", _T.DYN, [], impl=lambda: sentinel)]
        ),
    ]
    env = cel.NewEnv(extensions=[cel.CelExtension("ck_probe", decls)])
    env.compile("ck_probe_args('probe') == null").eval(env.Activation({}))
    args = slot.args
    # the binding's reference, if it kept one; ours (slot.args) and getrefcount's own argument
    kept_args = sys.getrefcount(args) - 3 if type(args) is tuple and args == ("probe",) else -1
    slot.args = ()
    before = sys.getrefcount(sentinel)
    expr = env.compile("ck_probe_result() == null")
    expr.eval(env.Activation({}))
    kept_result = sys.getrefcount(sentinel) - before
    decref = _decref()
    if kept_result == 1 and decref is not None:
        decref(sentinel)  # the probe itself leaves nothing behind
    if kept_args == 1 and decref is not None:
        decref(args)
    return Leaks(arguments=kept_args == 1, results=kept_result == 1)


class CallBridge:
    """Registers Python functions in a cel-cpp environment so that calls leak nothing (see the
    module docstring). One per engine."""

    def __init__(self, leaks: Leaks | None = None) -> None:
        self.leaks = leaks if leaks is not None else probe()
        self.lock = threading.Lock()
        self._decref = _decref()
        self._slot = _Slot()
        self._results: list[Any] = []
        #: what `settle` will release (truthy when it has work)
        self.pending = self._results
        self.bridged: set[str] = set()  # functions whose calls `rewrite` turns into slot + runner

    def functions(
        self, name: str, overloads: Iterable[tuple[str, Any, list[Any], bool]], impl: Callable[..., Any]
    ) -> list[Any]:
        """cel.FunctionDecls for `name` with `overloads` (id, result type, parameter types, member),
        all implemented by `impl`: the function, and its runner when arguments are taken back
        (functions without parameters leak no argument tuple and are registered as they are)."""
        overloads = list(overloads)
        if not self.leaks.arguments or any(not params for _, _, params, _ in overloads):
            record = self._recorder(impl)
            direct = [
                cel.Overload(oid, result, params, is_member=member, impl=record)
                for oid, result, params, member in overloads
            ]
            return [cel.FunctionDecl(name, direct)]
        self.bridged.add(name)
        capture = self._slot.__init__  # type: ignore[misc]  # the C slot wrapper: see the docstring
        captured = [  # the capture returns None (null): its call is `f(args) == null`
            cel.Overload(oid, _T.DYN, params, is_member=member, impl=capture)
            for oid, _, params, member in overloads
        ]
        results = {str(result) for _, result, _, _ in overloads}
        result = overloads[0][1] if len(results) == 1 else _T.DYN
        runner = cel.Overload(name + RUN, result, [], impl=self._runner(impl))
        return [cel.FunctionDecl(name, captured), cel.FunctionDecl(name + RUN, [runner])]

    def _recorder(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        if not self.leaks.results:
            return impl
        keep = self._results.append

        def recorded(*args: Any) -> Any:
            result = impl(*args)
            if not _lasting(result):
                keep(result)
            return result

        recorded.__name__ = getattr(impl, "__name__", "recorded")
        return recorded

    def _runner(self, impl: Callable[..., Any]) -> Callable[[], Any]:
        slot = self._slot
        decref = self._decref
        assert decref is not None
        keep = self._results.append if self.leaks.results else None

        def run() -> Any:
            args = slot.args
            if not args:  # never: `rewrite` puts the capture right before each runner
                raise RuntimeError(f"{run.__name__}: no captured arguments")
            slot.args = ()
            decref(args)  # the binding's reference: `args` is now ours alone
            result = impl(*args)
            # not _lasting(result), inline (one call fewer on every library call)
            if (
                keep is not None
                and result is not True
                and result is not False
                and result is not None
                and not (type(result) is int and -5 <= result <= 256)
            ):
                keep(result)
            return result

        run.__name__ = getattr(impl, "__name__", "run")
        return run

    def settle(self) -> None:
        """Release the binding's reference of every result returned since the last call (after an
        evaluation has finished: cel-cpp has copied them)."""
        results = self._results
        if results:
            decref = self._decref
            assert decref is not None
            for r in results:
                decref(r)
            results.clear()

    def rewrite(self, checked: Checked) -> Checked:
        """Every call of a bridged function `f(args)` as `f(args) == null ? f#run() : null` (in place)."""
        if not self.bridged:
            return checked
        bridged = self.bridged
        fresh = Fresh(checked)

        def fix(node: Expr) -> Expr:
            if not (isinstance(node, Call) and node.function in bridged):
                return node
            is_null = Call(fresh(), "_==_", [node, Const(fresh(), "null", None)])
            run = Call(fresh(), node.function + RUN, [])
            return Call(fresh(), "_?_:_", [is_null, run, Const(fresh(), "null", None)])

        nodes = list(ast.walk(checked.expr))
        checked.expr = fix(checked.expr)
        for n in nodes:
            ast.replace_children(n, fix)
        return checked
