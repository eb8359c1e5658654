"""The library's file pages given back (ffi.release_file_pages): in a fresh process that has loaded the
library and evaluated with it, the pages of its code and read-only data are unmapped, its relocated data
(private to the process) is kept, and the library goes on deciding as before, its pages mapped again as
they are used. The informer after a round and each worker after a load call it (docs/performance.md)."""

from __future__ import annotations

from tests.support.native import in_fresh_process, require_celgo

PROGRAM = r"""
import json, os, re
from pathlib import Path
from celkeeper.cel import get_engine
from celkeeper.native.ffi import load, release_file_pages

def mapped():
    # the library's resident bytes in this process: (from the file, private to the process)
    library = os.path.realpath(load().path)
    file = private = 0
    ours = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            ours = line.split(None, 5)[-1] == library
        elif ours and line.startswith("Rss:"):
            file += int(line.split()[1]) * 1024
        elif ours and line.startswith("Anonymous:"):
            private += int(line.split()[1]) * 1024
            file -= int(line.split()[1]) * 1024
    return file, private

engine = get_engine("cel-go")
pod = {"metadata": {"name": "x", "labels": {"team": "shop"}}}
program = engine.compile("object.metadata.name == 'x' && object.metadata.labels.team.startsWith('sh')")
def decide():
    activation = engine.activation(object=pod, old_object=None, request={"operation": "CREATE"})
    return engine.evaluate(program, activation)
first = decide()
before = mapped()
released = release_file_pages()
after = mapped()
again = decide()
print(json.dumps({"first": first, "again": again, "before": before, "after": after, "released": released,
                  "later": mapped()}))
"""


def test_the_library_code_pages_are_unmapped_and_come_back_when_used() -> None:
    require_celgo()
    figures = in_fresh_process(PROGRAM)
    assert figures["first"] is True and figures["again"] is True  # it decides as before
    (file_before, private_before), (file_after, private_after) = figures["before"], figures["after"]
    assert file_before > 8 << 20  # loading and compiling mapped megabytes of the file
    assert figures["released"] >= file_before // 2
    # unmapped (the Go runtime's own threads may touch a few pages again at once)
    assert file_after < file_before // 4
    assert private_after == private_before  # the relocated data is the process's own: kept
    assert figures["later"][0] > file_after  # what deciding used was mapped again
