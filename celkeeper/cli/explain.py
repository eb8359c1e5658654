"""`celkeeper explain -f OBJECT [POLICY PATH...]`: why the webhook decides what it decides about an object.

For every constraint: whether it was evaluated and, when not, which criterion excluded it (kinds,
scope, namespaces, selectors, name, source, the template's operations, match conditions, the
enforcement point); for each evaluated one, every variable's value, every match condition, validation
and messageExpression with its result or error, where each expression is in the template file
(compile errors with their line:col), and the results. The decision is made by the webhook's own code
(review.decide, with a recorder), so what is explained is what the webhook decides; objects an
ExpansionTemplate generates (a Deployment's Pod) are explained too. With Gatekeeper's mutators among the
policies, a CREATE or UPDATE at the webhook is first mutated, as the API server calls mutating webhooks
before validating ones: which mutators matched, in which order and pass, what each changed, and which of
the others' criteria (applyTo, each spec.match field) did not hold; then the mutated object is validated.
With Kubernetes' admission policies among the POLICY PATHs (ValidatingAdmissionPolicies,
MutatingAdmissionPolicies, bindings, parameters), the API server's answer made by its own plugins
follows, then, binding by binding, whether it applied and why not, and each matchCondition, validation,
audit annotation and mutation's result (celkeeper.admissionpolicy.explain).

OBJECT is a file (or - for stdin) of objects or AdmissionReviews; a plain object is explained as the
API server would send it for a CREATE (--operation UPDATE with --old FILE for an update). Policies
(templates, constraints, ExpansionTemplates) and the Namespaces namespaceSelector needs come from the
POLICY PATHs or, with --cluster, from the cluster (its admission policies, bindings and their
parameter objects too). The exit code is 1 when an object is denied.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from celkeeper.cli.cluster import add_cluster_options, admission_kinds, cluster_admission, read_cluster
from celkeeper.cli.options import add_engine_option, engine_name
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.gator.kinds import is_namespace, is_policy_document
from celkeeper.gator.reviews import as_v1_review, checked_request, is_admission_review
from celkeeper.model import EnforcementPoint, JsonObject, JsonValue

if TYPE_CHECKING:  # imported where they are used: the engine loads only when needed
    from celkeeper.cli.admissionpolicies import AdmissionExplained, AdmissionReviewer
    from celkeeper.gator.backend import PolicyBackend
    from celkeeper.policy import PolicySet
    from celkeeper.review import AdmissionRequest, NamespaceLookup
    from celkeeper.review.mutate import Mutation

POINTS = {
    "webhook": EnforcementPoint.WEBHOOK,
    "audit": EnforcementPoint.AUDIT,
    "gator": EnforcementPoint.CLI,
}
EXAMPLES = """examples:
  celkeeper explain -f pod.yaml examples/                  a Pod against the examples' policies
  celkeeper explain -f deployment.yaml --cluster -o json   against what the cluster enforces
  celkeeper explain -f new.yaml --operation UPDATE --old current.yaml policies/
  celkeeper explain -f pod.yaml policies/ --point audit    as the audit would see the object
  celkeeper explain -f deployment.yaml vap.yaml binding.yaml params.yaml   Kubernetes' admission policies
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="explain, constraint by constraint, what the webhook decides about an object",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-f",
        "--filename",
        required=True,
        metavar="FILE",
        help="the object(s) or AdmissionReview(s); - for stdin",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="POLICY_PATH",
        help="templates, constraints, ExpansionTemplates, admission policies and bindings, Namespaces",
    )
    add_cluster_options(parser, "take the policies and Namespaces from the cluster")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    parser.add_argument(
        "--point",
        choices=tuple(POINTS),
        default="webhook",
        help="the enforcement point whose decision is explained (default webhook; audit and gator review "
        "the plain object, without a request)",
    )
    parser.add_argument(
        "--operation",
        choices=("CREATE", "UPDATE", "DELETE"),
        default="CREATE",
        help="for a plain object at the webhook: the request's operation (default CREATE)",
    )
    parser.add_argument(
        "--old", metavar="FILE", help="with --operation UPDATE or DELETE: the object as stored"
    )
    parser.add_argument(
        "--namespace", metavar="NS", help="the namespace of objects that name none (default: none)"
    )
    add_engine_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.cluster and args.paths:
        raise CelkeeperError("give POLICY_PATHs or --cluster, not both")
    if not args.cluster and not args.paths:
        raise CelkeeperError("give the files or folders of the policies (POLICY_PATH), or --cluster")
    if args.old and args.operation == "CREATE":
        raise CelkeeperError("--old is the stored object of an UPDATE or DELETE: give --operation too")
    from celkeeper.cli.inputs import Inputs, object_documents

    read, errors = object_documents([args.filename])
    if errors:
        raise errors[0]
    objects = [d for d in read if not _is_policy(d)]
    if not objects:
        raise CelkeeperError(f"{args.filename}: no object to explain")
    old = _old_object(args.old) if args.old else None

    problems: list[str] = []
    reader = None
    synced: list[Document] = []  # the synced data templates that read it see
    admission: AdmissionReviewer | None = None  # Kubernetes' admission policies among the POLICY_PATHs
    if args.cluster:
        cluster = read_cluster(args, admission_kinds=admission_kinds(objects))
        reader = cluster.reader
        policy_documents, namespaces = cluster.documents, cluster.namespaces
        notes = list(cluster.notes)
        try:
            admission = cluster_admission(cluster, objects, problems, notes)
        except BaseException:
            reader.close()
            raise
        problems += [f"note: {n}" for n in notes]
    else:
        # as `celkeeper test`: policy documents by the policy reader, the other objects (Namespaces,
        # synced data) by the object reader; problems reported as they are found
        inputs: Inputs[None] = Inputs("explain", "explained")
        try:
            sources = inputs.sources(args.paths)
            policy_documents = inputs.policies(sources, is_policy=_is_policy, report=lambda _: False)
            others = [d for d in inputs.documents(sources) if not _is_policy(d)]
        finally:
            inputs.close()
        namespaces = {d.name: d.data for d in others if is_namespace(d)}
        synced = others
        admission = _admission_reviewer(policy_documents, others, problems)
        policy_documents = [d for d in policy_documents if is_policy_document(d)]
    if admission is not None and not policy_documents:  # the admission policies alone
        try:
            for problem in problems:
                print(f"celkeeper explain: {problem}", file=sys.stderr)
            admitted = [_admit(args, admission, document, old) for document in objects]
        finally:
            admission.close()
            if reader is not None:
                reader.close()
        return _print_admission(args, admitted)
    try:
        from celkeeper.gator.backend import PolicyBackend, verify_namespace  # the engine loads when needed
        from celkeeper.review import inventory_lookup
        from celkeeper.review.explain import explain
        from celkeeper.review.explain_text import render_text

        backend = PolicyBackend(engine_name(args))
        loaded = backend.build(policy_documents)
        problems += [str(e) for e in loaded.errors]
        for problem in problems:
            print(f"celkeeper explain: {problem}", file=sys.stderr)
        point = POINTS[args.point]
        # the webhook on a policy folder knows every namespace (without labels when not listed); a
        # cluster lists them all; gator and the audit know only those given
        lookup = inventory_lookup(namespaces, complete=args.cluster or point is not EnforcementPoint.WEBHOOK)
        explanations = []
        mutations: list[str | None] = []  # each object's mutation, as text (None: not mutated here)
        mutation_json: list[JsonValue] = []
        with backend.inventory(loaded.policies, synced) as data:
            for document in objects:
                request, expand, review = _request(args, document, old, point, backend)
                mutated = _mutate(review, loaded.policies, lookup) if review is not None else None
                if mutated is not None:
                    mutation, request = mutated
                    from celkeeper.review.explain_text import render_mutation

                    what = (
                        f"{request.kind} {request.namespace + '/' if request.namespace else ''}{request.name}"
                    )
                    mutations.append(render_mutation(mutation, loaded.policies.mutators, what))
                    mutation_json.append(
                        {
                            "mutated": mutation.mutated,
                            "patch": list(mutation.patch),
                            "error": mutation.error,
                            "trace": mutation.trace,
                        }
                    )
                else:
                    mutations.append(None)
                    mutation_json.append(None)
                explained = explain(
                    request,
                    loaded.policies,
                    lookup,
                    point,
                    data=data,
                    expand=expand,
                    # at gator's point, generated objects go where gator verify puts them
                    expansion_namespace=verify_namespace if point is EnforcementPoint.CLI else None,
                )
                explanations.append(explained)
        admitted = [_admit(args, admission, d, old) for d in objects] if admission is not None else []
    finally:
        if reader is not None:
            reader.close()
        if admission is not None:
            admission.close()
    if args.output == "json":
        out = [
            {**e.to_json(), "mutation": m} if m is not None else e.to_json()
            for e, m in zip(explanations, mutation_json, strict=True)
        ]
        for entry, a in zip(out, admitted, strict=False):
            entry["admissionPolicies"] = a.to_json()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        texts = [
            (m + "\n" if m is not None else "") + render_text(e)
            for e, m in zip(explanations, mutations, strict=True)
        ]
        for i, a in enumerate(admitted):
            texts[i] += "\n" + a.text()
        sys.stdout.write("\n".join(texts))
    allowed = all(e.allowed for e in explanations) and all(a.allowed for a in admitted)
    return 0 if allowed else 1


