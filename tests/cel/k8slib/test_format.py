"""The format library against Kubernetes 1.36 (k8s.io/apiserver and apimachinery v0.36.2, what Gatekeeper
v3.23.1 builds with; golden results), including Kubernetes' test table."""

from __future__ import annotations

import pytest

from celkeeper.cel.k8slib import format as F
from tests.cel.k8slib.golden_check import Case, Opt, check, ids, lit


def v(key: str, s: str) -> Opt:
    return Opt(F.validate(F.FORMATS[key], s))


# Kubernetes' library/format_test.go (1.36; unchanged since 1.34).
KUBERNETES_TABLE: list[Case] = [
    ('format.dns1123Label().validate("my-label-name")', lambda: v("dns1123Label", "my-label-name")),
    (
        'format.dns1123Subdomain().validate("apiextensions.k8s.io")',
        lambda: v("dns1123Subdomain", "apiextensions.k8s.io"),
    ),
    (
        'format.qualifiedName().validate("apiextensions.k8s.io/v1beta1")',
        lambda: v("qualifiedName", "apiextensions.k8s.io/v1beta1"),
    ),
    (
        'format.dns1123LabelPrefix().validate("my-label-prefix-")',
        lambda: v("dns1123LabelPrefix", "my-label-prefix-"),
    ),
    (
        'format.dns1123SubdomainPrefix().validate("mysubdomain.prefix.-")',
        lambda: v("dns1123SubdomainPrefix", "mysubdomain.prefix.-"),
    ),
    (
        'format.dns1035LabelPrefix().validate("my-label-prefix-")',
        lambda: v("dns1035LabelPrefix", "my-label-prefix-"),
    ),
    ('format.uri().validate("http://example.com")', lambda: v("uri", "http://example.com")),
    (
        'format.uuid().validate("123e4567-e89b-12d3-a456-426614174000")',
        lambda: v("uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ),
    ('format.byte().validate("aGVsbG8=")', lambda: v("byte", "aGVsbG8=")),
    ('format.date().validate("2021-01-01")', lambda: v("date", "2021-01-01")),
    ('format.datetime().validate("2021-01-01T00:00:00Z")', lambda: v("datetime", "2021-01-01T00:00:00Z")),
    ('format.dns1123Label().validate("contains a space")', lambda: v("dns1123Label", "contains a space")),
    (
        'format.dns1123Subdomain().validate("contains a space")',
        lambda: v("dns1123Subdomain", "contains a space"),
    ),
    ('format.dns1035Label().validate("contains a space")', lambda: v("dns1035Label", "contains a space")),
    ('format.qualifiedName().validate("contains a space")', lambda: v("qualifiedName", "contains a space")),
    (
        'format.dns1123LabelPrefix().validate("contains a space-")',
        lambda: v("dns1123LabelPrefix", "contains a space-"),
    ),
    (
        'format.dns1123SubdomainPrefix().validate("contains a space-")',
        lambda: v("dns1123SubdomainPrefix", "contains a space-"),
    ),
    (
        'format.dns1035LabelPrefix().validate("contains a space-")',
        lambda: v("dns1035LabelPrefix", "contains a space-"),
    ),
    ('format.qualifiedName().validate("my.name")', lambda: v("qualifiedName", "my.name")),
    ('format.byte().validate("aGVsbG8")', lambda: v("byte", "aGVsbG8")),
    ('format.date().validate("2020-01-32")', lambda: v("date", "2020-01-32")),
    ('format.datetime().validate("2020-01-32T00:00:00Z")', lambda: v("datetime", "2020-01-32T00:00:00Z")),
    ('format.named("unknown").hasValue()', lambda: F.named("unknown") is not None),
    ('format.labelValue().validate("my-cool-label-Value")', lambda: v("labelValue", "my-cool-label-Value")),
    (
        'format.labelValue().validate("my-cool-label-Value!!\\n\\n!!!")',
        lambda: v("labelValue", "my-cool-label-Value!!\n\n!!!"),
    ),
]

VALUES = [
    "",
    "a",
    "-",
    "a-",
    "-a",
    "a.b",
    "a..b",
    ".a",
    "a.",
    "A",
    "aB",
    "1",
    "1a",
    "a1",
    "a_b",
    "a/b",
    "/b",
    "a/",
    "a/b/c",
    "example.com/MyName",
    "Example.com/x",
    "-bad.com/x",
    "x" * 63,
    "x" * 64,
    "a-" * 32,
    "a" * 253,
    ("a" * 63 + ".") * 4,
    "é",
    "é-",
    "ab-",
    "a" * 64 + "-",
    "my-label-prefix-",
    "UPPER-",
    "under_score",
    "trailing\n",
    "12345",
    "abc-123",
    "123-abc",
    "MyValue",
    "my_value",
    "a" * 63 + "/b",
    "b/" + "a" * 64,
]
DATES = [
    "2021-01-01",
    "2020-02-29",
    "2021-02-29",
    "1900-02-29",
    "2000-02-29",
    "0000-01-01",
    "2021-13-01",
    "2021-00-10",
    "2021-04-31",
    "2021-1-01",
    "21-01-01",
    "2021-01-01T",
    " 2021-01-01",
    "\uff12\uff10\uff12\uff11-01-01",
]
DATETIMES = [
    "2021-01-01T00:00:00Z",
    "2021-01-01t00:00:00z",
    "2021-01-01T00:00:00.123Z",
    "2021-01-01T00:00:00+01:00",
    "2021-01-01T24:00:00Z",
    "2021-01-01T23:60:00Z",
    "2021-01-01T23:59:60Z",
    "2021-01-01T23:59:59",
    "2021-01-01 00:00:00Z",
    "2021-01-01T00:00:00Zt",
    "2021-01-01T00:00:00xZ",
    "2021-01-01T00:00:00.Z",
    "2021-01-01T00:00:00Z1",
    "2021-01-01T0:00:00Z",
    "abc",
    "2021-02-30T00:00:00Z",
    "2021-01-01T00:00:00-0100",
]
UUIDS = [
    "123e4567-e89b-12d3-a456-426614174000",
    "123E4567-E89B-12D3-A456-426614174000",
    "123e4567e89b12d3a456426614174000",
    "123e4567-e89b-12d3-a456-42661417400",
    "g23e4567-e89b-12d3-a456-426614174000",
    "{123e4567-e89b-12d3-a456-426614174000}",
    "",
]
BYTES = ["", "aGVsbG8=", "aGVsbG8", "aGVsbA==", "aGVsbA=", "YQ==", "YQ", "a+/=", "ab+/", "a b=", "aGVs\nbG8="]
URIS = ["http://example.com", "/path", "x", "", "http://a:b:c/", "mailto:x@y", "http://[::1", "http://h/%zz"]


def _validate_cases() -> list[Case]:
    out: list[Case] = []
    checks = [
        (key, VALUES)
        for key in (
            "dns1123Label",
            "dns1123Subdomain",
            "dns1035Label",
            "qualifiedName",
            "dns1123LabelPrefix",
            "dns1123SubdomainPrefix",
            "dns1035LabelPrefix",
            "labelValue",
        )
    ]
    checks += [
        ("date", DATES),
        ("datetime", DATETIMES + DATES),
        ("uuid", UUIDS),
        ("byte", BYTES),
        ("uri", URIS),
    ]
    for key, values in checks:
        for s in values:
            out.append((f"format.{key}().validate({lit(s)})", lambda k=key, s=s: v(k, s)))
    return out


def _named_cases() -> list[Case]:
    out: list[Case] = []
    for key in F.FORMATS:
        out.append((f'format.named("{key}").hasValue()', lambda k=key: F.named(k) is not None))
        out.append(
            (
                f'format.named("{key}").value() == format.{key}()',
                lambda k=key: F.equals(F.named(k), F.FORMATS[k]),
            )
        )  # type: ignore[arg-type]
        out.append((f'format.named("{key}").value()', lambda k=key: F.named(k)))
        out.append(
            (
                f"format.{key}() == format.dns1123Label()",
                lambda k=key: F.equals(F.FORMATS[k], F.FORMATS["dns1123Label"]),
            )
        )
    for name in ("DNS1123Label", "dns1123label", "", "uuid ", "validate"):
        out.append((f"format.named({lit(name)})", lambda n=name: Opt(F.named(n))))
    return out


CASES: list[Case] = KUBERNETES_TABLE + _validate_cases() + _named_cases()


@pytest.mark.parametrize(("expr", "thunk"), CASES, ids=ids(CASES))
def test_matches_kubernetes(expr: str, thunk: object) -> None:
    check(expr, thunk)  # type: ignore[arg-type]


_QNAME_REGEX = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_LABEL_VALUE_REGEX = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # apimachinery v0.36's content package (qualifiedName = content.IsLabelKey, labelValue =
        # content.IsLabelValue): max lengths in bytes, the three-part message worded as a label key
        ("labelValue", "x" * 64, ["must be no more than 63 bytes"]),
        ("labelValue", "a" * 64 + "-", ["must be no more than 63 bytes", _LABEL_VALUE_REGEX]),
        ("labelValue", "\u00e9" * 32, ["must be no more than 63 bytes", _LABEL_VALUE_REGEX]),
        ("qualifiedName", "x" * 64, ["name part must be no more than 63 bytes"]),
        ("qualifiedName", "b/" + "a" * 64, ["name part must be no more than 63 bytes"]),
        (
            "qualifiedName",
            "a-" * 32,
            ["name part must be no more than 63 bytes", "name part " + _QNAME_REGEX],
        ),
        (
            "qualifiedName",
            "a/b/c",
            [
                "a valid label key "
                + _QNAME_REGEX
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ],
        ),
        # the prefix is checked by content.IsDNS1123Subdomain (bytes), not pkg/util/validation's
        ("qualifiedName", "a" * 254 + "/b", ["prefix part must be no more than 253 bytes"]),
        ("qualifiedName", "/b", ["prefix part must be non-empty"]),
        ("qualifiedName", "a/", ["name part must be non-empty", "name part " + _QNAME_REGEX]),
        # the DNS formats still call pkg/util/validation, whose MaxLenError says characters
        ("dns1123Label", "x" * 64, ["must be no more than 63 characters"]),
        ("dns1035Label", "x" * 64, ["must be no more than 63 characters"]),
        ("dns1123LabelPrefix", "x" * 64, ["must be no more than 63 characters"]),
        ("dns1123Subdomain", "a" * 254, ["must be no more than 253 characters"]),
    ],
    ids=lambda x: x if isinstance(x, str) and len(x) < 20 else None,
)
def test_apimachinery_036_messages(key: str, value: str, expected: list[str]) -> None:
    assert F.validate(F.FORMATS[key], value) == expected
