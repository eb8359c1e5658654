"""Kubernetes objects read one at a time from a stream of YAML 1.2 / JSON documents.

    for piece in read_objects(stream, "pods.yaml"):    # stream: a binary file, read as it goes
        Streamed        an object: a document, or one item of a List (`kind: List`, `<Kind>List`)
        Settled         whether the tentative items before it stand (see below)
        Unread          an object that is not read (located), and the reason (one of REASONS)
        DocumentError   a problem that ends the stream (syntax, encoding): nothing after it is read

Memory holds one object at a time whatever the size of the stream: a List's items are read and handed
out one by one, never the List whole. This is the reader of the objects the offline tools audit and
review; policy files keep parse.py's reader (YAML 1.2, every field located, limits meant for the
webhook's policy sources). The values are those kubectl reads (kubeyaml: go-yaml v2's YAML 1.1-like
scalars, `yes`/`on` booleans, `0777` octal; keys made strings; merge keys as go-yaml v2 merges them;
numbers as JSON carries them); duplicate keys are refused (kubectl keeps the last). Documents kubectl
does not read (a `%YAML` or `%TAG` directive, content on the `---` line, a document after `...` without
`---`) are not read. No field positions: an object is located by its file, document, item (`items[3]`)
and line:col.

YAML is read from libyaml's events (PyYAML's C parser) by an iterative builder: no recursion, and a
stream is never composed whole. A stream that starts with `{` is read as JSON first (json's C decoder,
several times faster): one document or a stream of them (`{...}{...}`, one per line), a List's items
decoded one at a time, numbers as kubectl holds them (an int64, else a float64: `1.0` is 1); a document
JSON does not read (YAML's flow style, NaN, a duplicate key) goes, with the rest of the stream, to the
YAML reader, as long as nothing of it was handed out (its items are handed out as they come: after the
first, a JSON error is an error).

A List is recognised by its `kind` (ending in `List`) and its `items`. kubectl writes `items` before
`kind`: until the kind is known, the items that carry their own kind are handed out as they come,
marked `tentative`, and a `Settled` piece says afterwards whether they stand (the document is a List)
or are withdrawn (it is not: the document follows as one object; or it could not be read to its end).
Items without a kind (a PodList as the API returns it) take the List's: until its kind and apiVersion
are known they are held (in memory, then in a temporary file).

Limits (objects): an object has at most MAX_OBJECT_VALUES values (maps, lists, scalars; an alias
counts what it repeats), so that aliases of aliases cannot expand without bound; an object nested
deeper than libyaml's 1,000 levels is not read (libyaml refuses it; so does JSON's decoder). A List
is not limited, only each item. A document whose items came before a kind that is not a List's can
be rebuilt only up to REBUILD_VALUES values (beyond, it is reported as not read).
"""

from __future__ import annotations

import codecs
import json
import marshal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

import yaml.reader
from yaml import YAMLError
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from celkeeper.documents import kubeyaml
from celkeeper.documents.document import index_path
from celkeeper.errors import DocumentError, Location
from celkeeper.model import JsonObject

try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML's wheels carry libyaml: else its pure-Python parser
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class CParser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: Any) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)

        def dispose(self) -> None:
            pass


#: values (maps, lists, scalars) one object may have, an alias counting what it repeats. The API server
#: stores objects of at most ~1.5 MiB (~750,000 values at the very most); an object is held whole to be
#: evaluated (~100 bytes per value), so this bounds one object to ~100 MB.
MAX_OBJECT_VALUES = 1_000_000
#: values of the items kept, while a document's kind is not known, to rebuild it should it not be a List
REBUILD_VALUES = 100_000
#: values of items without a kind held in memory until their List's kind is known; beyond, in a file
HELD_IN_MEMORY = 200_000
#: characters of JSON one value may take before the JSON reader gives up (a List's item: the stream
#: ends there with an error; a document's value: the YAML reader reads it)
MAX_JSON_CHARS = 64 * 1024 * 1024
CHUNK = 1024 * 1024

# why an object is not read (Unread.reason), as summaries count them
NOT_AN_OBJECT = "not an object"
TOO_LARGE = "too large"
INVALID = "invalid"
UNFINISHED = "in a document not read to its end"
REASONS = (NOT_AN_OBJECT, TOO_LARGE, INVALID, UNFINISHED)


@dataclass(frozen=True, slots=True)
class Streamed:
    """One object: a document, or an item of a List document (`item`: its index in `items`)."""

    data: JsonObject
    file: str
    document: int
    item: int | None
    line: int
    column: int
    tentative: bool = False  # an item of a document whose kind is not known yet: see Settled

    @property
    def path(self) -> str | None:
        return index_path("items", self.item) if self.item is not None else None

    def location(self) -> Location:
        return Location(
            file=self.file, document=self.document, path=self.path, line=self.line, column=self.column
        )


@dataclass(frozen=True, slots=True)
class Settled:
    """Whether the `tentative` items handed out before it (all of one document) stand: `is_list`
    (the document is a List); else they are withdrawn: the document is not a List (it follows, as one
    object) or could not be read to its end (`failed`: its error follows)."""

    file: str
    document: int
    is_list: bool
    tentative: int
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Unread:
    """An object that is not read: why (`error`, located), and the reason summaries count."""

    error: DocumentError
    reason: str


