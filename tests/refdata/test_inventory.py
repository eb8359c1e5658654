"""Synced data without a cluster: the declaration (Gatekeeper's requires-sync-data annotation), the
store (written by the informer's writer, read by both engines), what a template that reads data
decides when its data is synced or not, and the offline inventory of `verify` and `test`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from celkeeper.cel import ENGINES, InventoryError, get_engine
from celkeeper.cel.api import Engine
from celkeeper.cel.celpython.inventory import PyInventory, read_data
from celkeeper.cel.inventory import Gvk, RequirementsError, parse_requirements, unmet
from celkeeper.documents import parse_documents
from celkeeper.incluster.objects import item_name
from celkeeper.incluster.podstatus import observe
from celkeeper.model import EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import SyncedData, decide, request_for_object
from celkeeper.snapshot.datastore import DataStore, Delete, Put, write_inventory
from tests.support.celgo import require_celgo

ROOT = Path(__file__).resolve().parents[2]
INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")
ANNOTATION = "metadata.gatekeeper.sh/requires-sync-data"


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Engine:
    if request.param == "cel-go":
        require_celgo()
    return get_engine(request.param)


def ingress(name: str, namespace: str, *hosts: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"rules": [{"host": h} for h in hosts]},
    }


def template_yaml(annotation: str | None, expression: str, failure_policy: str = "Fail") -> str:
    annotations = f"\n  annotations:\n    {ANNOTATION}: {json.dumps(annotation)}" if annotation else ""
    return f"""
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sreads{annotations}
spec:
  crd: {{spec: {{names: {{kind: K8sReads}}}}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        failurePolicy: {failure_policy}
        validations:
        - expression: {json.dumps(expression)}
          messageExpression: '"hosts: " + data.inventory.namespace.map(ns, string(ns)).join(",")'
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sReads
metadata: {{name: reads}}
spec: {{match: {{kinds: [{{apiGroups: ["networking.k8s.io"], kinds: ["Ingress"]}}]}}}}
"""


REQUIRES_INGRESS = '[[{"groups": ["networking.k8s.io"], "versions": ["v1"], "kinds": ["Ingress"]}]]'
NO_OTHER = "size(data.inventory.namespace) == 0"


def policies(engine: Engine, text: str) -> Any:
    parsed = parse_documents(text.lstrip("\n"), "policy.yaml")
    assert not parsed.errors
    return build_policy_set(parsed.documents, TemplateCompiler(engine))


def messages(engine: Engine, policy_set: Any, obj: dict[str, Any], data: SyncedData | None) -> list[str]:
    decision = decide(
        request_for_object(obj), policy_set, lambda _: None, EnforcementPoint.WEBHOOK, data=data
    )
    return [r.message for r in decision.results]


# --- the declaration ---------------------------------------------------------------------------------


def test_requirements_are_read_as_gatekeeper_reads_them() -> None:
    # the annotation as gatekeeper-library writes it: a JSON string inside quotes, over several lines
    text = (
        '|\n"[\n  [\n {"groups": ["extensions"], "versions": ["v1beta1"], "kinds": ["Ingress"]},\n'
        ' {"groups": ["networking.k8s.io"], "versions": ["v1beta1", "v1"], "kinds": ["Ingress"]}\n ]\n]"\n'
    )
    (requirement,) = parse_requirements(text.removeprefix("|\n"))
    assert requirement == {
        Gvk("extensions", "v1beta1", "Ingress"),
        Gvk("networking.k8s.io", "v1beta1", "Ingress"),
        INGRESS,
    }
    assert unmet((requirement,), frozenset({INGRESS})) == ()
    assert unmet((requirement,), frozenset()) == (requirement,)
    for bad in ("{}", "[{}]", '[[{"group": ["x"]}]]', '[[{"kinds": "Ingress"}]]', "not json"):
        with pytest.raises(RequirementsError):
            parse_requirements(bad)


def test_only_a_template_that_declares_data_reads_it(engine: Engine) -> None:
    declared = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    assert declared.templates["k8sreads"].requirements == (frozenset({INGRESS}),)
    assert declared.templates["k8sreads"].errors == ()
    # without the annotation, Gatekeeper's environment: `data` is undeclared
    plain = policies(engine, template_yaml(None, NO_OTHER))
    (error,) = {str(e) for e in plain.templates["k8sreads"].errors if "validation does not compile" in str(e)}
    assert "undeclared reference to 'data'" in error


def test_a_malformed_annotation_is_reported_and_the_template_loads_without_data(engine: Engine) -> None:
    loaded = policies(engine, template_yaml("[[{]]", NO_OTHER))
    template = loaded.templates["k8sreads"]
    assert template.requirements == ()
    texts = [str(e) for e in template.errors]
    assert any(f"annotation {ANNOTATION} is not Gatekeeper's requires-sync-data format" in t for t in texts)
    assert any("undeclared reference to 'data'" in t for t in texts)


# --- the store, read by both engines ------------------------------------------------------------------


def test_both_engines_read_what_the_writer_wrote(engine: Engine, tmp_path: Path) -> None:
    store = DataStore(tmp_path / "data.db")
    inventory = engine.open_inventory(str(tmp_path / "data.db"))
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    synced = SyncedData(inventory, frozenset({INGRESS}))
    mine = ingress("web", "prod", "a.example.com")
    assert messages(engine, loaded, mine, synced) == []
    store.apply([Put(ingress("api", "dev", "b")), Put(ingress("x", "qa", "c")), Put(mine)])
    assert messages(engine, loaded, mine, synced) == ["hosts: dev,prod,qa"]
    store.apply([Delete(ingress("x", "qa"))])
    assert store.retain(INGRESS, {("dev", "api")}) == 1  # what a relist no longer has
    assert messages(engine, loaded, mine, synced) == ["hosts: dev"]
    assert store.counts() == {INGRESS: 1}
    assert store.drop(INGRESS) == 1
    assert messages(engine, loaded, mine, synced) == []
    inventory.close()
    store.close()


def test_a_request_reads_one_consistent_view(tmp_path: Path) -> None:
    store = DataStore(tmp_path / "data.db")
    store.apply([Put(ingress("a", "one"))])
    view = PyInventory(str(tmp_path / "data.db")).view()
    before = read_data(view, [INGRESS])
    store.apply([Put(ingress("b", "two"))])  # written while the request reads
    assert read_data(view, [INGRESS]) == before
    view.close()
    assert set(
        read_data(PyInventory(str(tmp_path / "data.db")).view(), [INGRESS])["inventory"]["namespace"]
    ) == {"one", "two"}


def test_a_store_that_cannot_be_read_is_an_error(engine: Engine, tmp_path: Path) -> None:
    with pytest.raises(InventoryError):
        engine.open_inventory(str(tmp_path / "missing.db"))
    store = DataStore(tmp_path / "old.db")
    store._db.execute("UPDATE meta SET value = '0'")
    with pytest.raises(InventoryError, match="format"):
        engine.open_inventory(str(tmp_path / "old.db"))


# --- data not synced ----------------------------------------------------------------------------------


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_a_template_whose_data_is_not_synced_fails_under_its_failure_policy(
    engine: Engine, tmp_path: Path, failure_policy: str
) -> None:
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, "false", failure_policy))
    path = write_inventory(tmp_path / "data.db", [ingress("api", "dev", "b")])
    inventory = engine.open_inventory(str(path))
    got = messages(engine, loaded, ingress("web", "prod", "a"), SyncedData(inventory, frozenset()))
    if failure_policy == "Fail":
        assert got == [
            "data not synced: template k8sreads reads networking.k8s.io/v1 Ingress, which celkeeper has not "
            "synced (name it in a SyncSet or in the Config's spec.sync.syncOnly; its first list must "
            "complete)"
        ]
    else:
        assert got == []
    # no synced data at all (a folder of policies): the same
    assert messages(engine, loaded, ingress("web", "prod", "a"), None) == got
    # synced: evaluated
    assert messages(
        engine, loaded, ingress("web", "prod", "a"), SyncedData(inventory, frozenset({INGRESS}))
    ) == ["hosts: dev"]
    inventory.close()


def test_the_pod_status_says_a_constraint_waits_for_its_data(engine: Engine) -> None:
    loaded = policies(engine, template_yaml(REQUIRES_INGRESS, NO_OTHER))
    found = [
        {
            "apiVersion": "templates.celkeeper.io/v1",
            "kind": "ConstraintTemplate",
            "metadata": {"name": "k8sreads"},
        },
        {"apiVersion": "constraints.celkeeper.io/v1beta1", "kind": "K8sReads", "metadata": {"name": "reads"}},
    ]
    objects = {str(item_name(o)): o for o in found}
    waiting = observe(objects, loaded, [], frozenset())
    constraint = waiting[("K8sReads", "reads")]
    assert constraint.enforced is False
    assert [e.code for e in constraint.errors] == ["data_not_synced"]
    assert constraint.errors[0].message.startswith(
        "reads networking.k8s.io/v1 Ingress, which this pod has not"
    )
    assert waiting[("ConstraintTemplate", "k8sreads")].enforced is True
    synced = observe(objects, loaded, [], frozenset({INGRESS}))
    assert synced[("K8sReads", "reads")].enforced is True
    assert synced[("K8sReads", "reads")].errors == ()


# --- offline: gator's inventory -------------------------------------------------------------------------


@pytest.mark.parametrize("engine_name", ENGINES)
def test_verify_feeds_suites_inventory_to_data(engine_name: str) -> None:
    if engine_name == "cel-go":
        require_celgo()
    proc = subprocess.run(
        [sys.executable, "-m", "celkeeper", "verify", "--engine", engine_name, "-v", "referential/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--- PASS: host-taken" in proc.stdout
    assert proc.stdout.rstrip().endswith("10 passed, 0 failed")


def test_test_makes_every_object_synced_data(tmp_path: Path) -> None:
    folder = ROOT / "referential" / "unique-ingress-host"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "celkeeper",
            "test",
            "-f",
            str(folder / "template.yaml"),
            "-f",
            str(folder / "constraint.yaml"),
            "-f",
            str(folder / "objects"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # every object is in the inventory: the two Ingresses sharing example-host.example.com deny each
    # other, the two sharing example-host3 too; none conflicts with itself
    lines = sorted(proc.stdout.splitlines())
    assert proc.returncode == 1, proc.stderr
    assert lines == sorted(
        [
            'networking.k8s.io/v1/Ingress default/ingress-host1: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host.example.com>"',
            'networking.k8s.io/v1/Ingress default/ingress-host2: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host.example.com>"',
            'networking.k8s.io/v1/Ingress default/ingress-host3: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host3.example.com>"',
            'networking.k8s.io/v1/Ingress other-ns/ingress-host4: ["unique-ingress-host"] Message: '
            '"ingress host conflicts with an existing ingress <example-host3.example.com>, '
            '<example-host.example.com>"',
        ]
    ), proc.stdout
