"""Gatekeeper's mutators (mutations.gatekeeper.sh): read, checked and run by Gatekeeper's own code.

Assign, AssignMetadata and ModifySet (v1, v1beta1, v1alpha1) and AssignImage (v1alpha1) are read as
Gatekeeper v3.23.1 gets them in a cluster - the API server reads them through Gatekeeper's CRDs (unknown
fields pruned, defaults applied, the schema validated), Gatekeeper's webhook converts and builds them -
and run by Gatekeeper's mutation System (ordering by id, iteration to a fixed point, schema conflicts,
path tests, assignIf, applyTo, match), all in celkeeper's native library (native/go/mutation). What
Gatekeeper refuses is a located `MutatorError` and the mutator is left out; a mutator reading external
data is refused (providers cannot be called in-process); mutators whose schemas conflict are kept, each
reported, and none of them is applied, as in Gatekeeper.

    mutators = build_mutator_set(documents, MutationOptions(...))
    mutators.mutators   -> tuple[Mutator, ...]  loaded, in Gatekeeper's order (those in conflict too)
    mutators.errors     -> tuple[MutatorError, ...]  refused and conflicting mutators, located
    mutators.mutate(MutationRequest(...)) -> MutationResult   Gatekeeper's mutation webhook's answer
    check_mutator(document) -> list[MutatorError]   what the API server and Gatekeeper refuse at apply time
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.model import JsonObject
from celkeeper.mutation.kinds import is_mutator
from celkeeper.native.ffi import Library, LibraryUnavailable, load


class MutatorError(CelkeeperError):
    """A mutator the API server or Gatekeeper refuses, one celkeeper cannot run, or one in conflict."""


class MutationUnavailable(CelkeeperError):
    """Mutators need celkeeper's native library, which cannot be loaded here."""


@dataclass(frozen=True)
class MutationOptions:
    """What Gatekeeper's mutation webhook takes from its flags and its Config."""

    annotations: bool = False  # --mutation-annotations
    self_username: str = ""  # the user whose requests are not mutated (Gatekeeper's own)
    exclusions: tuple[JsonObject, ...] = ()  # Config spec.match entries (excludedNamespaces, processes)
    # read mutators as gator's expander does (no CRD defaults, pruning or schema validation), not as the
    # API server and Gatekeeper's webhook do: `celkeeper expand`
    gator_reading: bool = False

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "annotations": self.annotations,
                "selfUsername": self.self_username,
                "exclusions": list(self.exclusions),
                "gatorReading": self.gator_reading,
            }
        )


@dataclass(frozen=True)
class Mutator:
    """A mutator in the set: its kind and name, Gatekeeper's name for it (`Kind//name:generation`, as in
    its annotations and logs), the mutators its schema conflicts with, and its document."""

    kind: str
    name: str
    text: str
    conflicts: tuple[tuple[str, str], ...] = ()
    document: Document | None = field(default=None, compare=False, repr=False)
    conflict_error: str = ""  # Gatekeeper's error for the conflict (ErrConflictingSchema), when in one


@dataclass(frozen=True)
class MutationRequest:
    """An admission request to answer as Gatekeeper's mutation webhook does.

    `request` is the AdmissionReview's request; `namespace` its Namespace object as the cluster has it
    (None: none); `no_namespace` says there is no cluster to ask (the offline tools): a namespace without
    its object is then mutated without it, where Gatekeeper's webhook answers the API server's not-found
    error. `mutation_id` fixes the id of the annotations (tests); `explain` asks which mutators applied
    in which iteration."""

    request: Mapping[str, Any]
    namespace: Mapping[str, Any] | None = None
    no_namespace: bool = False
    mutation_id: str = ""
    explain: bool = False
    response_only: bool = False  # the AdmissionResponse alone (a served request: no patch list, no object)

    def to_json(self) -> tuple[bytes, bytes]:
        """The request as the native library reads it: mutation.Request (JSON), and the AdmissionRequest's
        object (JSON) apart from it (the library then scans it only to decode it; b"": none)."""
        request = dict(self.request)
        obj = request.pop("object", None)
        encoded = orjson.dumps(
            {
                "request": request,
                "namespace": dict(self.namespace) if self.namespace is not None else None,
                "noNamespace": self.no_namespace,
                "mutationID": self.mutation_id,
                "explain": self.explain,
                "responseOnly": self.response_only,
            }
        )
        return encoded, (orjson.dumps(obj) if obj is not None else b"")