Piece = Streamed | Settled | Unread | DocumentError


def read_objects(stream: IO[bytes], name: str) -> Iterator[Piece]:
    """The objects of a binary stream named `name` (shown in locations), one at a time."""
    head = stream.read(CHUNK)
    text = head[len(codecs.BOM_UTF8) :] if head.startswith(codecs.BOM_UTF8) else head
    if text.lstrip(b" \t\r\n")[:1] == b"{":
        yield from _JsonReader(stream, name, head).pieces()
    else:
        yield from _YamlReader(_Chained(head, stream, 0), name, stream).pieces()


class _Mark(NamedTuple):
    """A position (0-based), as libyaml's marks give one."""

    line: int
    column: int


class _Invalid(Exception):
    """A value the document cannot have (a duplicate key, an undefined alias, a bad merge)."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


class _TooLarge(Exception):
    """An object over MAX_OBJECT_VALUES values."""


# -- YAML -------------------------------------------------------------------------------------------------

_MERGE = object()  # the merge key `<<` (kubeyaml.is_merge)
_KEY_ANCHOR = object()  # an anchor on a key: its value is read when an alias of it is a value
_plain = kubeyaml.plain
_plain_key = kubeyaml.plain_key
_plain_number = kubeyaml.plain_number
_PLAIN_WORDS = kubeyaml.PLAIN_WORDS
_NUMBER_FIRST = kubeyaml.NUMBER_FIRST
_KEY_WORDS = kubeyaml.KEY_WORDS


class _Builder:
    """Builds values from libyaml's events, iteratively (any depth), counting values against `limit`;
    scalars and keys as kubectl reads them (kubeyaml)."""

    __slots__ = ("aliased", "anchors", "base", "count", "extra", "get", "limit")

    def __init__(self, get: Callable[[], Any]) -> None:
        self.get = get
        # anchor -> (value, its values, its event (a scalar's), the aliases read inside it)
        self.anchors: dict[str, tuple[Any, int, Any, int]] = {}
        self.count = 0
        self.limit = MAX_OBJECT_VALUES
        self.document()

    def document(self) -> None:
        """A new document: no anchors; go-yaml v2's counts of its nodes decoded (`base` + `count` +
        `extra` + 1: values before the current object, its values, the aliases read and the document)
        and of those decoded through an alias (`aliased`), whose share kubectl bounds (decode.go:
        "excessive aliasing")."""
        self.anchors = {}
        self.base = 0
        self.extra = 0
        self.aliased = 0

    def _alias(self, ev: Any) -> tuple[Any, int, Any, int]:
        """What an alias refers to, its values counted (raises _Invalid)."""
        found = self.anchors.get(ev.anchor)
        if found is None:
            raise _Invalid(f"found undefined alias {ev.anchor!r}", ev.start_mark)
        self.count += found[1]
        self.extra += 1 + found[3]
        self.aliased += found[1] + found[3]
        if self.aliased > 100:
            decoded = self.base + self.count + self.extra + 1
            if kubeyaml.excessive_aliasing(self.aliased, decoded):
                raise _Invalid("document contains excessive aliasing", ev.start_mark)
        return found

    def scalar(self, ev: Any) -> Any:
        """A scalar's value (raises _Invalid)."""
        try:
            if ev.tag is None:
                return ev.value if ev.style else _plain(ev.value)
            return kubeyaml.tagged(ev.tag, ev.value)
        except kubeyaml.ScalarError as err:
            raise _Invalid(err.message, ev.start_mark) from None

    def _key_text(self, ev: Any) -> Any:
        """A scalar key's text, or _MERGE (raises _Invalid)."""
        tag, text = ev.tag, ev.value
        if kubeyaml.is_merge(tag, ev.style, text):
            return _MERGE
        try:
            if tag is None:
                return text if ev.style else _plain_key(text)
            return kubeyaml.tagged_key(tag, text)
        except kubeyaml.ScalarError as err:
            raise _Invalid(err.message, ev.start_mark) from None

    def key(self, ev: Any) -> Any:
        """A map key's text (the merge key `<<` as _MERGE); a key that is a list or map is consumed
        before _Invalid is raised."""
        t = type(ev)
        if t is ScalarEvent:
            self.count += 1
            key = self._key_text(ev)
            if ev.anchor is not None:  # an alias of it may be a value: its value is read then
                self.anchors[ev.anchor] = (_KEY_ANCHOR, 1, ev, 0)
            return key
        if t is AliasEvent:
            found = self._alias(ev)
            if found[2] is not None:
                return self._alias_key(found[2])
        else:
            self.skip(1)
        raise _Invalid("a map key must be a string, not a list or map", ev.start_mark)

    def _alias_key(self, anchored: Any) -> Any:
        """The key an alias of a scalar gives: the scalar's (an alias is never the merge key)."""
        if kubeyaml.is_merge(anchored.tag, anchored.style, anchored.value):
            return "<<"
        return self._key_text(anchored)

    def _anchored(self, found: tuple[Any, int, Any, int]) -> Any:
        """What an alias gives as a value."""
        value = found[0]
        if value is _KEY_ANCHOR:  # an anchor set on a key, aliased as a value
            value = self.scalar(found[2])
        return value

    def value(self, ev: Any) -> Any:
        """The value of the node that starts with `ev`, its events consumed to its end (also when it
        raises _TooLarge or _Invalid)."""
        t = type(ev)
        if t is ScalarEvent:
            self.count += 1
            value = self.scalar(ev)
            if ev.anchor is not None:
                self.anchors[ev.anchor] = (value, 1, ev, 0)
            return value
        if t is AliasEvent:
            found = self._alias(ev)
            if self.count > self.limit:
                raise _TooLarge()
            return self._anchored(found)
        return self._collection(ev)

    def _collection(self, ev: Any) -> Any:
        get = self.get
        anchors = self.anchors
        limit = self.limit
        is_map = type(ev) is MappingStartEvent
        current: Any = {} if is_map else []
        key: Any = None
        key_mark: Any = None
        anchor = ev.anchor
        started = self.count
        extra_started = self.extra
        # the keys of the current map set by the map itself, once a merge key set others (go-yaml v2
        # sets a merged map's keys where the `<<` is: they replace the keys before it, the keys after it
        # replace them; a key twice in the map itself is refused)
        explicit: set[str] | None = None
        # the open collections around the current one: (container, is_map, key, key mark, anchor,
        # count and extra at its start, its explicit keys)
        stack: list[tuple[Any, bool, Any, Any, Any, int, int, Any]] = []
        closed = False  # the outermost collection has ended
        self.count += 1
        try:
            while True:
                if self.count > limit:
                    raise _TooLarge()
                ev = get()
                t = type(ev)
                if is_map and key is None:
                    if t is MappingEndEvent:
                        value = current
                    else:
                        key_mark = ev.start_mark
                        if t is ScalarEvent and ev.anchor is None and ev.tag is None:
                            self.count += 1
                            key = ev.value
                            if not ev.style and (key in _KEY_WORDS or key[:1] in _NUMBER_FIRST):
                                key = self._key_text(ev)
                        else:
                            key = self.key(ev)
                        continue
                elif t is ScalarEvent:
                    self.count += 1
                    if ev.tag is None:
                        value = text = ev.value
                        if not ev.style:  # kubeyaml.plain, inline
                            value = _PLAIN_WORDS.get(text, text)
                            if value is text and text[:1] in _NUMBER_FIRST:
                                value = _plain_number(text)
                    else:
                        value = self.scalar(ev)
                    if ev.anchor is not None:
                        anchors[ev.anchor] = (value, 1, ev, 0)
                elif t is MappingStartEvent or t is SequenceStartEvent:
                    stack.append((current, is_map, key, key_mark, anchor, started, extra_started, explicit))
                    is_map = t is MappingStartEvent
                    current = {} if is_map else []
                    key = None
                    anchor = ev.anchor
                    started = self.count
                    extra_started = self.extra
                    explicit = None
                    self.count += 1
                    continue
                elif t is AliasEvent:
                    value = self._anchored(self._alias(ev))
                else:  # the end of a sequence
                    value = current
                if value is current:  # the current collection ended: back to its parent
                    finished = current
                    if anchor is not None:
                        anchors[anchor] = (current, self.count - started, None, self.extra - extra_started)
                    if stack:
                        current, is_map, key, key_mark, anchor, started, extra_started, explicit = stack.pop()
                    else:
                        closed = True
                    if closed:
                        return finished
                    value = finished
                if is_map:
                    if key is _MERGE:
                        if explicit is None:
                            explicit = set(current)
                        _merge(current, value, key_mark, t is AliasEvent)
                    elif key in current and (explicit is None or key in explicit):
                        raise _Invalid(f"duplicate key {key!r}", key_mark)
                    else:
                        current[key] = value
                        if explicit is not None:
                            explicit.add(key)
                    key = None
                else:
                    current.append(value)
        except kubeyaml.ScalarError as err:  # a plain scalar's, read above
            self.skip(len(stack) + 1)
            raise _Invalid(err.message, ev.start_mark) from None
        except (_TooLarge, _Invalid):
            self.skip(0 if closed else len(stack) + 1)
            raise

    def skip(self, depth: int) -> None:
        """Consume the events of `depth` open collections."""
        get = self.get
        while depth:
            t = type(get())
            if t is MappingStartEvent or t is SequenceStartEvent:
                depth += 1
            elif t is MappingEndEvent or t is SequenceEndEvent:
                depth -= 1


