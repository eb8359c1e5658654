"""cel-python's front end: parse and type-check with cel-cpp (through cel-expr-python), validate, and
assemble one checked tree.

The checker runs against a declared copy of Kubernetes' environment (`environment`), so a source
compiles here exactly when it compiles in Kubernetes (differences: tests/cel/gaps.py), and compile
errors are worded as cel-go words them. The result is a `Compiled`: one checked tree in which the
template's variables are bound once and evaluated lazily (memoised):

    cel.@block([<variable 0>, <variable 1>, ...], <expression>)

where `@indexN` names slot N (cel-cpp's block form; cel-python's lowering implements it too).
Inside the tree:

- `variables.<name>` of a template variable is `@indexN`;
- `variables.params` is a slot holding `@ck.params()`, the constraint's parameters;
- `params` (Gatekeeper binds the constraint object there) is a slot holding `@ck.constraint()`;
- `variables.anyObject` is a slot holding Gatekeeper's expression
  `has(request.operation) && request.operation == "DELETE" && object == null ? oldObject : object`.

Thread safety: a Frontend may be shared by threads; cel-cpp compiles under the GIL and the caches
are guarded by a lock.
"""

from __future__ import annotations

import copy
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from cel_expr_python import cel

from celkeeper.cel.api import VariableCompileError
from celkeeper.cel.celpython import ast, astcodec
from celkeeper.cel.celpython.ast import Call, CelType, Checked, Comprehension, Expr, Ident, ListExpr, Select
from celkeeper.cel.celpython.astvalidators import validate
from celkeeper.cel.celpython.environment import VARIABLES, checker_yaml, runtime_yaml, split_types
from celkeeper.cel.celpython.limits import check_source, check_tree, position
from celkeeper.cel.inventory import DATA_VARIABLE
from celkeeper.errors import CelCompileError
from celkeeper.settings import CelLimits

ANY_OBJECT_SOURCE = (
    'has(request.operation) && request.operation == "DELETE" && object == null ? oldObject : object'
)
BUILTIN_VARIABLES = ("params", "anyObject")
_IDENT = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*\Z")
_ERROR = re.compile(r"ERROR: <input>:(-?\d+):(-?\d+): (.*)")
_RECURSION = ("recursion limit", "max recursion depth")
_CACHE_SIZE = 256  # compiled template variables kept, per distinct set of variable sources
#: checking environments kept (one per set of declared variable types; ~400 KiB each once used,
#: ~1.6 ms to make again): enough for the expressions of a few templates
_ENV_CACHE_SIZE = 16


