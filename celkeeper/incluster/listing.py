"""Every template and constraint in the cluster, once (`celkeeper vap --cluster`): no watch, no informer.

celkeeper's (celkeeper.incluster): celkeeper's resources, listed through the adapter.
"""

from __future__ import annotations

from typing import Any

from celkeeper.errors import CelkeeperError
from celkeeper.incluster.objects import item_name, policy_object
from celkeeper.incluster.resources import TEMPLATES, constraint_kinds, constraints
from celkeeper.kube.client import ApiError, KubeClient


def policy_objects(kubeconfig: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(item name, object) of every ConstraintTemplate and of every constraint of their kinds."""
    client = KubeClient.connect(kubeconfig)
    try:
        try:
            templates = client.list(TEMPLATES).items
        except ApiError as err:
            if err.not_found:
                raise CelkeeperError(
                    "the ConstraintTemplate CRD (constrainttemplates.templates.celkeeper.io) is not installed"
                ) from err
            raise
        objects = [policy_object(t) for t in templates]
        for kind in sorted(set(constraint_kinds(templates).values())):
            try:
                objects += [policy_object(c) for c in client.list(constraints(kind)).items]
            except ApiError as err:
                if not err.not_found:  # a template whose constraint CRD is not made yet
                    raise
    finally:
        client.close()
    return [(item_name(obj) or "", obj) for obj in objects]
