"""The mutation package runs in celkeeper's native library: its tests skip without it (fail on CI)."""

import pytest

from tests.support.native import require_celgo


@pytest.fixture(autouse=True)
def _native_library() -> None:
    require_celgo()
