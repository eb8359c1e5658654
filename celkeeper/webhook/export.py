"""Exporting admission decisions (`celkeeper serve --export-decisions=stdout|FILE`): one JSON line per
violation found at admission (deny, warn and dryrun results), per request answered by the failure mode,
and (`--export-allowed`) per request allowed without any, for log pipelines, SIEMs and dashboards.

Never in the way of a review: the request path builds each line (orjson, a few microseconds) and appends
it to a bounded buffer (BUFFER_BYTES); a thread of the worker's own writes the buffer out every
FLUSH_INTERVAL (and sooner when it fills up). When the buffer is full - the output is slower than the
decisions, or blocked - new lines are dropped and counted (`celkeeper_decision_export_lines_total
{result="dropped"}`), never waited for. Lines that cannot be written (the file's disk is full, the
pipe's reader gone) are counted as `failed`, and logged at most once a minute.

Each worker process writes its own lines to the same output: a regular file is opened with O_APPEND
(each write lands whole at the end), a pipe (stdout in a container) is written in pieces of at most
PIPE_BUF bytes made of whole lines, which the kernel never interleaves with another writer's; a single
line longer than PIPE_BUF (a message of kilobytes) may then interleave with another worker's output on
a pipe, never on a file.

The line (a stable schema: every key always present, "" or null when unknown; docs/results.md):
    id                  the request's uid (Gatekeeper's export: `id`)
    eventType           violation | allowed | error
    time                when the decision was made, RFC 3339 UTC with milliseconds
    process             admission
    pod                 the webhook pod (--pod-name)
    operation, user, dryRun, allowed     the request, and its answer
    resourceGroup, resourceAPIVersion, resourceKind, resourceNamespace, resourceName, resourceLabels
                        the object reviewed (Gatekeeper's resource* keys)
    group, version, kind, name           the constraint (violation; "" otherwise)
    enforcementAction   deny | warn | dryrun (violation; "" otherwise)
    message             the violation's message, or the error's
Gatekeeper's keys (pkg/export/util ExportMsg) where it has them; `constraintAnnotations` and `details`
are not exported.
"""

from __future__ import annotations

import atexit
import collections
import errno
import logging
import os
import select
import stat
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

import orjson

from celkeeper.model import Result
from celkeeper.policy import PolicySet

log = logging.getLogger("celkeeper.webhook")

STDOUT = "stdout"
BUFFER_BYTES = 8 * 1024 * 1024  # lines waiting to be written, at most
FLUSH_INTERVAL = 0.1  # seconds: a line is written at most this late (when the output keeps up)
FILE_CHUNK = 256 * 1024  # bytes per write to a regular file
PIPE_CHUNK = select.PIPE_BUF  # bytes per write to a pipe: what the kernel writes whole
FAILURE_LOG_INTERVAL = 60.0
CLOSE_WAIT = 5.0  # seconds close() waits for the writer thread (a worker's graceful stop allows 10)


class ExportCounter(Protocol):
    def count_export(self, result: str, lines: int) -> None:
        """Lines written, dropped (the buffer full) or failed (the write refused)."""


def rfc3339(seconds: float) -> str:
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class _Constraints:
    """The constraint's keys of a violation's line, serialised once per (constraint, action) for the loaded
    policy set (made again when it changes): only the message is serialised per line."""

    def __init__(self) -> None:
        self._policies: weakref.ref[PolicySet] | None = None
        self._api: dict[tuple[str, str], tuple[str, str]] = {}
        self._keys: dict[tuple[str, str, str], bytes] = {}

    def keys(self, policies: PolicySet | None, kind: str, name: str, action: str) -> bytes:
        """`"eventType":"violation","group":..,"version":..,"kind":..,"name":..,"enforcementAction":..`"""
        if policies is not None and (self._policies is None or self._policies() is not policies):
            api = {}
            for constraint in policies.constraints:
                group, _, version = constraint.document.api_version.rpartition("/")
                api[(constraint.kind, constraint.name)] = (group, version)
            self._policies, self._api, self._keys = weakref.ref(policies), api, {}
        found = self._keys.get((kind, name, action))
        if found is None:
            group, version = self._api.get((kind, name), ("", "")) if policies is not None else ("", "")
            found = orjson.dumps(
                {
                    "eventType": "violation",
                    "group": group,
                    "version": version,
                    "kind": kind,
                    "name": name,
                    "enforcementAction": action,
                }
            )[1:-1]
            if len(self._keys) < 100_000:  # bounded: (constraint, action) pairs of the loaded policies
                self._keys[(kind, name, action)] = found
        return found


