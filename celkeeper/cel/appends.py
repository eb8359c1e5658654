"""Lists and maps built by comprehensions in linear time on cel-cpp (cel-expr-python).

The `map`, `filter` and `transformList` macros build their result one element at a time,
`@result + [e]`. cel-cpp makes that append in place only with its `enable_comprehension_list_append`
option, which cel-expr-python 0.1.3 leaves off and does not expose: each step then copies the whole
list, so `xs.map(x, f)` costs O(n^2) (bench/engine.py: 1,000 containers 20 ms, 5,000 containers
~460 ms for one `map`; Kubernetes' cel-go appends in place). A request with many containers could so
hold a webhook worker for seconds per expression (cel-cpp stops an evaluation after 10,000
comprehension iterations, which bounds n, not n^2).

`linear_appends(checked)` rewrites such comprehensions, when their range is large, to gather the
elements in chunks of CHUNK (copying a chunk is bounded, the list of chunks grows n / CHUNK times)
and to flatten the chunks at the end:

    size(R) > THRESHOLD && (type(R) == list || type(R) == map)
      ? <the same comprehension with accumulator [chunks, chunk] = [[], []],
         step  size(@result[1]) < CHUNK - 1 ? [@result[0], @result[1] + [e]]
                                            : [@result[0] + [@result[1] + [e]], []],
         result (@result[0] + [@result[1]]).flatten()>
      : <the comprehension as it was>

(`filter` keeps its condition around the step.) `transformMap` and `transformMapEntry` insert into a
map with `cel.@mapInsert`, a Python function here (cel-cpp 0.1.3 declares it without implementing
it) that takes and returns the whole map at every step: quadratic too. Their entries (`[k, v]`, or
the map of `transformMapEntry`) are gathered the same way and made into the map by one call of
`@ck.mapOfEntries` (library.map_of_entries: same order, same duplicate-key error; keys and values
cross into Python once instead of at every step, as `@mapInsert` made them do anyway). One
difference: with a duplicate key *and* a later element that fails, the error reported is the later
one. For lists, the values are the same CEL values, in the same order, never converted to Python.
The same elements are evaluated in the same order, so errors and cel-cpp's iteration budget are met
as before. A range that is not a plain selection is evaluated once (bound to a variable). Small
ranges keep the original comprehension, which is faster for them.
"""

from __future__ import annotations

from celkeeper.cel import ast
from celkeeper.cel.ast import (
    Call,
    Checked,
    Comprehension,
    Const,
    Expr,
    Ident,
    ListExpr,
    Reference,
    StructExpr,
)
from celkeeper.cel.binding import MAP_INSERT, MAP_OF_ENTRIES
from celkeeper.cel.rewrite_util import Fresh, Ref, bound, clone

#: elements gathered before a chunk joins the list of chunks (16: fastest of 8-64 at 1,000-5,000)
CHUNK = 16
#: ranges up to this size keep the original comprehension
THRESHOLD = 64


def _appended(step: Expr, accu: str) -> Expr | None:
    """`e` when `step` is `accu + [e]`."""
    if isinstance(step, Call) and step.function == "_+_" and step.target is None and len(step.args) == 2:
        left, right = step.args
        if (
            isinstance(left, Ident)
            and left.name == accu
            and isinstance(right, ListExpr)
            and len(right.elements) == 1
            and not right.optional_indices
        ):
            return right.elements[0]
    return None


def _inserted(step: Expr, accu: str, fresh: Fresh) -> Expr | None:
    """The entry `[k, v]` when `step` is `@mapInsert(accu, k, v)`, the map `m` for `@mapInsert(accu, m)`."""
    if isinstance(step, Call) and step.function == MAP_INSERT and step.target is None and step.args:
        first = step.args[0]
        if isinstance(first, Ident) and first.name == accu:
            if len(step.args) == 3:
                return ListExpr(fresh(), list(step.args[1:]))
            if len(step.args) == 2:
                return step.args[1]
    return None


def _empty(node: Expr, builds_map: bool) -> bool:
    if builds_map:
        return isinstance(node, StructExpr) and not node.message_name and not node.entries
    return isinstance(node, ListExpr) and not node.elements


