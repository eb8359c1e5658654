"""A list in chunks (`limit` / `continue`), so that a consumer never holds more than one page.

    for page in pages(client, resource, limit=500):
        for obj in page.items: ...
        del page        # not held while the next page is read and parsed

The generator holds no page while it reads the next one; a consumer that keeps its loop variable bound
holds the previous page until the next has been read and parsed (two pages at once).

A continue token that expires while the list is under way (410 Gone: etcd compacted the revision the
list started at, e.g. the list took longer than the compaction interval) restarts the list from the
beginning, at most `max_restarts` times. The API server returns objects in the order of their keys
(namespace/name), which is how `continue` works: so a restarted list leaves out every object up to
the last one already delivered, and each object is delivered once. Objects created meanwhile before
that point are not delivered (they were not there when the list started); objects changed meanwhile
are delivered as they were when first listed.

Adapter (celkeeper.kube): any collection, any consumer (the audit lists every kind with it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from celkeeper.kube.client import ApiError, Client, Page
from celkeeper.kube.resources import Resource, object_key

log = logging.getLogger("celkeeper.kube")

MAX_RESTARTS = 3


def pages(
    client: Client,
    resource: Resource,
    limit: int,
    *,
    max_restarts: int = MAX_RESTARTS,
    on_restart: Callable[[ApiError], None] | None = None,
) -> Iterator[Page]:
    """The pages of `resource` (a page may be empty); ApiError for any failure other than an expired
    continue token, and for one more expiry than `max_restarts`."""
    token = ""
    delivered_up_to: str | None = None  # key of the last object delivered
    restarts = 0
    while True:
        try:
            page = client.list_page(resource, limit, token)
        except ApiError as err:
            if not (err.gone and token) or restarts >= max_restarts:
                raise
            restarts += 1
            log.info(
                "listing %s: the continue token expired (%s); listing again from the start, "
                "without what was delivered already",
                resource,
                err,
            )
            if on_restart is not None:
                on_restart(err)
            token = ""
            continue
        items = page.items
        if delivered_up_to is not None and restarts:
            items = [item for item in items if object_key(item) > delivered_up_to]
        if items:
            delivered_up_to = object_key(items[-1])
        token = page.continue_token
        yield page if items is page.items else Page(items, token, page.resource_version)
        if not token:
            return
        del page, items  # not held while the next page is read
