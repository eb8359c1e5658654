"""Go string helpers the libraries build messages and values with."""

from __future__ import annotations

from celkeeper.cel.k8slib.gostrings import (
    go_parse_uint_error,
    go_quote,
    go_quote_bytes,
    go_string,
    go_utf8_len,
    parse_go_int,
    wrap_int32,
    wrap_int64,
)


def test_go_quote_escapes_like_strconv_quote() -> None:
    assert go_quote('a"b\\c') == '"a\\"b\\\\c"'
    assert go_quote("\x00\x07\n\x7f") == '"\\x00\\a\\n\\x7f"'
    assert go_quote("é日本\u00a0\u200b") == '"é日本\\u00a0\\u200b"'
    assert go_quote("\U0001f600\U000e0001") == '"\U0001f600\\U000e0001"'


def test_invalid_utf8_is_quoted_and_decoded_byte_by_byte() -> None:
    assert go_quote_bytes(b"%\xe2\x82") == '"%\\xe2\\x82"'
    assert go_quote_bytes("é".encode()) == '"é"'
    assert go_string(b"a\xe2\x82b\xff") == "a\ufffd\ufffdb\ufffd"


def test_integer_helpers_follow_go() -> None:
    assert parse_go_int("+5") == 5
    assert parse_go_int("9223372036854775808") is None
    assert parse_go_int("18446744073709551615", unsigned=True) == 18446744073709551615
    assert parse_go_int("-1", unsigned=True) is None
    assert parse_go_int("\u0661") is None
    assert wrap_int64(1 << 63) == -(1 << 63)
    assert wrap_int32(2147483648) == -2147483648
    assert go_utf8_len("é") == 2
    assert go_parse_uint_error("") == 'strconv.ParseUint: parsing "": invalid syntax'
    assert go_parse_uint_error("99999999999999999999") == (
        'strconv.ParseUint: parsing "99999999999999999999": value out of range'
    )
