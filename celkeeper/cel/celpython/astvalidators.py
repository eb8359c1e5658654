"""Kubernetes' compile-time AST validators (cel-go `cel.ASTValidators` as base.go enables them).

- homogeneous aggregate literals: every element of a list literal, and every key and every value
  of a map literal, has the type of the first one (`["a", object.x]` mixes string and dyn: an
  error); literals inside a `format` call's argument are exempt;
- duration and timestamp literals: `duration("1x")` is a compile error, not a run-time one;
- regex literals: the literal argument of `matches` must compile (Go's regexp syntax, RE2); so must
  the literal pattern of the Kubernetes `find`/`findAll` (Kubernetes compiles it when it plans the
  program, which fails the compilation);
- string.format calls with a literal format string and a literal argument list (cel-go's
  stringFormatValidator): clauses must parse, match the argument types, and use every argument.
"""

from __future__ import annotations

from collections.abc import Callable

import celpy.celtypes as ct
from celpy.evaluation import CELEvalError

from celkeeper.cel.celpython import ast, astcodec, dispatch, formatting
from celkeeper.cel.celpython.ast import Call, CelType, Checked, Const, Expr, ListExpr, StructExpr
from celkeeper.cel.celpython.limits import position
from celkeeper.cel.celpython.values import to_python
from celkeeper.cel.k8slib.regex import RegexCompileError, compile_regex
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

#: how Kubernetes' admission compiler (plugin/cel/compile.go) words an error found planning a program
PROGRAM_ERROR = "program instantiation failed: "


def _error(checked: Checked, source: str, node_id: int, message: str) -> CelCompileError:
    line, col = position(source, checked.positions.get(node_id, 0))
    return CelCompileError(message, line, col)


def _parents(root: Expr) -> dict[int, Expr]:
    out: dict[int, Expr] = {}
    for node in ast.walk(root):
        for child in ast.children(node):
            out[id(child)] = node
    return out


def _format_exempt(node: Expr, parents: dict[int, Expr]) -> bool:
    """Inside a `format` call (at any depth): cel-go's homogeneous-literal exemption."""
    parent = parents.get(id(node))
    while parent is not None:
        if isinstance(parent, Call) and parent.function == "format":
            return True
        parent = parents.get(id(parent))
    return False


def _unwrap_optional(t: CelType) -> CelType:
    return t.params[0] if t.name == "optional_type" and t.params else t


def _homogeneous(checked: Checked, source: str) -> None:
    """Every mixed literal is reported by cel-go; the first in source order is the one we raise."""
    parents = _parents(checked.expr)
    problems: list[tuple[int, int, str]] = []  # (offset, node id, message)

    def report(node: Expr, expected: CelType, found: CelType) -> None:
        offset = checked.positions.get(node.id, 0)
        problems.append((offset, node.id, f"expected type '{expected}' but found '{found}'"))

    for node in ast.walk(checked.expr):
        if isinstance(node, ListExpr) and node.elements and not _format_exempt(node, parents):
            first: CelType | None = None
            for i, element in enumerate(node.elements):
                t = checked.type_of(element)
                if i in node.optional_indices:
                    t = _unwrap_optional(t)
                if first is None:
                    first = t
                elif t != first:
                    report(element, first, t)
                    break
        elif isinstance(node, StructExpr) and not node.message_name and not _format_exempt(node, parents):
            key_type: CelType | None = None
            value_type: CelType | None = None
            for entry in node.entries:
                if not isinstance(entry.key, Expr):
                    continue
                kt = checked.type_of(entry.key)
                vt = checked.type_of(entry.value)
                if entry.optional:
                    vt = _unwrap_optional(vt)
                if key_type is None or value_type is None:
                    key_type, value_type = kt, vt
                    continue
                if kt != key_type:
                    report(entry.key, key_type, kt)
                if vt != value_type:
                    report(entry.value, value_type, vt)
    if problems:
        problems.sort()
        _offset, node_id, message = problems[0]
        if len(problems) > 1:
            more = len(problems) - 1
            message += f" (and {more} more error{'s' if more > 1 else ''})"
        located = _error(checked, source, node_id, message)
        issues = tuple((*position(source, offset), m) for offset, _, m in problems)
        raise CelCompileError(located.message, located.line, located.column, issues=issues)


