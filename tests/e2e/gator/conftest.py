"""Fixtures of the differential tests against Gatekeeper's gator (tests/support/gator.py).

`gator` (session): the binary; skips with the reason when it cannot run here, fails instead under
CELKEEPER_REQUIRE_GATOR=1. Each comparison runs gator once per session over a whole folder of Suites
(a handful of gator invocations in all, their answers kept for unchanged files: tests/support/gator.py)
and celkeeper once per engine (`ENGINES`: cel-go, the default, and the pure-Python cel-python,
cross-checked on the same cases); the tests look up their cases.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.gator import corpus
from tests.e2e.gator.compare import Run, celkeeper_verify, gator_verify, pair
from tests.support import samples
from tests.support.gator import GatorUnavailable, find_gator, gatekeeper_version
from tests.support.requirements import GATOR

ROOT = Path(__file__).resolve().parents[3]
#: the engines compared with gator: Kubernetes' own CEL (the default) and the pure-Python engine
ENGINES = ("cel-go", "cel-python")
OWN_SUITES = Path(__file__).resolve().parent / "suites"

# celkeeper's own API groups are Gatekeeper's shapes; gator knows only Gatekeeper's groups
_GROUPS = (
    ("templates.celkeeper.io/", "templates.gatekeeper.sh/"),
    ("constraints.celkeeper.io/", "constraints.gatekeeper.sh/"),
)


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return GATOR.header(lambda: f"Gatekeeper v{gatekeeper_version()} at {find_gator()}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    GATOR.mark(items)


@pytest.fixture(scope="session")
def gator() -> Path:
    try:
        return find_gator()
    except GatorUnavailable as exc:
        GATOR.unavailable("gator", exc)


def gatekeeper_copy(source: Path, target: Path) -> Path:
    """A copy of a folder of policies and suites with celkeeper's API groups spelled as Gatekeeper's."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".*"))
    for path in target.rglob("*"):
        if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
            text = path.read_text(encoding="utf-8")
            changed = text
            for ours, theirs in _GROUPS:
                changed = changed.replace(ours, theirs)
            if changed != text:
                path.write_text(changed, encoding="utf-8")
    return target


SUITE_ROOTS = {"examples": ROOT / "examples", "own": OWN_SUITES, "library": samples.LIBRARY}


@pytest.fixture(scope="session")
def suite_runs(gator: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Run]]:
    """Every Suite of the repository (examples/, tests/e2e/gator/suites/) and of the Gatekeeper library
    samples (when present), through gator (one invocation per folder) and through celkeeper on an
    engine: `suite_runs(engine)[root]`."""
    base = tmp_path_factory.mktemp("suites")
    copies = {
        name: gatekeeper_copy(source, base / name) for name, source in SUITE_ROOTS.items() if source.is_dir()
    }
    theirs = {name: gator_verify(gator, root) for name, root in copies.items()}

    @functools.cache
    def runs(engine: str) -> dict[str, Run]:
        return {
            name: pair(theirs[name], celkeeper_verify(copy, engine=engine)) for name, copy in copies.items()
        }

    return runs


@pytest.fixture(scope="session")
def corpus_runs(gator: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """The generated corpus through gator (one invocation) and through celkeeper on an engine:
    `corpus_runs(engine)`."""
    root = tmp_path_factory.mktemp("corpus")
    corpus.write(root)
    theirs = gator_verify(gator, root)

    @functools.cache
    def run(engine: str) -> Run:
        return pair(theirs, celkeeper_verify(root, engine=engine))

    return run
