"""Where a command's output goes: stdout, or a file written whole (never a part), or a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from celkeeper.cli.main import main
from celkeeper.cli.output import redirected, write_output
from celkeeper.errors import CelkeeperError


def test_a_file_gets_what_the_block_printed_and_stdout_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with redirected(str(target)):
        print("one")
        print("two")
    assert target.read_text() == "one\ntwo\n" and capsys.readouterr().out == ""
    with pytest.raises(RuntimeError), redirected(str(target)):  # a block that fails writes nothing
        print("half")
        raise RuntimeError("boom")
    assert target.read_text() == "one\ntwo\n"
    with redirected(None):
        print("shown")
    assert capsys.readouterr().out == "shown\n"
    write_output("-", "dash\n")
    assert capsys.readouterr().out == "dash\n"


def test_a_file_that_cannot_be_written_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(CelkeeperError, match="cannot write the output"):
        write_output(str(tmp_path / "missing" / "out.xml"), "x")
    assert (
        main(["verify", str(tmp_path), "-o", "junit", "--output-file", str(tmp_path / "no" / "r.xml")]) == 1
    )
    err = capsys.readouterr().err
    assert "cannot write the output" in err and "Traceback" not in err
