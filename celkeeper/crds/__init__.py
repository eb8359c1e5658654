"""CRDs as code (pure: no I/O, no Kubernetes client): celkeeper's own CRDs, a template's constraint CRD.

    static_crds()              -> CRDs of ConstraintTemplate, ConstraintTemplatePodStatus, ConstraintPodStatus
    constraint_template_crd(), constraint_template_pod_status_crd(), constraint_pod_status_crd()
    constraint_crd(template)   -> the CRD `<lowerkind>.constraints.celkeeper.io` for a template (plain dict)
    parameters_schema(template), match_schema(), structural_errors(schema)
    to_yaml(manifests), static_crd_files()
Names, label keys and per-pod status object names live in celkeeper.crds.names.
"""

from celkeeper.crds.constraint import (
    constraint_crd,
    constraint_schema,
    legacy_schema,
    parameters_schema,
    template_kind,
)
from celkeeper.crds.render import static_crd_files, to_yaml
from celkeeper.crds.schema import match_schema
from celkeeper.crds.static import (
    STATIC_CRDS,
    constraint_pod_status_crd,
    constraint_template_crd,
    constraint_template_pod_status_crd,
    static_crds,
)
from celkeeper.crds.structural import add_preserve_unknown_fields, fill_missing_types, structural_errors

__all__ = [
    "STATIC_CRDS",
    "add_preserve_unknown_fields",
    "constraint_crd",
    "constraint_pod_status_crd",
    "constraint_schema",
    "constraint_template_crd",
    "constraint_template_pod_status_crd",
    "fill_missing_types",
    "legacy_schema",
    "match_schema",
    "parameters_schema",
    "static_crd_files",
    "static_crds",
    "structural_errors",
    "template_kind",
    "to_yaml",
]
