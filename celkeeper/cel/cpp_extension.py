"""The internal functions of cel-expr-python programs: the Kubernetes libraries (as bound by
`celkeeper.cel.binding`), fused calls, `@ck.params()`/`@ck.constraint()`, as one cel-cpp extension
whose Python callbacks go through `celkeeper.cel.cpp_bridge.CallBridge`."""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from celkeeper.cel import cpp_rewrites, fusion, library
from celkeeper.cel.cpp_bridge import CallBridge
from celkeeper.cel.environment import FUNCTIONS, OPAQUE_TYPES
from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.library import LibraryRuntime

_T = cel.Type


class InProgress:
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


def cpp_extension(runtime: LibraryRuntime, current: InProgress, bridge: CallBridge) -> Any:
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
