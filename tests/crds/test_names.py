"""Names and labels shared by the writers and readers of celkeeper's resources."""

from __future__ import annotations

import pytest

from celkeeper.crds import names
from celkeeper.errors import CelkeeperError


@pytest.mark.parametrize(
    "parts",
    [
        ("pod-a", "k8srequiredlabels"),
        ("gk-7d9f-x", "k8sthing", "all-must-have-owner"),
        ("a", "b", "c"),
        ("x--y", "z"),
    ],
)
def test_pack_name_round_trips(parts: tuple[str, ...]) -> None:
    packed = names.pack_name(*parts)
    assert names.unpack_name(packed) == parts


def test_pack_name_doubles_dashes_inside_parts() -> None:
    assert names.pack_name("pod-a", "k8sthing", "no-latest") == "pod--a-k8sthing-no--latest"


@pytest.mark.parametrize("parts", [(), ("",), ("-a", "b"), ("a", "b-")])
def test_pack_name_refuses_parts_it_cannot_read_back(parts: tuple[str, ...]) -> None:
    with pytest.raises(CelkeeperError):
        names.pack_name(*parts)


def test_status_names_are_gatekeepers_and_valid_kubernetes_names() -> None:
    assert (
        names.template_pod_status_name("celkeeper-0", "k8srequiredlabels") == "celkeeper--0-k8srequiredlabels"
    )
    assert (
        names.constraint_pod_status_name("celkeeper-0", "K8sRequiredLabels", "must-have-owner")
        == "celkeeper--0-k8srequiredlabels-must--have--owner"
    )
    with pytest.raises(CelkeeperError, match="not a valid Kubernetes name"):
        names.template_pod_status_name("Pod_A", "x")
    with pytest.raises(CelkeeperError, match="not a valid Kubernetes name"):
        names.template_pod_status_name("p" * 200, "t" * 60)


def test_status_labels_link_pod_template_and_constraint() -> None:
    assert names.template_pod_status_labels("pod-a", "k8sthing") == {
        "internal.celkeeper.io/constrainttemplate-name": "k8sthing",
        "internal.celkeeper.io/pod": "pod-a",
    }
    assert names.constraint_pod_status_labels("pod-a", "K8sThing", "c1") == {
        "internal.celkeeper.io/constraint-name": "c1",
        "internal.celkeeper.io/constraint-kind": "K8sThing",
        "internal.celkeeper.io/constrainttemplate-name": "k8sthing",
        "internal.celkeeper.io/pod": "pod-a",
    }


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a", True),
        ("k8sthing", True),
        ("a-b", True),
        ("-a", False),
        ("a-", False),
        ("1a", False),
        ("A", False),
        ("a" * 63, True),
        ("a" * 64, False),
        ("a.b", False),
    ],
)
def test_dns1035_labels(value: str, ok: bool) -> None:
    assert names.is_dns1035_label(value) is ok


def test_constraint_crd_name() -> None:
    assert names.constraint_crd_name("K8sRequiredLabels") == "k8srequiredlabels.constraints.celkeeper.io"
