"""Reading and writing `cel.expr.CheckedExpr` protobuf bytes as `celkeeper.cel.celpython.ast` nodes.

Only the fields celkeeper uses: the expression tree, the type and reference maps, and the source
positions (a small wire-format codec, `celkeeper.cel.celpython.protowire`; no generated classes needed).
"""

from __future__ import annotations

from celkeeper.cel.celpython.ast import (
    DYN,
    Call,
    CelType,
    Checked,
    Comprehension,
    Const,
    Entry,
    Expr,
    Ident,
    ListExpr,
    Reference,
    Select,
    StructExpr,
    walk,
)
from celkeeper.cel.celpython.protowire import (
    LENGTH,
    Writer,
    as_bytes,
    as_double,
    as_int64,
    as_uint,
    fields,
    read_varint,
)

_PRIMITIVES = {1: "bool", 2: "int", 3: "uint", 4: "double", 5: "string", 6: "bytes"}
_WELL_KNOWN = {1: "any", 2: "google.protobuf.Timestamp", 3: "google.protobuf.Duration"}


def decode_type(data: bytes) -> CelType:
    for number, _wire, value in fields(data):
        if number == 1:
            return DYN
        if number == 2:
            return CelType("null_type")
        if number == 3:
            return CelType(_PRIMITIVES.get(int(value), "dyn"))
        if number == 4:
            return CelType("wrapper", (CelType(_PRIMITIVES.get(int(value), "dyn")),))
        if number == 5:
            return CelType(_WELL_KNOWN.get(int(value), "dyn"))
        if number == 6:
            elem = DYN
            for n, _w, v in fields(as_bytes(value)):
                if n == 1:
                    elem = decode_type(as_bytes(v))
            return CelType("list", (elem,))
        if number == 7:
            key = val = DYN
            for n, _w, v in fields(as_bytes(value)):
                if n == 1:
                    key = decode_type(as_bytes(v))
                elif n == 2:
                    val = decode_type(as_bytes(v))
            return CelType("map", (key, val))
        if number == 8:
            return CelType("function")
        if number == 9:
            return CelType(as_bytes(value).decode())
        if number == 10:
            return CelType(as_bytes(value).decode())
        if number == 11:
            return CelType("type", (decode_type(as_bytes(value)),) if value else ())
        if number == 12:
            return CelType("error")
        if number == 14:
            name = ""
            params: list[CelType] = []
            for n, _w, v in fields(as_bytes(value)):
                if n == 1:
                    name = as_bytes(v).decode()
                elif n == 2:
                    params.append(decode_type(as_bytes(v)))
            return CelType(name, tuple(params))
    return DYN


# ---------------------------------------------------------------------------------------- decode


def _const(node_id: int, data: bytes) -> Const:
    for number, _wire, value in fields(data):
        if number == 1:
            return Const(node_id, "null", None)
        if number == 2:
            return Const(node_id, "bool", bool(value))
        if number == 3:
            return Const(node_id, "int", as_int64(as_uint(value)))
        if number == 4:
            return Const(node_id, "uint", as_uint(value))
        if number == 5:
            return Const(node_id, "double", as_double(as_uint(value)))
        if number == 6:
            return Const(node_id, "string", as_bytes(value).decode("utf-8"))
        if number == 7:
            return Const(node_id, "bytes", as_bytes(value))
    return Const(node_id, "null", None)


def _packed(wire: int, value: int | bytes) -> list[int]:
    if wire != LENGTH:
        return [as_int64(as_uint(value))]
    out: list[int] = []
    data = as_bytes(value)
    pos = 0
    while pos < len(data):
        v, pos = read_varint(data, pos)
        out.append(as_int64(v))
    return out


