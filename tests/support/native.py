"""celkeeper's native library in tests (the cel-go engine is its k8scel capability): it is built by
`pip install -e .` (./dev test) when Go is present. Without it, tests that need it skip with the reason;
with CELKEEPER_REQUIRE_KUBE=1 (CI) that is a failure instead, as for the real kube-apiserver
(tests/support/kube_fixtures.py). `run_go` runs the Go tool in the library's Go module."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from celkeeper.native.ffi import available
from celkeeper.native.locate import GO_DIR
from tests.support.requirements import KUBE

ROOT = Path(__file__).resolve().parents[2]


def pytest_report_header(config: pytest.Config) -> str:
    del config
    ok, why = available()
    if ok:
        from celkeeper.native.locate import find_library

        return f"cel-go: library {find_library()[0]}"
    return f"cel-go: tests that need it will {'FAIL' if KUBE.required() else 'skip'}: {why}"


def require_celgo() -> None:
    """Skip (or, on CI, fail) the calling test when the cel-go library is not available."""
    ok, why = available()
    if ok:
        return
    if KUBE.required():
        pytest.fail(f"{KUBE.env} is set but the cel-go library is not available: {why}", pytrace=False)
    pytest.skip(f"no cel-go library: {why}")


def go() -> str:
    """The Go tool; skips (on CI: fails) the calling test without one."""
    found = shutil.which("go")
    if found is None:
        if KUBE.required():
            pytest.fail(f"{KUBE.env} is set but there is no Go toolchain", pytrace=False)
        pytest.skip("no Go toolchain")
    return found


def patched() -> ModuleType:
    """celkeeper/native/go/patched.py: the module built with celkeeper's copies of dependencies' files."""
    spec = importlib.util.spec_from_file_location("_native_patched", GO_DIR / "patched.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def go_flags(tool: str) -> str:
    flags: str = patched().go_flags(tool)
    return flags


def run_go(*args: str, env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    """`go ARGS` in the native library's Go module, as the library is built (its patched dependency
    files: celkeeper.native.locate.go_flags; `env` may set GOFLAGS otherwise); its stdout, or a failed
    assertion with its output."""
    tool = go()
    environment = {**os.environ, "GOFLAGS": go_flags(tool), **(env or {})}
    proc = subprocess.run(
        [tool, *args],
        cwd=GO_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        check=False,
    )
    assert proc.returncode == 0, f"go {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def in_fresh_process(program: str, *args: str, env: dict[str, str] | None = None) -> Any:
    """What `program` printed as JSON, run by this Python in a fresh process from the project's root with
    `args` as sys.argv[1:] (and `env` as its environment, else this one's): what a process has mapped of the
    library depends on all it ran before, so tests of the library's pages measure a process that ran only
    their scenario."""
    done = subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, f"the fresh process failed:\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def record_releases(module: ModuleType) -> list[tuple[int, int]]:
    """Make `module`'s release_file_pages (the name it imported ffi.release_file_pages by) record the
    library's file bytes resident before and after each release, in the list returned."""
    from celkeeper.native import ffi

    mapped: list[tuple[int, int]] = []

    def recording() -> int:
        before = library_file_bytes()
        released = ffi.release_file_pages()
        mapped.append((before, library_file_bytes()))
        return released

    module.release_file_pages = recording  # type: ignore[attr-defined]
    return mapped


def mapped_libraries(pid: int) -> set[str]:
    """The names of the files of celkeeper's native library (any variant) that process `pid` has mapped."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.rsplit("/", 1)[-1] for line in maps if "libcelkeeper" in line}


def library_file_bytes() -> int:
    """The bytes of the library's file this process has resident (its mappings' pages less those private
    to the process: relocated data), from /proc/self/smaps; 0 before it is loaded."""
    from celkeeper.native import ffi

    path, _ = ffi.find_library()
    if path is None:
        return 0
    library = os.path.realpath(path)
    total = 0
    ours = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 1)[0]
        if "-" in head and not head.endswith(":"):
            ours = line.split(None, 5)[-1] == library
        elif ours and head == "Rss:":
            total += int(line.split()[1]) * 1024
        elif ours and head == "Anonymous:":
            total -= int(line.split()[1]) * 1024
    return total
