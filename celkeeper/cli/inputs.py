"""The objects `audit` and `test` read: every input accounted for, objects streamed one at a time.

    inputs = Inputs(tool="audit", verb="audited")
    sources = inputs.sources(paths)               # folders walked, stdin copied to a temporary file
    documents = inputs.policies(sources, ...)     # first: the policy documents among them
    inputs.consume(sources, sink)                 # then each object, evaluated as it is read
    print(inputs.summary(), file=sys.stderr)

Objects are read by documents.stream (one object in memory at a time, a List's items one by one), in a
reader process of their own beside the evaluation when there are many (cli.reader); policy documents by
the policy reader (every field located) when their file is small enough for it.

Policies must be known before any object is evaluated, and they may be among the objects (`test -f
DIR`, `audit -f DIR`): a first pass finds them. A file that cannot hold one is not parsed then: a
template, a constraint or an ExpansionTemplate names its kind or API group in its text
(`ConstraintTemplate`, `constraints.gatekeeper.sh`, ...), unless the text spells it with escapes (`\\u`,
`\\x`, `\\U`, a line continued by `\\`) or is not UTF-8 (UTF-16 has zero bytes): a file whose bytes hold
none of the names and none of those is skipped. Files read only for policies (`audit --policy-dir`
beside `--objects`) are all read.

Namespaces are taken as the objects are read: each object is evaluated with the Namespaces read before
it, and its result recorded at the end, once it is known that its Namespace did not come later or
change (the last of a name wins); the objects of a namespace whose Namespace did are read and evaluated
again, alone. Standard input is copied to a temporary file as it is read (memory does not grow with it;
disk does), so that it can be read more than once.

Everything is counted: objects read, evaluated ("audited", "reviewed"), not evaluated (with the
reason), and errors (each printed once, located). `summary()` is the line the tools end with:

    celkeeper audit: summary: 20000 objects read, 19998 audited, 2 not audited (AdmissionReview: 2), 0 errors
"""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
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

#: bytes of objects from which they are read by a process of their own (cli.reader), beside the evaluation:
#: below, starting it costs more than it saves
PARALLEL_BYTES = 4 * 1024 * 1024

