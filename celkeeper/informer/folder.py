"""The embedded default source: a folder of YAML/JSON files (recursively), polled for changes.

Files ending in .yaml, .yml or .json are read; names starting with a dot are skipped (editor
swap files, and the `..data` links of a mounted ConfigMap, whose files are reached through their
own links). Unchanged files are not re-read (inode, mtime and size are compared). A change is
published only once two scans a moment apart agree, so a file caught half-written is not published.

Fail-static (the informer keeps the last good version of what the listing says it cannot use):
- a file that cannot be read, is not UTF-8 or is larger than `max_file_bytes` is listed as failed;
- a file that disappears is a deletion only once it has been gone for `deletion_grace` seconds
  (an editor or a tool replacing it is not a deletion); until then it is kept;
- when the folder itself is missing or a part of it cannot be listed, the listing is incomplete:
  nothing is deleted.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from celkeeper.documents import parse_documents
from celkeeper.errors import CelkeeperError
from celkeeper.informer.source import Listing
from celkeeper.localfiles import Stamp, stamp_of, walk
from celkeeper.model import JsonObject
from celkeeper.snapshot import SnapshotItem

SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024  # a policy file larger than this is not read
DELETION_GRACE = 1.0  # seconds a file must be gone before it counts as deleted
_SETTLE = 0.1  # seconds between the two scans that must agree
_KEEPING = "enforcing the policies last read from it"
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
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        deletion_grace: float = DELETION_GRACE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = os.fspath(directory)
        self.namespaces_path = os.fspath(namespaces) if namespaces is not None else None
        self.poll_interval = poll_interval
        self.max_file_bytes = max_file_bytes
        self.deletion_grace = deletion_grace
        self.clock = clock
        self._cache: dict[str, _Entry] = {}  # path -> (stamp, text, problem)
        self._parsed_ns: dict[tuple[str, Stamp], tuple[dict[str, JsonObject], list[str], bool]] = {}
        self._good_ns: dict[str, dict[str, JsonObject]] = {}  # namespaces file -> last good parse
        self._seen: set[str] = set()  # files listed before
        self._gone_since: dict[str, float] = {}  # files seen before and missing now -> since when
        self._walk_errors: list[str] = []
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
    def _files(self, directory: str) -> list[str]:
        if os.path.isfile(directory):
            return [directory]
        return sorted(walk(directory, SUFFIXES, self._walk_errors))

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
        limit = self.max_file_bytes
        too_large = (
            stamp,
            None,
            f"{path}: larger than {limit} bytes, the limit for a policy file (--max-policy-file-bytes): "
            "not read",
        )
        if st.st_size > limit:
            return too_large
        try:
            with open(path, "rb") as f:
                data = f.read(limit + 1)  # it may have grown since the stat
        except FileNotFoundError:
            return None
        except OSError as err:
            return (stamp, None, f"{path}: cannot read: {err.strerror or err}")
        if len(data) > limit:
            return too_large
        try:
            return (stamp, data.decode("utf-8"), None)
        except UnicodeDecodeError as err:
            return (stamp, None, f"{path}: not UTF-8 text (byte {err.start})")

    def _scan(self) -> dict[str, _Entry]:
        roots = [self.directory] + ([self.namespaces_path] if self.namespaces_path else [])
        out = {}
        self._walk_errors = []
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

    def _namespaces(self, scan: dict[str, _Entry]) -> tuple[dict[str, JsonObject], list[str]]:
        """The Namespace objects of the inventory; a file that cannot be read or parsed now (or is
        gone with the whole inventory) keeps the objects last read from it."""
        namespaces: dict[str, JsonObject] = {}
        problems: list[str] = []
        if self.namespaces_path is None:
            return namespaces, problems
        parsed_now = {}
        files = self._namespace_files()
        if not os.path.exists(self.namespaces_path):
            files = set(self._good_ns)  # vanished: the last good namespaces stay
        for path in sorted(files):
            entry = scan.get(path)
            found = None
            if entry is not None:
                stamp, text, _problem = entry
                key = (path, stamp)
                found = self._parsed_ns.get(key)
                if found is None and text is not None:
                    found = _parse_namespaces(text, path)
                if found is not None:
                    parsed_now[key] = found
            if found is not None:
                problems.extend(found[1])
                if not found[2]:  # read and parsed (documents that are not Namespaces are only reported)
                    self._good_ns[path] = found[0]
                    namespaces.update(found[0])
                    continue
            if path in self._good_ns:  # unreadable, invalid or gone for now: its last good namespaces
                namespaces.update(self._good_ns[path])
                problems.append(f"{path}: cannot be used now; keeping the Namespaces last read from it")
        self._good_ns = {p: ns for p, ns in self._good_ns.items() if p in files}
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
        failed: dict[str, str] = {}
        complete = os.path.isdir(self.directory) and not self._walk_errors
        if not os.path.isdir(self.directory):
            what = "is missing" if not os.path.exists(self.directory) else "is not a folder"
            problems.append(f"policy folder {self.directory} {what}: {_KEEPING}")
        problems.extend(f"{e}: {_KEEPING}" for e in self._walk_errors)
        ns_files = self._namespace_files()
        if self.namespaces_path and not os.path.exists(self.namespaces_path):
            problems.append(f"namespaces file {self.namespaces_path} is missing")
        for path, (_stamp, text, problem) in sorted(scan.items()):
            if path in ns_files:
                continue
            if problem is not None:
                failed[path] = problem
            elif text is not None:
                items.append(SnapshotItem(name=path, text=text))
        namespaces, ns_problems = self._namespaces(scan)
        problems.extend(ns_problems)
        return Listing(
            items=tuple(items),
            synced=True,
            namespaces=namespaces,
            problems=tuple(problems),
            failed=failed,
            keep=self._recently_gone(set(scan) - ns_files, complete),
            complete=complete,
        )

    def _recently_gone(self, present: set[str], complete: bool) -> frozenset[str]:
        """Files seen before and missing now for less than the deletion grace (kept for now)."""
        now = self.clock()
        if not complete:  # nothing is deleted while the folder cannot be seen: the clock restarts later
            self._gone_since.clear()
            return frozenset()
        for path in present:
            self._gone_since.pop(path, None)
        for path in self._seen - present:
            self._gone_since.setdefault(path, now)
        recent = {p for p, since in self._gone_since.items() if now - since < self.deletion_grace}
        self._gone_since = {p: s for p, s in self._gone_since.items() if p in recent}
        self._seen = present | recent
        return frozenset(recent)


def _parse_namespaces(text: str, path: str) -> tuple[dict[str, JsonObject], list[str], bool]:
    """(Namespace objects by name, problems, whether the text failed to parse)."""
    parsed = parse_documents(text, path)
    found: dict[str, JsonObject] = {}
    problems = [str(e) for e in parsed.errors]
    for doc in parsed.documents:
        if doc.kind == "Namespace" and doc.api_version == "v1" and doc.name:
            found[doc.name] = doc.data
        else:
            problems.append(f"{path}: document {doc.index}: not a v1 Namespace with a name; ignored")
    return found, problems, bool(parsed.errors)
