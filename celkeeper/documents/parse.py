"""Parsing YAML 1.2 / JSON text into Documents (positions for every field).

Two composers give the same node trees: libyaml's (C, through PyYAML) with YAML 1.2's implicit
types taken from ruamel.yaml's own table, and ruamel.yaml's (pure Python, ~40x slower). libyaml
composes the texts it reads without error, except where the two are known to differ, which go to
ruamel.yaml whole: a text libyaml refuses (ruamel.yaml words the error), one with a directive
(`%YAML 1.1` changes the types in ruamel.yaml), one with a tab (ruamel.yaml refuses some that
libyaml reads), one with an empty plain value (`key:` alone: the two place it differently) and one
too long to be sure it holds at most MAX_VALUES values (ruamel.yaml's composer counts them).
tests/documents/test_parse_composers.py checks that parse_documents gives what ruamel.yaml alone
gives on every YAML/JSON file of the project and the samples and on the odd cases of YAML.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml.resolver
from yaml import YAMLError as LibyamlError

from celkeeper.documents.document import Document, Span, index_path, key_path
from celkeeper.errors import DocumentError, Location
from celkeeper.model import JsonObject

# a node of either composer: they share attribute names (id: "scalar", "sequence" or "mapping"; tag,
# value, style, start_mark, end_mark)
_Node = Any
Composer_ = Callable[[str], Iterator[Any]]

#: YAML 1.2's implicit types as ruamel.yaml resolves them: the (1, 2) entries of its table
#: (ruamel.yaml.resolver.implicit_resolvers), in its order, copied so that the libyaml path does not
#: import ruamel.yaml; tests/documents/test_parse_composers.py checks the copy against the table
YAML12_IMPLICIT: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("tag:yaml.org,2002:bool", "^(?:true|True|TRUE|false|False|FALSE)$", re.X, ("t", "T", "f", "F")),
    (
        "tag:yaml.org,2002:float",
        "^(?:\n         [-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+]?[0-9]+)?\n        "
        "|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)\n        |[-+]?\\.[0-9_]+(?:[eE][-+][0-9]+)?\n        "
        "|[-+]?\\.(?:inf|Inf|INF)\n        |\\.(?:nan|NaN|NAN))$",
        re.X,
        ("-", "+", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "."),
    ),
    (
        "tag:yaml.org,2002:int",
        "^(?:[-+]?0b[0-1_]+\n        |[-+]?0o?[0-7_]+\n        |[-+]?[0-9_]+\n        "
        "|[-+]?0x[0-9a-fA-F_]+)$",
        re.X,
        ("-", "+", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"),
    ),
    ("tag:yaml.org,2002:merge", "^(?:<<)$", 0, ("<",)),
    ("tag:yaml.org,2002:null", "^(?: ~\n        |null|Null|NULL\n        | )$", re.X, ("~", "n", "N", "")),
    (
        "tag:yaml.org,2002:timestamp",
        "^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]\n        "
        "|[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?\n        (?:[Tt]|[ \\t]+)[0-9][0-9]?\n        "
        ":[0-9][0-9] :[0-9][0-9] (?:\\.[0-9]*)?\n        (?:[ \\t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
        re.X,
        ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9"),
    ),
    ("tag:yaml.org,2002:value", "^(?:=)$", 0, ("=",)),
    ("tag:yaml.org,2002:yaml", "^(?:!|&|\\*)$", 0, ("!", "&", "*")),
)


class _Resolver12(yaml.resolver.BaseResolver):
    """YAML 1.2's implicit types exactly as ruamel.yaml resolves them (its table, its order).

    libyaml's composer asks for every node's tag (`resolve`) and tells every step in and out of a
    collection (`descend_resolver`, `ascend_resolver`): with no path resolvers, BaseResolver's answers are
    those below, looked up by a scalar's first character in _BY_FIRST (its resolvers, then those for any
    character, as BaseResolver concatenates them on each call)."""

    _BY_FIRST: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {}
    _ANY_FIRST: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not yaml.nodes.ScalarNode:
            return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        if implicit[0]:
            for tag, pattern in self._BY_FIRST.get(value[0] if value else "", self._ANY_FIRST):
                if pattern.match(value):
                    return tag
        return self.DEFAULT_SCALAR_TAG


for _tag, _pattern, _flags, _first in YAML12_IMPLICIT:
    _Resolver12.add_implicit_resolver(_tag, re.compile(_pattern, _flags), list(_first))
_Resolver12._ANY_FIRST = tuple(_Resolver12.yaml_implicit_resolvers.get(None, []))
_Resolver12._BY_FIRST = {
    first: tuple(resolvers) + _Resolver12._ANY_FIRST
    for first, resolvers in _Resolver12.yaml_implicit_resolvers.items()
    if first is not None
}


try:  # libyaml's parser and composer (PyYAML's wheels carry it)
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml: ruamel.yaml composes all
    CParser = None  # type: ignore[misc,assignment]

LIBYAML = CParser is not None


if LIBYAML:

    class _LibyamlComposer(CParser, _Resolver12):
        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            _Resolver12.__init__(self)


@dataclass(frozen=True)
class ParsedText:
    """The documents of one text, and the errors that stopped parts of it from being read."""

    documents: tuple[Document, ...]
    errors: tuple[DocumentError, ...]


def parse_documents(text: str, name: str) -> ParsedText:
    """Parse a YAML 1.2 or JSON text (one or more documents) read from `name` (shown in errors).

    Empty documents are skipped (but counted, so document numbers match the file). A syntax error
    ends the text: the documents before it are returned along with the error. A document that is not
    a mapping is reported and left out.
    """
    # texts libyaml may compose: a value that is not empty takes at least two characters (itself or
    # its brackets, and a separator or indicator), so a text of at most MAX_VALUES characters holds
    # about half as many values (empty plain values go to ruamel.yaml anyway); longer texts go to
    # ruamel.yaml, whose composer counts the values and says where it stopped
    if LIBYAML and len(text) <= MAX_VALUES and not (text.startswith("%") or "\n%" in text or "\t" in text):
        try:
            return _parse(text, name, _compose_libyaml)
        except _RuamelDecides:
            pass
    return _parse(text, name, _compose_ruamel)


class _RuamelDecides(Exception):
    """libyaml's reading of the text may differ from ruamel.yaml's: ruamel.yaml composes it."""


def _parse(text: str, name: str, compose: Composer_) -> ParsedText:
    lines = tuple(text.splitlines())
    documents: list[Document] = []
    errors: list[DocumentError] = []
    index = 0
    budget = _Budget(len(text) + 1000)
    try:
        for node in compose(text):
            index += 1
            _collect(node, name, index, lines, documents=documents, errors=errors, budget=budget)
    except _RuamelDecides:
        raise
    except Exception as err:  # ruamel.yaml's errors (libyaml's become _RuamelDecides)
        from celkeeper.documents import composer

        if isinstance(err, composer.TooManyValues):
            errors.append(DocumentError(str(err), Location(file=name, document=index + 1, line=err.line)))
        elif isinstance(err, composer.MarkedYAMLError):
            if _looks_like_json_stream(text, name):
                return _parse_json_stream(text, name)
            errors.append(_syntax_error(err, name, index + 1))
        elif isinstance(err, composer.YAMLError) and hasattr(err, "reason"):  # ruamel's ReaderError
            errors.append(_reader_error(err, text, name))
        elif isinstance(err, composer.YAMLError):  # pragma: no cover - ruamel marks syntax problems
            message = " ".join(str(err).split())
            errors.append(DocumentError(f"cannot parse: {message}", Location(file=name, document=index + 1)))
        else:
            raise
    return ParsedText(tuple(documents), tuple(errors))


def parse_sources(sources: Iterable[tuple[str, str]]) -> ParsedText:
    """Parse several (name, text) pairs; documents and errors of all of them, in order."""
    documents: list[Document] = []
    errors: list[DocumentError] = []
    for name, text in sources:
        parsed = parse_documents(text, name)
        documents.extend(parsed.documents)
        errors.extend(parsed.errors)
    return ParsedText(tuple(documents), tuple(errors))


class _Budget:
    """Values a text may expand to. Without aliases a text has fewer values than characters; YAML
    aliases can make a few hundred bytes expand to billions ("billion laughs"): conversion stops
    once a text's values outnumber its characters, so parsing stays linear in time and memory."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = self.left = limit

    def take(self, node: _Node, offset: int) -> None:
        self.left -= 1
        if self.left < 0:
            raise DocumentError(
                f"the document expands to more than {self.limit} values (aliases of aliases?): not read",
                Location(line=node.start_mark.line + 1 + offset, column=node.start_mark.column + 1),
            )


