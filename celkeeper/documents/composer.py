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

__all__ = ["MarkedYAMLError", "TooManyValues", "YAMLError", "compose"]


class TooManyValues(YAMLError):
    def __init__(self, line: int, max_values: int) -> None:
        super().__init__(f"more than {max_values:,} values (maps, lists, scalars) in one file: not read")
        self.line = line


class _BoundedComposer(Composer):
    """ruamel's composer, stopping after `max_values` nodes (its extension point: YAML.Composer)."""

    max_values = 0  # set on the subclass `compose` makes

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.composed = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.composed += 1
        if self.composed > self.max_values:
            raise TooManyValues(self.parser.peek_event().start_mark.line + 1, self.max_values)
        return super().compose_node(parent, index)


def compose(text: str, max_values: int) -> Iterator[Any]:
    """Every document's node, as ruamel.yaml composes them (round-trip: YAML 1.2), at most
    `max_values` nodes in all (TooManyValues beyond)."""

    class Limited(_BoundedComposer):
        pass

    Limited.max_values = max_values
    ruamel = YAML(typ="rt")
    ruamel.Composer = Limited
    yield from ruamel.compose_all(text)
