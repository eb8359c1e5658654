"""Local files as the adapters share them (snapshots, TLS files, policy folders, the command line).

write_atomic(path, data, mode)   replace a file: a reader sees the old content or the new, never a part
walk(directory, suffixes)        the files under a folder, in a stable order, dot-names skipped
stamp_of(os.stat(path))          (inode, mtime, size): tells cheaply whether a file was replaced
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

Stamp = tuple[int, int, int]


def stamp_of(st: os.stat_result) -> Stamp:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace `path` with `data` (file mode `mode`) through a temporary file in the same folder and a
    rename, so that readers see the old content or the new, never a part."""
    import tempfile  # (~3 ms of import) only for a process that writes: the offline tools mostly read

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def walk(directory: str, suffixes: tuple[str, ...], errors: list[str] | None = None) -> list[str]:
    """Files under `directory` (recursively, each folder's files sorted, then its sub-folders sorted)
    whose names end with one of `suffixes`. Names starting with a dot are skipped (.git, editor swap
    files, the `..data` links of a mounted ConfigMap); symbolic links are followed, loops once.
    Folders that cannot be listed are described in `errors` when given (else skipped silently)."""
    found: list[str] = []
    visited: set[tuple[int, int]] = set()  # (device, inode) of the folders listed

    def failed(err: OSError) -> None:
        if errors is not None:
            errors.append(f"{err.filename}: cannot list: {err.strerror or err}")

    for root, dirs, files in os.walk(directory, followlinks=True, onerror=failed):
        try:  # the folder's identity: one stat (os.path.realpath costs one per part of the path)
            st = os.stat(root)
            identity: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:  # gone since it was listed: its files are still what was found
            identity = None
        if identity in visited:  # a symlink loop
            dirs[:] = []
            continue
        if identity is not None:
            visited.add(identity)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(
            os.path.join(root, f) for f in sorted(files) if not f.startswith(".") and f.endswith(suffixes)
        )
    return found
