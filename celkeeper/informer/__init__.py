"""The informer process: lists a policy Source and publishes snapshots for the webhook's workers.

Source (protocol), Listing           celkeeper.informer.source
FolderSource(directory)              the embedded default: a folder of YAML/JSON files
KubernetesSource(KubernetesOptions)  the cluster: templates, constraints, namespaces; runs
                                     celkeeper's controllers (celkeeper.incluster) in the informer
                                     process (celkeeper.informer.kubernetes)
Informer(source, state, settings)    one publication loop (`step()` for one round)
run_informer(source_factory, ...)    the process entry the Gunicorn master forks
"""

from typing import TYPE_CHECKING, Any

from celkeeper.informer.folder import FolderSource, FolderSourceError
from celkeeper.informer.loop import Informer
from celkeeper.informer.process import run_informer
from celkeeper.informer.source import Listing, Source

if TYPE_CHECKING:
    from celkeeper.informer.kubernetes import KubernetesOptions, KubernetesSource


def __getattr__(name: str) -> Any:
    """The cluster source is imported when first named: it brings the controllers and the Kubernetes
    adapter, which the server's master (it imports this package) and the folder source do not need."""
    if name in ("KubernetesOptions", "KubernetesSource"):
        from celkeeper.informer import kubernetes

        return getattr(kubernetes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FolderSource",
    "FolderSourceError",
    "Informer",
    "KubernetesOptions",
    "KubernetesSource",
    "Listing",
    "Source",
    "run_informer",
]
