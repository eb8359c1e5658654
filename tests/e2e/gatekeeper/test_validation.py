"""celkeeper's apply-time check of mutators (celkeeper.mutation.check_mutator, webhook/policycheck.py)
against what Gatekeeper refuses: generated mutators with one defect each (or none), created with
`kubectl create --dry-run=server` on an API server with Gatekeeper's CRDs and Gatekeeper's validating
webhook (its manager, `--operation=webhook`, registered for mutations.gatekeeper.sh). A mutator is
accepted by both or refused by both, and celkeeper's problem (its field and message) is in what the API
server answers. External data is left out on purpose: Gatekeeper accepts it, celkeeper refuses it (it
cannot call Gatekeeper's providers)."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator

import pytest

from celkeeper.documents import Document
from celkeeper.mutation import check_mutator
from tests.e2e.gatekeeper import cases
from tests.e2e.gatekeeper.differential import Differential
from tests.support.gatekeeper import GatekeeperManager, validating_webhook
from tests.support.waiting import wait_for

# both files share the session's two control planes and Gatekeeper's manager (conftest.py): one
# pytest-xdist worker runs them
pytestmark = pytest.mark.xdist_group("gatekeeper")

SEED = 20261206
MUTATORS = cases.apply_time_mutators(SEED, 140)


@pytest.fixture(scope="module")
def gatekeeper_validation(differential: Differential) -> Iterator[Differential]:
    """Gatekeeper's validating webhook on Gatekeeper's API server, for mutators only, while the test runs."""
    cluster = differential.gatekeeper_cluster
    manager = GatekeeperManager(
        differential.manager_binary, cluster, differential.workdir / "validation", ["--operation=webhook"]
    )
    manager.start()
    config = validating_webhook(
        "gatekeeper-validation", manager.url.replace("/v1/mutate", "/v1/admit"), manager.ca_pem
    )
    try:
        cluster.kubectl("apply", "-f", "-", input=config)
        probe = {
            "apiVersion": "mutations.gatekeeper.sh/v1",
            "kind": "Assign",
            "metadata": {"name": "probe"},
            "spec": {
                "applyTo": [{"groups": [""], "versions": ["v1"], "kinds": ["Pod"]}],
                "location": "metadata.x",
                "parameters": {"assign": {"value": "x"}},
            },
        }

        def refusing() -> bool:
            done = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=probe, check=False)
            return "validation.gatekeeper.sh" in done.stderr

        wait_for(refusing, timeout=60, what="Gatekeeper's validating webhook")
        yield differential
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", "gatekeeper-validation", check=False)
        manager.stop()


@pytest.mark.kube
@pytest.mark.timeout(600)
def test_celkeeper_refuses_the_mutators_gatekeeper_refuses(gatekeeper_validation: Differential) -> None:
    side = gatekeeper_validation.gatekeeper
    outcomes = side.send("create", [doc for _, doc in MUTATORS])
    disagree = []
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    for (what, doc), outcome in zip(MUTATORS, outcomes, strict=True):
        problems = check_mutator(Document.from_object(doc))
        refused_by_gatekeeper = outcome.error is not None
        counts[(what, "refused" if refused_by_gatekeeper else "accepted")] += 1
        if refused_by_gatekeeper != bool(problems):
            disagree.append((what, doc, outcome.error, [str(p) for p in problems]))
            continue
        for problem in problems:
            said = f"{problem.location.path}: " if problem.location.path else ""
            core = (
                problem.message.split(": ", 1)[1]
                if problem.message.startswith(f"{doc['kind']} ")
                else problem.message
            )
            core = core.strip()  # kubectl trims the message's end
            if said + core not in (outcome.error or "") and core not in (outcome.error or ""):
                disagree.append((what, doc, outcome.error, [str(p) for p in problems]))
    summary = f"{len(MUTATORS)} mutators: {dict(sorted(counts.items()))}"
    print(summary)
    assert not disagree, f"{len(disagree)} of {summary} disagree:\n" + "\n".join(
        json.dumps(d, default=str) for d in disagree[:8]
    )
    refused = sum(n for (_, verdict), n in counts.items() if verdict == "refused")
    assert 40 <= refused <= len(MUTATORS) - 20, summary