def decode_expr(data: bytes) -> Expr:
    node_id = 0
    kind: tuple[int, bytes] | None = None
    for number, _wire, value in fields(data):
        if number == 2:
            node_id = as_int64(as_uint(value))
        elif 3 <= number <= 9:
            kind = (number, as_bytes(value))
    if kind is None:
        return Const(node_id, "null", None)  # an unset expression
    number, body = kind
    if number == 3:
        return _const(node_id, body)
    if number == 4:
        name = ""
        for n, _w, v in fields(body):
            if n == 1:
                name = as_bytes(v).decode()
        return Ident(node_id, name)
    if number == 5:
        operand: Expr | None = None
        fld = ""
        test_only = False
        for n, _w, v in fields(body):
            if n == 1:
                operand = decode_expr(as_bytes(v))
            elif n == 2:
                fld = as_bytes(v).decode()
            elif n == 3:
                test_only = bool(v)
        return Select(node_id, operand or Const(0, "null", None), fld, test_only)
    if number == 6:
        target: Expr | None = None
        function = ""
        args: list[Expr] = []
        for n, _w, v in fields(body):
            if n == 1:
                target = decode_expr(as_bytes(v))
            elif n == 2:
                function = as_bytes(v).decode()
            elif n == 3:
                args.append(decode_expr(as_bytes(v)))
        return Call(node_id, function, args, target)
    if number == 7:
        elements: list[Expr] = []
        optional: list[int] = []
        for n, w, v in fields(body):
            if n == 1:
                elements.append(decode_expr(as_bytes(v)))
            elif n == 2:
                optional.extend(_packed(w, v))
        return ListExpr(node_id, elements, optional)
    if number == 8:
        message_name = ""
        entries: list[Entry] = []
        for n, _w, v in fields(body):
            if n == 1:
                message_name = as_bytes(v).decode()
            elif n == 2:
                entries.append(_entry(as_bytes(v)))
        return StructExpr(node_id, message_name, entries)
    names: dict[int, str] = {}  # iter_var, accu_var, iter_var2
    exprs: dict[int, Expr] = {}
    for n, _w, v in fields(body):
        if n in (1, 3, 8):
            names[n] = as_bytes(v).decode()
        else:
            exprs[n] = decode_expr(as_bytes(v))
    unset = Const(0, "null", None)
    return Comprehension(
        node_id,
        iter_var=names.get(1, ""),
        iter_range=exprs.get(2, unset),
        accu_var=names.get(3, ""),
        accu_init=exprs.get(4, unset),
        loop_condition=exprs.get(5, unset),
        loop_step=exprs.get(6, unset),
        result=exprs.get(7, unset),
        iter_var2=names.get(8, ""),
    )


def _entry(data: bytes) -> Entry:
    entry_id = 0
    key: Expr | str = ""
    value: Expr = Const(0, "null", None)
    optional = False
    for n, _w, v in fields(data):
        if n == 1:
            entry_id = as_int64(as_uint(v))
        elif n == 2:
            key = as_bytes(v).decode()
        elif n == 3:
            key = decode_expr(as_bytes(v))
        elif n == 4:
            value = decode_expr(as_bytes(v))
        elif n == 5:
            optional = bool(v)
    return Entry(entry_id, key, value, optional)


def _reference(data: bytes) -> Reference:
    ref = Reference()
    for n, _w, v in fields(data):
        if n == 1:
            ref.name = as_bytes(v).decode()
        elif n == 3:
            ref.overload_ids.append(as_bytes(v).decode())
        elif n == 4:
            ref.value = _const(0, as_bytes(v))
    return ref


def decode_checked(serialized: bytes) -> Checked:
    """Decode `Expression.serialize()` output: an Any holding a CheckedExpr (or a ParsedExpr, from
    `compile(..., disable_check=True)`, which has no types or references), or a bare CheckedExpr."""
    data = serialized
    parsed_only = False
    first = next(fields(data), None)
    if first is not None and first[0] == 1 and first[1] == LENGTH:  # google.protobuf.Any
        for n, _w, v in fields(data):
            if n == 1:
                parsed_only = as_bytes(v).endswith(b".ParsedExpr")
            elif n == 2:
                data = as_bytes(v)
    if parsed_only:  # a ParsedExpr: expr = 2, source_info = 3
        renumbered = Writer()
        for n, _w, v in fields(data):
            if n in (2, 3):
                renumbered.bytes_(n + 2, as_bytes(v))
        data = renumbered.getvalue()
    expr: Expr = Const(0, "null", None)
    types: dict[int, CelType] = {}
    raw_types: dict[int, bytes] = {}
    refs: dict[int, Reference] = {}
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    for number, _wire, value in fields(data):
        if number == 4:
            expr = decode_expr(as_bytes(value))
        elif number in (2, 3):
            key = 0
            body = b""
            for n, _w, v in fields(as_bytes(value)):
                if n == 1:
                    key = as_int64(as_uint(v))
                elif n == 2:
                    body = as_bytes(v)
            if number == 3:
                types[key] = decode_type(body)
                raw_types[key] = body
            else:
                refs[key] = _reference(body)
        elif number == 5:
            for n, w, v in fields(as_bytes(value)):
                if n == 3:
                    line_offsets.extend(_packed(w, v))
                elif n == 4:
                    k = p = 0
                    for n2, _w2, v2 in fields(as_bytes(v)):
                        if n2 == 1:
                            k = as_int64(as_uint(v2))
                        elif n2 == 2:
                            p = as_int64(as_uint(v2))
                    positions[k] = p
    return Checked(expr, types, refs, positions, line_offsets, raw_types)


