"""celkeeper's build step: its native library (the cel-go engine and the other Go capabilities), built
from the Go module in celkeeper/native/go with `go build -buildmode=c-shared` (metadata is in setup.cfg).

The library goes to a cache outside the repository named by the hash of the Go sources and the build
flags (~/.cache/celkeeper-native/<hash>/libcelkeeper.so and its variants, see
celkeeper/native/locate.py), so `pip install -e .` builds it only when the sources changed, and a wheel
carries a copy of each in the package.
Without Go (or a C compiler, which cgo needs) the build warns and celkeeper falls back to the
cel-python engine; a Go build that fails is an error.

./dev runs the build step on its own first, so that its progress shows (pip hides it):
    python -c 'import runpy; runpy.run_path("setup.py", run_name="build")["build_library"]()'
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
KEEP_BUILDS = 12  # older builds in the cache are removed (several worktrees share the cache)


def _load(name: str, path: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, HERE / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _locate() -> Any:
    return _load("_native_locate", "celkeeper/native/locate.py")


def _warn(message: str) -> None:
    sys.stderr.write(f"celkeeper: WARNING: {message}\n")


def _prune(root: Path, keep: Path) -> None:
    builds = sorted((p for p in root.iterdir() if p.is_dir() and p != keep), key=lambda p: p.stat().st_mtime)
    for old in builds[: max(len(builds) - (KEEP_BUILDS - 1), 0)]:
        shutil.rmtree(old, ignore_errors=True)


def build_library() -> Path | None:
    """The library for the current Go sources, every variant of it (celkeeper/native/locate.py): cached,
    or built now. Returns the full variant's path; None without Go."""
    locate = _locate()
    target: Path = locate.cached_library()  # the sources hashed once: every variant's build is beside it
    missing = [v for v in locate.VARIANTS if not (target.parent / v.name).is_file()]
    if not missing:
        os.utime(target.parent)  # recently used: kept by _prune
        return target
    go = shutil.which("go")
    if go is None:
        _warn("no Go toolchain: the native library is not built; celkeeper will use cel-python")
        return None
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        _warn("no C compiler (cgo needs one): the native library is not built; celkeeper will use cel-python")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    # the dependencies' files celkeeper patches (celkeeper/native/go/patched.py)
    modfile = _load("_native_patched", "celkeeper/native/go/patched.py").patched_modfile(go)
    for variant in missing:  # the second reuses the first's compiled packages (Go's build cache)
        _build(go, modfile, variant.build_args(), target.parent / variant.name, locate.GO_DIR)
    _prune(target.parent.parent, target.parent)
    return target


def _build(go: str, modfile: Path, build_args: tuple[str, ...], target: Path, go_dir: Path) -> None:
    partial = target.parent / f".{target.name}.{os.getpid()}"
    sys.stderr.write(f"celkeeper: building the native library into {target} (first build: minutes)\n")
    started = time.monotonic()
    env = dict(os.environ, CGO_ENABLED="1")
    done = threading.Event()

    def heartbeat() -> None:  # a line a minute, so that CI logs show the build is alive
        while not done.wait(60):
            sys.stderr.write(
                f"celkeeper: still building the native library ({time.monotonic() - started:.0f} s)\n"
            )

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        proc = subprocess.run(
            [go, *build_args, f"-modfile={modfile}", "-o", str(partial), "."],
            cwd=go_dir,
            env=env,
            check=False,
        )
    finally:
        done.set()
    for leftover in partial.parent.glob("*.h"):  # the C header go build writes beside the library
        leftover.unlink()
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise SystemExit(f"celkeeper: building the native library failed (go exited with {proc.returncode})")
    os.replace(partial, target)
    sys.stderr.write(f"celkeeper: native library {target.name} built in {time.monotonic() - started:.0f} s\n")


def bdist_wheel_command() -> type:
    """The bdist_wheel command for a wheel that carries the native library: a platform wheel (`py3-none-
    <platform>`: the library is loaded with ctypes, so any Python 3 of that platform runs it); auditwheel
    then gives it its manylinux tag (hack/wheel/build.sh). Without Go the wheel is pure (cel-python only).
    Imported only when setuptools runs this file: `./dev` calls build_library() from a venv that may have
    neither setuptools >= 70.1 nor the wheel package (the build's isolated environment has them)."""
    try:  # setuptools >= 70.1 has it; before, the wheel package (pyproject.toml's build requirement)
        from setuptools.command.bdist_wheel import bdist_wheel
    except ImportError:  # pragma: no cover - older setuptools
        from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        def finalize_options(self) -> None:
            super().finalize_options()
            self.native = build_library() is not None
            if self.native:  # installed to platlib (install's choice follows has_ext_modules)
                self.distribution.has_ext_modules = lambda: True
                self.root_is_pure = False

        def get_tag(self) -> tuple[str, str, str]:
            python, abi, platform = super().get_tag()
            return ("py3", "none", platform) if self.native else (python, abi, platform)

    return BdistWheel


class BuildPy(build_py):
    """build_py, plus the library: found (or built) in the cache; copied into wheels."""

    def run(self) -> None:
        library = build_library()
        super().run()
        if library is not None and not getattr(self, "editable_mode", False):
            for variant in _locate().VARIANTS:  # each beside the full variant's build
                dest = Path(self.build_lib) / "celkeeper" / "native" / variant.packaged.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(library.parent / variant.name, dest)


if __name__ == "__main__":  # setuptools runs this file as __main__
    setup(cmdclass={"build_py": BuildPy, "bdist_wheel": bdist_wheel_command()})
