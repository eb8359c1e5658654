"""Synced data (referential templates): the cost of an update and of a lookup with N cached objects, and
the memory.

With N Ingresses (default 10,000, ~1.3 KB of JSON each, in 100 namespaces) in the data store
(celkeeper.snapshot.datastore, what the informer writes):

- update: one watch event written (one transaction: an object replaced), median; the same with 100
  events per transaction (the writer batches what arrives together); and, for comparison, what sharing
  the cache as a whole snapshot per change would cost (JSON of every object written atomically);
- the first list: N objects stored;
- lookup, per decision of one Ingress CREATE (AdmissionReview validation + decide, the engine reading
  the store) with referential/'s unique-ingress-host (a scan of every synced Ingress), with a template
  reading one object by name (data.inventory.namespace[ns][apiVersion].Ingress[name]), and with a
  template that reads no data (the baseline), per engine (cel-python only with --engine all: it reads
  every object of the kind per request);
- memory: the store's size on disk, the growth of this process's RSS while deciding (a worker's cost:
  its connections' page caches and what one request decodes), and the Python memory the informer's
  watch cache holds for N objects (tracemalloc).

    .venv/bin/python bench/refdata.py [--objects N] [--rounds R] [--engine cel-go|cel-python|all]
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from celkeeper.cel import get_engine
from celkeeper.cel.inventory import Gvk, Put
from celkeeper.documents import parse_documents
from celkeeper.localfiles import write_atomic
from celkeeper.model import EnforcementPoint
from celkeeper.policy import TemplateCompiler, build_policy_set
from celkeeper.review import SyncedData, decide, parse_admission_review
from celkeeper.snapshot.datastore import DataStore

ROOT = Path(__file__).resolve().parent.parent
INGRESS = Gvk("networking.k8s.io", "v1", "Ingress")

POINT_TEMPLATE = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8singressbyname
  annotations:
    metadata.gatekeeper.sh/requires-sync-data: >-
      [[{"groups": ["networking.k8s.io"], "versions": ["v1"], "kinds": ["Ingress"]}]]
spec:
  crd: {spec: {names: {kind: K8sIngressByName}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: >-
            !(object.metadata.namespace in data.inventory.namespace) ||
            !("networking.k8s.io/v1" in data.inventory.namespace[object.metadata.namespace]) ||
            !("Ingress" in data.inventory.namespace[object.metadata.namespace]["networking.k8s.io/v1"]) ||
            !((object.metadata.name + "-old") in
              data.inventory.namespace[object.metadata.namespace]["networking.k8s.io/v1"].Ingress)
          message: an ingress of the same name with -old exists
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sIngressByName
metadata: {name: by-name}
spec: {match: {kinds: [{apiGroups: ["networking.k8s.io"], kinds: ["Ingress"]}]}}
"""

BASELINE_TEMPLATE = """
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8singresshosts}
spec:
  crd: {spec: {names: {kind: K8sIngressHosts}}}
  targets:
  - target: admission.k8s.gatekeeper.sh
    code:
    - engine: K8sNativeValidation
      source:
        validations:
        - expression: object.spec.rules.all(r, has(r.host) && r.host.endsWith(".example.com"))
          message: hosts must be under example.com
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sIngressHosts
metadata: {name: hosts}
spec: {match: {kinds: [{apiGroups: ["networking.k8s.io"], kinds: ["Ingress"]}]}}
"""


def ingress(i: int, namespace: str, host: str | None = None) -> dict[str, Any]:
    """An Ingress as the API server stores it (managed fields and all): ~1.3 KB of JSON."""
    name = f"web-{i}"
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"0c3f{i:08d}-1a2b-4c3d-9e8f-0123456789ab",
            "resourceVersion": str(1000 + i),
            "generation": 1,
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"app": name, "team": f"team-{i % 17}"},
            "annotations": {"nginx.ingress.kubernetes.io/rewrite-target": "/"},
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": "networking.k8s.io/v1",
                    "time": "2026-12-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {".": {}, "f:nginx.ingress.kubernetes.io/rewrite-target": {}},
                            "f:labels": {".": {}, "f:app": {}, "f:team": {}},
                        },
                        "f:spec": {"f:rules": {}, "f:tls": {}},
                    },
                }
            ],
        },
        "spec": {
            "tls": [{"hosts": [host or f"{name}.{namespace}.example.com"], "secretName": f"{name}-tls"}],
            "rules": [
                {
                    "host": host or f"{name}.{namespace}.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": name, "port": {"number": 8080}}},
                            }
                        ]
                    },
                }
            ],
        },
        "status": {"loadBalancer": {}},
    }


def review(obj: dict[str, Any], uid: int) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"u-{uid}",
            "kind": {"group": "networking.k8s.io", "version": "v1", "kind": "Ingress"},
            "resource": {"group": "networking.k8s.io", "version": "v1", "resource": "ingresses"},
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": obj,
        },
    }


