"""One thread that runs reconcilers: level-triggered, retried with back-off, resynced now and then.

    loop = ControllerLoop([crd_writer, aggregator, reporter]); loop.start(); loop.wake(); loop.stop()

A reconciler has a `dirty` flag (set by its watch handlers, which then call `wake()`), a `reconcile()`
that compares what is stored with what is wanted and writes the difference, and optionally `busy()`
(true while it waits for something it must poll, e.g. workers loading a snapshot) and `wake_in()`
(seconds after which it wants to run again, sooner than the resync; None: no wish). Reconcilers run
one after the other on this thread, so their writes never race each other inside one pod. A failing
reconcile is retried with exponential back-off; every reconciler also runs every `resync` seconds.

celkeeper's (celkeeper.incluster): the loop celkeeper's controllers run on; it touches no API itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from celkeeper.kube.backoff import doubling

log = logging.getLogger("celkeeper.incluster")


class Reconciler(Protocol):
    dirty: bool

    def reconcile(self) -> None: ...


class ControllerLoop:
    def __init__(
        self,
        reconcilers: Sequence[Reconciler],
        *,
        resync: float = 60.0,
        poll: float = 0.1,
        debounce: float = 0.05,
        min_backoff: float = 0.5,
        max_backoff: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reconcilers = list(reconcilers)
        self.resync = resync
        self.poll = poll
        self.debounce = debounce
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._due = [0.0] * len(self.reconcilers)
        self._failures = [0] * len(self.reconcilers)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="controllers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def wake(self) -> None:
        self._wake.set()

    def _busy(self) -> bool:
        return any(bool(getattr(r, "busy", lambda: False)()) for r in self.reconcilers)

    def _timeout(self) -> float:
        if self._busy() or any(r.dirty for r in self.reconcilers):
            return self.poll
        return max(0.0, min(self._due) - self.clock())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._timeout())
            self._wake.clear()
            if self._stop.is_set():
                return
            if self.debounce:
                time.sleep(self.debounce)  # let a burst of events (one kubectl apply -f dir) settle
            self.run_once()

    def run_once(self) -> None:
        """Run every reconciler that is dirty, busy or due (the loop's body; tests call it directly)."""
        for i, reconciler in enumerate(self.reconcilers):
            if self._stop.is_set():
                return
            now = self.clock()
            busy = bool(getattr(reconciler, "busy", lambda: False)())
            if not (reconciler.dirty or busy or now >= self._due[i]):
                continue
            reconciler.dirty = False
            try:
                reconciler.reconcile()
            except Exception as err:  # retried with back-off; a bug must not stop the other reconcilers
                self._failures[i] += 1
                delay = doubling(self.min_backoff, self.max_backoff, self._failures[i] - 1)
                self._due[i] = self.clock() + delay
                name = type(reconciler).__name__
                if self._failures[i] in (1, 5) or self._failures[i] % 20 == 0:
                    log.warning(
                        "%s failed (%d time(s) in a row), retrying in %.1fs: %s",
                        name,
                        self._failures[i],
                        delay,
                        err,
                        exc_info=not _expected(err),
                    )
                continue
            self._failures[i] = 0
            wish = getattr(reconciler, "wake_in", lambda: None)()
            self._due[i] = self.clock() + (self.resync if wish is None else min(self.resync, float(wish)))


def _expected(err: Exception) -> bool:
    from celkeeper.kube.client import ApiError

    return isinstance(err, ApiError)
