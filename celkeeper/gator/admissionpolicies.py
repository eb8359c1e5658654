"""Kubernetes' admission policies in Suites: celkeeper's extension of gator's Suite format, which gator
ignores (it reads only the keys it knows: a Suite may hold both kinds of test).

    kind: Suite
    apiVersion: test.gatekeeper.sh/v1alpha1
    tests: [...]                      # gator's tests (templates and constraints), as gator runs them
    admissionPolicyTests:             # celkeeper's: ValidatingAdmissionPolicies, MutatingAdmissionPolicies
    - name: replica-limit
      policies: [policies.yaml]       # the policies, bindings and CRDs (paths relative to the suite file);
                                      # other objects in these files are taken as parameters
      params: [params.yaml]           # optional: the objects bindings take as parameters
      invalid: false                  # optional: the API server refuses one of the policy documents
      skip: false
      cases:
      - name: too-many-replicas
        object: deployment.yaml       # one object (a CREATE), or an AdmissionReview (its request)
        inventory: [namespace.yaml]   # optional: the Namespaces the API server holds
        skip: false
        assertions:                   # every one must hold
        - violations: yes | no | N    # gator's, counted over the denial (the status message) and the
          message: regex              # warnings; default yes
        - allowed: false              # the API server admits the request, or not
        - auditAnnotations:           # these audit annotations are recorded, their values matching
            replica-limit/replicas: "^8$"
        - patched: expected.yaml      # the object after the mutating policies holds every field of this one

The answers are Kubernetes' own (celkeeper.admissionpolicy): one test is one set of policies; each case
is answered as the API server would answer its request.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import re2

from celkeeper.admissionpolicy import (
    is_admission_policy_document,
    is_crd_document,
    is_param,
    param_kinds,
)
from celkeeper.documents import Document, ParsedText, field_path
from celkeeper.errors import AdmissionPolicyNote, CelkeeperError
from celkeeper.gator.filter import Filter, compile_regex
from celkeeper.gator.reviews import checked_request, is_admission_review
from celkeeper.gator.runner import CaseFailure, check_assertion
from celkeeper.gator.suite import ADMISSION_TESTS, Assertion, Suite, SuiteError
from celkeeper.gator.suiteresults import CaseResult, TestResult
from celkeeper.gator.violation import Violation

if TYPE_CHECKING:  # the policies' evaluation is imported by a Suite that has such tests (its first build)
    from celkeeper.admissionpolicy import AdmissionPolicies, Answer

Reader = Callable[[str], ParsedText]


@dataclass(frozen=True)
class AdmissionAssertion:
    violations: Any = None  # gator's: "yes", "no", N (None: not asked unless message is)
    message: str | None = None
    allowed: bool | None = None
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    patched: str | None = None


@dataclass(frozen=True)
class AdmissionCase:
    name: str
    object: str
    inventory: tuple[str, ...] = ()
    assertions: tuple[AdmissionAssertion, ...] = ()
    skip: bool = False


@dataclass(frozen=True)
class AdmissionTest:
    name: str
    policies: tuple[str, ...]
    params: tuple[str, ...] = ()
    cases: tuple[AdmissionCase, ...] = ()
    invalid: bool = False
    skip: bool = False


# -- parsing ---------------------------------------------------------------------------------------------
def with_admission_tests(suite: Suite, document: Document) -> Suite:
    """The suite with its document's `admissionPolicyTests`; raises SuiteError located where it is wrong."""
    tests = parse_admission_tests(document)
    return replace(suite, admission_tests=tests) if tests else suite


def parse_admission_tests(document: Document) -> tuple[AdmissionTest, ...]:
    """The Suite's `admissionPolicyTests`; raises SuiteError located at the offending field."""
    data = document.data
    items = data.get(ADMISSION_TESTS) if isinstance(data, dict) else None
    if items is None:
        return ()
    if not isinstance(items, list):
        raise document.error(SuiteError, "must be a list", ADMISSION_TESTS)
    return tuple(_test(document, item, field_path(ADMISSION_TESTS, i)) for i, item in enumerate(items))


def _test(document: Document, data: Any, path: str) -> AdmissionTest:
    if not isinstance(data, dict):
        raise document.error(SuiteError, "a test must be a map", path)
    cases = _get(document, data, "cases", list, path, default=[])
    return AdmissionTest(
        name=_get(document, data, "name", str, path, default=""),
        policies=_paths(document, data, "policies", path),
        params=_paths(document, data, "params", path),
        cases=tuple(_case(document, c, f"{path}.cases[{i}]") for i, c in enumerate(cases)),
        invalid=_get(document, data, "invalid", bool, path, default=False),
        skip=_get(document, data, "skip", bool, path, default=False),
    )


