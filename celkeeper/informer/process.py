"""The informer as a process: what the Gunicorn master runs in the child it forks for it."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

from celkeeper.errors import CelkeeperError
from celkeeper.informer.libraryprocess import LibraryProcess
from celkeeper.informer.loop import Informer
from celkeeper.informer.source import Source
from celkeeper.native import ffi
from celkeeper.native.ffi import LibraryUnavailable
from celkeeper.native.locate import FULL, GATEKEEPER
from celkeeper.settings import Settings
from celkeeper.snapshot import StateDir

log = logging.getLogger("celkeeper.informer")

#: the Go collector's GOGC where the informer's library runs: it compiles policies and evaluates nothing,
#: so a small Go heap (the webhook workers' GOGC trades memory for the CPU of each decision; here there is
#: none to save), unless GOGC is set in the environment
INFORMER_GOGC = 50


def run_informer(
    source_factory: Callable[[], Source],
    state: StateDir,
    settings: Settings,
    parent_pid: int,
    interval: float = 1.0,
) -> int:
    """Run until SIGTERM/SIGQUIT or until the parent (the Gunicorn master) is gone.

    SIGINT is ignored: a Ctrl-C in a terminal reaches the whole process group, and the master
    stops the informer itself (after the workers)."""
    # what the master made before the fork stays as it is: out of the collector's sight, its pages stay
    # shared with the master (a collection writes to every object it visits, copying its page)
    gc.freeze()
    stop = threading.Event()
    with contextlib.suppress(OSError):
        os.nice(5)  # background work: requests (the workers) come first when the CPUs are busy
    install_library_process(admission_policies=settings.enforce_admission_policies)
    try:
        source = source_factory()
    except CelkeeperError as err:  # e.g. a kubeconfig that cannot be used: one line, no traceback
        log.error("informer cannot start: %s", err)
        return 1

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        source.close()

    for sig in (signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)

    def watch_parent() -> None:
        while not stop.wait(1.0):
            if os.getppid() != parent_pid:
                log.warning("informer: the server process %d is gone; exiting", parent_pid)
                stop.set()
                source.close()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    Informer(source, state, settings).run(stop, interval=interval)
    log.info("informer stopped (pid %d)", os.getpid())
    return 0


def install_library_process(admission_policies: bool) -> None:
    """The native library, when the informer checks with it, runs in a child process for each round that
    compiles (informer/libraryprocess.py): no Go runtime stays in the informer between rounds. Without
    `admission_policies` (the pod does not enforce them), the variant of the library without them."""
    try:
        library = LibraryProcess(
            gc_percent=None if os.environ.get("GOGC") else INFORMER_GOGC,
            variant=FULL if admission_policies else GATEKEEPER,
        )
    except LibraryUnavailable:
        return  # not built: the engine says so when the informer checks
    ffi.install(library)