#: values (maps, lists, scalars) one text may hold: beyond, it is not read. Parsing costs ~50 us and
#: ~1 KB per value (ruamel's composer and the positions kept for every field), so this bounds it to
#: seconds and a few hundred MB whatever the text's shape; policies hold ~1 value per 10 bytes.
MAX_VALUES = 300_000


def _compose_libyaml(text: str) -> Iterator[Any]:
    """Every document's node; raises _RuamelDecides where libyaml refuses the text."""
    composer = _LibyamlComposer(text)
    try:
        nodes = []
        while composer.check_node():
            nodes.append(composer.get_node())
    except (LibyamlError, ValueError):
        raise _RuamelDecides() from None
    finally:
        composer.dispose()
    return iter(nodes)


def _compose_ruamel(text: str) -> Iterator[Any]:
    from celkeeper.documents import composer  # imports ruamel.yaml: only texts that need it

    return composer.compose(text, MAX_VALUES)


def _collect(
    node: _Node | None,
    name: str,
    index: int,
    lines: tuple[str, ...],
    *,
    documents: list[Document],
    errors: list[DocumentError],
    budget: _Budget,
    line_offset: int = 0,
) -> None:
    if node is None:
        return
    if node.id == "scalar" and _scalar(node) is None:
        return  # an empty document (`---` alone, or only comments)
    spans: dict[str, Span] = {}
    try:
        data = _convert(node, "", spans, line_offset, None, budget=budget)
    except DocumentError as err:
        errors.append(err.at(file=name, document=index))
        return
    if not isinstance(data, dict):
        line, column = node.start_mark.line + 1 + line_offset, node.start_mark.column + 1
        errors.append(
            DocumentError(
                f"a document must be a mapping (an object with apiVersion and kind), not {_type_name(data)}",
                Location(file=name, document=index, line=line, column=column),
            )
        )
        return
    documents.append(Document(file=name, index=index, data=data, spans=spans, lines=lines))


