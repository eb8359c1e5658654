"""Shared helpers for the CRD tests: sample templates and constraints, schema walking."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support import samples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def load(path: Path) -> list[dict[str, Any]]:
    """The data of each document of a file (AssertionError when it does not parse)."""
    return [d.data for d in samples.read_documents(path)]


def library_dirs() -> list[Path]:
    """The gatekeeper-library template folders ([] when the samples are absent)."""
    return [p.parent for p in samples.templates()]


def example_dirs() -> list[Path]:
    if not EXAMPLES.is_dir():
        return []
    return sorted(p.parent for p in EXAMPLES.glob("*/template.yaml"))


def template_of(directory: Path) -> dict[str, Any]:
    (template,) = [d for d in load(directory / "template.yaml") if d.get("kind") == "ConstraintTemplate"]
    return template


def constraints_of(directory: Path, kind: str) -> list[tuple[Path, dict[str, Any]]]:
    """Every document of `kind` in the YAML files under `directory` (samples and examples)."""
    found: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(directory.rglob("*.yaml")):
        try:
            docs = load(path)
        except AssertionError:
            continue
        found.extend((path, d) for d in docs if d.get("kind") == kind)
    return found


def schema_at(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The schema of a field given as a dotted path of property names (`spec.match.kinds`); `[]` = items."""
    node = schema
    for part in dotted.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def walk(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, node) of a schema's structural part: properties, items, additionalProperties."""
    if not isinstance(schema, dict):
        return []
    nodes = [(path, schema)]
    for name, child in (schema.get("properties") or {}).items():
        nodes += walk(child, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), dict):
        nodes += walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        nodes += walk(schema["additionalProperties"], f"{path}{{}}")
    return nodes


def make_template(
    kind: str = "K8sThing", api_version: str = "templates.celkeeper.io/v1", **validation: Any
) -> dict:
    spec: dict[str, Any] = {"names": {"kind": kind}}
    if validation:
        spec["validation"] = validation
    return {
        "apiVersion": api_version,
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {"crd": {"spec": spec}, "targets": []},
    }


def versions(crd: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in crd["spec"]["versions"]}


def spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    return versions(crd)["v1beta1"]["schema"]["openAPIV3Schema"]