#: names a policy document has in its text (its kind or API group)
POLICY_NAMES = (
    b"ConstraintTemplate",
    b"constraints.gatekeeper.sh",
    b"constraints.celkeeper.io",
    b"ExpansionTemplate",
    b"expansion.gatekeeper.sh",
    b"mutations.gatekeeper.sh",
    # Kubernetes' admission policies and bindings, and the CRDs of their kinds (cli.admissionpolicies)
    b"AdmissionPolicy",
    b"CustomResourceDefinition",
)
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
        self.problems: list[str] = []  # every error, as printed (for outputs that list them)
        self._copies: list[IO[bytes]] = []
        #: the Namespaces among the objects, by name, as far as they are read (the last of a name wins)
        self.namespaces: dict[str, JsonObject] = {}

    # -- reporting -------------------------------------------------------------------------------------
    def error(self, problem: CelkeeperError | str) -> None:
        """A problem, printed (once) on stderr and counted."""
        text = str(problem)
        if text in self._said:
            return
        self._said.add(text)
        self.problems.append(text)
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
        import tempfile  # (~3 ms of import, with random) only for a run that reads stdin

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

    # -- the first pass: policies -----------------------------------------------------------------------
    def policies(
        self,
        sources: Iterable[Source],
        *,
        is_policy: Callable[[Document], bool],
        report: Callable[[Source], bool],
    ) -> list[Document]:
        """The policy documents of the sources. A source for which `report(source)` (read in this pass
        only) has its problems reported here and is read whole; the others (read again for their
        objects, which reports their problems) are parsed only when they can hold a policy document."""
        found: list[Document] = []
        for source in sources:
            reporting = report(source)
            if not reporting and not self._may_hold(source, POLICY_NAMES):
                continue
            found.extend(self._find(source, is_policy, reporting))
        return found

    def holding(self, sources: Iterable[Source], names: tuple[bytes, ...]) -> list[Source]:
        """The sources whose text may hold one of `names` (a kind: an object of it names it in its text,
        unless spelled with escapes or in another encoding, DISGUISES, which are kept too), for a pass
        that looks for objects of those kinds only. A source that cannot be read is reported and left out
        (the objects' pass tries it again: said once)."""
        return [source for source in sources if self._may_hold(source, names)]

    def _may_hold(self, source: Source, names: tuple[bytes, ...]) -> bool:
        handle = self._open(source)
        if handle is None:
            return False  # reported (the objects pass tries again: said once)
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

    def _find(self, source: Source, is_policy: Callable[[Document], bool], reporting: bool) -> list[Document]:
        located: dict[int, Document] | None = None
        if not reporting and not self._may_hold(source, (b"List",)):
            located = self._located(source)
            if located is not None and not any(_holds_items(d) for d in located.values()):
                # a small file without Lists: the policy reader's documents are its policies (its
                # problems are reported by the objects' pass, which reads it again)
                return [d for d in located.values() if is_policy(d)]
        # a file that may hold a List (its kind names one) is streamed: the policy reader reads it only
        # for a policy document that is not a List's item (kubectl's `get -o json` of policies is one List)
        handle = self._open(source)
        if handle is None:
            return []
        found: list[Document] = []
        pending: list[Document] = []  # tentative items, until Settled
        with handle:
            for piece in read_objects(handle, source.name):
                if isinstance(piece, Streamed):
                    document = _document(piece)
                    if not is_policy(document):
                        continue
                    if piece.item is None:
                        if located is None:
                            located = self._located(source) or {}
                        document = located.get(piece.document, document)
                    (pending if piece.tentative else found).append(document)
                elif isinstance(piece, Settled):
                    if piece.is_list:
                        found.extend(pending)
                    pending = []
                elif reporting:
                    self.error(piece.error if isinstance(piece, Unread) else piece)
        return found

    def _located(self, source: Source) -> dict[int, Document] | None:
        """The documents of a small file read by the policy reader (fields located), by index; None for
        a file too large for it, or one it cannot read."""
        try:
            if source.size() > POLICY_FILE_BYTES:
                return None
            handle = source.open()
            with handle:
                text = handle.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        return {d.index: d for d in parse_documents(text, source.name).documents}

    # -- the objects -----------------------------------------------------------------------------------
    def objects(self, sources: Iterable[Source]) -> Iterator[Streamed | Settled | Unread | DocumentError]:
        """Every object of the sources, one at a time (documents.stream's pieces): read by a process of
        its own (cli.reader) when there is much to read and a second core to read it on."""
        sources = list(sources)
        if _read_beside(sources):
            from celkeeper.cli.reader import read_in_child

            yield from read_in_child([(s.name, s.path, s.copy.fileno() if s.copy else None) for s in sources])
            return
        for source in sources:
            handle = self._open(source)
            if handle is None:
                continue
            with handle:
                yield from read_objects(handle, source.name)

    def consume(self, sources: list[Source], sink: Sink[_R]) -> None:
        """Evaluate each object of the sources as it is read, with the Namespaces read before it
        (`namespaces`: a Namespace is known from where it is read on, the last of a name wins), and
        record the results (count them) once the run is over: those of objects whose Namespace came
        after them, or changed, are dropped and these objects read and evaluated again, alone, with
        the Namespaces as they ended up (Namespaces before the objects in them, as `kubectl get
        namespaces,pods` prints them, cost nothing more)."""
        held: dict[tuple[str, int], tuple[JsonObject | None, list[_R]]] = {}
        self._evaluate(self.objects(sources), sink, held, only=None)
        stale = {key for (key, _), (seen, _) in held.items() if self.namespaces.get(key) is not seen}
        again: dict[tuple[str, int], tuple[JsonObject | None, list[_R]]] = {}
        if stale:
            self._evaluate(self.objects(sources), sink, again, only=stale)
        for (key, _), (_, results) in held.items():
            if key not in stale:  # else every object in that namespace was evaluated again
                for result in results:
                    sink.record(result)
        for _, results in again.values():
            for result in results:
                sink.record(result)

    def _evaluate(
        self,
        pieces: Iterable[Streamed | Settled | Unread | DocumentError],
        sink: Sink[_R],
        held: dict[tuple[str, int], tuple[JsonObject | None, list[_R]]],
        only: set[str] | None,
    ) -> None:
        """Evaluate the objects into `held` (by the namespace each saw); `only`: the namespaces whose
        objects are evaluated again (everything else was counted the first time)."""
        pending: list[tuple[str, JsonObject | None, _R]] = []  # tentative items, until Settled
        for piece in pieces:
            if isinstance(piece, Streamed):
                key = _namespace_key(piece.data)
                if only is not None and key not in only:
                    continue
                if only is None and key and _is_namespace(piece.data):
                    self.namespaces[key] = piece.data
                seen = self.namespaces.get(key) if key else None
                result = sink.evaluate(piece)
                if piece.tentative:
                    pending.append((key, seen, result))
                else:
                    _hold(held, key, seen, result)
            elif isinstance(piece, Settled):
                if piece.is_list:
                    for key, seen, result in pending:
                        _hold(held, key, seen, result)
                elif piece.failed and only is None:  # the document's error follows
                    self.read += len(pending)
                    self.not_done[UNFINISHED] += len(pending)
                pending = []
            elif only is not None:
                continue  # counted the first time
            elif isinstance(piece, Unread):
                self.not_evaluated(piece.reason, piece.error)
            else:
                self.error(piece)

    def documents(self, sources: Iterable[Source]) -> list[Document]:
        """Every object of the sources as a Document, held (for tools that need them all: explain's
        Namespaces and synced data), its problems reported."""
        errors: list[CelkeeperError] = []
        found = list(standing(self.objects(sources), errors))
        for error in errors:
            self.error(error)
        return found

    def stream_data(self, sources: Iterable[Source]) -> Iterator[JsonObject]:
        """Every object of the sources, for a store of synced data: what errors there are, the second
        pass reports. Items of a document that turns out not to be a List are among them (a document
        holding objects in `items` before a kind that is not a List's is not what anyone writes)."""
        for piece in self.objects(sources):
            if isinstance(piece, Streamed):
                yield piece.data


