"""`celkeeper test -f FILE|DIR ...`: review the objects among the files against the policies among them.

As `gator test` does: templates, constraints and ExpansionTemplates are taken from the given files,
and every document (templates and constraints included) is reviewed as a plain object, with the
Namespaces among the files known to matching (a cluster-scoped object has an empty one, `default`
always exists). Every object that is not a template or constraint is also synced data for the
templates that read it (`data.inventory`). ExpansionTemplates among the files expand objects
(celkeeper.expansion, in the namespace gator's expander knows), and the generated objects are reviewed
too (`[Implied by <template>] <message>`). Mutators among the files are used as gator's expander uses
them: an object is reviewed as given, then mutated (source Original) before it is expanded, and each
generated object is mutated (source Generated) before it is reviewed or expanded in turn; the mutators
themselves are reviewed as objects too. `celkeeper mutate` shows the mutated objects. One
difference, on purpose: an AdmissionReview is reviewed as its request (operation, oldObject,
userInfo), where gator would review the AdmissionReview object.

Output as gator prints it: one line per result, `<apiVersion>/<Kind> [<namespace>/]<name>:
["<constraint>"] Message: "<message>"`, or with `-o json` gator's JSON (target, msg, constraint,
enforcementAction, scopedActions, violatingObject, trace). The exit code is 1 when a result
denies (a `deny` action, or `scoped` with deny) or a file could not be loaded, else 0.

With --cluster, every document of the files is a manifest checked as the webhook would decide applying
it: the templates, constraints (celkeeper's and Gatekeeper's API groups), ExpansionTemplates and
Namespaces are read from the cluster (get/list only: deploy/ci-rbac.yaml), each manifest is a CREATE (an
UPDATE of the stored object with --against-live, when it exists), Namespaces the manifests create are
taken from them, and a manifest whose namespace exists nowhere is reported, not checked. Each result is
printed as `<apiVersion>/<Kind> <namespace>/<name>: [<constraint>] <message> (<action>, <operation>)`
(`-o json`: object, file, document, constraint, template, enforcementAction, message, operation). The
cluster's own Kubernetes admission policies (ValidatingAdmissionPolicies, MutatingAdmissionPolicies, their
bindings, parameter objects and the CRDs they need: cli.cluster) answer each manifest's request too, and
their answer is printed as without --cluster (`-o json`: object, file, document, admissionPolicies,
operation); what of them cannot be read (403, a version not served) is a note. The exit code is 1 when
the webhook or an admission policy would deny something (or a manifest could not be checked).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from celkeeper.cli import files
from celkeeper.cli.cluster import (
    add_cluster_options,
    admission_kinds,
    cluster_admission,
    manifest_object,
    read_cluster,
)
from celkeeper.cli.options import add_cache_option, add_engine_option, add_filename_option, engine_name
from celkeeper.cli.output import redirected
from celkeeper.documents import Document
from celkeeper.errors import AdmissionPolicyNote, CelkeeperError, is_compile_problem, is_warning
from celkeeper.gator.kinds import (
    is_constraint_document,
    is_namespace,
    is_policy_document,
    is_template_document,
)
from celkeeper.gator.reviews import as_v1_review, check_reviewable, checked_request, is_admission_review
from celkeeper.gator.violation import Violation
from celkeeper.model import Action, JsonObject, JsonValue, Result

if TYPE_CHECKING:
    from celkeeper.cli.admissionpolicies import AdmissionReviewer, Reviewed, Ticket
    from celkeeper.incluster.cluster import ClusterReader
    from celkeeper.policy import PolicySet
    from celkeeper.review import AdmissionRequest, NamespaceLookup
    from celkeeper.settings import EngineName

TARGET = "admission.k8s.gatekeeper.sh"
EXAMPLES = """examples:
  celkeeper test -f examples/required-labels/                 policies and objects from one folder
  celkeeper test -f policies/ -f manifests/deploy.yaml -o json
  kubectl get pods -A -o yaml | celkeeper test -f policies/ -f -
  kustomize build overlays/prod | celkeeper test --cluster -f -      manifests against a live cluster
  celkeeper test --cluster --context prod --against-live -f manifests/ -o json
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="more files or folders, as -f (what pre-commit passes: the changed files)",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json", "junit", "sarif"),
        default="text",
        help="text and json (gator's), junit (JUnit XML: a testcase per object and constraint) or sarif "
        "(SARIF 2.1.0: each violation at its object's line)",
    )
    parser.add_argument("--output-file", metavar="FILE", help="write the output to FILE rather than stdout")
    parser.add_argument("--deny-only", action="store_true", help="print only results that deny")
    add_engine_option(parser)
    add_cache_option(parser)
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


