"""The repository's example policies as test material."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_template(folder: str, kind: str) -> dict[str, Any]:
    """examples/<folder>/template.yaml defining `kind` instead (named after it): a template of its own for
    a test on the session's shared control plane."""
    template: dict[str, Any] = yaml.safe_load((EXAMPLES / folder / "template.yaml").read_text())
    template["metadata"] = {"name": kind.lower()}
    template["spec"]["crd"]["spec"]["names"]["kind"] = kind
    return template
