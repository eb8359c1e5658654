"""HTTP/1.1 framing without blocking: where a request ends, from the bytes received so far.

The event-loop worker (webhook/worker.py) reads requests without a thread per connection and hands
the application only complete ones. This module answers, for the bytes a connection has buffered:
is the request head complete, how long is the body, is the body complete. The request itself is
then parsed again, completely, by Gunicorn's own parser, so HTTP semantics are Gunicorn's.

    framer = RequestFramer(max_head=65536, max_body=limit)
    framer.feed(data) -> Frame | None     # None: need more bytes (RequestTooLarge: head too large)

The head's fields are read as Gunicorn will read the request (its `http_parser` "auto"): with
gunicorn_h1c's parser (picohttpparser, C) when the `fast-http` extra is installed, else with Gunicorn's
own Python parser; a head the parser refuses is handed over as it is, for Gunicorn to answer 400.
tests/webhook/test_http1.py runs every framing test with both, and compares them on a corpus of heads.

A chunked body is decoded here and the head rewritten to a Content-Length (Gunicorn then reads a
plain body); `Expect: 100-continue` is answered by the worker and removed from the head. A body
larger than `max_body` is read and dropped (up to `drain_limit`) and the request handed over
with its head only: the application answers 413 from the Content-Length. Heads that cannot be
framed unambiguously (Content-Length and Transfer-Encoding, several Content-Lengths, an unknown
transfer coding, a malformed head) are handed over without a body for Gunicorn to refuse, and the
connection is closed after the answer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

try:  # the fast-http extra (celkeeper[fast-http]): built from source, it needs a C compiler
    import gunicorn_h1c as _h1c
except ImportError:
    _h1c = None

#: gunicorn_h1c when installed (Gunicorn's own parser uses it then), else None: Gunicorn's Python parser
FAST_PARSER: Any = _h1c

MAX_CHUNK_LINE = 4096  # bytes of one chunk-size line (with extensions)
MAX_TRAILERS = 16 * 1024


class RequestTooLarge(Exception):
    """The request head is larger than allowed (answered 431 by the worker)."""


class _Malformed(Exception):
    pass


@dataclass(frozen=True)
class Head:
    """What the framer read of a request's head (gunicorn_h1c's parse): enough for the worker to tell a
    request it may answer without Gunicorn's parser (webhook/worker.py, routes)."""

    method: bytes
    target: bytes  # as sent: path and query
    minor: int  # HTTP/1.<minor>
    headers: tuple[tuple[bytes, bytes], ...]  # (name, value) as sent
    length: int  # the body's length: Content-Length, or the chunked body's decoded size (0: none)


@dataclass(frozen=True)
class Frame:
    """One complete request, as the application gets it."""

    data: bytes  # head (possibly rewritten) and body
    rest: bytes  # what followed the request on the connection (pipelined bytes)
    close: bool  # close the connection after answering (framing was ambiguous, or a body dropped)
    error: str = ""  # the body could not be read: answer 400 with this reason (and close)
    head: Head | None = None  # the head as parsed (None: framed without it, or it could not be)
    body_at: int = 0  # where the body starts in `data`


