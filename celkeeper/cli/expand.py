"""`celkeeper expand -n FILE|DIR ...`: the objects Gatekeeper's ExpansionTemplates among the files generate
from the objects among them, mutated by the mutators among them, as `gator expand` prints them.

Same flags as gator's (`--filename/-n`, repeatable; `--format/-f yaml|json`; `--outputfile/-o`) and the
same output: every resultant, sorted as gator sorts them and encoded as gator encodes them (the native
library's go-yaml v2, celkeeper.mutation.expand_output), separated by `---` lines. Each object is first
mutated as an original object, then expanded, and every object it generates is mutated as a generated one
before it is expanded in turn (review.decide's expansion, as gator's expander does it), with the
Namespaces among the files known to the mutators (`default` always exists). Mutators are read as gator
reads them: without their CRD's defaults (a ModifySet without `operation` is refused, as gator refuses
it), where the cluster (and `celkeeper mutate`, `test`) read them as the API server stores them.

Inputs are read as kubectl reads them (celkeeper's object reader: a List is its items). Where gator stops
at the first problem (a mutator it refuses, an object it cannot expand), celkeeper reports each one on
stderr, located, prints the resultants of every other object and exits 1. OCI images (`--image`) are not
read.
"""

from __future__ import annotations

import argparse
import sys

from celkeeper.errors import CelkeeperError
from celkeeper.model import JsonObject


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "expand",
        help="print what ExpansionTemplates generate from objects, mutated, as `gator expand` does",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument(
        "-n",
        "--filename",
        action="append",
        default=[],
        metavar="FILE|DIR",
        dest="filenames",
        help="a file or directory of objects, ExpansionTemplates, mutators and Namespaces (repeatable)",
    )
    parser.add_argument("-f", "--format", choices=("yaml", "json"), default="yaml", help="default yaml")
    parser.add_argument("-o", "--outputfile", metavar="FILE", help="write the output to FILE")
    parser.add_argument("-i", "--image", action="append", default=[], help=argparse.SUPPRESS)
    parser.add_argument("-d", "--tempdir", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from celkeeper.cli.inputs import object_documents
    from celkeeper.cli.testcmd import gator_test_namespaces, namespace_name
    from celkeeper.expansion import ExpansionError, Expansions, read_expansion_templates
    from celkeeper.gator.kinds import is_namespace
    from celkeeper.mutation import MutationOptions, build_mutator_set, expand_output
    from celkeeper.review import request_for_object
    from celkeeper.review.decide import expand_request

    if args.image:
        print("celkeeper expand: --image: OCI images are not read; pass files or folders", file=sys.stderr)
        return 2
    if not args.filenames:
        print("celkeeper expand: no input data identified (give --filename)", file=sys.stderr)
        return 1
    documents, errors = object_documents(args.filenames)
    problems: list[CelkeeperError] = list(errors)
    if not documents and not problems:
        print("no input data identified", file=sys.stderr)
        return 1
    templates, template_errors = read_expansion_templates(documents)
    problems.extend(template_errors)
    expansions = Expansions(templates)
    mutators = build_mutator_set(documents, MutationOptions(gator_reading=True))
    problems.extend(mutators.errors)
    known = {d.name: d.data for d in documents if is_namespace(d) and d.name}
    lookup = gator_test_namespaces(known)
    resultants: list[JsonObject] = []
    for document in documents:
        try:
            made = expand_request(
                request_for_object(document.data),
                expansions,
                lambda obj: namespace_name(obj, known),
                mutators,
                lookup,
                mutate_before_expanding=True,
            )
        except (ExpansionError, CelkeeperError) as err:
            problems.append(document.error(ExpansionError, f"expanding resource {document.name}: {err}"))
            continue
        resultants.extend(r.object for r in made)
    text = expand_output(resultants, args.format)
    for problem in problems:
        print(str(problem), file=sys.stderr)
    if args.outputfile:
        print(f"Writing output to file: {args.outputfile}")
        with open(args.outputfile, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text + "\n")
    return 1 if problems else 0
