"""The shapes of the generated differential corpus and how it is written to disk as Gatekeeper Suites.

A corpus *family* is a list of `CorpusTest`s: one template and one constraint (a Suite test) with
the cases to review (plain objects or AdmissionReviews, with optional inventory). `write_corpus`
writes every family as one Suite (`<family>/suite.yaml`) with its templates, constraints and objects
beside it, all as JSON text in .yaml files (JSON is YAML 1.2, so nothing depends on YAML's
ambiguities). The cases' assertions are placeholders (`violations: "no"`): the differential test
compares what each side *found* for every case (`gator verify --trace` / `celkeeper verify --trace`),
not whether the assertion held.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TARGET = "admission.k8s.gatekeeper.sh"


@dataclass(frozen=True)
class CorpusCase:
    name: str
    object: Mapping[str, Any]
    inventory: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class CorpusTest:
    name: str
    template: Mapping[str, Any]
    constraint: Mapping[str, Any]
    cases: tuple[CorpusCase, ...]
    invalid: bool = False


@dataclass(frozen=True)
class Family:
    name: str
    tests: tuple[CorpusTest, ...]
    doc: str = ""

    @property
    def case_count(self) -> int:
        return sum(max(1, len(t.cases)) if t.invalid else len(t.cases) for t in self.tests)


def template(
    kind: str,
    validations: Sequence[Mapping[str, Any]],
    *,
    variables: Sequence[Mapping[str, Any]] = (),
    match_conditions: Sequence[Mapping[str, Any]] = (),
    failure_policy: str | None = None,
    schema: Mapping[str, Any] | None = None,
    extra_source: Mapping[str, Any] | None = None,
    operations: Sequence[str] | None = None,
    api_version: str = "templates.gatekeeper.sh/v1",
) -> dict[str, Any]:
    """A K8sNativeValidation ConstraintTemplate (Gatekeeper's v1 shape)."""
    source: dict[str, Any] = {"validations": [dict(v) for v in validations]}
    if variables:
        source["variables"] = [dict(v) for v in variables]
    if match_conditions:
        source["matchCondition"] = [dict(m) for m in match_conditions]
    if failure_policy is not None:
        source["failurePolicy"] = failure_policy
    if extra_source:
        source.update(extra_source)
    crd_spec: dict[str, Any] = {"names": {"kind": kind}}
    if schema is not None:
        crd_spec["validation"] = {"openAPIV3Schema": dict(schema)}
    target: dict[str, Any] = {
        "target": TARGET,
        "code": [{"engine": "K8sNativeValidation", "source": source}],
    }
    if operations is not None:
        target["operations"] = list(operations)
    return {
        "apiVersion": api_version,
        "kind": "ConstraintTemplate",
        "metadata": {"name": kind.lower()},
        "spec": {"crd": {"spec": crd_spec}, "targets": [target]},
    }


def constraint(
    kind: str,
    name: str,
    *,
    parameters: Any = None,
    match: Mapping[str, Any] | None = None,
    action: str | None = None,
    scoped: Sequence[Mapping[str, Any]] | None = None,
    no_parameters_key: bool = True,
) -> dict[str, Any]:
    """A constraint of a template's kind. `parameters=None` leaves spec.parameters out."""
    spec: dict[str, Any] = {}
    if match is not None:
        spec["match"] = dict(match)
    if parameters is not None or not no_parameters_key:
        spec["parameters"] = parameters
    if action is not None:
        spec["enforcementAction"] = action
    if scoped is not None:
        spec["scopedEnforcementActions"] = [dict(s) for s in scoped]
    out: dict[str, Any] = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "kind": kind,
        "metadata": {"name": name},
    }
    if spec:
        out["spec"] = spec
    return out


def slug(text: str, limit: int = 40) -> str:
    """A file/test-name friendly form of an expression or description."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return out[:limit].strip("-") or "x"


def write_corpus(root: Path, families: Iterable[Family]) -> list[Path]:
    """Write each family as a Suite under root/<family>/; returns the suite files."""
    suites = []
    for family in families:
        folder = root / family.name
        folder.mkdir(parents=True, exist_ok=True)
        files: dict[str, str] = {}  # content -> relative path (equal documents written once)

        def put(
            kind: str,
            name: str,
            document: Mapping[str, Any],
            files: dict[str, str] = files,
            folder: Path = folder,
        ) -> str:
            text = json.dumps(document, indent=1, sort_keys=False) + "\n"
            found = files.get(text)
            if found is not None:
                return found
            relative = f"{kind}/{len(files):04d}-{slug(name, 48)}.yaml"
            path = folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            files[text] = relative
            return relative

        tests = []
        for test in family.tests:
            entry: dict[str, Any] = {
                "name": test.name,
                "template": put("templates", test.name, test.template),
                "constraint": put("constraints", test.name, test.constraint),
            }
            if test.invalid:
                entry["invalid"] = True
            else:
                entry["cases"] = [
                    {
                        "name": case.name,
                        "object": put("objects", case.name, case.object),
                        **(
                            {"inventory": [put("inventory", case.name, item) for item in case.inventory]}
                            if case.inventory
                            else {}
                        ),
                        "assertions": [{"violations": "no"}],
                    }
                    for case in test.cases
                ]
            tests.append(entry)
        suite: dict[str, Any] = {
            "kind": "Suite",
            "apiVersion": "test.gatekeeper.sh/v1alpha1",
            "metadata": {"name": family.name},
            "tests": tests,
        }
        path = folder / "suite.yaml"
        path.write_text(json.dumps(suite, indent=1) + "\n", encoding="utf-8")
        suites.append(path)
    return suites


@dataclass
class Names:
    """Unique, stable names within a family (test and kind names must not collide)."""

    used: set[str] = field(default_factory=set)

    def __call__(self, base: str) -> str:
        name = slug(base) or "t"
        candidate, i = name, 2
        while candidate in self.used:
            candidate = f"{name}-{i}"
            i += 1
        self.used.add(candidate)
        return candidate


def kind_name(prefix: str, index: int) -> str:
    """A template kind (CamelCase; its lowercase is the template name)."""
    return f"{prefix}{index:03d}"
