"""Every Suite in the repository (examples/, tests/e2e/gator/suites/) and in the Gatekeeper library
samples, run by gator verify and by celkeeper verify: the same verdict for every suite, test and
case, the same assertion failure texts, and the same results (messages, enforcement actions) for
every reviewed case (gator's --trace). celkeeper's own API groups are spelled as Gatekeeper's in the
copy both tools run (gator knows only Gatekeeper's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.gator.compare import Run, Side, differences, run_both
from tests.e2e.gator.conftest import ENGINES, SUITE_ROOTS, gatekeeper_copy


def _suite_files() -> list[str]:
    found = []
    for name, root in SUITE_ROOTS.items():
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*.y*ml")):
            if "test.gatekeeper.sh" in path.read_text(encoding="utf-8", errors="replace"):
                found.append(f"{name}/{path.relative_to(root).as_posix()}")
    return found


SUITES = _suite_files()


def test_every_root_has_suites() -> None:
    for name in ("examples", "own"):
        assert any(s.startswith(f"{name}/") for s in SUITES), name


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("suite", SUITES)
def test_suite_agrees_with_gator(
    suite_runs: Callable[[str], dict[str, Run]], suite: str, engine: str
) -> None:
    root, _, rel = suite.partition("/")
    run = suite_runs(engine)[root]
    mine = {k for k in set(run.gator) | set(run.celkeeper) if k.startswith(f"{rel}::")}
    assert mine, f"neither tool ran {rel}"
    problems = []
    for case_id in sorted(mine):
        found = differences(run.gator.get(case_id), run.celkeeper.get(case_id))
        if found:
            problems.append(f"{case_id}:\n  " + "\n  ".join(found))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("root", [n for n, r in SUITE_ROOTS.items() if r.is_dir()])
def test_same_counts_as_gator(suite_runs: Callable[[str], dict[str, Run]], root: str, engine: str) -> None:
    """celkeeper verify's summary line counts what gator ran: cases passed, failed and skipped."""
    run = suite_runs(engine)[root]
    assert _counts(run.gator) == _counts(run.celkeeper)
    summary = [line for line in run.celkeeper_output.splitlines() if " passed, " in line][-1]
    passed, failed, skipped = _counts(run.gator)
    expected = f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "")
    assert summary == expected


def _counts(sides: dict[str, Side]) -> tuple[int, int, int]:
    """(passed, failed, skipped), per case; a test that stops before its cases counts once."""
    passed = failed = skipped = 0
    for side in sides.values():
        status = side.case.status if side.case is not None else side.test.status
        if side.case is None and side.suite.status == "FAIL" and not side.suite.tests:
            status = "FAIL"
        if status == "PASS":
            passed += 1
        elif status == "SKIP":
            skipped += 1
        else:
            failed += 1
    return passed, failed, skipped


FILTERS = ["labels", "//^missing", "workloads//", "^namespaces-have-owner$", "registr//pod", "//"]


@pytest.fixture(scope="session")
def filtered_runs(gator: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    root = gatekeeper_copy(SUITE_ROOTS["examples"], tmp_path_factory.mktemp("filtered") / "examples")
    return {f: run_both(gator, root, ("--run", f)) for f in FILTERS}


@pytest.mark.parametrize("run_filter", FILTERS)
def test_run_filters_select_what_gator_selects(filtered_runs: dict[str, Run], run_filter: str) -> None:
    run = filtered_runs[run_filter]
    statuses = {k: (s.test.status, s.case.status if s.case else None) for k, s in run.gator.items()}
    ours = {k: (s.test.status, s.case.status if s.case else None) for k, s in run.celkeeper.items()}
    assert ours == statuses
    assert any(s != ("SKIP", "SKIP") and s != ("SKIP", None) for s in statuses.values())
