"""`gator expand`'s output, made by the native library (mutation/expandoutput.go mirrors Gatekeeper's
cmd/gator/expand): the resultants sorted as gator sorts them and each encoded as gator encodes it (go-yaml
v2 after a JSON round trip, or indented JSON), separated by `---` lines.

    text = expand_output(resultants, "yaml")   # what gator prints, without print's final newline
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from celkeeper.mutation.mutators import load_library
from celkeeper.native.ffi import Library

FORMATS = ("yaml", "json")


def expand_output(
    objects: Sequence[Mapping[str, Any]], format: str = "yaml", library: Library | None = None
) -> str:
    """The text `gator expand --format=<format>` prints for these resultants (before its final newline).
    Raises ValueError when the library cannot encode them (an unknown format, an object without a kind)."""
    lib = library or load_library()
    done, reply = lib.mutation_expand_output(orjson.dumps({"objects": list(objects), "format": format}))
    if not done:
        raise ValueError(str(reply.get("error", reply)))
    return str(reply["text"])
