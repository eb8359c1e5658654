"""Compiling ahead (Runner.compile_ahead): the suites' templates compile on threads of their own while
the tests run, each once, and the suites report exactly what they report without it."""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from celkeeper.cel import get_engine
from celkeeper.cel.api import Binding, Engine, TemplateProgram, TemplateSource
from celkeeper.cli import files
from celkeeper.cli.verify import discover
from celkeeper.gator import Filter, Runner, SuiteResult, render
from celkeeper.gator.backend import PolicyBackend
from celkeeper.gator.suite import Suite
from celkeeper.gator.verdicts import MemoryVerdicts
from tests.support.native import require_celgo
from tests.support.samples import LIBRARY, present

ROOT = Path(__file__).resolve().parents[2]


class _ThreadsEngine:
    """A real engine recording which thread compiled each template source (and every compilation)."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.compiled: list[tuple[str, str]] = []  # (thread name, the source's JSON)
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    def compile_template(self, source: TemplateSource) -> TemplateProgram:
        with self._lock:
            self.compiled.append((threading.current_thread().name, repr(source.raw)))
        return self.inner.compile_template(source)

    def bind(self, program: TemplateProgram, constraint: Mapping[str, Any]) -> Binding:
        return self.inner.bind(program, constraint)

    def __getattr__(self, name: str) -> Any:  # validate, explain, open_inventory, ...
        return getattr(self.inner, name)


def _run(ahead: int, paths: list[str]) -> tuple[str, list[str], _ThreadsEngine]:
    engine = _ThreadsEngine(get_engine("cel-go", None, ahead or 1))
    backend = PolicyBackend("cel-go", loaded=engine, verdicts=MemoryVerdicts())  # type: ignore[arg-type]
    read = functools.cache(files.read)
    runner = Runner(read, backend)
    suites, errors = discover(paths)
    assert not errors
    if ahead:
        for thread in runner.compile_ahead((s for s in suites if isinstance(s, Suite)), Filter(), ahead):
            thread.join()  # every template compiled before any test runs
        assert {thread for thread, _ in engine.compiled} == {"celkeeper-compile"}
        compiled_ahead = len(engine.compiled)
    results = [s if isinstance(s, SuiteResult) else runner.run(s, Filter()) for s in suites]
    if ahead:
        assert len(engine.compiled) == compiled_ahead  # the tests found them compiled
    text = re.sub(r"\d+\.\d+s", "Xs", render(results, verbose=True, trace=True))
    return text, [str(w) for w in backend.warnings], engine


def test_templates_compiled_ahead_once_each_and_results_unchanged() -> None:
    require_celgo()
    paths = [str(ROOT / "examples")] + ([str(LIBRARY)] if present() else [])
    alone, alone_warnings, _ = _run(0, paths)
    for threads in (1, 2):
        ahead, ahead_warnings, engine = _run(threads, paths)
        assert ahead == alone
        assert ahead_warnings == alone_warnings
        sources = [source for _, source in engine.compiled]
        assert len(sources) == len(set(sources)) > 20  # each template compiled once
