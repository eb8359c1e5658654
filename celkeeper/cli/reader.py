"""Objects read by a process of its own: reading (Python, holding the GIL) and evaluating on two cores.

    for piece in read_in_child(sources):   # documents.stream's pieces of every source, in order

The reader process (`python -m celkeeper.cli.reader SPEC`: a fresh interpreter, nothing forked from a
process that loaded the cel-go library) reads the sources one after the other with documents.stream and
writes each piece to its standard output, marshalled, in frames (a 4-byte length, then a batch of up to
BATCH pieces); the tool's process turns them back into pieces as it evaluates. The pipe's buffer bounds
how far the reader gets ahead, so memory stays what one object takes in each process. A file the reader
cannot open is a DocumentError piece, as in the tool's own process; a reader that fails is one
DocumentError naming what it said. Standard input's copy (cli.inputs) is handed over as a descriptor.
"""

from __future__ import annotations

import json
import marshal
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

import celkeeper
from celkeeper.documents.stream import Piece, Settled, Streamed, Unread, read_objects
from celkeeper.errors import DocumentError, Location

BATCH = 256
_STREAMED, _SETTLED, _UNREAD, _ERROR = range(4)

#: a source as the reader process is told it: (name shown in locations, path, or descriptor)
Spec = tuple[str, str | None, int | None]


def read_in_child(specs: Sequence[Spec]) -> Iterator[Piece]:
    """The pieces of every source, read by a reader process (stopped when the caller stops)."""
    descriptors = [fd for _, _, fd in specs if fd is not None]
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(celkeeper.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryFile() as said:
        import subprocess  # the CLI's: only here (the tools' start-up does not pay for it)

        proc = subprocess.Popen(
            [sys.executable, "-m", "celkeeper.cli.reader", json.dumps(specs)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=said,
            pass_fds=descriptors,
            env=env,
        )
        assert proc.stdout is not None
        finished = False
        try:
            while True:
                head = proc.stdout.read(4)
                if not head:
                    finished = True
                    break
                data = proc.stdout.read(int.from_bytes(head, "little")) if len(head) == 4 else b""
                if len(head) < 4 or not data:
                    break
                for entry in marshal.loads(data):
                    yield _decode(entry)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            code = proc.wait()
        if code != 0 or not finished:
            said.seek(0)
            lines = said.read().decode(errors="replace").strip().splitlines()
            why = lines[-1] if lines else f"exit code {code}"
            yield DocumentError(f"the reader of the objects failed: {why}")


def _encode(piece: Piece) -> tuple[Any, ...]:
    if isinstance(piece, Streamed):
        return (
            _STREAMED,
            piece.data,
            piece.file,
            piece.document,
            piece.item,
            piece.line,
            piece.column,
            piece.tentative,
        )
    if isinstance(piece, Settled):
        return (_SETTLED, piece.file, piece.document, piece.is_list, piece.tentative, piece.failed)
    if isinstance(piece, Unread):
        return (_UNREAD, piece.error.message, _where(piece.error.location), piece.reason)
    return (_ERROR, piece.message, _where(piece.location))


def _decode(entry: tuple[Any, ...]) -> Piece:
    what = entry[0]
    if what == _STREAMED:
        return Streamed(*entry[1:])
    if what == _SETTLED:
        return Settled(*entry[1:])
    if what == _UNREAD:
        return Unread(DocumentError(entry[1], Location(*entry[2])), entry[3])
    return DocumentError(entry[1], Location(*entry[2]))


def _where(location: Location) -> tuple[Any, ...]:
    return (location.file, location.document, location.path, location.line, location.column)


def _open(name: str, path: str | None, fd: int | None) -> IO[bytes]:
    if fd is not None:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.fdopen(fd, "rb", closefd=False)
    assert path is not None
    return open(path, "rb")


def main(argv: Sequence[str]) -> int:
    """The reader process: argv[0] is the JSON list of sources (name, path, descriptor)."""
    out = sys.stdout.buffer
    batch: list[tuple[Any, ...]] = []

    def flush() -> None:
        data = marshal.dumps(batch)
        out.write(len(data).to_bytes(4, "little") + data)
        out.flush()
        batch.clear()

    try:
        for name, path, fd in json.loads(argv[0]):
            try:
                handle = _open(name, path, fd)
            except OSError as err:
                batch.append(
                    _encode(DocumentError(f"cannot read: {err.strerror or err}", Location(file=name)))
                )
                continue
            with handle:
                for piece in read_objects(handle, name):
                    batch.append(_encode(piece))
                    if len(batch) >= BATCH:
                        flush()
        if batch:
            flush()
    except BrokenPipeError:  # the tool stopped reading: nothing more to do
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
