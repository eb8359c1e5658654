"""An audit as one self-contained HTML page (`celkeeper audit ... -o html FILE`): no external asset, no
network.

    text = render(audit_page(constraints, results, violations, audited, generated="2026-12-05T10:00:00Z"))

The page holds its data as JSON (a `<script type="application/json">` block) and a script that draws,
when the page is opened: the totals (violations, objects audited, constraints, violations per
enforcement action), bar charts of the violations by constraint, by namespace and by action (SVG, the 15
largest and the rest together), and a table of every violation, filtered as one types (words matched
in any column) or by action; the first 1,000 matching rows are shown, with how many match. The filter
can be given in the address (`page.html#q=prod&action=deny`), so a filtered view can be linked.

Elements the tests (and scripts) read: `#total-violations`, `#total-objects`, `#total-constraints`,
`#by-action [data-action]` (each action's count), the bars' `data-label` and `data-value`, `#matching`
(rows matching the filter) and the table `#violations` (its rows).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from celkeeper.audit import RunResults, Violation
from celkeeper.constraints import Constraint


@dataclass(frozen=True)
class PageRow:
    """One violation in the table."""

    constraint: str  # <kind>/<name>
    action: str  # deny, warn, dryrun; a scoped constraint's: scoped(deny,warn)
    kind: str  # the object's group/version/kind (apiVersion/Kind)
    namespace: str
    name: str
    message: str


@dataclass(frozen=True)
class PageConstraint:
    constraint: str  # <kind>/<name>
    action: str
    total: int


@dataclass(frozen=True)
class AuditPage:
    title: str
    generated: str  # when the audit ran (RFC 3339)
    objects: int  # objects audited
    constraints: tuple[PageConstraint, ...]
    rows: tuple[PageRow, ...]


def _action(violation: Violation) -> str:
    if violation.enforcement_actions:
        return f"{violation.enforcement_action}({','.join(violation.enforcement_actions)})"
    return violation.enforcement_action


def audit_page(
    constraints: Sequence[Constraint],
    results: RunResults,
    violations: Sequence[Violation],
    audited: int,
    *,
    generated: str,
    title: str = "celkeeper audit",
    extra: Sequence[PageConstraint] = (),
) -> AuditPage:
    """The page of an offline audit (cli/audit.py's results); `extra`: more "constraints" with their totals
    (Kubernetes' admission policy bindings)."""
    listed = []
    for constraint in sorted(constraints, key=lambda c: (c.kind, c.name)):
        found = results.constraints.get((constraint.kind, constraint.name))
        listed.append(
            PageConstraint(
                f"{constraint.kind}/{constraint.name}",
                str(constraint.enforcement_action),
                found.total if found else 0,
            )
        )
    rows = tuple(
        PageRow(
            constraint=f"{v.constraint[0]}/{v.constraint[1]}",
            action=_action(v),
            kind=f"{v.ref.api_version}/{v.ref.kind}",
            namespace=v.ref.namespace,
            name=v.ref.name,
            message=v.message,
        )
        for v in violations
    )
    return AuditPage(title, generated, audited, (*listed, *extra), rows)


def _data(page: AuditPage) -> str:
    """The page's data as JSON safe inside a script element (no `<` at all: no `</script>`)."""
    doc = {
        "title": page.title,
        "generated": page.generated,
        "objects": page.objects,
        "constraints": [asdict(c) for c in page.constraints],
        # rows as arrays (constraint, action, kind, namespace, name, message): a third of the size
        "rows": [[r.constraint, r.action, r.kind, r.namespace, r.name, r.message] for r in page.rows],
    }
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def render(page: AuditPage) -> str:
    return (
        _TEMPLATE.replace("@TITLE@", html.escape(page.title))
        .replace("@GENERATED@", html.escape(page.generated))
        .replace("@DATA@", _data(page))
    )


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>@TITLE@</title>
<style>
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1f2328; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.sub { color: #59636e; margin-bottom: 16px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #d1d9e0; border-radius: 6px; padding: 10px 16px; min-width: 120px; }
.card .n { font-size: 24px; font-weight: 600; } .card .l { color: #59636e; }
#by-action { display: flex; gap: 12px; flex-wrap: wrap; margin-top: 12px; }
#by-action span { border-radius: 12px; padding: 2px 10px; background: #eef1f4; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 24px; }
svg text { font-size: 12px; fill: #1f2328; }
.controls { display: flex; gap: 8px; margin: 8px 0; }
.controls input { flex: 1; padding: 4px 8px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #d1d9e0; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.m { white-space: pre-wrap; word-break: break-word; }
.a-deny { color: #cf222e; } .a-warn { color: #9a6700; } .a-dryrun { color: #0969da; }
</style>
</head>
<body>
<h1>@TITLE@</h1>
<div class="sub">audited @GENERATED@</div>
<noscript>This page draws its charts and table with JavaScript.</noscript>
<div class="cards">
  <div class="card"><div class="n" id="total-violations"></div><div class="l">violations</div></div>
  <div class="card"><div class="n" id="total-objects"></div><div class="l">objects audited</div></div>
  <div class="card"><div class="n" id="total-constraints"></div><div class="l">constraints</div></div>
</div>
<div id="by-action"></div>
<div class="charts">
  <section><h2>By constraint</h2><div id="chart-constraint"></div></section>
  <section><h2>By namespace</h2><div id="chart-namespace"></div></section>
  <section><h2>By enforcement action</h2><div id="chart-action"></div></section>
</div>
<h2>Violations</h2>
<div class="controls">
  <input id="filter" type="search" placeholder="filter: words in any column">
  <select id="action"><option value="">every action</option></select>
</div>
<div class="sub"><span id="matching"></span> matching; <span id="shown"></span> shown</div>
<table id="violations">
<thead><tr><th>constraint</th><th>action</th><th>kind</th><th>namespace</th><th>name</th><th>message</th></tr></thead>
<tbody></tbody>
</table>
<script type="application/json" id="data">@DATA@</script>
<script>
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  var rows = data.rows, SHOWN = 1000, TOP = 15, SVG = "http://www.w3.org/2000/svg";
  function el(tag, attrs, text) {
    var node = tag === "svg" || tag === "rect" || tag === "text" || tag === "g"
      ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function count(index) {
    var counts = {};
    rows.forEach(function (r) { var k = r[index] || "(cluster-scoped)"; counts[k] = (counts[k] || 0) + 1; });
    return counts;
  }
  function baseAction(a) { return a.split("(")[0]; }
  function chart(id, counts) {
    var entries = Object.keys(counts).map(function (k) { return [k, counts[k]]; });
    entries.sort(function (a, b) { return b[1] - a[1] || (a[0] < b[0] ? -1 : 1); });
    if (entries.length > TOP) {
      var rest = entries.slice(TOP - 1).reduce(function (s, e) { return s + e[1]; }, 0);
      entries = entries.slice(0, TOP - 1).concat([["(" + (entries.length - TOP + 1) + " others)", rest]]);
    }
    var box = document.getElementById(id);
    if (!entries.length) { box.textContent = "no violations"; return; }
    var max = entries[0][1], bar = 22, label = 220, width = 560;
    var height = entries.length * bar + 4;
    var svg = el("svg", {width: "100%", viewBox: "0 0 " + width + " " + height, role: "img"});
    entries.forEach(function (e, i) {
      var g = el("g", {"class": "bar", "data-label": e[0], "data-value": e[1]});
      var w = Math.max(2, Math.round((width - label - 60) * e[1] / max));
      g.appendChild(el("text", {x: 0, y: i * bar + 15}, e[0].length > 34 ? e[0].slice(0, 33) + "…" : e[0]));
      g.appendChild(el("rect", {x: label, y: i * bar + 3, width: w, height: bar - 6, fill: "#0969da"}));
      g.appendChild(el("text", {x: label + w + 6, y: i * bar + 15}, String(e[1])));
      svg.appendChild(g);
    });
    box.appendChild(svg);
  }
  document.getElementById("total-violations").textContent = rows.length;
  document.getElementById("total-objects").textContent = data.objects;
  document.getElementById("total-constraints").textContent = data.constraints.length;
  var actions = {};
  rows.forEach(function (r) { var a = baseAction(r[1]); actions[a] = (actions[a] || 0) + 1; });
  var byAction = document.getElementById("by-action"), select = document.getElementById("action");
  Object.keys(actions).sort().forEach(function (a) {
    byAction.appendChild(el("span", {"data-action": a, "data-value": actions[a], "class": "a-" + a},
                            a + ": " + actions[a]));
    select.appendChild(el("option", {value: a}, a));
  });
  chart("chart-constraint", count(0));
  chart("chart-namespace", count(3));
  chart("chart-action", actions);

  var filter = document.getElementById("filter"), body = document.querySelector("#violations tbody");
  var lower = rows.map(function (r) { return r.join(" ").toLowerCase(); });
  function show() {
    var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean), action = select.value;
    var matching = 0, fragment = document.createDocumentFragment();
    rows.forEach(function (r, i) {
      if (action && baseAction(r[1]) !== action) return;
      for (var w = 0; w < words.length; w++) if (lower[i].indexOf(words[w]) < 0) return;
      matching++;
      if (matching > SHOWN) return;
      var tr = el("tr");
      r.forEach(function (cell, c) {
        var attrs = c === 5 ? {"class": "m"} : c === 1 ? {"class": "a-" + baseAction(cell)} : {};
        tr.appendChild(el("td", attrs, cell));
      });
      fragment.appendChild(tr);
    });
    body.replaceChildren(fragment);
    document.getElementById("matching").textContent = matching;
    document.getElementById("shown").textContent = Math.min(matching, SHOWN);
    var hash = [];
    if (filter.value) hash.push("q=" + encodeURIComponent(filter.value));
    if (action) hash.push("action=" + encodeURIComponent(action));
    if (location.hash.slice(1) !== hash.join("&")) {
      try { history.replaceState(null, "", "#" + hash.join("&")); } catch (e) { /* file: may refuse */ }
    }
  }
  location.hash.slice(1).split("&").forEach(function (part) {
    var kv = part.split("="), value = decodeURIComponent(kv[1] || "");
    if (kv[0] === "q") filter.value = value;
    if (kv[0] === "action") select.value = value;
  });
  filter.addEventListener("input", show);
  select.addEventListener("change", show);
  show();
})();
</script>
</body>
</html>
"""
