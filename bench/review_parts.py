#!/usr/bin/env python3
"""Where one validating review's CPU goes in a webhook worker, without HTTP and TLS.

bench/webhook.py's workload (its Pod, allowed and denied, against its 20 Pod constraints) answered in
process by the worker's own /v1/admit route (webhook/app.py: the body in, the JSON answer out), then in
parts: the route with the engine's answer replayed (the Python around the one call into Go), the body's
JSON decoding, the AdmissionReview's validation, `decide` with the engine's answer replayed, and the
library call itself (`Library.validate`: the native library's Go, CEL evaluation). CPU time of the
process (every thread: the Go runtime's collector too), per review: the lowest and the median of 5
measurements of `--reviews` each. What serving adds (TLS, HTTP, the event loop, the second loop's
thread) is bench/webhook.py's server CPU per review minus the route's figure here.

    .venv/bin/python bench/review_parts.py [--reviews 5000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.webhook import bench_pod, denied_pod, write_namespaces, write_policies  # noqa: E402
from celkeeper.cel.celgo.engine import _dumps  # noqa: E402
from celkeeper.informer import FolderSource, Informer  # noqa: E402
from celkeeper.model import EnforcementPoint  # noqa: E402
from celkeeper.review import decide, parse_admission_review  # noqa: E402
from celkeeper.settings import Settings  # noqa: E402
from celkeeper.snapshot import StateDir  # noqa: E402
from celkeeper.webhook.admission import loads_review  # noqa: E402
from celkeeper.webhook.app import WebhookConfig, create_app  # noqa: E402
from tests.support.serve import review  # noqa: E402


def measure(label: str, call: Callable[[], Any], reviews: int) -> None:
    for _ in range(min(reviews, 1000)):
        call()
    figures = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(reviews):
            call()
        figures.append((time.process_time() - started) / reviews * 1e6)
    figures.sort()
    print(f"  {label:<58} {figures[0]:>7.1f} µs  (median {figures[2]:.1f})")


def parts(name: str, pod: dict[str, Any], route: Any, loaded: Any, reviews: int) -> None:
    """One Pod's review: the route, then its parts (see the module doc)."""
    engine = loaded.policies.engine
    real = engine.validate
    body = json.dumps(review(pod, uid="bench-0001")).encode()
    calls: list[tuple[Any, Any, float]] = []
    answers: list[Any] = []

    def recording(request: Any, bindings: Any, timeout: float) -> Any:
        calls.append((request, bindings, timeout))
        answers.append(real(request, bindings, timeout))
        return answers[-1]

    engine.validate = recording
    status, answer = route(body, len(body))
    engine.validate = real
    allowed = json.loads(answer)["response"]["allowed"]
    print(f"{name} Pod review ({len(body)} bytes; {status}, allowed {allowed}), CPU per review:")
    measure("the /v1/admit route in process", lambda: route(body, len(body)), reviews)
    engine.validate = lambda request, bindings, timeout: answers[0]
    measure("  the route, the engine's answer replayed (Python)", lambda: route(body, len(body)), reviews)
    doc = loads_review(body)
    request = parse_admission_review(doc)
    measure("    the body's JSON decoded", lambda: loads_review(body), reviews)
    measure("    the AdmissionReview validated", lambda: parse_admission_review(doc), reviews)
    measure(
        "    decide, the engine's answer replayed",
        lambda: decide(
            request,
            loaded.policies,
            loaded.namespace,
            EnforcementPoint.WEBHOOK,
            clock=time.perf_counter,
            deadline=3.0,
            data=loaded.data,
        ),
        reviews,
    )
    engine.validate = real
    inputs, bindings, _ = calls[0]
    header, obj = _dumps(dict(inputs.request)), _dumps(inputs.object)
    namespace = _dumps(inputs.namespace) if inputs.namespace is not None else b""
    packed = b"".join(b.packed for b in bindings)
    library = engine.library
    measure(
        f"  the library call ({len(bindings)} constraints; Go)",
        lambda: library.validate(header, obj, b"", namespace, packed, 3_000_000_000, 0),
        reviews,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reviews", type=int, default=5000, help="reviews per measurement (default 5000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-") as tmp:
        work = Path(tmp)
        write_policies(work / "policies")
        write_namespaces(work / "namespaces.json")
        state = StateDir(work / "state")
        state.reset()
        source = FolderSource(work / "policies", namespaces=work / "namespaces.json")
        Informer(source, state, Settings(), validate=False).step()
        gc.set_threshold(20_000, 50, 100)  # the served worker's (webhook/server.py)
        app = create_app(WebhookConfig(settings=Settings(), state=state, watch=False, freeze_gc=True))
        route = app.extensions["celkeeper"]["routes"][b"/v1/admit"]
        loaded = app.extensions["celkeeper"]["live"].current
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average before: {load} (the machine may be shared)")
        for name, pod in (("allowed", bench_pod()), ("denied", denied_pod())):
            parts(name, pod, route, loaded, args.reviews)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
