"""`celkeeper mutate -f FILE|DIR ...`: the objects among the files as Gatekeeper's mutators among them
leave them (gator cannot: Gatekeeper #2847).

Every object is sent as Gatekeeper's mutation webhook receives it from the API server - a CREATE; an
AdmissionReview among the files as its request (an UPDATE with its oldObject, its userInfo) - and
answered by Gatekeeper's own mutation code (review.mutate: its webhook's handler, its mutation System,
the JSONPatch controller-runtime makes), with the Namespaces among the files known to the mutators'
namespaceSelectors (a namespace not among them is one with no labels but kubernetes.io/metadata.name, as
for the other offline tools). Templates, constraints, ExpansionTemplates, mutators and Suites are inputs,
not objects: they are not printed.

Output: every object as the API server would store it after the webhook (`-o yaml`, the default, or
`-o json`: a v1 List), or each object's JSONPatch (`-o patch`: a JSON list of {object, patch}); `-v`
says on stderr which mutators changed each object in which iteration. A mutator Gatekeeper refuses, one
that reads external data, mutators whose schemas conflict (none of them is applied, as in Gatekeeper) and
an object Gatekeeper's webhook would refuse (its error: e.g. a mutation that does not converge) are
reported on stderr, located; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from celkeeper.cli import files
from celkeeper.cli.options import add_filename_option
from celkeeper.cli.output import redirected
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, ReviewError
from celkeeper.gator import is_suite
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.gator.reviews import as_v1_review, checked_request, is_admission_review
from celkeeper.model import JsonObject

FORMATS = ("yaml", "json", "patch")


class MutationRefused(CelkeeperError):
    """An object Gatekeeper's mutation webhook answers with an error (it would refuse the request)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mutate",
        help="apply Gatekeeper's mutators to objects, as Gatekeeper's mutation webhook does",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    add_filename_option(parser, "objects, AdmissionReviews, Namespaces and mutators (repeatable)")
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default="yaml", help="what to print (default yaml)"
    )
    parser.add_argument("--output-file", metavar="FILE", help="write the output to FILE instead of stdout")
    parser.add_argument(
        "--mutation-annotations",
        action="store_true",
        help="annotate mutated objects as Gatekeeper's --mutation-annotations does",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="say which mutators changed each object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from celkeeper.mutation import MutationOptions, build_mutator_set
    from celkeeper.review import inventory_lookup
    from celkeeper.review.mutate import mutate

    parsed = files.read_all(args.filenames or [files.STDIN])
    problems: list[CelkeeperError] = list(parsed.errors)
    documents = parsed.documents
    mutators = build_mutator_set(documents, MutationOptions(annotations=args.mutation_annotations))
    problems.extend(mutators.errors)
    namespaces = {d.name: d.data for d in documents if is_namespace(d) and d.name}
    lookup = inventory_lookup(namespaces, complete=False)
    out: list[tuple[Document, Any]] = []
    for document in documents:
        if is_policy_document(document) or is_suite(document):
            continue
        try:
            review = _review(document)
            mutation = mutate(review, mutators, lookup, explain=args.verbose)
        except ReviewError as err:
            problems.append(err.at(file=document.file, document=document.index))
            continue
        who = _identity(review["request"].get("object") or {})
        if mutation.error:
            problems.append(document.error(MutationRefused, f"{who}: {mutation.error}"))
            continue
        if args.verbose:
            for iteration, names in mutation.applied:
                print(f"celkeeper mutate: {who}: {iteration}: {', '.join(names)}", file=sys.stderr)
        if args.output == "patch":
            out.append((document, {"object": who, "patch": list(mutation.patch)}))
        elif mutation.object is not None:
            out.append((document, mutation.object))
    for problem in problems:
        print(str(problem), file=sys.stderr)
    with redirected(args.output_file):
        sys.stdout.write(_format(args.output, [item for _, item in out]))
    return 1 if problems else 0


def _review(document: Document) -> JsonObject:
    if is_admission_review(document):
        return as_v1_review(checked_request(document))
    from celkeeper.review import admission_review_for

    return admission_review_for(document.data, operation="CREATE")


def _identity(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    namespace = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('apiVersion', '')}/{obj.get('kind', '')} {namespace}{meta.get('name', '')}".lstrip("/")


def _format(output: str, items: list[Any]) -> str:
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2) + "\n"
    if output == "patch":
        return json.dumps(items, indent=2) + "\n"
    import yaml

    return "".join("---\n" + yaml.safe_dump(item, sort_keys=False, allow_unicode=True) for item in items)
