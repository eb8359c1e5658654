"""The embedded default source: a folder of YAML/JSON files (recursively), polled for changes.

Files ending in .yaml, .yml or .json are read; names starting with a dot are skipped (editor
swap files, and the `..data` links of a mounted ConfigMap, whose files are reached through their
own links). Unchanged files are not re-read (inode, mtime and size are compared). A change is
published only once two scans a moment apart agree, so a file caught half-written is not published.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from celkeeper.documents import parse_documents
from celkeeper.errors import CelkeeperError
from celkeeper.informer.source import Listing
from celkeeper.localfiles import Stamp, stamp_of, walk
from celkeeper.snapshot import SnapshotItem

SUFFIXES = (".yaml", ".yml", ".json")
_SETTLE = 0.1  # seconds between the two scans that must agree
_MAX_SETTLE_ROUNDS = 10

_Entry = tuple[Stamp, str | None, str | None]


class FolderSourceError(CelkeeperError):
    """The policy folder itself cannot be used."""


class FolderSource:
    """Policies from `directory`; optionally Namespace objects (labels for namespaceSelector and the
    ignore label) from `namespaces`, a file or folder, watched the same way."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        poll_interval: float = 0.5,
        namespaces: str | os.PathLike[str] | None = None,
    ) -> None:
        self.directory = os.fspath(directory)
        self.namespaces_path = os.fspath(namespaces) if namespaces is not None else None
        self.poll_interval = poll_interval
        self._cache: dict[str, _Entry] = {}  # path -> (stamp, text, problem)
        self._parsed_ns: dict[tuple[str, Stamp], tuple[dict[str, dict[str, Any]], list[str]]] = {}
        self._stop = threading.Event()

    @property
    def description(self) -> str:
        return f"folder:{self.directory}"

    def check(self) -> None:
        """Raise FolderSourceError when the folder is missing or not a directory (checked at start-up)."""
        if not os.path.isdir(self.directory):
            what = "does not exist" if not os.path.exists(self.directory) else "is not a directory"
            raise FolderSourceError(f"policy folder {self.directory} {what}")
        if self.namespaces_path is not None and not os.path.exists(self.namespaces_path):
            raise FolderSourceError(f"namespaces file {self.namespaces_path} does not exist")

    def start(self) -> None:
        self._stop.clear()

    def close(self) -> None:
        self._stop.set()

    def wait(self, timeout: float) -> None:
        self._stop.wait(min(timeout, self.poll_interval))

    # -- scanning ---------------------------------------------------------------------------------
    @staticmethod
    def _files(directory: str) -> list[str]:
        if os.path.isfile(directory):
            return [directory]
        return sorted(walk(directory, SUFFIXES))

    def _read(self, path: str) -> _Entry | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None  # removed while scanning
        except OSError as err:
            return ((0, 0, 0), None, f"{path}: cannot read: {err.strerror or err}")
        if not os.path.isfile(path):
            return None
        stamp = stamp_of(st)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == stamp:
            return cached
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            return (stamp, None, f"{path}: cannot read: {err.strerror or err}")
        try:
            return (stamp, data.decode("utf-8"), None)
        except UnicodeDecodeError as err:
            return (stamp, None, f"{path}: not UTF-8 text (byte {err.start})")

    def _scan(self) -> dict[str, _Entry]:
        roots = [self.directory] + ([self.namespaces_path] if self.namespaces_path else [])
        out = {}
        for root in roots:
            if not os.path.exists(root):
                continue
            for path in self._files(root):
                entry = self._read(path)
                if entry is not None:
                    out[path] = entry
        return out

    def _namespace_files(self) -> set[str]:
        if self.namespaces_path is None or not os.path.exists(self.namespaces_path):
            return set()
        return set(self._files(self.namespaces_path))

    def _namespaces(self, scan: dict[str, _Entry]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        namespaces: dict[str, dict[str, Any]] = {}
        problems: list[str] = []
        if self.namespaces_path is None:
            return namespaces, problems
        parsed_now = {}
        for path in sorted(self._namespace_files() & scan.keys()):
            stamp, text, _problem = scan[path]
            key = (path, stamp)
            found = self._parsed_ns.get(key)
            if found is None and text is not None:
                found = _parse_namespaces(text, path)
            if found is not None:
                parsed_now[key] = found
                namespaces.update(found[0])
                problems.extend(found[1])
        self._parsed_ns = parsed_now
        return namespaces, problems

    def listing(self) -> Listing:
        scan = self._scan()
        for _ in range(_MAX_SETTLE_ROUNDS):
            if {p: e[0] for p, e in scan.items()} == {p: e[0] for p, e in self._cache.items()}:
                break
            # something changed since the last listing: wait until two scans agree
            self._cache = scan
            time.sleep(_SETTLE)
            scan = self._scan()
        self._cache = scan
        items: list[SnapshotItem] = []
        problems: list[str] = []
        if not os.path.isdir(self.directory):
            problems.append(f"policy folder {self.directory} is missing")
        ns_files = self._namespace_files()
        if self.namespaces_path and not os.path.exists(self.namespaces_path):
            problems.append(f"namespaces file {self.namespaces_path} is missing")
        for path, (_stamp, text, problem) in sorted(scan.items()):
            if problem is not None:
                problems.append(problem)
            elif text is not None and path not in ns_files:
                items.append(SnapshotItem(name=path, text=text))
        namespaces, ns_problems = self._namespaces(scan)
        problems.extend(ns_problems)
        return Listing(items=tuple(items), synced=True, namespaces=namespaces, problems=tuple(problems))


def _parse_namespaces(text: str, path: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    parsed = parse_documents(text, path)
    found: dict[str, dict[str, Any]] = {}
    problems = [str(e) for e in parsed.errors]
    for doc in parsed.documents:
        if doc.kind == "Namespace" and doc.api_version == "v1" and doc.name:
            found[doc.name] = doc.data
        else:
            problems.append(f"{path}: document {doc.index}: not a v1 Namespace with a name; ignored")
    return found, problems
