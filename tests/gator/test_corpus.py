"""The generated corpus (tests/gator/corpus, 3,500+ cases) decided by gator and by celkeeper: every
case must give the same results (messages, enforcement actions) and the same verdict.

On cel-go (the default engine: Kubernetes' own CEL, as Gatekeeper runs it) every case agrees, with no
exception. The pure-Python cel-python engine is cross-checked on the same cases: the cases where it
still differs are listed, by reason, in tests/gator/celpython_known.py (and docs/known-issues.md),
and checked strictly: a listed case must still differ (else it must leave the list), every other
case must agree, and each reason is a strict expected failure of its own.

One test per family compares all its cases (thousands of pytest items would cost more than the
comparison).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable

import pytest

from tests.gator import corpus
from tests.gator.celpython_known import KNOWN, Known, known
from tests.gator.compare import Run, differences


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


@pytest.mark.parametrize("family", sorted(CASE_IDS))
def test_family_agrees_with_gator_on_cel_go(corpus_runs: Callable[[str], Run], family: str) -> None:
    run = corpus_runs("cel-go")
    found = [(i, d) for i in CASE_IDS[family] if (d := _differences(run, i))]
    assert not found, _report(found)


@pytest.mark.parametrize("family", sorted(CASE_IDS))
def test_family_agrees_with_gator_on_cel_python(corpus_runs: Callable[[str], Run], family: str) -> None:
    """Every case agrees but those listed in celpython_known.py, which must still differ."""
    run = corpus_runs("cel-python")
    unexpected: list[tuple[str, list[str]]] = []
    fixed: list[str] = []
    for case_id in CASE_IDS[family]:
        found = _differences(run, case_id)
        listed = known(case_id)
        if found and listed is None:
            unexpected.append((case_id, found))
        elif not found and listed is not None:
            fixed.append(f"{case_id} ({listed.name})")
    message = []
    if unexpected:
        message.append(_report(unexpected))
    if fixed:
        message.append(
            f"{len(fixed)} cases listed in tests/gator/celpython_known.py now agree (remove them there "
            "and from docs/known-issues.md):\n" + "\n".join(fixed[:50])
        )
    assert not message, "\n\n".join(message)


@pytest.mark.parametrize(
    "entry",
    [pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=k.reason), id=k.name) for k in KNOWN],
)
def test_known_cel_python_difference(corpus_runs: Callable[[str], Run], entry: Known) -> None:
    """Strict expected failures, one per documented reason: they pass (and so fail the run) once
    cel-python agrees with gator on every case of the reason."""
    run = corpus_runs("cel-python")
    cases = [i for i in EVERY_CASE if any(fnmatch.fnmatchcase(i, p) for p in entry.patterns)]
    assert cases
    found = [(i, d) for i in cases if (d := _differences(run, i))]
    assert not found, _report(found)


def test_the_known_list_names_only_corpus_cases() -> None:
    for entry in KNOWN:
        for pattern in entry.patterns:
            assert any(fnmatch.fnmatchcase(i, pattern) for i in EVERY_CASE), (entry.name, pattern)
