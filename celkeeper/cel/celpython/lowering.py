"""Lowering a checked (and bound) tree to CEL text cel-python's parser and interpreter accept.

cel-python 0.5 cannot parse `?.`/`[?`/`{?`, dotted function names (`sets.contains`), and has no
two-variable comprehensions; cel-cpp (the engine's front end) already parsed, checked and expanded
the macros, so the lowering only has to print the tree in a dialect celpy understands:

- operators print as CEL operators (fully parenthesised); cel-python resolves them through its
  function table (`_==_`, `_<_`, ...), which `celkeeper.cel.celpython.functions` overrides where
  cel-python departs from CEL (heterogeneous equality, cross-type numeric comparisons, ...);
- every other call prints as a global call of an internal name: `__ck_g_<name>(args)` for a
  global function, `__ck_m_<name>(receiver, args)` for a member one;
- `has(e.f)` prints as `__ck_has(e, "f")`; optional selection/indexing (`?.`, `[?`, and plain
  selection/indexing of an optional value) and optional list/map entries print as `__ck_opt_*`
  calls;
- a comprehension prints as `<range>.__ck_fold(iter, iter2, accu, init, condition, step, result)`,
  a macro the engine's evaluator implements (cel-python's own macros differ from CEL's);
- `cel.@block([...], e)` slots print as `__ck_slot(N)`, evaluated lazily and memoised per
  evaluation by the engine.
"""

from __future__ import annotations

import math
import re

from celkeeper.cel.celpython.ast import (
    Call,
    Checked,
    Comprehension,
    Const,
    Expr,
    Ident,
    ListExpr,
    Select,
    StructExpr,
)

_BINARY = {
    "_+_": "+",
    "_-_": "-",
    "_*_": "*",
    "_/_": "/",
    "_%_": "%",
    "_==_": "==",
    "_!=_": "!=",
    "_<_": "<",
    "_<=_": "<=",
    "_>_": ">",
    "_>=_": ">=",
    "_&&_": "&&",
    "_||_": "||",
    "@in": "in",
}
_RESERVED = frozenset(
    {
        "as",
        "break",
        "const",
        "continue",
        "else",
        "false",
        "for",
        "function",
        "if",
        "import",
        "in",
        "let",
        "loop",
        "package",
        "namespace",
        "null",
        "return",
        "true",
        "var",
        "void",
        "while",
    }
)
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
INT64_MIN = -(2**63)


class LoweringError(ValueError):
    """A tree the lowering cannot print (not expected from the Kubernetes environment)."""


def mangle(name: str) -> str:
    """An identifier celpy accepts for any CEL or internal name (`@result`, `sets.contains`, ...)."""
    if _IDENT.match(name) and name not in _RESERVED and not name.startswith("__ck_"):
        return name
    return "__ck_x_" + re.sub(r"[^a-zA-Z0-9]", lambda m: f"_{ord(m.group()):x}_", name)


def function_name(name: str, member: bool) -> str:
    return ("__ck_m_" if member else "__ck_g_") + re.sub(
        r"[^a-zA-Z0-9]", lambda m: f"_{ord(m.group()):x}_", name
    )


def _string(value: str) -> str:
    out = ['"']
    for ch in value:
        cp = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif 0x20 <= cp < 0x7F:
            out.append(ch)
        elif cp <= 0xFFFF:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def _const(node: Const) -> str:
    kind, value = node.kind, node.value
    if kind == "null":
        return "null"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        v = int(value)  # type: ignore[call-overload]
        if v == INT64_MIN:
            return 'int("-9223372036854775808")'
        return str(v) if v >= 0 else f"(-{-v})"
    if kind == "uint":
        return f"{int(value)}u"  # type: ignore[call-overload]
    if kind == "double":
        f = float(value)  # type: ignore[arg-type]
        if math.isnan(f):
            return 'double("nan")'
        if math.isinf(f):
            return 'double("inf")' if f > 0 else 'double("-inf")'
        text = repr(abs(f))
        if "." not in text and "e" not in text:
            text += ".0"
        return f"(-{text})" if math.copysign(1.0, f) < 0 else text
    if kind == "string":
        return _string(str(value))
    if kind == "bytes":
        return 'b"' + "".join(f"\\x{b:02x}" for b in bytes(value)) + '"'  # type: ignore[call-overload]
    raise LoweringError(f"unsupported constant kind {kind}")