def _literal_calls(checked: Checked, source: str, literal_env: object) -> None:
    for node in ast.walk(checked.expr):
        if not isinstance(node, Call) or not node.args:
            continue
        arg = node.args[0]
        if not isinstance(arg, Const):
            continue
        if node.function in ("duration", "timestamp") and node.target is None:
            probe = Checked(Call(1, node.function, [Const(2, arg.kind, arg.value)]), {}, {}, {}, [])
            try:
                value = literal_env.deserialize(astcodec.encode_checked(probe)).eval()  # type: ignore[attr-defined]
                failed = value.type().name() == "ERROR"
            except RuntimeError:
                failed = True
            if failed:
                raise _error(checked, source, arg.id, f"invalid {node.function} argument")
        elif node.function == "matches" and arg.kind == "string":
            # cel-go checks argument 0 of the call (the pattern of `s.matches(p)`)
            try:
                compile_regex(str(arg.value))
            except RegexCompileError:
                raise _error(checked, source, arg.id, "invalid matches argument") from None


# ----------------------------------------------------------------------------------- format


class _FormatError(Exception):
    def __init__(self, node_id: int, message: str) -> None:
        super().__init__(message)
        self.node_id = node_id


def _kind(t: CelType) -> str:
    return t.name


def _format_checks(checked: Checked, args: list[Expr]) -> dict[str, Callable[[int], None]]:
    def type_name(node_id: int) -> str:
        return checked.types.get(node_id, ast.DYN).name

    def one_of(node_id: int, kinds: tuple[str, ...]) -> bool:
        t = checked.types.get(node_id, ast.DYN)
        return t.name == "dyn" or t.name in kinds

    def simple(kinds: tuple[str, ...], message: str) -> Callable[[int], None]:
        def check(index: int) -> None:
            node_id = args[index].id
            if not one_of(node_id, kinds):
                raise _FormatError(node_id, message + type_name(node_id))

        return check

    string_kinds = (
        "list",
        "map",
        "int",
        "uint",
        "double",
        "bool",
        "string",
        "google.protobuf.Timestamp",
        "bytes",
        "google.protobuf.Duration",
        "type",
        "null_type",
    )

    def verify_string(node: Expr) -> int | None:
        if not one_of(node.id, string_kinds):
            return node.id
        subs: list[Expr] = []
        if isinstance(node, ListExpr):
            subs = list(node.elements)
        elif isinstance(node, StructExpr) and not node.message_name:
            for e in node.entries:
                if isinstance(e.key, Expr):
                    subs.append(e.key)
                subs.append(e.value)
        for sub in subs:
            bad = verify_string(sub)
            if bad is not None:
                return bad
        return None

    def string_clause(index: int) -> None:
        bad = verify_string(args[index])
        if bad is not None:
            raise _FormatError(
                bad,
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, "
                f"types, durations, and timestamps, was given {type_name(bad)}",
            )

    return {
        "s": string_clause,
        "d": simple(("int", "uint"), "decimal clause can only be used on integers, was given "),
        "f": simple(("double", "string"), "fixed-point clause can only be used on doubles, was given "),
        "e": simple(("double", "string"), "scientific clause can only be used on doubles, was given "),
        "b": simple(
            ("int", "uint", "bool"), "only integers and bools can be formatted as binary, was given "
        ),
        "x": simple(
            ("int", "uint", "string", "bytes"),
            "only integers, byte buffers, and strings can be formatted as hex, was given ",
        ),
        "o": simple(("int", "uint"), "octal clause can only be used on integers, was given "),
    }


def _check_format(checked: Checked, call: Call) -> None:
    fmt = str(call.target.value)  # type: ignore[union-attr]
    args = call.args[0].elements  # type: ignore[attr-defined]
    checks = _format_checks(checked, args)
    data = fmt.encode("utf-8")  # cel-go walks the format string byte by byte
    i = 0
    used = 0
    while i < len(data):
        if data[i] != ord("%"):
            i += 1
            continue
        if i + 1 < len(data) and data[i + 1] == ord("%"):
            i += 2
            continue
        used += 1
        if i + 1 >= len(data):
            raise _FormatError(call.id, "unexpected end of string")
        if used - 1 >= len(args):
            raise _FormatError(call.id, f"index {used - 1} out of range")
        j = i + 1
        if data[j] == ord("."):
            j += 1
            while True:
                if j >= len(data):
                    raise _FormatError(
                        call.id,
                        "could not parse formatting clause: error while parsing precision: "
                        "could not find end of precision specifier",
                    )
                if not chr(data[j]).isdigit() or data[j] > 127:
                    break
                j += 1
            if j == i + 2:
                raise _FormatError(
                    call.id,
                    "could not parse formatting clause: error while parsing precision: error while "
                    'converting precision to integer: strconv.Atoi: parsing "": invalid syntax',
                )
        verb = chr(data[j])
        check = checks.get(verb.lower() if verb == "X" else verb)
        if check is None:
            raise _FormatError(
                call.id, f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
            )
        try:
            check(used - 1)
        except _FormatError as err:
            raise _FormatError(err.node_id, f"error during formatting: {err}") from None
        i = j + 1
    if len(args) > used:
        raise _FormatError(
            call.id, f"too many arguments supplied to string.format (expected {used}, got {len(args)})"
        )


