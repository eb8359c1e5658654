"""celkeeper's native library (Go, built from celkeeper/native/go), loaded with ctypes: the one module
that calls it. Each capability of the library (k8scel: Kubernetes' CEL; mutation: Gatekeeper's mutators;
admissionpolicy: Kubernetes' admission policy plugins) has its typed wrappers here; the Python package of
the capability (celkeeper.cel.celgo for k8scel, celkeeper.mutation for mutation, celkeeper.admissionpolicy
for admissionpolicy) builds on them.

The Go runtime does not survive `fork`: a process that has loaded the library must not fork and go
on using it. `load()` therefore loads the library lazily, in the process that evaluates (each
Gunicorn worker after its fork, the informer), records the process id, and every call checks it:
a forked child that reaches the library gets `ForkedLibraryError` rather than a hang or a crash
inside the Go runtime. A fork after loading is also reported on stderr at once (os.register_at_fork).

The library is process-wide state by nature (dlopen): `load()` keeps the one instance of the process.
It loads the variant of the library with every capability, unless the process asked for one with fewer
(`prefer`) before: a webhook worker that evaluates no admission policy loads Gatekeeper's capabilities
alone (celkeeper/native/locate.py), and a call to the capability it lacks raises LibraryUnavailable.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from celkeeper.native.locate import FULL, Variant, find_library

if TYPE_CHECKING:
    import orjson
else:  # imported by Library.__init__ once the library is open: see _import_orjson
    orjson = None


class LibraryUnavailable(RuntimeError):
    """The native library cannot be loaded (not built, or not loadable here)."""


class ForkedLibraryError(RuntimeError):
    """The library was loaded in a parent process; the Go runtime does not survive fork."""


_c_char_pp = ctypes.POINTER(ctypes.POINTER(ctypes.c_char))
_c_int_p = ctypes.POINTER(ctypes.c_int)


def pack_handle(handle: int) -> bytes:
    """A handle as `Library.validate` takes it (a native int64; handles are joined into one bytes)."""
    return int(handle).to_bytes(8, sys.byteorder, signed=True)


#: the timer slack (ns) of the Go runtime's own threads (see `_go_timer_slack`)
GO_TIMER_SLACK_NS = 5_000_000
_PR_SET_TIMERSLACK, _PR_GET_TIMERSLACK = 29, 30


@contextmanager
def _go_timer_slack(slack_ns: int) -> Iterator[None]:
    """Load the library with this thread's timer slack at `slack_ns` (Linux prctl; elsewhere nothing).

    Go's sysmon thread, woken each time a call enters the library, polls every 20 us while Go code
    runs: with Linux's default 50 us timer slack, ~3.5 wake-ups of another thread per webhook review
    (~1,500/s per worker under load, ~60 us of CPU per review on the other core). A thread inherits
    its creator's slack, and the runtime's threads descend from the one that loads the library:
    loading it with a 5 ms slack lets those short sleeps last up to 5 ms (sysmon sleeps up to 10 ms
    when idle anyway; Go timers may fire up to 5 ms late, nothing the engine's deadlines of seconds
    notice). This thread's own slack is restored at once. docs/known-issues.md: Go's sysmon."""
    prctl = _libc_prctl()
    before = prctl(_PR_GET_TIMERSLACK, 0, 0, 0, 0) if prctl is not None and slack_ns > 0 else -1
    if before >= 0:
        prctl(_PR_SET_TIMERSLACK, slack_ns, 0, 0, 0)
    try:
        yield
    finally:
        if before >= 0:
            prctl(_PR_SET_TIMERSLACK, before, 0, 0, 0)


def _libc_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return prctl


#: how ctypes.CDLL opens a library on Linux (RTLD_LOCAL, and RTLD_NOW: ctypes adds it)
_RTLD_CTYPES = getattr(os, "RTLD_NOW", 2) | getattr(os, "RTLD_LOCAL", 0)


def _dlopen_without_gil(path: str) -> int:
    """Open the library with libc's dlopen called as a ctypes foreign function, which releases the GIL
    while it runs, so that ctypes.CDLL then finds the library loaded (the same handle, opened with its
    flags) and returns at once. ctypes.CDLL's own dlopen keeps the GIL while the dynamic loader
    relocates the library (~20 ms, ~350,000 relocations): the command's imports, on the main thread
    while the library preloads on another (cli/main.py PRELOAD), stopped for that long. 0 when libc's
    dlopen cannot be called or fails: ctypes.CDLL then opens it (and words the error)."""
    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError):
        return 0
    dlopen.restype = ctypes.c_void_p
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return int(dlopen(os.fsencode(path), _RTLD_CTYPES) or 0)


def _import_orjson() -> None:
    """Import orjson, which every call's reply is read with, as the module's `orjson`. The library is
    opened first: its Go runtime initialises on threads of its own from the dlopen on, while this thread
    imports orjson (~8 ms: it imports datetime, uuid, dataclasses and json), rather than after it; in a
    command that loads the library at its start (cli/main.py PRELOAD) that is ~20 ms sooner."""
    global orjson
    if orjson is None:
        import orjson as module

        orjson = module


_MADV_DONTNEED = 4


def _libc_madvise() -> Any:
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.restype = ctypes.c_int
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return madvise


def _readonly_file_mappings(path: str) -> Iterator[tuple[int, int, int]]:
    """(start, end, resident bytes) of each mapping of the file at `path` in this process that is not
    writable and holds no private (anonymous) page, from /proc/self/smaps."""
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return
    start = end = resident = 0
    ours = False
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if "-" in head and not head.endswith(":"):  # a mapping: range perms offset dev inode path
            fields = rest.split(None, 4)
            low, _, high = head.partition("-")
            start, end = int(low, 16), int(high, 16)
            ours = len(fields) == 5 and fields[4] == path and "w" not in fields[0]
            resident = 0
        elif ours and head == "Rss:":
            resident = int(rest.split()[0]) * 1024
        elif ours and head == "Anonymous:" and int(rest.split()[0]) == 0:
            yield start, end, resident


class Library:
    """The loaded library: thin, typed wrappers of its exported functions."""

    def __init__(self, path: Path, go_timer_slack_ns: int = GO_TIMER_SLACK_NS) -> None:
        try:
            with _go_timer_slack(go_timer_slack_ns):
                _dlopen_without_gil(str(path))
                dll = ctypes.CDLL(str(path))
        except OSError as err:
            raise LibraryUnavailable(f"cannot load celkeeper's native library {path}: {err}") from err
        _import_orjson()
        self.path = path
        self.pid = _process_id
        self._dll = dll
        #: whether this build has the admissionpolicy capability (locate.GATEKEEPER's has not)
        self.admission_policies = hasattr(dll, "admissionpolicy_set")
        ll, i, p, out, outn = ctypes.c_longlong, ctypes.c_int, ctypes.c_char_p, _c_char_pp, _c_int_p
        self._sig(dll.native_free, None, [ctypes.c_void_p])
        self._sig(dll.native_release, None, [ll])
        self._sig(dll.native_info, None, [out, outn])
        self._sig(dll.native_trim, None, [])
        self._sig(dll.native_collect, None, [])
        self._sig(dll.native_set_gc_percent, ctypes.c_int, [ctypes.c_int])
        self._sig(dll.k8scel_template, ll, [p, i, p, i, out, outn])
        self._sig(dll.k8scel_compilers, None, [i])
        self._sig(dll.k8scel_store_open, ll, [p, i, i, out, outn])
        self._sig(dll.k8scel_store_close, None, [ll])
        self._sig(dll.k8scel_constraint, ll, [ll, p, i, out, outn])
        # the constraints' handles as packed int64s (bytes): no ctypes array to make per call
        self._sig(dll.k8scel_validate, i, [p, i, p, i, p, i, p, i, ll, p, i, ll, out, outn])
        self._sig(dll.k8scel_explain, i, [p, i, p, i, p, i, p, i, ll, p, i, ll, out, outn])
        self._sig(dll.k8scel_expression, ll, [p, i, out, outn])
        self._sig(dll.k8scel_evaluate, i, [ll, p, i, ll, out, outn])
        self._sig(dll.mutation_system, ll, [p, i, out, outn])
        self._sig(dll.mutation_upsert, ll, [ll, p, i, out, outn])
        self._sig(dll.mutation_remove, ll, [ll, p, i, out, outn])
        self._sig(dll.mutation_statuses, ll, [ll, out, outn])
        self._sig(dll.mutation_mutate, ll, [ll, p, i, p, i, out, outn])
        self._sig(dll.mutation_object, ll, [ll, p, i, out, outn])
        self._sig(dll.mutation_expand_output, ll, [p, i, out, outn])
        if not self.admission_policies:
            return
        self._sig(dll.admissionpolicy_set, ll, [p, i, out, outn])
        self._sig(dll.admissionpolicy_review, i, [ll, p, i, ll, out, outn])
        self._sig(dll.admissionpolicy_review_batch, i, [ll, p, i, ll, out, outn])
        self._sig(dll.admissionpolicy_explain, i, [ll, p, i, ll, out, outn])
        self._sig(dll.admissionpolicy_mutate, ll, [ll, p, i, ll, out, outn])
        self._sig(dll.admissionpolicy_mutate_continue, i, [ll, p, i, out, outn])

    @staticmethod
    def _sig(fn: Any, restype: Any, argtypes: list[Any]) -> None:
        fn.restype = restype
        fn.argtypes = argtypes

    @property
    def ours(self) -> bool:
        """Whether this process loaded the library (not a child forked after it did)."""
        return _process_id == self.pid

    def check(self) -> None:
        if not self.ours:
            raise ForkedLibraryError(
                f"celkeeper's native library was loaded by process {self.pid} before it forked; the Go "
                "runtime does not survive fork: load it in the child (celkeeper loads engines lazily)"
            )

    def _take(self, out: Any, n: ctypes.c_int) -> bytes:
        try:
            return ctypes.string_at(out, n.value)
        finally:
            self._dll.native_free(out)

    def _reply(self) -> tuple[Any, ctypes.c_int]:
        return ctypes.POINTER(ctypes.c_char)(), ctypes.c_int(0)

    def info(self) -> dict[str, Any]:
        """The library's versions, its Go runtime's memory figures and settings, and `handles`: how
        many compiled or bound things it holds (not released)."""
        self.check()
        out, n = self._reply()
        self._dll.native_info(ctypes.byref(out), ctypes.byref(n))
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return data

    def trim(self) -> None:
        """Collect the Go heap's garbage now and give the memory it does not use back to the system."""
        self.check()
        self._dll.native_trim()

    def set_gc_percent(self, percent: int) -> int:
        """Set the Go collector's GOGC (negative: off); returns the previous setting. GOGC in the
        environment reaches the library only as the process started with it: Go reads the environment
        of the process's start, not what the process sets in it later (os.environ)."""
        self.check()
        return int(self._dll.native_set_gc_percent(percent))

    def template(self, source: bytes, options: bytes = b"") -> tuple[int, dict[str, Any]]:
        self.check()
        out, n = self._reply()
        handle = self._dll.k8scel_template(
            source, len(source), options, len(options), ctypes.byref(out), ctypes.byref(n)
        )
        return int(handle), orjson.loads(self._take(out, n))

    def compilers(self, n: int) -> None:
        """Let up to n templates compile at once (`template` from n threads): the library makes and warms
        the compilers this needs in the background (each ~1 MB; a process keeps one otherwise)."""
        self.check()
        self._dll.k8scel_compilers(n)

    def store_open(self, path: bytes, max_conns: int) -> tuple[int, dict[str, Any]]:
        self.check()
        out, n = self._reply()
        handle = self._dll.k8scel_store_open(path, len(path), max_conns, ctypes.byref(out), ctypes.byref(n))
        return int(handle), orjson.loads(self._take(out, n))

    def store_close(self, handle: int) -> None:
        if self.ours:
            self._dll.k8scel_store_close(handle)

    def constraint(self, template: int, document: bytes) -> tuple[int, dict[str, Any]]:
        self.check()
        out, n = self._reply()
        handle = self._dll.k8scel_constraint(
            template, document, len(document), ctypes.byref(out), ctypes.byref(n)
        )
        return int(handle), orjson.loads(self._take(out, n))

    def validate(  # noqa: PLR0917
        self,
        header: bytes,
        object_json: bytes,
        old_object_json: bytes,
        namespace_json: bytes,
        constraints: bytes,
        timeout_ns: int,
        store: int = 0,
        *,
        explain: bool = False,
    ) -> Any:
        """`constraints`: the constraints' handles, each packed as a native int64 (`pack_handles`).
        k8scel_validate, or with `explain` k8scel_explain (the same decisions and every part's trace)."""
        self.check()
        out, n = self._reply()
        call = self._dll.k8scel_explain if explain else self._dll.k8scel_validate
        call(
            header,
            len(header),
            object_json,
            len(object_json),
            old_object_json,
            len(old_object_json),
            namespace_json,
            len(namespace_json),
            store,
            constraints,
            len(constraints) // 8,
            timeout_ns,
            ctypes.byref(out),
            ctypes.byref(n),
        )
        return orjson.loads(self._take(out, n))

    def expression(self, request: bytes) -> tuple[int, dict[str, Any]]:
        self.check()
        out, n = self._reply()
        handle = self._dll.k8scel_expression(request, len(request), ctypes.byref(out), ctypes.byref(n))
        return int(handle), orjson.loads(self._take(out, n))

    def evaluate(self, handle: int, inputs: bytes, timeout_ns: int) -> Any:
        self.check()
        out, n = self._reply()
        self._dll.k8scel_evaluate(handle, inputs, len(inputs), timeout_ns, ctypes.byref(out), ctypes.byref(n))
        return orjson.loads(self._take(out, n))

    # mutation: Gatekeeper's mutators (native/go/mutation, export_mutation.go)

    def mutation_system(self, options: bytes) -> tuple[int, dict[str, Any]]:
        """An empty set of mutators with the webhook's options (mutation.Options as JSON)."""
        self.check()
        out, n = self._reply()
        handle = self._dll.mutation_system(options, len(options), ctypes.byref(out), ctypes.byref(n))
        return int(handle), orjson.loads(self._take(out, n))

    def mutation_upsert(self, system: int, document: bytes) -> tuple[bool, dict[str, Any]]:
        """Read a mutator document (JSON) and upsert it into the set (`system` 0: only read it).
        True when it is in the set (a schema conflict in "conflict"); False when refused ("refused")."""
        self.check()
        out, n = self._reply()
        done = self._dll.mutation_upsert(system, document, len(document), ctypes.byref(out), ctypes.byref(n))
        return bool(done), orjson.loads(self._take(out, n))

    def mutation_remove(self, system: int, mutator_id: bytes) -> dict[str, Any]:
        """Take the mutator {"kind", "name"} out of the set."""
        self.check()
        out, n = self._reply()
        self._dll.mutation_remove(system, mutator_id, len(mutator_id), ctypes.byref(out), ctypes.byref(n))
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return data

    def mutation_statuses(self, system: int) -> dict[str, Any]:
        """The set's mutators in Gatekeeper's order, with their schema conflicts."""
        self.check()
        out, n = self._reply()
        self._dll.mutation_statuses(system, ctypes.byref(out), ctypes.byref(n))
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return data

    def mutation_mutate(self, system: int, request: bytes, obj: bytes = b"") -> dict[str, Any]:
        """Gatekeeper's mutation webhook's answer to a request (mutation.Request as JSON); `obj`, when not
        empty, the AdmissionRequest's object (JSON) in place of the request's "object"."""
        self.check()
        out, n = self._reply()
        self._dll.mutation_mutate(
            system, request, len(request), obj, len(obj), ctypes.byref(out), ctypes.byref(n)
        )
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return data

    def mutation_object(self, system: int, request: bytes) -> dict[str, Any]:
        """An object mutated as Gatekeeper's expansion mutates one (mutation.ObjectRequest)."""
        self.check()
        out, n = self._reply()
        self._dll.mutation_object(system, request, len(request), ctypes.byref(out), ctypes.byref(n))
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return data

    def mutation_expand_output(self, request: bytes) -> tuple[bool, dict[str, Any]]:
        """Resultants ({"objects", "format"}) as `gator expand` prints them: (True, {"text"}) or (False,
        {"error"})."""
        self.check()
        out, n = self._reply()
        done = self._dll.mutation_expand_output(request, len(request), ctypes.byref(out), ctypes.byref(n))
        data: dict[str, Any] = orjson.loads(self._take(out, n))
        return bool(done), data

    # -- admissionpolicy: Kubernetes' ValidatingAdmissionPolicy and MutatingAdmissionPolicy plugins -------
    def admission_policy_set(self, documents: bytes) -> tuple[int, dict[str, Any]]:
        """admissionpolicy_set: a policy set from {"policies", "params", "namespaces", "crds"} (JSON);
        its handle (0 on error) and the reply (problems, policies, or error). Raises LibraryUnavailable
        in a process that loaded the library without admission policies (`prefer`)."""
        self.check()
        if not self.admission_policies:
            raise LibraryUnavailable(
                f"this process loaded celkeeper's native library without Kubernetes' admission policies "
                f"({self.path.name}): it cannot evaluate them"
            )
        out, n = self._reply()
        handle = self._dll.admissionpolicy_set(documents, len(documents), ctypes.byref(out), ctypes.byref(n))
        return int(handle), orjson.loads(self._take(out, n))

    def admission_policy_review(self, handle: int, request: bytes, timeout_ns: int) -> Any:
        """admissionpolicy_review: {"response": ...} or {"error": ..., "request": bool}."""
        self.check()
        out, n = self._reply()
        self._dll.admissionpolicy_review(
            handle, request, len(request), timeout_ns, ctypes.byref(out), ctypes.byref(n)
        )
        return orjson.loads(self._take(out, n))

    def admission_policy_explain(self, handle: int, request: bytes, timeout_ns: int) -> Any:
        """admissionpolicy_explain: {"explanation": ...} or {"error": ..., "request": bool}."""
        self.check()
        out, n = self._reply()
        self._dll.admissionpolicy_explain(
            handle, request, len(request), timeout_ns, ctypes.byref(out), ctypes.byref(n)
        )
        return orjson.loads(self._take(out, n))

    def admission_policy_review_batch(self, handle: int, requests: bytes, timeout_ns: int) -> Any:
        """admissionpolicy_review_batch: the requests (a JSON array) answered on every core, a list of
        replies in order (each as admission_policy_review's), or {"error": ...}."""
        self.check()
        out, n = self._reply()
        self._dll.admissionpolicy_review_batch(
            handle, requests, len(requests), timeout_ns, ctypes.byref(out), ctypes.byref(n)
        )
        return orjson.loads(self._take(out, n))

    def admission_policy_mutate(self, handle: int, request: bytes, timeout_ns: int) -> tuple[int, Any]:
        """admissionpolicy_mutate: (a Mutation's handle, {"object": ...}) when the chain waits at the
        webhook; (0, {"response": ...}) when it ended before; (-1, {"error": ..., "request": bool})."""
        self.check()
        out, n = self._reply()
        found = self._dll.admissionpolicy_mutate(
            handle, request, len(request), timeout_ns, ctypes.byref(out), ctypes.byref(n)
        )
        return int(found), orjson.loads(self._take(out, n))

    def admission_policy_mutate_continue(self, mutation: int, patch: bytes) -> Any:
        """admissionpolicy_mutate_continue: the webhook's JSONPatch given, {"response": ...} or
        {"error": ...}. Release the Mutation's handle after."""
        self.check()
        out, n = self._reply()
        self._dll.admissionpolicy_mutate_continue(
            mutation, patch, len(patch), ctypes.byref(out), ctypes.byref(n)
        )
        return orjson.loads(self._take(out, n))

    def release(self, handle: int) -> None:
        """Free a handle; nothing in a forked child (the parent's runtime is not ours to call)."""
        if self.ours:
            self._dll.native_release(handle)

    def release_file_pages(self) -> int:
        """Unmap from this process the pages of the library's file that it has mapped and that hold no
        data of its own: its code and read-only data (`madvise(MADV_DONTNEED)` on each of the library's
        mappings that is not writable and has no private page). Returns the bytes of those mappings
        that were resident. Nothing is lost: the pages stay in the page cache (shared with every
        process that maps the file, reclaimable), and those this process uses again come back on their
        first access (a minor fault each). Relocated read-only data (private pages, written by the
        dynamic loader) and writable data are left alone. Linux only (elsewhere nothing). A whole
        collection runs first (native_collect), so no mark worker maps pages again as they go.

        Why: the library's initialisation, and compiling, touch code and data that evaluating does not,
        and Linux maps a file's pages around each one faulted in (fault-around, whole large folios): a
        process that has loaded the library and compiled policies keeps ~50-60 MiB of the 110 MB file
        mapped, of which ~6-11 MiB are used while it serves or idles (docs/performance.md)."""
        if not self.ours or not sys.platform.startswith("linux"):
            return 0
        madvise = _libc_madvise()
        if madvise is None:
            return 0
        # a collection in progress (compiling's garbage) reads the library's type data and function
        # tables and would map their pages again as they are released: let it finish first
        self._dll.native_collect()
        released = 0
        for start, end, resident in _readonly_file_mappings(os.path.realpath(self.path)):
            if resident and madvise(start, end - start, _MADV_DONTNEED) == 0:
                released += resident
        return released


