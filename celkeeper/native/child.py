"""celkeeper's native library served to the process that started this one, over its standard input and
output: `python -m celkeeper.native.child`. A process that compiles now and then (the webhook pod's
informer) calls the library here rather than holding a Go runtime of its own between its rounds
(celkeeper.informer.libraryprocess starts and ends this process; docs/architecture.md).

A message is a pickle (from celkeeper's own processes only) behind its length (8 bytes, little-endian).
The parent sends `(method, keyword arguments)`, a method of `ffi.Library` among `CALLS`; this process
answers `("ok", value)`, `("unavailable", why)` (the library cannot load here, or this variant of it has
not the capability called) or `("error", text)`, and ends at the end of its input (the parent closed it,
or is gone). Its argument, when given, names the variant of the library to load (locate.VARIANTS).
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import IO, Any

from celkeeper.native.ffi import Library, LibraryUnavailable, load, prefer
from celkeeper.native.locate import VARIANTS

#: the methods of ffi.Library a parent may call here: all but those about this process itself (its check,
#: its end, its file pages), which the parent answers on its own (informer/libraryprocess.py)
CALLS = frozenset(
    name for name, value in vars(Library).items() if callable(value) and not name.startswith("_")
) - {"check", "trim", "release_file_pages"}

_LENGTH = 8


def send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(_LENGTH, "little") + data)
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next message; EOFError at the end of the stream (or in the middle of a message)."""
    head = stream.read(_LENGTH)
    if len(head) < _LENGTH:
        raise EOFError
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # messages of celkeeper's own processes


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """Answer each request until the end of `requests`."""
    try:
        library = load()
        unavailable = ""
    except LibraryUnavailable as err:
        unavailable = str(err)
    while True:
        try:
            name, arguments = receive(requests)
        except EOFError:
            return
        if unavailable:
            send(replies, ("unavailable", unavailable))
            continue
        if name not in CALLS:
            send(replies, ("error", f"not a call of the native library: {name!r}"))
            continue
        try:
            value = getattr(library, name)(**arguments)
        except LibraryUnavailable as err:  # a capability this variant has not
            send(replies, ("unavailable", str(err)))
        except Exception as err:  # a bug: the parent raises it as its own
            send(replies, ("error", f"{type(err).__name__}: {err}"))
        else:
            send(replies, ("ok", value))


def main() -> None:
    for variant in VARIANTS:
        if sys.argv[1:] == [variant.name]:
            prefer(variant)
    # the messages go to the parent's pipe alone: what the library or Python would print goes to stderr
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
