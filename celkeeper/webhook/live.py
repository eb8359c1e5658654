"""A worker's current policies: loaded from the published snapshot, replaced when a new one appears.

    live = LivePolicies(state, settings)
    live.refresh()            # one stat(); reads and compiles only when the snapshot changed
    live.start(interval)      # a daemon thread that refreshes every `interval` seconds
    live.current              # Loaded | None: immutable, safe to use from any thread
    live.ready                # has loaded and compiled a snapshot the source marked complete

Rebuilding reuses this worker's TemplateCompiler and DocumentCache: only templates whose content
changed are compiled again, only texts that changed are parsed again. A snapshot that cannot be
read or built leaves the last good policies in place. After each load the worker writes its status
file (generation loaded, readiness), which the master removes when the worker exits.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from celkeeper.model import JsonValue
from celkeeper.native.ffi import release_file_pages
from celkeeper.review import NamespaceLookup, inventory_lookup
from celkeeper.settings import Settings
from celkeeper.snapshot import Snapshot, SnapshotReadError, SnapshotStore, StateDir, WorkerBoard, WorkerStatus
from celkeeper.snapshot.documents import DocumentCache

if TYPE_CHECKING:
    from celkeeper.admissionpolicy import AdmissionPolicies
    from celkeeper.cel import Inventory
    from celkeeper.policy import PolicySet, TemplateCompiler
    from celkeeper.review import SyncedData

log = logging.getLogger("celkeeper.webhook")


@dataclass(frozen=True)
class Loaded:
    generation: int
    created: float  # when the informer published it
    loaded_at: float
    synced: bool
    policies: PolicySet
    namespaces: Mapping[str, Mapping[str, JsonValue]]
    namespaces_complete: bool
    problems: tuple[str, ...]  # source problems, parse errors, template and constraint errors
    held: tuple[str, ...] = ()  # sources enforced at their last good version (fail-static)
    # what templates that read synced data read: the store (opened by this worker's engine) and the
    # kinds synced (None when no template reads synced data)
    data: SyncedData | None = None
    synced_kinds: tuple[str, ...] = ()
    # Kubernetes' admission policies the webhook enforces (--enforce-admission-policies; None: none)
    admission: AdmissionPolicies | None = None
    _lookup: NamespaceLookup = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_lookup", inventory_lookup(self.namespaces, self.namespaces_complete))

    def namespace(self, name: str) -> Mapping[str, JsonValue] | None:
        """The Namespace object by name. Without a complete inventory (a policy folder), a namespace
        not listed is one with no labels but the one Kubernetes sets on every namespace."""
        return self._lookup(name)


class LivePolicies:
    def __init__(
        self,
        state: StateDir,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        on_load: Callable[[bool], None] | None = None,
        freeze_gc: bool = False,
    ) -> None:
        self.settings = settings
        self.freeze_gc = freeze_gc
        self.store = SnapshotStore(state.snapshot)
        self.board = WorkerBoard(state.workers)
        self.data_path = state.data
        # the data store, opened by the engine when a template reads it
        self._inventory: Inventory | None = None
        self.clock = clock
        self.on_load = on_load
        self.pid = os.getpid()
        self._documents = DocumentCache()
        self._compiler: TemplateCompiler | None = None
        self._lock = threading.Lock()
        self._stamp: object = None
        self._failed_stamp: object = None
        self._loaded: Loaded | None = None
        self._ready = False
        self.last_error = ""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._first = threading.Event()  # set once policies are in place

    @property
    def current(self) -> Loaded | None:
        return self._loaded

    @property
    def ready(self) -> bool:
        return self._ready

    def compiler(self) -> TemplateCompiler:
        """This worker's TemplateCompiler (made on first use; shared with the policy loads)."""
        return self._compiler_instance()

    def _compiler_instance(self) -> TemplateCompiler:
        if self._compiler is None:
            from celkeeper.cel import get_engine
            from celkeeper.policy import TemplateCompiler

            self._compiler = TemplateCompiler(get_engine(self.settings.engine, self.settings.limits))
        return self._compiler

    # -- loading ------------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Load the published snapshot if it changed since the last look. True when new policies
        were put in place. Cheap when nothing changed (one stat); never raises."""
        stamp = self.store.stamp()
        if stamp is None or stamp in (self._stamp, self._failed_stamp):
            return False
        if not self._lock.acquire(blocking=False):
            return False  # another thread is loading; requests keep the current policies
        try:
            return self._load()
        finally:
            self._lock.release()

    def _load(self) -> bool:
        try:
            stamp, snapshot = self.store.read()
        except SnapshotReadError as err:
            return self._failed(self.store.stamp(), str(err))
        previous = self._loaded
        if previous is not None and snapshot.generation == previous.generation:
            self._stamp = stamp  # the same generation published again
            return False
        if self.freeze_gc:
            gc.unfreeze()  # what the old policies left behind can be collected again
        try:
            from celkeeper.mutation import MutationOptions
            from celkeeper.policy import build_policy_set

            parsed = self._documents.policy_documents(snapshot.items)
            mutation = MutationOptions(
                annotations=self.settings.mutation_annotations, self_username=self.settings.self_username
            )
            policies = build_policy_set(parsed.documents, self._compiler_instance(), mutation)
            admission = self._admission_policies(snapshot)
        except Exception as err:
            log.exception(
                "worker %d could not build the policies of snapshot generation %d",
                self.pid,
                snapshot.generation,
            )
            return self._failed(stamp, f"cannot build generation {snapshot.generation}: {err}")
        problems = (
            *snapshot.problems,
            *(str(e) for e in parsed.errors),
            *(str(e) for e in policies.errors),
            *(str(e) for e in (admission.problems if admission is not None else ()) if _is_error(e)),
        )
        data = self._data(policies, snapshot.synced_kinds)
        loaded = Loaded(
            generation=snapshot.generation,
            created=snapshot.created,
            loaded_at=self.clock(),
            synced=snapshot.synced,
            policies=policies,
            namespaces=snapshot.namespaces,
            namespaces_complete=snapshot.namespaces_complete,
            problems=problems,
            held=snapshot.held,
            data=data,
            synced_kinds=snapshot.synced_kinds,
            admission=admission,
        )
        self._loaded = loaded  # one reference assignment: requests see the old set or the new one
        self._first.set()
        self._stamp, self._failed_stamp, self.last_error = stamp, None, ""
        if snapshot.synced:
            self._ready = True
        log.debug(
            "worker %d loaded snapshot generation %d: %d template(s), %d constraint(s), %d problem(s)",
            self.pid,
            loaded.generation,
            len(loaded.policies.templates),
            len(loaded.policies.constraints),
            len(problems),
        )
        if self.freeze_gc:
            # the policies live until the next snapshot: keep the cycle collector from scanning
            # them at every collection (fewer and shorter pauses in the request path)
            del previous, policies, parsed, admission
            gc.collect()
            gc.freeze()
        # the native library's code and data that loading ran (its initialisation, the compiler) are
        # unmapped; what evaluating uses comes back at its first use (ffi.release_file_pages)
        release_file_pages()
        self.write_status()
        if self.on_load is not None:
            self.on_load(True)
        return True

    def _admission_policies(self, snapshot: Snapshot) -> AdmissionPolicies | None:
        """The admission policies among the snapshot's documents, when the webhook enforces them and there
        are some (their parameter objects, CRDs and the snapshot's Namespaces with them); the previous
        set is released when the last request using it is answered."""
        if not self.settings.enforce_admission_policies:
            return None
        return self._documents.admission_policies(snapshot)

    def _data(self, policies: PolicySet, synced_kinds: tuple[str, ...]) -> SyncedData | None:
        """What the templates that read synced data read (None when none does). A store that cannot be
        opened gives them none: they fail under their failurePolicy (never a verdict on missing data)."""
        from celkeeper.cel import InventoryError
        from celkeeper.cel.inventory import Gvk
        from celkeeper.review import SyncedData

        if not any(t.reads_data for t in policies.templates.values()):
            return None
        if self._inventory is None:
            try:
                self._inventory = policies.engine.open_inventory(str(self.data_path))
            except InventoryError as err:
                log.warning("worker %d cannot read synced data: %s", self.pid, err)
                return SyncedData(None, frozenset())
        return SyncedData(self._inventory, frozenset(Gvk.parse(k) for k in synced_kinds))

    def _failed(self, stamp: object, message: str) -> bool:
        if stamp != self._failed_stamp:
            log.warning(
                "worker %d keeps snapshot generation %s: %s",
                self.pid,
                self._loaded.generation if self._loaded else "(none)",
                message,
            )
        self._failed_stamp, self.last_error = stamp, message
        self.write_status()
        if self.on_load is not None:
            self.on_load(False)
        return False

    def load_first(self, heartbeat: Callable[[], None] | None = None, interval: float = 1.0) -> None:
        """Load the published snapshot, if there is one, before serving. With `heartbeat`, the load
        runs in a thread while this one calls heartbeat() every `interval` seconds."""
        if heartbeat is None:
            self.refresh()
            return
        thread = threading.Thread(target=self.refresh, name="first-load", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(interval)
            heartbeat()

    def wait_loaded(self, timeout: float) -> Loaded | None:
        """The current policies; when there are none yet, wait up to `timeout` seconds for them."""
        if self._loaded is None and timeout > 0:
            self._first.wait(timeout)
        return self._loaded

    # -- status ---------------------------------------------------------------------------------------
    def status(self) -> WorkerStatus:
        loaded = self._loaded
        if loaded is None:
            return WorkerStatus(pid=self.pid, last_error=self.last_error)
        return WorkerStatus(
            pid=self.pid,
            generation=loaded.generation,
            ready=self._ready,
            loaded_at=loaded.loaded_at,
            snapshot_created=loaded.created,
            templates=len(loaded.policies.templates),
            constraints=len(loaded.policies.constraints),
            errors=len(loaded.problems),
            last_error=self.last_error,
        )

    def write_status(self) -> None:
        try:
            self.board.write(self.status())
        except OSError as err:
            log.warning("worker %d cannot write its status file: %s", self.pid, err)

    # -- watching ---------------------------------------------------------------------------------------
    def start(self, interval: float = 0.2) -> None:
        """Refresh every `interval` seconds in a daemon thread (started once, after the fork)."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.refresh()
                except Exception:  # refresh() does not raise; belt and braces for the thread
                    log.exception("snapshot watch failed")

        self._thread = threading.Thread(target=loop, name="snapshot-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def _is_error(problem: Exception) -> bool:
    """An admission policy problem the API server would refuse (not a note about what follows)."""
    from celkeeper.errors import AdmissionPolicyNote

    return not isinstance(problem, AdmissionPolicyNote)
