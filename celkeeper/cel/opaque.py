"""Kubernetes library values (Quantity, URL, IP, CIDR, Semver, Format) inside the engines.

cel-cpp cannot hold Python objects, so both engines carry these values as *tokens*: strings
`"\\x1f" <type code> <payload> <tag>`. The type code is one letter per type (`TYPE_CODES`); the
payload is lossless (the value is rebuilt from it); the tag is a keyed BLAKE2 MAC of the type code
and the payload (`TAG_LENGTH` base64url characters, 72 bits) under a random key that belongs to
one `OpaqueCodec` (one per engine). Tokens are unforgeable: a string a user builds never decodes
into a library object (`dyn("\\x1fQ...")` stays a string), a token never decodes as another type,
and a token of one engine means nothing to another.

Why strings and not maps or objects: cel-expr-python 0.1.3 leaks the argument tuple and the result
of every Python callback (docs/known-issues.md), and a string is the smallest thing that can
cross; a cached token returned again costs a reference count, not memory. The checker still sees
the abstract types (`kubernetes.Quantity`, ...): only through `dyn` can an expression observe that
a value is a string at run time (`type(dyn(quantity("1")))` is string here, kubernetes.Quantity in
Kubernetes; it was map before tokens were strings).

A MAC and not a bare secret nonce: a token is visible to expressions (`dyn(quantity("1")) + ""`),
so a nonce would be readable and then reusable with any payload; a MAC only lets an expression
repeat a value it already holds.

The hot path computes no MAC and parses nothing: the codec remembers (bounded) the object behind each
token it issued or verified and the token of each payload it tagged, so a value produced by
`quantity()` and consumed by `compareTo()` is looked up, never re-parsed. A value missing from the
cache (evicted) is verified and rebuilt from its payload: the cache changes speed, never results.
Thread safety: a codec may be shared by threads (its caches are dicts, emptied when full).
"""

from __future__ import annotations

import base64
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
#: the first character of every token
PREFIX = "\x1f"
#: characters of the tag (base64url of a 9-byte MAC)
TAG_LENGTH = 12
_MAC_BYTES = TAG_LENGTH * 3 // 4


class NoSuchOverload(LibraryError):
    def __init__(self) -> None:
        super().__init__("no such overload")


@dataclass(frozen=True)
class Codec:
    """How one library type travels: its class, its payload and back. `rebuilt(v)` is the object
    `from_payload(to_payload(v))` returns, obtained without parsing (None: parse when needed)."""

    cls: type
    code: str
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
        quantity.Quantity, "Q", quantity.Quantity.to_token, quantity.Quantity.from_token, _quantity_rebuilt
    ),
    "net.IP": Codec(netip.Addr, "I", str, netip.parse_addr, _same),
    "net.CIDR": Codec(netip.Prefix, "C", str, netip.parse_prefix, _same),
    # a URL travels as the text it came from (see `OpaqueCodec.encode(payload=...)`)
    "kubernetes.URL": Codec(gourl.URL, "U", urls.url_to_string, urls.url, None),
    "kubernetes.Semver": Codec(semver.Semver, "S", str, semver.parse, _same),
    "kubernetes.NamedFormat": Codec(fmt.Format, "F", lambda f: f.key, lambda key: fmt.FORMATS[key], _same),
}
#: type name -> its one-letter code in tokens
TYPE_CODES = {name: c.code for name, c in CODECS.items()}
_TYPES = {c.code: name for name, c in CODECS.items()}
_CLASS_TO_TYPE = {c.cls: name for name, c in CODECS.items()}


def looks_like_token(value: Any) -> bool:
    """Whether `value` has a token's shape (cheap; says nothing about its tag)."""
    return (
        isinstance(value, str) and len(value) >= 2 + TAG_LENGTH and value[0] == PREFIX and value[1] in _TYPES
    )


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value


