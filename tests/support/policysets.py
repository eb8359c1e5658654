"""Large policy sets for tests and benchmarks: the example templates with many constraints.

    names = large_policy_set(out, constraints=2000, distinct=True)

Every template of examples/ goes in; `constraints` constraints are copies of the examples' constraints
(round robin) under names of their own. With `distinct`, each copy's parameters differ from every
other's where the template's schema allows it (a string of its own is added to each list of
strings), as real constraints' would.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema

from celkeeper.documents import parse_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _own(value: Any, marker: str) -> Any:
    if isinstance(value, dict):
        return {k: _own(v, marker) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [*value, marker]
    if isinstance(value, list):
        return [_own(v, marker) for v in value]
    return value


def large_policy_set(out: Path, constraints: int, distinct: bool = False) -> list[str]:
    """Write the templates and `constraints` constraints into `out` (created); their names."""
    out.mkdir(parents=True, exist_ok=True)
    originals: list[dict[str, Any]] = []
    schemas: dict[str, Any] = {}  # constraint kind -> its parameters' schema
    for template in sorted(EXAMPLES.glob("*/template.yaml")):
        shutil.copy(template, out / f"{template.parent.name}-template.yaml")
        for doc in parse_documents(template.read_text(), str(template)).documents:
            crd = doc.data["spec"]["crd"]["spec"]
            schemas[crd["names"]["kind"]] = (crd.get("validation") or {}).get("openAPIV3Schema") or {}
        for path in sorted(template.parent.glob("constraint*.yaml")):
            originals += [d.data for d in parse_documents(path.read_text(), str(path)).documents]
    names = []
    lines = []
    for i in range(constraints):
        copy = json.loads(json.dumps(originals[i % len(originals)]))
        copy["metadata"]["name"] = name = f"{copy['metadata']['name']}-{i}"
        if distinct and "parameters" in copy.get("spec", {}):
            own = _own(copy["spec"]["parameters"], f"distinct-{i}")
            try:
                jsonschema.validate(own, schemas.get(copy["kind"], {}))
                copy["spec"]["parameters"] = own
            except jsonschema.ValidationError:
                pass  # e.g. an enum: these stay equal to the original's
        names.append(name)
        lines.append(json.dumps(copy))
    # one document per file is what a folder of policies usually looks like; a few big files load the same
    per_file = 500
    for start in range(0, len(lines), per_file):
        (out / f"constraints-{start // per_file:03d}.yaml").write_text(
            "\n---\n".join(lines[start : start + per_file]) + "\n"
        )
    return names
