"""CEL engine benchmark: compiling, evaluating, and the cost budget on a hostile request, per engine.

    .venv/bin/python bench/engine.py [--engine cel-go|cel-python|all] [--rounds N]

Prints, per engine:
- compile: the median milliseconds to compile one expression of a fixed battery of policy
  expressions (expression level), and to compile a whole template (target: <= 2 ms per expression);
- evaluate: the median microseconds per expression of the battery on a ~4 KB Pod at the expression
  level (each call crosses into the engine on its own: what tests and explanations use; deciding
  uses one call per request, see bench/decision.py);
- unique names: a template checking that container names are unique (every container against
  every other: n^2 comprehension steps) on a Pod with 100 containers (Kubernetes allows it) and with
  1,000 (Kubernetes stops it with its cost budget): the decision and its wall time (target: 100
  allowed; 1,000 denied with Kubernetes' text, in bounded time).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from celkeeper.cel import ENGINES, RequestInput, TemplateSource, get_engine
from celkeeper.cel.api import Engine, ValidationSource
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
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "name": "web-7d9f8b6c5-x2x4k",
    "namespace": "shop",
    "operation": "CREATE",
    "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
    "dryRun": False,
}
PARAMS = {"labels": ["app", "team"], "repos": ["registry.example.com/"], "memory": "1Gi", "tag": "latest"}

BATTERY = [
    "object.metadata.name != ''",
    "variables.params.labels.all(l, l in object.metadata.labels)",
    "object.spec.containers.all(c, variables.params.repos.exists(r, c.image.startsWith(r)))",
    "object.spec.containers.all(c, !c.image.endsWith(':' + variables.params.tag))",
    "!object.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && "
    "c.securityContext.privileged)",
    "object.spec.containers.all(c, !has(c.resources.limits) || !('memory' in c.resources.limits) || "
    "quantity(c.resources.limits.memory).compareTo(quantity(variables.params.memory)) <= 0)",
    "object.spec.containers.map(c, c.name).join(', ')",
    "object.spec.containers.all(c, c.env.all(e, e.name.matches('^[A-Z_][A-Z0-9_]*$')))",
    "object.metadata.?labels.app.orValue('') == 'web'",
    "'missing labels: ' + variables.params.labels.filter(l, !(l in object.metadata.labels)).join(', ')",
]
UNIQUE = "object.spec.containers.all(c, object.spec.containers.exists_one(d, d.name == c.name))"


def _median_us(fn: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


def _unique(engine: Engine, n: int) -> tuple[str, float]:
    source = TemplateSource(
        raw={"validations": [{"expression": UNIQUE}]}, validations=(ValidationSource(UNIQUE),)
    )
    program = engine.compile_template(source)
    binding = engine.bind(
        program,
        {
            "apiVersion": "constraints.gatekeeper.sh/v1beta1",
            "kind": "K8sUnique",
            "metadata": {"name": "unique"},
            "spec": {},
        },
    )
    pod = {**POD, "spec": {"containers": [{"name": f"c{i}", "image": "x"} for i in range(n)]}}
    started = time.perf_counter()
    (outcome,) = engine.validate(RequestInput(REQUEST, pod, None), [binding], 10.0)
    seconds = time.perf_counter() - started
    verdict = "allowed" if not outcome.decisions else outcome.decisions[0].message
    return verdict, seconds


def measure(engine: Engine, rounds: int) -> None:
    print(f"engine {engine.name}:")
    compile_ms = []
    for src in BATTERY:
        started = time.perf_counter()
        engine.compile(src)
        compile_ms.append((time.perf_counter() - started) * 1e3)
    source = TemplateSource(
        raw={"validations": [{"expression": e} for e in BATTERY[:6]]},
        validations=tuple(ValidationSource(e) for e in BATTERY[:6]),
    )
    started = time.perf_counter()
    engine.compile_template(source)
    template_ms = (time.perf_counter() - started) * 1e3
    print(
        f"  compile: median {statistics.median(compile_ms):.2f} ms per expression "
        f"(max {max(compile_ms):.2f}); "
        f"a template of 6 validations {template_ms:.1f} ms ({template_ms / 6:.2f} ms per expression; "
        "target <= 2 ms)"
    )
    programs = [engine.compile(src) for src in BATTERY]
    act = engine.activation(object=POD, old_object=None, request=REQUEST)
    constraint = {"spec": {"parameters": PARAMS}}
    per_expr = [_median_us(lambda p=p: engine.evaluate(p, act, None, constraint), rounds) for p in programs]
    print(
        f"  evaluate (expression level, one call each): median {statistics.median(per_expr):.1f} us, "
        f"max {max(per_expr):.1f} us over {len(programs)} expressions"
    )
    for n in (100, 1000):
        verdict, seconds = _unique(engine, n)
        print(f"  unique names over {n} containers: {verdict!r} in {seconds * 1e3:.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="all", choices=[*ENGINES, "all"])
    parser.add_argument(
        "--rounds", type=int, default=0, help="evaluations per expression (default 500, 50 on cel-python)"
    )
    args = parser.parse_args()
    for name in ENGINES if args.engine == "all" else [args.engine]:
        measure(get_engine(name), args.rounds or (500 if name == "cel-go" else 50))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
