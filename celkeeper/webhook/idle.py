"""A worker that has gone idle gives its Go heap's free memory back to the system.

The native library's collector runs at GOGC=400 (native/go/gcpercent): while reviews come, the Go heap
grows to about five times what is live between two collections, and Go's scavenger keeps about a tenth
more than that goal (a worker after 50,000 reviews: ~10 MB live, a goal of 49-57 MB, 64-71 MiB of the
heap retained; docs/performance.md, "Where a webhook pod's memory goes"). Once the reviews stop, nothing
collects or returns it: an idle worker would keep what its last burst took until the next one.

`IdleTrim` watches the worker's request count from a thread of its own: when it has not moved for
`after` seconds and at least `least` requests were answered since the last trim, it calls `trim` once
(`ffi.trim`: a collection, then every free page returned: `debug.FreeOSMemory`). Nothing runs on the
request path (it reads a counter the worker keeps anyway), and a worker under a steady load is never
idle long enough: only the end of a burst pays a collection, which the heap would otherwise have held.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("celkeeper.webhook")

#: seconds without a request before the worker's free Go memory is returned
IDLE_AFTER = 2.0
#: requests answered since the last return, at least (readiness probes alone allocate next to nothing)
IDLE_LEAST = 256


class IdleTrim:
    """`tick()` every `after` seconds (`start`: on a daemon thread): trims once per idle period."""

    def __init__(
        self,
        count: Callable[[], int],
        trim: Callable[[], None],
        *,
        after: float = IDLE_AFTER,
        least: int = IDLE_LEAST,
    ) -> None:
        self.count = count
        self.trim = trim
        self.after = after
        self.least = least
        self.trims = 0  # how many times it returned memory (for logs and tests)
        self._seen = count()  # the count at the last tick
        self._trimmed = self._seen  # the count at the last trim
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """One look at the count (`after` seconds after the last): True when it trimmed."""
        now = self.count()
        idle = now == self._seen
        self._seen = now
        if not idle or now - self._trimmed < self.least:
            return False
        self._trimmed = now
        self.trim()
        self.trims += 1
        return True

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="idle-trim", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.after):
            try:
                self.tick()
            except Exception:  # a failed trim must not end the thread: the next idle period tries again
                log.exception("could not return the idle worker's memory")