def _merge(target: dict[str, Any], value: Any, mark: Any, aliased: bool) -> None:
    """A merge key's maps set into `target` where the `<<` is, as go-yaml v2 does (decode.go, merge):
    a map's keys replace those `target` has; of a list of maps (written there, not an alias of one),
    the first map's win."""
    sources = value if isinstance(value, list) and not aliased else [value]
    for source in sources:
        if not isinstance(source, dict):
            raise _Invalid("map merge requires map or sequence of maps as the value", mark)
    for source in reversed(sources):
        target.update(source)


class _Chained:
    """A binary stream giving `head` (bytes already read) and then the rest of `stream`; `base`: the
    file offset at which `head` starts."""

    def __init__(self, head: bytes, stream: IO[bytes], base: int) -> None:
        self.head = head
        self.stream = stream
        self.base = base

    def read(self, size: int = -1) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.stream.read(size if size > 0 else CHUNK)


class _YamlReader:
    def __init__(
        self,
        stream: _Chained,
        name: str,
        file: IO[bytes],
        *,
        document: int = 0,
        line_offset: int = 0,
        column_offset: int = 0,
    ) -> None:
        """`document`: documents before the stream; `line_offset`/`column_offset`: where it starts in
        the file (a stream the JSON reader hands over); `file`: the file, to locate a byte libyaml
        refuses."""
        self.stream = stream
        self.name = name
        self.file = file
        self.document = document
        self.line_offset = line_offset
        self.column_offset = column_offset

    def position(self, mark: Any) -> tuple[int, int]:
        column = mark.column + 1 + (self.column_offset if mark.line == 0 else 0)
        return mark.line + 1 + self.line_offset, column

    def location(self, mark: Any, path: str | None = None) -> Location:
        line, column = self.position(mark) if mark is not None else (None, None)
        return Location(file=self.name, document=self.document, path=path, line=line, column=column)

    def pieces(self) -> Iterator[Piece]:
        parser = CParser(self.stream)
        get: Callable[[], Any] = parser.get_event
        builder = _Builder(get)
        document: _Document | None = None
        between = True  # an error here is in the next document
        first = self.document + 1
        try:
            get()  # the stream's start
            while True:
                between = True
                ev = get()
                if type(ev) is StreamEndEvent:
                    return
                assert type(ev) is DocumentStartEvent
                self.document += 1
                between = False
                builder.document()
                root = get()
                line, column = self.position(root.start_mark)
                refused = _not_kubectls(ev, root, self.document > first)
                if refused:
                    if type(root) is MappingStartEvent or type(root) is SequenceStartEvent:
                        builder.skip(1)
                    where = Location(file=self.name, document=self.document, line=line, column=column)
                    yield Unread(DocumentError(refused, where), INVALID)
                elif type(root) is MappingStartEvent:
                    document = _Document(self.name, self.document, line, column)
                    yield from self._mapping(document, builder, parser)
                    document = None
                else:
                    yield from self._other(builder, root, line, column)
                get()  # the document's end
        except YAMLError as err:
            if document is not None:
                yield from document.failed()
            if between:
                self.document += 1
            yield self._yaml_error(err)
        finally:
            parser.dispose()

    def _other(self, builder: _Builder, root: Any, line: int, column: int) -> Iterator[Piece]:
        """A document that is not a map: empty (null: skipped, as parse.py skips it), or not an object."""
        where = Location(file=self.name, document=self.document, line=line, column=column)
        builder.count = 0
        try:
            value = builder.value(root)
        except _TooLarge:
            value = []
        except _Invalid as err:
            yield Unread(DocumentError(err.message, self.location(err.mark)), INVALID)
            return
        if value is None and type(root) is not AliasEvent:
            return
        yield Unread(
            DocumentError(
                f"a document must be a mapping (an object with apiVersion and kind), not {_type_name(value)}",
                where,
            ),
            NOT_AN_OBJECT,
        )

    def _mapping(self, document: _Document, builder: _Builder, parser: Any) -> Iterator[Piece]:
        get = parser.get_event
        builder.count = 1
        try:
            while True:
                ev = get()
                if type(ev) is MappingEndEvent:
                    break
                key = builder.key(ev)
                key_mark = ev.start_mark
                document.at(key)
                if key == "items" and document.streams_items():
                    start = parser.peek_event()
                    if type(start) is SequenceStartEvent and start.anchor is None:
                        get()
                        yield from self._items(document, builder, get)
                        continue
                start = get()
                value = builder.value(start)
                if key is _MERGE:
                    document.merge(value, key_mark, type(start) is AliasEvent)
                else:
                    document.key(key, value, key_mark)
        except _Invalid as err:
            builder.skip(1)  # the rest of the document
            yield from document.failed()
            yield Unread(DocumentError(err.message, self.location(err.mark, document.path)), INVALID)
            return
        except _TooLarge:
            builder.skip(1)
            yield from document.failed()
            yield _too_large(document.where())
            return
        yield from document.end(builder.count)

    def _items(self, document: _Document, builder: _Builder, get: Callable[[], Any]) -> Iterator[Piece]:
        saved = builder.count
        builder.base += 1  # the list
        index = 0
        while True:
            ev = get()
            if type(ev) is SequenceEndEvent:
                break
            line, column = self.position(ev.start_mark)
            builder.count = 0
            try:
                value = builder.value(ev)
            except _TooLarge:
                yield from document.too_large(index, line, column)
            except _Invalid as err:
                yield from document.invalid(
                    index, DocumentError(err.message, self.location(err.mark, index_path("items", index)))
                )
            else:
                yield from document.item(value, index, line, column, builder.count)
            builder.base += builder.count
            index += 1
        builder.count = saved
        document.items_end()

    def _yaml_error(self, err: YAMLError) -> DocumentError:
        if isinstance(err, yaml.reader.ReaderError):  # a byte libyaml does not accept
            character = err.character
            what = f"#x{character:04x}" if isinstance(character, int) else repr(character)
            line, column = _byte_position(self.file, self.stream.base + err.position)
            return DocumentError(
                f"cannot read: unacceptable character {what}: {err.reason}",
                Location(file=self.name, line=line, column=column),
            )
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        problem = getattr(err, "problem", None)
        context = getattr(err, "context", None)
        text = f"{problem} ({context})" if problem and context else (problem or context or "invalid YAML")
        return DocumentError(f"YAML/JSON syntax error: {text}", self.location(mark))


