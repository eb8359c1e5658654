"""`celkeeper verify PATH...`: run Gatekeeper Suite files as `gator verify` does.

Every .yaml/.yml file under the paths (folders recursively; a trailing `/...` is accepted) whose
documents include a Suite (test.gatekeeper.sh) is run. Output is `go test`-style, as gator prints
it, followed by a summary line `N passed, M failed`; the exit code is 1 when anything failed. With
-v, what Gatekeeper loads silently but is likely a mistake (an expression that does not compile: it
fails each request it applies to; an ignored key such as `matchConditions`) is printed to stderr
as a warning with file:line:col.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence

from celkeeper.cel import get_engine
from celkeeper.cli import files
from celkeeper.cli.background import COMPILE_THREADS, Background
from celkeeper.cli.options import add_cache_option, add_engine_option, engine_name
from celkeeper.cli.output import redirected
from celkeeper.documents import parse_documents
from celkeeper.errors import CelkeeperError, is_compile_problem
from celkeeper.gator import (
    Filter,
    Runner,
    SuiteError,
    SuiteResult,
    TestResult,
    is_suite,
    parse_suite,
    render,
    summarize,
)
from celkeeper.gator.runner import Reader
from celkeeper.gator.suite import GROUP, Suite, has_admission_tests
from celkeeper.localfiles import walk

EXAMPLES = """examples:
  celkeeper verify examples/                      run every suite under examples/
  celkeeper verify suite.yaml -v                  one suite, with every test and case named
  celkeeper verify examples/ --run 'labels//'     tests whose names contain "labels"
  celkeeper verify examples/ --run '//^missing'   cases whose names start with "missing"
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="run Gatekeeper Suite files (gator verify)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="suite files or folders (searched recursively)"
    )
    parser.add_argument(
        "-r",
        "--run",
        default="",
        metavar="REGEX",
        help="run only matching tests/cases: REGEX (test or case name) or TEST//CASE",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="name every test and case")
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "junit", "sarif"),
        default="text",
        help="text (gator's), junit (JUnit XML: a testcase per case) or sarif (SARIF 2.1.0: each failed "
        "case at its line); with junit and sarif the summary line goes to stderr",
    )
    parser.add_argument("--output-file", metavar="FILE", help="write the output to FILE rather than stdout")
    parser.add_argument(
        "-t",
        "--trace",
        action="store_true",
        help="after each reviewed case, print what the review found (one JSON object per result)",
    )
    add_cache_option(parser)
    add_engine_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    flt = Filter.parse(args.run)
    name = engine_name(args)
    # the engine loads while the suites are read (the cel-go library's Go runtime initialises on a
    # thread of its own, and builds Kubernetes' CEL environments: see go/main.go's init)
    threads = COMPILE_THREADS if name == "cel-go" else 1
    engine = Background(get_engine, name, None, threads)
    suites, errors = discover(args.paths)
    for error in errors:
        print(f"celkeeper verify: {error}", file=sys.stderr)
    if not suites and not errors:
        print(f"celkeeper verify: no Suite files found in {' '.join(args.paths)}", file=sys.stderr)
    from celkeeper.gator.backend import PolicyBackend
    from celkeeper.gator.verdicts import DiskVerdicts, MemoryVerdicts

    # without the disk cache (--no-cache, or turned off), each check is made once in the run (a template
    # that several tests load, and read again once compiled ahead)
    verdicts = (None if args.no_cache else DiskVerdicts.default()) or MemoryVerdicts()
    backend = PolicyBackend(name, loaded=engine.result(), verdicts=verdicts)
    # a file several tests name (a template, an inventory) is read and parsed once per run
    read = functools.cache(files.read)
    runner = Runner(read, backend, extensions=[functools.partial(admission_tests, read)])
    if name == "cel-go":  # compiles without the GIL: the templates compile while the tests run
        runner.compile_ahead((s for s in suites if isinstance(s, Suite)), flt, threads)
    results: list[SuiteResult] = []
    for suite in suites:
        if isinstance(suite, SuiteResult):  # a Suite file that could not be parsed
            results.append(suite)
        else:
            results.append(runner.run(suite, flt))
    # CEL that does not compile: Gatekeeper loads the template (the part fails each request it applies
    # to, and the cases see that), celkeeper says so and fails the run (a policy that does not do what
    # it says is never a clean result); what Gatekeeper silently ignores is a warning (-v)
    compile_problems = list(dict.fromkeys(str(w) for w in backend.warnings if is_compile_problem(w)))
    problems = [str(e) for e in errors] + compile_problems
    summary = summarize(results, errors=problems)
    with redirected(args.output_file):
        if args.output == "text":
            sys.stdout.write(render(results, verbose=args.verbose, trace=args.trace, failed=bool(problems)))
        else:
            sys.stdout.write(formatted(args.output, results, problems))
        for problem in compile_problems:
            print(f"celkeeper verify: {problem}", file=sys.stderr)
        if args.verbose:  # what Gatekeeper accepts silently, e.g. a key it ignores
            for warning in dict.fromkeys(str(w) for w in backend.warnings if not is_compile_problem(w)):
                print(f"celkeeper verify: warning: {warning}", file=sys.stderr)
        print(summary.line(), file=sys.stdout if args.output == "text" else sys.stderr)
    return 0 if summary.ok else 1


