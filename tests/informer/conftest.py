"""The informer's tests' shared fixture: a policy folder with one template and its constraint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.policyfiles import OWNER_CONSTRAINT, OWNER_TEMPLATE


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    """A folder holding the owner-label template and its constraint."""
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "template.yaml").write_text(OWNER_TEMPLATE)
    (folder / "constraint.yaml").write_text(OWNER_CONSTRAINT)
    return folder