Row = tuple[Document, Mapping[str, JsonValue] | None, Violation]  # reviewed document, its constraint, result


def run(args: argparse.Namespace) -> int:
    args.filenames = [*args.filenames, *getattr(args, "paths", ())]
    if args.against_live and not args.cluster:
        raise CelkeeperError("--against-live needs --cluster")
    if args.cluster:
        return run_cluster(args)
    from celkeeper.cli.inputs import Inputs

    inputs: Inputs[_Reviewed | _Asked] = Inputs("test", "reviewed")
    admission: AdmissionReviewer | None = None
    try:
        sources = inputs.sources(args.filenames or [files.STDIN])
        # the policies first (a first pass over the files that can hold them), then each object as it
        # is read (the Namespaces among them too: cli.inputs)
        documents = inputs.policies(sources, is_policy=_is_policy, report=lambda _: False)
        # Kubernetes' admission policies start compiling in the library (both cores), then the engine
        # loads while the rest is read: its imports hold the GIL, so loading it beside the policies'
        # reading delayed them (the native library itself is already loading: cli.main's PRELOAD)
        admission = _admission_reviewer(inputs, sources, documents)
        documents = [d for d in documents if is_policy_document(d)]
        constraints = {(d.kind, d.name): d.data for d in documents if is_constraint_document(d)}
        with _gatekeeper(args, inputs, sources, documents) as gatekeeper:
            sink = _TestSink(
                inputs, gatekeeper=gatekeeper, constraints=constraints, args=args, admission=admission
            )
            inputs.consume(sources, sink)
            if admission is not None:
                _report(inputs, admission)
    finally:
        inputs.close()
        if admission is not None:
            admission.close()
    if not inputs.read and not inputs.errors:
        inputs.error("no input data identified")  # as gator test says it
    sink.rows.sort(key=lambda r: (r[0], r[1]))  # as gator orders its results: action, then message
    with redirected(args.output_file):
        if args.output in ("junit", "sarif"):
            order = {source.name: i for i, source in enumerate(sources)}
            reviewed = [
                d for _, d in sorted(sink.documents, key=lambda e: (order.get(e[0][0], 0), *e[0][1:]))
            ]
            rows = [row for _, _, row in sink.rows]
            assert gatekeeper is not None  # junit and sarif list the constraints each object meets
            sys.stdout.write(formatted(args.output, reviewed, gatekeeper.policies, rows, inputs.problems))
        elif args.output == "json":
            print(json.dumps([row for _, _, row in sink.rows], indent=4, ensure_ascii=False))
        else:  # in one write (a print per line is a write per line when stdout is unbuffered)
            sys.stdout.write("".join(f"{line}\n" for _, _, line in sink.rows))
    print(inputs.summary(), file=sys.stderr)
    return 1 if sink.denied or inputs.errors else 0


@dataclass(frozen=True)
class _Gatekeeper:
    """What decides the objects by Gatekeeper's policies: the backend, its policy set, its synced data."""

    backend: Any
    policies: PolicySet
    data: Any


