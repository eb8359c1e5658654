"""Where a command's formatted output goes: stdout, or a file (`--output-file`), written whole or not at all.

The formats themselves are made by modules of their own (cli/output_html.py, output_junit.py,
output_sarif.py; the audit's OpenReports by celkeeper.audit.openreports): a command only selects one.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from pathlib import Path

from celkeeper.errors import CelkeeperError
from celkeeper.localfiles import write_atomic


def write_output(path: str | None, text: str) -> None:
    """`text` to stdout (path None or `-`), else to the file `path` (replaced atomically, mode 0644)."""
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomic(Path(path), text.encode(), mode=0o644)
    except OSError as err:
        raise CelkeeperError(f"{path}: cannot write the output: {err.strerror or err}") from err


@contextlib.contextmanager
def redirected(path: str | None) -> Iterator[None]:
    """What the block prints to stdout goes to the file `path` instead (written once the block ends
    without an error); to stdout as usual when `path` is None."""
    if path is None:
        yield
        return
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield
    write_output(path, buffer.getvalue())