def median_us(fn: Callable[[], object], rounds: int) -> float:
    fn()
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def policies(engine: Any, text: str) -> Any:
    parsed = parse_documents(text.lstrip("\n"), "bench.yaml")
    built = build_policy_set(parsed.documents, TemplateCompiler(engine))
    assert not built.errors, built.errors
    return built


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--engine", choices=("cel-go", "cel-python", "all"), default="cel-go")
    args = parser.parse_args()
    n = args.objects
    namespaces = [f"team-{i}" for i in range(100)]
    objects = [ingress(i, namespaces[i % len(namespaces)]) for i in range(n)]
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-refdata-") as tmp:
        path = Path(tmp) / "data.db"
        store = DataStore(path)
        started = time.perf_counter()
        for at in range(0, n, 500):  # as the writer stores a list: batches of 500
            store.apply(Put(o) for o in objects[at : at + 500])
        first_list = time.perf_counter() - started
        store.checkpoint()
        print(
            f"synced data, {n:,} Ingresses (~{len(json.dumps(objects[0])):,} B of JSON each), "
            f"{len(namespaces)} namespaces"
        )
        print(
            f"  first list stored:                 {first_list:.2f} s "
            f"({first_list / n * 1e6:.0f} us per object)"
        )
        database, log = store.size()
        print(
            f"  store on disk:                     {database / 2**20:.1f} MiB (+ {log / 2**20:.1f} MiB log)"
        )

        counter = iter(range(10**9))

        def one_update() -> None:
            i = next(counter) % n
            store.apply([Put(objects[i])])

        def batch_update() -> None:
            i = next(counter) % (n - 100)
            store.apply(Put(o) for o in objects[i : i + 100])

        single = median_us(one_update, max(args.rounds * 4, 200))
        batched = median_us(batch_update, max(args.rounds, 20)) / 100
        snapshot_path = Path(tmp) / "snapshot.json"

        def whole_snapshot() -> None:
            write_atomic(snapshot_path, json.dumps(objects).encode())

        whole = median_us(whole_snapshot, 5)
        store.checkpoint()
        print(f"  update, one event per transaction: {single:,.0f} us")
        print(f"  update, 100 events per transaction: {batched:,.0f} us per event")
        print(
            f"  a whole snapshot per update instead: {whole / 1000:,.0f} ms "
            f"({whole / single:,.0f}x one event)"
        )

        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        cache = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": json.loads(json.dumps(o))
            for o in objects
        }
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        del cache
        gc.collect()
        print(f"  the informer's watch cache of them: {held / 2**20:.0f} MiB of Python objects")

        engines = ["cel-go", "cel-python"] if args.engine == "all" else [args.engine]
        scan_text = "\n---\n".join(
            (ROOT / "referential" / "unique-ingress-host" / f).read_text()
            for f in ("template.yaml", "constraint.yaml")
        )
        for name in engines:
            engine = get_engine(name)
            inventory = engine.open_inventory(str(path))
            data = SyncedData(inventory, frozenset({INGRESS}))
            rss_start = rss_mib()
            fresh = ingress(n + 1, namespaces[0], host=f"new-{n}.example.com")
            body = review(fresh, 0)
            rounds = args.rounds if name == "cel-go" else max(3, args.rounds // 10)
            print(f"  per decision, one Ingress CREATE ({name}):")
            results: dict[str, float] = {}
            for label, text in (
                ("no data (baseline)", BASELINE_TEMPLATE),
                ("one object by name", POINT_TEMPLATE),
                ("unique host: a scan of every Ingress", scan_text),
            ):
                policy_set = policies(engine, text)

                def decision(policy_set: Any = policy_set, body: Any = body, data: Any = data) -> None:
                    request = parse_admission_review(body)
                    found = decide(request, policy_set, lambda _: None, EnforcementPoint.WEBHOOK, data=data)
                    assert not found.results, found.results

                results[label] = median_us(decision, rounds)
                ratio = results[label] / results["no data (baseline)"]
                print(f"    {label:38s} {results[label]:>11,.0f} us  (x{ratio:,.1f})")
            taken = review(ingress(n + 2, namespaces[1], host=objects[n // 2]["spec"]["rules"][0]["host"]), 1)
            policy_set = policies(engine, scan_text)
            denied = decide(
                parse_admission_review(taken), policy_set, lambda _: None, EnforcementPoint.WEBHOOK, data=data
            )
            assert denied.results, "the taken host must be denied"
            print(f"    this process's RSS grew by {rss_mib() - rss_start:.0f} MiB while deciding")
            inventory.close()
        store.close()
    print("(a shared, loaded machine: compare the ratios of one run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
