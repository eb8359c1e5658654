"""Runs Suites with `gator verify`'s semantics (gatekeeper pkg/gator/verify/runner.go).

For each test: load the template, the constraint and the ExpansionTemplates of `expansion:` (paths
relative to the suite file; a plain object is then expanded and what it generates reviewed too). With
`invalid: true` the test passes only when the constraint (or the template) is rejected; otherwise
each case reviews its object — a plain object, or an AdmissionReview whose request (operation,
oldObject, userInfo) is used — with the inventory's Namespaces known to namespaceSelector, and
checks every assertion against the messages of all results (deny, warn and dryrun alike).

celkeeper's extension (celkeeper.gator.suite): a test's `mutators` file (Gatekeeper mutators only), and
a case's `mutated` file, the object as Gatekeeper's mutation webhook leaves the case's object with those
mutators (review.mutate; the inventory's Namespaces known to their namespaceSelectors); a difference, or
the webhook's error, fails the case after its assertions.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import re2

from celkeeper.cel.k8slib.gostrings import go_quote
from celkeeper.documents import Document, ParsedText
from celkeeper.errors import CelkeeperError
from celkeeper.expansion import is_expansion_template
from celkeeper.gator.filter import Filter, compile_regex
from celkeeper.gator.suite import Assertion, Case, Suite, Test
from celkeeper.gator.suiteresults import CaseResult, SuiteResult, TestResult
from celkeeper.gator.violation import Violation
from celkeeper.model import JsonValue
from celkeeper.mutation.kinds import is_mutator

if TYPE_CHECKING:  # the runner loads neither the engine (its backend does) nor mutators (only a test's)
    from celkeeper.mutation import MutatorSet
    from celkeeper.policy import PolicySet

Reader = Callable[[str], ParsedText]  # reads a file into documents (raises CelkeeperError if unreadable)


class Backend(Protocol):
    """What the runner needs from the policy engine (see celkeeper.gator.backend)."""

    def load(
        self, template: Document, constraint: Document, expansions: Sequence[Document] = ()
    ) -> tuple[PolicySet, Sequence[CelkeeperError]]:
        """A policy set of one template, one constraint and the ExpansionTemplates of the test's
        `expansion:` file, and every problem found loading them."""

    def review(self, policies: PolicySet, obj: Document, inventory: Sequence[Document]) -> list[Violation]:
        """All results (every action) of reviewing obj (an object or AdmissionReview), and of the
        objects the test's ExpansionTemplates generate from a plain object."""

    def is_expected_invalid(self, errors: Sequence[CelkeeperError]) -> bool:
        """Whether these load errors are what `invalid: true` expects (a rejected constraint/template)."""

    def compile_ahead(self, templates: Iterable[Document], threads: int = 1) -> Sequence[threading.Thread]:
        """Start compiling these template documents (in the background) that the tests will load; the
        threads compiling them."""


class CaseFailure(Exception):
    """Why a case failed: its text is printed under the case."""


#: runs more tests of a suite (directory, suite, filter): celkeeper's extensions of the Suite format
Extension = Callable[[str, Suite, Filter], Sequence[TestResult]]


