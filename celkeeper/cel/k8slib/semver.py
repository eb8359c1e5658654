"""Kubernetes' CEL semver library, version 1 (k8s.io/apiserver/pkg/cel/library/semverlib.go, 1.34) over a
port of github.com/blang/semver/v4 Parse and Compare.

Version 1 adds the normalising forms `semver(s, true)` / `isSemver(s, true)`: a leading "v" is dropped,
leading zeros are trimmed and missing minor/patch parts become 0 ("v1.02" -> 1.2.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from celkeeper.cel.k8slib import LibraryError
from celkeeper.cel.k8slib.gostrings import go_parse_uint_error, go_quote, parse_go_int, wrap_int64

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-0123456789")
_DELETE = {chars: str.maketrans("", "", "".join(chars)) for chars in (_NUMBERS, _ALPHANUM)}


@dataclass(frozen=True, slots=True)
class PRVersion:
    """A pre-release identifier: numeric (num) or alphanumeric (text)."""

    text: str
    num: int
    is_num: bool

    def __str__(self) -> str:
        return str(self.num) if self.is_num else self.text


@dataclass(frozen=True, slots=True)
class Semver:
    """semver.Version. Build metadata is kept but never compared."""

    major: int
    minor: int
    patch: int
    pre: tuple[PRVersion, ...] = ()
    build: tuple[str, ...] = ()

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            s += "+" + ".".join(self.build)
        return s


def _contains_only(s: str, allowed: frozenset[str]) -> bool:
    return not s.translate(_DELETE[allowed]) if s.isascii() else all(ch in allowed for ch in s)


def _has_leading_zeroes(s: str) -> bool:
    return len(s) > 1 and s[0] == "0"


def _parse_uint(s: str) -> int:
    value = parse_go_int(s, unsigned=True)  # strconv.ParseUint(s, 10, 64)
    if value is None:
        raise LibraryError(go_parse_uint_error(s))
    return value


def _numeric_part(s: str, what: str) -> int:
    if not _contains_only(s, _NUMBERS):
        raise LibraryError(f"Invalid character(s) found in {what} number {go_quote(s)}")
    if _has_leading_zeroes(s):
        raise LibraryError(f"{what.capitalize()} number must not contain leading zeroes {go_quote(s)}")
    return _parse_uint(s)


def _pr_version(s: str) -> PRVersion:
    if not s:
        raise LibraryError("Prerelease is empty")
    if _contains_only(s, _NUMBERS):
        if _has_leading_zeroes(s):
            raise LibraryError(f"Numeric PreRelease version must not contain leading zeroes {go_quote(s)}")
        return PRVersion("", _parse_uint(s), True)
    if _contains_only(s, _ALPHANUM):
        return PRVersion(s, 0, False)
    raise LibraryError(f"Invalid character(s) found in prerelease {go_quote(s)}")


def parse(s: str) -> Semver:
    """semver.Parse (strict semver 2.0.0)."""
    if not s:
        raise LibraryError("Version string empty")
    parts = s.split(".", 2)
    if len(parts) != 3:
        raise LibraryError("No Major.Minor.Patch elements found")
    major = _numeric_part(parts[0], "major")
    minor = _numeric_part(parts[1], "minor")
    patch_str = parts[2]
    build: list[str] = []
    pre: list[str] = []
    if "+" in patch_str:
        patch_str, _, b = patch_str.partition("+")
        build = b.split(".")
    if "-" in patch_str:
        patch_str, _, p = patch_str.partition("-")
        pre = p.split(".")
    patch = _numeric_part(patch_str, "patch")
    prs = tuple(_pr_version(p) for p in pre)
    for b in build:
        if not b:
            raise LibraryError("Build meta data is empty")
        if not _contains_only(b, _ALPHANUM):
            raise LibraryError(f"Invalid character(s) found in build meta data {go_quote(b)}")
    return Semver(major, minor, patch, prs, tuple(build))


def _normalize(s: str) -> str:
    """normalizeAndParse's rewriting (blang's ParseTolerant without the whitespace trim)."""
    if s.startswith("v"):
        s = s[1:]
    parts = s.split(".", 2)
    for i, part in enumerate(parts):
        if len(part.encode("utf-8", "surrogatepass")) > 1:
            trimmed = part.lstrip("0")
            if not trimmed or trimmed[0] not in _NUMBERS:
                trimmed = "0" + trimmed
            parts[i] = trimmed
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise LibraryError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def semver(s: str, normalize: bool = False) -> Semver:
    """semver(<string>) and semver(<string>, <bool>)."""
    return parse(_normalize(s) if normalize else s)


def is_semver(s: str, normalize: bool = False) -> bool:
    """isSemver(<string>) and isSemver(<string>, <bool>)."""
    try:
        semver(s, normalize)
    except LibraryError:
        return False
    return True


def _pr_compare(a: PRVersion, b: PRVersion) -> int:
    if a.is_num != b.is_num:
        return -1 if a.is_num else 1
    if a.is_num:
        return (a.num > b.num) - (a.num < b.num)
    ab, bb = a.text.encode(), b.text.encode()
    return (ab > bb) - (ab < bb)


def compare(v: Semver, o: Semver) -> int:
    """Version.Compare: -1, 0 or 1 (build metadata ignored)."""
    for x, y in ((v.major, o.major), (v.minor, o.minor), (v.patch, o.patch)):
        if x != y:
            return 1 if x > y else -1
    if not v.pre or not o.pre:
        return (not v.pre) - (not o.pre)
    for a, b in zip(v.pre, o.pre, strict=False):
        c = _pr_compare(a, b)
        if c:
            return c
    return (len(v.pre) > len(o.pre)) - (len(v.pre) < len(o.pre))


def major(v: Semver) -> int:
    """<Semver>.major(): Go converts the uint64 to int64, so values >= 2**63 wrap negative."""
    return wrap_int64(v.major)


def minor(v: Semver) -> int:
    """<Semver>.minor()."""
    return wrap_int64(v.minor)


def patch(v: Semver) -> int:
    """<Semver>.patch()."""
    return wrap_int64(v.patch)


def compare_to(v: Semver, o: Semver) -> int:
    """<Semver>.compareTo(<Semver>)."""
    return compare(v, o)


def is_greater_than(v: Semver, o: Semver) -> bool:
    """<Semver>.isGreaterThan(<Semver>)."""
    return compare(v, o) == 1


def is_less_than(v: Semver, o: Semver) -> bool:
    """<Semver>.isLessThan(<Semver>)."""
    return compare(v, o) == -1


def equals(v: Semver, o: Semver) -> bool:
    """`semver == semver`: Version.EQ (build metadata ignored)."""
    return compare(v, o) == 0
