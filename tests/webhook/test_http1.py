"""HTTP/1.1 framing for the event-loop worker (celkeeper.webhook.http1): when a request is complete,
from bytes that arrive in any pieces. Pure: no sockets. Every test runs with both ways of reading a head:
gunicorn_h1c (the fast-http extra) and Gunicorn's Python parser (without it)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from celkeeper.webhook import http1
from celkeeper.webhook.http1 import Frame, RequestFramer, RequestTooLarge

HEAD = b"POST /v1/admit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
_PARSER: Any = None  # the parser of the test running (the `parser` fixture)


@pytest.fixture(autouse=True, params=["gunicorn_h1c", "python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """gunicorn_h1c (the test extra installs it), or None: Gunicorn's Python parser."""
    chosen = http1.FAST_PARSER if request.param == "gunicorn_h1c" else None
    if request.param == "gunicorn_h1c":
        assert chosen is not None, "gunicorn_h1c is not installed (pip install -e '.[test]')"
    monkeypatch.setattr(sys.modules[__name__], "_PARSER", chosen)
    return chosen


def _framer(max_body: int = 1000, drain_limit: int = 10_000, max_head: int = 4096) -> RequestFramer:
    return RequestFramer(max_head=max_head, max_body=max_body, drain_limit=drain_limit, parser=_PARSER)


def _feed_bytewise(framer: RequestFramer, data: bytes) -> list[Frame]:
    frames = []
    for i in range(len(data)):
        frame = framer.feed(data[i : i + 1])
        if frame is not None:
            frames.append(frame)
            if frame.rest:
                raise AssertionError("byte-wise feeding leaves nothing behind")
    return frames


def test_a_content_length_body_completes_the_request_whatever_the_pieces() -> None:
    request = HEAD + b"Content-Length: 5\r\n\r\nhello"
    for framer_input in ([request], [request[:10], request[10:60], request[60:]]):
        framer = _framer()
        frames = [f for f in map(framer.feed, framer_input) if f is not None]
        assert [f.data for f in frames] == [request]
        assert not frames[0].close and frames[0].rest == b""
    assert [f.data for f in _feed_bytewise(_framer(), request)] == [request]


def test_nothing_is_handed_over_before_the_last_byte() -> None:
    framer = _framer()
    assert framer.feed(HEAD + b"Content-Length: 5\r\n\r\nhell") is None
    assert framer.started


def test_pipelined_bytes_come_back_as_the_rest() -> None:
    first = HEAD + b"Content-Length: 2\r\n\r\n{}"
    second = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    frame = _framer().feed(first + second)
    assert frame is not None and frame.data == first and frame.rest == second


def test_a_request_without_body_ends_with_its_head() -> None:
    request = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"
    frame = _framer().feed(request)
    assert frame is not None and frame.data == request and not frame.close


def test_a_chunked_body_is_decoded_and_the_head_given_a_content_length() -> None:
    body = b"4\r\nwiki\r\n6;ext=1\r\npedia \r\nE\r\nin \r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\n"
    request = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body
    expected = HEAD + b"Content-Length: 24\r\n\r\nwikipedia in \r\n\r\nchunks."
    frame = _framer().feed(request + b"NEXT")
    assert frame is not None and frame.data == expected and frame.rest == b"NEXT" and not frame.close
    assert [f.data for f in _feed_bytewise(_framer(), request)] == [expected]


def test_expect_100_continue_is_wanted_then_removed_from_the_head() -> None:
    framer = _framer()
    assert framer.feed(HEAD + b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n") is None
    assert framer.continue_wanted
    frame = framer.feed(b"{}")
    assert frame is not None and frame.data == HEAD + b"Content-Length: 2\r\n\r\n{}"


def test_a_body_above_the_limit_is_read_and_dropped_then_handed_over_head_only() -> None:
    framer = _framer(max_body=10)
    head = HEAD + b"Content-Length: 100\r\n\r\n"
    assert framer.feed(head + b"x" * 60) is None
    frame = framer.feed(b"x" * 40 + b"GET")
    assert frame is not None and frame.data == head and frame.close  # the app answers 413 from the head
    assert frame.rest == b"GET"


def test_a_chunked_body_above_the_limit_is_dropped_and_its_length_told() -> None:
    body = b"".join(b"a\r\n" + b"y" * 10 + b"\r\n" for _ in range(5)) + b"0\r\n\r\n"
    frame = _framer(max_body=20).feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body)
    assert frame is not None and frame.close
    assert frame.data == HEAD + b"Content-Length: 50\r\n\r\n"


def test_draining_stops_at_the_drain_limit() -> None:
    framer = _framer(max_body=10, drain_limit=100)
    assert framer.feed(HEAD + b"Content-Length: 100000\r\n\r\n" + b"x" * 50) is None
    frame = framer.feed(b"x" * 60)
    assert frame is not None and frame.close


