"""The library's own figures (native_info): the handles it holds are counted until released, beside its
Go runtime's memory and where it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from celkeeper.native.ffi import load
from tests.support.native import require_celgo

EXPRESSION = b'{"source": "object.metadata.name == \\"x\\"", "variables": []}'


def test_info_counts_the_handles_the_library_holds_until_released() -> None:
    require_celgo()
    library = load()
    before = library.info()["handles"]
    handle, answer = library.expression(EXPRESSION)
    assert handle > 0, answer
    assert library.info()["handles"] == before + 1
    library.release(handle)
    assert library.info()["handles"] == before


def test_info_reports_the_go_runtime_memory() -> None:
    require_celgo()
    info = load().info()
    assert info["runtimeMemory"] >= info["heapObjects"] > 0
    # where the runtime's memory is: every part within what it has mapped
    parts = ("released", "heapFree", "heapUnused", "stacks", "osStacks", "metadata", "spans", "other")
    assert all(0 <= info[p] <= info["runtimeMemory"] for p in parts), info
    assert info["heapObjects"] + sum(info[p] for p in parts) <= info["runtimeMemory"]
    assert info["heapGoal"] >= info["heapLive"] and info["heapGoal"] > 0
    assert info["goroutines"] >= 1 and info["collections"] >= 0


def test_info_counts_the_collections() -> None:
    require_celgo()
    library = load()
    before = library.info()["collections"]
    library.trim()  # debug.FreeOSMemory: one collection at least
    assert library.info()["collections"] > before


def _run(program: str) -> subprocess.CompletedProcess[str]:
    """`program` in a fresh Python process (its own library), its output captured."""
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=120
    )


def _load_in_child(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A fresh process that loads the library and prints its info (the Go runtime's traces on stderr)."""
    program = "import json; from celkeeper.native.ffi import load; print(json.dumps(load().info()))"
    clean = {k: v for k, v in os.environ.items() if k not in ("GOGC", "GODEBUG", "GOMAXPROCS")}
    return subprocess.run(
        [sys.executable, "-c", program],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_the_library_sets_its_gogc_unless_the_environment_does() -> None:
    require_celgo()
    assert json.loads(_load_in_child({}).stdout)["gcPercent"] == 400
    assert json.loads(_load_in_child({"GOGC": "150"}).stdout)["gcPercent"] == 150


def test_the_library_runs_four_processors_at_least_unless_the_environment_sets_them() -> None:
    """One dedicated mark worker for Go's collections (native/go/procs): four processors, or more where
    Go's default is more; the environment's GOMAXPROCS decides when set."""
    require_celgo()
    assert json.loads(_load_in_child({}).stdout)["gomaxprocs"] == max(4, len(os.sched_getaffinity(0)))
    assert json.loads(_load_in_child({"GOMAXPROCS": "2"}).stdout)["gomaxprocs"] == 2
    assert json.loads(_load_in_child({"GOMAXPROCS": "6"}).stdout)["gomaxprocs"] == 6


def test_a_gogc_set_through_the_library_takes_effect() -> None:
    """Go reads GOGC from the environment the process started with: one set in os.environ before the library
    loads does not reach it; set_gc_percent does."""
    require_celgo()
    program = (
        "import json, os; from celkeeper.native.ffi import load\n"
        "os.environ['GOGC'] = '50'\n"
        "library = load(); loaded = library.info()['gcPercent']\n"
        "previous = library.set_gc_percent(50)\n"
        "print(json.dumps([loaded, previous, library.info()['gcPercent']]))"
    )
    clean = {k: v for k, v in os.environ.items() if k != "GOGC"}
    done = subprocess.run(
        [sys.executable, "-c", program], env=clean, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == [400, 400, 50]


def test_no_collection_runs_while_the_library_initialises() -> None:
    """Its GOGC is set before the packages it imports initialise (their ~12 MB of allocations would
    cost three collections at Go's default): the runtime's trace shows no collection before the last
    package's init."""
    require_celgo()
    trace = _load_in_child({"GODEBUG": "inittrace=1,gctrace=1"}).stderr.splitlines()
    inits = [i for i, line in enumerate(trace) if line.startswith("init ")]
    collections = [i for i, line in enumerate(trace) if line.startswith("gc ")]
    assert any("celkeeper.local/native/gcpercent" in trace[i] for i in inits), trace[:20]
    assert inits and all(i > inits[-1] for i in collections), [trace[i] for i in collections]


def test_the_library_is_opened_by_libcs_dlopen_and_ctypes_takes_that_handle() -> None:
    """ffi opens the library with libc's dlopen as a foreign call (the GIL released while the loader
    relocates it), then ctypes.CDLL finds it open: the same handle, in a fresh process."""
    require_celgo()
    program = (
        "from celkeeper.native.ffi import Library, _dlopen_without_gil\n"
        "from celkeeper.native.locate import find_library\n"
        "path = find_library()[0]\n"
        "handle = _dlopen_without_gil(str(path))\n"
        "print(handle, Library(path)._dll._handle)\n"
    )
    done = _run(program)
    opened, taken = done.stdout.split()
    assert int(opened) != 0 and opened == taken


def test_a_process_preferring_gatekeepers_capabilities_loads_the_library_without_admission_policies() -> None:
    """`ffi.prefer(GATEKEEPER)` before the first load: the variant without the admissionpolicy capability
    is loaded (a webhook worker without --enforce-admission-policies), Kubernetes' CEL works in it, and
    an admission policy set is refused with a clear error rather than a missing symbol."""
    require_celgo()
    program = (
        "import json\n"
        "from celkeeper.native import ffi, locate\n"
        "ffi.prefer(locate.GATEKEEPER)\n"
        "library = ffi.load()\n"
        f"handle, reply = library.expression({EXPRESSION!r})\n"
        "try:\n"
        "    library.admission_policy_set(b'{}')\n"
        "    refused = ''\n"
        "except ffi.LibraryUnavailable as err:\n"
        "    refused = str(err)\n"
        "print(json.dumps([library.path.name, library.admission_policies, handle > 0, refused]))\n"
    )
    done = _run(program)
    name, admission_policies, compiled, refused = json.loads(done.stdout)
    assert (name, admission_policies, compiled) == ("libcelkeeper-gatekeeper.so", False, True)
    assert "without Kubernetes' admission policies (libcelkeeper-gatekeeper.so)" in refused


def test_by_default_a_process_loads_the_library_with_every_capability() -> None:
    require_celgo()
    program = "from celkeeper.native import ffi\nlibrary = ffi.load()\n"
    program += "print(library.path.name, library.admission_policies)\n"
    done = _run(program)
    assert done.stdout.split() == ["libcelkeeper.so", "True"]
