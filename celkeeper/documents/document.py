"""Documents and field paths: a document's plain data and where each field is in its file."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from celkeeper.errors import CelkeeperError, Location
from celkeeper.model import JsonValue

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")

E = TypeVar("E", bound=CelkeeperError)


def key_path(path: str, key: str) -> str:
    """`path` extended by a map key: `spec` + `match` -> `spec.match`; odd keys in brackets."""
    if _IDENT.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key}]"


def index_path(path: str, index: int) -> str:
    """`path` extended by a list index: `spec.targets` + 0 -> `spec.targets[0]`."""
    return f"{path}[{index}]"


def field_path(*parts: str | int) -> str:
    """Build a field path from keys and indexes: field_path('spec', 'targets', 0) -> spec.targets[0]."""
    path = ""
    for part in parts:
        path = index_path(path, part) if isinstance(part, int) else key_path(path, part)
    return path


def parent_path(path: str) -> str | None:
    """The enclosing field path (`a.b[0]` -> `a.b`, `a.b` -> `a`, `a` -> ``), None for the root."""
    if not path:
        return None
    if path.endswith("]"):
        return path[: path.rindex("[")]
    dot = path.rfind(".")
    bracket = path.rfind("]")
    if dot > bracket:
        return path[:dot]
    return path[: bracket + 1] if bracket >= 0 else ""


@dataclass(frozen=True)
class Span:
    """Where a value is in its file (1-based), the key that names it, and how a scalar is written."""

    line: int
    column: int
    end_line: int = 0
    key_line: int | None = None
    key_column: int | None = None
    style: str | None = None  # scalar style: None (plain), "'", '"', "|", ">"


@dataclass(frozen=True, eq=False)
class Document:
    """One YAML/JSON document: plain data plus where each field is in the file."""

    file: str
    index: int  # 1-based position of the document in its file
    data: JsonValue
    spans: Mapping[str, Span] = field(default_factory=dict, repr=False)
    lines: tuple[str, ...] = field(default=(), repr=False)

    def __repr__(self) -> str:
        return f"Document({self.file!r}, {self.index}, {self.api_version}/{self.kind} {self.name!r})"

    @classmethod
    def from_object(cls, data: JsonValue, file: str = "<object>", index: int = 1) -> Document:
        """A document built from data that was never text (e.g. an object read from the cluster)."""
        return cls(file=file, index=index, data=data)

    # -- the Kubernetes identity of the document ------------------------------------------------
    @property
    def api_version(self) -> str:
        value = self.data.get("apiVersion") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def kind(self) -> str:
        value = self.data.get("kind") if isinstance(self.data, dict) else None
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str:
        meta = self.data.get("metadata") if isinstance(self.data, dict) else None
        value = meta.get("name") if isinstance(meta, dict) else None
        return value if isinstance(value, str) else ""

    # -- locations --------------------------------------------------------------------------------
    def span(self, path: str) -> Span | None:
        """The span of `path`, or of its nearest enclosing field that has one."""
        current: str | None = path
        while current is not None:
            found = self.spans.get(current)
            if found is not None:
                return found
            current = parent_path(current)
        return None

    def location(self, path: str = "", *, key: bool = False) -> Location:
        """Where `path` is (its value; with key=True the key that names it, when there is one).

        A path that does not exist is located at its nearest enclosing field.
        """
        exact = self.spans.get(path)
        span = exact or self.span(path)
        line = column = None
        if span is not None:
            if (key or exact is None) and span.key_line is not None:
                line, column = span.key_line, span.key_column
            else:
                line, column = span.line, span.column
        return Location(file=self.file, document=self.index, path=path or None, line=line, column=column)

    def error(self, cls: type[E], message: str, path: str = "", *, key: bool = False) -> E:
        """An error of class `cls` located at `path` of this document."""
        return cls(message, self.location(path, key=key))

    def expression_position(self, path: str, line: int, column: int) -> tuple[int, int] | None:
        """The file line:col of position line:col (1-based) inside the string scalar at `path`.

        Exact for literal blocks (`|`) and single-line scalars; follows line folding for plain,
        quoted and folded (`>`) multi-line scalars (escapes in double quotes are not unfolded).
        None when the scalar or its text is unknown.
        """
        span = self.spans.get(path)
        if span is None or not self.lines or line < 1 or column < 1:
            return None
        if span.style == "|":
            first = span.line + 1  # content starts on the line after the indicator
            indent = _block_indent(self.lines, first - 1)
            return first + line - 1, indent + column
        if span.style == ">":
            first = span.line + 1
            indent = _block_indent(self.lines, first - 1)
            segments = [(n, indent + 1) for n in range(first, max(span.end_line, first + 1))]
        else:
            quote = 1 if span.style in ("'", '"') else 0
            segments = [(span.line, span.column + quote)]
            for n in range(span.line + 1, max(span.end_line, span.line) + 1):
                text = self.lines[n - 1] if n - 1 < len(self.lines) else ""
                segments.append((n, len(text) - len(text.lstrip()) + 1))
        # walk the folded text: each source segment contributes its text plus one joining space
        remaining = column
        for number, start in segments:
            if number - 1 >= len(self.lines):
                break
            text = self.lines[number - 1].rstrip()
            length = max(len(text) - (start - 1), 0)
            if remaining <= length + 1 or (number, start) == segments[-1]:
                return number, start + remaining - 1
            remaining -= length + 1
        return span.line, span.column


def _block_indent(lines: tuple[str, ...], first: int) -> int:
    for text in lines[first:]:
        if text.strip():
            return len(text) - len(text.lstrip(" "))
    return 0
