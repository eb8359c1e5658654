"""celkeeper on a real node (tests.support.node): how long the node takes to start once built, and how long
celkeeper's install takes to protect the cluster.

Prints, in seconds:
- warm start: NodeCluster.start() to a Ready node with kube-proxy's rules and the controllers up, per run,
  then stop();
- the image import (`ctr images import` of hack/image/build.sh's archive);
- `kubectl apply -f deploy/celkeeper.yaml` (plus the example policy) to the first violating create refused
  by the webhook through its Service, to N ready pods, and to the constraint ENFORCED by all N;
- a new constraint applied to ENFORCED by the N pods, per constraint;
- rolling updates of the webhook Deployment (a new image tag): how long each takes, the most webhook pods
  seen (live, and counting those being deleted), and how many violating creates sent back to back
  throughout were allowed (failurePolicy Ignore: an unanswered call admits).

Needs root and everything tests/e2e/node needs (hack/kube/build.sh, hack/kube/node-setup.sh,
hack/image/build.sh); prints `skipped: <reason>` otherwise.

    .venv/bin/python bench/node_install.py [--starts N] [--constraints N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.binaries import BinariesUnavailable


def seconds(values: list[float]) -> str:
    each = ", ".join(f"{v:.1f}" for v in values)
    return f"median {statistics.median(values):.1f} s ({each})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--starts", type=int, default=3, help="warm starts to time (default 3)")
    parser.add_argument("--constraints", type=int, default=3, help="new constraints to time (default 3)")
    parser.add_argument("--rollouts", type=int, default=2, help="rolling updates to sample (default 2)")
    args = parser.parse_args()

    from tests.e2e.node import install
    from tests.support.binaries import find_node_binaries
    from tests.support.node import NodeCluster
    from tests.support.node_fixtures import machine_unsuitable

    try:
        reason = machine_unsuitable()
        if reason:
            raise BinariesUnavailable(reason)
        binaries = find_node_binaries()
        archive = install.image_archive()
    except BinariesUnavailable as exc:
        print(f"skipped: {exc}")
        return 0

    with tempfile.TemporaryDirectory(prefix="celkeeper-bench-node-") as tmp:
        work = Path(tmp)
        starts = []
        for i in range(args.starts):
            with NodeCluster(work / f"start-{i}", binaries) as node:
                starts.append(node.startup_seconds["total"])
        print(f"node warm start: {seconds(starts)}")

        with NodeCluster(work / "install", binaries) as node:
            t0 = time.monotonic()
            node.import_image(archive)
            size = archive.stat().st_size / 2**20
            print(f"image import: {time.monotonic() - t0:.1f} s ({size:.0f} MiB archive)")
            node.kubectl("create", "namespace", "bench")
            pods = install.replicas()

            t0 = time.monotonic()
            install.install(node)
            install.apply_template(node)
            install.apply_constraint(node, install.POLICY / "constraint.yaml", timeout=600)
            install.time_until(lambda: install.denied(node, "bench"), 600, "the first denial")
            first_denial = time.monotonic() - t0
            install.wait_ready(node, pods, timeout=600)
            all_ready = time.monotonic() - t0
            install.time_until(lambda: install.enforced_by(node, pods), 600, "enforced")
            enforced = time.monotonic() - t0
            print(
                f"kubectl apply of the install to: first denial {first_denial:.1f} s, "
                f"{pods} pods ready {all_ready:.1f} s, constraint ENFORCED by {pods} pods {enforced:.1f} s"
            )

            times = []
            for i in range(args.constraints):
                name = f"bench-{i}"
                doc = {
                    "apiVersion": "constraints.celkeeper.io/v1beta1",
                    "kind": install.CONSTRAINT_KIND,
                    "metadata": {"name": name},
                    "spec": {
                        "match": {
                            "kinds": [{"apiGroups": [""], "kinds": ["Pod"]}],
                            "namespaces": [f"bench-{i}"],
                        }
                    },
                }
                t0 = time.monotonic()
                install.apply_constraint(node, doc)
                install.time_until(lambda n=name: install.enforced_by(node, pods, n), 300, f"{name} enforced")
                times.append(time.monotonic() - t0)
            print(f"new constraint to ENFORCED by {pods} pods: {seconds(times)}")

            image = install.webhook_pods(node)[0]["spec"]["containers"][0]["image"]
            deployment = f"deployment/{install.DEPLOYMENT}"
            for i in range(args.rollouts):
                node.ctr("images", "tag", image, f"{image}-{i}")
                t0 = time.monotonic()
                with install.Sampler(node, "bench") as sampler:
                    node.kubectl("set", "image", deployment, f"webhook={image}-{i}", "-n", install.NAMESPACE)
                    node.kubectl(
                        "rollout",
                        "status",
                        deployment,
                        "-n",
                        install.NAMESPACE,
                        "--timeout=600s",
                        timeout=610,
                    )
                    install.wait_ready(node, pods)
                took = time.monotonic() - t0
                allowed = sampler.verdicts.count(False)
                print(
                    f"rolling update {i + 1}: {took:.1f} s, at most {max(sampler.live)} live pods "
                    f"({max(sampler.total)} with those being deleted), {allowed} of {len(sampler.verdicts)} "
                    f"violating creates allowed"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
