"""kubeconfig files as kubectl reads them: which file, and a context's default namespace.

Adapter (celkeeper.kube): the `kubernetes` client reads the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def default_kubeconfig() -> str:
    """kubectl's: the first file of $KUBECONFIG, else ~/.kube/config."""
    configured = os.environ.get("KUBECONFIG", "")
    first = configured.split(os.pathsep)[0] if configured else ""
    return first or os.path.expanduser("~/.kube/config")


def context_namespace(kubeconfig: str, context: str | None) -> str:
    """The namespace of the kubeconfig's context (kubectl's default for objects without one)."""
    from celkeeper.kube.k8smodules import client_parts, kube_config  # the client loads only when needed

    config_exception = client_parts()[3]

    try:
        contexts, active = kube_config().list_kube_config_contexts(config_file=kubeconfig)
    except (config_exception, OSError, ValueError, TypeError):
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    found = (chosen or {}).get("context", {}).get("namespace") if isinstance(chosen, Mapping) else None
    return str(found) if found else "default"