def _format_calls(checked: Checked, source: str) -> None:
    for node in ast.walk(checked.expr):
        if (
            isinstance(node, Call)
            and node.function == "format"
            and isinstance(node.target, Const)
            and node.target.kind == "string"
            and len(node.args) == 1
            and isinstance(node.args[0], ListExpr)
        ):
            ref = checked.references.get(node.id)
            if ref is not None and ref.overload_ids and "string_format" not in ref.overload_ids:
                continue
            try:
                _check_format(checked, node)
            except _FormatError as err:
                raise _error(checked, source, err.node_id, str(err)) from None


# ------------------------------------------------------------------------------------- planning

#: cel-go's type conversion functions (overloads.IsTypeConversionFunction)
_CONVERSIONS = frozenset(
    {"bool", "bytes", "double", "duration", "dyn", "int", "string", "timestamp", "type", "uint"}
)
_NOT_CONSTANT = object()
_CONSTANTS: dict[str, Callable[[object], object]] = {
    "null": lambda v: None,
    "bool": lambda v: ct.BoolType(bool(v)),
    "int": lambda v: ct.IntType(int(v)),  # type: ignore[call-overload]
    "uint": lambda v: ct.UintType(int(v)),  # type: ignore[call-overload]
    "double": lambda v: ct.DoubleType(float(v)),  # type: ignore[arg-type]
    "string": lambda v: ct.StringType(str(v)),
    "bytes": lambda v: ct.BytesType(bytes(v)),  # type: ignore[call-overload]
}


def _planning_error(root: Expr) -> str | None:
    """The first error Kubernetes' compiler meets planning the program (cel-go's OptOptimize): a
    type conversion of a constant is evaluated then (`int('x')`, `uint(-1)`), and so is the literal
    pattern of the Kubernetes `find`/`findAll` (compiled once). Planning is depth first, arguments
    before their call."""
    return _plan(root)[1]


def _plan(node: Expr) -> tuple[object, str | None]:
    """(the node's constant value or _NOT_CONSTANT, the planning error or None)."""
    if isinstance(node, Const):
        convert = _CONSTANTS.get(node.kind)
        return (convert(node.value) if convert else _NOT_CONSTANT), None
    values = []
    for child in ast.children(node):
        value, problem = _plan(child)
        if problem is not None:
            return _NOT_CONSTANT, problem
        values.append(value)
    if not isinstance(node, Call):
        return _NOT_CONSTANT, None
    if node.function in ("find", "findAll") and node.target is not None and node.args:
        arg = node.args[0]
        if isinstance(arg, Const) and arg.kind == "string":
            try:
                compile_regex(str(arg.value))
            except RegexCompileError as err:
                return _NOT_CONSTANT, err.message
    constant = len(values) == 1 and values[0] is not _NOT_CONSTANT
    if node.target is None and node.function in _CONVERSIONS and constant:
        return _convert(node.function, values[0])
    return _NOT_CONSTANT, None


def _convert(function: str, value: object) -> tuple[object, str | None]:
    if function == "dyn":
        return value, None
    if function == "string":
        if isinstance(value, ct.BytesType):
            try:
                return ct.StringType(bytes(value).decode("utf-8")), None
            except UnicodeDecodeError:
                return _NOT_CONSTANT, "invalid UTF-8 in bytes, cannot convert to string"
        if isinstance(value, ct.BoolType | ct.DoubleType):
            return ct.StringType(formatting.string_of(to_python(value))), None
        if isinstance(value, ct.IntType | ct.UintType | ct.StringType):
            return ct.StringType(str(int(value)) if not isinstance(value, ct.StringType) else value), None
        return _NOT_CONSTANT, None
    convert = dispatch.CONVERSIONS.get(function)
    if convert is None:
        return _NOT_CONSTANT, None
    result = convert(value)
    if isinstance(result, CELEvalError):
        return _NOT_CONSTANT, str(result.args[0])
    return result, None


def validate(checked: Checked, source: str, limits: CelLimits, literal_env: object) -> None:
    """Raise CelCompileError (with line:col) for the first problem found: the validators' problems
    where they are, then a problem planning the program (`program instantiation failed: ...`,
    which Kubernetes reports without a place: 1:1)."""
    del limits  # the literal validators have no limits of their own
    _homogeneous(checked, source)
    _literal_calls(checked, source, literal_env)
    _format_calls(checked, source)
    problem = _planning_error(checked.expr)
    if problem is not None:
        raise CelCompileError(PROGRAM_ERROR + problem)
