"""Kubernetes' CEL format library (k8s.io/apiserver/pkg/cel/library/format.go, v0.36.2: Kubernetes 1.36,
what Gatekeeper v3.23.1 builds with).

`format.named(name)` is an optional Format (None here for optional.none); `format.<name>()` is the Format
itself; `<Format>.validate(s)` is None (optional.none) when s is valid, else the list of apimachinery's
error messages (k8s.io/apimachinery v0.36.2: pkg/util/validation, pkg/api/validation, and
pkg/api/validate/content, to which qualifiedName and labelValue now delegate; and the kube-openapi
strfmt checks for uri, uuid, byte, date and datetime).

Two generations of apimachinery's messages coexist in v0.36.2, and the library uses both:
- dns1123Label, dns1123Subdomain, dns1035Label and their *Prefix forms call pkg/util/validation
  (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label), whose MaxLenError still says
  "must be no more than N characters";
- qualifiedName is content.IsLabelKey and labelValue content.IsLabelValue (in v0.36.2), whose
  MaxLenError says "must be no more than N bytes" (the lengths were always counted in bytes), whose
  too-many-slashes message reads "a valid label key ..." (v0.34: "a qualified name ..."), and whose
  prefix part is checked by content.IsDNS1123Subdomain (so "prefix part must be no more than 253
  bytes").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import re2

from celkeeper.cel.k8slib.gostrings import go_string, go_utf8_len
from celkeeper.cel.k8slib.gourl import URLError, parse_request_uri


@dataclass(frozen=True, slots=True)
class Format:
    """apiservercel.Format: `==` compares `name` (Kubernetes' Format.Name, e.g. "DNS1123Label")."""

    key: str  # the name format.named() takes, e.g. "dns1123Label"
    name: str
    validate_fn: Callable[[str], list[str]] = field(compare=False, repr=False)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += f"'{ex}', "
    return msg + f"regex used for validation is '{fmt}')"


def _max_len_error(n: int) -> str:
    """pkg/util/validation.MaxLenError (the DNS label and subdomain formats)."""
    return f"must be no more than {n} characters"


def _content_max_len_error(n: int) -> str:
    """pkg/api/validate/content.MaxLenError (label keys, i.e. qualified names, and label values)."""
    return f"must be no more than {n} bytes"


class _Full:
    """A Go regular expression as apimachinery uses them, `^...$` (the whole text, no special case for
    a trailing newline: fullmatch). RE2 (google-re2) runs in linear time, as Go's regexp does;
    Python's `re` backtracks (a label of 100,000 characters took seconds)."""

    __slots__ = ("_prog",)

    def __init__(self, pattern: str) -> None:
        opts = re2.Options()
        opts.log_errors = False
        self._prog = re2.compile(pattern, opts)

    def fullmatch(self, s: str) -> Any:
        return self._prog.fullmatch(_go_text(s))


def _go_text(s: str) -> str:
    """The runes Go's regexp sees in the Go string `s` (RE2 takes valid UTF-8 only): each invalid
    byte (held as U+DC80..U+DCFF by surrogateescape) is one U+FFFD, as in Go."""
    if s.isascii():
        return s
    try:
        raw = s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = s.encode("utf-8", "surrogatepass")
    return go_string(raw)


_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
# content.labelKeyFmt / labelKeyErrMsg (v0.34's qualifiedNameFmt / qualifiedNameErrMsg, unchanged)
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_RE = _Full(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = _Full(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = _Full(_DNS1035_LABEL_FMT)
_QNAME_RE = _Full(_QNAME_FMT)
_LABEL_VALUE_RE = _Full(_LABEL_VALUE_FMT)
_UUID_RE = _Full("[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_BASE64_RE = _Full("(?:[A-Za-z0-9+\\/]{4})*(?:[A-Za-z0-9+\\/]{2}==|[A-Za-z0-9+\\/]{3}=|[A-Za-z0-9+\\/]{4})")
_DATE_RE = _Full("([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME_RE = _Full("([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if go_utf8_len(value) > 63:
        errs.append(_max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(_regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """pkg/util/validation.IsDNS1123Subdomain."""
    return _dns1123_subdomain(value, _max_len_error)


def _content_dns1123_subdomain(value: str) -> list[str]:
    """content.IsDNS1123Subdomain: the same check, with content's MaxLenError ("bytes")."""
    return _dns1123_subdomain(value, _content_max_len_error)


def _dns1123_subdomain(value: str, max_len_error: Callable[[int], str]) -> list[str]:
    errs = []
    if go_utf8_len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if go_utf8_len(value) > 63:
        errs.append(_max_len_error(63))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """content.IsLabelKey (pkg/util/validation.IsQualifiedName is an alias of it in v0.36.2)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in _content_dns1123_subdomain(prefix)]
    else:
        return [
            "a valid label key "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif go_utf8_len(name) > 63:
        errs.append("name part " + _content_max_len_error(63))
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """content.IsLabelValue (pkg/util/validation.IsValidLabelValue is an alias of it in v0.36.2)."""
    errs = []
    if go_utf8_len(value) > 63:
        errs.append(_content_max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's maskTrailingDash, which replaces the last *two* bytes with "a" (sic)."""
    b = name.encode("utf-8", "surrogatepass")
    if len(b) > 1 and b.endswith(b"-"):
        return (b[:-2] + b"a").decode("utf-8", "surrogateescape")
    return name


def _prefixed(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    return lambda s: check(_mask_trailing_dash(s))


def _is_date(s: str) -> bool:
    """time.Parse("2006-01-02", s) succeeds."""
    m = _DATE_RE.fullmatch(s)
    if not m:
        return False
    year, month, day = (int(g) for g in m.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return 1 <= day <= days


def _is_datetime(s: str) -> bool:
    """strfmt.IsDateTime (which lower-cases, splits on every "t" and checks only the first two parts)."""
    if go_utf8_len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _TIME_RE.fullmatch(parts[1])
    return m is not None and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def _uri(s: str) -> list[str]:
    try:
        parse_request_uri(s)
    except URLError as e:
        return [str(e)]
    return []


def _check(ok: Callable[[str], bool], message: str) -> Callable[[str], list[str]]:
    return lambda s: [] if ok(s) else [message]


_FORMATS: dict[str, tuple[str, Callable[[str], list[str]]]] = {
    "dns1123Label": ("DNS1123Label", is_dns1123_label),
    "dns1123Subdomain": ("DNS1123Subdomain", is_dns1123_subdomain),
    "dns1035Label": ("DNS1035Label", is_dns1035_label),
    "qualifiedName": ("QualifiedName", is_qualified_name),
    "dns1123LabelPrefix": ("DNS1123LabelPrefix", _prefixed(is_dns1123_label)),
    "dns1123SubdomainPrefix": ("DNS1123SubdomainPrefix", _prefixed(is_dns1123_subdomain)),
    "dns1035LabelPrefix": ("DNS1035LabelPrefix", _prefixed(is_dns1035_label)),
    "labelValue": ("LabelValue", is_valid_label_value),
    "uri": ("URI", _uri),
    "uuid": ("uuid", _check(lambda s: bool(_UUID_RE.fullmatch(s)), "does not match the UUID format")),
    "byte": ("byte", _check(lambda s: bool(_BASE64_RE.fullmatch(s)), "invalid base64")),
    "date": ("date", _check(_is_date, "invalid date")),
    "datetime": ("datetime", _check(_is_datetime, "invalid datetime")),
}

FORMATS: dict[str, Format] = {key: Format(key, name, fn) for key, (name, fn) in _FORMATS.items()}
"""Every named format by the name format.named() takes; `format.<key>()` returns FORMATS[key]."""


def named(name: str) -> Format | None:
    """format.named(<string>): the Format, or None for optional.none."""
    return FORMATS.get(name)


def validate(f: Format, s: str) -> list[str] | None:
    """<Format>.validate(<string>): None (optional.none) when valid, else the error messages."""
    errs = f.validate_fn(s)
    return errs or None


def equals(a: Format, b: Format) -> bool:
    """`format == format`: the same Format name."""
    return a.name == b.name