_lock = threading.Lock()
_loaded: Library | None = None
#: this process's id, kept by a fork hook: `Library.check` runs before every call, and os.getpid() is a
#: system call (glibc does not cache it)
_process_id = os.getpid()


def _forked() -> None:
    global _process_id
    _process_id = os.getpid()


os.register_at_fork(after_in_child=_forked)


#: the variant of the library this process loads (`prefer`)
_variant: Variant = FULL


def prefer(variant: Variant) -> None:
    """Load `variant` of the library (locate.VARIANTS) when this process first loads it: a process that
    will evaluate no admission policy (a webhook worker without --enforce-admission-policies) prefers
    locate.GATEKEEPER, which holds less memory (docs/performance.md). Nothing once it is loaded."""
    global _variant
    with _lock:
        _variant = variant


def load() -> Library:
    """The process's library, loaded on first use. Raises LibraryUnavailable."""
    global _loaded
    with _lock:
        if _loaded is None:
            path, why = find_library(_variant)
            if path is None:
                raise LibraryUnavailable(why)
            _loaded = Library(path)
        _loaded.check()
        return _loaded


def install(library: Library) -> None:
    """Make `library` the process's library (what `load()` returns): one that runs elsewhere, e.g. in a
    child process of its own (celkeeper.informer.libraryprocess). Before the process loads its own."""
    global _loaded
    with _lock:
        if _loaded is not None and _loaded.ours:
            raise RuntimeError("this process has loaded celkeeper's native library already")
        _loaded = library


def trim() -> None:
    """Library.trim, when this process has loaded the library (nothing otherwise)."""
    if _loaded is not None and _loaded.ours:
        _loaded.trim()


def release_file_pages() -> int:
    """Library.release_file_pages, when this process has loaded the library (0 otherwise)."""
    if _loaded is not None and _loaded.ours:
        return _loaded.release_file_pages()
    return 0


def available() -> tuple[bool, str]:
    """Whether `load()` can succeed here (without loading), and why not."""
    if _loaded is not None:
        return True, ""
    path, why = find_library(_variant)
    return path is not None, why
