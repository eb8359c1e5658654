"""`celkeeper test -f FILE|DIR ...`: review the objects among the files against the policies among them.

Like `gator test`: templates and constraints are taken from the given files, every other object is
reviewed (as gator reviews a plain object; an AdmissionReview is reviewed as its request),
Namespaces among the objects are known to namespaceSelector, and every object is synced data for
the templates that read it (`data.inventory`). Each result is printed as
`<apiVersion>/<Kind> <namespace>/<name>: [<constraint>] <message> (<action>)`. The exit code is 1
when a result denies (or a file could not be loaded), else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from celkeeper.cli import files
from celkeeper.cli.options import add_engine_option, add_filename_option, engine_name
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.gator.admission import is_admission_review
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.model import Action, Result

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


def run(args: argparse.Namespace) -> int:
    paths = args.filenames or [files.STDIN]
    parsed = files.read_all(paths)
    problems = [str(e) for e in parsed.errors]
    from celkeeper.gator.backend import PolicyBackend  # the engine loads only when needed

    backend = PolicyBackend(engine_name(args))
    loaded = backend.build([d for d in parsed.documents if is_policy_document(d)])
    problems.extend(str(e) for e in loaded.errors)
    objects = [d for d in parsed.documents if not is_policy_document(d)]
    namespaces = {d.name: d.data for d in objects if is_namespace(d)}
    rows: list[tuple[Document, Result]] = []
    # like gator test, every object is also synced data (for templates that read it)
    with backend.inventory(loaded.policies, objects) as data:
        for document in objects:
            try:
                decision = backend.decide(loaded.policies, document, namespaces, data)
            except CelkeeperError as err:  # a malformed object or review: reported, the rest goes on
                problems.append(str(err.at(file=document.file, document=document.index)))
                continue
            rows.extend((document, r) for r in decision.results)
    for problem in problems:
        print(f"celkeeper test: {problem}", file=sys.stderr)
    shown = [(d, r) for d, r in rows if not args.deny_only or r.action is Action.DENY]
    if args.output == "json":
        print(json.dumps([_json_row(d, r) for d, r in shown], indent=2))
    else:
        for document, result in shown:
            print(f"{_object_id(document)}: [{result.constraint_name}] {result.message} ({result.action})")
    denied = any(r.action is Action.DENY for _, r in rows)
    return 1 if denied or problems else 0


def _reviewed(document: Document) -> dict[str, Any]:
    """The object a row is about: the object itself, or an AdmissionReview's object/oldObject."""
    if is_admission_review(document):
        request = document.data.get("request") or {}
        obj = request.get("object") or request.get("oldObject") or {}
        return obj if isinstance(obj, dict) else {}
    return document.data if isinstance(document.data, dict) else {}


def _identity(document: Document) -> tuple[str, str, str, str]:
    obj = _reviewed(document)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace", "") or ""),
        str(meta.get("name", "") or ""),
    )


def _object_id(document: Document) -> str:
    api_version, kind, namespace, name = _identity(document)
    return f"{api_version}/{kind} {namespace}/{name}" if namespace else f"{api_version}/{kind} {name}"


def _json_row(document: Document, result: Result) -> dict[str, Any]:
    api_version, kind, namespace, name = _identity(document)
    return {
        "object": {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name},
        "file": document.file,
        "document": document.index,
        "constraint": {"kind": result.constraint_kind, "name": result.constraint_name},
        "template": result.template,
        "enforcementAction": str(result.action),
        "message": result.message,
    }
