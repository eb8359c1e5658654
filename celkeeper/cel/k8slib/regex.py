"""Kubernetes' CEL regex library (k8s.io/apiserver/pkg/cel/library/regex.go, 1.34): `find` and `findAll`
with Go regexp semantics, run on RE2 (the `re2` module of google-re2; linear time, same syntax family).

Go's FindAllString differs from Python's finditer: an empty match right after the previous match is
skipped. Compile errors carry Go's regexp/syntax message ("error parsing regexp: <code>: `<expr>`"),
translated from RE2's error codes; the runtime form Kubernetes reports is "Illegal regex: <that>".
"""

from __future__ import annotations

from typing import Any

import re2

from celkeeper.cel.k8slib import LibraryError

# RE2's error text prefix -> Go's regexp/syntax ErrorCode.
_CODES = {
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "missing ]": "missing closing ]",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
    "invalid character class range": "invalid character class range",
    "invalid character class": "invalid character class",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid escape sequence": "invalid escape sequence",
    "invalid UTF-8": "invalid UTF-8",
    "pattern too large - compile failed": "expression too large",
}


class RegexCompileError(LibraryError):
    """A pattern Go's regexp.Compile rejects; str() is Go's error text."""


def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False
    return opts


_OPTIONS = _options()
# google-re2's binding (RE2::Match without the Python match objects); None if it ever moves
_UNANCHORED = getattr(
    getattr(getattr(getattr(re2, "_re2", None), "RE2", None), "Anchor", None), "UNANCHORED", None
)


def _is_capture_name(name: str) -> bool:
    return bool(name) and all(c == "_" or (c.isascii() and c.isalnum()) for c in name)


def _go_error(pattern: str, re2_message: str) -> str:
    head, _, arg = re2_message.partition(": ")
    if head == "invalid perl operator" and arg.startswith("(?<"):
        # RE2 reads (?<= and (?<! as look-behind; Go (1.22+) reads "(?<" as a named group and fails on
        # the name.
        t = pattern[pattern.find(arg) :]
        end = t.find(">")
        if end < 0 or not _is_capture_name(t[3:end]):
            return f"error parsing regexp: invalid named capture: `{t if end < 0 else t[: end + 1]}`"
    if re2_message.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    head, sep, arg = re2_message.partition(": ")
    code = _CODES.get(head)
    if code is None:
        return f"error parsing regexp: {re2_message}"
    if not sep:
        arg = pattern
    return f"error parsing regexp: {code}: `{arg}`"


def _go_only_rejection(pattern: str) -> str | None:
    """What Go rejects but RE2 accepts: the \\C (any byte) escape."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] != "\\":
            i += 1
            continue
        nxt = pattern[i + 1]
        if nxt == "Q":
            end = pattern.find("\\E", i + 2)
            if end < 0:
                return None
            i = end + 2
            continue
        if nxt == "C":
            return "error parsing regexp: invalid escape sequence: `\\C`"
        i += 2
    return None


def compile_regex(pattern: str) -> Any:
    """regexp.Compile: a compiled RE2 program, or RegexCompileError with Go's message."""
    rejected = _go_only_rejection(pattern)
    if rejected:
        raise RegexCompileError(rejected)
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        msg = e.args[0] if e.args else ""
        text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
        raise RegexCompileError(_go_error(pattern, text)) from None


def compile_pattern(pattern: str) -> Any:
    """A pattern as find/findAll compile it at run time: LibraryError "Illegal regex: ..." if invalid."""
    try:
        return compile_regex(pattern)
    except RegexCompileError as e:
        raise LibraryError(f"Illegal regex: {e}") from None


def _first_span(prog: Any, s: str) -> tuple[bytes, int, int] | None:
    """The UTF-8 text and byte span of the leftmost match, straight from RE2 (google-re2's `search`
    builds a Python match object and maps offsets back to characters: ~10x the cost); None if no
    match. Falls back to the public API if the wrapper's layout ever changes."""
    regexp = getattr(prog, "_regexp", None)
    if regexp is None or _UNANCHORED is None:
        m = prog.search(s)
        if m is None:
            return None
        text = m.group().encode("utf-8", "surrogatepass")
        return text, 0, len(text)
    text = s.encode("utf-8")
    start, end = regexp.Match(_UNANCHORED, text, 0, len(text))[0]
    return None if start < 0 else (text, start, end)


def search(prog: Any, s: str) -> bool:
    """Whether `prog` matches somewhere in `s` (CEL's `matches`: RE2 partial match)."""
    return _first_span(prog, s) is not None


def find_compiled(prog: Any, s: str) -> str:
    span = _first_span(prog, s)
    if span is None:
        return ""
    text, start, end = span
    return text[start:end].decode("utf-8", "surrogatepass")


def find_all_compiled(prog: Any, s: str, n: int = -1) -> list[str]:
    """Go's Regexp.FindAllString(s, n) (n < 0: all matches)."""
    if n < 0:
        n = len(s) + 1
    out: list[str] = []
    pos, prev_end, end = 0, -1, len(s)
    while len(out) < n and pos <= end:
        m = prog.search(s, pos)
        if m is None:
            break
        start, stop = m.span()
        accept = True
        if stop == pos:
            if start == prev_end:
                accept = False
            pos += 1  # one rune (Python str indices are code points)
        else:
            pos = stop
        prev_end = stop
        if accept:
            out.append(s[start:stop])
    return out


def find(s: str, pattern: str) -> str:
    """<string>.find(<regex>): the first match, or "" when there is none."""
    return find_compiled(compile_pattern(pattern), s)


def find_all(s: str, pattern: str, n: int = -1) -> list[str]:
    """<string>.findAll(<regex>) and <string>.findAll(<regex>, <int>)."""
    return find_all_compiled(compile_pattern(pattern), s, n)
