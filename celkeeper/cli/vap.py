"""`celkeeper vap`: the ValidatingAdmissionPolicies and bindings Gatekeeper would generate for templates and
constraints, and why a template cannot become one.

    celkeeper vap examples/                     every template's policy, every constraint's binding (YAML)
    celkeeper vap --cluster                     the same for the templates and constraints in the cluster
    celkeeper vap examples/ -o json             a v1 List
    celkeeper vap examples/ --no-default-create-vap-for-templates    only templates with generateVAP: true
    celkeeper vap examples/ --webhook-config vwc.yaml --exempt-namespace kube-system
                                                the webhook's scope (--sync-vap-enforcement-scope)

Objects go to stdout (kubectl apply -f - takes them), problems to stderr, one line each with
file:line:col: errors for templates and constraints that cannot become a policy or binding (the API server
would refuse them; they are left out), warnings where the API server's verdict will differ from
celkeeper's webhook. The exit code is 1 when a template or constraint that should have a policy or
binding cannot have one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from celkeeper.cli import files
from celkeeper.cli.options import add_engine_option, engine_name
from celkeeper.crds import to_yaml
from celkeeper.documents import Document
from celkeeper.errors import CelkeeperError
from celkeeper.vap import Scope, WebhookScope

WEBHOOK_NAME = (
    "validation.celkeeper.io"  # celkeeper's admission webhook in its ValidatingWebhookConfiguration
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "vap",
        help="generate ValidatingAdmissionPolicies and bindings from templates and constraints",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (searched recursively)")
    parser.add_argument(
        "--cluster", action="store_true", help="read the templates and constraints from the cluster instead"
    )
    parser.add_argument(
        "--kubeconfig", metavar="FILE", help="with --cluster: the kubeconfig (default: kubectl's)"
    )
    parser.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="default: yaml")
    parser.add_argument(
        "--default-create-vap-for-templates",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="make a policy for templates without generateVAP (default: yes; generateVAP: false opts out)",
    )
    parser.add_argument(
        "--default-create-vap-binding-for-constraints",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="make a binding for constraints not scoped to vap.k8s.io (default: yes, as Gatekeeper)",
    )
    parser.add_argument(
        "--webhook-config",
        metavar="FILE",
        help="a ValidatingWebhookConfiguration whose webhook's rules, selectors, matchPolicy and "
        "matchConditions the policies take instead of every resource on CREATE and UPDATE",
    )
    parser.add_argument(
        "--webhook-name",
        default=WEBHOOK_NAME,
        help=f"the webhook of --webhook-config (default: {WEBHOOK_NAME})",
    )
    parser.add_argument(
        "--exempt-namespace",
        metavar="NS",
        action="append",
        default=[],
        help="namespaces the policies exempt, as the webhook's --exempt-namespace (repeatable; prefix*)",
    )
    add_engine_option(parser)
    parser.set_defaults(func=run)


def _scope(args: argparse.Namespace) -> Scope:
    webhook = None
    if args.webhook_config:
        from celkeeper.cli.inputs import object_documents

        read, errors = object_documents([args.webhook_config])
        if errors:
            raise errors[0]
        entries = [
            w
            for d in read
            if d.kind == "ValidatingWebhookConfiguration"
            for w in d.data.get("webhooks") or ()
            if isinstance(w, dict) and w.get("name") == args.webhook_name
        ]
        if not entries:
            raise CelkeeperError(
                f"{args.webhook_config}: no ValidatingWebhookConfiguration with a webhook named "
                f"{args.webhook_name}"
            )
        webhook = WebhookScope.from_webhook(entries[0])
    return Scope(webhook=webhook, exempted_namespaces=tuple(sorted(set(args.exempt_namespace))))


def _documents(args: argparse.Namespace) -> tuple[list[Document], list[CelkeeperError]]:
    if args.cluster:
        if args.paths:
            raise CelkeeperError("give PATHs or --cluster, not both")
        from celkeeper.incluster.listing import policy_objects  # the kubernetes client loads only when needed

        objects = policy_objects(args.kubeconfig)
        return [Document.from_object(obj, f"cluster:{name}") for name, obj in objects], []
    if not args.paths:
        raise CelkeeperError("give the files or folders of the templates and constraints, or --cluster")
    parsed = files.read_all(args.paths)
    return list(parsed.documents), list(parsed.errors)


def run(args: argparse.Namespace) -> int:
    from celkeeper.cel import get_engine
    from celkeeper.policy import TemplateCompiler, build_policy_set
    from celkeeper.vap.plan import VapOptions, plan_vap

    documents, errors = _documents(args)
    policies = build_policy_set(documents, TemplateCompiler(get_engine(engine_name(args))))
    plan = plan_vap(
        policies,
        VapOptions(
            default_generate_vap=args.default_create_vap_for_templates,
            default_generate_binding=args.default_create_vap_binding_for_constraints,
            scope=_scope(args),
        ),
    )
    problems = [*errors, *policies.errors]
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    for err in plan.errors:
        print(f"error: {err}", file=sys.stderr)
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    objects = plan.objects()
    sys.stdout.write(_render(objects, args.output))
    skipped = [t.name for t in plan.templates if not t.generate]
    made = sum(1 for t in plan.templates if t.policy is not None)
    bindings = sum(1 for c in plan.constraints if c.binding is not None)
    summary = f"celkeeper vap: {made} policies, {bindings} bindings"
    if skipped:
        summary += f"; {len(skipped)} templates without generateVAP left out ({', '.join(skipped[:5])}"
        summary += ", ...)" if len(skipped) > 5 else ")"
    failed = len(problems) + len(plan.errors)
    if failed:
        summary += f"; {failed} errors"
    print(summary, file=sys.stderr)
    return 1 if failed else 0


def _render(objects: Sequence[dict[str, Any]], output: str) -> str:
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}, indent=2) + "\n"
    return to_yaml(objects) if objects else ""
