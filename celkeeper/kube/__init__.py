"""The Kubernetes API adapter: the only part of celkeeper that imports the `kubernetes` package or
speaks HTTP to the API server. It knows Kubernetes, not celkeeper: no templates, constraints or status
of celkeeper's own (those are celkeeper.incluster's, which reaches the API only through this package).

KubeClient.connect(kubeconfig)          the real API (Client protocol: list, list_page, watch, get, ...)
default_kubeconfig(), context_namespace()   kubeconfig files as kubectl reads them
pages(client, resource, limit)          a list in chunks; an expired continue token restarts it
discover(client)                        every served resource in its preferred version (ApiResource)
Reflector, WatchManager, Event          list+watch per resource; registrars, union of intents, routing
Resource, NAMESPACES, pods(), ...       API collections as plain values; Kubernetes' built-in ones
covers(), with_digest(), up_to_date()   desired versus stored (pure)
write_desired(), delete_if_present()    leaderless writes: conflict -> re-read, stop when current
update_status()                         a status subresource write: conflict -> re-read, ask again
loads_deep()                            JSON as deep as the API server stores it (celkeeper.kube.jsondeep)
"""

from celkeeper.kube.client import ApiError, Client, KubeClient, Listed, Page, WatchEvent, WatchStream
from celkeeper.kube.compare import covers, for_update, up_to_date, with_digest, with_resource_version
from celkeeper.kube.discovery import ApiResource, Discovered, discover
from celkeeper.kube.kubeconfig import context_namespace, default_kubeconfig
from celkeeper.kube.manager import SYNCED, Event, WatchManager
from celkeeper.kube.paging import pages
from celkeeper.kube.reflector import Reflector, Timing
from celkeeper.kube.resources import NAMESPACES, Resource, pods
from celkeeper.kube.writes import delete_if_present, update_status, write_desired

__all__ = [
    "NAMESPACES",
    "SYNCED",
    "ApiError",
    "ApiResource",
    "Client",
    "Discovered",
    "Event",
    "KubeClient",
    "Listed",
    "Page",
    "Reflector",
    "Resource",
    "Timing",
    "WatchEvent",
    "WatchManager",
    "WatchStream",
    "context_namespace",
    "covers",
    "default_kubeconfig",
    "delete_if_present",
    "discover",
    "for_update",
    "pages",
    "pods",
    "up_to_date",
    "update_status",
    "with_digest",
    "with_resource_version",
    "write_desired",
]
