"""Where celkeeper's native library is: shared by the build step (setup.py) and the loader (ffi.py).

The library is built from the Go module in `go/` (next to this file) by `go build
-buildmode=c-shared` into a cache outside the repository, in a folder named by the hash of the
module's sources and the build flags: `~/.cache/celkeeper-native/<hash>/libcelkeeper.so`
(`CELKEEPER_NATIVE_CACHE` overrides the cache folder). A wheel carries its library in the package
instead (`_libcelkeeper.so`, next to this file). `CELKEEPER_NATIVE_LIB` names a library to use instead
of either.

It is built in two variants (`VARIANTS`), side by side in each place: every capability
(`libcelkeeper.so`), and Gatekeeper's alone (`libcelkeeper-gatekeeper.so`: Kubernetes' CEL and
Gatekeeper's mutation, without Kubernetes' admission policies, whose Go packages hold memory in every
process that loads them: docs/performance.md). A process chooses one before it loads (`ffi.prefer`).

A dependency's file that celkeeper changes (docs/known-issues.md says which and why) is kept whole in
`go/_patches/<folder>/<path>`; builds and tests of the module use a copy of that dependency with the file
in place (`go/patched.py`, which runs the Go tool: build time only).

Pure standard library (setup.py loads this file by path, before celkeeper is installed).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
GO_DIR = HERE / "go"
LIBRARY_NAME = "libcelkeeper.so"
PACKAGED = HERE / "_libcelkeeper.so"
# what `go build` is given (bump FLAGS_REV when the build changes in a way the sources do not show)
BUILD_ARGS = (
    "build",
    "-buildmode=c-shared",
    "-mod=readonly",
    "-buildvcs=false",
    "-trimpath",
    "-ldflags=-s -w",
)
FLAGS_REV = "2"  # 2: dependencies' files patched (go/patched.py, -modfile)


class Variant(NamedTuple):
    """One build of the library: its file's name and the Go build tags it is built with."""

    name: str
    tags: tuple[str, ...]

    @property
    def packaged(self) -> Path:
        """Its copy in a wheel's package."""
        return HERE / f"_{self.name}"

    def build_args(self) -> tuple[str, ...]:
        return BUILD_ARGS + ((f"-tags={','.join(self.tags)}",) if self.tags else ())


#: every capability: Kubernetes' CEL as Gatekeeper runs it, Gatekeeper's mutation, Kubernetes' admission
#: policies
FULL = Variant(LIBRARY_NAME, ())
#: Gatekeeper's capabilities alone (Kubernetes' CEL, Gatekeeper's mutation): for a process that evaluates
#: no admission policy (a webhook worker without --enforce-admission-policies)
GATEKEEPER = Variant("libcelkeeper-gatekeeper.so", ("gatekeeper_only",))
VARIANTS = (FULL, GATEKEEPER)


def go_sources(go_dir: Path = GO_DIR) -> list[Path]:
    """The files the library is built from (tests excluded; the data files it embeds included), in a
    stable order."""
    files = [go_dir / "go.mod", go_dir / "go.sum", go_dir / "patched.py"]
    files += sorted(p for p in go_dir.rglob("*.go") if not p.name.endswith("_test.go"))
    files += sorted(p for p in go_dir.rglob("*.json") if "testdata" not in p.parts)
    return files


def source_hash(go_dir: Path = GO_DIR) -> str:
    """The hash naming a build: the sources' paths and contents and the build arguments."""
    digest = hashlib.sha256()
    digest.update(f"flags-rev {FLAGS_REV} {' '.join(BUILD_ARGS)}\n".encode())
    for path in go_sources(go_dir):
        digest.update(path.relative_to(go_dir).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    configured = os.environ.get("CELKEEPER_NATIVE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "celkeeper-native"


def cached_library(go_dir: Path = GO_DIR, variant: Variant = FULL) -> Path:
    """Where the build of the current sources is (or will be)."""
    return cache_root() / source_hash(go_dir) / variant.name


#: a source checkout's builds' folder, as first found in this process (hashing the sources costs ~2 ms,
#: and a command asks up to three times: whether the engine is available, its load, the compile facts'
#: cache)
_checkout_builds: Path | None = None


def find_library(variant: Variant = FULL) -> tuple[Path | None, str]:
    """The library to load, or None and why there is none. A variant other than FULL that is not
    there (a build made by hand) is served by FULL, which has every capability."""
    global _checkout_builds
    configured = os.environ.get("CELKEEPER_NATIVE_LIB")
    if configured:
        path = Path(configured)
        return (path, "") if path.is_file() else (None, f"CELKEEPER_NATIVE_LIB={configured} does not exist")
    if (GO_DIR / "go.mod").is_file():  # a source checkout: the build of these very sources
        if _checkout_builds is None:
            _checkout_builds = cached_library().parent
        path = _checkout_builds / variant.name
        if not path.is_file():
            path = _checkout_builds / FULL.name
        if path.is_file():
            return path, ""
        return None, (
            f"the native library for the current Go sources is not built ({path} is missing): "
            "run `pip install -e .` (or ./dev test) on a machine with Go"
        )
    for path in (variant.packaged, PACKAGED):
        if path.is_file():
            return path, ""
    return None, "this installation has no native library (it was built without Go)"
