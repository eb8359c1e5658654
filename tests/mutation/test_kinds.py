"""Which documents are mutators (kinds.py), and the package's names: the mutation System (mutators.py,
expandoutput.py) is imported when one of its names is first used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import celkeeper.mutation as package
from celkeeper.documents import Document
from celkeeper.mutation import expandoutput, is_mutator, mutators


@pytest.mark.parametrize(
    ("api_version", "kind", "wanted"),
    [
        ("mutations.gatekeeper.sh/v1", "Assign", True),
        ("mutations.gatekeeper.sh/v1beta1", "AssignMetadata", True),
        ("mutations.gatekeeper.sh/v1alpha1", "ModifySet", True),
        ("mutations.gatekeeper.sh/v1alpha1", "AssignImage", True),
        ("mutations.gatekeeper.sh/v1", "Config", False),
        ("expansion.gatekeeper.sh/v1alpha1", "ExpansionTemplate", False),
        ("v1", "Pod", False),
    ],
)
def test_mutators_are_the_mutation_groups_kinds(api_version: str, kind: str, wanted: bool) -> None:
    document = Document.from_object({"apiVersion": api_version, "kind": kind, "metadata": {"name": "m"}})
    assert is_mutator(document) is wanted


def test_the_packages_names_are_the_modules_own() -> None:
    assert package.MutatorSet is mutators.MutatorSet
    assert package.build_mutator_set is mutators.build_mutator_set
    assert package.expand_output is expandoutput.expand_output
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        package.nothing  # noqa: B018 - the attribute access is the test


def test_the_mutation_system_is_imported_when_first_used() -> None:
    program = (
        "import sys\n"
        "import celkeeper.mutation as m\n"
        "print('celkeeper.mutation.mutators' in sys.modules)\n"
        "m.MutatorSet\n"
        "print('celkeeper.mutation.mutators' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["False", "True"]
