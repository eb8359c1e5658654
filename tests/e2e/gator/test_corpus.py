"""The generated corpus (tests/e2e/gator/corpus, 3,500+ cases) decided by gator and by celkeeper: every
case must give the same results (messages, enforcement actions) and the same verdict.

Both engines are compared with the same gator run, with no exception list: cel-go (the default:
Kubernetes' own CEL, as Gatekeeper runs it) and the pure-Python cel-python engine (cross-checked on
every case).

One test per family compares all its cases (thousands of pytest items would cost more than the
comparison).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.e2e.gator import corpus
from tests.e2e.gator.compare import Run, differences


def _case_ids() -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {}
    for family in corpus.families():
        found = ids.setdefault(family.name, [])
        for test in family.tests:
            if test.invalid or not test.cases:
                found.append(f"{family.name}/suite.yaml::{test.name}::-")
            found.extend(f"{family.name}/suite.yaml::{test.name}::{case.name}" for case in test.cases)
    return ids


CASE_IDS = _case_ids()
EVERY_CASE = [i for ids in CASE_IDS.values() for i in ids]


def _differences(run: Run, case_id: str) -> list[str]:
    key = case_id
    if key not in run.gator and key not in run.celkeeper:
        key = case_id.rpartition("::")[0] + "::-"  # the test stopped before its cases, on both sides
    return differences(run.gator.get(key), run.celkeeper.get(key))


def test_the_corpus_is_large_enough() -> None:
    assert len(EVERY_CASE) >= 2000
    assert len(set(EVERY_CASE)) == len(EVERY_CASE)


@pytest.mark.parametrize("engine", ["cel-go", "cel-python"])
def test_both_sides_ran_every_test(corpus_runs: Callable[[str], Run], engine: str) -> None:
    run = corpus_runs(engine)
    tests = {i.rpartition("::")[0] for i in EVERY_CASE}
    assert {i.rpartition("::")[0] for i in run.gator} == tests
    assert set(run.celkeeper) == set(run.gator), sorted(set(run.celkeeper) ^ set(run.gator))[:20]


def _report(found: list[tuple[str, list[str]]]) -> str:
    return f"{len(found)} cases differ from gator:\n" + "\n".join(
        f"{case_id}:\n  " + "\n  ".join(why) for case_id, why in found[:30]
    )


@pytest.mark.parametrize("engine", ["cel-go", "cel-python"])
@pytest.mark.parametrize("family", sorted(CASE_IDS))
def test_family_agrees_with_gator(corpus_runs: Callable[[str], Run], family: str, engine: str) -> None:
    run = corpus_runs(engine)
    found = [(i, d) for i in CASE_IDS[family] if (d := _differences(run, i))]
    assert not found, _report(found)