def standing(
    pieces: Iterable[Streamed | Settled | Unread | DocumentError], errors: list[CelkeeperError]
) -> Iterator[Document]:
    """The objects of documents.stream's pieces that stand (a List's tentative items once it is one), as
    Documents located at their start; what is not read goes to `errors`."""
    pending: list[Document] = []
    for piece in pieces:
        if isinstance(piece, Streamed):
            if piece.tentative:
                pending.append(_document(piece))
            else:
                yield _document(piece)
        elif isinstance(piece, Settled):
            if piece.is_list:
                yield from pending
            pending = []
        elif isinstance(piece, Unread):
            errors.append(piece.error)
        else:
            errors.append(piece)


def object_documents(paths: Iterable[str]) -> tuple[list[Document], list[CelkeeperError]]:
    """Every object of the files under `paths` (folders walked; `-` standard input), read as every object
    input is (documents.stream: as kubectl reads it; a List item by item), and every problem: for the
    inputs a tool holds whole (test --cluster's manifests, explain's object, vap's webhook
    configuration). Raises PathError for a path that does not exist."""
    problems: list[str] = []
    found = files.expand(paths, errors=problems)
    errors: list[CelkeeperError] = [DocumentError(p) for p in problems]
    documents: list[Document] = []
    for path in found:
        if path == files.STDIN:
            binary = getattr(sys.stdin, "buffer", None)
            stdin = binary if binary is not None else io.BytesIO(sys.stdin.read().encode())
            documents.extend(standing(read_objects(stdin, "<stdin>"), errors))
            continue
        try:
            with open(path, "rb") as handle:
                documents.extend(standing(read_objects(handle, path), errors))
        except OSError as err:
            errors.append(DocumentError(f"cannot read: {err.strerror or err}", Location(file=path)))
    return documents, errors


def _holds_items(document: Document) -> bool:
    """A List (its items are objects: the object reader hands them out one by one)."""
    return document.kind.endswith("List") and isinstance(document.data.get("items"), list)


def _read_beside(sources: list[Source]) -> bool:
    """Whether the objects are worth a reader process: PARALLEL_BYTES or more, and two cores or more."""
    if len(os.sched_getaffinity(0)) < 2:
        return False
    total = 0
    for source in sources:
        try:
            total += source.size()
        except OSError:  # reported when it is read
            continue
    return total >= PARALLEL_BYTES


def _hold(
    held: dict[tuple[str, int], tuple[JsonObject | None, list[_R]]],
    key: str,
    seen: JsonObject | None,
    result: _R,
) -> None:
    group = held.get((key, id(seen)))
    if group is None:
        group = held[(key, id(seen))] = (seen, [])
    group[1].append(result)


def _namespace_key(obj: JsonObject) -> str:
    """The namespace whose Namespace an object's evaluation reads: its own, or a Namespace's name."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ""
    if _is_namespace(obj):
        return str(meta["name"])
    namespace = meta.get("namespace")
    return namespace if isinstance(namespace, str) else ""


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
    "Inputs",
    "Sink",
    "Source",
    "document_of",
    "located",
    "object_documents",
    "standing",
]