def _convert(
    node: _Node,
    path: str,
    spans: dict[str, Span],
    offset: int,
    key: tuple[int, int] | None,
    *,
    budget: _Budget,
) -> Any:
    budget.take(node, offset)
    start, end = node.start_mark, node.end_mark
    kind = node.id
    style = node.style if kind == "scalar" else None
    if style == "" and node.value == "":  # libyaml's empty plain value: placed unlike ruamel.yaml's
        raise _RuamelDecides()
    # positionally (line, column, end_line, key_line, key_column, style): ~0.3 us a value sooner
    spans[path] = Span(
        start.line + 1 + offset,
        start.column + 1,
        end.line + 1 + offset,
        key[0] if key else None,
        key[1] if key else None,
        style if style in ("'", '"', "|", ">") else None,
    )
    if kind == "mapping":
        return _convert_mapping(node, path, spans, offset, budget)
    if kind == "sequence":
        return [
            _convert(item, index_path(path, i), spans, offset, None, budget=budget)
            for i, item in enumerate(node.value)
        ]
    assert kind == "scalar"
    return _scalar(node)


def _convert_mapping(
    node: Any, path: str, spans: dict[str, Span], offset: int, budget: _Budget
) -> JsonObject:
    result: JsonObject = {}
    seen: dict[str, int] = {}
    merged: list[tuple[Any, Any]] = []
    for key_node, value_node in node.value:
        if key_node.id == "scalar" and key_node.tag == "tag:yaml.org,2002:merge":
            merged.append((key_node, value_node))
            continue
        if key_node.id != "scalar":
            raise DocumentError(
                "a map key must be a string, not a list or map",
                Location(
                    path=path or None,
                    line=key_node.start_mark.line + 1 + offset,
                    column=key_node.start_mark.column + 1,
                ),
            )
        key = key_node.value if isinstance(key_node.value, str) else str(key_node.value)
        key_line = key_node.start_mark.line + 1 + offset
        if key in seen:
            raise DocumentError(
                f"duplicate key {key!r} (first at line {seen[key]})",
                Location(path=key_path(path, key), line=key_line, column=key_node.start_mark.column + 1),
            )
        seen[key] = key_line
        child = key_path(path, key)
        where = (key_line, key_node.start_mark.column + 1)
        result[key] = _convert(value_node, child, spans, offset, where, budget=budget)
    for _key_node, value_node in merged:  # YAML merge keys: explicit keys win
        sources = value_node.value if value_node.id == "sequence" else [value_node]
        for source in sources:
            if source.id != "mapping":
                raise DocumentError(
                    "a merge key (<<) needs a map or a list of maps",
                    Location(
                        path=path or None,
                        line=source.start_mark.line + 1 + offset,
                        column=source.start_mark.column + 1,
                    ),
                )
            scratch: dict[str, Span] = {}
            for k, v in _convert_mapping(source, path, scratch, offset, budget).items():
                result.setdefault(k, v)
            for p, s in scratch.items():
                spans.setdefault(p, s)
    return result


