"""libyaml's composer (the fast path) and ruamel.yaml's give equal documents, positions and errors.

parse_documents composes with libyaml whenever libyaml reads the text and falls back to ruamel.yaml
otherwise; these tests compare the two on every YAML/JSON file the project and the samples have and
on the odd cases of YAML, so that the fast path can change nothing a user sees.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from celkeeper.documents import parse as parse_module
from celkeeper.documents.parse import ParsedText, parse_documents
from tests.support import samples

ROOT = Path(__file__).resolve().parents[2]


def _files() -> list[Path]:
    roots = [ROOT / "examples", ROOT / "tests", ROOT / "deploy", ROOT / "crds"]
    if samples.present():
        roots.append(samples.library())
    return [
        p
        for r in roots
        if r.is_dir()
        for p in sorted(r.rglob("*"))
        if p.suffix in (".yaml", ".yml", ".json") and p.is_file()
    ]


def _same(value: Any) -> Any:
    """Data with NaN made comparable (NaN != NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return "<nan>"
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_same(v) for v in value]
    return value


def _view(parsed: ParsedText) -> tuple[Any, ...]:
    docs = tuple((d.file, d.index, repr(_same(d.data)), dict(d.spans), d.lines) for d in parsed.documents)
    return docs, tuple(str(e) for e in parsed.errors), tuple(repr(e.location) for e in parsed.errors)


def _by_ruamel(text: str, name: str) -> ParsedText:
    return parse_module._parse(text, name, parse_module._compose_ruamel)


def _by_libyaml(text: str, name: str) -> ParsedText:
    return parse_module._parse(text, name, parse_module._compose_libyaml)


def test_the_corpus_is_not_empty() -> None:
    assert len(_files()) > 20


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_file_gives_equal_documents_by_either_composer(path: Path) -> None:
    text = path.read_text()
    expected = _by_ruamel(text, path.name)
    assert _view(parse_documents(text, path.name)) == _view(expected)


ODD_CASES = {
    "folded and literal blocks, chomping": (
        "a: >\n  one\n  two\n\n  three\n"
        "b: |\n  x\n   y\n\n"
        "c: >-\n  p\n  q\n"
        "d: |+\n  keep\n\n"
        "e: >2\n   indented\n  less\n"
        "f: |\n  # not a comment\n  x: y\n"
    ),
    "scalars of the core schema": (
        "yes_: yes\nno_: no\non_: On\nint: 012\noct: 0o17\nhex: 0x1F\nbin: 0b101\nf: 1.5e3\n"
        "inf: -.inf\nnan: .NaN\nn: ~\nnull_: Null\nempty:\nts: 2001-12-14t21:59:43.10-05:00\n"
        "under: 1_000\nstr: !!str 123\ncustom: !thing 5\nnonspecific: ! 12\nquoted: '12'\nd: \"true\"\n"
        "eq: =\nsexa: 1:30\nplus: +12\ndot: .5\n"
    ),
    "merges, anchors and aliases": (
        "base: &b {x: 1, y: 2}\nlist: &l [1, 2]\nm:\n  <<: *b\n  y: 3\nn:\n  <<: [*b, {z: 4}]\nr: *l\n"
    ),
    "flow JSON with unicode and escapes": (
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ü☃𝄞"},'
        ' "data": {"k": "a\\tb\\u00e9\\n", "e": ""}}\n'
    ),
    "CRLF line ends": "a: 1\r\nb:\r\n  - x\r\n  - y\r\nc: |\r\n  l1\r\n  l2\r\n",
    "several documents, empty ones, comments, end markers": (
        "# only a comment\n---\n---\na: 1\n...\n---\n# c\n---\n- not a map\n---\nplain text\n---\nb: 2\n"
    ),
    "multi-line plain and quoted scalars": (
        "a: one\n  two\n\n  three\nb: 'it''s\n  folded'\nc: \"x\\\n  y \\\" z\"\nd: [a, b,\n  c]\n"
    ),
    "keys of every kind": "1: one\ntrue: t\n~: n\n'q': x\n\"dq\": y\n? explicit\n: v\nodd.key/x: 1\n",
    "duplicate keys (our error)": "a: 1\nb: 2\na: 3\n",
    "a complex key (our error)": "? [a, b]\n: v\n",
    "a bad merge (our error)": "a:\n  <<: 5\n",
    "tabs and trailing spaces": 'a:\t1   \nb: "\tx"\nc: x\t y\n',
    "a BOM": "\ufeffa: 1\nb: 2\n",
    "deep nesting and long lines": "a:\n"
    + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(30))
    + "  " * 31
    + "v: "
    + "x" * 5000
    + "\n",
    "syntax error after a good document": "a: 1\n---\nb: [1, 2\nc: 3\n",
    "a JSON stream": '{"a": 1}\n{"b": [1,\n 2]}\n',
    "a JSON stream YAML cannot read": '{"a": "x"}{"b":"\\/"}\n',
    "indentation error": "a:\n  b: 1\n c: 2\n",
    "undefined alias": "a: *nothing\n",
    "a directive (ruamel.yaml only)": "%YAML 1.1\n---\na: yes\n",
    "a tab as indentation": "a:\n\tb: 1\n",
    "aliases of aliases beyond the values budget": (
        "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
        "---\nnext: 1\n"
    ),
    "an unclosed quote": "a: 'x\n",
}


