"""Names shared by everything that reads or writes celkeeper's custom resources.

API groups and versions, the label keys that link objects together, and the names of per-pod status
objects. Pure values and functions: the informer (writer) and tests (readers) use the same ones.
"""

from __future__ import annotations

import re

from celkeeper.errors import CelkeeperError

# --- API groups and versions ---------------------------------------------------------------------

TEMPLATES_GROUP = "templates.celkeeper.io"
TEMPLATES_VERSION = "v1"
TEMPLATES_API_VERSION = f"{TEMPLATES_GROUP}/{TEMPLATES_VERSION}"

CONSTRAINTS_GROUP = "constraints.celkeeper.io"
# like Gatekeeper: v1beta1 is stored; v1alpha1 and v1 are served with the same schema
CONSTRAINTS_STORAGE_VERSION = "v1beta1"
CONSTRAINTS_VERSIONS = ("v1beta1", "v1alpha1", "v1")

STATUS_GROUP = "status.celkeeper.io"
STATUS_VERSION = "v1beta1"
STATUS_API_VERSION = f"{STATUS_GROUP}/{STATUS_VERSION}"

# the kinds to sync for templates that read synced data: celkeeper's SyncSet (Gatekeeper's SyncSet
# and Config, in Gatekeeper's groups, are read too)
SYNCSET_GROUP = "syncset.celkeeper.io"
SYNCSET_VERSION = "v1alpha1"
SYNCSET_KIND = "SyncSet"
GATEKEEPER_SYNCSET_GROUP = "syncset.gatekeeper.sh"
GATEKEEPER_CONFIG_GROUP = "config.gatekeeper.sh"
GATEKEEPER_CONFIG_VERSION = "v1alpha1"
GATEKEEPER_CONFIG_KIND = "Config"
# Gatekeeper reads the Config named `config` in its own namespace only; celkeeper in the pods' namespace
CONFIG_NAME = "config"

# Gatekeeper's groups, accepted wherever a template or constraint document is read
GATEKEEPER_TEMPLATES_GROUP = "templates.gatekeeper.sh"
GATEKEEPER_CONSTRAINTS_GROUP = "constraints.gatekeeper.sh"

TEMPLATE_KIND = "ConstraintTemplate"
TEMPLATE_POD_STATUS_KIND = "ConstraintTemplatePodStatus"
CONSTRAINT_POD_STATUS_KIND = "ConstraintPodStatus"
MUTATOR_POD_STATUS_KIND = "MutatorPodStatus"  # what a pod has loaded of one of Gatekeeper's mutators
#: what a pod enforces of one of Kubernetes' admission policies or bindings (--enforce-admission-policies)
ADMISSION_POLICY_POD_STATUS_KIND = "AdmissionPolicyPodStatus"
SYNC_POD_STATUS_KIND = "SyncPodStatus"

# `kubectl get constraints` lists every constraint kind through these categories (as Gatekeeper)
CONSTRAINT_CATEGORIES = ("constraint", "constraints")

# --- labels --------------------------------------------------------------------------------------

# on celkeeper's own (static) CRDs
SYSTEM_LABEL = "celkeeper.io/system"
# on every constraint CRD: "yes", and the name of the template that made it
CONSTRAINT_CRD_LABEL = "celkeeper.io/constraint"
TEMPLATE_LABEL = "celkeeper.io/template"

# on per-pod status objects (Gatekeeper's internal.gatekeeper.sh/* keys, in celkeeper's domain)
POD_LABEL = "internal.celkeeper.io/pod"
TEMPLATE_NAME_LABEL = "internal.celkeeper.io/constrainttemplate-name"
CONSTRAINT_NAME_LABEL = "internal.celkeeper.io/constraint-name"
CONSTRAINT_KIND_LABEL = "internal.celkeeper.io/constraint-kind"
MUTATOR_NAME_LABEL = "internal.celkeeper.io/mutator-name"
MUTATOR_KIND_LABEL = "internal.celkeeper.io/mutator-kind"
ADMISSION_POLICY_NAME_LABEL = "internal.celkeeper.io/admission-policy-name"
ADMISSION_POLICY_KIND_LABEL = "internal.celkeeper.io/admission-policy-kind"

# --- names ---------------------------------------------------------------------------------------

_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_NAME_LENGTH = 253


