"""verify's disk cache of jsonschema's verdicts (gator/verdicts.py): a run over unchanged policies
reports what a run without it reports, without importing jsonschema; --no-cache leaves it alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import EXAMPLES, ROOT

# what imports jsonschema, and the report without its timings
_SCRIPT = (
    "import sys\n"
    "from celkeeper.cli.main import main\n"
    "code = main(sys.argv[1:])\n"
    "print('jsonschema imported:', 'jsonschema' in sys.modules, file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


def _verify(cache: Path | str, *argv: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "verify", "-v", *argv, str(EXAMPLES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CELKEEPER_CACHE_DIR": str(cache)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return re.sub(r"\(?\d+\.\d+s\)?", "", done.stdout), done.stderr


def test_a_second_run_reports_the_same_without_jsonschema(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, first_err = _verify(cache)
    assert "jsonschema imported: True" in first_err
    entries = list((cache / "verdicts").rglob("*.json"))
    assert entries
    second, second_err = _verify(cache)
    assert "jsonschema imported: False" in second_err
    assert second == first
    assert sorted((cache / "verdicts").rglob("*.json")) == sorted(entries)
    afresh, afresh_err = _verify(cache, "--no-cache")
    assert "jsonschema imported: True" in afresh_err
    assert afresh == first
    turned_off, off_err = _verify("")
    assert "jsonschema imported: True" in off_err
    assert turned_off == first


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    _verify(tmp_path / "cache", "--no-cache")
    assert not (tmp_path / "cache").exists()