def _not_kubectls(start: Any, root: Any, later: bool) -> str | None:
    """Why kubectl does not read a document libyaml reads, if it does not: kubectl cuts a stream into
    documents at each line that starts with `---` (k8s.io/apimachinery's YAMLReader) and decodes each
    piece alone (go-yaml v2 reads a piece's first document only)."""
    if start.version is not None or start.tags:
        return (
            "a %YAML or %TAG directive: kubectl does not read this document (its `---` is cut off: "
            "did not find expected <document start>)"
        )
    if start.explicit and root.start_mark.line == start.start_mark.line:
        empty = type(root) is ScalarEvent and not root.value and not root.style and root.tag is None
        if not empty:
            return "content on the `---` line: kubectl refuses it (invalid Yaml document separator)"
    if later and not start.explicit:
        return "a document after `...` without `---`: kubectl does not read it (only the first of a piece)"
    return None


def _byte_position(file: IO[bytes], offset: int) -> tuple[int | None, int | None]:
    """The line:col of a byte of a file (None, None when the file cannot be read again)."""
    try:
        if not file.seekable():
            return None, None
        file.seek(0)
        data = file.read(offset)
    except (OSError, ValueError):
        return None, None
    line_start = data.rfind(b"\n") + 1
    return data.count(b"\n") + 1, len(data[line_start:].decode("utf-8", errors="replace")) + 1


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null" if value is None else type(value).__name__