def is_dns1035_label(value: str) -> bool:
    """Kubernetes' IsDNS1035Label: what CRD plural, singular, kind (lower-cased) and short names must be."""
    return len(value) <= 63 and _DNS1035.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= MAX_NAME_LENGTH and _DNS1123_SUBDOMAIN.fullmatch(value) is not None


def constraint_crd_name(kind: str) -> str:
    """`<lowerkind>.constraints.celkeeper.io`, the name of the CRD that defines a template's constraints."""
    return f"{kind.lower()}.{CONSTRAINTS_GROUP}"


def pack_name(*parts: str) -> str:
    """Gatekeeper's dashPacker: join parts with `-`, doubling each `-` inside a part, so the parts can be
    read back unambiguously. Parts must be non-empty and must not begin or end with `-`.
    """
    if not parts:
        raise CelkeeperError("cannot make a status name from no parts")
    for part in parts:
        if not part:
            raise CelkeeperError("cannot make a status name from an empty part")
        if part.startswith("-") or part.endswith("-"):
            raise CelkeeperError(f"cannot make a status name from {part!r}: it begins or ends with '-'")
    return "-".join(part.replace("-", "--") for part in parts)


def unpack_name(name: str) -> tuple[str, ...]:
    """The inverse of pack_name."""
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(name):
        if name[i] == "-":
            if i + 1 < len(name) and name[i + 1] == "-":
                current.append("-")
                i += 2
                continue
            parts.append("".join(current))
            current = []
        else:
            current.append(name[i])
        i += 1
    parts.append("".join(current))
    return tuple(parts)


def _checked_status_name(name: str) -> str:
    if not is_dns1123_subdomain(name):
        raise CelkeeperError(
            f"status object name {name!r} is not a valid Kubernetes name "
            f"(lower-case DNS subdomain of at most {MAX_NAME_LENGTH} characters)"
        )
    return name


def template_pod_status_name(pod: str, template: str) -> str:
    """Name of the ConstraintTemplatePodStatus that pod `pod` writes for template `template`."""
    return _checked_status_name(pack_name(pod, template))


def constraint_pod_status_name(pod: str, kind: str, constraint: str) -> str:
    """Name of the ConstraintPodStatus that pod `pod` writes for constraint `constraint` of kind `kind`."""
    return _checked_status_name(pack_name(pod, kind.lower(), constraint))


def mutator_pod_status_name(pod: str, kind: str, mutator: str) -> str:
    """Name of the MutatorPodStatus that pod `pod` writes for mutator `mutator` of kind `kind` (Gatekeeper's
    KeyForMutatorID: pod, lower-cased kind and name, dash-packed)."""
    return _checked_status_name(pack_name(pod, kind.lower(), mutator))


def admission_policy_pod_status_name(pod: str, kind: str, policy: str) -> str:
    """Name of the AdmissionPolicyPodStatus that pod `pod` writes for the admission policy or binding
    `policy` of kind `kind` (pod, lower-cased kind and name, dash-packed)."""
    return _checked_status_name(pack_name(pod, kind.lower(), policy))


def sync_pod_status_name(pod: str) -> str:
    """Name of the SyncPodStatus that pod `pod` writes (one per pod): the pod's name."""
    return _checked_status_name(pod)


def template_pod_status_labels(pod: str, template: str) -> dict[str, str]:
    return {TEMPLATE_NAME_LABEL: template, POD_LABEL: pod}


def constraint_pod_status_labels(pod: str, kind: str, constraint: str) -> dict[str, str]:
    # the template's name is its kind in lower case (a Gatekeeper rule)
    return {
        CONSTRAINT_NAME_LABEL: constraint,
        CONSTRAINT_KIND_LABEL: kind,
        TEMPLATE_NAME_LABEL: kind.lower(),
        POD_LABEL: pod,
    }


def mutator_pod_status_labels(pod: str, kind: str, mutator: str) -> dict[str, str]:
    return {MUTATOR_NAME_LABEL: mutator, MUTATOR_KIND_LABEL: kind, POD_LABEL: pod}


def admission_policy_pod_status_labels(pod: str, kind: str, policy: str) -> dict[str, str]:
    return {ADMISSION_POLICY_NAME_LABEL: policy, ADMISSION_POLICY_KIND_LABEL: kind, POD_LABEL: pod}
