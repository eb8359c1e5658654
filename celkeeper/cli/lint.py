"""`celkeeper lint PATH...`: load every file and report every problem, one line each.

Checks YAML/JSON syntax, documents without apiVersion/kind, ConstraintTemplates (structure, names,
every CEL expression compiled, with line:col in the file), constraints (kind known, parameters
against the template's schema, enforcement actions), templates with `generateVAP: true` that cannot
become a ValidatingAdmissionPolicy and constraints scoped to vap.k8s.io that cannot get a binding
(the reasons `celkeeper vap` gives), Gatekeeper's mutators (what the API server and Gatekeeper refuse,
located; external data, which celkeeper cannot call; mutators whose schemas conflict, each of them: none
is applied) and Suite files (structure). Problems go to
stdout as `file:line:col: document N: field: message`; the exit code is 1 when there is any.

A validation, variable or match condition that does not compile is a problem: Gatekeeper loads the
template, and the expression fails every request it applies to, so the policy does not do what it
says. What Gatekeeper loads and is likely a mistake is a *warning* (`file:line:col: document N: field:
warning: message`): a messageExpression that does not compile (the validation's `message` is used
instead), a key Gatekeeper ignores (such as the plural `matchConditions`), a template without
validations. Warnings do not change the exit code unless --strict is given. Kustomization files
(kustomization.yaml, or documents of kustomize.config.k8s.io) are not policy documents and are skipped.
"""

from __future__ import annotations

import argparse
import sys

from celkeeper.cli import files
from celkeeper.cli.options import add_engine_option, engine_name
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError, DocumentError, is_compile_problem, is_warning
from celkeeper.gator import SuiteError, is_suite, parse_suite
from celkeeper.gator.kinds import is_constraint_document, is_policy_document, is_template_document
from celkeeper.mutation import is_mutator
from celkeeper.settings import EngineName

KUSTOMIZE_GROUP = "kustomize.config.k8s.io"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="check templates, constraints and suites; report every problem",
        description=__doc__.splitlines()[0].split(": ", 1)[1],
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or folders (searched recursively)")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    add_engine_option(parser)
    parser.set_defaults(func=run)


def lint(paths: list[str], engine: EngineName) -> tuple[list[CelkeeperError], dict[str, int]]:
    """Every problem under `paths`, and counts of what was checked."""
    unlisted: list[str] = []
    file_list = [f for f in files.expand(paths, errors=unlisted) if not files.is_kustomization_file(f)]
    problems: list[CelkeeperError] = [files.PathError(p) for p in unlisted]  # folders not listed
    documents: list[Document] = []
    for file in file_list:
        parsed = files.read(file)
        problems.extend(parsed.errors)
        documents.extend(d for d in parsed.documents if d.group != KUSTOMIZE_GROUP)
    for document in documents:
        problems.extend(_identity_problems(document))
    policy_documents = [d for d in documents if is_policy_document(d)]
    from celkeeper.gator.backend import PolicyBackend  # the engine loads only when needed

    loaded = PolicyBackend(engine).build(policy_documents)
    problems.extend(loaded.errors)
    from celkeeper.vap.plan import plan_vap

    problems.extend(plan_vap(loaded.policies).errors)  # only what asks for a policy: generateVAP, vap.k8s.io
    suites = 0
    for document in documents:
        if is_suite(document):
            suites += 1
            try:
                parse_suite(document)
            except SuiteError as err:
                problems.append(err)
    counts = {
        "files": len(file_list),
        "templates": sum(1 for d in policy_documents if is_template_document(d)),
        "constraints": sum(1 for d in policy_documents if is_constraint_document(d)),
        "suites": suites,
        "mutators": sum(1 for d in policy_documents if is_mutator(d)),
    }
    return _sorted(problems), counts


def _identity_problems(document: Document) -> list[CelkeeperError]:
    found: list[CelkeeperError] = []
    for key in ("apiVersion", "kind"):
        value = document.data.get(key)
        if value is None:
            found.append(document.error(DocumentError, f"missing {key}", ""))
        elif not isinstance(value, str) or not value:
            found.append(document.error(DocumentError, f"{key} must be a non-empty string", key))
    return found


def _sorted(problems: list[CelkeeperError]) -> list[CelkeeperError]:
    def key(err: CelkeeperError) -> tuple[str, int, int, int]:
        loc = err.location
        return (loc.file or "", loc.document or 0, loc.line or 0, loc.column or 0)

    unique: dict[str, CelkeeperError] = {}
    for err in problems:
        unique.setdefault(str(err), err)
    return sorted(unique.values(), key=key)


def run(args: argparse.Namespace) -> int:
    found, counts = lint(args.paths, engine_name(args))
    for problem in found:
        print(_line(problem))
    checked = (
        f"{counts['files']} files: {counts['templates']} templates, {counts['constraints']} constraints, "
        f"{counts['suites']} suites" + (f", {counts['mutators']} mutators" if counts["mutators"] else "")
    )
    warnings = sum(1 for p in found if _is_warning(p))
    problems = len(found) - warnings
    if not found:
        print(f"celkeeper lint: no problems in {checked}", file=sys.stderr)
        return 0
    said = [_count(problems, "problem")] if problems else []
    said += [_count(warnings, "warning")] if warnings else []
    print(f"celkeeper lint: {' and '.join(said)} in {checked}", file=sys.stderr)
    return 1 if problems or args.strict else 0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def _is_warning(problem: CelkeeperError) -> bool:
    """What Gatekeeper loads and celkeeper only warns about; CEL that does not compile is an error."""
    return is_warning(problem) and not is_compile_problem(problem)


def _line(problem: CelkeeperError) -> str:
    """A problem's line; a warning says so before its message."""
    if not _is_warning(problem):
        return str(problem)
    where = str(problem.location)
    return f"{where}: warning: {problem.message}" if where else f"warning: {problem.message}"