@pytest.mark.parametrize("name", list(ODD_CASES))
def test_odd_cases_give_equal_documents_and_errors(name: str) -> None:
    text = ODD_CASES[name]
    expected = _by_ruamel(text, "odd.yaml")
    assert _view(parse_documents(text, "odd.yaml")) == _view(expected)


def test_libyaml_reads_the_usual_texts_itself() -> None:
    # the fast path is taken (not only the fallback) for policies as people write them, and where it
    # is taken it gives what ruamel.yaml gives
    assert parse_module.LIBYAML  # PyYAML's wheels carry libyaml (built without it: ruamel.yaml only)
    readable = [n for n in ODD_CASES if _libyaml_reads(ODD_CASES[n])]
    for name in (
        "folded and literal blocks, chomping",
        "flow JSON with unicode and escapes",
        "merges, anchors and aliases",
        "CRLF line ends",
        "several documents, empty ones, comments, end markers",
        "duplicate keys (our error)",
        "aliases of aliases beyond the values budget",
    ):
        assert name in readable
    for name in ("tabs and trailing spaces", "a directive (ruamel.yaml only)", "indentation error"):
        assert name not in readable
    for name in readable:
        text = ODD_CASES[name]
        assert _view(_by_libyaml(text, "odd.yaml")) == _view(_by_ruamel(text, "odd.yaml"))
    files = _files()
    assert sum(_libyaml_reads(p.read_text()) for p in files) >= 0.8 * len(files)


def _libyaml_reads(text: str) -> bool:
    if "\t" in text or text.startswith("%") or "\n%" in text:
        return False
    try:
        _by_libyaml(text, "odd.yaml")
    except parse_module._RuamelDecides:
        return False
    return True


def test_libyaml_resolves_yaml_12_types_by_ruamels_own_table() -> None:
    # parse.py carries a copy of ruamel.yaml's YAML 1.2 table (so that the libyaml path need not import
    # ruamel.yaml): it must be the table ruamel.yaml resolves with, entry for entry, in its order
    from ruamel.yaml.resolver import implicit_resolvers

    theirs = [
        (tag, regexp.pattern, regexp.flags, tuple(first))
        for versions, tag, regexp, first in implicit_resolvers
        if (1, 2) in versions
    ]
    ours = [
        (tag, pattern, re.compile(pattern, flags).flags, first)
        for tag, pattern, flags, first in parse_module.YAML12_IMPLICIT
    ]
    assert ours == theirs


def test_reading_what_libyaml_reads_does_not_import_ruamel_yaml() -> None:
    # start-up cost of the command-line tools (bench/verify.py): ruamel.yaml loads only for a text that
    # goes to it
    script = (
        "import sys\n"
        "from celkeeper.documents import parse_documents\n"
        "parsed = parse_documents('a: 1\\nb: [x, {c: null}]\\n', 'plain.yaml')\n"
        "assert parsed.documents[0].data == {'a': 1, 'b': ['x', {'c': None}]}, parsed\n"
        "print(sorted(m for m in sys.modules if m.startswith('ruamel')))\n"
        "parse_documents('%YAML 1.2\\n---\\na: 1\\n', 'directive.yaml')\n"
        "print('ruamel.yaml' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True"]
