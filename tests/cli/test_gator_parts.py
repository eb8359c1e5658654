"""The parts of the Suite runner that need no policy engine: parsing, filters, assertions, output."""

from __future__ import annotations

import pytest

from celkeeper.documents import parse_documents
from celkeeper.expansion import (
    ExpansionError,
    Expansions,
    ExpansionTemplate,
    is_mutator,
    parse_expansion_template,
)
from celkeeper.gator import Filter, FilterError, SuiteError, is_suite, parse_suite, render, summarize
from celkeeper.gator.results import CaseResult, SuiteResult, TestResult
from celkeeper.gator.runner import CaseFailure, check_assertion
from celkeeper.gator.suite import Assertion, Case, Test

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


def _test(name: str, *cases: str) -> Test:
    return Test(name=name, template="t", constraint="c", cases=tuple(Case(name=c, object="o") for c in cases))


def test_filter_semantics_follow_gator() -> None:
    labels = _test("require-foo-label", "missing-label", "with-label")
    other = _test("forbid-foo", "empty-object")
    everything = Filter.parse("")
    assert everything.matches_test(labels) and everything.matches_case("a", "b")
    either = Filter.parse("missing")
    assert either.matches_test(labels)  # through its case
    assert not either.matches_test(other)
    assert either.matches_case("require-foo-label", "missing-label")
    assert not either.matches_case("require-foo-label", "with-label")
    assert either.matches_case("missing-things", "anything")  # through the test name
    both = Filter.parse("^require//label$")
    assert both.matches_test(labels) and not both.matches_test(other)
    assert both.matches_case("require-foo-label", "with-label")
    assert not both.matches_case("require-foo-label", "missing-label-x")
    cases_only = Filter.parse("//empty")
    assert cases_only.matches_test(other) and cases_only.matches_case("forbid-foo", "empty-object")
    assert not cases_only.matches_case("forbid-foo", "full")


@pytest.mark.parametrize("bad", ["a//b//c", "(", "x//[z"])
def test_bad_filters_are_errors(bad: str) -> None:
    with pytest.raises(FilterError):
        Filter.parse(bad)


@pytest.mark.parametrize(
    ("violations", "message", "messages", "ok"),
    [
        ("yes", None, ["a"], True),
        ("yes", None, [], False),
        ("no", None, [], True),
        ("no", None, ["a"], False),
        (2, None, ["a", "b"], True),
        (1, None, ["a", "b"], False),
        (0, None, [], True),
        ("yes", "own", ["you need an owner"], True),  # unanchored
        ("yes", "^own", ["you need an owner"], False),
        (1, "b.", ["ab", "bc", "bd"], False),
        (2, "b.", ["ab", "bc", "bd"], True),
        ("no", "zzz", ["a"], True),
    ],
)
def test_assertions_count_matching_messages(
    violations: object, message: str | None, messages: list[str], ok: bool
) -> None:
    assertion = Assertion(violations=violations, message=message)
    if ok:
        check_assertion(assertion, messages)
    else:
        with pytest.raises(CaseFailure, match="unexpected number of violations"):
            check_assertion(assertion, messages)


def test_assertion_errors_read_like_gators() -> None:
    with pytest.raises(CaseFailure) as caught:
        check_assertion(Assertion(violations="yes", message="own"), ["bad image"])
    assert str(caught.value) == (
        'unexpected number of violations: got 0 violations containing "own" but want at least 1: '
        "got messages [bad image]"
    )
    for bad in ("maybe", -1, "1"):
        with pytest.raises(CaseFailure, match='must be a nonnegative integer, "yes", or "no"'):
            check_assertion(Assertion(violations=bad), [])
    with pytest.raises(CaseFailure, match="message contains invalid regular expression"):
        check_assertion(Assertion(message="(unclosed"), ["x"])


def _results() -> list[SuiteResult]:
    passing = SuiteResult(
        path="a/suite.yaml",
        runtime=0.0123,
        tests=(
            TestResult(
                name="t1",
                runtime=0.01,
                cases=(CaseResult(name="c1", runtime=0.002), CaseResult(name="c2", skipped=True)),
            ),
            TestResult(name="t2", skipped=True, cases=(CaseResult(name="x", skipped=True),)),
        ),
    )
    failing = SuiteResult(
        path="b/suite.yaml",
        runtime=0.5,
        tests=(
            TestResult(
                name="t3",
                runtime=0.25,
                cases=(CaseResult(name="c3", error="boom\nsecond line", runtime=0.1),),
            ),
            TestResult(name="t4", error="adding template: bad", runtime=0.001),
            TestResult(name="t5", expected_invalid=True, runtime=0.001),
        ),
    )
    broken = SuiteResult(path="c/suite.yaml", error="c/suite.yaml:3:8: document 1: tests: must be a list")
    return [passing, failing, broken]


def test_go_test_output_plain() -> None:
    assert render(_results()) == (
        "ok\ta/suite.yaml\t0.012s\n"
        "    --- FAIL: c3\t(0.100s)\n"
        "        boom\n"
        "        second line\n"
        "--- FAIL: t3\t(0.250s)\n"
        "--- FAIL: t4\t(0.001s)\n"
        "  adding template: bad\n"
        "FAIL\tb/suite.yaml\t0.500s\n"
        "FAIL\tc/suite.yaml\t0.000s\n"
        "  c/suite.yaml:3:8: document 1: tests: must be a list\n"
        "FAIL\n"
    )


