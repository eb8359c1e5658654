"""CelkeeperError.at(): a copy with more of its location that keeps how the error came about."""

from __future__ import annotations

import traceback

import pytest

from celkeeper.cel import VariableCompileError
from celkeeper.errors import CelCompileError, CelkeeperError, DocumentError, Location


def _read(text: str) -> int:
    try:
        return int(text)
    except ValueError as err:
        raise DocumentError("not a number", Location(line=3, column=7)) from err


def test_at_fills_only_the_unknown_parts_of_the_location() -> None:
    err = DocumentError("bad", Location(line=3, column=7))
    located = err.at(file="a.yaml", document=2, line=99)
    assert located.location == Location(file="a.yaml", document=2, line=3, column=7)
    assert str(located) == "a.yaml:3:7: document 2: bad"
    assert err.location == Location(line=3, column=7)  # the original is unchanged
    assert type(located) is DocumentError


def test_at_keeps_the_cause_context_traceback_and_notes() -> None:
    with pytest.raises(DocumentError) as caught:
        _read("x")
    err = caught.value
    err.add_note("while reading the constraint")
    located = err.at(file="a.yaml")
    assert isinstance(located.__cause__, ValueError)
    assert located.__context__ is err.__context__
    assert located.__suppress_context__
    assert located.__traceback__ is err.__traceback__
    assert located.__notes__ == ["while reading the constraint"]


def test_at_keeps_the_fields_of_a_subclass_that_takes_other_arguments() -> None:
    err = VariableCompileError("ok", CelCompileError("undeclared reference", 1, 4, limit="depth"))
    located = err.at(file="t.yaml", path="spec.variables[0]")
    assert (located.variable, located.line, located.column, located.limit) == ("ok", 1, 4, "depth")
    assert located.issues == err.issues and located.args == err.args
    assert str(located) == "t.yaml:1:4: spec.variables[0]: variable 'ok': undeclared reference"


def test_reraised_as_documented_the_error_shows_where_it_began_and_its_cause() -> None:
    def load() -> None:
        try:
            _read("x")
        except CelkeeperError as err:
            raise err.at(file="a.yaml", document=1) from err.__cause__

    with pytest.raises(DocumentError) as caught:
        load()
    err = caught.value
    assert str(err) == "a.yaml:3:7: document 1: not a number"
    assert isinstance(err.__cause__, ValueError)
    assert "_read" in [frame.name for frame in traceback.extract_tb(err.__traceback__)]  # where it began
    printed = "".join(traceback.format_exception(err))
    assert "invalid literal for int()" in printed  # the cause
    assert "During handling" not in printed  # not chained to its own unlocated copy
