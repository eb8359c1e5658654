"""Safety limits, checked before anything is evaluated (no engine has a cost budget).

`check_source` runs on the raw text (length), `check_tree` on the checked tree: nesting depth,
comprehensions nested inside comprehension bodies (the polynomial degree of the work an expression
can do over its input), and the size of literals and of literal regular expressions. Each failure
is a CelCompileError that names the limit (`limit` is the CelLimits field).
"""

from __future__ import annotations

from celkeeper.cel.celpython.ast import (
    Call,
    Checked,
    Comprehension,
    Const,
    Expr,
    ListExpr,
    StructExpr,
    children,
)
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

REGEX_FUNCTIONS = ("matches", "find", "findAll")


def position(source: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a 0-based code-point offset."""
    offset = max(0, min(offset, len(source)))
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    return line, offset - start + 1


def _over(checked: Checked, source: str, node: Expr, message: str, limit: str) -> CelCompileError:
    """The compile error of `node` breaking `limit`, at its line:col."""
    line, col = position(source, checked.positions.get(node.id, 0))
    return CelCompileError(message, line, col, limit=limit)


def check_source(source: str, limits: CelLimits) -> None:
    if len(source) > limits.max_expression_length:
        raise CelCompileError(
            f"expression is {len(source)} characters long, more than the limit of "
            f"{limits.max_expression_length} (max_expression_length)",
            limit="max_expression_length",
        )


def regex_argument(node: Call) -> Expr | None:
    """The pattern argument of a matches/find/findAll call."""
    if node.function not in REGEX_FUNCTIONS:
        return None
    if node.target is not None:
        return node.args[0] if node.args else None
    return node.args[1] if len(node.args) > 1 else None


def check_tree(checked: Checked, source: str, limits: CelLimits) -> None:
    # (node, depth, loop nesting) — iterative: trees can be deep
    stack: list[tuple[Expr, int, int]] = [(checked.expr, 1, 0)]
    while stack:
        node, depth, loops = stack.pop()
        if depth > limits.max_ast_depth:
            raise _over(
                checked,
                source,
                node,
                f"expression nested more than {limits.max_ast_depth} levels deep (max_ast_depth)",
                "max_ast_depth",
            )
        if isinstance(node, Const) and node.kind in ("string", "bytes"):
            size = len(node.value)  # type: ignore[arg-type]
            if size > limits.max_literal_length:
                raise _over(
                    checked,
                    source,
                    node,
                    f"{node.kind} literal of {size} characters, more than the limit of "
                    f"{limits.max_literal_length} (max_literal_length)",
                    "max_literal_length",
                )
        elif isinstance(node, ListExpr | StructExpr):
            count = len(node.elements) if isinstance(node, ListExpr) else len(node.entries)
            if count > limits.max_aggregate_literal_size:
                raise _over(
                    checked,
                    source,
                    node,
                    f"literal with {count} elements, more than the limit of "
                    f"{limits.max_aggregate_literal_size} (max_aggregate_literal_size)",
                    "max_aggregate_literal_size",
                )
        elif isinstance(node, Call):
            pattern = regex_argument(node)
            if (
                isinstance(pattern, Const)
                and pattern.kind == "string"
                and len(pattern.value) > limits.max_regex_length  # type: ignore[arg-type]
            ):
                raise _over(
                    checked,
                    source,
                    pattern,
                    f"regular expression of {len(pattern.value)} characters, more than the "  # type: ignore[arg-type]
                    f"limit of {limits.max_regex_length} (max_regex_length)",
                    "max_regex_length",
                )
        if isinstance(node, Comprehension):
            inner = loops + 1
            if inner > limits.max_comprehension_depth:
                raise _over(
                    checked,
                    source,
                    node,
                    f"comprehensions nested {inner} deep, more than the limit of "
                    f"{limits.max_comprehension_depth} (max_comprehension_depth)",
                    "max_comprehension_depth",
                )
            stack.append((node.iter_range, depth + 1, loops))
            stack.append((node.accu_init, depth + 1, loops))
            stack.append((node.loop_condition, depth + 1, inner))
            stack.append((node.loop_step, depth + 1, inner))
            stack.append((node.result, depth + 1, loops))
        else:
            for child in children(node):
                stack.append((child, depth + 1, loops))