def _shape(node: Comprehension, fresh: Fresh) -> tuple[Expr | None, Expr, bool] | None:
    """(condition or None, appended element, whether a map is built) of a comprehension that builds
    a list by appending (`map`, `filter`, `transformList`) or a map by inserting (`transformMap`,
    `transformMapEntry`: the element is the entry)."""
    accu = node.accu_var
    builds_map = isinstance(node.accu_init, StructExpr)
    if not (
        _empty(node.accu_init, builds_map)
        and isinstance(node.result, Ident)
        and node.result.name == accu
        and isinstance(node.loop_condition, Const)
        and node.loop_condition.value is True
    ):
        return None

    def element_of(step: Expr) -> Expr | None:
        return _inserted(step, accu, fresh) if builds_map else _appended(step, accu)

    step = node.loop_step
    element = element_of(step)
    if element is not None:
        return None, element, builds_map
    if isinstance(step, Call) and step.function == "_?_:_" and len(step.args) == 3:
        condition, then, otherwise = step.args
        element = element_of(then)
        if element is not None and isinstance(otherwise, Ident) and otherwise.name == accu:
            return condition, element, builds_map
    return None


class _Builder:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.fresh = Fresh(checked)

    def chunks(self, accu: str) -> Expr:
        """`accu[0]`: the chunks so far."""
        return self._item(accu, 0)

    def chunk(self, accu: str) -> Expr:
        """`accu[1]`: the chunk being filled."""
        return self._item(accu, 1)

    def _item(self, accu: str, index: int) -> Expr:
        return Call(self.fresh(), "_[_]", [Ident(self.fresh(), accu), Const(self.fresh(), "int", index)])

    def call(self, function: str, *args: Expr, target: Expr | None = None) -> Call:
        return Call(self.fresh(), function, list(args), target)

    def pair(self, outer: Expr, chunk: Expr) -> ListExpr:
        return ListExpr(self.fresh(), [outer, chunk])

    def is_type(self, value: Expr, name: str) -> Call:
        type_name = Ident(self.fresh(), name)
        self.checked.references[type_name.id] = Reference(name=name)
        return self.call("_==_", self.call("type", value), type_name)

    def one(self, value: Expr) -> ListExpr:
        return ListExpr(self.fresh(), [value])

    def push(self, accu: str, element: Expr) -> Expr:
        """The accumulator with `element` added (see the module docstring)."""
        chunk = self.call("_+_", self.chunk(accu), self.one(element))
        spilled = self.call("_+_", self.chunk(accu), self.one(clone(self.checked, element, self.fresh)))
        room = self.call(
            "_<_", self.call("size", self.chunk(accu)), Const(self.fresh(), "int", CHUNK - 1)
        )
        keep = self.pair(self.chunks(accu), chunk)
        spill = self.pair(
            self.call("_+_", self.chunks(accu), self.one(spilled)), ListExpr(self.fresh(), [])
        )
        return self.call("_?_:_", room, keep, spill)

    def chunked(
        self, node: Comprehension, condition: Expr | None, element: Expr, rng: Expr, builds_map: bool
    ) -> Comprehension:
        accu = node.accu_var
        step = self.push(accu, clone(self.checked, element, self.fresh))
        if condition is not None:
            test = clone(self.checked, condition, self.fresh)
            step = self.call("_?_:_", test, step, Ident(self.fresh(), accu))
        chunks = self.call("_+_", self.chunks(accu), self.one(self.chunk(accu)))
        result = self.call("flatten", target=chunks)
        if builds_map:
            result = self.call(MAP_OF_ENTRIES, result)
        return Comprehension(
            self.fresh(),
            iter_var=node.iter_var,
            iter_range=rng,
            accu_var=accu,
            accu_init=self.pair(ListExpr(self.fresh(), []), ListExpr(self.fresh(), [])),
            loop_condition=Const(self.fresh(), "bool", True),
            loop_step=step,
            result=result,
            iter_var2=node.iter_var2,
        )

    def rewrite(self, node: Comprehension) -> Expr:
        shape = _shape(node, self.fresh)
        if shape is None:
            return node
        condition, element, builds_map = shape

        def build(ref: Ref) -> Expr:
            big = self.chunked(node, condition, element, ref(), builds_map)
            node.iter_range = ref()
            large = self.call("_>_", self.call("size", ref()), Const(self.fresh(), "int", THRESHOLD))
            # only lists and maps: anything else gets the comprehension's own error, not size()'s
            # (`size(R) > T` first: for a small range the test stops there; for a range size()
            # refuses, CEL's `&&` yields false once the type test is false)
            iterable = self.call("_||_", self.is_type(ref(), "list"), self.is_type(ref(), "map"))
            return self.call("_?_:_", self.call("_&&_", large, iterable), big, node)

        return bound(self.checked, node.iter_range, self.fresh, build)


def linear_appends(checked: Checked) -> Checked:
    """Rewrite list-building comprehensions as in the module docstring (in place, innermost first)."""
    builder = _Builder(checked)

    def visit(node: Expr) -> Expr:
        ast.replace_children(node, visit)
        return builder.rewrite(node) if isinstance(node, Comprehension) else node

    checked.expr = visit(checked.expr)
    return checked