# -- documents and Lists (both readers) -------------------------------------------------------------------

_OK, _TOO_LARGE, _INVALID = 0, 1, 2  # what a held item is


class _Held:
    """Items held until their List's kind is known: in memory up to HELD_IN_MEMORY values, then in a
    temporary file (marshal: every value JSON or YAML gives)."""

    def __init__(self) -> None:
        self.memory: list[tuple[int, Any, int, int, int]] = []
        self.values = 0
        self.file: IO[bytes] | None = None
        self.spilled = 0

    def add(self, entry: tuple[int, Any, int, int, int], values: int) -> None:
        """An item (what it is, its value, index, line and column) of `values` values."""
        if self.file is None and self.values + values <= HELD_IN_MEMORY:
            self.memory.append(entry)
            self.values += values
            return
        if self.file is None:
            import tempfile  # (~3 ms of import) only for a List too large to hold

            self.file = tempfile.TemporaryFile(prefix="celkeeper-items-")  # noqa: SIM115 - see close()
        marshal.dump(entry, self.file)
        self.spilled += 1

    def __iter__(self) -> Iterator[tuple[int, Any, int, int, int]]:
        memory, self.memory = self.memory, []
        yield from memory
        if self.file is not None:
            self.file.seek(0)
            for _ in range(self.spilled):
                yield marshal.load(self.file)
        self.close()

    def close(self) -> None:
        self.memory = []
        if self.file is not None:
            self.file.close()
            self.file = None