def _case(document: Document, data: Any, path: str) -> AdmissionCase:
    if not isinstance(data, dict):
        raise document.error(SuiteError, "a case must be a map", path)
    assertions = _get(document, data, "assertions", list, path, default=[])
    return AdmissionCase(
        name=_get(document, data, "name", str, path, default=""),
        object=_get(document, data, "object", str, path, default=""),
        inventory=_paths(document, data, "inventory", path),
        assertions=tuple(
            _assertion(document, a, f"{path}.assertions[{i}]") for i, a in enumerate(assertions)
        ),
        skip=_get(document, data, "skip", bool, path, default=False),
    )


def _assertion(document: Document, data: Any, path: str) -> AdmissionAssertion:
    if not isinstance(data, dict):
        raise document.error(SuiteError, "an assertion must be a map", path)
    unknown = sorted(set(data) - {"violations", "message", "allowed", "auditAnnotations", "patched"})
    if unknown:
        raise document.error(
            SuiteError, f"unknown assertion {unknown[0]!r}", f"{path}.{unknown[0]}", key=True
        )
    violations = data.get("violations")
    if violations is not None and (isinstance(violations, bool) or not isinstance(violations, int | str)):
        raise document.error(
            SuiteError, 'violations must be a non-negative integer, "yes" or "no"', f"{path}.violations"
        )
    annotations = _get(document, data, "auditAnnotations", dict, path, default={})
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise document.error(
                SuiteError, "must be a regular expression (a string)", f"{path}.auditAnnotations.{key}"
            )
    return AdmissionAssertion(
        violations=violations,
        message=_get(document, data, "message", str, path, default=None),
        allowed=_get(document, data, "allowed", bool, path, default=None),
        audit_annotations=annotations,
        patched=_get(document, data, "patched", str, path, default=None),
    )