def test_go_test_output_verbose() -> None:
    text = render(_results()[:1], verbose=True)
    assert text == (
        "=== RUN   t1\n"
        "    === RUN   c1\n"
        "    --- PASS: c1\t(0.002s)\n"
        "    === SKIP  c2\n"
        "--- PASS: t1\t(0.010s)\n"
        "=== SKIP  t2\n"
        "ok\ta/suite.yaml\t0.012s\n"
        "PASS\n"
    )


def test_summary_counts_cases_tests_and_broken_suites() -> None:
    summary = summarize(_results())
    # passed: c1, t5 (invalid as expected); failed: c3, t4, broken suite; skipped: c2, t2's case
    assert (summary.passed, summary.failed, summary.skipped) == (2, 3, 2)
    assert summary.line() == "2 passed, 3 failed, 2 skipped"
    assert not summary.ok
    clean = summarize(_results()[:1])
    assert clean.ok and clean.line() == "1 passed, 0 failed, 2 skipped"
    assert not summarize([], errors=["x.yaml: cannot read"]).ok


# -- ExpansionTemplates (compared with gator in tests/gator/suites/expansion) -------------------------


def _expansion(
    name: str, applies: str, generates: str, source: str = "spec.template", extra: str = ""
) -> str:
    group, _, rest = applies.partition("/")
    version, _, kind = rest.partition("/")
    g_group, _, g_rest = generates.partition("/")
    g_version, _, g_kind = g_rest.partition("/")
    return f"""\
apiVersion: expansion.gatekeeper.sh/v1alpha1
kind: ExpansionTemplate
metadata: {{name: {name}}}
spec:
  applyTo: [{{groups: ["{group}"], versions: ["{version}"], kinds: ["{kind}"]}}]
  templateSource: {source}
  generatedGVK: {{group: "{g_group}", version: "{g_version}", kind: "{g_kind}"}}
{extra}"""


def _template(text: str) -> ExpansionTemplate:
    (document,) = parse_documents(text, "e.yaml").documents
    template, errors = parse_expansion_template(document)
    if errors:
        raise errors[0]
    assert template is not None
    return template


def test_expansion_generates_named_owned_objects_in_the_parents_namespace() -> None:
    expander = Expansions([_template(_expansion("deploy", "apps/v1/Deployment", "/v1/Pod"))])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "Web", "namespace": "shop"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
    }
    (resultant,) = expander.expand(deployment, None)
    assert resultant.template == "deploy" and resultant.enforcement_action == ""
    assert resultant.object == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"app": "web"},
            "namespace": "shop",
            "name": "web-pod",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "Web", "uid": ""}],
        },
        "spec": {"containers": []},
    }
    assert deployment["spec"]["template"]["metadata"] == {"labels": {"app": "web"}}  # the parent is unchanged
    assert expander.expand({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, None) == []
    with pytest.raises(ExpansionError, match=r'could not find source field "spec\.template" in resource x'):
        expander.expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}, None)


def test_expansion_templates_are_checked_as_gatekeeper_checks_them() -> None:
    with pytest.raises(ExpansionError, match="has empty source field"):
        _template(_expansion("e", "apps/v1/Deployment", "/v1/Pod", source='""'))
    with pytest.raises(ExpansionError, match="but also applies to that same GVK"):
        _template(_expansion("e", "apps/v1/Deployment", "apps/v1/Deployment"))
    cycle = [
        _template(_expansion("a-to-b", "x/v1/A", "x/v1/B")),
        _template(_expansion("b-to-a", "x/v1/B", "x/v1/A")),
        _template(_expansion("b-to-c", "x/v1/B", "x/v1/C", extra="  enforcementAction: warn\n")),
    ]
    expander = Expansions(cycle)  # templates on a cycle are left out, as Gatekeeper's database does
    parent = {"apiVersion": "x/v1", "kind": "B", "metadata": {"name": "b"}, "spec": {"template": {}}}
    found = expander.expand(parent, None)
    assert [(r.template, r.object["kind"], r.enforcement_action) for r in found] == [("b-to-c", "C", "warn")]
    assert sorted(expander.cycles) == ["a-to-b", "b-to-a"]


def test_mutators_are_told_apart_from_other_documents() -> None:
    """Gatekeeper's mutators, which `celkeeper test` refuses (celkeeper has no mutation)."""
    documents = parse_documents(
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Assign\nmetadata: {name: a}\n---\n"
        "apiVersion: mutations.gatekeeper.sh/v1alpha1\nkind: AssignImage\nmetadata: {name: i}\n---\n"
        "apiVersion: expansion.gatekeeper.sh/v1alpha1\nkind: ExpansionTemplate\nmetadata: {name: e}\n---\n"
        "apiVersion: mutations.gatekeeper.sh/v1\nkind: Other\nmetadata: {name: o}\n",
        "m.yaml",
    ).documents
    assert [is_mutator(d) for d in documents] == [True, True, False, False]
