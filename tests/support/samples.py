"""The Gatekeeper library samples (open-policy-agent/gatekeeper-library: templates, constraints, suites).

They are not part of the repository: CI keeps them beside the checkout, in
../shared/samples/gatekeeper-library. CELKEEPER_SAMPLES_DIR names another place: the gatekeeper-library
folder itself, or a folder holding it. Tests that need them call `library()`, which skips the test
with one reason when they are absent; the pytest header says where they were found.

    from tests.support.samples import library
    template = library() / "general" / "requiredlabels" / "template.yaml"
    (document,) = read_documents(template)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from celkeeper.documents import Document, parse_documents

ENV = "CELKEEPER_SAMPLES_DIR"
ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT.parent / "shared" / "samples" / "gatekeeper-library"


def _locate() -> Path:
    configured = os.environ.get(ENV)
    if not configured:
        return DEFAULT
    path = Path(configured).expanduser()
    nested = path / "gatekeeper-library"
    return nested if nested.is_dir() else path


LIBRARY = _locate()
SKIP_REASON = (
    f"the Gatekeeper library samples are absent: no folder {LIBRARY} "
    f"(put gatekeeper-library in ../shared/samples beside the checkout, or set {ENV})"
)


def present() -> bool:
    return LIBRARY.is_dir()


def library() -> Path:
    """The gatekeeper-library folder; skips the calling test when it is absent."""
    if not present():
        pytest.skip(SKIP_REASON)
    return LIBRARY


def templates() -> list[Path]:
    """Every template.yaml of the library, sorted ([] when it is absent: for parametrizing)."""
    return sorted(LIBRARY.rglob("template.yaml")) if present() else []


def read_documents(path: Path) -> list[Document]:
    """The documents of a YAML/JSON file (with positions); the file must parse."""
    parsed = parse_documents(path.read_text(encoding="utf-8"), str(path))
    assert not parsed.errors, [str(e) for e in parsed.errors]
    return list(parsed.documents)


def pytest_report_header(config: pytest.Config) -> str:
    del config
    return f"samples: gatekeeper-library in {LIBRARY}" if present() else f"samples: {SKIP_REASON}"