@pytest.mark.parametrize(
    "fields",
    [
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",  # request smuggling shapes
        b"Content-Length: 5\r\nContent-Length: 6\r\n",
        b"Content-Length: +5\r\n",
        b"Transfer-Encoding: gzip\r\n",
    ],
)
def test_ambiguous_framing_is_handed_over_head_only_and_closed(fields: bytes) -> None:
    request = HEAD + fields + b"\r\n"
    frame = _framer().feed(request + b"hello")
    assert frame is not None and frame.data == request and frame.close  # Gunicorn refuses it


def test_a_malformed_chunked_body_is_an_error() -> None:
    frame = _framer().feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n")
    assert frame is not None and frame.error and frame.close


def test_a_head_above_the_limit_is_refused_even_before_it_ends() -> None:
    with pytest.raises(RequestTooLarge):
        _framer(max_head=100).feed(HEAD + b"X-Pad: " + b"p" * 200)


def test_a_slow_head_is_searched_once_per_byte_not_from_the_start() -> None:
    framer = _framer(max_head=70_000)
    for _ in range(60_000):  # quadratic re-scanning would take minutes; linear takes milliseconds
        assert framer.feed(b"a") is None


# -- both parsers: the same framing, and each Gunicorn's -------------------------------------------------

WELL_FORMED = [
    HEAD + b"Content-Length: 5\r\n\r\n",
    HEAD + b"Content-Length:5\r\n\r\n",
    HEAD + b"content-length: 5  \r\n\r\n",
    HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
    HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n",
    HEAD + b"Transfer-Encoding: CHUNKED\r\nExpect: 100-continue\r\n\r\n",
    HEAD + b"Expect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
    HEAD + b"X-Empty:\r\nContent-Length: 3\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /readyz HTTP/1.0\r\n\r\n",
    b"POST /v1/admit?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
]
MALFORMED = [
    HEAD + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
    HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    HEAD + b"Content-Length: -1\r\n\r\n",
    HEAD + b"Content-Length: 0x10\r\n\r\n",
    HEAD + b"Transfer-Encoding: chunked, gzip\r\n\r\n",
    HEAD + b"Transfer-Encoding: identity\r\n\r\n",
    HEAD + b"Bad Name: x\r\nContent-Length: 5\r\n\r\n",
    HEAD + b"Content-Length : 5\r\n\r\n",
    HEAD + b"X: a\x00b\r\nContent-Length: 5\r\n\r\n",
    HEAD + b" folded: x\r\nContent-Length: 5\r\n\r\n",
    b"POST /v1/admit HTTP/2.0\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
    b"PO ST /v1/admit HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
    b"POST /v1/admit\r\nContent-Length: 5\r\n\r\n",
    b"post /v1/admit HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
    b"\x00\x01\x02\r\n\r\n",
    HEAD + b"X-Long: " + b"v" * 9000 + b"\r\nContent-Length: 5\r\n\r\n",
]


def _gunicorn_reads(head: bytes, fast: bool) -> bool:
    """Whether Gunicorn's own parser (fast: gunicorn_h1c; else Python) reads the head (with a body of the
    length it gives, so that only the head decides)."""
    from gunicorn import http
    from gunicorn.config import Config

    config = Config()
    config.set("http_parser", "fast" if fast else "python")
    try:
        request = next(http.get_parser(config, iter([head + _body(head)]), ("127.0.0.1", 0)))
        request.body.read()
    except Exception:
        return False
    return True


def _body(head: bytes) -> bytes:
    return b"5\r\nabcde\r\n0\r\n\r\n" if b"chunked" in head.lower() else b"abcde"


def _frame(head: bytes, parser: Any) -> Frame | None:
    framer = RequestFramer(max_head=65536, max_body=1000, drain_limit=10_000, parser=parser)
    return framer.feed(head + _body(head))


def test_both_parsers_frame_the_same_and_refuse_what_their_gunicorn_refuses(parser: Any) -> None:
    # each way of reading hands a head over unread exactly when Gunicorn's parser of that installation
    # refuses it (so the answer is Gunicorn's 400); heads both read are framed alike
    if parser is None:
        return  # one run compares both
    for head in WELL_FORMED + MALFORMED:
        frames = {name: _frame(head, p) for name, p in (("fast", parser), ("python", None))}
        for name, fast in (("fast", True), ("python", False)):
            frame = frames[name]
            handed_unread = frame is not None and frame.close and frame.data == head and not frame.error
            assert handed_unread == (not _gunicorn_reads(head, fast)), (name, head[:120])
        if head in WELL_FORMED:
            assert frames["fast"] == frames["python"] and frames["fast"] is not None, head