@dataclass(frozen=True)
class MutationResult:
    """Gatekeeper's answer: the AdmissionResponse (`response`), whether the object changed, the JSONPatch
    as operations, the mutated object, Gatekeeper's error (its webhook then answers code 500, not
    allowed), and, explained, the mutators that changed the object in each iteration."""

    response: JsonObject
    mutated: bool
    patch: tuple[JsonObject, ...]
    object: JsonObject | None
    error: str
    iterations: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # explained: what each mutator did (native mutation/explain.go Trace), when the object reached them
    trace: JsonObject | None = None

    @property
    def allowed(self) -> bool:
        return bool(self.response.get("allowed"))


@dataclass(frozen=True)
class MutatedObject:
    """An object as Gatekeeper's System leaves it (`mutated`: it changed), or Gatekeeper's error."""

    object: JsonObject
    mutated: bool
    error: str = ""


@dataclass(eq=False)
class _System:
    """A mutation System of the library, released when the Python object goes away."""

    library: Library
    handle: int
    _finalizer: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._finalizer = weakref.finalize(self, self.library.release, self.handle)


class MutatorSet:
    """Immutable after construction: the mutators of a policy set in Gatekeeper's mutation System."""

    def __init__(
        self,
        mutators: Sequence[Mutator] = (),
        errors: Iterable[MutatorError] = (),
        options: MutationOptions | None = None,
        system: _System | None = None,
    ) -> None:
        self._mutators = tuple(mutators)
        self._errors = tuple(errors)
        self._options = options or MutationOptions()
        self._system = system

    @property
    def mutators(self) -> tuple[Mutator, ...]:
        return self._mutators

    @property
    def errors(self) -> tuple[MutatorError, ...]:
        return self._errors

    @property
    def options(self) -> MutationOptions:
        return self._options

    def __len__(self) -> int:
        return len(self._mutators)

    def mutate(self, request: MutationRequest) -> MutationResult:
        """Gatekeeper's mutation webhook's answer to `request`. A set without mutators answers without the
        native library (Gatekeeper's System then changes nothing)."""
        if self._system is None:
            return MutationResult(
                response={
                    "uid": request.request.get("uid", ""),
                    "allowed": True,
                    "status": {"metadata": {}, "code": 200, "message": "Resource was not mutated"},
                },
                mutated=False,
                patch=(),
                object=None,
                error="",
            )
        reply = self._system.library.mutation_mutate(self._system.handle, *request.to_json())
        if "response" not in reply:
            raise ValueError(f"the mutation request was not understood: {reply.get('error', reply)}")
        return MutationResult(
            response=reply["response"],
            mutated=bool(reply.get("mutated")),
            patch=tuple(reply.get("patch") or ()),
            object=reply.get("object"),
            error=reply.get("error", ""),
            iterations=tuple(
                (it["iteration"], tuple(it["mutators"])) for it in reply.get("iterations") or ()
            ),
            trace=reply.get("trace"),
        )

    def mutate_object(
        self,
        obj: Mapping[str, Any],
        namespace: Mapping[str, Any] | None,
        *,
        source: str = "Original",
        username: str = "",
        operation: str = "",
    ) -> MutatedObject:
        """`obj` mutated outside a request, as Gatekeeper's expansion mutates the objects it generates
        (source Generated) and gator's expander the object it expands (Original): no operation unless
        given (only mutators applying to every operation then match); `namespace` the Namespace object
        (None: none)."""
        if self._system is None:
            return MutatedObject(dict(obj), False)
        request = {
            "object": dict(obj),
            "namespace": dict(namespace) if namespace is not None else None,
            "username": username,
            "source": source,
            "operation": operation,
        }
        reply = self._system.library.mutation_object(self._system.handle, orjson.dumps(request))
        if reply.get("error"):
            return MutatedObject(dict(obj), False, str(reply["error"]))
        return MutatedObject(reply["object"], bool(reply.get("mutated")))


