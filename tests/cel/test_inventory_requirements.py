"""Synced data's declaration: Gatekeeper's requires-sync-data annotation read as Gatekeeper reads it."""

from __future__ import annotations

import pytest

from celkeeper.cel.inventory import Gvk, RequirementsError, parse_requirements, unmet
from tests.support.syncdata import (
    INGRESS,
)


def test_requirements_are_read_as_gatekeeper_reads_them() -> None:
    # the annotation as gatekeeper-library writes it: a JSON string inside quotes, over several lines
    text = (
        '|\n"[\n  [\n {"groups": ["extensions"], "versions": ["v1beta1"], "kinds": ["Ingress"]},\n'
        ' {"groups": ["networking.k8s.io"], "versions": ["v1beta1", "v1"], "kinds": ["Ingress"]}\n ]\n]"\n'
    )
    (requirement,) = parse_requirements(text.removeprefix("|\n"))
    assert requirement == {
        Gvk("extensions", "v1beta1", "Ingress"),
        Gvk("networking.k8s.io", "v1beta1", "Ingress"),
        INGRESS,
    }
    assert unmet((requirement,), frozenset({INGRESS})) == ()
    assert unmet((requirement,), frozenset()) == (requirement,)
    for bad in ("{}", "[{}]", '[[{"group": ["x"]}]]', '[[{"kinds": "Ingress"}]]', "not json"):
        with pytest.raises(RequirementsError):
            parse_requirements(bad)
