"""The Suite file format (celkeeper.gator.suite), parsed strictly: YAML 1.2, other documents are not suites,
malformed suites name the field."""

from __future__ import annotations

import pytest

from celkeeper.documents import parse_documents
from celkeeper.gator import SuiteError, is_suite, parse_suite
from celkeeper.gator.suite import Assertion

SUITE = """\
kind: Suite
apiVersion: test.gatekeeper.sh/v1alpha1
metadata:
  name: demo
tests:
- name: must-have-owner
  template: template.yaml
  constraint: constraint.yaml
  cases:
  - name: allowed
    object: allowed.yaml
    assertions:
    - violations: no
  - name: disallowed
    object: disallowed.yaml
    inventory: [ns.yaml]
    skip: true
    assertions:
    - violations: yes
      message: owner
    - violations: 2
    - {}
- name: bad-schema
  template: template.yaml
  constraint: bad.yaml
  invalid: true
"""


def _doc(text: str, name: str = "suite.yaml"):
    parsed = parse_documents(text, name)
    assert not parsed.errors, parsed.errors
    return parsed.documents[0]


def test_suite_is_parsed_with_yaml_1_2_yes_and_no_as_strings() -> None:
    document = _doc(SUITE)
    assert is_suite(document)
    suite = parse_suite(document, display="x/suite.yaml")
    assert suite.name == "demo" and suite.display == "x/suite.yaml" and suite.path == "suite.yaml"
    first, second = suite.tests
    assert [c.name for c in first.cases] == ["allowed", "disallowed"]
    assert first.cases[0].assertions == (Assertion(violations="no"),)
    disallowed = first.cases[1]
    assert disallowed.skip and disallowed.inventory == ("ns.yaml",)
    assert disallowed.assertions == (
        Assertion(violations="yes", message="owner"),
        Assertion(violations=2),
        Assertion(violations="yes"),
    )
    assert second.invalid and second.cases == ()


def test_other_documents_are_not_suites() -> None:
    assert not is_suite(_doc("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n"))
    assert not is_suite(_doc("apiVersion: example.com/v1\nkind: Suite\n"))
    assert is_suite(_doc("apiVersion: test.gatekeeper.sh/v1beta1\nkind: Suite\n"))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("tests: {a: 1}", "suite.yaml:3:8: document 1: tests: must be a list, not a map"),
        ("tests:\n- name: [x]", "tests[0].name: must be a string, not a list"),
        (
            "tests:\n- name: t\n  cases:\n  - name: c\n    skip: yes",
            "tests[0].cases[0].skip: must be true or false",
        ),
        (
            "tests:\n- name: t\n  cases:\n  - assertions:\n    - violations: true",
            "tests[0].cases[0].assertions[0].violations: violations must be a non-negative integer, "
            '"yes" or "no"',
        ),
        ("tests:\n- name: t\n  cases:\n  - inventory: [1]", "tests[0].cases[0].inventory[0]: must be a path"),
    ],
)
def test_malformed_suites_name_the_field(text: str, where: str) -> None:
    document = _doc("kind: Suite\napiVersion: test.gatekeeper.sh/v1alpha1\n" + text + "\n")
    with pytest.raises(SuiteError) as caught:
        parse_suite(document)
    assert where in str(caught.value)