@contextmanager
def _gatekeeper(
    args: argparse.Namespace, inputs: Any, sources: Any, documents: list[Document]
) -> Iterator[_Gatekeeper | None]:
    """The Gatekeeper policies among the files (`documents`), loaded, with their synced data for the
    review; None when there is none (only Kubernetes' admission policies, or no policy) and the output
    does not list the constraints each object meets (junit, sarif): then no object is decided by
    Gatekeeper's engine, which is not loaded (nor the CEL layer imported: engine_name)."""
    if not documents and args.output not in ("junit", "sarif"):
        yield None
        return
    from celkeeper.cli.background import Background
    from celkeeper.gator.backend import PolicyBackend
    from celkeeper.gator.programs import DiskPrograms, LazyEngine
    from celkeeper.gator.verdicts import DiskVerdicts

    name = engine_name(args)
    engine = Background(_engine, name)
    # what earlier runs found checking and compiling these policies: jsonschema is not imported, and
    # only the templates the objects need are compiled (gator.programs)
    verdicts = None if args.no_cache else DiskVerdicts.default()
    programs = None if args.no_cache else DiskPrograms.default(name)
    lazy = LazyEngine(engine.result, name, programs) if programs is not None else engine.result()
    backend = PolicyBackend(name, loaded=lazy, verdicts=verdicts)
    loaded = backend.build(documents)
    # what Gatekeeper loads (ignored keys, a template without validations) is no problem here, as
    # for gator test (lint and verify -v show those warnings); CEL that does not compile is
    for error in loaded.errors:
        if not is_warning(error) or is_compile_problem(error):
            inputs.error(error)
    # like gator test, every object is also synced data (for templates that read it)
    data_objects = (Document.from_object(o) for o in inputs.stream_data(sources) if not _is_policy_object(o))
    with backend.inventory(loaded.policies, data_objects) as data:
        engine.result()  # loaded by now (an engine that cannot load fails the run, not each object)
        yield _Gatekeeper(backend, loaded.policies, data)


def _engine(name: EngineName) -> Any:
    from celkeeper.cel import get_engine

    return get_engine(name)


def _is_policy(document: Document) -> bool:
    from celkeeper.admissionpolicy import is_admission_input

    return is_policy_document(document) or is_admission_input(document)


def _admission_reviewer(inputs: Any, sources: Any, documents: list[Document]) -> AdmissionReviewer | None:
    """Kubernetes' admission policies among the files (cli.admissionpolicies), with the parameter objects
    and Namespaces among them (a pass of their own over the files whose text may hold one, only when there
    are such policies). The objects' requests are answered as they are read (_TestSink)."""
    from celkeeper.admissionpolicy import is_admission_policy_document, param_kinds

    policies = [d for d in documents if is_admission_policy_document(d)]
    if not policies:
        return None
    from celkeeper.cli.admissionpolicies import AdmissionReviewer  # the policies' evaluation: only now

    names = (b"Namespace", *sorted({kind.encode() for _, kind in param_kinds(policies)}))
    objects = inputs.stream_data(inputs.holding(sources, names))
    # built beside the objects' reading (its problems are reported when it is first used: _report)
    return AdmissionReviewer.build(documents, objects, background=True)


def _report(inputs: Any, admission: AdmissionReviewer) -> None:
    """The problems of the admission policies' set, errors then notes (once: when first used, or at the
    end)."""
    problems = admission.take_problems()
    for error in problems:
        if not isinstance(error, AdmissionPolicyNote):
            inputs.error(error)
    for note in problems:
        if isinstance(note, AdmissionPolicyNote):
            inputs.note(str(note))


def _is_policy_object(obj: JsonObject) -> bool:
    document = Document.from_object(obj)
    return is_template_document(document) or is_constraint_document(document)


# an object reviewed: (its rows: (action, message, what is printed), whether a result denies, and for
# -o junit the object (a testcase per object and constraint)); or why it is not reviewed: ("skip",
# reason, error)
_Reviewed = tuple[Any, ...]
_CLEAN: _Reviewed = ((), False, None)


