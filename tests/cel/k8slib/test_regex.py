"""The regex library against Kubernetes 1.34 (golden results).

A literal pattern is compiled when Kubernetes builds the program (a program error carrying Go's
regexp message: `compile_regex`); a pattern that is only known at evaluation time (here: a
comprehension variable) is compiled by the call and fails with "Illegal regex: ..." (`find`).
"""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import regex as R
from tests.cel.k8slib.golden_check import Case, check, ids, lit

# Kubernetes' documented examples (library/regex.go).
EXAMPLES: list[Case] = [
    ("'abc 123'.find('[0-9]+')", lambda: R.find("abc 123", "[0-9]+")),
    ("'abc 123'.find('xyz')", lambda: R.find("abc 123", "xyz")),
    ("'123 abc 456'.findAll('[0-9]+')", lambda: R.find_all("123 abc 456", "[0-9]+")),
    ("'123 abc 456'.findAll('[0-9]+', 1)", lambda: R.find_all("123 abc 456", "[0-9]+", 1)),
    ("'123 abc 456'.findAll('xyz')", lambda: R.find_all("123 abc 456", "xyz")),
]

SEARCHES = [
    ("baaab", "a*"),
    ("baaab", "a*?"),
    ("", "a*"),
    ("", ""),
    ("abc", ""),
    ("héllo wörld", "[^ ]*"),
    ("héllo wörld", "\\w+"),
    ("héllo wörld", "(?i)H\\S+"),
    ("a\nb\nc", "^[a-z]$"),
    ("a\nb\nc", "(?m)^[a-z]$"),
    ("a\nb", "a.b"),
    ("a\nb", "(?s)a.b"),
    ("aaa", "a{2}"),
    ("aaa", "a{2,}"),
    ("aaa", "(a|aa)"),
    ("foobar", "(?U)o+"),
    ("ab ab", "\\bab"),
    ("xabab", "(ab)+"),
    ("日本語", "."),
    ("日本語", ""),
    ("Kelvin K", "(?i)k"),
    ("\u017f s S", "(?i)s"),
    ("1.2.3", "\\d\\.\\d"),
    ("x*y", "\\Q*\\E"),
    ("tab\there", "\\s"),
    ("a\u000bb", "\\s"),
    ("ABC", "[[:lower:]]"),
    ("Ab1_", "[[:word:]]+"),
    ("αβγ", "\\p{Greek}+"),
    ("a1b2", "\\pN"),
    ("a1b2", "\\PN"),
    ("aaa", "a|"),
    ("abcabc", "(?P<x>b)c"),
    ("abcabc", "(?<x>b)c"),
    ("abc", "$"),
    ("abc", "^"),
    ("a\n", "a$"),
    ("ab", "a\\z"),
    ("aaaa", "aa"),
]

BAD_PATTERNS = [
    "(",
    "a(b",
    ")",
    "a)",
    "[a",
    "[z-a]",
    "a**",
    "a++",
    "*",
    "a|*",
    "x{1001}",
    "x{2,1}",
    "(a{500}){3}",
    "\\8",
    "\\Z",
    "\\C",
    "a\\",
    "(?=x)",
    "(?!x)",
    "(?<=x)",
    "(?P<>a)",
    "(?P<a-b>x)",
    "[[:foo:]]",
    "\\p{Foo}",
    "\\pX",
    "(?z)",
    "\\x{110000}",
    "[a-\\d]",
    "a{2}{3}",
    "(?'n'x)",
    "\\Q\\C\\E",
    "\\\\C",
]


def _search_cases() -> list[Case]:
    out: list[Case] = []
    for s, p in SEARCHES:
        pat = lit(p)
        out += [
            (f"{lit(s)}.find({pat})", lambda s=s, p=p: R.find(s, p)),
            (f"{lit(s)}.findAll({pat})", lambda s=s, p=p: R.find_all(s, p)),
            (f"{lit(s)}.findAll({pat}, 0)", lambda s=s, p=p: R.find_all(s, p, 0)),
            (f"{lit(s)}.findAll({pat}, 2)", lambda s=s, p=p: R.find_all(s, p, 2)),
            (f"{lit(s)}.findAll({pat}, -5)", lambda s=s, p=p: R.find_all(s, p, -5)),
        ]
    for p in BAD_PATTERNS:
        out.append((f"'abc'.find({lit(p)})", lambda p=p: R.compile_regex(p) and ""))
        out.append((f"'abc'.findAll({lit(p)})", lambda p=p: R.compile_regex(p) and []))
        out.append((f"[{lit(p)}].map(p, 'abc'.find(p))", lambda p=p: [R.find("abc", p)]))
        out.append((f"[{lit(p)}].map(p, 'abc'.findAll(p, 1))", lambda p=p: [R.find_all("abc", p, 1)]))
    return out


CASES: list[Case] = EXAMPLES + _search_cases()


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]


def test_compile_errors_carry_go_regexp_messages() -> None:
    with pytest.raises(R.RegexCompileError, match=r"^error parsing regexp: missing closing \): `a\(b`$"):
        R.compile_regex("a(b")


class _PublicOnly:
    """A compiled pattern seen only through google-re2's public API (the fallback of regex.search)."""

    def __init__(self, prog: object) -> None:
        self._prog = prog

    def search(self, s: str) -> object:
        return self._prog.search(s)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("text", "pattern"), SEARCHES)
def test_fast_search_agrees_with_the_public_api(text: str, pattern: str) -> None:
    prog = R.compile_regex(pattern)
    m = prog.search(text)
    want = m.group() if m else ""
    assert R.find_compiled(prog, text) == want == R.find_compiled(_PublicOnly(prog), text)
    assert R.search(prog, text) is (m is not None) is R.search(_PublicOnly(prog), text)