class _Document:
    """One mapping document as its top-level keys arrive, and its `items` when they are streamed."""

    def __init__(self, file: str, index: int, line: int, column: int) -> None:
        self.file = file
        self.index = index
        self.line = line
        self.column = column
        self.data: dict[str, Any] = {}
        self.explicit: set[str] | None = None  # its own keys, once a merge key set others (_merge)
        self.streamed = False  # `items` handed out one by one (not in `data`)
        self.tentative = 0
        self.held = _Held()  # items waiting for the List's kind (or apiVersion)
        self.copies: list[Any] | None = []  # the items, to rebuild a document that is not a List
        self.copied = 0
        self.path: str | None = None  # where the reader is, for errors

    def where(self, index: int | None = None, line: int = 0, column: int = 0) -> Location:
        if index is None:
            return Location(file=self.file, document=self.index, line=self.line, column=self.column)
        return Location(
            file=self.file, document=self.index, path=index_path("items", index), line=line, column=column
        )

    # -- the document's keys -------------------------------------------------------------------------
    def at(self, key: Any) -> None:
        self.path = key if isinstance(key, str) else None

    def key(self, key: str, value: Any, mark: Any) -> None:
        explicit = self.explicit
        if (key in self.data and (explicit is None or key in explicit)) or (key == "items" and self.streamed):
            raise _Invalid(f"duplicate key {key!r}", mark)
        self.data[key] = value
        if explicit is not None:
            explicit.add(key)

    def merge(self, value: Any, mark: Any, aliased: bool) -> None:
        if self.streamed and any(isinstance(v, dict) and "items" in v for v in (value, *_listed(value))):
            raise _Invalid("a merge key (<<) gives items to a document whose items were read already", mark)
        if self.explicit is None:
            self.explicit = set(self.data)
        _merge(self.data, value, mark, aliased)

    def streams_items(self) -> bool:
        """Whether `items` is read one item at a time: the document is a List, or may be one."""
        if self.streamed or "items" in self.data:
            return False  # a duplicate: refused by key()
        kind = self.data.get("kind")
        return "kind" not in self.data or (isinstance(kind, str) and kind.endswith("List"))

    # -- items ---------------------------------------------------------------------------------------
    def item(self, value: Any, index: int, line: int, column: int, values: int) -> Iterator[Piece]:
        self.streamed = True
        self.path = index_path("items", index)
        if self.copies is not None:
            self.copied += values
            if self.copied > REBUILD_VALUES:
                self.copies = None
            else:
                self.copies.append(value)
        if isinstance(value, dict) and "kind" in value:
            tentative = "kind" not in self.data
            for obj in _expand(value, self.where(index, line, column)):
                if isinstance(obj, Unread):
                    if tentative:  # reported once the document is known to be a List
                        self.held.add((_INVALID, obj.error.message, index, line, column), 1)
                    else:
                        yield obj
                    continue
                if tentative:
                    self.tentative += 1
                yield Streamed(obj, self.file, self.index, index, line, column, tentative)
        elif "kind" in self.data and "apiVersion" in self.data:
            yield from self._release(_OK, value, index, line, column)
        else:
            self.held.add((_OK, value, index, line, column), values)

    def too_large(self, index: int, line: int, column: int) -> Iterator[Piece]:
        self.streamed = True
        self.copies = None
        if "kind" in self.data:
            yield _too_large(self.where(index, line, column))
        else:  # reported once the document is known to be a List
            self.held.add((_TOO_LARGE, None, index, line, column), 1)

    def invalid(self, index: int, error: DocumentError) -> Iterator[Piece]:
        self.streamed = True
        self.copies = None
        if "kind" in self.data:
            yield Unread(error, INVALID)
        else:
            self.held.add(
                (_INVALID, error.message, index, error.location.line or 0, error.location.column or 0), 1
            )

    def items_end(self) -> None:
        self.path = None

    def _release(self, what: int, value: Any, index: int, line: int, column: int) -> Iterator[Piece]:
        """An item of a document known to be a List, as objects (or why it is not read)."""
        where = self.where(index, line, column)
        if what == _TOO_LARGE:
            yield _too_large(where)
            return
        if what == _INVALID:
            yield Unread(DocumentError(value, where), INVALID)
            return
        if not isinstance(value, dict):
            yield _not_an_item(value, where)
            return
        kind = self.data.get("kind")
        item_kind = kind[: -len("List")] if isinstance(kind, str) else ""
        if item_kind and "kind" not in value:  # e.g. a PodList from the API: its items carry no kind
            value = {"apiVersion": self.data.get("apiVersion"), "kind": item_kind, **value}
        for obj in _expand(value, where):
            yield (
                obj if isinstance(obj, Unread) else Streamed(obj, self.file, self.index, index, line, column)
            )

    # -- the end ---------------------------------------------------------------------------------------
    def end(self, values: int) -> Iterator[Piece]:
        kind = self.data.get("kind")
        is_list = isinstance(kind, str) and kind.endswith("List")
        if not self.streamed:
            if values > MAX_OBJECT_VALUES:
                yield _too_large(self.where())
            elif is_list and isinstance(self.data.get("items"), list):
                for index, value in enumerate(self.data["items"]):
                    yield from self._release(_OK, value, index, self.line, self.column)
            else:
                yield Streamed(self.data, self.file, self.index, None, self.line, self.column)
            return
        if is_list:
            if self.tentative:
                yield Settled(self.file, self.index, True, self.tentative)
            for what, value, index, line, column in self.held:
                yield from self._release(what, value, index, line, column)
            return
        # not a List after all: the items were part of one object
        self.held.close()
        if self.tentative:
            yield Settled(self.file, self.index, False, self.tentative)
        if self.copies is None or values + self.copied > MAX_OBJECT_VALUES:
            yield Unread(
                DocumentError(
                    f"its items came before its kind ({kind!r}, not a List's) and are too many to keep "
                    f"(over {REBUILD_VALUES:,} values): the document is not read",
                    self.where(),
                ),
                TOO_LARGE,
            )
            return
        self.data["items"] = self.copies
        yield Streamed(self.data, self.file, self.index, None, self.line, self.column)

    def failed(self) -> Iterator[Piece]:
        """The document is not read to its end: its tentative items are withdrawn."""
        self.held.close()
        if self.tentative:
            yield Settled(self.file, self.index, False, self.tentative, failed=True)
            self.tentative = 0


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _too_large(where: Location) -> Unread:
    return Unread(
        DocumentError(
            f"the object has more than {MAX_OBJECT_VALUES:,} values (maps, lists, scalars; an alias "
            "counts what it repeats): not read",
            where,
        ),
        TOO_LARGE,
    )


def _not_an_item(value: Any, where: Location) -> Unread:
    return Unread(
        DocumentError(f"a List item must be an object (a mapping), not {_type_name(value)}", where),
        NOT_AN_OBJECT,
    )