def _scalar(node: Any) -> Any:
    tag = str(node.tag or "")
    value: str = node.value
    if node.style or not tag.startswith("tag:yaml.org,2002:"):  # plain: None (ruamel), "" (libyaml)
        if node.style == ">":
            return value.replace("\a", "")
        return value
    kind = tag[len("tag:yaml.org,2002:") :]
    if kind == "null":
        return None
    if kind == "bool":
        return value.lower() == "true"
    try:
        if kind == "int":
            return _int(value)
        if kind == "float":
            return _float(value)
    except ValueError:  # what the pattern takes and no number is (`-_`, `0x_`, `!!int abc`): as written
        return value
    return value  # str, timestamp (kept as written, as Kubernetes does), binary, ...


def _int(text: str) -> int:
    clean = text.replace("_", "")
    sign = -1 if clean.startswith("-") else 1
    digits = clean.lstrip("+-")
    lowered = digits.lower()
    if lowered.startswith("0o"):
        return sign * int(digits[2:], 8)
    if lowered.startswith("0x"):
        return sign * int(digits[2:], 16)
    if lowered.startswith("0b"):
        return sign * int(digits[2:], 2)
    return sign * int(digits, 10)


def _float(text: str) -> float:
    lowered = text.replace("_", "").lower()
    if lowered in (".nan",):
        return math.nan
    if lowered.endswith(".inf"):
        return -math.inf if lowered.startswith("-") else math.inf
    return float(lowered)


def _type_name(data: Any) -> str:
    if isinstance(data, list):
        return "a list"
    if isinstance(data, str):
        return "a string"
    if isinstance(data, bool):
        return "a boolean"
    if isinstance(data, int | float):
        return "a number"
    return "null" if data is None else type(data).__name__


def _syntax_error(err: Any, name: str, index: int) -> DocumentError:
    """A ruamel.yaml MarkedYAMLError as a DocumentError."""
    mark = err.problem_mark or err.context_mark
    problem = err.problem or err.context or "invalid YAML"
    if err.context and err.problem:
        problem = f"{problem} ({err.context})"
    line = mark.line + 1 if mark is not None else None
    column = mark.column + 1 if mark is not None else None
    return DocumentError(
        f"YAML/JSON syntax error: {problem}",
        Location(file=name, document=index, line=line, column=column),
    )


def _reader_error(err: Any, text: str, name: str) -> DocumentError:
    """A character YAML does not allow (a NUL, a control character), at its line:col in the text."""
    position = min(max(int(getattr(err, "position", 0) or 0), 0), len(text))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    character = getattr(err, "character", None)
    if isinstance(character, str) and len(character) == 1:
        character = ord(character)
    what = f"#x{character:04x}" if isinstance(character, int) else repr(character)
    where = Location(file=name, line=line, column=column)
    return DocumentError(f"cannot read: unacceptable character {what}: {err.reason}", where)


def _looks_like_json_stream(text: str, name: str) -> bool:
    """Concatenated JSON objects (`{...}{...}` or one per line) are not YAML but are common."""
    stripped = text.lstrip()
    return stripped.startswith("{") and (name.endswith(".json") or stripped.rstrip().endswith("}"))


def _parse_json_stream(text: str, name: str) -> ParsedText:
    decoder = json.JSONDecoder()
    documents: list[Document] = []
    errors: list[DocumentError] = []
    lines = tuple(text.splitlines())
    position, index = 0, 0
    budget = _Budget(len(text) + 1000)
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            break
        index += 1
        line = text.count("\n", 0, position) + 1
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            errors.append(
                DocumentError(
                    f"JSON syntax error: {err.msg}",
                    Location(file=name, document=index, line=err.lineno, column=err.colno),
                )
            )
            break
        chunk = text[position:end]
        # keep columns right: pad the chunk's first line with the text before it on that line
        line_start = text.rfind("\n", 0, position) + 1
        padded = " " * (position - line_start) + chunk
        from celkeeper.documents import composer

        try:
            for node in composer.compose(padded, MAX_VALUES):
                _collect(
                    node,
                    name,
                    index,
                    lines,
                    documents=documents,
                    errors=errors,
                    budget=budget,
                    line_offset=line - 1,
                )
        except (
            composer.MarkedYAMLError
        ):  # JSON that YAML does not read: keep the data, without field positions
            if isinstance(value, dict):
                spans = {"": Span(line=line, column=position - line_start + 1, end_line=line)}
                documents.append(Document(file=name, index=index, data=value, spans=spans, lines=lines))
            else:
                errors.append(
                    DocumentError(
                        "a document must be a mapping (an object with apiVersion and kind), not "
                        + _type_name(value),
                        Location(file=name, document=index, line=line, column=position - line_start + 1),
                    )
                )
        position = end
    return ParsedText(tuple(documents), tuple(errors))
