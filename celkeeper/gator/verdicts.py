"""The offline tools' disk cache of jsonschema's verdicts on parameter schemas and constraint
parameters (templates.parameters.Verdicts), so that a run over unchanged policies neither imports
jsonschema (~30 ms of a `verify`) nor runs its checks (those templates.draft4 leaves to it). Its store
(DiskStore: JSON values by key, in a folder) also keeps gator.programs' compile facts, in a folder of
their own.

    verdicts = DiskVerdicts.default()     # None when the cache is turned off (CELKEEPER_CACHE_DIR="")
    PolicyBackend(engine, verdicts=verdicts)

Entries are named by a digest of what was checked (the converted schema, the value and its path: see
ParameterSchema), in a folder named by what words the results: templates/parameters.py and the
installed jsonschema (their size and modification time) and VERDICTS_REVISION, under
`$CELKEEPER_CACHE_DIR` (default `$XDG_CACHE_HOME/celkeeper`, else `~/.cache/celkeeper`)`/verdicts/`.
Each entry is written to a temporary file and renamed (concurrent runs see a whole entry or none);
an unreadable or malformed entry is a miss; a cache that cannot be written is not used, silently
(it only saves time). Bounded: past MAX_ENTRIES the oldest half is removed, and folders of other
versions go, when a run adds entries. Pruning removes only what the cache writes: entries (and their
temporary files) in the store's folder and in sibling folders named like a version (hex digits);
anything else beside them, even in a folder given by mistake, is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path

from celkeeper.localfiles import write_atomic
from celkeeper.templates import parameters

CACHE_ENV = "CELKEEPER_CACHE_DIR"
MAX_ENTRIES = 20_000
_VERSION_NAME = re.compile(r"[0-9a-f]+")
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json|\.[0-9a-f]{64}\.json\..+\.tmp")  # write_atomic's temporaries


def cache_root() -> Path | None:
    """The cache's root folder; None when turned off (CELKEEPER_CACHE_DIR set to "")."""
    configured = os.environ.get(CACHE_ENV)
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "celkeeper"


def _version() -> str:
    """What words the verdicts: the checking code and the installed jsonschema (found, not imported)."""
    digest = hashlib.sha256(parameters.VERDICTS_REVISION.encode())
    spec = importlib.util.find_spec("jsonschema")
    for path in (parameters.__file__, spec.origin if spec is not None else None):
        if path:
            st = os.stat(path)
            digest.update(f"\0{path}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


class DiskStore:
    """JSON values in a folder, by key (see the module docstring): DiskVerdicts', and the compile facts of
    gator.programs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pruned = False

    def _file(self, key: str) -> Path:
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + ".json")

    def get_json(self, key: str) -> object:
        """The value stored under `key`, None when there is none (or it cannot be read)."""
        try:
            value: object = json.loads(self._file(key).read_bytes())
        except (OSError, ValueError):
            return None
        return value

    def put_json(self, key: str, value: object) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if not self._pruned:
                self._pruned = True
                self._prune()
            write_atomic(self._file(key), json.dumps(value).encode(), 0o644)
        except OSError:
            return  # a cache that cannot be written only costs time

    def _prune(self) -> None:
        """Remove the folders of other versions, and the older half of the entries past MAX_ENTRIES."""
        for sibling in self.directory.parent.iterdir():
            if sibling == self.directory or not _VERSION_NAME.fullmatch(sibling.name) or not sibling.is_dir():
                continue
            for stale in sibling.iterdir():
                if _ENTRY_NAME.fullmatch(stale.name):
                    with contextlib.suppress(OSError):
                        stale.unlink()
            with contextlib.suppress(OSError):
                sibling.rmdir()  # only once empty: a folder holding anything else stays
        entries = [e for e in os.scandir(self.directory) if _ENTRY_NAME.fullmatch(e.name)]
        if len(entries) <= MAX_ENTRIES:
            return
        by_age = sorted(entries, key=lambda e: e.stat().st_mtime_ns)
        for entry in by_age[: len(by_age) - MAX_ENTRIES // 2]:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


class DiskVerdicts(DiskStore):
    """templates.parameters.Verdicts in a folder (see the module docstring)."""

    @classmethod
    def default(cls) -> DiskVerdicts | None:
        root = cache_root()
        return cls(root / "verdicts" / _version()) if root is not None else None

    def get(self, key: str) -> parameters.Verdict | None:
        data = self.get_json(key)
        if not isinstance(data, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in data
        ):
            return None
        return [(p[0], p[1]) for p in data]

    def put(self, key: str, verdict: parameters.Verdict) -> None:
        self.put_json(key, [list(p) for p in verdict])


class MemoryVerdicts:
    """templates.parameters.Verdicts kept in memory, for one run: each distinct check is made once (a
    template that several tests load, a constraint that several tests share), none is kept after it."""

    def __init__(self) -> None:
        self._known: dict[str, parameters.Verdict] = {}

    def get(self, key: str) -> parameters.Verdict | None:
        return self._known.get(key)

    def put(self, key: str, verdict: parameters.Verdict) -> None:
        self._known[key] = verdict
