"""Which documents the admission policies are built from (documents.py), and the package's names: the
policies' evaluation (policies.py, explain.py) is imported when one of its names is first used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import celkeeper.admissionpolicy as package
from celkeeper.admissionpolicy import is_admission_input
from celkeeper.admissionpolicy import policies as policies_module
from celkeeper.documents import Document


def _document(api_version: str, kind: str) -> Document:
    return Document.from_object({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}})


@pytest.mark.parametrize(
    ("api_version", "kind", "wanted"),
    [
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", True),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", True),
        ("admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy", True),
        ("admissionregistration.k8s.io/v1alpha1", "MutatingAdmissionPolicyBinding", True),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", True),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", False),
        ("v1", "ConfigMap", False),
        ("templates.gatekeeper.sh/v1", "ConstraintTemplate", False),
    ],
)
def test_the_admission_inputs_are_policies_bindings_and_crds(
    api_version: str, kind: str, wanted: bool
) -> None:
    assert is_admission_input(_document(api_version, kind)) is wanted


def test_the_packages_names_are_the_modules_own() -> None:
    assert package.AdmissionPolicies is policies_module.AdmissionPolicies
    assert package.merge_patch is policies_module.merge_patch
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.nothing  # noqa: B018 - the attribute access is the test


def test_the_policies_evaluation_is_imported_when_first_used() -> None:
    program = (
        "import sys\n"
        "import celkeeper.admissionpolicy as p\n"
        "print('celkeeper.admissionpolicy.policies' in sys.modules)\n"
        "p.AdmissionPolicies\n"
        "print('celkeeper.admissionpolicy.policies' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"]
