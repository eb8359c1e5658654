"""Desired versus stored (pure): covering ignores what only the server adds; the digest notices a removal."""

from __future__ import annotations

from celkeeper.kube import covers, with_digest
from celkeeper.kube.compare import DIGEST_ANNOTATION


def test_covers_ignores_fields_only_the_server_has() -> None:
    desired = {"a": {"b": [1, {"c": "x"}]}, "d": True}
    stored = {"a": {"b": [1, {"c": "x", "extra": 1}], "more": 2}, "d": True, "e": 3}
    assert covers(stored, desired)
    assert not covers({**stored, "d": 1}, desired)  # true is not 1
    assert not covers({"a": {"b": [1]}, "d": True}, desired)  # a list element missing
    assert not covers({"a": {"b": [1, {"c": "y"}]}, "d": True}, desired)


def test_digest_is_stable_and_changes_with_content() -> None:
    a = with_digest({"metadata": {"name": "x"}, "spec": {"v": 1}})
    b = with_digest({"metadata": {"name": "x"}, "spec": {"v": 1}})
    c = with_digest({"metadata": {"name": "x"}, "spec": {"v": 2}})
    assert a == b
    assert a["metadata"]["annotations"][DIGEST_ANNOTATION] != c["metadata"]["annotations"][DIGEST_ANNOTATION]
    assert with_digest(a) == a  # idempotent
