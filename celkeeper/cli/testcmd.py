"""`celkeeper test -f FILE|DIR ...`: review the objects among the files against the policies among them.

As `gator test` does: templates and constraints are taken from the given files, and every document
(templates and constraints included) is reviewed as a plain object, with the Namespaces among the
files known to matching (a cluster-scoped object has an empty one, `default` always exists).
Every object that is not a policy is also synced data for the templates that read it
(`data.inventory`). ExpansionTemplates among the files expand objects, and the generated objects are
reviewed too (`[Implied by <template>] <message>`). One difference, on purpose: an AdmissionReview is
reviewed as its request (operation, oldObject, userInfo), where gator would review the AdmissionReview
object.

Output as gator prints it: one line per result, `<apiVersion>/<Kind> [<namespace>/]<name>:
["<constraint>"] Message: "<message>"`, or with `-o json` gator's JSON (target, msg, constraint,
enforcementAction, scopedActions, violatingObject, trace). The exit code is 1 when a result
denies (a `deny` action, or `scoped` with deny) or a file could not be loaded, else 0.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping
from typing import Any

from celkeeper.cel.k8slib.gostrings import go_quote
from celkeeper.cli import files
from celkeeper.cli.options import add_engine_option, add_filename_option, engine_name
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, is_warning
from celkeeper.gator.admission import is_admission_review
from celkeeper.gator.expansion import Expander, is_expansion_template, is_mutator, parse_expansion_template
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.gator.results import Violation

TARGET = "admission.k8s.gatekeeper.sh"
EXAMPLES = """examples:
  celkeeper test -f examples/required-labels/                 policies and objects from one folder
  celkeeper test -f policies/ -f manifests/deploy.yaml -o json
  kubectl get pods -A -o yaml | celkeeper test -f policies/ -f -
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "test",
        help="review objects against the templates and constraints among the given files (gator test)",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_filename_option(
        parser,
        "a file or folder (recursively) of templates, constraints and objects; - for stdin; repeatable",
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    parser.add_argument("--deny-only", action="store_true", help="print only results that deny")
    add_engine_option(parser)
    parser.set_defaults(func=run)


Row = tuple[Document, Mapping[str, Any] | None, Violation]  # reviewed document, its constraint, result


def run(args: argparse.Namespace) -> int:
    paths = args.filenames or [files.STDIN]
    parsed = files.read_all(paths)
    problems = [str(e) for e in parsed.errors]
    from celkeeper.gator.backend import PolicyBackend  # the engine loads only when needed

    backend = PolicyBackend(engine_name(args))
    loaded = backend.build([d for d in parsed.documents if is_policy_document(d)])
    # what Gatekeeper loads (compile problems, ignored keys) is no problem here, as for gator test:
    # lint and verify -v show those warnings
    problems.extend(str(e) for e in loaded.errors if not is_warning(e))
    documents = list(parsed.documents)
    namespaces = {d.name: d.data for d in documents if is_namespace(d) and d.name}
    expander, expansion_problems = _expander(documents)
    problems.extend(expansion_problems)
    constraints = {(d.kind, d.name): d.data for d in documents if is_policy_document(d)}
    objects = [d for d in documents if not is_policy_document(d)]
    rows: list[Row] = []
    # like gator test, every object is also synced data (for templates that read it)
    with backend.inventory(loaded.policies, objects) as data:
        for document in documents:
            try:
                decision = backend.decide(loaded.policies, document, gator_test_namespaces(namespaces), data)
                found = backend.violations(loaded.policies, decision)
                if expander and not is_admission_review(document):
                    found += backend.expanded(
                        loaded.policies,
                        document.data,
                        expander,
                        gator_test_namespaces(namespaces),
                        _namespace_name(document.data, namespaces),
                        data=data,
                    )
            except CelkeeperError as err:  # a malformed object or review: reported, the rest goes on
                problems.append(str(err))
                continue
            rows.extend((document, constraints.get(v.constraint), v) for v in found)
    for problem in problems:
        print(f"celkeeper test: {problem}", file=sys.stderr)
    rows.sort(key=lambda r: (r[2].enforcement_action, r[2].message))  # as gator orders its results
    shown = [row for row in rows if not args.deny_only or denies(row[2])]
    if args.output == "json":
        print(json.dumps([_json_row(*row) for row in shown], indent=4, ensure_ascii=False))
    else:
        for document, constraint, violation in shown:
            name = str(_meta(constraint).get("name", "")) if constraint is not None else ""
            message = go_quote(violation.message)
            print(f"{_object_id(_reviewed(document))}: [{go_quote(name)}] Message: {message}")
    return 1 if any(denies(v) for _, _, v in rows) or problems else 0


def denies(violation: Violation) -> bool:
    return violation.enforcement_action == "deny" or "deny" in violation.scoped_actions


def gator_test_namespaces(known: Mapping[str, Mapping[str, Any]]) -> Any:
    """gator test's Namespace of an object (pkg/gator/expand NamespaceForResource): the Namespace
    among the inputs; an empty one for a cluster-scoped object; `default` always exists."""

    def lookup(name: str) -> Mapping[str, Any] | None:
        if not name:
            return {}
        found = known.get(name)
        if found is None and name == "default":
            return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        return found

    return lookup


def _namespace_name(obj: Mapping[str, Any], known: Mapping[str, Mapping[str, Any]]) -> str | None:
    namespace = str(_meta(obj).get("namespace") or "")
    if namespace in {"", "default"} or namespace in known:
        return namespace
    return None


def _expander(documents: list[Document]) -> tuple[Expander | None, list[str]]:
    problems = [
        str(d.error(CelkeeperError, "mutators are not supported: objects are reviewed unmutated", ""))
        for d in documents
        if is_mutator(d)
    ]
    templates = []
    for document in documents:
        if is_expansion_template(document):
            try:
                templates.append(parse_expansion_template(document))
            except CelkeeperError as err:
                problems.append(str(err))
    return (Expander(templates) if templates else None), problems


def _reviewed(document: Document) -> Mapping[str, Any]:
    """The object a row is about: the object itself, or an AdmissionReview's object/oldObject."""
    if is_admission_review(document):
        request = document.data.get("request") or {}
        obj = request.get("object") or request.get("oldObject") or {}
        return obj if isinstance(obj, dict) else {}
    return document.data if isinstance(document.data, dict) else {}


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _object_id(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    head = f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}"
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{head} {namespace}/{name}" if namespace else f"{head} {name}"


def _json_row(
    document: Document, constraint: Mapping[str, Any] | None, violation: Violation
) -> dict[str, Any]:
    row: dict[str, Any] = {"target": TARGET, "msg": violation.message}
    if constraint is not None:
        shown = copy.deepcopy(dict(constraint))
        spec = shown.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("enforcementAction", "deny")  # the frameworks client's default, as gator shows
        row["constraint"] = shown
    row["enforcementAction"] = violation.enforcement_action
    if violation.scoped_actions:
        row["scopedActions"] = list(violation.scoped_actions)
    row["violatingObject"] = _reviewed(document)
    row["trace"] = None
    return row
