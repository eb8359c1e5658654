"""documents.kubeyaml: go-yaml v2's resolution and sigs.k8s.io/yaml's conversion, rule by rule as the Go
source states them (resolve.go, decode.go, yaml.go). Real kubectl is the judge of the whole reading on a
corpus of every form: tests/documents/test_stream_kubectl.py."""

from __future__ import annotations

import math

import pytest

from celkeeper.documents import kubeyaml
from celkeeper.documents.kubeyaml import TAG, ScalarError, plain, plain_key, tagged, tagged_key


def typed(value: object) -> tuple[type, object]:
    return type(value), value


def test_yaml_11_words_are_booleans_and_nulls() -> None:
    for word in ("y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"):
        assert plain(word) is True, word
    for word in ("n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"):
        assert plain(word) is False, word
    for word in ("", "~", "null", "Null", "NULL"):
        assert plain(word) is None, word
    for word in ("yEs", "oN", "o", "t", "nul", "None"):  # not in resolve.go's map
        assert plain(word) == word


def test_numbers_as_go_reads_them_and_json_carries_them() -> None:
    # strconv.ParseInt(base 0) after removing `_`; then yamlStyleFloat; a float whose JSON text is an
    # integer is an int (encoding/json writes 1.0 as 1), an uint64 a float64
    assert typed(plain("0777")) == (int, 511)
    assert typed(plain("0o17")) == (int, 15)
    assert typed(plain("-0x1F")) == (int, -31)
    assert typed(plain("0b101")) == (int, 5)
    assert typed(plain("1_000")) == (int, 1000)
    assert typed(plain("09")) == (int, 9)  # not octal: a float, 9.0, written 9
    assert typed(plain("1.0")) == (int, 1)
    assert typed(plain("1e3")) == (int, 1000)
    assert typed(plain("1.5")) == (float, 1.5)
    assert typed(plain("18446744073709551615")) == (float, float(2**64 - 1))
    assert typed(plain("9223372036854775807")) == (int, 2**63 - 1)
    assert typed(plain("1e21")) == (float, 1e21)
    for text in ("1:20", "0x", "+-1", "1e400", "2001-12-14", "12e", ".e3"):
        assert plain(text) == text


def test_no_json_for_infinities_and_nan_but_keys_have_a_name() -> None:
    for text in (".inf", "-.Inf", ".NaN", "+.INF"):
        with pytest.raises(ScalarError, match="json: unsupported value"):
            plain(text)
    assert [plain_key(t) for t in (".inf", "-.inf", ".nan")] == [".inf", "-.inf", ".nan"]


def test_keys_are_strings_as_sigs_k8s_io_yaml_writes_them() -> None:
    assert plain_key("yes") == "true"
    assert plain_key("0x10") == "16"
    assert plain_key("1.0") == "1"
    assert plain_key("1e6") == "1e+06"  # FormatFloat(f, 'g', -1, 32)
    assert plain_key("3.14159265358979") == "3.1415927"  # float32's shortest digits
    assert plain_key("0.00001") == "1e-05"
    assert plain_key("-0.0") == "-0"
    assert plain_key("1e39") == ".inf"  # beyond float32
    assert plain_key("name") == "name"
    for text in ("~", "", "null"):
        with pytest.raises(ScalarError, match="<nil>"):
            plain_key(text)
    with pytest.raises(ScalarError, match="uint64"):
        plain_key("18446744073709551615")


def test_tags_resolve_and_refuse_what_is_not_of_their_type() -> None:
    assert tagged(TAG + "str", "12") == "12"
    assert tagged(TAG + "int", "0x1F") == 31
    assert typed(tagged(TAG + "float", "2")) == (int, 2)  # a float64 2, written 2 in JSON
    assert tagged(TAG + "bool", "on") is True
    assert tagged(TAG + "null", "~") is None
    assert tagged(TAG + "timestamp", "2001-12-14") == "2001-12-14"
    assert tagged("!", "12") == "12"
    assert tagged("!thing", "yes") == "yes"
    assert tagged(TAG + "binary", "aGk=") == "hi"
    assert tagged(TAG + "binary", "/w==") == "\ufffd"  # not UTF-8: as encoding/json writes it
    assert tagged_key(TAG + "int", "7") == "7"
    for tag, text, message in (
        ("int", "abc", "cannot decode !!str `abc` as a !!int"),
        ("bool", "1", "cannot decode !!int `1` as a !!bool"),
        ("float", "18446744073709551615", "cannot decode !!int `18446744073709551615` as a !!float"),
        ("timestamp", "2001-02-30", "cannot decode !!str `2001-02-30` as a !!timestamp"),
        ("null", "", None),
        ("binary", "aGk", "!!binary value contains invalid base64 data"),
    ):
        if message is None:
            assert tagged(TAG + tag, text) is None
            continue
        with pytest.raises(ScalarError) as raised:
            tagged(TAG + tag, text)
        assert raised.value.message == message


def test_timestamps_are_those_go_time_parse_takes() -> None:
    for text in (
        "2001-12-14",
        "2001-1-2",
        "2000-02-29",
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14 21:59:43.10",
    ):
        assert kubeyaml.is_timestamp(text), text
    for text in (
        "2001-02-29",
        "1900-02-29",
        "2001-13-01",
        "2001-12-14 21:59:43.10 -5",
        "20011-12-14",
        "2001-12-14T25:00:00Z",
    ):
        assert not kubeyaml.is_timestamp(text), text


def test_the_merge_key_is_plain_or_tagged() -> None:
    assert kubeyaml.is_merge(None, "", "<<")
    assert kubeyaml.is_merge("!", "'", "<<")
    assert kubeyaml.is_merge(kubeyaml.MERGE_TAG, "", "<<")
    assert not kubeyaml.is_merge(None, "'", "<<")


def test_json_numbers_as_kubectl_holds_them() -> None:
    assert typed(kubeyaml.json_float("1.0")) == (int, 1)
    assert typed(kubeyaml.json_float("-0.0")) == (int, 0)
    assert typed(kubeyaml.json_int("9223372036854775808")) == (float, 2.0**63)
    with pytest.raises(ScalarError, match="cannot unmarshal number"):
        kubeyaml.json_float("1e400")
    assert math.isclose(kubeyaml.json_float("0.1"), 0.1)


def test_excessive_aliasing_is_go_yamls_ratio() -> None:
    assert not kubeyaml.excessive_aliasing(100, 100_000)  # at most 100 through aliases: never
    assert not kubeyaml.excessive_aliasing(999, 1000)  # at most 1,000 decoded: never
    assert kubeyaml.excessive_aliasing(9_901, 10_000)
    assert not kubeyaml.excessive_aliasing(9_900, 10_000)
    assert kubeyaml.excessive_aliasing(400_001, 4_000_000)  # 10% at 4,000,000
