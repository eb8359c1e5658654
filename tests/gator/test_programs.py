"""gator.programs: templates compiled when an object needs them, what compiling found known from earlier
runs; the decisions, the problems and the refusals those runs report are the same as compiling at once."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from celkeeper.cel import get_engine
from celkeeper.cel.api import NamedSource, TemplateRefused, TemplateSource, ValidationSource
from celkeeper.cel.inventory import Gvk
from celkeeper.cli.files import read_all
from celkeeper.documents import Document
from celkeeper.errors import CompileWarning
from celkeeper.gator.backend import PolicyBackend
from celkeeper.gator.programs import DiskPrograms, LazyEngine, source_key
from celkeeper.review import inventory_lookup
from tests.cli.conftest import EXAMPLES
from tests.support.native import require_celgo


@pytest.fixture(autouse=True)
def _celgo() -> None:
    require_celgo()


def pod(privileged: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx:latest", "securityContext": {"privileged": privileged}}
            ]
        },
    }


def run(store: DiskPrograms | None, documents: list[Any], objects: list[Any]) -> tuple[Any, list[str], int]:
    """The violations of `objects`, the problems loading reported, and how many templates were compiled."""
    engine = LazyEngine(lambda: get_engine("cel-go"), "cel-go", store)
    backend = PolicyBackend("cel-go", loaded=engine)
    loaded = backend.build(documents)
    found = []
    for obj in objects:
        decision = backend.decide(
            loaded.policies, Document.from_object(obj), inventory_lookup({}, complete=False), None
        )
        found.append(sorted((v.constraint, v.message) for v in backend.violations(loaded.policies, decision)))
    return found, [str(e) for e in loaded.errors], engine.compiled


def test_a_warm_run_compiles_only_what_the_objects_need_and_decides_the_same(tmp_path: Path) -> None:
    documents = list(read_all([str(EXAMPLES)]).documents)
    store = DiskPrograms(tmp_path / "programs")
    objects = [pod(True), pod(False)]
    eager, eager_problems, _ = run(None, documents, objects)
    cold, cold_problems, compiled_cold = run(store, documents, objects)
    warm, warm_problems, compiled_warm = run(DiskPrograms(tmp_path / "programs"), documents, objects)
    templates = {d.name for d in documents if d.kind == "ConstraintTemplate"}
    assert compiled_cold == len(templates)  # the first run compiles each template (and keeps its facts)
    assert 0 < compiled_warm < len(templates) - 3  # the Pod's, not the Services', Ingresses', ...
    assert eager == cold == warm and any(warm)
    assert eager_problems == cold_problems == warm_problems
    nothing, _, compiled = run(DiskPrograms(tmp_path / "programs"), documents, [])
    assert (nothing, compiled) == ([], 0)


BROKEN = """apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: broken}
spec:
  crd: {spec: {names: {kind: Broken}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: "object.spec.nothing("
          message: never
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: Broken
metadata: {name: broken}
spec: {match: {kinds: [{apiGroups: [""], kinds: [Service]}]}}
"""


def test_problems_are_reported_without_compiling(tmp_path: Path) -> None:
    (tmp_path / "policies.yaml").write_text(BROKEN)
    documents = list(read_all([str(tmp_path / "policies.yaml")]).documents)
    store = tmp_path / "programs"
    _, cold, compiled = run(DiskPrograms(store), documents, [])
    engine = LazyEngine(lambda: get_engine("cel-go"), "cel-go", DiskPrograms(store))
    warm = PolicyBackend("cel-go", loaded=engine).build(documents).errors
    assert compiled == 1 and engine.compiled == 0
    assert [str(e) for e in warm] == cold and len(cold) == 1 and "does not compile" in cold[0]
    assert [type(e) for e in warm] == [CompileWarning]


def test_what_gatekeeper_refuses_is_refused_again_without_compiling(tmp_path: Path) -> None:
    source = TemplateSource(
        raw={"failurePolicy": "Sometimes", "validations": [{"expression": "true"}]},
        validations=(ValidationSource("true", None, None),),
    )
    words = []
    for _ in range(2):
        engine = LazyEngine(lambda: get_engine("cel-go"), "cel-go", DiskPrograms(tmp_path / "programs"))
        with pytest.raises(TemplateRefused) as refused:
            engine.compile_template(source)
        words.append((refused.value.message, engine.compiled))
    assert words == [(words[0][0], 1), (words[0][0], 0)] and "Sometimes" in words[0][0]


def test_a_constraint_that_does_not_bind_does_not_bind_again(tmp_path: Path) -> None:
    documents = list(read_all([str(EXAMPLES / "required-labels")]).documents)
    template = next(d for d in documents if d.kind == "ConstraintTemplate")
    unreadable = {
        "apiVersion": "constraints.gatekeeper.sh/v1beta1",
        "spec": "x",
    }  # no kind: Go's decoder refuses
    found = []
    for _ in range(2):
        engine = LazyEngine(lambda: get_engine("cel-go"), "cel-go", DiskPrograms(tmp_path / "programs"))
        backend = PolicyBackend("cel-go", loaded=engine)
        compiled, _ = backend.compiler.load(template)
        assert compiled is not None
        try:
            backend.compiler.bind(compiled, unreadable)
        except ValueError as err:
            found.append((str(err), engine.compiled))
        else:
            found.append(("bound", engine.compiled))
    assert found[0][0] == found[1][0] and found[1][1] == 0, found
    assert found[0][0].startswith("cannot read the constraint: Object 'Kind' is missing")


def test_a_cache_entry_that_cannot_be_read_is_compiled_again(tmp_path: Path) -> None:
    documents = list(read_all([str(EXAMPLES / "required-labels")]).documents)
    store = tmp_path / "programs"
    run(DiskPrograms(store), documents, [])
    for entry in store.iterdir():
        entry.write_text("{not json")
    _, problems, compiled = run(DiskPrograms(store), documents, [])
    assert compiled == 1 and not problems


def test_the_store_is_the_cel_go_engines_and_off_with_the_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CELKEEPER_CACHE_DIR", str(tmp_path))
    found = DiskPrograms.default("cel-go")
    assert found is not None and found.directory.parent == tmp_path / "programs"
    assert DiskPrograms.default("cel-python") is None
    monkeypatch.setenv("CELKEEPER_CACHE_DIR", "")
    assert DiskPrograms.default("cel-go") is None


def test_a_sources_key_is_its_content() -> None:
    raw = {"validations": [{"expression": "true"}], "variables": [{"name": "a", "expression": "1"}]}
    source = TemplateSource(raw, (ValidationSource("true"),), (NamedSource("a", "1"),))
    same = TemplateSource(
        MappingProxyType(dict(reversed(list(raw.items())))),
        (ValidationSource("true"),),
        (NamedSource("a", "1"),),
    )
    assert source_key(source) == source_key(same)
    others = [
        TemplateSource(raw, (ValidationSource("false"),), (NamedSource("a", "1"),)),
        TemplateSource(raw, (ValidationSource("true"),), (NamedSource("b", "1"),)),
        TemplateSource(raw, (ValidationSource("true"),), (NamedSource("a", "1"),), failure_policy="Ignore"),
        TemplateSource(
            raw, (ValidationSource("true"),), (NamedSource("a", "1"),), data_kinds=(Gvk("", "v1", "Pod"),)
        ),
        TemplateSource({**raw, "matchConditions": []}, (ValidationSource("true"),), (NamedSource("a", "1"),)),
    ]
    assert len({source_key(source), *(source_key(o) for o in others)}) == 1 + len(others)
