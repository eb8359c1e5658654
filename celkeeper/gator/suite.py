"""The Suite file format of `gator verify` (test.gatekeeper.sh/v1alpha1, kind Suite), parsed strictly.

    kind: Suite
    apiVersion: test.gatekeeper.sh/v1alpha1
    skip: false                      # optional: skip the whole suite
    tests:
    - name: ...
      template: template.yaml        # paths are relative to the suite file
      constraint: constraint.yaml
      expansion: expansion.yaml      # optional: ExpansionTemplates; generated objects are reviewed too
      mutators: mutators.yaml        # celkeeper's extension, optional: Gatekeeper mutators for `mutated`
      invalid: false                 # the constraint (or template) is expected to be rejected
      skip: false
      cases:
      - name: ...
        object: object.yaml          # one object, or an AdmissionReview
        inventory: [more.yaml]       # optional: objects known to the review (e.g. Namespaces)
        mutated: expected.yaml       # celkeeper's extension, optional: the object as `mutators` leave it
        skip: false
        assertions:
        - violations: yes | no | N   # default yes
          message: regex             # optional, unanchored (RE2, as Go's regexp)

celkeeper's extension, `admissionPolicyTests` beside `tests` (gator ignores it): Kubernetes' admission
policies, see celkeeper.gator.admissionpolicies.

YAML 1.2 is assumed: `yes`/`no` are strings. Structural problems (a field of the wrong type) are
errors of the suite; a bad `violations` value or message regex fails only its case, as in gator.

`mutators` and `mutated` are celkeeper's extension (gator, which cannot test mutation, ignores fields it
does not know, so a Suite using them still runs under `gator verify`): a case with `mutated` also checks
that Gatekeeper's mutation webhook, with the test's mutators, leaves the case's object (a CREATE; an
AdmissionReview's request as it is) as that file says, byte for byte once parsed. The assertions keep
gator's meaning: they are about the object as given, not as mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celkeeper.documents import Document, field_path
from celkeeper.errors import CelkeeperError
from celkeeper.model import JsonValue

GROUP = "test.gatekeeper.sh"
KIND = "Suite"


class SuiteError(CelkeeperError):
    """A Suite file that cannot be understood (wrong field types, missing names)."""


@dataclass(frozen=True)
class Assertion:
    violations: Any = "yes"  # "yes", "no", a non-negative int; anything else fails the case when run
    message: str | None = None


@dataclass(frozen=True)
class Case:
    name: str
    object: str
    inventory: tuple[str, ...] = ()
    assertions: tuple[Assertion, ...] = ()
    skip: bool = False
    mutated: str = ""  # celkeeper's extension: the object as the test's mutators leave it


@dataclass(frozen=True)
class Test:
    __test__ = False  # not a pytest test class
    name: str
    template: str
    constraint: str
    cases: tuple[Case, ...] = ()
    expansion: str = ""
    invalid: bool = False
    skip: bool = False
    mutators: str = ""  # celkeeper's extension: Gatekeeper mutators the cases' `mutated` checks use


@dataclass(frozen=True)
class Suite:
    path: str  # the file, as found on disk
    display: str  # the path as the user named it (printed in results)
    name: str
    tests: tuple[Test, ...]
    skip: bool = False
    #: celkeeper's extension (gator ignores it): Kubernetes' admission policies, filled in by
    #: gator.admissionpolicies.with_admission_tests and run by the runner's extensions
    admission_tests: tuple[Any, ...] = ()


#: the key of a Suite's admission policy tests (celkeeper's extension)
ADMISSION_TESTS = "admissionPolicyTests"


def has_admission_tests(document: Document) -> bool:
    """Whether a Suite document has the key of admission policy tests (gator.admissionpolicies reads
    them: a Suite without it does not import that module)."""
    return isinstance(document.data, dict) and ADMISSION_TESTS in document.data


def is_suite(document: Document) -> bool:
    """True when the document declares a Suite (any version of test.gatekeeper.sh), as gator decides."""
    return document.group == GROUP and document.kind == KIND


def parse_suite(document: Document, display: str | None = None) -> Suite:
    """Build a Suite from its document; raises SuiteError located at the offending field."""
    data = document.data
    meta = data.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    tests_data = _get(document, data, "tests", list, "", default=[])
    tests = tuple(_parse_test(document, item, field_path("tests", i)) for i, item in enumerate(tests_data))
    return Suite(
        path=document.file,
        display=display if display is not None else document.file,
        name=name if isinstance(name, str) else "",
        tests=tests,
        skip=_get(document, data, "skip", bool, "", default=False),
    )


def _parse_test(document: Document, data: Any, path: str) -> Test:
    if not isinstance(data, dict):
        raise document.error(SuiteError, f"a test must be a map, not {_type_name(data)}", path)
    cases = _get(document, data, "cases", list, path, default=[])
    return Test(
        name=_get(document, data, "name", str, path, default=""),
        template=_get(document, data, "template", str, path, default=""),
        constraint=_get(document, data, "constraint", str, path, default=""),
        expansion=_get(document, data, "expansion", str, path, default=""),
        mutators=_get(document, data, "mutators", str, path, default=""),
        cases=tuple(_parse_case(document, item, f"{path}.cases[{i}]") for i, item in enumerate(cases)),
        invalid=_get(document, data, "invalid", bool, path, default=False),
        skip=_get(document, data, "skip", bool, path, default=False),
    )


def _parse_case(document: Document, data: Any, path: str) -> Case:
    if not isinstance(data, dict):
        raise document.error(SuiteError, f"a case must be a map, not {_type_name(data)}", path)
    inventory = _get(document, data, "inventory", list, path, default=[])
    for i, item in enumerate(inventory):
        if not isinstance(item, str):
            raise document.error(
                SuiteError, f"must be a path (string), not {_type_name(item)}", f"{path}.inventory[{i}]"
            )
    assertions = _get(document, data, "assertions", list, path, default=[])
    return Case(
        name=_get(document, data, "name", str, path, default=""),
        object=_get(document, data, "object", str, path, default=""),
        inventory=tuple(inventory),
        assertions=tuple(
            _parse_assertion(document, item, f"{path}.assertions[{i}]") for i, item in enumerate(assertions)
        ),
        skip=_get(document, data, "skip", bool, path, default=False),
        mutated=_get(document, data, "mutated", str, path, default=""),
    )


def _parse_assertion(document: Document, data: Any, path: str) -> Assertion:
    if not isinstance(data, dict):
        raise document.error(SuiteError, f"an assertion must be a map, not {_type_name(data)}", path)
    violations = data.get("violations", "yes")
    if violations is None:
        violations = "yes"
    if isinstance(violations, bool) or not isinstance(violations, int | str):
        # gator reads an int-or-string: a boolean or list cannot even be parsed
        raise document.error(
            SuiteError,
            f'violations must be a non-negative integer, "yes" or "no", not {_type_name(violations)}',
            f"{path}.violations",
        )
    message = _get(document, data, "message", str, path, default=None)
    return Assertion(violations=violations, message=message)


def _get(
    document: Document, data: Mapping[str, JsonValue], key: str, kind: type, path: str, *, default: Any
) -> Any:
    value = data.get(key, default)
    if value is None:
        return default
    if kind is int and isinstance(value, bool):
        value = object()  # a boolean is not an integer here
    if not isinstance(value, kind):
        where = f"{path}.{key}" if path else key
        raise document.error(SuiteError, f"must be {_kind_name(kind)}, not {_type_name(value)}", where)
    return value


def _kind_name(kind: type) -> str:
    return {str: "a string", bool: "true or false", list: "a list", int: "an integer", dict: "a map"}.get(
        kind, kind.__name__
    )


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__
