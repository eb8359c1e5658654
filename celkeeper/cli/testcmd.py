"""`celkeeper test -f FILE|DIR ...`: review the objects among the files against the policies among them.

Like `gator test`: templates and constraints are taken from the given files, every other object is
reviewed (as gator reviews a plain object; an AdmissionReview is reviewed as its request),
Namespaces among the objects are known to namespaceSelector, and every object is synced data for
the templates that read it (`data.inventory`). Each result is printed as
`<apiVersion>/<Kind> <namespace>/<name>: [<constraint>] <message> (<action>)`. The exit code is 1
when a result denies (or a file could not be loaded), else 0. Objects ExpansionTemplates generate from
them (a Deployment's Pod) are reviewed too; their results are the object's (`[Implied by <template>]`).

With --cluster, every document of the files is a manifest checked as the webhook would decide applying
it: the templates, constraints (celkeeper's and Gatekeeper's API groups), ExpansionTemplates and
Namespaces are read from the cluster (get/list only: deploy/ci-rbac.yaml), each manifest is a CREATE (an
UPDATE of the stored object with --against-live, when it exists), Namespaces the manifests create are
taken from them, and a manifest whose namespace exists nowhere is reported, not checked. Lines end with
`(<action>, <operation>)`; the exit code is 1 when the webhook would deny something (or a manifest could
not be checked).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from celkeeper.cli import files
from celkeeper.cli.cluster import add_cluster_options, read_cluster
from celkeeper.cli.options import add_engine_option, add_filename_option, engine_name
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.gator.admission import as_v1_review, checked_request, is_admission_review
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.model import Action, Result

EXAMPLES = """examples:
  celkeeper test -f examples/required-labels/                 policies and objects from one folder
  celkeeper test -f policies/ -f manifests/deploy.yaml -o json
  kubectl get pods -A -o yaml | celkeeper test -f policies/ -f -
  kustomize build overlays/prod | celkeeper test --cluster -f -      manifests against a live cluster
  celkeeper test --cluster --context prod --against-live -f manifests/ -o json
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
    add_cluster_options(
        parser,
        "check the files as manifests against the policies live in the cluster, as the webhook would "
        "decide them (CREATE requests)",
    )
    parser.add_argument(
        "--against-live",
        action="store_true",
        help="with --cluster: a manifest whose object exists is checked as an UPDATE of it "
        "(needs get on its kind)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.against_live and not args.cluster:
        raise CelkeeperError("--against-live needs --cluster")
    if args.cluster:
        return run_cluster(args)
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


def run_cluster(args: argparse.Namespace) -> int:
    """The manifests as the webhook would decide them, on the cluster's policies and Namespaces."""
    from celkeeper.gator.backend import PolicyBackend  # the engine loads only when needed
    from celkeeper.model import EnforcementPoint
    from celkeeper.review import decide, inventory_lookup

    parsed = files.read_all(args.filenames or [files.STDIN])
    problems = [str(e) for e in parsed.errors]
    manifests = list(parsed.documents)
    cluster = read_cluster(args)
    rows: list[tuple[Document, Result, str]] = []
    try:
        backend = PolicyBackend(engine_name(args))
        loaded = backend.build(cluster.documents)
        problems += [f"in the cluster: {e}" for e in loaded.errors]
        # Namespaces the manifests create (or change) are as the manifests say; the others as stored
        namespaces = dict(cluster.namespaces)
        namespaces.update((d.name, d.data) for d in manifests if is_namespace(d) and d.name)
        lookup = inventory_lookup(namespaces, complete=True)
        for document in manifests:
            try:
                request, note = _cluster_request(cluster.reader, document, namespaces, args.against_live)
            except CelkeeperError as err:
                problems.append(str(err.at(file=document.file, document=document.index)))
                continue
            if note:
                problems.append(f"{document.file}: document {document.index}: {note}")
            try:
                decision = decide(request, loaded.policies, lookup, EnforcementPoint.WEBHOOK)
            except CelkeeperError as err:  # e.g. an object an ExpansionTemplate cannot expand
                problems.append(str(err.at(file=document.file, document=document.index)))
                continue
            rows.extend((document, r, request.operation) for r in decision.results)
    finally:
        cluster.reader.close()
    for note in cluster.notes:
        print(f"celkeeper test: note: {note}", file=sys.stderr)
    for problem in problems:
        print(f"celkeeper test: {problem}", file=sys.stderr)
    shown = [(d, r, op) for d, r, op in rows if not args.deny_only or r.action is Action.DENY]
    if args.output == "json":
        print(json.dumps([dict(_json_row(d, r), operation=op) for d, r, op in shown], indent=2))
    else:
        for document, result, operation in shown:
            line = f"{_object_id(document)}: [{result.constraint_name}] {result.message}"
            print(f"{line} ({result.action}, {operation})")
    denied = any(r.action is Action.DENY for _, r, _ in rows)
    return 1 if denied or problems else 0


def _cluster_request(
    reader: Any, document: Document, namespaces: dict[str, Any], against_live: bool
) -> tuple[Any, str]:
    """The request the API server would send the webhook for applying one manifest, and a problem to
    report ("" when none). Raises CelkeeperError when the manifest is not checked at all."""
    from celkeeper.review import admission_review_for, parse_admission_review

    if is_admission_review(document):
        return parse_admission_review(as_v1_review(checked_request(document))), ""
    obj = document.data
    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        raise CelkeeperError("not a Kubernetes object (apiVersion and kind are required)")
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    found = obj.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    served = reader.resource_for(group, kind)
    note = ""
    if served is None:
        note = f"{obj['apiVersion']}/{kind} is not served by the cluster (is its CRD installed?)"
    namespace = str(meta.get("namespace") or "")
    if served is not None and served.namespaced and not namespace:
        namespace = reader.default_namespace  # kubectl's: the context's namespace
    if served is not None and not served.namespaced:
        namespace = ""
    if namespace and namespace not in namespaces:
        raise CelkeeperError(
            f"namespace {namespace} does not exist in the cluster and the manifests do not create it: "
            "not checked"
        )
    old = None
    if against_live and served is not None:
        old = reader.live(group, version, kind, namespace, str(meta.get("name") or ""))
    resource = {"group": group, "version": version, "resource": served.plural if served is not None else ""}
    review = admission_review_for(
        obj,
        operation="UPDATE" if old is not None else "CREATE",
        old_object=old,
        namespace=namespace,
        resource=resource,
    )
    return parse_admission_review(review), note


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
