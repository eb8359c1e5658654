"""Where the native library is (locate.py): in a source checkout, the build of its Go sources."""

from __future__ import annotations

import pytest

from celkeeper.native import locate


def test_a_checkout_finds_the_build_of_its_sources_hashing_them_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CELKEEPER_NATIVE_LIB", raising=False)
    monkeypatch.setattr(locate, "_checkout_build", None)
    build = locate.cached_library()
    hashed: list[str] = []
    real_hash = locate.source_hash

    def counted(*args: object) -> str:
        hashed.append("once")
        return real_hash(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(locate, "source_hash", counted)
    first, second = locate.find_library(), locate.find_library()
    assert first == second
    assert first[0] == build if build.is_file() else str(build) in first[1]
    assert hashed == ["once"]


def test_a_library_named_by_the_environment_is_taken_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELKEEPER_NATIVE_LIB", "/nonexistent/libcelkeeper.so")
    assert locate.find_library() == (None, "CELKEEPER_NATIVE_LIB=/nonexistent/libcelkeeper.so does not exist")