class Runner:
    def __init__(
        self,
        read: Reader,
        backend: Backend,
        clock: Callable[[], float] = time.perf_counter,
        extensions: Sequence[Extension] = (),
    ) -> None:
        self.read = read
        self.backend = backend
        self.clock = clock
        self.extensions = tuple(extensions)

    def compile_ahead(
        self, suites: Iterable[Suite], flt: Filter, threads: int = 1
    ) -> Sequence[threading.Thread]:
        """Have the backend start compiling the templates the suites' tests will load (those `run` will
        run, in that order, each file once), while the tests run: a file that cannot be read here is
        left to the test, which reports it. Each file is read as the backend takes it (it compiles the
        first while the others are read). Returns the threads compiling them."""
        paths: dict[str, None] = {}
        for suite in suites:
            if suite.skip:
                continue
            directory = os.path.dirname(suite.path)
            for test in suite.tests:
                if test.template and not test.skip and flt.matches_test(test):
                    paths[os.path.join(directory, test.template)] = None
        return self.backend.compile_ahead(self._first_documents(paths), threads)

    def _first_documents(self, paths: Iterable[str]) -> Iterator[Document]:
        """The first document of each file that can be read without error."""
        for path in paths:
            try:
                parsed = self.read(path)
            except CelkeeperError:
                continue
            if parsed.documents and not parsed.errors:
                yield parsed.documents[0]

    def run(self, suite: Suite, flt: Filter) -> SuiteResult:
        if suite.skip:
            return SuiteResult(path=suite.display, skipped=True)
        start = self.clock()
        directory = os.path.dirname(suite.path)
        tests = []
        for test in suite.tests:
            if test.skip or not flt.matches_test(test):
                tests.append(_skipped_test(test))
            else:
                tests.append(self._run_test(directory, test, flt))
        for extension in self.extensions:
            tests += extension(directory, suite, flt)
        return SuiteResult(path=suite.display, runtime=self.clock() - start, tests=tuple(tests))

    # -- tests ------------------------------------------------------------------------------------
    def _run_test(self, directory: str, test: Test, flt: Filter) -> TestResult:
        start = self.clock()
        try:
            policies, errors = self._load(directory, test)
        except CelkeeperError as err:
            return TestResult(
                name=test.name, error=str(err), runtime=self.clock() - start, expected_invalid=test.invalid
            )
        if test.invalid:
            error = None
            if not errors:
                error = "constraint should have failed schema validation: it was accepted"
            elif not self.backend.is_expected_invalid(errors):
                error = "constraint should have failed schema validation, but loading failed otherwise:\n" + (
                    "\n".join(str(e) for e in errors)
                )
            return TestResult(
                name=test.name, error=error, runtime=self.clock() - start, expected_invalid=True
            )
        if errors:
            return TestResult(
                name=test.name, error="\n".join(str(e) for e in errors), runtime=self.clock() - start
            )
        try:
            mutators = self._mutators(directory, test)
        except CelkeeperError as err:
            return TestResult(name=test.name, error=str(err), runtime=self.clock() - start)
        cases = []
        for case in test.cases:
            if case.skip or not flt.matches_case(test.name, case.name):
                cases.append(CaseResult(name=case.name, skipped=True))
            else:
                cases.append(self._run_case(directory, policies, case, mutators))
        return TestResult(name=test.name, runtime=self.clock() - start, cases=tuple(cases))

    def _load(self, directory: str, test: Test) -> tuple[PolicySet, Sequence[CelkeeperError]]:
        if not test.template:
            raise CelkeeperError("invalid Suite: missing template")
        template = self._one_document(os.path.join(directory, test.template), "template")
        if not test.constraint:
            raise CelkeeperError("invalid Suite: missing constraint")
        constraint = self._one_document(os.path.join(directory, test.constraint), "constraint")
        expansions: tuple[Document, ...] = ()
        # reader.ReadExpansions: ExpansionTemplates only, at least one (never read for `invalid: true`:
        # gator then only tries to add the constraint)
        if test.expansion and not test.invalid:
            path = os.path.join(directory, test.expansion)
            expansions = self._documents(path)
            if not expansions or not all(is_expansion_template(d) for d in expansions):
                raise CelkeeperError(f"not an Expansion Template: {go_quote(path)}")
        return self.backend.load(template, constraint, expansions)

    def _mutators(self, directory: str, test: Test) -> MutatorSet | None:
        """The test's `mutators` (celkeeper's extension), every one loaded, or a CelkeeperError."""
        if not test.mutators:
            return None
        path = os.path.join(directory, test.mutators)
        documents = self._documents(path)
        if not documents or not all(is_mutator(d) for d in documents):
            raise CelkeeperError(f"not a mutator: {go_quote(path)}")
        from celkeeper.mutation import build_mutator_set

        mutators = build_mutator_set(documents)
        if mutators.errors:
            raise CelkeeperError("\n".join(str(e) for e in mutators.errors))
        return mutators

    def _one_document(self, path: str, what: str) -> Document:
        """The file's first document: gator reads a template or constraint file as one YAML document
        (the first of a stream; the others are ignored)."""
        documents = self._documents(path)
        if not documents:
            raise CelkeeperError(f"{path}: no {what} in the file")
        return documents[0]

    def _documents(self, path: str) -> tuple[Document, ...]:
        parsed = self.read(path)
        if parsed.errors:
            raise parsed.errors[0]
        return parsed.documents

    # -- cases ------------------------------------------------------------------------------------
    def _run_case(
        self, directory: str, policies: PolicySet, case: Case, mutators: MutatorSet | None = None
    ) -> CaseResult:
        start = self.clock()
        found: list[tuple[Violation, ...]] = []  # what the review found, once it has run
        try:
            self._check_case(directory, policies, case, found, mutators)
        except (CaseFailure, CelkeeperError) as err:
            return CaseResult(
                name=case.name,
                error=str(err),
                runtime=self.clock() - start,
                results=found[0] if found else None,
            )
        return CaseResult(name=case.name, runtime=self.clock() - start, results=found[0] if found else None)

    def _check_case(
        self,
        directory: str,
        policies: PolicySet,
        case: Case,
        found: list[tuple[Violation, ...]],
        mutators: MutatorSet | None = None,
    ) -> None:
        if not case.object:
            raise CaseFailure("invalid Case: must define object")
        if not case.assertions:
            raise CaseFailure("invalid Case: assertions must be non-empty")
        path = os.path.join(directory, case.object)
        objects = self._documents(path)
        if not objects:
            raise CaseFailure(f"missing objects: path {path!r} defines no YAML objects")
        if len(objects) != 1:
            raise CaseFailure(
                f"object file must contain exactly one object: {path!r} defines {len(objects)} objects"
            )
        inventory: list[Document] = []
        for item in case.inventory:
            item_path = os.path.join(directory, item)
            items = self._documents(item_path)
            if not items:
                raise CaseFailure(f"missing objects: path {item_path!r} defines no YAML objects")
            inventory.extend(items)
        results = tuple(self.backend.review(policies, objects[0], inventory))
        found.append(results)
        # Responses.Results(): sorted by enforcement action, then message (Go's byte order)
        ordered = sorted(results, key=lambda r: (r.enforcement_action.encode(), r.message.encode()))
        messages = [r.message for r in ordered]
        for assertion in case.assertions:
            check_assertion(assertion, messages)
        if case.mutated:
            self._check_mutated(directory, case, objects[0], inventory, mutators)

    def _check_mutated(
        self,
        directory: str,
        case: Case,
        obj: Document,
        inventory: Sequence[Document],
        mutators: MutatorSet | None,
    ) -> None:
        """celkeeper's extension: the object as the test's mutators leave it is the `mutated` file's."""
        from celkeeper.gator.kinds import is_namespace
        from celkeeper.gator.reviews import as_v1_review, checked_request, is_admission_review
        from celkeeper.review import admission_review_for, inventory_lookup
        from celkeeper.review.mutate import mutate

        if mutators is None:
            raise CaseFailure("invalid Case: mutated needs the test's mutators")
        path = os.path.join(directory, case.mutated)
        expected = self._documents(path)
        if len(expected) != 1:
            raise CaseFailure(
                f"mutated file must contain exactly one object: {path!r} defines {len(expected)}"
            )
        review = (
            as_v1_review(checked_request(obj))
            if is_admission_review(obj)
            else admission_review_for(obj.data, operation="CREATE")
        )
        namespaces = {d.name: d.data for d in inventory if is_namespace(d) and d.name}
        mutation = mutate(review, mutators, inventory_lookup(namespaces, complete=False))
        if mutation.error:
            raise CaseFailure(f"Gatekeeper's mutation webhook refuses the object: {mutation.error}")
        differences = list(_differences(expected[0].data, mutation.object))
        if differences:
            raise CaseFailure(
                f"the mutated object is not {case.mutated}:\n" + "\n".join(f"  {d}" for d in differences[:20])
            )