class _Printer:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked

    def expr(self, node: Expr) -> str:
        if isinstance(node, Const):
            return _const(node)
        if isinstance(node, Ident):
            m = re.fullmatch(r"@index(\d+)", node.name)
            if m:
                return f"__ck_slot({m.group(1)})"
            return mangle(node.name)
        if isinstance(node, Select):
            operand = self.expr(node.operand)
            if node.test_only:
                return f"__ck_has({operand}, {_string(node.field)})"
            if self.checked.type_of(node.operand).name == "optional_type":
                return f"__ck_opt_select({operand}, {_string(node.field)})"
            if _IDENT.match(node.field) and node.field not in _RESERVED:
                return f"({operand}).{node.field}"
            return f"__ck_select({operand}, {_string(node.field)})"
        if isinstance(node, Call):
            return self.call(node)
        if isinstance(node, ListExpr):
            items = ", ".join(self.expr(e) for e in node.elements)
            if node.optional_indices:
                flags = ", ".join(
                    "true" if i in node.optional_indices else "false" for i in range(len(node.elements))
                )
                return f"__ck_opt_list([{flags}], [{items}])"
            return f"[{items}]"
        if isinstance(node, StructExpr):
            if node.message_name:
                raise LoweringError(f"message literals are not supported ({node.message_name})")
            if any(e.optional for e in node.entries):
                keys = ", ".join(self.expr(e.key) for e in node.entries)  # type: ignore[arg-type]
                values = ", ".join(self.expr(e.value) for e in node.entries)
                flags = ", ".join("true" if e.optional else "false" for e in node.entries)
                return f"__ck_opt_map([{keys}], [{values}], [{flags}])"
            entries = ", ".join(f"{self.expr(e.key)}: {self.expr(e.value)}" for e in node.entries)  # type: ignore[arg-type]
            return "{" + entries + "}"
        if isinstance(node, Comprehension):
            parts = [
                mangle(node.iter_var),
                mangle(node.iter_var2) if node.iter_var2 else "__ck_none",
                mangle(node.accu_var),
                self.expr(node.accu_init),
                self.expr(node.loop_condition),
                self.expr(node.loop_step),
                self.expr(node.result),
            ]
            return f"({self.expr(node.iter_range)}).__ck_fold({', '.join(parts)})"
        raise LoweringError(f"unsupported expression {type(node).__name__}")

    def call(self, node: Call) -> str:
        fn = node.function
        args = [self.expr(a) for a in node.args]
        if node.target is None:
            if fn in _BINARY and len(args) == 2:
                return f"({args[0]} {_BINARY[fn]} {args[1]})"
            if fn == "!_" and len(args) == 1:
                return f"(!{args[0]})"
            if fn == "-_" and len(args) == 1:
                return f"(-{args[0]})"
            if fn == "_?_:_" and len(args) == 3:
                return f"({args[0]} ? {args[1]} : {args[2]})"
            if fn == "_[_]" and len(args) == 2:
                if self.checked.type_of(node.args[0]).name == "optional_type":
                    return f"__ck_opt_item({args[0]}, {args[1]})"
                return f"({args[0]})[{args[1]}]"
            if fn == "_?._" and len(args) == 2:
                return f"__ck_opt_select({args[0]}, {args[1]})"
            if fn == "_[?_]" and len(args) == 2:
                return f"__ck_opt_index({args[0]}, {args[1]})"
            return f"{function_name(fn, False)}({', '.join(args)})"
        target = self.expr(node.target)
        return f"{function_name(fn, True)}({', '.join([target, *args])})"


def lower(checked: Checked) -> tuple[str, list[str]]:
    """(expression text, slot texts): slots are the cel.@block bindings, in order."""
    printer = _Printer(checked)
    root = checked.expr
    if isinstance(root, Call) and root.function == "cel.@block" and len(root.args) == 2:
        inits, body = root.args
        if not isinstance(inits, ListExpr):
            raise LoweringError("malformed cel.@block")
        return printer.expr(body), [printer.expr(e) for e in inits.elements]
    return printer.expr(root), []