@dataclass(frozen=True)
class _Asked:
    """An object reviewed whose admission policies' answer was asked for (AdmissionReviewer.submit):
    its result without that answer, the ticket, its identity (_identity) and where it was read (file,
    document, path, line, column: an error's location; the object itself is not kept)."""

    reviewed: _Reviewed
    ticket: Ticket
    identity: Document
    place: tuple[str, int, str | None, int, int]


class _TestSink:
    def __init__(
        self,
        inputs: Any,
        *,
        gatekeeper: _Gatekeeper | None,
        constraints: dict[tuple[str, str], JsonValue],
        args: argparse.Namespace,
        admission: AdmissionReviewer | None = None,
    ) -> None:
        self.inputs = inputs
        # None: no Gatekeeper policy (every decision on an object would be empty): an object is only
        # checked to be one Gatekeeper could review (a malformed one is reported as with policies)
        self.gatekeeper = gatekeeper
        self.admission = admission
        self.lookup = gator_test_namespaces(inputs.namespaces)
        self.namespaces = inputs.namespaces  # as far as they are read (cli.inputs)
        self.constraints = constraints
        self.output = args.output
        self.deny_only = args.deny_only
        self.rows: list[tuple[str, str, Any]] = []
        # -o junit: every object reviewed (its identity, where it is), by (file, document, item)
        self.documents: list[tuple[tuple[str, int, int], Document]] = []
        self.denied = False

    def evaluate(self, piece: Any) -> _Reviewed | _Asked:
        from celkeeper.cli.inputs import NOT_REVIEWED, document_of, located

        document = document_of(piece)
        try:
            gatekeeper = self.gatekeeper
            if gatekeeper is not None:
                decision = gatekeeper.backend.decide(
                    gatekeeper.policies,
                    document,
                    self.lookup,
                    gatekeeper.data,
                    expansion_namespace=lambda obj: namespace_name(obj, self.namespaces),
                    mutate_before_expanding=True,
                )
                found = gatekeeper.backend.violations(gatekeeper.policies, decision)
            else:
                check_reviewable(document)
                found = []
        except CelkeeperError as err:  # a malformed object or review: reported, the rest goes on
            return ("skip", NOT_REVIEWED, located(err, piece))
        light = _identity(piece, document) if self.output in ("junit", "sarif") else None
        asked = None
        if self.admission is not None:  # answered beside the reading (cli.admissionpolicies), taken in record
            try:
                asked = self.admission.submit(document)
            except CelkeeperError as err:
                return ("skip", NOT_REVIEWED, located(err, piece))
        if not found and self.output != "junit" and asked is None:
            return _CLEAN
        rows = []
        denied = False
        for violation in found:
            denied = denied or denies(violation)
            if self.deny_only and not denies(violation):
                continue
            constraint = self.constraints.get(violation.constraint)
            if light is not None:
                shown: Any = (light, constraint, violation)
            elif self.output == "json":
                shown = _json_row(document, constraint, violation)
            else:
                from celkeeper.cel.k8slib.gostrings import go_quote  # with the engine, not before the files

                name = str(_meta(constraint).get("name", "")) if constraint is not None else ""
                message = go_quote(violation.message)
                shown = f"{_object_id(manifest_object(document))}: [{go_quote(name)}] Message: {message}"
            rows.append((violation.enforcement_action, violation.message, shown))
        where = (piece.file, piece.document, -1 if piece.item is None else piece.item)
        reviewed = (tuple(rows), denied, (where, light) if self.output == "junit" else None)
        if asked is None:
            return reviewed
        place = (piece.file, piece.document, piece.path, piece.line, piece.column)
        return _Asked(reviewed, asked, light or _identity(piece, document), place)

    def _answered(self, asked: _Asked) -> _Reviewed:
        """An object's result with the admission policies' answer (cli.admissionpolicies) taken."""
        from celkeeper.cli.inputs import NOT_REVIEWED

        assert self.admission is not None
        _report(self.inputs, self.admission)
        try:
            admitted = self.admission.answer_to(asked.ticket)
        except CelkeeperError as err:
            file, document, path, line, column = asked.place
            where = err.at(file=file, document=document, path=path, line=line, column=column)
            return ("skip", NOT_REVIEWED, where)
        for note in self.admission.take_notes(admitted):
            self.inputs.note(note)
        if admitted.quiet:
            return asked.reviewed
        rows, denied, reviewed = asked.reviewed
        light = asked.identity if self.output in ("junit", "sarif") else None
        rows = (*rows, *self._admission_rows(asked.identity, admitted, light))
        return (rows, denied or admitted.denied, reviewed)

    def _admission_rows(self, document: Document, admitted: Reviewed, light: Document | None) -> list[Any]:
        """What Kubernetes' admission policies answer about an object (`document`: its identity, _identity),
        as rows (cli.admissionpolicies)."""
        if light is not None:
            return [(v.enforcement_action, v.message, (light, None, v)) for v in admitted.violations()]
        lines = [(a, t) for a, t in admitted.lines() if not self.deny_only or a == "deny"]
        if self.output == "json":
            if not lines:
                return []
            row = {
                "object": document.data,
                "file": document.file,
                "document": document.index,
                "admissionPolicies": admitted.to_json(),
            }
            return [(lines[0][0], lines[0][1], row)]
        head = _object_id(manifest_object(document))
        return [(action, text, f"{head}: {text}") for action, text in lines]

    def record(self, result: _Reviewed | _Asked) -> None:
        if isinstance(result, _Asked):
            result = self._answered(result)
        if result[0] == "skip":
            self.inputs.not_evaluated(result[1], result[2])
            return
        rows, denied, reviewed = result
        self.inputs.read += 1
        self.inputs.done += 1
        self.rows.extend(rows)
        self.denied = self.denied or denied
        if reviewed is not None:
            self.documents.append(reviewed)


