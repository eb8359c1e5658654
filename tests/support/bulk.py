"""Many objects created fast through the real API server (for audit tests and benchmarks).

    created = create_many(cluster, objects, threads=8)     # POSTs in parallel; returns how many
    create_many(cluster, [Raw(path, json_bytes)])          # a body written by hand (e.g. nested deeper than
                                                           # Python's json goes)

Plain HTTPS POSTs of JSON with the admin's client certificate (urllib3, one connection per thread):
kubectl creates a few hundred objects a second, this a thousand or more. Each object's collection is
taken from its apiVersion, kind and namespace (the plural is the lower-case kind plus `s`, which is
right for the kinds used here: Pod, ConfigMap, Secret, Service, ServiceAccount, Namespace, and
constraint kinds).
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3

from tests.support.apiserver import ControlPlane


def collection_path(obj: Mapping[str, Any]) -> str:
    api_version = str(obj["apiVersion"])
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace:
        base += f"/namespaces/{namespace}"
    return f"{base}/{str(obj['kind']).lower()}s"


@dataclass(frozen=True)
class Raw:
    path: str  # the collection
    body: bytes


def create_many(cluster: ControlPlane, objects: Iterable[Mapping[str, Any] | Raw], threads: int = 8) -> int:
    """POST every object; raises RuntimeError with the first failure (after the others are done)."""
    pool = urllib3.PoolManager(
        maxsize=threads,
        cert_reqs="CERT_REQUIRED",
        ca_certs=str(cluster.ca_path),
        cert_file=str(cluster.pki_dir / "admin.crt"),
        key_file=str(cluster.pki_dir / "admin.key"),
        retries=False,
        timeout=urllib3.Timeout(connect=10, read=60),
    )
    work: queue.Queue[Mapping[str, Any] | Raw | None] = queue.Queue(maxsize=threads * 64)
    failures: list[str] = []
    created = [0] * threads

    def worker(index: int) -> None:
        while True:
            obj = work.get()
            if obj is None:
                return
            try:
                raw = obj if isinstance(obj, Raw) else Raw(collection_path(obj), json.dumps(obj).encode())
                response = pool.request(
                    "POST",
                    cluster.server_url + raw.path,
                    body=raw.body,
                    headers={"Content-Type": "application/json", "Accept": "application/json"},
                    preload_content=True,
                )
            except Exception as err:  # reported with the others; the worker goes on
                failures.append(repr(err))
                continue
            if response.status == 201:
                created[index] += 1
            elif len(failures) < 5:
                failures.append(f"{response.status} {response.data[:300]!r}")

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for thread in workers:
        thread.start()
    for obj in objects:
        work.put(obj)
    for _ in workers:
        work.put(None)
    for thread in workers:
        thread.join()
    pool.clear()
    if failures:
        raise RuntimeError(f"{len(failures)}+ creates failed, e.g. {failures[0]}")
    return sum(created)
