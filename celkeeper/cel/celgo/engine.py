"""The cel-go engine: Kubernetes' own CEL, exactly as Gatekeeper v3.23.1 runs it, in a Go library.

Templates compile into Gatekeeper's validator (pkg/drivers/k8scel/driver.go AddTemplate:
Kubernetes' composited compiler, its match-condition matcher and validator) inside the native
library (`celkeeper/native/go/k8scel`); constraints are decoded there once; a request crosses once
per decision with every constraint Python's matching selected and a deadline, and comes back as
Kubernetes' validator decisions. See k8scel/validate.go for how the validator's work is shared
between constraints.

Thread and process safety: the library's handles may be used from any thread (the library locks
what it shares); the library must be loaded after a fork (celkeeper.native.ffi).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from celkeeper.cel.api import (
    CelError,
    Diagnostic,
    EngineDecision,
    Explained,
    InventoryError,
    Outcome,
    PartTrace,
    RequestInput,
    TemplateRefused,
    TemplateSource,
    VariableCompileError,
)
from celkeeper.errors import CelCompileError, ReviewError
from celkeeper.native.ffi import Library, load, pack_handle

NAME = "cel-go"
_NONE = b"null"
#: connections a store keeps open (one per request reading it at once: a worker's threads)
STORE_CONNECTIONS = 8
_NO_DECISIONS: tuple[EngineDecision, ...] = ()


def _dumps(value: Any) -> bytes:
    if value is None:
        return _NONE
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # orjson stops at 255 levels of nesting; Kubernetes objects may have more
        return _deep_dumps(value)


def _deep_dumps(value: Any) -> bytes:
    """JSON of plain data nested deeper than orjson goes (iteratively: no recursion limit either)."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
        elif isinstance(item, dict):
            out.append("{")
            parts: list[Any] = []
            for i, (k, v) in enumerate(item.items()):
                parts += [_Raw(("," if i else "") + json.dumps(str(k)) + ":"), v]
            stack.append(_Raw("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, list | tuple):
            out.append("[")
            stack.append(_Raw("]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Raw(","))
        else:
            out.append(json.dumps(item))
    return "".join(out).encode()


def _outcome(decisions: Any, ns: int) -> Outcome:
    return Outcome(
        tuple(EngineDecision(d["action"], d["evaluation"], d["message"]) for d in decisions or ()), ns / 1e9
    )


def _part(encoded: dict[str, Any]) -> PartTrace:
    from celkeeper.cel.celgo.values import decode  # Kubernetes' library values: explanations only

    value = encoded.get("value")
    return PartTrace(
        part=encoded["part"],
        index=int(encoded["index"]),
        name=encoded.get("name", ""),
        value=decode(value) if value is not None else None,
        error=encoded.get("error") or None,
        evaluated=bool(encoded.get("evaluated", True)),
        scope=encoded.get("scope", "validations"),
        cost=encoded.get("cost"),
    )


@dataclass(frozen=True)
class _Raw:
    text: str


@dataclass(eq=False)
class _Handle:
    """A library handle, released when the Python object goes away."""

    library: Library
    handle: int
    _finalizer: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._finalizer = weakref.finalize(self, self.library.release, self.handle)


@dataclass(eq=False)
class GoInventory:
    """A synced data store the library has opened (read-only)."""

    library: Library
    handle: int
    path: str
    _finalizer: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._finalizer = weakref.finalize(self, self.library.store_close, self.handle)

    def close(self) -> None:
        self._finalizer()


@dataclass(frozen=True, eq=False)
class GoProgram:
    """An expression compiled as a template variable is (any output type)."""

    source: str
    output_type: str
    ref: _Handle = field(repr=False)


@dataclass(eq=False)
class GoActivation:
    """One request's inputs as CEL sees them, serialised once for every evaluation."""

    object: Any
    old_object: Any
    request: Mapping[str, Any] | None
    namespace_object: Any
    _prefix: bytes | None = None

    def prefix(self) -> bytes:
        if self._prefix is None:
            self._prefix = (
                b'{"object":'
                + _dumps(self.object)
                + b',"oldObject":'
                + _dumps(self.old_object)
                + b',"request":'
                + _dumps(dict(self.request) if self.request is not None else None)
                + b',"namespaceObject":'
                + _dumps(self.namespace_object)
                + b',"params":'
            )
        return self._prefix


@dataclass(frozen=True, eq=False)
class GoTemplate:
    """A compiled template (Gatekeeper's validator for it)."""

    ref: _Handle = field(repr=False)
    failure_policy: str
    diagnostics: tuple[Diagnostic, ...]


@dataclass(frozen=True, eq=False)
class GoBinding:
    """A constraint bound to a compiled template (`packed`: its handle as `Library.validate` takes it)."""

    program: GoTemplate
    ref: _Handle = field(repr=False)
    packed: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "packed", pack_handle(self.ref.handle))


class CelGoEngine:
    """The cel-go engine (see the module docstring). Loading it loads the library (LibraryUnavailable
    when it cannot be)."""

    name = NAME

    def __init__(self, library: Library | None = None) -> None:
        self._lib = library or load()

    @property
    def library(self) -> Library:
        return self._lib

    # -- templates ------------------------------------------------------------------------------
    def compile_template(self, source: TemplateSource) -> GoTemplate:
        options = b""
        if source.data_kinds:
            options = orjson.dumps(
                {"dataKinds": [{"apiVersion": k.api_version, "kind": k.kind} for k in source.data_kinds]}
            )
        handle, reply = self._lib.template(orjson.dumps(source.raw, option=orjson.OPT_NON_STR_KEYS), options)
        if handle <= 0:
            raise TemplateRefused(str(reply.get("error", "the template cannot be compiled")))
        diagnostics = tuple(
            Diagnostic(
                part=d["part"],
                index=int(d["index"]),
                name=d.get("name", ""),
                message=d["message"],
                line=d.get("line"),
                column=d.get("column"),
            )
            for d in reply.get("diagnostics") or ()
        )
        return GoTemplate(_Handle(self._lib, handle), str(reply["failurePolicy"]), diagnostics)

    def bind(self, program: Any, constraint: Mapping[str, Any]) -> GoBinding:
        assert isinstance(program, GoTemplate)
        handle, reply = self._lib.constraint(program.ref.handle, _dumps(constraint))
        if handle <= 0:
            raise ValueError(str(reply.get("error", "the constraint cannot be bound")))
        return GoBinding(program, _Handle(self._lib, handle))

    def open_inventory(self, path: str) -> GoInventory:
        handle, reply = self._lib.store_open(path.encode(), STORE_CONNECTIONS)
        if handle <= 0:
            raise InventoryError(str(reply.get("error", f"cannot open the synced data store {path}")))
        return GoInventory(self._lib, handle, path)

    def validate(self, request: RequestInput, bindings: Sequence[Any], timeout: float) -> list[Outcome]:
        if not bindings:
            return []
        reply = self._call(request, bindings, timeout, explain=False)
        elapsed = reply["ns"]
        if len(elapsed) != len(bindings):
            raise RuntimeError(f"the cel-go library answered for {len(elapsed)} of {len(bindings)} bindings")
        outcomes = [Outcome(_NO_DECISIONS, ns / 1e9) for ns in elapsed]
        for i, decisions in reply["d"].items():  # only the constraints with decisions
            at = int(i)
            outcomes[at] = Outcome(
                tuple(EngineDecision(d["action"], d["evaluation"], d["message"]) for d in decisions),
                outcomes[at].seconds,
            )
        return outcomes

    def explain(self, request: RequestInput, bindings: Sequence[Any], timeout: float) -> list[Explained]:
        if not bindings:
            return []
        reply = self._call(request, bindings, timeout, explain=True)
        return [
            Explained(_outcome(decisions, ns), tuple(_part(p) for p in trace["parts"]))
            for decisions, ns, trace in zip(reply["d"], reply["ns"], reply["t"], strict=True)
        ]

    def _call(self, request: RequestInput, bindings: Sequence[Any], timeout: float, *, explain: bool) -> Any:
        inventory = request.inventory
        store = inventory.handle if isinstance(inventory, GoInventory) else 0
        header = request.request
        reply = self._lib.validate(
            _dumps(header if type(header) is dict else dict(header)),
            _dumps(request.object) if request.object is not None else b"",
            _dumps(request.old_object) if request.old_object is not None else b"",
            _dumps(request.namespace) if request.namespace is not None else b"",
            b"".join([b.packed for b in bindings]),
            max(int(timeout * 1e9), 1) if timeout > 0 else 0,
            store,
            explain=explain,
        )
        if "error" in reply:
            if reply.get("internal"):  # a bug (a panic in the library): an internal error, not the request's
                raise RuntimeError(str(reply["error"]))
            raise ReviewError(str(reply["error"]))
        return reply

    # -- expressions ----------------------------------------------------------------------------
    def compile(self, source: str, variables: Mapping[str, str] | None = None) -> GoProgram:
        request = {
            "source": source,
            "variables": [{"name": k, "expression": v} for k, v in (variables or {}).items()],
        }
        handle, reply = self._lib.expression(orjson.dumps(request))
        error = reply.get("error")
        if handle <= 0 or error is not None:
            if isinstance(error, dict):
                err = CelCompileError(error["message"], error.get("line") or 1, error.get("column") or 1)
                if error.get("variable"):
                    raise VariableCompileError(error["variable"], err)
                raise err
            raise CelCompileError(str(error))
        return GoProgram(source, str(reply["outputType"]), _Handle(self._lib, handle))

    def activation(
        self,
        *,
        object: Any,
        old_object: Any,
        request: Mapping[str, Any] | None,
        namespace_object: Any = None,
    ) -> GoActivation:
        return GoActivation(object, old_object, request, namespace_object)

    def evaluate(
        self,
        program: Any,
        activation: Any,
        params: Any = None,
        constraint: Any = None,
        timeout: float = 0.0,
    ) -> Any:
        assert isinstance(program, GoProgram) and isinstance(activation, GoActivation)
        if constraint is None and params is not None:
            constraint = {"spec": {"parameters": params}}
        inputs = activation.prefix() + _dumps(constraint) + b"}"
        encoded = self._lib.evaluate(program.ref.handle, inputs, int(timeout * 1e9))
        if "error" in encoded and "t" not in encoded:
            return CelError(str(encoded["error"]))
        from celkeeper.cel.celgo.values import decode  # not imported by what decides requests

        return decode(encoded)
