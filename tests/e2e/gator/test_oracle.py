"""The oracle itself: the gator binary is Gatekeeper's, at the version hack/gator/go.mod requires, built
from those module files; without it the differential tests skip with the reason (or fail under
CELKEEPER_REQUIRE_GATOR=1, which CI sets)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.gator import BUILD_SCRIPT, GatorUnavailable, find_gator, gatekeeper_version, run_gator


def test_the_binary_is_gatekeepers_gator_at_the_pinned_version(gator: Path) -> None:
    run = run_gator(gator, ["--version"])
    assert run.code == 0
    assert re.match(rf"gator version v{re.escape(gatekeeper_version())} ", run.out), run.out
    stamp = gator.with_name("gator.stamp")
    assert stamp.read_text().strip(), "the binary records what built it"
    assert subprocess.run([str(BUILD_SCRIPT), "--check"], check=False).returncode == 0


def test_a_missing_binary_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELKEEPER_GATOR_CACHE", str(tmp_path / "empty"))
    with pytest.raises(GatorUnavailable) as caught:
        find_gator()
    assert "not built" in str(caught.value) and str(BUILD_SCRIPT) in str(caught.value)


def test_a_stale_binary_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELKEEPER_GATOR_CACHE", str(tmp_path))
    where = Path(
        subprocess.run(
            [str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    where.parent.mkdir(parents=True)
    where.write_text("#!/bin/sh\n")
    where.chmod(0o755)
    where.with_name("gator.stamp").write_text("built-from-other-files\n")
    with pytest.raises(GatorUnavailable, match="stale"):
        find_gator()
