"""Gatekeeper's `gator`, the oracle of the differential tests (built by hack/gator/build.sh).

    gator = find_gator()                    # Path; raises GatorUnavailable with the reason and the fix
    run = run_gator(gator, ["verify", "-v", "--trace", "dir/..."])
    run = run_gator_over(gator, ["verify", "-v", "--trace", "dir/..."], Path("dir"))  # kept: see below

The binary lives in `${CELKEEPER_GATOR_CACHE:-~/.cache/celkeeper-gator}/<version>/gator`, with a stamp
of the module files that built it; `./dev test` builds it when missing or stale (needs Go). Tests
that need it use the `gator` fixture (tests/e2e/gator/conftest.py): they skip with the reason when it
cannot run here, and fail instead when CELKEEPER_REQUIRE_GATOR=1 (CI sets it; tests/support/requirements.py).

`run_gator_over` keeps what gator answered about a folder, beside the binary (`verify/`), by the hash of
the binary, the arguments and every file in the folder (names and bytes): the same gator on the same
files answers the same, so a later run on unchanged files reads the answer instead of running gator again
(the generated corpus takes gator half a minute of CPU). A changed file, argument or binary runs gator.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "gator" / "build.sh"
GOMOD = ROOT / "hack" / "gator" / "go.mod"


class GatorUnavailable(Exception):
    """gator cannot run here; the message says why and how to fix it."""


def gatekeeper_version() -> str:
    """The Gatekeeper version hack/gator/go.mod requires, e.g. `3.23.1`."""
    text = GOMOD.read_text(encoding="utf-8")
    found = re.search(
        r"^\s*(?:require\s+)?github\.com/open-policy-agent/gatekeeper/v3\s+v(\S+)\s*$", text, re.M
    )
    if not found:
        raise GatorUnavailable(f"{GOMOD} does not require github.com/open-policy-agent/gatekeeper/v3")
    return found.group(1)


def find_gator() -> Path:
    """The up-to-date gator binary, or GatorUnavailable."""
    where = subprocess.run(
        [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(where)
    fresh = subprocess.run([str(BUILD_SCRIPT), "--check"], capture_output=True, check=False).returncode == 0
    if fresh:
        return path
    what = "stale (built from other module files)" if path.exists() else "not built"
    if shutil.which("go") is None:
        raise GatorUnavailable(
            f"gator {what} in {path} and no Go toolchain on PATH: install Go, then run {BUILD_SCRIPT}"
        )
    raise GatorUnavailable(f"gator {what} in {path}: run {BUILD_SCRIPT} (or ./dev test)")


@dataclass(frozen=True)
class GatorRun:
    code: int
    out: str
    err: str


def run_gator(gator: Path, args: list[str], cwd: Path | None = None, timeout: float = 1200) -> GatorRun:
    done = subprocess.run(
        [str(gator), *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, check=False
    )
    return GatorRun(done.returncode, done.stdout, done.stderr)


#: how many answers `run_gator_over` keeps (the most recently used; a run on other files adds one)
KEPT_ANSWERS = 64
_ROOT_MARK = "\x00root\x00"  # the folder's path in the arguments and answers kept


def run_gator_over(gator: Path, args: list[str], root: Path, timeout: float = 1200) -> GatorRun:
    """`run_gator(gator, args)` where gator reads only the files under `root` (the folder `args` name):
    answered from the kept answer when the binary, the arguments and those files are the same."""
    root_text = str(root)
    spelled = [arg.replace(root_text, _ROOT_MARK) for arg in args]
    digest = hashlib.sha256(_binary_digest(gator).encode())
    digest.update(json.dumps(spelled).encode())
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    kept = gator.parent / "verify" / f"{digest.hexdigest()}.json.gz"
    try:
        answer = json.loads(gzip.decompress(kept.read_bytes()))
    except (OSError, ValueError):
        run = run_gator(gator, args, timeout=timeout)
        _keep(
            kept,
            {
                "code": run.code,
                "out": run.out.replace(root_text, _ROOT_MARK),
                "err": run.err.replace(root_text, _ROOT_MARK),
            },
        )
        return run
    with contextlib.suppress(OSError):
        os.utime(kept)  # used: the newest again
    return GatorRun(
        int(answer["code"]),
        answer["out"].replace(_ROOT_MARK, root_text),
        answer["err"].replace(_ROOT_MARK, root_text),
    )


def _binary_digest(gator: Path) -> str:
    stat = gator.stat()
    return _file_digest(gator, stat.st_size, stat.st_mtime_ns)


@functools.cache
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    """The file's sha256, once per process while its size and time stay the same (a rebuild changes them)."""
    del size, mtime_ns  # the cache's key
    digest = hashlib.sha256()
    with path.open("rb") as binary:
        for chunk in iter(lambda: binary.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _keep(path: Path, answer: dict[str, object]) -> None:
    """Write the answer whole (a temporary file renamed: another worker may read it meanwhile); drop the
    least recently used beyond KEPT_ANSWERS."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as out:
        out.write(gzip.compress(json.dumps(answer).encode(), compresslevel=5))
    os.replace(temp, path)
    kept = []
    for found in path.parent.glob("*.json.gz"):
        with contextlib.suppress(OSError):  # another worker may drop it meanwhile
            kept.append((found.stat().st_mtime, found))
    for _, old in sorted(kept, reverse=True)[KEPT_ANSWERS:]:
        old.unlink(missing_ok=True)
