"""Library values in engine form (celkeeper.cel.opaque) and the per-engine library runtime: tokens are
unforgeable and bound to one codec, and the caches change speed, never results (a value evicted from a
cache is verified and rebuilt from its payload)."""

from __future__ import annotations

from typing import Any

import pytest

from celkeeper.cel import cpp_engine, library, opaque, overloads, py_engine
from celkeeper.cel.api import Engine
from celkeeper.cel.k8slib import format as fmt
from celkeeper.cel.k8slib import netip, semver, urls
from celkeeper.cel.k8slib.quantity import Quantity, parse_quantity
from celkeeper.cel.library import LibraryRuntime
from celkeeper.cel.opaque import NoSuchOverload, OpaqueCodec
from tests.cel.conftest import evaluate

VALUES: list[tuple[str, Any]] = [
    ("kubernetes.Quantity", parse_quantity("1.5Gi")),
    ("kubernetes.Quantity", parse_quantity("500m")),
    ("net.IP", netip.parse_addr("fe80::1%eth0")),
    ("net.CIDR", netip.parse_prefix("10.1.2.3/16")),
    ("kubernetes.Semver", semver.parse("1.2.3-rc.1+build.5")),
    ("kubernetes.NamedFormat", fmt.FORMATS["dns1123Label"]),
]


def _payload(token: str) -> str:
    return token[2 : -opaque.TAG_LENGTH]


@pytest.mark.parametrize(("type_name", "value"), VALUES)
def test_round_trip_with_and_without_the_cache(
    monkeypatch: pytest.MonkeyPatch, type_name: str, value: Any
) -> None:
    codec = OpaqueCodec()
    encoded = codec.encode(value)
    assert isinstance(encoded, str) and encoded[:2] == opaque.PREFIX + opaque.TYPE_CODES[type_name]
    assert codec.type_of(encoded) == type_name
    hot = codec.decode(encoded, type_name)
    payload = _payload(encoded)
    assert hot == value and repr(hot) == repr(opaque.CODECS[type_name].from_payload(payload))
    # evict everything: the value is verified and rebuilt from its payload, with the same result
    monkeypatch.setattr(opaque, "CACHE_SIZE", 1)
    codec.encode(parse_quantity("7"))
    cold = codec.decode(encoded, type_name)
    assert cold == hot and repr(cold) == repr(hot)
    assert codec.decode_result([encoded, {"k": encoded}]) == [hot, {"k": hot}]


def test_quantity_text_is_not_carried_by_tokens() -> None:
    # Go's cached String() is not part of the payload; the cached object must not keep it either
    q = parse_quantity("1500m")
    codec = OpaqueCodec()
    assert q.text == "1500m"
    decoded = codec.decode(codec.encode(q), "kubernetes.Quantity")
    assert decoded.text == "" and decoded == q


def test_url_keeps_the_text_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    codec = OpaqueCodec()
    text = "https://example.com/a%2Fb?x=1#frag"
    encoded = codec.encode(urls.url(text), text)
    assert _payload(encoded) == text
    monkeypatch.setattr(opaque, "CACHE_SIZE", 1)
    codec.encode(parse_quantity("7"))
    assert urls.url_to_string(codec.decode(encoded, "kubernetes.URL")) == urls.url_to_string(urls.url(text))


def test_tokens_are_unforgeable_and_bound_to_their_codec_and_type() -> None:
    codec, other = OpaqueCodec(), OpaqueCodec()
    q = parse_quantity("2Gi")
    token = codec.encode(q)
    payload, tag = _payload(token), token[-opaque.TAG_LENGTH :]
    forged: list[Any] = [
        f"{opaque.PREFIX}Q{payload}{'A' * len(tag)}",  # another tag
        f"{opaque.PREFIX}QiSv:1:0{tag}",  # another payload
        f"{opaque.PREFIX}Q{payload}",  # no tag
        f"Q{payload}{tag}",  # no prefix
        token + "x",
        " " + token,
        5,
        [token],
        {"@kubernetes.Quantity": token},
    ]
    for value in forged:
        with pytest.raises(NoSuchOverload):
            codec.decode(value, "kubernetes.Quantity")
        if not isinstance(value, list | dict):  # (containers of valid tokens decode element-wise)
            assert codec.decode_result(value) == value
            assert codec.type_of(value) is None
    with pytest.raises(NoSuchOverload):
        other.decode(token, "kubernetes.Quantity")
    assert other.type_of(token) is None
    with pytest.raises(NoSuchOverload):  # the same payload and tag under another type's code
        codec.decode(f"{opaque.PREFIX}S{payload}{tag}", "kubernetes.Semver")
    with pytest.raises(NoSuchOverload):
        codec.decode(token, "kubernetes.Semver")
    assert codec.decode(token, "kubernetes.Quantity") == q
    # a valid token inside a result is decoded, a forged one is left as it is
    assert codec.decode_result({"a": [token, forged[0]]}) == {"a": [q, forged[0]]}


def test_long_payloads_are_not_cached_but_work() -> None:
    codec = OpaqueCodec()
    text = "https://example.com/" + "a" * (opaque.MAX_CACHED_PAYLOAD + 10)
    encoded = codec.encode(urls.url(text), text)
    assert urls.url_to_string(codec.decode(encoded, "kubernetes.URL")) == text


def test_each_runtime_has_its_own_state() -> None:
    a, b = LibraryRuntime(), LibraryRuntime()
    assert a.codec is not b.codec
    make = a.implementation("string_to_quantity")
    assert make("1Gi") == make("1Gi")  # memoised: the same token
    assert make("1Gi") != b.implementation("string_to_quantity")("1Gi")
    compare = a.implementation("quantity_compare_to")
    assert compare(make("1Gi"), make("1024Mi")) == 0
    with pytest.raises(NoSuchOverload):
        compare(b.implementation("string_to_quantity")("1Gi"), make("1Gi"))


def test_library_module_holds_no_runtime_state() -> None:
    # constant tables of pure functions only: no codec, cache or key at module level
    for module in (library, opaque, overloads, cpp_engine, py_engine):
        for name, value in vars(module).items():
            assert not isinstance(value, OpaqueCodec | LibraryRuntime), f"{module.__name__}.{name}"
            assert not isinstance(value, bytes), f"{module.__name__}.{name}"


def test_evicted_values_give_the_same_results(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(opaque, "CACHE_SIZE", 2)
    monkeypatch.setattr(library, "MEMO_SIZE", 2)
    sizes = ["1Ki", "2Ki", "3Ki", "1Ki", "500m", "2Ki", "1.5Gi"]
    src = (
        "variables.params.sizes.map(s, quantity(s).add(quantity('1')))"
        ".map(q, q.sub(1).compareTo(quantity('2Ki')))"
    )
    want = [-1, 0, 1, -1, -1, 0, 1]
    for _ in range(3):
        assert evaluate(engine, src, params={"sizes": sizes}) == want
    got = evaluate(engine, "variables.params.sizes.map(s, quantity(s))", params={"sizes": sizes})
    assert got == [parse_quantity(s) for s in sizes]
    assert all(isinstance(q, Quantity) and not q.text for q in got)
