"""Webhook cost on real creates: latency of ConfigMap `create` calls through a real kube-apiserver,
in a namespace the webhook does not see versus one whose requests go to `celkeeper serve`
(ValidatingWebhookConfiguration, failurePolicy Fail, TLS on loopback), plus refused creates.

The series are interleaved (one plain create, one through the webhook, one refused, repeat) so a busy
machine slows them alike. Prints n, median, p90, p99 and mean in milliseconds per series and the
median and p99 cost the webhook adds. Needs the binaries from hack/kube/build.sh (skips otherwise).

    .venv/bin/python bench/kube_admission.py [--count N] [--workers N]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.binaries import BinariesUnavailable, find_binaries


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=300, help="creates per series (default 300)")
    parser.add_argument("--workers", type=int, default=2, help="celkeeper serve workers (default 2)")
    args = parser.parse_args()
    try:
        binaries = find_binaries()
    except BinariesUnavailable as exc:
        print(f"skipped: {exc}")
        return 0

    from kubernetes import client

    from tests.support.admission import (
        ACTIONS,
        enroll_namespace,
        labelled,
        register_webhook,
        webhook_configuration,
        write_policies,
    )
    from tests.support.apiserver import ControlPlane
    from tests.support.serve import ServeProcess

    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-") as tmp:
        work = Path(tmp)
        with ControlPlane(work / "cluster", binaries) as cluster:
            print(
                f"control plane ready in {cluster.startup_seconds['total']:.1f} s "
                f"(kube-apiserver v{binaries.kube_version})"
            )
            server = ServeProcess(work / "serve", write_policies(work / "policies"), workers=args.workers)
            server.start()
            try:
                core = client.CoreV1Api(cluster.api_client)
                for ns in ("bench-plain", "bench-webhook"):
                    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
                selector = secrets.token_hex(4)
                url = f"https://127.0.0.1:{server.port}/v1/admit"
                register_webhook(
                    cluster,
                    webhook_configuration(
                        "celkeeper-bench", url, server.certs.ca_cert.read_bytes(), selector
                    ),
                )
                enroll_namespace(cluster, "bench-webhook", selector)

                def create(ns: str, name: str, labels: dict[str, str]) -> Callable[[], object]:
                    body: Any = labelled("ConfigMap", name, labels)  # the client accepts plain dicts
                    return lambda: core.create_namespaced_config_map(ns, body)

                def refused(name: str) -> Callable[[], object]:
                    inner = create("bench-webhook", name, {ACTIONS["deny"]: "1"})

                    def call() -> None:
                        try:
                            inner()
                        except client.ApiException as exc:
                            if exc.status != 403:
                                raise
                        else:
                            raise AssertionError("a deny-me ConfigMap was admitted")

                    return call

                series: dict[str, list[float]] = {
                    "no webhook": [],
                    "webhook, allowed": [],
                    "webhook, denied": [],
                }
                warmup = 20
                for i in range(warmup + args.count):
                    samples = (
                        timed(create("bench-plain", f"cm-{i}", {"team": "a"})),
                        timed(create("bench-webhook", f"cm-{i}", {"team": "a"})),
                        timed(refused(f"bad-{i}")),
                    )
                    if i >= warmup:
                        for values, sample in zip(series.values(), samples, strict=True):
                            values.append(sample)
            finally:
                server.stop()

    print(
        f"ConfigMap creates through kube-apiserver (Python client, one connection), "
        f"{args.count} each after {warmup} warm-up, celkeeper serve --workers {args.workers}"
    )
    print(f"{'series':<18} {'n':>5} {'median':>8} {'p90':>8} {'p99':>8} {'mean':>8}  (ms)")
    for name, values in series.items():
        print(
            f"{name:<18} {len(values):>5} {statistics.median(values):>8.2f} {percentile(values, 90):>8.2f} "
            f"{percentile(values, 99):>8.2f} {statistics.fmean(values):>8.2f}"
        )
    base, hooked = series["no webhook"], series["webhook, allowed"]
    print(
        f"webhook adds: median {statistics.median(hooked) - statistics.median(base):+.2f} ms, "
        f"p99 {percentile(hooked, 99) - percentile(base, 99):+.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
