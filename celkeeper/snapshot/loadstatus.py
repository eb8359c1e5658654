"""Who has loaded what: one small status file per worker, and one for the informer.

Workers write `<state>/workers/<pid>.json` whenever they load a snapshot; the master removes the
file when the worker exits (however it exits). So "every worker of this server has loaded
generation G" is `WorkerBoard.loaded_generation() >= G` (what per-pod status needs).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from celkeeper.localfiles import write_atomic
from celkeeper.model import JsonObject


@dataclass(frozen=True)
class WorkerStatus:
    pid: int
    generation: int = 0  # generation of the loaded snapshot, 0 before the first
    ready: bool = False  # loaded and compiled a snapshot listing everything there was at start
    loaded_at: float = 0.0  # Unix time the snapshot was loaded
    snapshot_created: float = 0.0  # Unix time the loaded snapshot was published
    templates: int = 0
    constraints: int = 0
    errors: int = 0  # policy problems found while building the policy set
    last_error: str = ""  # why the latest snapshot could not be loaded, if it could not


@dataclass(frozen=True)
class InformerStatus:
    pid: int
    source: str = ""
    generation: int = 0  # latest generation published
    published_at: float = 0.0
    synced: bool = False
    items: int = 0
    templates: int = 0
    constraints: int = 0
    problems: tuple[str, ...] = ()  # every problem with the policies, one line each
    held: tuple[str, ...] = ()  # items published at their last good version (fail-static)


def _read(path: Path) -> JsonObject | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _build(cls: type, doc: JsonObject) -> Any:
    names = {f.name for f in fields(cls)}
    values = {k: v for k, v in doc.items() if k in names}
    for key in ("problems", "held"):
        if key in values:
            values[key] = tuple(values[key])
    try:
        return cls(**values)
    except TypeError:
        return None


class WorkerBoard:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, pid: int) -> Path:
        return self.directory / f"{pid}.json"

    def write(self, status: WorkerStatus) -> None:
        write_atomic(self.path(status.pid), json.dumps(asdict(status)).encode())

    def remove(self, pid: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path(pid))

    def read_all(self) -> list[WorkerStatus]:
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return []
        out = []
        for name in names:
            if not name.endswith(".json") or name.startswith("."):
                continue
            doc = _read(self.directory / name)
            status = _build(WorkerStatus, doc) if doc else None
            if status is not None:
                out.append(status)
        return out

    def loaded_generation(self) -> int | None:
        """The generation every live worker has loaded (the smallest), None when no worker runs."""
        statuses = self.read_all()
        return min(s.generation for s in statuses) if statuses else None


class InformerRecord:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, status: InformerStatus) -> None:
        doc = asdict(status)
        doc["problems"] = list(status.problems)
        doc["held"] = list(status.held)
        write_atomic(self.path, json.dumps(doc).encode())

    def read(self) -> InformerStatus | None:
        doc = _read(self.path)
        return _build(InformerStatus, doc) if doc else None
