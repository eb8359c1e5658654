"""The objects `audit` and `test` read: every input accounted for, objects streamed one at a time.

    inputs = Inputs(tool="audit", verb="audited")
    sources = inputs.sources(paths)                 # folders walked, stdin copied to a temporary file
    found = inputs.policies(sources, object_sources)  # pass 1: policy documents and Namespaces
    inputs.consume(inputs.objects(sources), sink)   # pass 2: each object, as it is read
    print(inputs.summary(), file=sys.stderr)

Objects are read by documents.stream (one object in memory at a time, a List's items one by one);
policy documents by the policy reader (every field located) when the file is small enough for it.

Policies and Namespaces must be known before any object is evaluated, and they may be among the
objects (`test -f DIR`, `audit -f DIR`): a first pass reads them. Files that cannot hold one are not
parsed in that pass: a template, a constraint, an ExpansionTemplate or a Namespace names its kind or
API group in its text (`ConstraintTemplate`, `constraints.gatekeeper.sh`, `Namespace`, ...), unless
the text spells it with escapes (`\\u`, `\\x`, `\\U`, a line continued by `\\`) or is not UTF-8 (UTF-16
has zero bytes): a file whose bytes hold none of the names and none of those is skipped. Files read only
for policies (`audit --policy-dir` beside `--objects`) are all read. Standard input is copied to a
temporary file as it is read (memory does not grow with it; disk does), so that it can be read twice.

Everything is counted: objects read, evaluated ("audited", "reviewed"), not evaluated (with the
reason), and errors (each printed once, located). `summary()` is the line the tools end with:

    celkeeper audit: summary: 20000 objects read, 19998 audited, 2 not audited (AdmissionReview: 2), 0 errors
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Generic, Protocol, TypeVar

from celkeeper.cli import files
from celkeeper.documents import Document, Span, parse_documents
from celkeeper.documents.stream import (
    NOT_AN_OBJECT,
    REASONS,
    UNFINISHED,
    Settled,
    Streamed,
    Unread,
    read_objects,
)
from celkeeper.errors import CelkeeperError, DocumentError, Location
from celkeeper.model import JsonObject

#: a file of at most this many bytes holding a policy document is read again by the policy reader, so
#: that the policy's errors are located field by field (parse.py's fast path takes texts of this size)
POLICY_FILE_BYTES = 300_000

#: names a policy document or a Namespace has in its text (its kind or API group)
POLICY_NAMES = (b"ConstraintTemplate", b"constraints.gatekeeper.sh", b"constraints.celkeeper.io")
EXPANSION_NAMES = (b"ExpansionTemplate", b"expansion.gatekeeper.sh")
NAMESPACE_NAMES = (b"Namespace",)
#: what may spell a name in other characters (escapes in double quotes or JSON, a continued line),
#: and zero bytes (UTF-16 or UTF-32 text)
DISGUISES = (b"\\u", b"\\U", b"\\x", b"\\\n", b"\\\r", b"\x00")

# why an object is not evaluated, besides the reader's reasons (documents.stream.REASONS)
POLICY_DOCUMENT = "policy document"
SUITE = "Suite"
ADMISSION_REVIEW = "AdmissionReview"
NOT_REVIEWED = "cannot be reviewed"
ORDER = (POLICY_DOCUMENT, SUITE, ADMISSION_REVIEW, *REASONS, NOT_REVIEWED)

_R = TypeVar("_R")


@dataclass
class Source:
    """A file to read objects from (`path`), or standard input copied to a temporary file."""

    name: str  # as locations show it
    path: str | None = None
    copy: IO[bytes] | None = None

    def open(self) -> IO[bytes]:
        if self.copy is not None:  # a file object of its own (closing it leaves the copy open)
            handle = os.fdopen(os.dup(self.copy.fileno()), "rb")
            handle.seek(0)
            return handle
        assert self.path is not None
        return open(self.path, "rb")

    def size(self) -> int:
        if self.copy is not None:
            return os.fstat(self.copy.fileno()).st_size
        assert self.path is not None
        return os.stat(self.path).st_size


@dataclass
class Found:
    """What the first pass found: policy documents (templates, constraints, ExpansionTemplates) and the
    Namespaces among the objects (by name; a later one replaces an earlier one, as before)."""

    documents: list[Document] = field(default_factory=list)
    namespaces: dict[str, JsonObject] = field(default_factory=dict)


class Sink(Protocol[_R]):
    """What a tool does with each object: evaluate it (the result must not hold the object unless it
    is printed), then record the result once the object is known to stand (see documents.stream's
    tentative items)."""

    def evaluate(self, obj: Streamed) -> _R: ...

    def record(self, result: _R) -> None: ...


class Inputs(Generic[_R]):
    def __init__(self, tool: str, verb: str) -> None:
        """`tool`: the sub-command (error lines start `celkeeper <tool>: `); `verb`: what is done to
        an object, in the summary ("audited", "reviewed")."""
        self.tool = tool
        self.verb = verb
        self.read = 0
        self.done = 0
        self.not_done: Counter[str] = Counter()
        self.errors = 0
        self._said: set[str] = set()
        self._copies: list[IO[bytes]] = []

    # -- reporting -------------------------------------------------------------------------------------
    def error(self, problem: CelkeeperError | str) -> None:
        """A problem, printed (once) on stderr and counted."""
        text = str(problem)
        if text in self._said:
            return
        self._said.add(text)
        self.errors += 1
        print(f"celkeeper {self.tool}: {text}", file=sys.stderr)

    def note(self, text: str) -> None:
        print(f"celkeeper {self.tool}: note: {text}", file=sys.stderr)

    def not_evaluated(self, reason: str, problem: CelkeeperError | str | None = None) -> None:
        """An object read but not evaluated, and why (an error when `problem` is given)."""
        self.read += 1
        self.not_done[reason] += 1
        if problem is not None:
            self.error(problem)

    def summary(self) -> str:
        """`celkeeper <tool>: summary: R objects read, A <verb>, N not <verb> (reason: n, ...), E errors`."""
        reasons = ", ".join(
            f"{reason}: {self.not_done[reason]}"
            for reason in (*ORDER, *sorted(set(self.not_done) - set(ORDER)))
            if self.not_done[reason]
        )
        missed = sum(self.not_done.values())
        return (
            f"celkeeper {self.tool}: summary: {self.read} objects read, {self.done} {self.verb}, "
            f"{missed} not {self.verb}{f' ({reasons})' if reasons else ''}, {self.errors} errors"
        )

    # -- sources ---------------------------------------------------------------------------------------
    def sources(self, paths: Iterable[str]) -> list[Source]:
        """The files under `paths` (folders walked, recursively), `-` standard input. A folder that
        cannot be listed is an error; a path that does not exist raises PathError."""
        problems: list[str] = []
        found: list[Source] = []
        for path in files.expand(paths, errors=problems):
            if path == files.STDIN:
                found.append(Source("<stdin>", copy=self._stdin()))
            else:
                found.append(Source(path, path=path))
        for problem in problems:
            self.error(problem)
        return found

    def _stdin(self) -> IO[bytes]:
        copy = tempfile.TemporaryFile(prefix="celkeeper-stdin-")  # noqa: SIM115 - closed by close()
        self._copies.append(copy)
        binary = getattr(sys.stdin, "buffer", None)
        if binary is not None:
            shutil.copyfileobj(binary, copy, 1024 * 1024)
        else:  # a text stream put in its place (tests)
            while text := sys.stdin.read(1024 * 1024):
                copy.write(text.encode())
        copy.flush()
        return copy

    def close(self) -> None:
        for copy in self._copies:
            copy.close()
        self._copies = []

    def _open(self, source: Source) -> IO[bytes] | None:
        try:
            return source.open()
        except OSError as err:
            self.error(DocumentError(f"cannot read: {err.strerror or err}", Location(file=source.name)))
            return None

    # -- the first pass: policies and Namespaces ------------------------------------------------------
    def policies(
        self,
        sources: Iterable[Source],
        *,
        policies: Callable[[Source], bool],
        namespaces: Callable[[Source], bool],
        is_policy: Callable[[Document], bool],
        report: Callable[[Source], bool],
    ) -> Found:
        """The policy documents of the sources for which `policies(source)`, and the Namespaces of
        those for which `namespaces(source)`. A source for which `report(source)` (read in this pass
        only) has its problems reported here and every file of it is read; the others (read again
        for their objects, which reports their problems) are skipped when they cannot hold either."""
        found = Found()
        for source in sources:
            want_policies, want_namespaces = policies(source), namespaces(source)
            if not (want_policies or want_namespaces):
                continue
            names = (POLICY_NAMES + EXPANSION_NAMES if want_policies else ()) + (
                NAMESPACE_NAMES if want_namespaces else ()
            )
            reporting = report(source)
            if not reporting and not self._may_hold(source, names):
                continue
            self._find(
                source,
                found,
                want_policies=want_policies,
                want_namespaces=want_namespaces,
                is_policy=is_policy,
                reporting=reporting,
            )
        return found

    def _may_hold(self, source: Source, names: tuple[bytes, ...]) -> bool:
        handle = self._open(source)
        if handle is None:
            return False  # reported; not read again
        wanted = names + DISGUISES
        overlap = max(len(n) for n in wanted) - 1
        tail = b""
        with handle:
            while True:
                chunk = handle.read(1024 * 1024)
                if not chunk:
                    return False
                window = tail + chunk
                if any(n in window for n in wanted):
                    return True
                tail = window[-overlap:]

    def _find(
        self,
        source: Source,
        found: Found,
        *,
        want_policies: bool,
        want_namespaces: bool,
        is_policy: Callable[[Document], bool],
        reporting: bool,
    ) -> None:
        handle = self._open(source)
        if handle is None:
            return
        located: dict[int, Document] | None = None
        pending: list[tuple[str, Document | JsonObject]] = []  # tentative items, until Settled
        with handle:
            for piece in read_objects(handle, source.name):
                if isinstance(piece, Streamed):
                    document = _document(piece)
                    if want_policies and is_policy(document):
                        if piece.item is None:
                            if located is None:
                                located = self._located(source)
                            document = located.get(piece.document, document)
                        entry: tuple[str, Document | JsonObject] = ("policy", document)
                    elif want_namespaces and _is_namespace(piece.data):
                        entry = ("namespace", piece.data)
                    else:
                        continue
                    if piece.tentative:
                        pending.append(entry)
                    else:
                        _keep(found, entry)
                elif isinstance(piece, Settled):
                    if piece.is_list:
                        for entry in pending:
                            _keep(found, entry)
                    pending = []
                elif reporting:
                    self.error(piece.error if isinstance(piece, Unread) else piece)

    def _located(self, source: Source) -> dict[int, Document]:
        """The documents of a small file read by the policy reader (fields located), by index."""
        try:
            if source.size() > POLICY_FILE_BYTES:
                return {}
            handle = source.open()
            with handle:
                text = handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return {}
        return {d.index: d for d in parse_documents(text, source.name).documents}

    # -- the objects -----------------------------------------------------------------------------------
    def objects(self, sources: Iterable[Source]) -> Iterator[Streamed | Settled | Unread | DocumentError]:
        """Every object of the sources, one at a time (documents.stream's pieces)."""
        for source in sources:
            handle = self._open(source)
            if handle is None:
                continue
            with handle:
                yield from read_objects(handle, source.name)

    def consume(self, pieces: Iterable[Streamed | Settled | Unread | DocumentError], sink: Sink[_R]) -> None:
        """Evaluate each object as it is read; record it (count it) once it stands."""
        pending: list[_R] = []
        for piece in pieces:
            if isinstance(piece, Streamed):
                result = sink.evaluate(piece)
                if piece.tentative:
                    pending.append(result)
                else:
                    sink.record(result)
            elif isinstance(piece, Settled):
                if piece.is_list:
                    for result in pending:
                        sink.record(result)
                elif piece.failed:  # the document's error follows
                    self.read += len(pending)
                    self.not_done[UNFINISHED] += len(pending)
                pending = []
            elif isinstance(piece, Unread):
                self.not_evaluated(piece.reason, piece.error)
            else:
                self.error(piece)

    def stream_data(self, sources: Iterable[Source]) -> Iterator[JsonObject]:
        """Every object of the sources, for a store of synced data: what errors there are, the second
        pass reports. Items of a document that turns out not to be a List are among them (a document
        holding objects in `items` before a kind that is not a List's is not what anyone writes)."""
        for piece in self.objects(sources):
            if isinstance(piece, Streamed):
                yield piece.data


def _keep(found: Found, entry: tuple[str, Document | JsonObject]) -> None:
    what, value = entry
    if what == "policy":
        assert isinstance(value, Document)
        found.documents.append(value)
    else:
        assert isinstance(value, dict)
        found.namespaces[str(value["metadata"]["name"])] = value


def _document(piece: Streamed) -> Document:
    """A streamed object as a Document located at its start (its fields are not located)."""
    return Document(
        file=piece.file,
        index=piece.document,
        data=piece.data,
        spans={"": Span(line=piece.line, column=piece.column, end_line=piece.line)},
    )


def document_of(piece: Streamed) -> Document:
    return _document(piece)


def _is_namespace(obj: JsonObject) -> bool:
    meta = obj.get("metadata")
    return (
        obj.get("apiVersion") == "v1"
        and obj.get("kind") == "Namespace"
        and isinstance(meta, dict)
        and isinstance(meta.get("name"), str)
        and bool(meta["name"])
    )


def located(err: CelkeeperError, piece: Streamed) -> CelkeeperError:
    """An error about a streamed object, located at the object (what the error does not say itself)."""
    return err.at(
        file=piece.file, document=piece.document, path=piece.path, line=piece.line, column=piece.column
    )


__all__ = [
    "ADMISSION_REVIEW",
    "NOT_AN_OBJECT",
    "NOT_REVIEWED",
    "POLICY_DOCUMENT",
    "SUITE",
    "Found",
    "Inputs",
    "Sink",
    "Source",
    "document_of",
    "located",
]
