"""celkeeper's mutation against Gatekeeper's mutation webhook: the same generated mutators and requests
on two real API servers, one calling Gatekeeper v3.23.1's manager, the other celkeeper's review.mutate;
what each API server would store (or its refusal) must be identical for every case (differential.py,
cases.py)."""

from __future__ import annotations

import collections
import time

import pytest

from tests.e2e.gatekeeper import cases
from tests.e2e.gatekeeper.differential import Case, Differential

# both files share the session's two control planes and Gatekeeper's manager (conftest.py): one
# pytest-xdist worker runs them
pytestmark = pytest.mark.xdist_group("gatekeeper")

SEED = 20261205
ROUNDS = cases.rounds(SEED, count=24, creates=16, updates=8, annotated=3)


@pytest.mark.kube
@pytest.mark.timeout(1800)
def test_celkeeper_mutates_every_case_as_gatekeeper(differential: Differential) -> None:
    started = time.monotonic()
    results: list[Case] = []
    for round_ in ROUNDS:
        results.extend(differential.run(round_))
    different = [case for case in results if not case.same]
    counts = collections.Counter(
        (case.operation, "error" if case.gatekeeper.error else "mutated" if case.mutated else "unchanged")
        for case in results
    )
    summary = f"{len(results)} cases in {time.monotonic() - started:.0f}s: {dict(sorted(counts.items()))}"
    print(summary)
    assert not different, f"{len(different)} of {summary} differ:\n" + "\n".join(
        case.describe() for case in different[:8]
    )
    assert len(results) >= 500, summary
    # the cases exercise mutation, refusals and CREATE and UPDATE (not vacuously equal)
    for operation in ("CREATE", "UPDATE"):
        assert counts[(operation, "mutated")] >= 50, summary
        assert counts[(operation, "unchanged")] >= 20, summary
    assert counts[("CREATE", "error")] + counts[("UPDATE", "error")] >= 1, summary
    # celkeeper's side answered every request, and the annotated rounds annotated
    assert differential.served() >= len(results), summary
    annotated = [
        c for c in results if c.gatekeeper.stored and '"gatekeeper.sh/mutations"' in c.gatekeeper.stored
    ]
    assert len(annotated) >= 10, summary