def _expand(value: dict[str, Any], where: Location) -> Iterator[dict[str, Any] | Unread]:
    """An object, or the items of a List it holds (a List inside a List), as objects."""
    kind = value.get("kind")
    items = value.get("items")
    if not (isinstance(kind, str) and kind.endswith("List") and isinstance(items, list)):
        yield value
        return
    item_kind = kind[: -len("List")]
    for item in items:
        if not isinstance(item, dict):
            yield _not_an_item(item, where)
            continue
        if item_kind and "kind" not in item:
            yield from _expand({"apiVersion": value.get("apiVersion"), "kind": item_kind, **item}, where)
        else:
            yield from _expand(item, where)


# -- JSON -------------------------------------------------------------------------------------------------


class _NotJson(Exception):
    """What the JSON reader does not read, at `position` of its buffer; `fatal`: nor the YAML reader (a
    number beyond float64's: kubectl refuses the document)."""

    def __init__(self, message: str, position: int, fatal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.fatal = fatal


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return found


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_constant=_constant,
    parse_int=kubeyaml.json_int,
    parse_float=kubeyaml.json_float,
)
_LENIENT = json.JSONDecoder()  # finds where a value the strict decoder refused ends
_SPACE = " \t\r\n"


def _count_values(value: Any) -> int:
    count = 0
    pending = [value]
    while pending:
        node = pending.pop()
        count += 1
        if isinstance(node, dict):
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return count


def _values(value: Any, chars: int) -> int:
    """The values of a decoded JSON value, counted only where it may matter: a value takes at least a
    character, so one of fewer characters than any budget is counted by its length."""
    return _count_values(value) if chars > REBUILD_VALUES // 2 else max(1, chars // 16)