class _Chunked:
    """An incremental chunked-body decoder (RFC 9112 section 7.1)."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.body = bytearray()
        self.size = 0  # decoded bytes seen, kept or not
        self._left = -1  # bytes of chunk data still to come; -1: a size line is next; -2: trailers
        self.keep = True  # False: decoded data is counted, not kept

    def feed(self, data: bytes) -> bytes | None:
        """Add bytes; the bytes after the body once it has ended, else None. Raises _Malformed."""
        buf = self.buffer
        buf += data
        pos = 0
        while True:
            if self._left == -1:  # a chunk-size line
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if len(buf) - pos > MAX_CHUNK_LINE:
                        raise _Malformed("chunk size line too long")
                    break
                text = bytes(buf[pos:end]).split(b";", 1)[0].strip()
                if not text or len(text) > 16 or text.strip(b"0123456789abcdefABCDEF"):
                    raise _Malformed("invalid chunk size")
                self._left = int(text, 16)
                pos = end + 2
                if self._left == 0:
                    self._left = -2
            elif self._left == -2:  # trailer fields, up to an empty line
                if buf[pos : pos + 2] == b"\r\n":
                    del buf[: pos + 2]
                    rest = bytes(buf)
                    buf.clear()
                    return rest
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if len(buf) - pos > MAX_TRAILERS:
                        raise _Malformed("trailers too long")
                    break
                del buf[: end + 4]
                rest = bytes(buf)
                buf.clear()
                return rest
            else:  # chunk data, then CRLF
                if len(buf) - pos < self._left + 2:
                    take = min(self._left, len(buf) - pos)
                    self._take(buf, pos, take)
                    pos += take
                    self._left -= take
                    break
                self._take(buf, pos, self._left)
                pos += self._left
                if buf[pos : pos + 2] != b"\r\n":
                    raise _Malformed("chunk data not followed by CRLF")
                pos += 2
                self._left = -1
        del buf[:pos]
        return None

    def _take(self, buf: bytearray, pos: int, n: int) -> None:
        self.size += n
        if self.keep and n:
            self.body += buf[pos : pos + n]


class RequestFramer:
    """Frames the requests of one connection, one at a time (`feed` until it returns a Frame)."""

    def __init__(self, max_head: int, max_body: int, drain_limit: int, parser: Any = FAST_PARSER) -> None:
        """`parser`: gunicorn_h1c, or None for Gunicorn's Python parser (FAST_PARSER: the one installed)."""
        self.max_head = max_head
        self.max_body = max_body
        self.drain_limit = drain_limit
        self.parser = parser
        self.reset()

    def reset(self) -> None:
        self._buf = bytearray()
        self._searched = 0  # the head's end was looked for up to here
        self._head: bytes | None = None
        self._length = -1  # Content-Length of the body (-1: none or chunked)
        self._received = 0  # body bytes received (kept or not)
        self._chunked: _Chunked | None = None
        self._close = False
        self._expect = False
        self._parsed: Head | None = None
        self.continue_wanted = False  # the client waits for "100 Continue" before its body

    @property
    def started(self) -> bool:
        """Some bytes of a request have arrived."""
        return bool(self._buf) or self._head is not None

    def feed(self, data: bytes) -> Frame | None:
        if self._head is None:
            self._buf += data
            end = self._buf.find(b"\r\n\r\n", max(0, self._searched - 3))
            if end < 0:
                self._searched = len(self._buf)
                if len(self._buf) > self.max_head:
                    raise RequestTooLarge(f"request head larger than {self.max_head} bytes")
                return None
            if end + 4 > self.max_head:
                raise RequestTooLarge(f"request head larger than {self.max_head} bytes")
            head = bytes(self._buf[: end + 4])
            data = bytes(self._buf[end + 4 :])
            self._buf = bytearray()
            frame = self._start(head)
            if frame is not None:
                return Frame(frame.data, data, frame.close, head=frame.head, body_at=len(frame.data))
        return self._body(data)

    def _start(self, head: bytes) -> Frame | None:
        """Read the head's framing; a Frame when the request has no body (or cannot be framed)."""
        try:
            method, target, minor_version, fields = request_head(head, self.parser)
        except Exception:  # malformed: Gunicorn's parser gives the precise 400
            return Frame(head, b"", True)
        lengths: list[bytes] = []
        codings: list[bytes] = []
        expect = False
        for name, value in fields:
            key = name.lower()
            if key == b"content-length":
                lengths.append(value.strip())
            elif key == b"transfer-encoding":
                codings.extend(c.strip().lower() for c in value.split(b","))
            elif key == b"expect":
                expect = value.strip().lower() == b"100-continue"
        if codings:
            if lengths or codings[-1] != b"chunked":
                return Frame(head, b"", True)  # ambiguous or unknown: Gunicorn refuses it
            self._chunked = _Chunked()
        elif len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
            return Frame(head, b"", True)
        elif lengths:
            self._length = int(lengths[0])
        self._parsed = Head(method, target, minor_version, tuple(fields), max(self._length, 0))
        if self._chunked is None and self._length <= 0:
            if expect:
                return Frame(_without(head, {b"expect"}), b"", False, head=_drop(self._parsed, {b"expect"}))
            return Frame(head, b"", False, head=self._parsed)
        self._head = head
        self._expect = self.continue_wanted = expect
        if self._length > self.max_body:
            self._close = True  # dropped: the application answers 413 from the head
        return None

    def _body(self, data: bytes) -> Frame | None:
        assert self._head is not None
        if not data:
            return None
        self.continue_wanted = False
        if self._chunked is not None:
            return self._chunked_body(data)
        need = self._length - self._received
        body, rest = data[:need], data[need:]
        self._received += len(body)
        if not self._close:
            self._buf += body
        elif self._received >= self.drain_limit:
            return self._finish(b"", True)
        if self._received < self._length:
            return None
        return self._finish(rest, self._close)

    def _chunked_body(self, data: bytes) -> Frame | None:
        decoder = self._chunked
        assert decoder is not None
        try:
            rest = decoder.feed(data)
        except _Malformed as err:
            self.reset()
            return Frame(b"", b"", True, f"invalid chunked body: {err}")
        if decoder.keep and decoder.size > self.max_body:
            decoder.keep = False
            decoder.body.clear()
        if rest is None and decoder.size < self.drain_limit:
            return None
        self._length = decoder.size
        self._buf = decoder.body
        return self._finish(rest or b"", rest is None or not decoder.keep)

    def _finish(self, rest: bytes, close: bool) -> Frame:
        head = self._head
        parsed = self._parsed
        assert head is not None
        if self._chunked is not None:
            head = _without(head, {b"expect", b"transfer-encoding"}, self._length)
            parsed = _drop(parsed, {b"expect", b"transfer-encoding"}, self._length)
        elif self._expect:
            head = _without(head, {b"expect"})
            parsed = _drop(parsed, {b"expect"})
        body = b"" if close and self._length > self.max_body else bytes(self._buf)
        self.reset()
        return Frame(head + body, rest, close, head=parsed, body_at=len(head))