def _identity(piece: Any, document: Document) -> Document:
    """What -o junit and -o sarif show of a reviewed object: its kind and name, and where it is (the
    object itself is not kept: they list every object)."""
    obj = manifest_object(document)
    meta = {k: v for k, v in _meta(obj).items() if k in ("name", "namespace")}
    data = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": meta}
    return Document(file=document.file, index=document.index, data=data, spans=document.spans)


def run_cluster(args: argparse.Namespace) -> int:
    """The manifests as the webhook and Kubernetes' admission policies would decide them, on the cluster's
    policies, parameters and Namespaces."""
    from celkeeper.cli.inputs import object_documents
    from celkeeper.gator.backend import PolicyBackend  # the engine loads only when needed
    from celkeeper.model import EnforcementPoint
    from celkeeper.review import decide, inventory_lookup

    manifests, errors = object_documents(args.filenames or [files.STDIN])
    problems = [str(e) for e in errors]
    cluster = read_cluster(args, admission_kinds=admission_kinds(manifests))
    notes = list(cluster.notes)
    # what each manifest gets, in order: the webhook's results, then the admission policies' answer
    rows: list[tuple[Document, Result | Reviewed, str]] = []
    admission: AdmissionReviewer | None = None
    try:
        backend = PolicyBackend(engine_name(args))
        loaded = backend.build(cluster.documents)
        problems += [f"in the cluster: {e}" for e in loaded.errors]
        # Namespaces the manifests create (or change) are as the manifests say; the others as stored
        namespaces = dict(cluster.namespaces)
        namespaces.update((d.name, d.data) for d in manifests if is_namespace(d) and d.name)
        lookup = inventory_lookup(namespaces, complete=True)
        admission = cluster_admission(cluster, manifests, problems, notes)
        for document in manifests:
            try:
                request, note, asked = _cluster_request(
                    cluster.reader, document, namespaces, args.against_live
                )
            except CelkeeperError as err:
                problems.append(str(err.at(file=document.file, document=document.index)))
                continue
            if note:
                problems.append(f"{document.file}: document {document.index}: {note}")
            try:
                decision = decide(request, loaded.policies, lookup, EnforcementPoint.WEBHOOK)
                rows.extend((document, r, request.operation) for r in decision.results)
            except CelkeeperError as err:  # e.g. an object an ExpansionTemplate cannot expand
                problems.append(str(err.at(file=document.file, document=document.index)))
            if admission is None:
                continue
            try:
                admitted = admission.answer(asked, _reviewed_object(document))
            except CelkeeperError as err:
                problems.append(str(err.at(file=document.file, document=document.index)))
                continue
            notes += admission.take_notes(admitted)
            if not admitted.quiet:
                rows.append((document, admitted, request.operation))
    finally:
        if admission is not None:
            admission.close()
        cluster.reader.close()
    for note in notes:
        print(f"celkeeper test: note: {note}", file=sys.stderr)
    for problem in problems:
        print(f"celkeeper test: {problem}", file=sys.stderr)
    with redirected(args.output_file):
        if args.output in ("junit", "sarif"):
            found = [(d, None, v) for d, r, _ in rows for v in _cluster_violations(r, args.deny_only)]
            sys.stdout.write(formatted(args.output, manifests, loaded.policies, found, problems))
        elif args.output == "json":
            shown = [_cluster_row(d, r, op, args.deny_only) for d, r, op in rows]
            print(json.dumps([row for row in shown if row is not None], indent=2))
        else:
            for document, result, operation in rows:
                for line in _cluster_lines(document, result, operation, args.deny_only):
                    print(line)
    denied = any(r.denied if not isinstance(r, Result) else r.action is Action.DENY for _, r, _ in rows)
    return 1 if denied or problems else 0


