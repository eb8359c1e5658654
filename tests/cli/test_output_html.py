"""The audit's HTML page, rendered by headless Chromium (its scripts draw everything): the totals, the bars
by constraint, namespace and action, and the table with its filter (from the address) show the numbers
worked out here from the violations given; a message that looks like markup stays text; the page loads
nothing from elsewhere."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from celkeeper.audit import ObjectRef, RunResults, Violation
from celkeeper.cli.output_html import audit_page, render
from celkeeper.constraints import Constraint
from celkeeper.documents import Document
from celkeeper.model import Action
from tests.support.browser import Chromium

pytestmark = pytest.mark.browser

HOSTILE = "</script><script>document.title='owned'</script><b>bold</b>"


class Dom(HTMLParser):
    """What the tests read of the rendered DOM: text by id, the action counts, the bars, the table rows."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.by_id: dict[str, str] = {}
        self.actions: dict[str, int] = {}
        self.bars: dict[str, list[tuple[str, int]]] = {}
        self.rows: list[list[str]] = []
        self.title = ""
        self._stack: list[tuple[str, dict[str, str]]] = []
        self._chart = ""
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._text: dict[str, list[str]] = {}
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self._stack.append((tag, found))
        if "id" in found:
            self._text[found["id"]] = []
            if found["id"].startswith("chart-"):
                self._chart = found["id"][len("chart-") :]
                self.bars[self._chart] = []
        if "data-action" in found:
            self.actions[found["data-action"]] = int(found["data-value"])
        if found.get("class") == "bar":
            self.bars[self._chart].append((found["data-label"], int(found["data-value"])))
        if tag == "tr" and any(t == "tbody" for t, _ in self._stack):
            self._row = []
        if tag == "td" and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            open_tag, attrs = self._stack.pop()
            if "id" in attrs:
                self.by_id[attrs["id"]] = "".join(self._text.pop(attrs["id"], []))
            if open_tag == "td" and self._cell is not None and self._row is not None:
                self._row.append("".join(self._cell))
                self._cell = None
            if open_tag == "tr" and self._row is not None:
                self.rows.append(self._row)
                self._row = None
            if open_tag == tag:
                return

    def handle_data(self, data: str) -> None:
        for parts in self._text.values():
            parts.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._stack and self._stack[-1][0] == "title":
            self.title += data


def constraint(kind: str, name: str, action: Action) -> Constraint:
    return Constraint(kind, name, Document.from_object({}), None, {}, action)


def violations() -> tuple[list[Constraint], list[Violation]]:
    constraints = [
        constraint("K8sLabels", "need-owner", Action.DENY),
        constraint("K8sLabels", "want-team", Action.WARN),
        constraint("K8sImages", "no-latest", Action.DRYRUN),
        constraint("K8sImages", "clean", Action.DENY),  # nothing violates it
    ]
    found = []
    for i in range(1500):
        namespace = f"team-{i % 7}"
        found.append(
            Violation(("K8sLabels", "need-owner"), "deny", (), f"pod-{i} lacks owner", pod(namespace, i))
        )
        if i % 3 == 0:
            found.append(
                Violation(("K8sLabels", "want-team"), "warn", (), f"pod-{i} lacks team", pod(namespace, i))
            )
        if i % 5 == 0:
            found.append(
                Violation(("K8sImages", "no-latest"), "dryrun", (), "image tagged latest", pod(namespace, i))
            )
    found.append(
        Violation(
            ("K8sLabels", "need-owner"), "deny", (), HOSTILE, ObjectRef("", "v1", "Namespace", "", "odd")
        )
    )
    return constraints, found


def pod(namespace: str, i: int) -> ObjectRef:
    return ObjectRef("", "v1", "Pod", namespace, f"pod-{i}")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    constraints, found = violations()
    results = RunResults()
    for v in found:
        results.add(v)
    path = tmp_path_factory.mktemp("html") / "audit.html"
    path.write_text(
        render(audit_page(constraints, results, found, 4321, generated="2026-12-05T10:00:00Z")),
        encoding="utf-8",
    )
    return path


def test_the_page_loads_nothing_from_elsewhere(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"""\b(src|href)\s*=|@import|url\(""", text)
    assert set(re.findall(r"https?://[^\s\"']+", text)) <= {"http://www.w3.org/2000/svg"}  # a namespace name
    assert "default-src 'none'" in text


def test_the_totals_and_charts_show_the_audit(chromium: Chromium, page: Path) -> None:
    constraints, found = violations()
    dom = Dom(chromium.dump_dom(page))
    assert dom.title == "celkeeper audit"  # the hostile message did not run
    assert dom.by_id["total-violations"] == str(len(found))
    assert dom.by_id["total-objects"] == "4321"
    assert dom.by_id["total-constraints"] == str(len(constraints))
    assert dom.actions == dict(Counter(v.enforcement_action for v in found))
    by_constraint = Counter(f"{v.constraint[0]}/{v.constraint[1]}" for v in found)
    assert dict(dom.bars["constraint"]) == dict(by_constraint)
    by_namespace = Counter(v.ref.namespace or "(cluster-scoped)" for v in found)
    assert dict(dom.bars["namespace"]) == dict(by_namespace)
    assert [v for _, v in dom.bars["namespace"]] == sorted(by_namespace.values(), reverse=True)
    assert dict(dom.bars["action"]) == dom.actions
    # the table: every violation matches, the first 1,000 are shown; markup in a message is text
    assert dom.by_id["matching"] == str(len(found)) and dom.by_id["shown"] == "1000"
    assert len(dom.rows) == 1000
    assert dom.rows[0] == ["K8sLabels/need-owner", "deny", "v1/Pod", "team-0", "pod-0", "pod-0 lacks owner"]
    assert "owned" not in dom.title


def test_the_filter_in_the_address_narrows_the_table(chromium: Chromium, page: Path) -> None:
    _, found = violations()
    dom = Dom(chromium.dump_dom(page, fragment="q=team-3%20lacks&action=warn"))
    expected = [
        v
        for v in found
        if v.enforcement_action == "warn" and v.ref.namespace == "team-3" and "lacks" in v.message
    ]
    assert dom.by_id["matching"] == str(len(expected)) == dom.by_id["shown"]
    assert sorted(r[4] for r in dom.rows) == sorted(v.ref.name for v in expected)
    hostile = Dom(chromium.dump_dom(page, fragment="q=odd"))
    assert [r[5] for r in hostile.rows] == [HOSTILE]