def load_library() -> Library:
    try:
        return load()
    except LibraryUnavailable as err:
        raise MutationUnavailable(
            f"Gatekeeper's mutators run in celkeeper's native library, which cannot be loaded: {err}"
        ) from err


def build_mutator_set(
    documents: Iterable[Document], options: MutationOptions | None = None, library: Library | None = None
) -> MutatorSet:
    """The mutators among `documents` (others are ignored) in one mutation System; problems in `.errors`.
    Raises MutationUnavailable when there are mutators and the native library cannot be loaded."""
    options = options or MutationOptions()
    docs = [d for d in documents if is_mutator(d)]
    if not docs:
        return MutatorSet(options=options)
    lib = library or load_library()
    handle, reply = lib.mutation_system(options.to_json())
    if not handle:
        raise ValueError(f"the mutation options were refused: {reply.get('error', reply)}")
    system = _System(lib, handle)
    errors: list[MutatorError] = []
    first: dict[tuple[str, str], Document] = {}
    loaded: dict[tuple[str, str], tuple[str, Document]] = {}
    for doc in docs:
        key = (doc.kind, doc.name)
        if doc.name and key in first:
            errors.append(
                doc.error(
                    MutatorError,
                    f"{doc.kind} {doc.name}: defined twice (first at "
                    f"{first[key].location('metadata.name')}); this one is ignored",
                    "metadata.name",
                )
            )
            continue
        first[key] = doc
        done, answer = lib.mutation_upsert(handle, _document_json(doc))
        if not done:
            errors.extend(_refusal(doc, answer))
            continue
        loaded[key] = (answer.get("mutator", ""), doc)
    statuses = lib.mutation_statuses(handle).get("mutators") or []
    mutators: list[Mutator] = []
    for status in statuses:
        key = (status["id"]["kind"], status["id"]["name"])
        text, doc = loaded[key]
        conflicts = tuple((c["kind"], c["name"]) for c in status.get("conflicts") or ())
        mutators.append(Mutator(key[0], key[1], text, conflicts, doc, str(status.get("error") or "")))
        if status.get("error"):
            errors.append(
                doc.error(
                    MutatorError,
                    f"{key[0]} {key[1]}: {status['error']}; Gatekeeper applies none of these mutators "
                    "until the conflict is resolved",
                    "spec.location",
                )
            )
    errors.sort(key=_order)
    return MutatorSet(mutators, errors, options, system)


def check_mutator(document: Document, library: Library | None = None) -> list[MutatorError]:
    """What the API server and Gatekeeper's validating webhook refuse of this mutator when it is applied
    (with what celkeeper cannot run: external data). Empty when it is accepted."""
    lib = library or load_library()
    done, answer = lib.mutation_upsert(0, _document_json(document))
    return [] if done else _refusal(document, answer)


def _document_json(doc: Document) -> bytes:
    return orjson.dumps(doc.data if isinstance(doc.data, dict) else {})


def _refusal(doc: Document, answer: Mapping[str, Any]) -> list[MutatorError]:
    refused = answer.get("refused")
    if not isinstance(refused, dict):
        return [doc.error(MutatorError, f"{doc.kind} {doc.name}: {answer.get('error', answer)}")]
    who = f"{doc.kind} {doc.name}".strip()
    return [
        doc.error(MutatorError, f"{who}: {problem['message']}", problem.get("field", ""))
        for problem in refused.get("problems") or ()
    ]


def _order(err: CelkeeperError) -> tuple[str, int, int, int]:
    where = err.location
    return (where.file or "", where.document or 0, where.line or 0, where.column or 0)
