"""The generated corpus (tests/gator/corpus, 3,500+ cases) decided by gator and by celkeeper: every
case must give the same results (messages, enforcement actions) and the same verdict.

One test per family compares all its cases (thousands of pytest items would cost more than the
comparison). Cases listed in tests/gator/engine_pending.py are CEL-engine differences waiting for
the engine work (issue 11), checked strictly: a listed case must still differ (else it must leave the
list) and every other case must agree.
"""

from __future__ import annotations

import pytest

from tests.gator import corpus
from tests.gator.compare import Run, differences
from tests.gator.engine_pending import reason


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


def test_the_corpus_is_large_enough() -> None:
    every = [i for ids in CASE_IDS.values() for i in ids]
    assert len(every) >= 2000
    assert len(set(every)) == len(every)


def test_both_sides_ran_every_test(corpus_run: Run) -> None:
    tests = {i.rpartition("::")[0] for ids in CASE_IDS.values() for i in ids}
    assert {i.rpartition("::")[0] for i in corpus_run.gator} == tests
    assert set(corpus_run.celkeeper) == set(corpus_run.gator), sorted(
        set(corpus_run.celkeeper) ^ set(corpus_run.gator)
    )[:20]


@pytest.mark.parametrize("family", sorted(CASE_IDS))
def test_family_agrees_with_gator(corpus_run: Run, family: str) -> None:
    unexpected: list[str] = []  # differences outside the engine list
    fixed: list[str] = []  # listed engine differences that now agree: remove them from the list
    for case_id in CASE_IDS[family]:
        key = case_id
        if key not in corpus_run.gator and key not in corpus_run.celkeeper:
            key = case_id.rpartition("::")[0] + "::-"  # the test stopped before its cases, on both sides
        found = differences(corpus_run.gator.get(key), corpus_run.celkeeper.get(key))
        pending = reason(case_id)
        if found and pending is None:
            unexpected.append(f"{case_id}:\n  " + "\n  ".join(found))
        elif not found and pending is not None:
            fixed.append(case_id)
    message = []
    if unexpected:
        message.append(f"{len(unexpected)} cases differ from gator:\n" + "\n".join(unexpected[:30]))
    if fixed:
        message.append(
            f"{len(fixed)} cases listed in tests/gator/engine_pending.py now agree (remove them there):\n"
            + "\n".join(fixed[:50])
        )
    assert not message, "\n\n".join(message)


def test_the_engine_list_names_only_corpus_cases() -> None:
    every = {i for ids in CASE_IDS.values() for i in ids}
    import fnmatch

    from tests.gator.engine_pending import PENDING

    for name, _why, patterns in PENDING:
        for pattern in patterns:
            assert any(fnmatch.fnmatchcase(i, pattern) for i in every), (name, pattern)