def _drop(head: Head | None, names: set[bytes], length: int | None = None) -> Head | None:
    """The parsed head as the rewritten one reads (`_without`): without the fields named (lower-case)."""
    if head is None:
        return None
    kept = tuple(h for h in head.headers if h[0].lower() not in names)
    return Head(head.method, head.target, head.minor, kept, head.length if length is None else length)


def request_head(
    head: bytes, parser: Any = FAST_PARSER
) -> tuple[bytes, bytes, int, list[tuple[bytes, bytes]]]:
    """A request head's method, request target, HTTP minor version and header fields (name as sent,
    value), read by gunicorn_h1c (`parser`), or by Gunicorn's Python parser (None); raises what the
    parser raises for a head it refuses."""
    if parser is not None:
        parsed = parser.parse_request_fast(head)
        fields = [(bytes(name), bytes(value)) for name, value in parsed.headers]
        return bytes(parsed.method), bytes(parsed.path), int(parsed.minor_version), fields
    from gunicorn.http.message import Request
    from gunicorn.http.unreader import IterUnreader

    # Gunicorn's parser decides what is refused (it raises); the fields are then read from the head as
    # picohttpparser gives them (names as sent: Gunicorn's are upper-cased; values without their blanks)
    request = Request(_python_parser_config(), IterUnreader([head]), ("127.0.0.1", 0))
    lines = head[:-4].split(b"\r\n")
    fields = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields.append((name, value.strip(b" \t")))
    return request.method.encode("latin-1"), request.uri.encode("latin-1"), int(request.version[1]), fields


@functools.cache
def _python_parser_config() -> Any:
    """Gunicorn's default settings with its Python parser (the limits gunicorn_h1c's defaults mirror)."""
    from gunicorn.config import Config

    config = Config()
    config.set("http_parser", "python")
    return config


def _without(head: bytes, names: set[bytes], content_length: int | None = None) -> bytes:
    """The head without the header fields named (lower-case), plus a Content-Length if given."""
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0]] + [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in names]
    if content_length is not None:
        kept.append(b"Content-Length: %d" % content_length)
    return b"\r\n".join(kept) + b"\r\n\r\n"
