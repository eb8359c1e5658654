"""The informer's native library in a child process (celkeeper.informer.libraryprocess): a round compiles
in a child that ends with the round, so the informer maps nothing of the library; fail-static holds through
it; the child's GOGC is the informer's; a handle of an ended child is refused, never taken for another's;
a child that dies fails the call, and the next call starts another."""

from __future__ import annotations

import gc
import json
import os
import signal
from pathlib import Path

import pytest

from celkeeper.cel.celgo.engine import CelGoEngine, GoActivation
from celkeeper.informer.libraryprocess import LibraryProcess, LibraryProcessEnded
from celkeeper.native.ffi import LibraryUnavailable
from celkeeper.native.locate import FULL, GATEKEEPER
from tests.support.native import in_fresh_process, mapped_libraries, require_celgo

EXPRESSION = 'object.metadata.name == "x"'


ROUNDS_IN_A_CHILD = r"""
import json, os, sys
from pathlib import Path
from celkeeper.informer.process import install_library_process
from celkeeper.native import ffi
from tests.informer.test_loop_memory import NOT_COMPILING, Listening, informer
from tests.support.native import library_file_bytes

install_library_process(admission_policies=False)
library = ffi.load()
seen = {}

class Watching(Listening):
    def published(self, snapshot, policies, errors):
        super().published(snapshot, policies, errors)
        seen["child"] = library.child_pid
        seen["gogc"] = library.info()["gcPercent"]
        seen["mapped"] = library_file_bytes()

folder = Path(sys.argv[1])
it = informer(Path(sys.argv[2]), Watching(folder))
good = it.step()
after = {"running": library.running, "alive": os.path.exists(f"/proc/{seen['child']}")}
first_child = seen["child"]
(folder / "template.yaml").write_text(NOT_COMPILING)
held = it.step()
print(json.dumps({
    "kind": type(library).__name__, "good": list(good.problems), "seen": seen, "first_child": first_child,
    "after": after, "held": [Path(n).name for n in held.held], "problems": list(held.problems),
    "children": library.started, "mapped_at_end": library_file_bytes(),
}))
"""


def test_a_round_compiles_in_a_child_that_ends_with_it(tmp_path: Path, policies: Path) -> None:
    require_celgo()
    env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    figures = in_fresh_process(ROUNDS_IN_A_CHILD, str(policies), str(tmp_path), env=env)
    assert figures["kind"] == "LibraryProcess"
    assert figures["good"] == []
    # while the round checked: a child held the library, at the informer's GOGC; this process mapped none
    assert figures["seen"]["child"] not in (None, os.getpid())
    assert figures["seen"]["gogc"] == 50
    assert figures["seen"]["mapped"] == 0
    assert figures["after"] == {"running": False, "alive": False}  # the child ended with the round
    # a template that stops compiling is found by the child's compiler and held back (fail-static)
    assert figures["held"] == ["template.yaml"]
    assert any("keeping the last good version" in p for p in figures["problems"])
    assert figures["children"] == 2  # one child per round that compiled
    assert figures["mapped_at_end"] == 0


GOGC_OF_THE_INFORMER = r"""
import json
from celkeeper.informer.process import install_library_process
from celkeeper.native import ffi

install_library_process(admission_policies=False)
library = ffi.load()
print(json.dumps({"gogc": library.info()["gcPercent"]}))
library.trim()
"""


def test_the_informers_gogc_reaches_its_library_unless_the_environment_sets_one() -> None:
    require_celgo()
    env = {k: v for k, v in os.environ.items() if k != "GOGC"}
    assert in_fresh_process(GOGC_OF_THE_INFORMER, env=env)["gogc"] == 50
    assert in_fresh_process(GOGC_OF_THE_INFORMER, env=env | {"GOGC": "150"})["gogc"] == 150


@pytest.mark.parametrize(
    ("admission_policies", "mapped"), [(False, "libcelkeeper-gatekeeper.so"), (True, "libcelkeeper.so")]
)
def test_the_informers_children_load_the_library_without_admission_policies_unless_the_pod_enforces_them(
    admission_policies: bool, mapped: str
) -> None:
    """A pod that does not enforce Kubernetes' admission policies checks its policies in children that
    load the lighter variant of the library; a call for admission policies there is refused as the
    library's own (LibraryUnavailable), not as a child's failure."""
    require_celgo()
    library = LibraryProcess(variant=FULL if admission_policies else GATEKEEPER)
    try:
        handle, reply = library.expression(
            f'{{"source": {json.dumps(EXPRESSION)}, "variables": []}}'.encode()
        )
        assert handle > 0, reply
        child = library.child_pid
        assert child is not None and mapped_libraries(child) == {mapped}
        assert library.admission_policies is admission_policies
        if admission_policies:
            assert library.admission_policy_set(b'{"policies": []}')[0] > 0
        else:
            with pytest.raises(LibraryUnavailable, match="without Kubernetes' admission policies"):
                library.admission_policy_set(b'{"policies": []}')
            assert library.running  # the child lives on: only that capability is missing
    finally:
        library.trim()


def test_a_handle_of_an_ended_child_is_refused_and_its_release_does_nothing() -> None:
    require_celgo()
    library = LibraryProcess()
    engine = CelGoEngine(library)
    try:
        program = engine.compile(EXPRESSION)
        assert engine.evaluate(program, activation(engine)) is True
        library.trim()
        assert not library.running
        with pytest.raises(LibraryProcessEnded):
            engine.evaluate(program, activation(engine))
        assert not library.running  # the refused call started no child
        del program
        gc.collect()  # its handle released: its child took it along, nothing to do, no child started
        assert not library.running
        again = engine.compile(EXPRESSION)
        assert engine.evaluate(again, activation(engine)) is True
        assert library.info()["handles"] == 1  # the new child's own, not the old one's
    finally:
        library.trim()


def test_a_child_that_dies_fails_the_call_and_the_next_call_starts_another() -> None:
    require_celgo()
    library = LibraryProcess()
    engine = CelGoEngine(library)
    try:
        program = engine.compile(EXPRESSION)
        pid = library.child_pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(LibraryProcessEnded, match="ended"):
            engine.evaluate(program, activation(engine))
        assert not library.running
        again = engine.compile(EXPRESSION)
        assert engine.evaluate(again, activation(engine)) is True
        assert library.child_pid not in (None, pid)
    finally:
        library.trim()


def activation(engine: CelGoEngine) -> GoActivation:
    return engine.activation(object={"metadata": {"name": "x"}}, old_object=None, request=None)
