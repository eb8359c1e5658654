"""Per-pod status of a constraint whose template reads data not synced yet: not enforced, and why."""

from __future__ import annotations

from celkeeper.cel.api import Engine
from celkeeper.incluster.objects import item_name
from celkeeper.incluster.podstatus import observe
from tests.support.syncdata import (
    INGRESS,
    NO_OTHER,
    REQUIRES_INGRESS,
    engine_fixture,  # noqa: F401 (the fixture `engine`)
    policies,
    template_yaml,
)


def test_the_pod_status_says_a_constraint_waits_for_its_data(engine: Engine) -> None:
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    found = [
        {
            "apiVersion": "templates.celkeeper.io/v1",
            "kind": "ConstraintTemplate",
            "metadata": {"name": "k8sreads"},
        },
        {"apiVersion": "constraints.celkeeper.io/v1beta1", "kind": "K8sReads", "metadata": {"name": "reads"}},
    ]
    objects = {str(item_name(o)): o for o in found}
    waiting = observe(objects, loaded, [], frozenset())
    constraint = waiting[("K8sReads", "reads")]
    assert constraint.enforced is False
    assert [e.code for e in constraint.errors] == ["data_not_synced"]
    assert constraint.errors[0].message.startswith(
        "reads networking.k8s.io/v1 Ingress, which this pod has not"
    )
    assert waiting[("ConstraintTemplate", "k8sreads")].enforced is True
    synced = observe(objects, loaded, [], frozenset({INGRESS}))
    assert synced[("K8sReads", "reads")].enforced is True
    assert synced[("K8sReads", "reads")].errors == ()
