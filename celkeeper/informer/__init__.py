"""The informer process: lists a policy Source and publishes snapshots for the webhook's workers.

Source (protocol), Listing           celkeeper.informer.source
FolderSource(directory)              the embedded default: a folder of YAML/JSON files
KubernetesSource(KubernetesOptions)  the cluster: templates, constraints, namespaces; runs
                                     celkeeper's controllers (celkeeper.incluster) in the informer
                                     process (celkeeper.informer.kubernetes)
Informer(source, state, settings)    one publication loop (`step()` for one round)
run_informer(source_factory, ...)    the process entry the Gunicorn master forks
"""

from celkeeper.informer.folder import FolderSource, FolderSourceError
from celkeeper.informer.kubernetes import KubernetesOptions, KubernetesSource, check_kubernetes_config
from celkeeper.informer.loop import Informer
from celkeeper.informer.process import run_informer
from celkeeper.informer.source import Listing, Source

__all__ = [
    "FolderSource",
    "FolderSourceError",
    "Informer",
    "KubernetesOptions",
    "KubernetesSource",
    "Listing",
    "Source",
    "check_kubernetes_config",
    "run_informer",
]