class DecisionExport:
    """One worker's export (make it in the worker, after the fork)."""

    def __init__(
        self,
        target: str,
        *,
        pod: str = "",
        allowed: bool = False,
        counter: ExportCounter | None = None,
        clock: Callable[[], float] = time.time,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        self.target = target
        self.pod = pod
        self.export_allowed = allowed
        self.counter = counter
        self.clock = clock
        self.buffer_bytes = buffer_bytes
        self._fd, self._owned = self._open(target)
        try:
            regular = stat.S_ISREG(os.fstat(self._fd).st_mode)
        except OSError:
            regular = False
        self._chunk = FILE_CHUNK if regular else PIPE_CHUNK
        self._lines: collections.deque[bytes] = collections.deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None
        self._constraints = _Constraints()
        self._last_failure_log = 0.0
        self._unsettled = 0  # lines of the flush in progress (the writer thread's)
        self._settled = (0, 0)  # ... of them written, and refused, so far
        self._abandoned = False
        self.written = self.dropped = self.failed = 0

    @staticmethod
    def _open(target: str) -> tuple[int, bool]:
        if target == STDOUT:
            return sys.stdout.fileno(), False
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
        return fd, True

    # -- the request path --------------------------------------------------------------------------------
    def decision(
        self,
        raw: Mapping[str, object],
        results: Sequence[Result],
        *,
        allowed: bool,
        policies: PolicySet | None,
    ) -> None:
        """The lines of one decision: one per result; one `allowed` line when there is none (if asked)."""
        if not results and not (allowed and self.export_allowed):
            return
        base = self._base(raw, allowed)  # the request's part of every line, serialised once
        if not results:
            self._put(base + _ALLOWED)
            return
        keys = self._constraints.keys
        lines = [
            b"".join(
                (
                    base,
                    b",",
                    keys(policies, r.constraint_kind, r.constraint_name, r.action.value),
                    b',"message":',
                    orjson.dumps(r.message),
                    b"}",
                )
            )
            for r in results
        ]
        self._put(b"\n".join(lines))

    def error(self, raw: Mapping[str, object], message: str, *, allowed: bool) -> None:
        """A request answered by the failure mode (the policies could not decide)."""
        own = orjson.dumps({"eventType": "error", **_NO_CONSTRAINT, "message": message})
        self._put(self._base(raw, allowed) + b"," + own[1:])

    def _base(self, raw: Mapping[str, object], allowed: bool) -> bytes:
        """The keys of the request, as JSON without its closing brace."""
        kind = raw.get("kind")
        kind = kind if isinstance(kind, dict) else {}
        user = raw.get("userInfo")
        user = user if isinstance(user, dict) else {}
        obj = raw.get("object")
        if not isinstance(obj, dict):
            obj = raw.get("oldObject")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        labels = meta.get("labels")
        name = _text(raw.get("name")) or _text(meta.get("name"))
        base = {
            "id": _text(raw.get("uid")),
            "time": rfc3339(self.clock()),
            "process": "admission",
            "pod": self.pod,
            "operation": _text(raw.get("operation")),
            "user": _text(user.get("username")),
            "dryRun": raw.get("dryRun") is True,
            "allowed": allowed,
            "resourceGroup": _text(kind.get("group")),
            "resourceAPIVersion": _text(kind.get("version")),
            "resourceKind": _text(kind.get("kind")),
            "resourceNamespace": _text(raw.get("namespace")),
            "resourceName": name,
            "resourceLabels": labels if isinstance(labels, dict) else None,
        }
        return orjson.dumps(base)[:-1]

    def _put(self, lines: bytes) -> None:
        """One decision's lines (joined by newlines), or none when the buffer cannot take them."""
        size = len(lines) + 1
        with self._lock:
            dropped = self._bytes + size > self.buffer_bytes
            if dropped:
                count = lines.count(b"\n") + 1
                self.dropped += count
            else:
                self._lines.append(lines)
                self._bytes += size
            filling = self._bytes > self.buffer_bytes // 2
        if filling:
            self._wake.set()  # write now rather than at the next interval
        if dropped and self.counter is not None:
            self.counter.count_export("dropped", count)
        if self._writer is None:
            self._ensure_writer()

    # -- the writer thread -------------------------------------------------------------------------------
    def _ensure_writer(self) -> None:
        if self._writer is not None:
            return
        with self._lock:
            if self._writer is not None:
                return
            self._writer = threading.Thread(
                target=_write_loop,
                args=(weakref.ref(self), self._stop, self._wake),
                name="decision-export",
                daemon=True,
            )
            self._writer.start()
        atexit.register(_close_at_exit, weakref.ref(self))

    def flush(self) -> None:
        """Write every line waiting (the writer thread's work; also at close)."""
        with self._lock:
            entries, self._lines = self._lines, collections.deque()
            self._bytes = 0
        if not entries:
            return
        self._unsettled, self._settled = _lines_in(entries), (0, 0)
        written = failed = 0
        chunk: list[bytes] = []
        size = 0
        for piece in _lines(entries, self._chunk):
            if chunk and size + len(piece) + 1 > self._chunk:
                data = b"\n".join(chunk) + b"\n"
                if self._write(data):
                    written += data.count(b"\n")
                else:
                    failed += data.count(b"\n")
                self._settled = (written, failed)
                chunk, size = [], 0
            chunk.append(piece)
            size += len(piece) + 1
        if chunk:
            data = b"\n".join(chunk) + b"\n"
            if self._write(data):
                written += data.count(b"\n")
            else:
                failed += data.count(b"\n")
        with self._lock:
            if self._abandoned:  # close() gave up on this flush and counted its lines
                return
            self._unsettled, self._settled = 0, (0, 0)
        self.written += written
        self.failed += failed
        if self.counter is not None:
            if written:
                self.counter.count_export("written", written)
            if failed:
                self.counter.count_export("failed", failed)

    def _abandon(self) -> None:
        """The writer thread is stuck in a write: the lines its flush wrote so far are counted, every line
        not written yet (waiting, or in that flush) is counted as dropped."""
        with self._lock:
            self._abandoned = True
            entries, self._lines = self._lines, collections.deque()
            self._bytes = 0
            written, failed = self._settled
            count = _lines_in(entries) + self._unsettled - written - failed
            self.dropped += count
        self.written += written
        self.failed += failed
        if self.counter is not None:
            for result, lines in (("written", written), ("failed", failed), ("dropped", count)):
                if lines:
                    self.counter.count_export(result, lines)

    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as err:
                now = time.monotonic()
                if now - self._last_failure_log >= FAILURE_LOG_INTERVAL:
                    self._last_failure_log = now
                    log.error(
                        "cannot export decisions to %s: %s", self.target, os.strerror(err.errno or errno.EIO)
                    )
                return False
            view = view[n:]
        return True

    def close(self) -> None:
        """Write what is waiting and stop the thread (the file is closed; stdout is left open). An output
        still blocked after CLOSE_WAIT (the writer thread stuck in a write) does not hold the process: the
        lines waiting are dropped and counted, and the file is left to the process's exit."""
        self._stop.set()
        self._wake.set()
        writer = self._writer
        if writer is not None and writer is not threading.current_thread():
            writer.join(timeout=CLOSE_WAIT)
            if writer.is_alive():
                self._abandon()
                return
        self.flush()
        if self._owned and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


_NO_CONSTRAINT = {"group": "", "version": "", "kind": "", "name": "", "enforcementAction": "", "message": ""}
_ALLOWED = b"," + orjson.dumps({"eventType": "allowed", **_NO_CONSTRAINT})[1:]


def _lines(entries: Iterable[bytes], chunk: int) -> Iterator[bytes]:
    """Each line of the entries; an entry that fits a chunk whole stays one piece (several lines)."""
    for entry in entries:
        if len(entry) < chunk:
            yield entry
        else:
            yield from entry.split(b"\n")


def _write_loop(
    ref: Callable[[], DecisionExport | None], stop: threading.Event, wake: threading.Event
) -> None:
    while not stop.is_set():
        wake.wait(FLUSH_INTERVAL)
        wake.clear()
        export = ref()
        if export is None:
            return
        try:
            export.flush()
        except Exception:  # never silently, never the end of the export
            log.exception("exporting decisions failed")
        del export


def _close_at_exit(ref: Callable[[], DecisionExport | None]) -> None:
    export = ref()
    if export is not None:
        export.close()


def _lines_in(entries: Iterable[bytes]) -> int:
    """The lines the waiting entries hold (an entry is one line or several joined by newlines)."""
    return sum(entry.count(b"\n") + 1 for entry in entries)