def _paths(document: Document, data: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = _get(document, data, key, list, path, default=[])
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise document.error(SuiteError, "must be a path (string)", f"{path}.{key}[{i}]")
    return tuple(value)


def _get(
    document: Document, data: Mapping[str, Any], key: str, kind: type, path: str, *, default: Any
) -> Any:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {str: "a string", bool: "true or false", list: "a list", dict: "a map"}
        raise document.error(SuiteError, f"must be {names.get(kind, kind.__name__)}", f"{path}.{key}")
    return value


# -- running ---------------------------------------------------------------------------------------------
class AdmissionRunner:
    """Runs a Suite's admission policy tests (see the module docstring)."""

    def __init__(self, read: Reader, clock: Callable[[], float] = time.perf_counter) -> None:
        self.read = read
        self.clock = clock

    def __call__(self, directory: str, suite: Suite, flt: Filter) -> list[TestResult]:
        """An extension of gator.runner.Runner: the suite's admission policy tests."""
        return self.run(directory, suite.admission_tests, flt)

    def run(self, directory: str, tests: Sequence[AdmissionTest], flt: Filter) -> list[TestResult]:
        out = []
        for test in tests:
            if test.skip or not flt.matches_test(test):
                out.append(
                    TestResult(
                        name=test.name,
                        skipped=True,
                        expected_invalid=test.invalid,
                        cases=tuple(CaseResult(name=c.name, skipped=True) for c in test.cases),
                    )
                )
            else:
                out.append(self._test(directory, test, flt))
        return out

    def _test(self, directory: str, test: AdmissionTest, flt: Filter) -> TestResult:
        start = self.clock()
        try:
            if not test.policies:
                raise CelkeeperError("invalid Suite: missing policies")
            documents = [d for p in test.policies for d in self._documents(os.path.join(directory, p))]
            params = [d for p in test.params for d in self._documents(os.path.join(directory, p))]
        except CelkeeperError as err:
            return TestResult(
                name=test.name, error=str(err), runtime=self.clock() - start, expected_invalid=test.invalid
            )
        crds = [d for d in documents if is_crd_document(d)]
        policies = [d for d in documents if is_admission_policy_document(d)]
        params = [
            *params,
            *(d for d in documents if not is_crd_document(d) and not is_admission_policy_document(d)),
        ]
        kinds = param_kinds(policies)
        from celkeeper.admissionpolicy import AdmissionPolicies

        try:
            built = AdmissionPolicies.build(
                policies,
                params=[p for p in params if isinstance(p.data, dict) and is_param(p.data, kinds)],
                crds=crds,
            )
        except CelkeeperError as err:
            return TestResult(
                name=test.name, error=str(err), runtime=self.clock() - start, expected_invalid=test.invalid
            )
        with built:
            errors = [p for p in built.problems if not isinstance(p, AdmissionPolicyNote)]
            if test.invalid:
                error = (
                    None if errors else "a policy document should have been refused: every one was accepted"
                )
                return TestResult(
                    name=test.name, error=error, runtime=self.clock() - start, expected_invalid=True
                )
            if errors:
                return TestResult(
                    name=test.name, error="\n".join(str(e) for e in errors), runtime=self.clock() - start
                )
            cases = []
            for case in test.cases:
                if case.skip or not flt.matches_case(test.name, case.name):
                    cases.append(CaseResult(name=case.name, skipped=True))
                else:
                    cases.append(self._case(directory, built, policies, params, case))
        return TestResult(name=test.name, runtime=self.clock() - start, cases=tuple(cases))

    def _case(
        self,
        directory: str,
        policies: AdmissionPolicies,
        documents: Sequence[Document],
        params: Sequence[Document],
        case: AdmissionCase,
    ) -> CaseResult:
        start = self.clock()
        results: tuple[Violation, ...] | None = None
        try:
            if not case.object:
                raise CaseFailure("invalid Case: must define object")
            if not case.assertions:
                raise CaseFailure("invalid Case: assertions must be non-empty")
            objects = self._documents(os.path.join(directory, case.object))
            if len(objects) != 1:
                raise CaseFailure(
                    f"object file must contain exactly one object: {case.object!r} defines {len(objects)}"
                )
            inventory = [d for p in case.inventory for d in self._documents(os.path.join(directory, p))]
            answer = self._answer(policies, documents, params, inventory, objects[0])
            results = _results(answer)
            for assertion in case.assertions:
                self._check(directory, assertion, answer, results)
        except (CaseFailure, CelkeeperError) as err:
            return CaseResult(name=case.name, error=str(err), runtime=self.clock() - start, results=results)
        return CaseResult(name=case.name, runtime=self.clock() - start, results=results)

    def _answer(
        self,
        policies: AdmissionPolicies,
        documents: Sequence[Document],
        params: Sequence[Document],
        inventory: Sequence[Document],
        obj: Document,
    ) -> Answer:
        namespaces = [d for d in inventory if d.api_version == "v1" and d.kind == "Namespace"]
        if is_admission_review(obj):
            request = dict(checked_request(obj))
            request.pop("uid", None)
        elif isinstance(obj.data, dict):
            request = {"operation": "CREATE", "object": obj.data}
        else:
            raise CaseFailure("the object is not a map")
        if not namespaces:
            return policies.review(request)
        # the case's Namespaces: a set of its own (policies are compiled again: a Suite is small)
        kinds = param_kinds(documents)
        extra = [d for d in inventory if isinstance(d.data, dict) and is_param(d.data, kinds)]
        with type(policies).build(documents, params=[*params, *extra], namespaces=namespaces) as own:
            return own.review(request)

    def _check(
        self, directory: str, assertion: AdmissionAssertion, answer: Answer, results: Sequence[Violation]
    ) -> None:
        if assertion.allowed is not None and assertion.allowed != answer.allowed:
            said = f": {answer.message}" if answer.message else ""
            verdict, wanted = ("allowed" if v else "denied" for v in (answer.allowed, assertion.allowed))
            raise CaseFailure(f"the request is {verdict}, want {wanted}{said}")
        for key, pattern in assertion.audit_annotations.items():
            value = answer.audit_annotations.get(key)
            if value is None:
                raise CaseFailure(f"no audit annotation {key!r}: got {dict(answer.audit_annotations)}")
            if not _regex(pattern).search(value):
                raise CaseFailure(f"audit annotation {key!r} is {value!r}, which does not match {pattern!r}")
        if assertion.patched is not None:
            expected = self._documents(os.path.join(directory, assertion.patched))
            if len(expected) != 1:
                raise CaseFailure(f"patched must name a file of one object: {assertion.patched!r}")
            got = answer.patched
            if got is None:
                raise CaseFailure("the mutating policies did not change the object")
            missing = _missing(expected[0].data, got, "")
            if missing:
                raise CaseFailure(f"the object after mutation differs at {missing}")
        asked = assertion.violations is not None or assertion.message is not None
        if asked or not (assertion.allowed is not None or assertion.audit_annotations or assertion.patched):
            gator = Assertion(
                violations=assertion.violations if assertion.violations is not None else "yes",
                message=assertion.message,
            )
            check_assertion(gator, [r.message for r in results])

    def _documents(self, path: str) -> tuple[Document, ...]:
        parsed = self.read(path)
        if parsed.errors:
            raise parsed.errors[0]
        return parsed.documents


def _results(answer: Answer) -> tuple[Violation, ...]:
    """The denial and the warnings, as results (what `violations` counts and verify -v prints)."""
    found = []
    if not answer.allowed:
        found.append(Violation(answer.message, "deny"))
    found += [Violation(w, "warn") for w in answer.warnings]
    return tuple(found)


def _regex(pattern: str) -> Any:
    try:
        return compile_regex(pattern)
    except re2.error as err:
        raise CaseFailure(f"invalid regular expression {pattern!r}") from err


def _missing(expected: Any, got: Any, path: str) -> str:
    """The first path where `got` does not hold `expected` (maps: every key; anything else: equal)."""
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return path or "."
        for key, value in expected.items():
            where = f"{path}.{key}" if path else key
            if key not in got:
                return where
            found = _missing(value, got[key], where)
            if found:
                return found
        return ""
    return "" if expected == got else (path or ".")
