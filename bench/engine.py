"""CEL engine benchmark: both backends on a fixed battery of policy expressions over a ~4 KB Pod.

    .venv/bin/python bench/engine.py [--rounds N]

Prints, per backend: the median microseconds per evaluation of each expression (activation reused,
as the webhook does for one request), the median over the battery, the time to build a request
activation and to run the whole battery on a fresh one (which includes the lazy conversion of the
request), and the ratio between the backends. Targets for cel-expr-python: median <= 10 us per
expression, activation <= 100 us.

Then, for cel-expr-python, lists built by `map`/`filter` over many containers and maps built by
`transformMap` over many labels (a hostile request): milliseconds per evaluation with celkeeper's
chunked comprehensions (celkeeper.cel.appends) and without them (cel-cpp's appends copy the list,
`cel.@mapInsert` the map: quadratic), in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from celkeeper.cel import appends, get_engine
from celkeeper.cel.api import Engine
from tests.support.pods import container


def _container(name: str, image: str) -> dict[str, Any]:
    return container(name, image, env_vars=6, env_width=40, privileged=False)


POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-7d9f8b6c5-x2x4k",
        "namespace": "shop",
        "labels": {"app": "web", "team": "storefront", "tier": "frontend", "pod-template-hash": "7d9f8b6c5"},
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "owner": "alice"},
    },
    "spec": {
        "serviceAccountName": "web",
        "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            _container("web", "registry.example.com/shop/web:1.4.2"),
            _container("sidecar", "registry.example.com/infra/envoy:1.29.1"),
            _container("metrics", "registry.example.com/infra/exporter:0.9"),
        ],
        "initContainers": [_container("init", "registry.example.com/shop/init:0.3")],
        "volumes": [
            {"name": "config", "configMap": {"name": "web-config"}},
            {"name": "cache", "emptyDir": {}},
        ],
        "hostNetwork": False,
    },
}
REQUEST = {
    "operation": "CREATE",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "userInfo": {"username": "alice@example.com", "groups": ["developers"]},
    "namespace": "shop",
}
PARAMS = {
    "repos": ["registry.example.com/"],
    "labels": ["app", "team"],
    "exemptImages": ["busybox:*"],
    "memory": "1Gi",
}

BATTERY = [
    "object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
    "object.spec.containers.all(c, variables.params.repos.exists(r, c.image.startsWith(r)))",
    "!object.spec.containers.exists(c, c.image.endsWith(':latest'))",
    "object.spec.containers.all(c, !has(c.securityContext.privileged) || !c.securityContext.privileged)",
    "object.spec.containers.all(c, has(c.securityContext.runAsNonRoot) && c.securityContext.runAsNonRoot)",
    "object.spec.containers.all(c, c.securityContext.allowPrivilegeEscalation == false)",
    "object.spec.containers.all(c, c.securityContext.readOnlyRootFilesystem)",
    "object.spec.containers.all(c, 'ALL' in c.securityContext.capabilities.drop)",
    "object.spec.containers.all(c, has(c.resources.limits.cpu) && has(c.resources.limits.memory))",
    "object.spec.containers.all(c, c.ports.all(p, p.containerPort >= 1024))",
    "!has(object.spec.hostNetwork) || !object.spec.hostNetwork",
    "object.spec.volumes.all(v, !has(v.hostPath))",
    "variables.params.labels.all(l, l in object.metadata.labels)",
    "has(object.metadata.labels.app) && object.metadata.labels.app.matches('^[a-z-]+$')",
    "object.metadata.labels.all(k, v, size(k) <= 63 && size(v) <= 63)",
    "object.metadata.name.startsWith(object.metadata.labels.app)",
    "object.spec.securityContext.runAsUser >= 1000",
    "object.spec.?securityContext.?seccompProfile.?type.orValue('') == 'RuntimeDefault'",
    "request.operation == 'CREATE' && request.userInfo.username.endsWith('@example.com')",
    "object.spec.serviceAccountName != 'default'",
    "size(object.spec.containers) + size(object.spec.initContainers) <= 10",
    "object.spec.containers.map(c, c.name).join(', ')",
    "object.spec.containers.filter(c, c.image.contains('envoy')).map(c, c.name)",
    "quantity(object.spec.containers[0].resources.limits.memory).isLessThan(quantity('1Gi'))",
    "object.spec.containers.all(c, !has(c.resources.limits.memory) || "
    "quantity(c.resources.limits.memory).compareTo(quantity(variables.params.memory)) <= 0)",
]


def _median_us(fn: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000.0


def measure(engine: Engine, rounds: int) -> dict[str, Any]:
    programs = [engine.compile(src) for src in BATTERY]
    act = engine.activation(object=POD, old_object=None, request=REQUEST)
    for p in programs:  # warm: the lazy conversion happens once per activation
        engine.evaluate(p, act, params=PARAMS)
    per_expr = [_median_us(lambda p=p: engine.evaluate(p, act, params=PARAMS), rounds) for p in programs]
    build = _median_us(lambda: engine.activation(object=POD, old_object=None, request=REQUEST), rounds)

    def fresh_request() -> None:
        a = engine.activation(object=POD, old_object=None, request=REQUEST)
        for p in programs:
            engine.evaluate(p, a, params=PARAMS)

    request_rounds = max(5, rounds // 20)
    return {
        "per_expression_us": per_expr,
        "median_us": statistics.median(per_expr),
        "activation_us": build,
        "fresh_request_us": _median_us(fresh_request, request_rounds),
    }


LARGE = (
    "object.spec.containers.map(c, c.name).size() > 0",
    "object.spec.containers.filter(c, !c.image.startsWith('x')).size() > 0",
    "object.metadata.labels.transformMap(k, v, v + '-x').size() > 0",
)


def large_lists(rounds: int) -> None:
    """Chunked versus cel-cpp's own list-building comprehensions on large ranges."""
    engine = get_engine("cel-expr-python")
    print(f"{'lists/maps built over n containers/labels (cel-expr-python)':58} {'n':>6} {'chunked':>10} "
          f"{'as was':>10}")
    for src in LARGE:
        chunked = engine.compile(src)
        original = appends.linear_appends
        appends.linear_appends = lambda checked: checked  # type: ignore[assignment]
        try:
            own = engine.compile(src)
        finally:
            appends.linear_appends = original
        for n in (10, 100, 1000, 3000):
            containers = [_container(f"c{i}", f"registry.example.com/app:{i}") for i in range(n)]
            labels = {f"example.com/label-{i}": f"value-{i}" for i in range(n)}
            pod = {"metadata": {"labels": labels}, "spec": {"containers": containers}}
            act = engine.activation(object=pod, old_object=None, request=REQUEST)
            engine.evaluate(chunked, act)
            runs = max(3, rounds // (n // 10 + 1))
            times = [
                _median_us(lambda p=p, a=act: engine.evaluate(p, a), r)
                for p, r in ((chunked, runs), (own, 1 if n >= 1000 else runs))  # quadratic: once
            ]
            print(f"{src[:58]:58} {n:6} {times[0] / 1000:8.3f}ms {times[1] / 1000:8.3f}ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=400, help="evaluations per expression (default 400)")
    args = parser.parse_args()
    size = len(json.dumps(POD))
    print(f"Pod: {size} bytes of JSON; battery: {len(BATTERY)} expressions; rounds: {args.rounds}")
    results: dict[str, dict[str, Any]] = {}
    for name in ("cel-expr-python", "cel-python"):
        rounds = args.rounds if name == "cel-expr-python" else max(20, args.rounds // 20)
        results[name] = measure(get_engine(name), rounds)
    fast, slow = results["cel-expr-python"], results["cel-python"]
    print()
    print(f"{'expression':72} {'cel-expr-python':>16} {'cel-python':>12}")
    for src, a, b in zip(BATTERY, fast["per_expression_us"], slow["per_expression_us"], strict=True):
        print(f"{src[:72]:72} {a:14.2f}us {b:10.1f}us")
    print()
    for label, key in (
        ("median per evaluation", "median_us"),
        ("build a request activation", "activation_us"),
        ("whole battery, fresh activation", "fresh_request_us"),
    ):
        ratio = slow[key] / fast[key] if fast[key] else float("inf")
        print(
            f"{label:34} {fast[key]:12.2f}us {slow[key]:12.2f}us   "
            f"cel-python / cel-expr-python = {ratio:.1f}x"
        )
    ok = fast["median_us"] <= 10 and fast["activation_us"] <= 100
    print()
    large_lists(args.rounds)
    print()
    print(
        f"targets (cel-expr-python): median <= 10us: {'met' if fast['median_us'] <= 10 else 'MISSED'}; "
        f"activation <= 100us: {'met' if fast['activation_us'] <= 100 else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