def _is_policy(document: Document) -> bool:
    """A policy document: Gatekeeper's (templates, constraints, ExpansionTemplates, mutators) or
    Kubernetes' admission policies, bindings and the CRDs they need (cli.admissionpolicies)."""
    from celkeeper.admissionpolicy import is_admission_input

    return is_policy_document(document) or is_admission_input(document)


def _admission_reviewer(
    documents: list[Document], others: list[Document], problems: list[str]
) -> AdmissionReviewer | None:
    """Kubernetes' admission policies among the policy documents, with the parameter objects and
    Namespaces among the other documents (None without any); what the API server would refuse or note
    about them goes to `problems`."""
    from celkeeper.admissionpolicy import is_admission_policy_document

    if not any(is_admission_policy_document(d) for d in documents):
        return None
    from celkeeper.cli.admissionpolicies import AdmissionReviewer  # the policies' evaluation: only now

    reviewer = AdmissionReviewer.build(documents, (d.data for d in others if isinstance(d.data, dict)))
    if reviewer is not None:
        problems += [str(e) for e in reviewer.errors()]
        problems += [f"note: {n}" for n in reviewer.notes()]
    return reviewer


def _admit(
    args: argparse.Namespace,
    admission: AdmissionReviewer,
    document: Document,
    old: Mapping[str, JsonValue] | None,
) -> AdmissionExplained:
    """The admission policies' answer to a document as a request (a plain object: --operation, with
    --old as the stored object and --namespace; an AdmissionReview: its request), with its trace."""
    from celkeeper.cli.admissionpolicies import AdmissionExplained

    try:
        if is_admission_review(document):
            request = dict(checked_request(document))
            request.pop("uid", None)
        elif isinstance(document.data, dict):
            request = {"operation": args.operation}
            if args.operation != "DELETE":
                request["object"] = document.data
            if old is not None:
                request["oldObject"] = dict(old)
            elif args.operation == "DELETE":
                request["oldObject"] = document.data
            namespace = _namespace(args, document.data)
            if namespace:
                request["namespace"] = namespace
        else:
            raise CelkeeperError("not an object")
        before = request.get("object")
        explained = admission.policies.explain(request)
    except CelkeeperError as err:
        raise err.at(file=document.file, document=document.index) from err.__cause__
    return AdmissionExplained(document, explained, before if isinstance(before, dict) else None)


