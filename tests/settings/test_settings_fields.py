"""Settings: enumerated fields are Literal types checked at construction and at the CLI's edge;
every field is documented; `with_` may change every field and only those."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import re
import typing

import pytest

from celkeeper import settings as settings_module
from celkeeper.settings import (
    CelLimits,
    Settings,
    SettingsChanges,
    parse_engine,
    parse_failure_mode,
    parse_policy_validation,
)


def test_parse_functions_accept_their_choices_and_refuse_anything_else_naming_them() -> None:
    assert [parse_engine(n) for n in ("cel-go", "cel-python")] == ["cel-go", "cel-python"]
    assert parse_failure_mode("deny") == "deny" and parse_policy_validation("warn") == "warn"
    with pytest.raises(ValueError, match=r"^unknown CEL engine 'cel'; choose one of cel-go, cel-python$"):
        parse_engine("cel")
    with pytest.raises(ValueError, match=r"^failure mode must be 'allow' or 'deny', not 'open'$"):
        parse_failure_mode("open")
    with pytest.raises(ValueError, match=r"^policy validation must be 'deny' or 'warn', not None$"):
        parse_policy_validation(None)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("engine", "cel-rust", "unknown CEL engine 'cel-rust'"),
        ("failure_mode", "Allow", "failure mode must be 'allow' or 'deny', not 'Allow'"),
        ("policy_validation", "off", "policy validation must be 'deny' or 'warn', not 'off'"),
        ("eval_deadline", -1.0, "the evaluation deadline cannot be negative (-1.0)"),
    ],
)
def test_settings_refuse_a_value_outside_the_type_when_built_or_changed(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        Settings(**{field: value})
    with pytest.raises(ValueError, match=re.escape(message)):
        Settings().with_(**{field: value})


def test_with_changes_the_given_fields_and_keeps_the_others() -> None:
    changed = Settings(exempt_namespaces=frozenset({"tools"})).with_(failure_mode="deny", eval_deadline=0.5)
    assert (changed.failure_mode, changed.eval_deadline) == ("deny", 0.5)
    assert changed.exempt_namespaces == frozenset({"tools"}) and changed.engine == Settings().engine


def test_settings_changes_names_every_field_with_its_type() -> None:
    assert typing.get_type_hints(SettingsChanges) == typing.get_type_hints(Settings)


@pytest.mark.parametrize("cls", [Settings, CelLimits])
def test_every_field_has_a_docstring(cls: type) -> None:
    tree = ast.parse(inspect.getsource(settings_module))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__).body
    documented = {
        stmt.target.id
        for stmt, after in itertools.pairwise(body)
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _is_docstring(after)
    }
    undocumented = sorted({f.name for f in dataclasses.fields(cls)} - documented)
    assert not undocumented, f"{cls.__name__} fields without a docstring: {undocumented}"


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )
