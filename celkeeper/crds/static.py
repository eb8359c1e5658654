"""celkeeper's own CRDs: ConstraintTemplate, and the per-pod status kinds.

Their schemas mirror Gatekeeper's (frameworks' ConstraintTemplate v1; gatekeeper apis/status/v1beta1),
in celkeeper's API groups, plus the fields celkeeper reports (the snapshot generation a pod has loaded).
`celkeeper crds` renders them to YAML; crds/*.yaml are that output, committed.
"""

from __future__ import annotations

import copy

from celkeeper.crds import names
from celkeeper.crds.schema import (
    AGE_COLUMN,
    Schema,
    any_value,
    array,
    boolean,
    int64,
    obj,
    printer_column,
    root,
    status_error,
    string,
)
from celkeeper.model import JsonObject

Manifest = JsonObject

OPERATIONS = ["*", "CREATE", "DELETE", "UPDATE", "CONNECT"]


def crd(
    group: str,
    kind: str,
    plural: str,
    scope: str,
    versions: list[Manifest],
    *,
    short_names: list[str] | None = None,
    categories: list[str] | None = None,
    labels: dict[str, str] | None = None,
) -> Manifest:
    """A CustomResourceDefinition (apiextensions.k8s.io/v1) as a plain dict."""
    crd_names: JsonObject = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        crd_names["shortNames"] = list(short_names)
    if categories:
        crd_names["categories"] = list(categories)
    metadata: JsonObject = {"name": f"{plural}.{group}"}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {"group": group, "names": crd_names, "scope": scope, "versions": versions},
    }


def version(
    name: str,
    schema: Schema,
    *,
    storage: bool,
    columns: list[Schema] | None = None,
    status_subresource: bool = False,
) -> Manifest:
    entry: Manifest = {
        "name": name,
        "served": True,
        "storage": storage,
        "schema": {"openAPIV3Schema": copy.deepcopy(schema)},
    }
    if columns:
        entry["additionalPrinterColumns"] = copy.deepcopy(columns)
    if status_subresource:
        entry["subresources"] = {"status": {}}
    return entry


# --- ConstraintTemplate ---------------------------------------------------------------------------


def _template_spec() -> Schema:
    code = obj(
        {
            "engine": string("The engine that evaluates the source: K8sNativeValidation (CEL) or Rego."),
            "source": any_value(
                "The source for that engine; for K8sNativeValidation: validations, "
                "variables, matchCondition, failurePolicy."
            ),
        },
        "Policy source code for one engine.",
        required=["engine", "source"],
    )
    target = obj(
        {
            "target": string("The target the code is written for: admission.k8s.gatekeeper.sh."),
            "rego": string("Rego source (Gatekeeper's engine; celkeeper does not run it)."),
            "libs": array(string(), "Rego libraries (Gatekeeper's engine; celkeeper does not run them)."),
            "code": array(
                code,
                "The source code, one entry per engine.",
                **{"x-kubernetes-list-map-keys": ["engine"], "x-kubernetes-list-type": "map"},
            ),
            "operations": array(
                string("An admission operation.", enum=OPERATIONS),
                "The operations the template applies to (default: all).",
            ),
        },
        "Where and how constraints of this template are checked.",
    )
    validation = obj(
        {
            "openAPIV3Schema": obj(
                description="The schema of the constraints' spec.parameters.", preserve_unknown=True
            ),
            "legacySchema": {
                "description": "If true, the schema is made open (unknown parameters are kept), as for "
                "v1beta1 templates.",
                "type": "boolean",
                "default": False,
            },
        },
        "The schema of the constraint parameters.",
        extra={"default": {"legacySchema": False}},
    )
    return obj(
        {
            "crd": obj(
                {
                    "spec": obj(
                        {
                            "names": obj(
                                {
                                    "kind": string(
                                        "The kind of the constraints; the template's name must "
                                        "be this kind in lower case."
                                    ),
                                    "shortNames": array(string(), "Short names of the constraint kind."),
                                },
                                "The names of the constraint kind.",
                            ),
                            "validation": validation,
                        },
                        "The CRD made for the constraint kind.",
                    )
                },
                "The constraint kind this template defines.",
            ),
            "targets": array(target, "The code and its target (exactly one)."),
        },
        "What the template checks and the kind of constraints it defines.",
    )


def vap_generation_status() -> Schema:
    """Gatekeeper's VAPGenerationStatus (apis/status/v1beta1): whether the pod made the template's
    ValidatingAdmissionPolicy."""
    return obj(
        {
            "state": string("generated, or error when the pod could not make it."),
            "observedGeneration": int64("The generation of the template it reflects."),
            "warning": string("Why it is not generated, or where its verdicts differ from the webhook's."),
        },
        "The ValidatingAdmissionPolicy generated from the template (generateVAP).",
    )


def enforcement_point_status() -> Schema:
    """Gatekeeper's EnforcementPointStatus (apis/status/v1beta1): the constraint at one enforcement point."""
    return obj(
        {
            "enforcementPoint": string("The enforcement point, e.g. vap.k8s.io."),
            "state": string("Its state there: for vap.k8s.io generated, waiting or error."),
            "message": string("Details."),
            "observedGeneration": int64("The generation of the constraint it reflects."),
        },
        "The state of the constraint at one enforcement point.",
        required=["enforcementPoint", "state"],
    )


def _by_pod_entry(description: str, extra: dict[str, Schema]) -> Schema:
    return obj(
        {
            "id": string("The pod that reported this status."),
            "observedGeneration": int64("The generation of the object this pod has loaded."),
            "operations": array(string(), "The operations this pod performs (e.g. webhook, audit)."),
            "snapshotGeneration": int64("The generation of the pod's policy snapshot that includes it."),
            "errors": array(status_error(), "Errors this pod met loading it."),
            **extra,
        },
        description,
        preserve_unknown=True,
    )


def constraint_template_crd() -> Manifest:
    """The CRD of ConstraintTemplate (`constrainttemplates.templates.celkeeper.io`)."""
    status = obj(
        {
            "created": boolean("The constraint CRD of this template exists."),
            "byPod": array(
                _by_pod_entry(
                    "What one pod observed.",
                    {
                        "templateUID": string("The template's UID."),
                        "vapGenerationStatus": vap_generation_status(),
                    },
                ),
                "What each celkeeper pod has loaded of this template.",
            ),
        },
        "The observed state of the template, aggregated from every pod.",
    )
    schema = root(
        {"spec": _template_spec(), "status": status},
        "A ConstraintTemplate: CEL code and a parameter schema; creating one creates a constraint kind.",
    )
    columns = [
        printer_column("Kind", "string", ".spec.crd.spec.names.kind", "The constraint kind it defines."),
        printer_column("Created", "boolean", ".status.created", "Its constraint CRD exists."),
        AGE_COLUMN,
    ]
    return crd(
        names.TEMPLATES_GROUP,
        names.TEMPLATE_KIND,
        "constrainttemplates",
        "Cluster",
        [version(names.TEMPLATES_VERSION, schema, storage=True, columns=columns, status_subresource=True)],
        labels={names.SYSTEM_LABEL: "yes"},
    )


# --- per-pod status -------------------------------------------------------------------------------


def _pod_status_common() -> dict[str, Schema]:
    return {
        "id": string("The pod that writes this status (POD_NAME, else its host name)."),
        "operations": array(string(), "The operations this pod performs (e.g. webhook, audit)."),
        "observedGeneration": int64("The generation of the object this pod has loaded."),
        "snapshotGeneration": int64(
            "The generation of the pod's policy snapshot that its workers have loaded, which includes "
            "observedGeneration of the object."
        ),
        "errors": array(status_error(), "Errors the pod met loading the object."),
    }


_POD_COLUMNS = [
    printer_column("Pod", "string", ".status.id", "The pod that reports."),
    printer_column("Generation", "integer", ".status.observedGeneration", "The generation it has loaded."),
]


def _pod_status_crd(kind: str, plural: str, status: Schema, description: str, enforced: str = "") -> Manifest:
    """The CRD of one kind of per-pod status (namespaced, in celkeeper's status group); `enforced`: the
    description of its Enforced column, when it has one."""
    columns = [*_POD_COLUMNS]
    if enforced:
        columns.append(printer_column("Enforced", "boolean", ".status.enforced", enforced))
    return crd(
        names.STATUS_GROUP,
        kind,
        plural,
        "Namespaced",
        [
            version(
                names.STATUS_VERSION,
                root({"status": status}, description),
                storage=True,
                columns=[*columns, AGE_COLUMN],
            )
        ],
        labels={names.SYSTEM_LABEL: "yes"},
    )


def constraint_template_pod_status_crd() -> Manifest:
    """The CRD of ConstraintTemplatePodStatus: what one pod has loaded of one template (namespaced)."""
    status = obj(
        {
            **_pod_status_common(),
            "templateUID": string("The UID of the template, to notice a template deleted and recreated."),
            "vapGenerationStatus": vap_generation_status(),
        },
        "What the pod has loaded of the template.",
    )
    return _pod_status_crd(
        names.TEMPLATE_POD_STATUS_KIND,
        "constrainttemplatepodstatuses",
        status,
        "What one celkeeper pod has loaded of one ConstraintTemplate.",
    )


def constraint_pod_status_crd() -> Manifest:
    """The CRD of ConstraintPodStatus: what one pod has loaded of one constraint (namespaced)."""
    status = obj(
        {
            **_pod_status_common(),
            "constraintUID": string(
                "The UID of the constraint, to notice a constraint deleted and recreated."
            ),
            "enforced": boolean("The pod's workers enforce this generation of the constraint."),
            "expectedPods": int64("How many pods this pod was told to expect (--expected-pods)."),
            "enforcementPointsStatus": array(enforcement_point_status(), "The state per enforcement point."),
        },
        "What the pod has loaded of the constraint.",
    )
    return _pod_status_crd(
        names.CONSTRAINT_POD_STATUS_KIND,
        "constraintpodstatuses",
        status,
        "What one celkeeper pod has loaded of one constraint.",
        enforced="The pod enforces it.",
    )


def mutator_pod_status_crd() -> Manifest:
    """The CRD of MutatorPodStatus: what one pod has loaded of one of Gatekeeper's mutators (namespaced;
    Gatekeeper's status.gatekeeper.sh MutatorPodStatus, in celkeeper's status group)."""
    status = obj(
        {
            **_pod_status_common(),
            "errors": array(
                obj(
                    {
                        "type": string("The class of error (Gatekeeper's: ErrConflictingSchema), if any."),
                        "message": string("What is wrong, one line."),
                    },
                    "An error met adding the mutator (Gatekeeper's MutatorError).",
                    required=["message"],
                ),
                "Errors the pod met loading the mutator.",
            ),
            "mutatorUID": string("The UID of the mutator, to notice a mutator deleted and recreated."),
            "enforced": boolean("The pod's workers apply this generation of the mutator."),
            "expectedPods": int64("How many pods this pod was told to expect (--expected-pods)."),
        },
        "What the pod has loaded of the mutator.",
    )
    return _pod_status_crd(
        names.MUTATOR_POD_STATUS_KIND,
        "mutatorpodstatuses",
        status,
        "What one celkeeper pod has loaded of one of Gatekeeper's mutators.",
        enforced="The pod applies it.",
    )


def admission_policy_pod_status_crd() -> Manifest:
    """The CRD of AdmissionPolicyPodStatus: what one pod enforces of one of Kubernetes' admission policies
    or bindings (namespaced; written when the webhook enforces them: --enforce-admission-policies)."""
    status = obj(
        {
            **_pod_status_common(),
            "policyUID": string("The UID of the policy or binding, to notice one deleted and recreated."),
            "enforced": boolean("The pod's workers enforce this generation of the policy or binding."),
            "expectedPods": int64("How many pods this pod was told to expect (--expected-pods)."),
        },
        "What the pod enforces of the policy or binding.",
    )
    return _pod_status_crd(
        names.ADMISSION_POLICY_POD_STATUS_KIND,
        "admissionpolicypodstatuses",
        status,
        "What one celkeeper pod enforces of one Kubernetes admission policy or binding.",
        enforced="The pod enforces it.",
    )


# --- synced data -----------------------------------------------------------------------------------


def _gvk_entry(description: str) -> Schema:
    return obj(
        {
            "group": string('The API group ("" for the core group).'),
            "version": string("The version."),
            "kind": string("The kind."),
        },
        description,
    )


def sync_set_crd() -> Manifest:
    """The CRD of SyncSet (`syncsets.syncset.celkeeper.io`): kinds to sync, Gatekeeper's SyncSet in
    celkeeper's group (Gatekeeper's own `syncset.gatekeeper.sh` and Config are read too)."""
    spec = obj(
        {"gvks": array(_gvk_entry("One kind to sync."), "The kinds to sync.")},
        "The kinds whose objects celkeeper caches for templates that read synced data.",
    )
    schema = root(
        {"spec": spec}, "Kinds celkeeper syncs for templates that read synced data (data.inventory)."
    )
    return crd(
        names.SYNCSET_GROUP,
        names.SYNCSET_KIND,
        "syncsets",
        "Cluster",
        [version(names.SYNCSET_VERSION, schema, storage=True, columns=[AGE_COLUMN])],
        labels={names.SYSTEM_LABEL: "yes"},
    )


def sync_pod_status_crd() -> Manifest:
    """The CRD of SyncPodStatus: what one pod has synced, kind by kind, and how fresh (namespaced)."""
    kind = obj(
        {
            "group": string("The API group."),
            "version": string("The version."),
            "kind": string("The kind."),
            "resource": string("The resource it is listed and watched as (empty: not served)."),
            "synced": boolean("The first list of this kind completed: templates may rely on it."),
            "objects": int64("How many objects of this kind the pod holds."),
            "resourceVersion": string("The resourceVersion the pod's watch has reached."),
            "listedAt": string("When its last complete list was stored (RFC 3339).", format="date-time"),
            "observedAt": string(
                "When the pod last heard of this kind (an event or a bookmark; RFC 3339): its freshness.",
                format="date-time",
            ),
            "error": string("Why it is not synced (not served, forbidden, ...)."),
            "sources": array(string(), "What asks for it: SyncSet/<name>, Config/<namespace>/<name>."),
        },
        "One synced kind.",
    )
    status = obj(
        {
            "id": string("The pod that writes this status."),
            "kinds": array(kind, "Every kind the pod is asked to sync."),
            "excludedNamespaces": array(
                string(), "Namespaces not synced (the Config's spec.match for the sync process)."
            ),
            "errors": array(status_error(), "Problems with the sync configuration."),
        },
        "What the pod has synced.",
    )
    schema = root(
        {"status": status}, "What one celkeeper pod has synced for templates that read synced data."
    )
    columns = [
        printer_column("Pod", "string", ".status.id", "The pod that reports."),
        AGE_COLUMN,
    ]
    return crd(
        names.STATUS_GROUP,
        names.SYNC_POD_STATUS_KIND,
        "syncpodstatuses",
        "Namespaced",
        [version(names.STATUS_VERSION, schema, storage=True, columns=columns)],
        labels={names.SYSTEM_LABEL: "yes"},
    )


# file name in crds/ -> builder, in the order they are applied
STATIC_CRDS = {
    "constrainttemplate-customresourcedefinition.yaml": constraint_template_crd,
    "constrainttemplatepodstatus-customresourcedefinition.yaml": constraint_template_pod_status_crd,
    "constraintpodstatus-customresourcedefinition.yaml": constraint_pod_status_crd,
    "mutatorpodstatus-customresourcedefinition.yaml": mutator_pod_status_crd,
    "admissionpolicypodstatus-customresourcedefinition.yaml": admission_policy_pod_status_crd,
    "syncset-customresourcedefinition.yaml": sync_set_crd,
    "syncpodstatus-customresourcedefinition.yaml": sync_pod_status_crd,
}


def static_crds() -> list[Manifest]:
    """celkeeper's own CRDs (template, its pod statuses, SyncSet, sync pod status), in apply order."""
    return [build() for build in STATIC_CRDS.values()]
