"""verify's disk cache of jsonschema's verdicts (gator/verdicts.py): a run over unchanged policies
reports what a run without it reports, without importing jsonschema; --no-cache leaves it alone. A run
whose parameter schemas and values templates.draft4 passes does not import jsonschema at all."""

from __future__ import annotations

import os
import re
import shutil
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


def _examples_needing_jsonschema(tmp_path: Path) -> Path:
    """A copy of the examples where one template's schema has a keyword only jsonschema checks (a
    `pattern` every constraint's value matches): the run's results are the examples' own."""
    copy = tmp_path / "examples"
    shutil.copytree(EXAMPLES, copy)
    template = copy / "required-labels" / "template.yaml"
    text = template.read_text()
    key = "                  key:\n                    type: string\n"
    assert key in text
    template.write_text(text.replace(key, key + '                    pattern: "^[^ ]+$"\n'))
    return copy


def _verify(cache: Path | str, *argv: str, folder: Path) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, "verify", "-v", *argv, str(folder)],
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
    folder = _examples_needing_jsonschema(tmp_path)
    first, first_err = _verify(cache, folder=folder)
    assert "jsonschema imported: True" in first_err
    entries = list((cache / "verdicts").rglob("*.json"))
    assert entries
    second, second_err = _verify(cache, folder=folder)
    assert "jsonschema imported: False" in second_err
    assert second == first
    assert sorted((cache / "verdicts").rglob("*.json")) == sorted(entries)
    afresh, afresh_err = _verify(cache, "--no-cache", folder=folder)
    assert "jsonschema imported: True" in afresh_err
    assert afresh == first
    turned_off, off_err = _verify("", folder=folder)
    assert "jsonschema imported: True" in off_err
    assert turned_off == first
    # the examples as they are: every schema and value is one templates.draft4 passes
    examples, examples_err = _verify("", folder=EXAMPLES)
    assert "jsonschema imported: False" in examples_err
    assert examples == first.replace(str(folder), str(EXAMPLES))


def test_no_cache_writes_nothing(tmp_path: Path) -> None:
    _verify(tmp_path / "cache", "--no-cache", folder=_examples_needing_jsonschema(tmp_path))
    assert not (tmp_path / "cache").exists()