def _cluster_violations(result: Result | Reviewed, deny_only: bool) -> list[Violation]:
    if not isinstance(result, Result):
        return [v for v in result.violations() if not deny_only or v.enforcement_action == "deny"]
    return [_violation(result)] if not deny_only or result.action is Action.DENY else []


def _cluster_lines(
    document: Document, result: Result | Reviewed, operation: str, deny_only: bool
) -> list[str]:
    """The text lines of one result of `test --cluster`: the webhook's with its action and operation, the
    admission policies' as `test -f` prints them."""
    head = _object_id(manifest_object(document))
    if not isinstance(result, Result):
        return [f"{head}: {text}" for action, text in result.lines() if not deny_only or action == "deny"]
    if deny_only and result.action is not Action.DENY:
        return []
    return [f"{head}: [{result.constraint_name}] {result.message} ({result.action}, {operation})"]


def formatted(
    output: str,
    documents: Sequence[Document],
    policies: PolicySet,
    rows: Sequence[Row],
    problems: Sequence[str],
) -> str:
    """-o junit, -o sarif: made by cli/output_junit.py, cli/output_sarif.py."""
    if output == "junit":
        from celkeeper.cli.output_junit import junit_test

        return junit_test(documents, policies, rows, problems)
    from celkeeper.cli.output_sarif import sarif_test

    return sarif_test(rows, problems)


def _violation(result: Result) -> Violation:
    """A webhook result (test --cluster) as the offline tools' Violation."""
    return Violation(result.message, str(result.action), (), (result.constraint_kind, result.constraint_name))


def _cluster_request(
    reader: ClusterReader, document: Document, namespaces: JsonObject, against_live: bool
) -> tuple[AdmissionRequest, str, JsonObject]:
    """The request the API server would send the webhook for applying one manifest, a problem to report
    ("" when none), and the request as Kubernetes' admission policies get it (cli.admissionpolicies).
    Raises CelkeeperError when the manifest is not checked at all."""
    from celkeeper.review import admission_review_for, parse_admission_review

    if is_admission_review(document):
        asked = dict(checked_request(document))
        asked.pop("uid", None)
        return parse_admission_review(as_v1_review(checked_request(document))), "", asked
    obj = document.data
    if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind"):
        raise CelkeeperError("not a Kubernetes object (apiVersion and kind are required)")
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    kind = str(obj["kind"])
    found = obj.get("metadata")
    meta: JsonObject = found if isinstance(found, dict) else {}
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
    return parse_admission_review(review), note, _policy_request(review, namespace)