class _JsonReader:
    """JSON documents from a binary stream, decoded as they come (see the module's docstring)."""

    def __init__(self, stream: IO[bytes], name: str, head: bytes) -> None:
        self.stream = stream
        self.name = name
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.consumed = 0  # bytes decoded into the buffer
        self.pin: int | None = None  # kept in the buffer from there (a document that may go to YAML)
        self.line0 = 1  # line and column of buf[0]
        self.column0 = 1
        self.dropped = 0  # characters dropped from the front of the buffer
        self.known = (0, 1, -1)  # a buffer position, its line, the position of the newline before it
        self.document = 0
        if head.startswith(codecs.BOM_UTF8):
            head = head[len(codecs.BOM_UTF8) :]
            self.consumed = len(codecs.BOM_UTF8)
        self.head = head

    # -- the buffer ----------------------------------------------------------------------------------
    def _decode(self, data: bytes) -> None:
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as err:
            line, column = _byte_position(self.stream, self.consumed + err.start)
            where = Location(file=self.name, line=line, column=column)
            raise DocumentError(f"cannot read: not UTF-8 text ({err.reason})", where) from err
        self.consumed += len(data)
        self.eof = not data
        self.buf += text

    def _more(self) -> bool:
        """Read more of the stream into the buffer; False at its end."""
        if self.eof:
            return False
        keep = self.pos if self.pin is None else min(self.pos, self.pin)
        if keep > CHUNK:
            self.line0, self.column0 = self.position(keep)
            self.buf = self.buf[keep:]
            self.dropped += keep
            self.pos -= keep
            if self.pin is not None:
                self.pin -= keep
            self.known = (0, self.line0, -1 - (self.column0 - 1))
        self._decode(self.stream.read(CHUNK))
        return True

    def position(self, at: int) -> tuple[int, int]:
        """The line:col of buffer position `at` (counted on from the last position asked for)."""
        known, line, newline = self.known
        if at < known:
            known, line, newline = 0, self.line0, -1 - (self.column0 - 1)
        found = self.buf.count("\n", known, at)
        if found:
            line += found
            newline = self.buf.rfind("\n", known, at)
        self.known = (at, line, newline)
        return line, at - newline

    def _next(self) -> str:
        """The next character that is not white space ("" at the end of the stream)."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _SPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self._more():
                return ""

    def _value(self, strict: bool = True) -> tuple[Any, int]:
        """The JSON value at `pos` and the characters it took; raises _NotJson."""
        decoder = _DECODER if strict else _LENIENT
        self._next()
        while True:
            start = self.pos
            try:
                value, end = decoder.raw_decode(self.buf, start)
            except json.JSONDecodeError as err:
                truncated = err.pos >= len(self.buf) - 64 or err.msg.startswith(
                    ("Unterminated", "Invalid \\u")
                )
                if truncated and len(self.buf) - start < MAX_JSON_CHARS and self._more():
                    continue
                raise _NotJson(f"JSON syntax error: {err.msg}", err.pos) from None
            except ValueError as err:  # a duplicate key, NaN, Infinity
                raise _NotJson(str(err), start) from None
            except RecursionError:
                raise _NotJson("nested too deeply for the JSON reader", start) from None
            except kubeyaml.ScalarError as err:
                raise _NotJson(err.message, start, fatal=True) from None
            if end >= len(self.buf) and self._more():
                continue  # a number may go on in the next chunk
            self.pos = end
            return value, end - start

    # -- documents -----------------------------------------------------------------------------------
    def pieces(self) -> Iterator[Piece]:
        try:
            self._decode(self.head)
            self.head = b""
            while True:
                first = self._next()
                if not first:
                    return
                if first != "{":
                    yield from self._to_yaml()
                    return
                self.pin = self.pos
                line, column = self.position(self.pos)
                document = _Document(self.name, self.document + 1, line, column)
                try:
                    yield from self._mapping(document)
                except _NotJson as err:
                    if self.pin is not None and not err.fatal:  # nothing of it handed out: YAML reads it
                        self.pos = self.pin
                        yield from self._to_yaml()
                        return
                    yield from document.failed()
                    line, column = self.position(err.position)
                    yield DocumentError(
                        err.message,
                        Location(
                            file=self.name,
                            document=document.index,
                            path=document.path,
                            line=line,
                            column=column,
                        ),
                    )
                    return
                self.document += 1
                self.pin = None
        except DocumentError as err:  # not UTF-8
            yield err

    def _to_yaml(self) -> Iterator[Piece]:
        """The rest of the stream, from `pos`, read as YAML."""
        rest = self.buf[self.pos :].encode() + self.decoder.getstate()[0]
        line, column = self.position(self.pos)
        base = self.consumed - len(rest)
        reader = _YamlReader(
            _Chained(rest, self.stream, base),
            self.name,
            self.stream,
            document=self.document,
            line_offset=line - 1,
            column_offset=column - 1,
        )
        yield from reader.pieces()

    def _mapping(self, document: _Document) -> Iterator[Piece]:
        self.pos += 1  # {
        if self._next() == "}":
            self.pos += 1
        else:
            while True:
                if self._next() != '"':
                    raise _NotJson("JSON syntax error: expecting a key in double quotes", self.pos)
                key_at = self.dropped + self.pos
                key, _ = self._value()
                if self._next() != ":":
                    raise _NotJson("JSON syntax error: expecting ':'", self.pos)
                self.pos += 1
                document.at(key)
                if key == "items" and document.streams_items() and self._next() == "[":
                    self.pin = None  # its items are handed out as they come: no way back to YAML
                    self.pos += 1
                    yield from self._items(document)
                else:
                    value, _ = self._value()
                    try:
                        document.key(key, value, None)
                    except _Invalid as err:
                        raise _NotJson(err.message, max(0, key_at - self.dropped)) from None
                following = self._next()
                self.pos += 1
                if following == "}":
                    break
                if following != ",":
                    raise _NotJson("JSON syntax error: expecting ',' or '}'", self.pos - 1)
        # a document of fewer characters than MAX_OBJECT_VALUES has fewer values (its items aside)
        long = self.pin is None or self.pos - self.pin > MAX_OBJECT_VALUES
        values = _count_values(document.data) if long else 0
        yield from document.end(values)

    def _items(self, document: _Document) -> Iterator[Piece]:
        index = 0
        if self._next() == "]":
            self.pos += 1
            document.items_end()
            return
        while True:
            line, column = self.position(self.pos)
            try:
                value, chars = self._value()
            except _NotJson as err:
                if err.fatal or err.message.startswith(("JSON syntax error", "nested")):
                    raise
                yield from self._as_yaml(document, index, line, column)
            else:
                values = _values(value, chars)
                if values > MAX_OBJECT_VALUES:
                    yield from document.too_large(index, line, column)
                else:
                    yield from document.item(value, index, line, column, values)
            index += 1
            following = self._next()
            self.pos += 1
            if following == "]":
                break
            if following != ",":
                raise _NotJson("JSON syntax error: expecting ',' or ']'", self.pos - 1)
        document.items_end()

    def _as_yaml(self, document: _Document, index: int, line: int, column: int) -> Iterator[Piece]:
        """An item JSON does not read (a duplicate key, NaN), read as YAML reads it (NaN: a string)."""
        start = self.pos
        self._value(strict=False)
        try:
            value, values = _yaml_value(self.buf[start : self.pos], line, column)
        except _Invalid as err:
            at = err.mark or _Mark(line - 1, column - 1)
            where = Location(
                file=self.name,
                document=document.index,
                path=index_path("items", index),
                line=at.line + 1,
                column=at.column + 1,
            )
            yield from document.invalid(index, DocumentError(err.message, where))
        except _TooLarge:
            yield from document.too_large(index, line, column)
        else:
            yield from document.item(value, index, line, column, values)


def _yaml_value(text: str, line: int, column: int) -> tuple[Any, int]:
    """A JSON value read as YAML (it starts at line:col of the file), and its values; raises _Invalid
    (with a mark in the file) or _TooLarge."""
    parser = CParser(text)
    try:
        builder = _Builder(parser.get_event)
        try:
            parser.get_event()  # the stream's start
            parser.get_event()  # the document's start
            value = builder.value(parser.get_event())
        except YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            problem = getattr(err, "problem", None) or "not YAML either"
            raise _Invalid(
                f"cannot be read as JSON or YAML: {problem}", _in_file(mark, line, column)
            ) from None
        except _Invalid as err:
            raise _Invalid(err.message, _in_file(err.mark, line, column)) from None
        return value, builder.count
    finally:
        parser.dispose()


def _in_file(mark: Any, line: int, column: int) -> _Mark | None:
    """A mark inside a value that starts at line:col of the file, as a mark of the file."""
    if mark is None:
        return None
    return _Mark(line - 1 + mark.line, mark.column + (column - 1 if mark.line == 0 else 0))
