"""Parameter schemas with known verdicts (templates.parameters.Verdicts): the same results as without,
taken from the store when it has them, with jsonschema imported only for what it does not have. The
schema here has a keyword templates.draft4 leaves to jsonschema (`pattern`), so that every check is one
jsonschema makes; one that draft4 passes is neither stored nor asked for."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from celkeeper.templates import ParameterSchema, SchemaProblem
from celkeeper.templates.parameters import Verdict
from tests.templates.test_parameters import LABELS as PLAIN_LABELS

#: the labels schema with a pattern on `message`: not one templates.draft4 knows
LABELS: dict[str, Any] = {
    **PLAIN_LABELS,
    "properties": {**PLAIN_LABELS["properties"], "message": {"type": "string", "pattern": "^h"}},
}
ROOT = Path(__file__).resolve().parents[2]
VALUES: list[Any] = [
    {"labels": [{"key": "owner"}], "message": "hi"},
    {"labels": [{"allowedRegex": 3}], "extra": True},
    {"labels": "owner"},
    {"message": 1},
    {"message": 1.0},
    {"message": True},
    {"message": math.nan},
    {"message": None},
]


class Store:
    def __init__(self) -> None:
        self.entries: dict[str, Verdict] = {}
        self.gets = 0

    def get(self, key: str) -> Verdict | None:
        self.gets += 1
        return self.entries.get(key)

    def put(self, key: str, verdict: Verdict) -> None:
        self.entries[key] = verdict


def test_results_are_the_same_and_remembered() -> None:
    store = Store()
    first = ParameterSchema(LABELS, verdicts=store)
    expected = [ParameterSchema(LABELS).errors(v) for v in VALUES]
    assert [first.errors(v) for v in VALUES] == expected
    # one schema check and one per distinct value (1, 1.0, true, NaN and null are told apart)
    assert len(store.entries) == 1 + len(VALUES)
    again = ParameterSchema(LABELS, verdicts=store)
    assert [again.errors(v) for v in VALUES] == expected
    assert len(store.entries) == 1 + len(VALUES)
    assert again.errors(VALUES[1], "spec.other") != expected[1]  # the path is part of what is checked
    assert len(store.entries) == 2 + len(VALUES)


def test_a_known_verdict_is_what_is_reported() -> None:
    store = Store()
    schema = ParameterSchema(LABELS, verdicts=store)
    schema.errors({"message": "hi"})
    (value_key,) = [k for k in store.entries if ":value:" in k]
    store.entries[value_key] = [("spec.parameters.message", "remembered")]
    assert ParameterSchema(LABELS, verdicts=store).errors({"message": "hi"}) == [
        ("spec.parameters.message", "remembered")
    ]


def test_a_schema_problem_is_remembered_too() -> None:
    store = Store()
    bad = {"type": "object", "properties": {"a": {"type": "strin"}}}
    for _ in range(2):
        with pytest.raises(SchemaProblem) as caught:
            ParameterSchema(bad, verdicts=store)
        assert caught.value.path == "properties.a.type"
        assert "is not valid" in caught.value.message
    assert len(store.entries) == 1


def test_what_draft4_passes_is_neither_stored_nor_asked_for() -> None:
    store = Store()
    schema = ParameterSchema(PLAIN_LABELS, verdicts=store)
    assert schema.errors({"labels": [{"key": "owner"}], "message": "hi"}) == []
    assert store.entries == {} and store.gets == 0
    assert schema.errors({"labels": [{"allowedRegex": 3}]}) == ParameterSchema(PLAIN_LABELS).errors(
        {"labels": [{"allowedRegex": 3}]}
    )
    assert len(store.entries) == 1  # the value's problem, as jsonschema words it (the schema passed)


def test_known_verdicts_spare_the_jsonschema_import() -> None:
    script = (
        "import sys\n"
        "from celkeeper.templates import ParameterSchema\n"
        "from tests.templates.test_parameters_verdicts import Store\n"
        "from tests.templates.test_parameters_verdicts import LABELS\n"
        "store = Store()\n"
        "ParameterSchema(LABELS, verdicts=store).errors({'labels': 1})\n"
        "print('jsonschema' in sys.modules)\n"
    )
    warm = (
        "import sys, json\n"
        "from celkeeper.templates import ParameterSchema\n"
        "from tests.templates.test_parameters_verdicts import Store\n"
        "from tests.templates.test_parameters_verdicts import LABELS\n"
        "store = Store()\n"
        "store.entries = {k: [tuple(p) for p in v] for k, v in json.loads(sys.stdin.read()).items()}\n"
        "print(ParameterSchema(LABELS, verdicts=store).errors({'labels': 1}))\n"
        "print('jsonschema' in sys.modules)\n"
    )
    cold = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert cold.stdout.split() == ["True"]
    store = Store()
    expected = ParameterSchema(LABELS, verdicts=store).errors({"labels": 1})
    done = subprocess.run(
        [sys.executable, "-c", warm],
        input=json.dumps(store.entries),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout.splitlines() == [repr(expected), "False"]