# ---------------------------------------------------------------------------------------- encode


def _write_const(node: Const) -> Writer:
    w = Writer()
    if node.kind == "null":
        w.varint(1, 0)
    elif node.kind == "bool":
        w.varint(2, 1 if node.value else 0)
    elif node.kind == "int":
        w.varint(3, int(node.value))  # type: ignore[call-overload]
    elif node.kind == "uint":
        w.varint(4, int(node.value))  # type: ignore[call-overload]
    elif node.kind == "double":
        w.double(5, float(node.value))  # type: ignore[arg-type]
    elif node.kind == "string":
        w.string(6, str(node.value))
    elif node.kind == "bytes":
        w.bytes_(7, bytes(node.value))  # type: ignore[call-overload]
    return w


def encode_expr(node: Expr) -> Writer:
    w = Writer()
    w.varint(2, node.id)
    if isinstance(node, Const):
        w.message(3, _write_const(node))
    elif isinstance(node, Ident):
        b = Writer()
        b.string(1, node.name)
        w.message(4, b)
    elif isinstance(node, Select):
        b = Writer()
        b.message(1, encode_expr(node.operand))
        b.string(2, node.field)
        if node.test_only:
            b.varint(3, 1)
        w.message(5, b)
    elif isinstance(node, Call):
        b = Writer()
        if node.target is not None:
            b.message(1, encode_expr(node.target))
        b.string(2, node.function)
        for a in node.args:
            b.message(3, encode_expr(a))
        w.message(6, b)
    elif isinstance(node, ListExpr):
        b = Writer()
        for e in node.elements:
            b.message(1, encode_expr(e))
        for i in node.optional_indices:
            b.varint(2, i)
        w.message(7, b)
    elif isinstance(node, StructExpr):
        b = Writer()
        if node.message_name:
            b.string(1, node.message_name)
        for entry in node.entries:
            ew = Writer()
            ew.varint(1, entry.id)
            if isinstance(entry.key, Expr):
                ew.message(3, encode_expr(entry.key))
            else:
                ew.string(2, entry.key)
            ew.message(4, encode_expr(entry.value))
            if entry.optional:
                ew.varint(5, 1)
            b.message(2, ew)
        w.message(8, b)
    elif isinstance(node, Comprehension):
        b = Writer()
        b.string(1, node.iter_var)
        b.message(2, encode_expr(node.iter_range))
        b.string(3, node.accu_var)
        b.message(4, encode_expr(node.accu_init))
        b.message(5, encode_expr(node.loop_condition))
        b.message(6, encode_expr(node.loop_step))
        b.message(7, encode_expr(node.result))
        if node.iter_var2:
            b.string(8, node.iter_var2)
        w.message(9, b)
    return w


def encode_checked(checked: Checked) -> bytes:
    """A CheckedExpr (in an Any) for `Env.deserialize()`: the tree, references, types and positions."""
    w = Writer()
    ids = {n.id for n in walk(checked.expr)}
    for key, ref in checked.references.items():
        if key not in ids:
            continue
        r = Writer()
        r.string(1, ref.name)
        for o in ref.overload_ids:
            r.string(3, o)
        if ref.value is not None:
            r.message(4, _write_const(ref.value))
        entry = Writer()
        entry.varint(1, key)
        entry.message(2, r)
        w.message(2, entry)
    for key, raw in checked.raw_types.items():
        if key not in ids:
            continue
        entry = Writer()
        entry.varint(1, key)
        entry.bytes_(2, raw)
        w.message(3, entry)
    w.message(4, encode_expr(checked.expr))
    info = Writer()
    info.string(2, "<input>")
    for off in checked.line_offsets:
        info.varint(3, off)
    for key, pos in checked.positions.items():
        if key in ids:
            entry = Writer()
            entry.varint(1, key)
            entry.varint(2, pos)
            info.message(4, entry)
    w.message(5, info)
    wrapped = Writer()  # a google.protobuf.Any, as Expression.serialize() writes it
    wrapped.string(1, "type.googleapis.com/cel.expr.CheckedExpr")
    wrapped.message(2, w)
    return wrapped.getvalue()
