"""Kubernetes library values (Quantity, URL, IP, CIDR, Semver, Format) inside the engines.

cel-cpp cannot hold Python objects, so both engines carry these values as one-entry maps
`{"@<type name>": "<payload>|<tag>"}`. The payload is lossless (the value is rebuilt from it); the
tag is a keyed BLAKE2 MAC of the type name and the payload, under a random key that belongs to one
`OpaqueCodec` (one per engine). Tokens are unforgeable: a map a user builds
(`dyn({"@kubernetes.Quantity": ...})`) never decodes into a library object, a token never decodes
as another type, and a token of one engine means nothing to another.

A MAC and not a bare secret nonce: a token is visible to expressions
(`dyn(quantity("1"))["@kubernetes.Quantity"]`), so a nonce would be readable and then reusable with
any payload; a MAC only lets an expression repeat a value it already holds.

The hot path computes no MAC and parses nothing: the codec remembers (bounded) the object behind each
token it issued or verified and the token of each payload it tagged, so a value produced by
`quantity()` and consumed by `compareTo()` is looked up, never re-parsed. A value missing from the
cache (evicted) is verified and rebuilt from its payload: the cache changes speed, never results.
Thread safety: a codec may be shared by threads (its caches are dicts, emptied when full).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celkeeper.cel.k8slib import LibraryError, gourl, netip, quantity, semver, urls
from celkeeper.cel.k8slib import format as fmt

#: entries each cache of a codec holds before it is emptied
CACHE_SIZE = 4096
#: payloads longer than this (long URLs) are tagged and parsed every time rather than cached
MAX_CACHED_PAYLOAD = 512


class NoSuchOverload(LibraryError):
    def __init__(self) -> None:
        super().__init__("no such overload")


@dataclass(frozen=True)
class Codec:
    """How one library type travels: its class, its payload and back. `rebuilt(v)` is the object
    `from_payload(to_payload(v))` returns, obtained without parsing (None: parse when needed)."""

    cls: type
    to_payload: Callable[[Any], str]
    from_payload: Callable[[str], Any]
    rebuilt: Callable[[Any], Any] | None


def _same(value: Any) -> Any:
    return value


def _quantity_rebuilt(q: quantity.Quantity) -> quantity.Quantity:
    # the payload does not carry the input text (Go's cached String()): neither may the cached object
    if not q.text:
        return q
    return quantity.Quantity(q.unscaled, q.exp10, q.dec, q.format, q.from_arith)


#: type name -> codec (a constant table of pure functions)
CODECS: dict[str, Codec] = {
    "kubernetes.Quantity": Codec(
        quantity.Quantity, quantity.Quantity.to_token, quantity.Quantity.from_token, _quantity_rebuilt
    ),
    "net.IP": Codec(netip.Addr, str, netip.parse_addr, _same),
    "net.CIDR": Codec(netip.Prefix, str, netip.parse_prefix, _same),
    # a URL travels as the text it came from (see `OpaqueCodec.encode(payload=...)`)
    "kubernetes.URL": Codec(gourl.URL, urls.url_to_string, urls.url, None),
    "kubernetes.Semver": Codec(semver.Semver, str, semver.parse, _same),
    "kubernetes.NamedFormat": Codec(fmt.Format, lambda f: f.key, lambda key: fmt.FORMATS[key], _same),
}
_CLASS_TO_TYPE = {c.cls: name for name, c in CODECS.items()}
_KEYS = {name: "@" + name for name in CODECS}


def opaque_type(value: Any) -> str | None:
    """The type name of an engine-form opaque value, or None."""
    if isinstance(value, dict) and len(value) == 1:
        (key,) = value.keys()
        if isinstance(key, str) and key.startswith("@") and key[1:] in CODECS:
            return key[1:]
    return None


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value


class OpaqueCodec:
    """Encodes and decodes library values for one engine: its MAC key and its caches."""

    def __init__(self) -> None:
        key = secrets.token_bytes(32)
        self._hashers = {
            name: hashlib.blake2b(name.encode() + b"\0", key=key, digest_size=10) for name in CODECS
        }
        self._objects: dict[str, tuple[str, Any]] = {}  # token -> (type name, object)
        self._tokens: dict[tuple[str, str], str] = {}  # (type name, payload) -> token

    def _tag(self, name: str, payload: str) -> str:
        h = self._hashers[name].copy()
        h.update(payload.encode("utf-8", "surrogatepass"))
        return h.hexdigest()

    def encode(self, value: Any, payload: str | None = None) -> Any:
        """A k8slib object as its engine form (a one-entry map); other values unchanged (lists and
        maps recursively). `payload` overrides the object's own: the caller guarantees that
        `from_payload(payload)` is `value` (a URL keeps the text it came from)."""
        name = _CLASS_TO_TYPE.get(type(value))
        if name is not None:
            return self._encode(name, value, payload)
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            return {k: self.encode(v) for k, v in value.items()}
        return value

    def _encode(self, name: str, value: Any, payload: str | None) -> dict[str, str]:
        codec = CODECS[name]
        if payload is None:
            payload = codec.to_payload(value)
            rebuilt = codec.rebuilt(value) if codec.rebuilt is not None else None
        else:
            rebuilt = value
        if len(payload) > MAX_CACHED_PAYLOAD:
            return {_KEYS[name]: f"{payload}|{self._tag(name, payload)}"}
        token = self._tokens.get((name, payload))
        if token is None:
            token = f"{payload}|{self._tag(name, payload)}"
            _remember(self._tokens, (name, payload), token)
        if rebuilt is not None and token not in self._objects:
            _remember(self._objects, token, (name, rebuilt))
        return {_KEYS[name]: token}

    def decode(self, value: Any, type_name: str) -> Any:
        """The k8slib object of an engine-form value of `type_name` (NoSuchOverload otherwise)."""
        if isinstance(value, dict) and len(value) == 1:
            token = value.get(_KEYS[type_name])
            if type(token) is str:
                hit = self._objects.get(token)
                if hit is not None and hit[0] == type_name:
                    return hit[1]
                return self._verify(type_name, token)
        raise NoSuchOverload()

    def decoder(self, type_name: str) -> Callable[[Any], Any]:
        """`decode(value, type_name)` as a one-argument function (the hot path of library calls)."""
        key = _KEYS[type_name]
        objects = self._objects  # emptied in place, never replaced
        verify = self._verify

        def decode(value: Any) -> Any:
            if isinstance(value, dict) and len(value) == 1:
                token = value.get(key)
                if type(token) is str:
                    hit = objects.get(token)
                    if hit is not None and hit[0] == type_name:
                        return hit[1]
                    return verify(type_name, token)
            raise NoSuchOverload()

        return decode

    def _verify(self, name: str, token: str) -> Any:
        payload, _, tag = token.rpartition("|")
        if not hmac.compare_digest(tag, self._tag(name, payload)):
            raise NoSuchOverload()
        obj = CODECS[name].from_payload(payload)
        if len(payload) <= MAX_CACHED_PAYLOAD:
            _remember(self._objects, token, (name, obj))
        return obj

    def decode_any(self, value: Any) -> Any:
        """Engine-form opaque values anywhere inside `value` as k8slib objects."""
        if isinstance(value, dict):
            t = opaque_type(value)
            if t is not None:
                return self.decode(value, t)
            return {k: self.decode_any(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.decode_any(v) for v in value]
        return value

    def decode_result(self, value: Any) -> Any:
        """A result for callers: opaque values as k8slib objects (a forged map stays a map)."""
        if not isinstance(value, dict | list):
            return value
        try:
            return self.decode_any(value)
        except LibraryError:
            return value
