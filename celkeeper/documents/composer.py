"""ruamel.yaml's composer, bounded: parse.py's fallback for the texts libyaml may read differently.

Imported by parse.py only when a text goes to ruamel.yaml (a few per run at most: the fast path is
libyaml's), so that reading ordinary files does not pay for importing ruamel.yaml.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from celkeeper.documents import parse  # its MAX_VALUES, read when used (one bound for both paths)

__all__ = ["MarkedYAMLError", "TooManyValues", "YAMLError", "compose"]


class TooManyValues(YAMLError):
    def __init__(self, line: int) -> None:
        super().__init__(
            f"more than {parse.MAX_VALUES:,} values (maps, lists, scalars) in one file: not read"
        )
        self.line = line


class _BoundedComposer(Composer):
    """ruamel's composer, stopping at parse.MAX_VALUES nodes (its extension point: YAML.Composer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.composed = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.composed += 1
        if self.composed > parse.MAX_VALUES:
            raise TooManyValues(self.parser.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)


def compose(text: str) -> Iterator[Any]:
    """Every document's node, as ruamel.yaml composes them (round-trip: YAML 1.2)."""
    ruamel = YAML(typ="rt")
    ruamel.Composer = _BoundedComposer
    yield from ruamel.compose_all(text)
