#!/usr/bin/env python3
"""What stopping the webhook costs clients that keep connections alive, as the API server does.

`celkeeper serve` with 2 workers on tests/support/policies over loopback HTTPS; 6 clients send reviews
back to back on kept-alive connections (reusing each until an answer says `Connection: close` or the
server closed it while idle, as Go's transport does; tests/support/keepalive.py). After 1 s the master
gets SIGTERM (as Kubernetes stops a pod); the clients keep sending for --send-after seconds (the time
the Service's endpoints and kube-proxy take to stop sending to the pod), then stop. Counted: reviews
answered after the signal, and failed calls (a refused or reset connection, a failed TLS handshake,
a written request without an answer: each one a webhook call that fails, admitted unchecked under
failurePolicy Ignore), and how long the server took to exit. Each configuration --rounds times: the
tree given by --before (one without the drain, e.g. main before it), this one with --drain-seconds 0
and with a drain. Failed calls are counted per attempt (a refused client tries again after 50 ms).

    .venv/bin/python bench/drain.py [--rounds 3] [--drain 3] [--send-after 2] [--before /work/main]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.keepalive import KeptAliveFleet  # noqa: E402
from tests.support.serve import POLICIES, ServeProcess, pod, review  # noqa: E402

DENIED = json.dumps(review(pod(labels={}))).encode()


def _round(work: Path, root: Path, args: list[str], send_after: float) -> tuple[int, list[str], float]:
    server = ServeProcess(work, POLICIES, workers=2, args=args, root=root).start()
    assert server.process is not None
    try:
        fleet = KeptAliveFleet("127.0.0.1", server.port, server.client_context(), DENIED, clients=6)
        fleet.start()
        time.sleep(1.0)
        before = fleet.tally.answered
        signalled = time.monotonic()
        fleet.mark = signalled
        os.kill(server.process.pid, signal.SIGTERM)
        time.sleep(send_after)
        tally = fleet.stop_sending()
        while server.process.running() and time.monotonic() < signalled + 60:
            time.sleep(0.05)
        return tally.answered - before, tally.failures, time.monotonic() - signalled
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--drain", type=float, default=3.0, help="--drain-seconds of the drained server")
    parser.add_argument("--send-after", type=float, default=2.0, help="seconds clients send after SIGTERM")
    parser.add_argument("--before", type=Path, help="also a source tree without the drain (e.g. main)")
    opts = parser.parse_args()
    configs = [("before: " + str(opts.before), opts.before, [])] if opts.before else []
    configs += [
        ("--drain-seconds 0", ROOT, ["--drain-seconds", "0"]),
        (f"--drain-seconds {opts.drain:g}", ROOT, ["--drain-seconds", str(opts.drain)]),
    ]
    print(f"load: {os.getloadavg()[0]:.1f} (1 min); clients send for {opts.send_after:g} s after SIGTERM")
    with tempfile.TemporaryDirectory(prefix="celkeeper-drain-") as tmp:
        for name, root, args in configs:
            for i in range(opts.rounds):
                work = Path(tmp) / f"{name.replace(' ', '_').replace('/', '_')}-{i}"
                answered, failures, stopped = _round(work, root, args, opts.send_after)
                kinds = Counter(f.split(":")[0] for f in failures)
                print(
                    f"  {name:<28} round {i + 1}: {answered:4d} answered after SIGTERM, "
                    f"{len(failures):3d} failed calls {dict(kinds) if kinds else ''}; "
                    f"exit after {stopped:.1f} s"
                )


if __name__ == "__main__":
    main()