class OpaqueCodec:
    """Encodes and decodes library values for one engine: its MAC key and its caches."""

    def __init__(self) -> None:
        self._mac = hashlib.blake2b(key=secrets.token_bytes(32), digest_size=_MAC_BYTES)
        self._objects: dict[str, tuple[str, Any]] = {}  # token -> (type name, object)
        self._tokens: dict[tuple[str, str], str] = {}  # (type name, payload) -> token

    def _tag(self, code: str, payload: str) -> str:
        h = self._mac.copy()
        h.update((code + payload).encode("utf-8", "surrogatepass"))
        return base64.urlsafe_b64encode(h.digest()).decode("ascii")

    def encode(self, value: Any, payload: str | None = None) -> Any:
        """A k8slib object as its engine form (a token); other values unchanged (lists and maps
        recursively). `payload` overrides the object's own: the caller guarantees that
        `from_payload(payload)` is `value` (a URL keeps the text it came from)."""
        name = _CLASS_TO_TYPE.get(type(value))
        if name is not None:
            return self._encode(name, value, payload)
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            return {k: self.encode(v) for k, v in value.items()}
        return value

    def _encode(self, name: str, value: Any, payload: str | None) -> str:
        codec = CODECS[name]
        if payload is None:
            payload = codec.to_payload(value)
            rebuilt = codec.rebuilt(value) if codec.rebuilt is not None else None
        else:
            rebuilt = value
        if len(payload) > MAX_CACHED_PAYLOAD:
            return PREFIX + codec.code + payload + self._tag(codec.code, payload)
        token = self._tokens.get((name, payload))
        if token is None:
            token = PREFIX + codec.code + payload + self._tag(codec.code, payload)
            _remember(self._tokens, (name, payload), token)
        if rebuilt is not None and token not in self._objects:
            _remember(self._objects, token, (name, rebuilt))
        return token

    def decode(self, value: Any, type_name: str) -> Any:
        """The k8slib object of an engine-form value of `type_name` (NoSuchOverload otherwise)."""
        return self.decoder(type_name)(value)

    def decoder(self, type_name: str) -> Callable[[Any], Any]:
        """`decode(value, type_name)` as a one-argument function (the hot path of library calls)."""
        objects = self._objects  # emptied in place, never replaced
        verify = self._verify

        def decode(value: Any) -> Any:
            if isinstance(value, str):
                hit = objects.get(value)
                if hit is not None and hit[0] == type_name:
                    return hit[1]
                found = verify(value)
                if found is not None and found[0] == type_name:
                    return found[1]
            raise NoSuchOverload()

        return decode

    def type_of(self, value: Any) -> str | None:
        """The type name of a valid token (issued by this codec), or None for any other value."""
        if not isinstance(value, str) or value[:1] != PREFIX:
            return None
        hit = self._objects.get(value)
        if hit is not None:
            return hit[0]
        found = self._verify(value)
        return None if found is None else found[0]

    def _verify(self, token: str) -> tuple[str, Any] | None:
        """(type name, object) of a valid token not in the cache; None if `token` is not one."""
        if not looks_like_token(token):
            return None
        token = str(token)  # a str subclass (cel-python's StringType) as the plain key
        code, payload, tag = token[1], token[2:-TAG_LENGTH], token[-TAG_LENGTH:]
        if not hmac.compare_digest(tag, self._tag(code, payload)):
            return None
        name = _TYPES[code]
        try:
            obj = CODECS[name].from_payload(payload)
        except (LibraryError, ValueError, KeyError):  # a tag of ours on a payload we never issued
            return None
        if len(payload) <= MAX_CACHED_PAYLOAD:
            _remember(self._objects, token, (name, obj))
        return name, obj

    def decode_any(self, value: Any) -> Any:
        """Tokens anywhere inside `value` as k8slib objects (other strings stay strings)."""
        if isinstance(value, str):
            if value[:1] != PREFIX:
                return value
            hit = self._objects.get(value)
            if hit is None:
                hit = self._verify(value)
            return value if hit is None else hit[1]
        if isinstance(value, dict):
            return {k: self.decode_any(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.decode_any(v) for v in value]
        return value

    def decode_result(self, value: Any) -> Any:
        """A result for callers: tokens as k8slib objects (a forged token stays a string)."""
        if isinstance(value, str) and value[:1] != PREFIX:
            return value
        if not isinstance(value, dict | list | str):
            return value
        return self.decode_any(value)