def _policy_request(review: JsonObject, namespace: str) -> JsonObject:
    """An AdmissionReview's request as the admission policies get it: the object in the namespace it is
    created in (the API server sets it from the request's), the resource when discovery knows it (else
    Kubernetes' guess from the kind), no user."""
    found = review.get("request")
    asked = dict(found) if isinstance(found, dict) else {}
    asked.pop("uid", None)
    if not asked.get("userInfo"):
        asked.pop("userInfo", None)
    resource = asked.get("resource")
    if isinstance(resource, dict) and not resource.get("resource"):
        asked.pop("resource", None)
    obj = asked.get("object")
    if namespace and isinstance(obj, dict):
        meta = obj.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        if not meta.get("namespace"):
            asked["object"] = {**obj, "metadata": {**meta, "namespace": namespace}}
    return asked


def _reviewed_object(document: Document) -> JsonObject | None:
    """The object of a manifest (an AdmissionReview's object), as given."""
    obj = manifest_object(document)
    return dict(obj) if obj else None


def denies(violation: Violation) -> bool:
    return violation.enforcement_action == "deny" or "deny" in violation.scoped_actions


def gator_test_namespaces(known: Mapping[str, Mapping[str, JsonValue]]) -> NamespaceLookup:
    """gator test's Namespace of an object (pkg/gator/expand NamespaceForResource): the Namespace
    among the inputs; an empty one for a cluster-scoped object; `default` always exists."""

    def lookup(name: str) -> Mapping[str, JsonValue] | None:
        if not name:
            return {}
        found = known.get(name)
        if found is None and name == "default":
            return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
        return found

    return lookup


def namespace_name(obj: Mapping[str, JsonValue], known: Mapping[str, Mapping[str, JsonValue]]) -> str | None:
    namespace = str(_meta(obj).get("namespace") or "")
    if namespace in {"", "default"} or namespace in known:
        return namespace
    return None


def _meta(obj: Mapping[str, JsonValue] | None) -> Mapping[str, JsonValue]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def _object_id(obj: Mapping[str, JsonValue]) -> str:
    meta = _meta(obj)
    head = f"{obj.get('apiVersion', '')}/{obj.get('kind', '')}"
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    return f"{head} {namespace}/{name}" if namespace else f"{head} {name}"


def _json_row(
    document: Document, constraint: Mapping[str, JsonValue] | None, violation: Violation
) -> JsonObject:
    row: JsonObject = {"target": TARGET, "msg": violation.message}
    if constraint is not None:
        shown = copy.deepcopy(dict(constraint))
        spec = shown.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("enforcementAction", "deny")  # the frameworks client's default, as gator shows
        row["constraint"] = shown
    row["enforcementAction"] = violation.enforcement_action
    if violation.scoped_actions:
        row["scopedActions"] = list(violation.scoped_actions)
    row["violatingObject"] = manifest_object(document)
    row["trace"] = None
    return row


def _cluster_row(
    document: Document, result: Result | Reviewed, operation: str, deny_only: bool = False
) -> JsonObject | None:
    """One result of `test --cluster -o json` (None when --deny-only leaves nothing of it)."""
    obj = manifest_object(document)
    meta = _meta(obj)
    row: JsonObject = {
        "object": {
            "apiVersion": str(obj.get("apiVersion", "")),
            "kind": str(obj.get("kind", "")),
            "namespace": str(meta.get("namespace") or ""),
            "name": str(meta.get("name") or ""),
        },
        "file": document.file,
        "document": document.index,
    }
    if not isinstance(result, Result):
        if deny_only and not result.denied:
            return None
        row["admissionPolicies"] = result.to_json()
    else:
        if deny_only and result.action is not Action.DENY:
            return None
        row["constraint"] = {"kind": result.constraint_kind, "name": result.constraint_name}
        row["template"] = result.template
        row["enforcementAction"] = str(result.action)
        row["message"] = result.message
    row["operation"] = operation
    return row