def _print_admission(args: argparse.Namespace, admitted: list[AdmissionExplained]) -> int:
    if args.output == "json":
        print(
            json.dumps([{"admissionPolicies": a.to_json()} for a in admitted], indent=2, ensure_ascii=False)
        )
    else:
        sys.stdout.write("\n".join(a.text() for a in admitted))
    return 0 if all(a.allowed for a in admitted) else 1


def _mutate(
    review: JsonObject, policies: PolicySet, lookup: NamespaceLookup
) -> tuple[Mutation, AdmissionRequest] | None:
    """The request's object as Gatekeeper's mutators leave it, before the validating webhook sees it (the
    API server calls mutating webhooks first), explained; None without mutators or a CREATE or UPDATE."""
    if not len(policies.mutators):
        return None
    request = review.get("request")
    if not isinstance(request, dict) or request.get("operation") not in ("CREATE", "UPDATE"):
        return None
    from celkeeper.review import parse_admission_review
    from celkeeper.review.mutate import mutate

    mutation = mutate(review, policies, lookup, explain=True)
    if mutation.error or not mutation.mutated or mutation.object is None:
        return mutation, parse_admission_review(review)
    return mutation, parse_admission_review({**review, "request": {**request, "object": mutation.object}})


def _old_object(path: str) -> Mapping[str, JsonValue]:
    from celkeeper.cli.inputs import object_documents

    read, errors = object_documents([path])
    if errors:
        raise errors[0]
    if len(read) != 1 or not isinstance(read[0].data, dict):
        raise CelkeeperError(f"{path}: --old must hold exactly one object")
    data: Mapping[str, JsonValue] = read[0].data
    return data


def _request(
    args: argparse.Namespace,
    document: Document,
    old: Mapping[str, JsonValue] | None,
    point: EnforcementPoint,
    backend: PolicyBackend,
) -> tuple[AdmissionRequest, bool, JsonObject | None]:
    """The request explained for one document, whether it is expanded, and the AdmissionReview the webhook
    receives (None at the other points)."""
    from celkeeper.review import admission_review_for, parse_admission_review, request_for_object

    try:
        if is_admission_review(document):
            if point is EnforcementPoint.CLI:
                request, expand = backend.request(document)
                return request, expand, None
            v1 = as_v1_review(checked_request(document))
            return parse_admission_review(v1), True, v1
        if not isinstance(document.data, dict):
            raise CelkeeperError("not an object")
        if point is not EnforcementPoint.WEBHOOK:
            return request_for_object(document.data), True, None
        review = admission_review_for(
            document.data, operation=args.operation, old_object=old, namespace=_namespace(args, document.data)
        )
        return parse_admission_review(review), True, review
    except CelkeeperError as err:
        raise err.at(file=document.file, document=document.index) from err.__cause__


def _namespace(args: argparse.Namespace, obj: Mapping[str, JsonValue]) -> str | None:
    meta = obj.get("metadata")
    given = meta.get("namespace") if isinstance(meta, Mapping) else None
    return str(given) if given else args.namespace
