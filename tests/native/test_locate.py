"""Where the native library is (locate.py): in a source checkout, the build of its Go sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from celkeeper.native import locate


def test_a_checkout_finds_the_build_of_its_sources_hashing_them_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CELKEEPER_NATIVE_LIB", raising=False)
    monkeypatch.setattr(locate, "_checkout_builds", None)
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


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty folder where this checkout's builds are looked for (a cache of its own)."""
    monkeypatch.delenv("CELKEEPER_NATIVE_LIB", raising=False)
    monkeypatch.setenv("CELKEEPER_NATIVE_CACHE", str(tmp_path))
    monkeypatch.setattr(locate, "_checkout_builds", None)
    folder = tmp_path / locate.source_hash()
    folder.mkdir()
    return folder


def test_each_variant_is_found_beside_the_other_in_the_build_of_the_sources(builds: Path) -> None:
    for variant in locate.VARIANTS:
        (builds / variant.name).write_bytes(b"")
    assert locate.find_library(locate.FULL) == (builds / "libcelkeeper.so", "")
    assert locate.find_library(locate.GATEKEEPER) == (builds / "libcelkeeper-gatekeeper.so", "")


def test_a_variant_not_built_is_served_by_the_library_with_every_capability(builds: Path) -> None:
    (builds / locate.FULL.name).write_bytes(b"")
    assert locate.find_library(locate.GATEKEEPER) == (builds / locate.FULL.name, "")


def test_the_gatekeeper_variant_is_built_without_the_admission_policies_exports() -> None:
    """Its build tag leaves out exactly the file of the admissionpolicy capability's exports."""
    assert locate.GATEKEEPER.build_args()[-1] == "-tags=gatekeeper_only"
    assert "-tags" not in " ".join(locate.FULL.build_args())
    tagged = [p.name for p in locate.GO_DIR.glob("*.go") if "//go:build !gatekeeper_only" in p.read_text()]
    assert tagged == ["export_admissionpolicy.go"]
