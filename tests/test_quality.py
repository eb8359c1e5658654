"""The project's own rules, checked as tests: import-linter layers, ruff (lint, format) and mypy."""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed: install the dev extra (pip install -e '.[test,dev]')")
    return found


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)


def test_layers_and_engine_imports_follow_the_architecture() -> None:
    proc = _run(_tool("lint-imports"), "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_is_clean() -> None:
    proc = _run(_tool("ruff"), "check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_applied() -> None:
    proc = _run(_tool("ruff"), "format", "--check", "celkeeper", "tests", "bench")
    assert proc.returncode == 0, "run `ruff format celkeeper tests bench`:\n" + proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = _run(_tool("mypy"), "--config-file", "setup.cfg")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _layers_in_contract() -> list[set[str]]:
    """setup.cfg's `[importlinter:contract:layers]`: top layer first, each a set of sibling names."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines()]
    return [{name.strip().removeprefix("celkeeper.") for name in line.split("|")} for line in lines if line]


def _layers_in_doc(path: Path) -> list[set[str]]:
    """The layer block of a document: the first fenced block after its `## Layers` heading. A line that
    starts at column 0 is a layer (names split by `|`, up to two spaces before its description, an
    optional `celkeeper.` prefix); an indented line continues the description of the one above."""
    text = path.read_text()
    _, found, after = text.partition("\n## Layers\n")
    assert found, f"{path.name} has no `## Layers` section"
    block = after.split("```", 2)
    assert len(block) == 3, f"{path.name}: no fenced block after `## Layers`"
    layers = []
    for line in block[1].strip("\n").splitlines():
        if not line.strip() or line[0].isspace():
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        layers.append({name.strip().removeprefix("celkeeper.") for name in names.split("|")})
    return layers


def _top_level_modules() -> set[str]:
    package = ROOT / "celkeeper"
    found = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in package.glob("*.py") if p.stem not in {"__init__", "__main__"}}
    return found


@pytest.mark.parametrize("doc", ["docs/architecture.md", "DEVELOPERS.md"])
def test_the_documented_layers_are_the_contract(doc: str) -> None:
    """The layer list a document draws is setup.cfg's layers contract: the same layers, in the same
    order, with the same siblings on each line."""
    documented = _layers_in_doc(ROOT / doc)
    contract = _layers_in_contract()
    assert documented == contract, (
        f"{doc}'s layer list and setup.cfg's [importlinter:contract:layers] disagree:\n"
        f"  {doc}:  {' / '.join(' | '.join(sorted(layer)) for layer in documented)}\n"
        f"  setup.cfg: {' / '.join(' | '.join(sorted(layer)) for layer in contract)}"
    )


def test_every_package_has_a_layer() -> None:
    """No top-level package or module of celkeeper escapes the layers contract (nor is named there
    without existing)."""
    layered = set().union(*_layers_in_contract())
    modules = _top_level_modules()
    assert modules - layered == set(), f"in no layer of setup.cfg: {sorted(modules - layered)}"
    assert layered - modules == set(), f"layers naming no module: {sorted(layered - modules)}"
