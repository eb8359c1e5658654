"""Running a folder of Suites through `gator verify` and `celkeeper verify`, and comparing them case
by case: the status of every suite, test and case, the failure text of assertions, and what each
review found (messages, enforcement actions, scoped actions) from the `--trace` output."""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path

from celkeeper.cli.main import main as celkeeper_main
from tests.e2e.gator.verify_output import CaseOutcome, SuiteOutcome, TestOutcome, parse
from tests.support.gator import run_gator_over

CaseId = str  # "<suite relative to the root>::<test>[#n]::<case>[#n]"; "::-" for a test without cases


@dataclass(frozen=True)
class Side:
    suite: SuiteOutcome
    test: TestOutcome
    case: CaseOutcome | None


@dataclass(frozen=True)
class Outcomes:
    """One tool's outcomes of a folder of Suites, by case id, and its raw output (for diagnosis)."""

    cases: dict[CaseId, Side]
    output: str


@dataclass(frozen=True)
class Run:
    """Both sides' outcomes, by case id; the raw outputs for diagnosis."""

    gator: dict[CaseId, Side]
    celkeeper: dict[CaseId, Side]
    gator_output: str
    celkeeper_output: str


def gator_verify(gator: Path, root: Path, extra: tuple[str, ...] = ()) -> Outcomes:
    """`gator verify -v --trace ROOT/...` (plus `extra` arguments, e.g. a --run filter); its answer is
    kept for the same files under ROOT (every Suite here reads only files under its root)."""
    run = run_gator_over(gator, ["verify", "-v", "--trace", *extra, f"{root}/..."], root)
    if run.code not in (0, 1) or ("PASS" not in run.out and "FAIL" not in run.out):
        raise AssertionError(f"gator verify did not run: exit {run.code}\n{run.out}\n{run.err}")
    return Outcomes(index(parse(run.out), root), run.out + run.err)


def celkeeper_verify(root: Path, extra: tuple[str, ...] = (), engine: str | None = None) -> Outcomes:
    """`celkeeper verify -v --trace ROOT/...` in this process, with `engine` (None: the default)."""
    argv = ["verify", "-v", "--trace", *extra, f"{root}/..."]
    if engine:
        argv += ["--engine", engine]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = celkeeper_main(argv)
    if code not in (0, 1):
        raise AssertionError(f"celkeeper verify did not run: exit {code}\n{out.getvalue()}\n{err.getvalue()}")
    return Outcomes(index(parse(out.getvalue()), root), out.getvalue() + err.getvalue())


def pair(gator: Outcomes, celkeeper: Outcomes) -> Run:
    return Run(gator.cases, celkeeper.cases, gator.output, celkeeper.output)


def run_both(gator: Path, root: Path, extra: tuple[str, ...] = (), engine: str | None = None) -> Run:
    """Both tools' `verify -v --trace ROOT/...` (plus `extra` arguments, e.g. a --run filter)."""
    return pair(gator_verify(gator, root, extra), celkeeper_verify(root, extra, engine))


def index(suites: list[SuiteOutcome], root: Path) -> dict[CaseId, Side]:
    out: dict[CaseId, Side] = {}
    for suite in suites:
        rel = os.path.relpath(os.path.abspath(suite.path), root) if os.path.isabs(suite.path) else suite.path
        rel = rel.replace(os.sep, "/")
        tests_seen: dict[str, int] = {}
        for test in suite.tests:
            t = _ordinal(tests_seen, test.name)
            if not test.cases:
                out[f"{rel}::{t}::-"] = Side(suite, test, None)
            cases_seen: dict[str, int] = {}
            for case in test.cases:
                out[f"{rel}::{t}::{_ordinal(cases_seen, case.name)}"] = Side(suite, test, case)
        if not suite.tests:
            out[f"{rel}::-::-"] = Side(suite, TestOutcome("-", suite.status, suite.error), None)
    return out


def _ordinal(seen: dict[str, int], name: str) -> str:
    n = seen.get(name, 0)
    seen[name] = n + 1
    return name if n == 0 else f"{name}#{n + 1}"


def differences(gator: Side | None, ours: Side | None) -> list[str]:
    """Why the two sides disagree on one case ([] when they agree)."""
    if gator is None or ours is None:
        return [f"only {'celkeeper' if gator is None else 'gator'} ran this case"]
    found = []
    if gator.suite.status != ours.suite.status and (gator.suite.error or ours.suite.error):
        found.append(
            f"suite: gator {gator.suite.status} {gator.suite.error!r}, "
            f"celkeeper {ours.suite.status} {ours.suite.error!r}"
        )
    if gator.case is None or ours.case is None:
        if (gator.case is None) != (ours.case is None):
            found.append("one side ran cases, the other did not")
        if gator.test.status != ours.test.status:
            found.append(
                f"test: gator {gator.test.status} {gator.test.error!r}, "
                f"celkeeper {ours.test.status} {ours.test.error!r}"
            )
        return found
    g, c = gator.case, ours.case
    if g.status != c.status:
        found.append(f"case status: gator {g.status} {g.error!r}, celkeeper {c.status} {c.error!r}")
    elif g.status == "FAIL" and g.error != c.error and _comparable_error(g.error):
        found.append(f"case failure text:\n  gator:     {g.error!r}\n  celkeeper: {c.error!r}")
    if g.results != c.results:
        found.append(f"results:\n  gator:     {g.results}\n  celkeeper: {c.results}")
    return found


def _comparable_error(text: str) -> bool:
    """Failure texts compared word for word: the ones gator words from the assertion itself (others
    name files and Go types, which celkeeper says its own way)."""
    return text.startswith(("unexpected number of violations", "invalid yaml: assertion"))