def _differences(expected: JsonValue, got: JsonValue, path: str = "") -> Iterator[str]:
    """Where two JSON values differ: `path: expected X, got Y` (a field missing on one side is `<none>`)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            where = f"{path}.{key}" if path else key
            if key not in got:
                yield f"{where}: expected {_show(expected[key])}, got <none>"
            elif key not in expected:
                yield f"{where}: expected <none>, got {_show(got[key])}"
            else:
                yield from _differences(expected[key], got[key], where)
    elif isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (a, b) in enumerate(zip(expected, got, strict=True)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif expected != got or type(expected) is not type(got):
        yield f"{path or '<object>'}: expected {_show(expected)}, got {_show(got)}"


def _show(value: JsonValue) -> str:
    return json.dumps(value, sort_keys=True)


def _skipped_test(test: Test) -> TestResult:
    return TestResult(
        name=test.name,
        skipped=True,
        expected_invalid=test.invalid,
        cases=tuple(CaseResult(name=c.name, skipped=True) for c in test.cases),
    )


def check_assertion(assertion: Assertion, messages: Sequence[str]) -> None:
    """Raise CaseFailure unless the messages satisfy the assertion (gator's Assertion.Run)."""
    regex = None
    if assertion.message is not None:
        try:
            regex = compile_regex(assertion.message)
        except re2.error as err:
            detail = err.args[0].decode() if err.args and isinstance(err.args[0], bytes) else str(err)
            raise CaseFailure(f"message contains invalid regular expression: {detail}") from err
    matching = sum(1 for m in messages if regex is None or regex.search(m))
    want = assertion.violations
    containing = f" containing {go_quote(assertion.message)}" if assertion.message is not None else ""
    got = f"got {matching} violations{containing}"
    if isinstance(want, int) and not isinstance(want, bool):
        if want < 0:
            raise CaseFailure(f"{_INVALID_VIOLATIONS}: got messages {_go_list(messages)}")
        if matching != want:
            raise CaseFailure(
                f"unexpected number of violations: {got} but want exactly {want}"
                f": got messages {_go_list(messages)}"
            )
        return
    if want == "yes":
        if matching == 0:
            raise CaseFailure(
                f"unexpected number of violations: {got} but want at least 1"
                f": got messages {_go_list(messages)}"
            )
        return
    if want == "no":
        if matching > 0:
            raise CaseFailure(
                f"unexpected number of violations: {got} but want none: got messages {_go_list(messages)}"
            )
        return
    raise CaseFailure(f"{_INVALID_VIOLATIONS}: got messages {_go_list(messages)}")


_INVALID_VIOLATIONS = (
    'invalid yaml: assertion.violation, if set, must be a nonnegative integer, "yes", or "no"'
)


def _go_list(messages: Sequence[str]) -> str:
    """Go's %v of a []string, as gator prints the messages: `[a b c]`, unquoted, space-separated."""
    return "[" + " ".join(messages) + "]"