# (data declared, the declared variables' names and types)
_EnvKey = tuple[bool, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Compiled:
    """A checked, validated expression ready for an engine."""

    source: str
    output_type: CelType
    checked: Checked  # expression tree, possibly wrapped in cel.@block(...)
    slots: tuple[str, ...]  # what each @indexN holds: a variable name, "params" or "constraint"


@dataclass(frozen=True)
class _Variable:
    name: str
    type: CelType
    checked: Checked
    uses: tuple[str, ...]  # the variables (user or built-in) its expression refers to


def _to_cel_type(t: CelType) -> cel.Type:
    simple = {
        "bool": cel.Type.BOOL,
        "int": cel.Type.INT,
        "uint": cel.Type.UINT,
        "double": cel.Type.DOUBLE,
        "string": cel.Type.STRING,
        "bytes": cel.Type.BYTES,
        "null_type": cel.Type.NULL,
        "google.protobuf.Timestamp": cel.Type.TIMESTAMP,
        "google.protobuf.Duration": cel.Type.DURATION,
        "dyn": cel.Type.DYN,
    }
    if t.name in simple and not t.params:
        return simple[t.name]
    if t.name == "list" and len(t.params) == 1:
        return cel.Type.List(_to_cel_type(t.params[0]))
    if t.name == "map" and len(t.params) == 2:
        return cel.Type.Map(_to_cel_type(t.params[0]), _to_cel_type(t.params[1]))
    if t.name == "type" and len(t.params) == 1:
        return cel.Type.Type(_to_cel_type(t.params[0]))
    if t.name in ("error", "function", "any", "wrapper") or not t.name:
        return cel.Type.DYN
    return cel.Type.AbstractType(t.name, [_to_cel_type(p) for p in t.params])


def compile_error(exc: BaseException, source: str) -> CelCompileError:
    """A cel-cpp RuntimeError as a CelCompileError: the first error's message, line and column."""
    text = str(exc)
    if any(r in text for r in _RECURSION):
        return CelCompileError(
            "expression nested too deeply: cel-cpp's parser allows 32 levels of nesting "
            "(parentheses, operator chains, selections) (max_ast_depth)",
            1,
            1,
            limit="max_ast_depth",
        )
    errors = sorted((int(line), int(col), msg) for line, col, msg in _ERROR.findall(text))
    if not errors:
        message = re.sub(r"^[A-Z_]+: ", "", text).split("\n")[0].replace(" [INVALID_ARGUMENT]", "")
        return CelCompileError(message or "invalid expression")
    issues = tuple(sorted(_as_cel_go(source, line, col, msg) for line, col, msg in errors))
    line, col, message = issues[0]  # cel-go reports errors in source order
    more = len(issues) - 1
    if more > 0:
        message += f" (and {more} more error{'s' if more > 1 else ''})"
    return CelCompileError(message, line, col, issues=issues)


_NO_SELECTION = re.compile(r"expression of type '(.*)' cannot be the operand of a select operation\Z", re.S)
_NO_OVERLOAD = re.compile(r"found no matching overload for '([^']+)' applied to '\((.*)\)'\Z", re.S)


def _as_cel_go(source: str, line: int, col: int, message: str) -> tuple[int, int, str]:
    """One cel-cpp issue in cel-go's words and place."""
    message = message.replace(" [INVALID_ARGUMENT]", "")
    line, col = max(line, 1), max(col, 1)
    dotted = re.fullmatch(r"undeclared reference to '([^'.]+)\.[^']*'( \(in container ''\))?", message)
    if dotted:  # cel-cpp names the whole qualified name at its last dot; cel-go the first name
        line, col = _chain_start(source, line, col)
        message = f"undeclared reference to '{dotted.group(1)}'{dotted.group(2) or ''}"
    selection = _NO_SELECTION.match(message)
    if selection:  # cel-go's checker: `type 'null' does not support field selection`
        kind = "null" if selection.group(1) == "null_type" else selection.group(1)
        message = f"type '{kind}' does not support field selection"
    overload = _NO_OVERLOAD.match(message)
    if overload and _member_call(source, line, col):  # cel-go: 'receiver.(arguments)'
        receiver, *others = split_types(overload.group(2))
        rest = ",".join(others).lstrip()
        message = f"found no matching overload for '{overload.group(1)}' applied to '{receiver}.({rest})'"
    return line, col, message


def _member_call(source: str, line: int, col: int) -> bool:
    """Whether the call whose `(` is at line:col is a member call (`x.f(...)`)."""
    lines = source.split("\n")
    if not 1 <= line <= len(lines) or lines[line - 1][col - 1 : col] != "(":
        return False
    before = lines[line - 1][: col - 1].rstrip()
    name = re.search(r"[_a-zA-Z][_a-zA-Z0-9]*\Z", before)
    return name is not None and before[: name.start()].rstrip().endswith(".")


def _chain_start(source: str, line: int, col: int) -> tuple[int, int]:
    """The start of the `a.b.c` chain whose dot cel-cpp points at (same line)."""
    lines = source.split("\n")
    if not 1 <= line <= len(lines):
        return line, col
    text = lines[line - 1]
    i = min(col - 1, len(text))
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_."):
        i -= 1
    return line, i + 1


class Frontend:
    """Compiles sources in the Kubernetes environment (see the module docstring)."""

    def __init__(self, limits: CelLimits | None = None) -> None:
        self.limits = limits or CelLimits()
        self._config = cel.NewEnvConfigFromYaml(checker_yaml())
        self._base = self._new_env({})
        # used to evaluate duration()/timestamp() literals at compile time
        self.literal_env = cel.NewEnv(config=cel.NewEnvConfigFromYaml(runtime_yaml()))
        self._lock = threading.Lock()
        self._envs: OrderedDict[_EnvKey, object] = OrderedDict()
        self._variables: OrderedDict[_EnvKey, list[_Variable]] = OrderedDict()
        self._any_object: _Variable | None = None

    def _new_env(self, declared: Mapping[str, CelType], data: bool = False) -> object:
        variables = dict.fromkeys(VARIABLES, cel.Type.DYN)
        if data:  # a template that reads synced data (celkeeper.cel.inventory)
            variables[DATA_VARIABLE] = cel.Type.DYN
        for name, t in declared.items():
            variables[f"variables.{name}"] = _to_cel_type(t)
        return cel.NewEnv(config=self._config, variables=variables)

    def _env(self, declared: Mapping[str, CelType], data: bool = False) -> object:
        if not declared and not data:
            return self._base
        key = (data, tuple(sorted((k, str(v)) for k, v in declared.items())))
        with self._lock:
            env = self._envs.get(key)
            if env is not None:
                self._envs.move_to_end(key)
                return env
        env = self._new_env(declared, data)
        with self._lock:
            self._envs[key] = env
            while len(self._envs) > _ENV_CACHE_SIZE:
                self._envs.popitem(last=False)
        return env

    # ------------------------------------------------------------------------------- checking

    def _referenced(self, source: str) -> list[tuple[str, int]]:
        """`variables.<name>` references in source order, with their offsets (parse only)."""
        try:
            parsed = astcodec.decode_checked(self._base.compile(source, disable_check=True).serialize())  # type: ignore[attr-defined]
        except RuntimeError as exc:
            raise compile_error(exc, source) from None
        refs: list[tuple[str, int]] = []
        for node in ast.walk(parsed.expr):
            if (
                isinstance(node, Select)
                and isinstance(node.operand, Ident)
                and node.operand.name == "variables"
            ):
                refs.append((node.field, parsed.positions.get(node.id, 0)))
        refs.sort(key=lambda r: r[1])
        return refs

    def undeclared_params(self, source: str) -> CelCompileError | None:
        """The compile error Kubernetes reports for a top-level `params` in an expression compiled
        without it (a template's validations, messageExpressions and match conditions: Gatekeeper
        declares `params` only for variables), or None."""
        try:
            parsed = astcodec.decode_checked(self._base.compile(source, disable_check=True).serialize())  # type: ignore[attr-defined]
        except RuntimeError:
            return None  # the checker reports it
        found = [n for n in _free_idents(parsed.expr) if n.name == "params"]
        if not found:
            return None
        offset = min(parsed.positions.get(n.id, 0) for n in found)
        line, col = position(source, offset)
        return CelCompileError("undeclared reference to 'params' (in container '')", line, col)

    def _check(
        self, source: str, known: Mapping[str, _Variable], data: bool = False
    ) -> tuple[Checked, tuple[str, ...]]:
        """Check `source` with the variables it refers to declared; returns the tree and its uses."""
        check_source(source, self.limits)
        uses: list[str] = []
        declared: dict[str, CelType] = {}
        for name, offset in self._referenced(source):
            if name in BUILTIN_VARIABLES:
                declared[name] = ast.DYN
            elif name in known:
                declared[name] = known[name].type
            else:
                line, col = position(source, offset)
                raise CelCompileError(f"undefined field '{name}'", line, col)
            if name not in uses:
                uses.append(name)
        env = self._env(declared, data)
        try:
            checked = astcodec.decode_checked(env.compile(source).serialize())  # type: ignore[attr-defined]
        except RuntimeError as exc:
            raise compile_error(exc, source) from None
        check_tree(checked, source, self.limits)
        _check_object_fields(checked, source)
        validate(checked, source, self.limits, self.literal_env)
        if _uses_constraint(checked):
            uses.append("@constraint")
        return checked, tuple(uses)

    def _compile_variables(self, variables: Mapping[str, str], data: bool = False) -> list[_Variable]:
        key = (data, tuple(variables.items()))
        with self._lock:
            cached = self._variables.get(key)
            if cached is not None:
                self._variables.move_to_end(key)
                return cached
        known: dict[str, _Variable] = {}
        out: list[_Variable] = []
        for name, expression in variables.items():
            if not _IDENT.match(name):
                raise CelCompileError(f"invalid variable name {name!r}: not a CEL identifier")
            if name in BUILTIN_VARIABLES:
                raise CelCompileError(f"invalid variable name {name!r}: it is reserved")
            if name in known:
                raise CelCompileError(f"variable {name!r} is defined twice")
            try:
                checked, uses = self._check(expression, known, data)
            except CelCompileError as err:
                raise VariableCompileError(name, err) from None
            var = _Variable(name, checked.type_of(checked.expr), checked, uses)
            known[name] = var
            out.append(var)
        with self._lock:
            self._variables[key] = out
            while len(self._variables) > _CACHE_SIZE:
                self._variables.popitem(last=False)
        return out

    def _builtin_any_object(self) -> _Variable:
        if self._any_object is None:
            checked, uses = self._check(ANY_OBJECT_SOURCE, {})
            self._any_object = _Variable("anyObject", ast.DYN, checked, uses)
        return self._any_object

    # ------------------------------------------------------------------------------- assembly

    def compile(
        self, source: str, variables: Mapping[str, str] | None = None, *, data: bool = False
    ) -> Compiled:
        """Check `source` (and the variables, cached); raise CelCompileError or return Compiled.
        `data`: `data` is declared (a template that reads synced data)."""
        compiled_vars = self._compile_variables(variables or {}, data)
        known = {v.name: v for v in compiled_vars}
        checked, uses = self._check(source, known, data)
        output_type = checked.type_of(checked.expr)

        # the slots this expression needs, dependencies first
        order: list[str] = []

        def need(name: str) -> None:
            if name in order:
                return
            if name in known:
                for dep in known[name].uses:
                    need(dep)
            elif name == "anyObject":
                for dep in self._builtin_any_object().uses:
                    need(dep)
            order.append(name)

        for name in uses:
            need(name)
        if not order:
            return Compiled(source, output_type, checked, ())

        slot_of = {name: i for i, name in enumerate(order)}
        next_id = [checked.max_id() + 1]
        result = Checked(
            checked.expr,
            dict(checked.types),
            dict(checked.references),
            dict(checked.positions),
            list(checked.line_offsets),
            dict(checked.raw_types),
        )
        inits: list[Expr] = []
        for name in order:
            if name == "params":
                inits.append(Call(self._fresh(next_id), "@ck.params", []))
                continue
            if name == "@constraint":
                inits.append(Call(self._fresh(next_id), "@ck.constraint", []))
                continue
            var = self._builtin_any_object() if name == "anyObject" else known[name]
            tree = _renumbered(var.checked, next_id)
            init = _bind_slots(tree, slot_of)
            result.types.update(tree.types)
            result.raw_types.update(tree.raw_types)
            result.references.update(tree.references)
            # positions of a variable's nodes would point into another source: leave them out
            inits.append(init)
        body = _bind_slots(result, slot_of)
        block = Call(self._fresh(next_id), "cel.@block", [ListExpr(self._fresh(next_id), inits), body])
        result.expr = block
        result.types[block.id] = output_type
        return Compiled(source, output_type, result, tuple(order))

    @staticmethod
    def _fresh(counter: list[int]) -> int:
        counter[0] += 1
        return counter[0]


def _renumbered(checked: Checked, counter: list[int]) -> Checked:
    """A deep copy of a tree with new, unused node ids (types and references follow)."""
    tree = copy.deepcopy(checked.expr)
    mapping: dict[int, int] = {}
    for node in ast.walk(tree):
        counter[0] += 1
        mapping[node.id] = counter[0]
        node.id = counter[0]
        for entry in getattr(node, "entries", ()):
            counter[0] += 1
            entry.id = counter[0]
    return Checked(
        tree,
        {mapping[k]: v for k, v in checked.types.items() if k in mapping},
        {mapping[k]: v for k, v in checked.references.items() if k in mapping},
        {},
        [],
        {mapping[k]: v for k, v in checked.raw_types.items() if k in mapping},
    )


def _free_idents(root: Expr) -> list[Ident]:
    """The identifiers not bound by an enclosing comprehension (its variables shadow `params`)."""
    out: list[Ident] = []
    stack: list[tuple[Expr, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, bound = stack.pop()
        if isinstance(node, Ident):
            if node.name not in bound:
                out.append(node)
        elif isinstance(node, Comprehension):
            inner = bound | {node.iter_var, node.iter_var2, node.accu_var}
            stack += [(node.iter_range, bound), (node.accu_init, bound)]
            stack += [(node.loop_condition, inner), (node.loop_step, inner)]
            stack.append((node.result, bound | {node.accu_var}))
        else:
            stack += [(c, bound) for c in ast.children(node)]
    return out


#: the fields of Kubernetes' typed variables (admission/plugin/cel/compile.go BuildRequestType and
#: BuildNamespaceType; `request` has no `uid`): a field's own fields, or None where it is not an
#: object (its selections are the value's business, as with the dyn variables)
_GVK: Mapping[str, None] = dict.fromkeys(("group", "version", "kind"))
_GVR: Mapping[str, None] = dict.fromkeys(("group", "version", "resource"))
_TYPED_VARIABLES: Mapping[str, Mapping[str, object]] = {
    "request": {
        "kind": _GVK,
        "resource": _GVR,
        "subResource": None,
        "requestKind": _GVK,
        "requestResource": _GVR,
        "requestSubResource": None,
        "name": None,
        "namespace": None,
        "operation": None,
        "userInfo": dict.fromkeys(("username", "uid", "groups", "extra")),
        "dryRun": None,
        "options": None,
    },
    "namespaceObject": {
        "metadata": dict.fromkeys(
            (
                "name",
                "generateName",
                "namespace",
                "labels",
                "annotations",
                "UID",
                "creationTimestamp",
                "deletionGracePeriodSeconds",
                "deletionTimestamp",
                "generation",
                "resourceVersion",
                "finalizers",
            )
        ),
        "spec": dict.fromkeys(("finalizers",)),
        "status": dict.fromkeys(("conditions", "phase")),
    },
}


def _check_object_fields(checked: Checked, source: str) -> None:
    """cel-go's checker on the typed variables: selecting a field their type lacks
    (`request.uid`) is `undefined field '<name>'` at the selection, a compile error."""
    free = {id(n) for n in _free_idents(checked.expr) if n.name in _TYPED_VARIABLES}
    if not free:
        return
    problems: list[tuple[int, str]] = []
    for node in ast.walk(checked.expr):
        if not isinstance(node, Select):
            continue
        fields = _fields_of(node.operand, free)
        if isinstance(fields, Mapping) and node.field not in fields:
            problems.append((checked.positions.get(node.id, 0), f"undefined field '{node.field}'"))
    if problems:
        problems.sort()
        issues = tuple((*position(source, offset), message) for offset, message in problems)
        line, col, message = issues[0]
        if len(issues) > 1:
            more = len(issues) - 1
            message += f" (and {more} more error{'s' if more > 1 else ''})"
        raise CelCompileError(message, line, col, issues=issues)


def _fields_of(node: Expr, free: set[int]) -> object:
    """The declared fields of the value `node` selects from a typed variable, or None."""
    if isinstance(node, Ident):
        return _TYPED_VARIABLES[node.name] if id(node) in free else None
    if isinstance(node, Select) and not node.test_only:
        fields = _fields_of(node.operand, free)
        if isinstance(fields, Mapping):
            return fields.get(node.field)
    return None


def _uses_constraint(checked: Checked) -> bool:
    return any(n.name == "params" for n in _free_idents(checked.expr))


def _bind_slots(checked: Checked, slot_of: Mapping[str, int]) -> Expr:
    """Replace `variables.<name>` (and the `params` variable) by `@indexN` identifiers in place."""
    targets: dict[int, int] = {}
    for node in _free_idents(checked.expr):
        ref = checked.references.get(node.id)
        name = ref.name if ref is not None and ref.name else node.name
        if name.startswith("variables.") and name[len("variables.") :] in slot_of:
            targets[id(node)] = slot_of[name[len("variables.") :]]
        elif name == "params" and "@constraint" in slot_of:
            targets[id(node)] = slot_of["@constraint"]

    def replace(node: Expr) -> Expr:
        n = targets.get(id(node))
        if n is None:
            return node
        checked.references.pop(node.id, None)
        return Ident(node.id, f"@index{n}")

    root = replace(checked.expr)
    for parent in ast.walk(root):
        ast.replace_children(parent, replace)
    return root