def admission_tests(read: Reader, directory: str, suite: Suite, flt: Filter) -> Sequence[TestResult]:
    """The runner's extension: a suite's admission policy tests (gator.admissionpolicies, imported by a
    run that has one)."""
    if not suite.admission_tests:
        return ()
    from celkeeper.gator.admissionpolicies import AdmissionRunner

    return AdmissionRunner(read)(directory, suite, flt)


def formatted(output: str, results: list[SuiteResult], errors: list[str]) -> str:
    """-o junit, -o sarif: made by cli/output_junit.py, cli/output_sarif.py."""
    if output == "junit":
        from celkeeper.cli.output_junit import junit_verify

        return junit_verify(results, errors)
    from celkeeper.cli.output_sarif import sarif_verify

    return sarif_verify(results, errors)


def discover(paths: list[str]) -> tuple[list[Suite | SuiteResult], list[CelkeeperError]]:
    """The suites under `paths` (in order), and problems reading files that may hold suites."""
    suites: list[Suite | SuiteResult] = []
    errors: list[CelkeeperError] = []
    for path in paths:
        try:
            candidates = _suite_files(path, errors)
        except CelkeeperError as err:
            errors.append(err)
            continue
        for file in candidates:
            try:
                text = files.read_text(file)
            except CelkeeperError as err:
                errors.append(err)
                continue
            if GROUP not in text:  # cannot declare a Suite: not parsed at all
                continue
            parsed = parse_documents(text, file)
            errors.extend(parsed.errors)
            for document in parsed.documents:
                if not is_suite(document):
                    continue
                try:
                    suite = parse_suite(document, display=file)
                    if has_admission_tests(document):  # Kubernetes' admission policies: only such a Suite
                        from celkeeper.gator.admissionpolicies import with_admission_tests  # imports them

                        suite = with_admission_tests(suite, document)
                    suites.append(suite)
                except SuiteError as err:
                    suites.append(SuiteResult(path=file, error=str(err)))
    return suites, errors


def _suite_files(path: str, errors: list[CelkeeperError]) -> list[str]:
    if path.endswith("/...") or path == "...":
        path = path[: -len("...")] or "."
    if os.path.isdir(path):
        unlisted: list[str] = []
        found = walk(path, files.SUITE_SUFFIXES, unlisted)
        errors.extend(files.PathError(problem) for problem in unlisted)  # a folder that cannot be listed
        return found
    if not os.path.exists(path):
        raise files.PathError(f"{path}: no such file or directory")
    if not path.endswith(files.SUITE_SUFFIXES):
        raise files.PathError(f"{path}: unsupported extension (a Suite file ends in .yaml or .yml)")
    return [path]
