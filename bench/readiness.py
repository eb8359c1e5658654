#!/usr/bin/env python3
"""Readiness: how long `celkeeper serve` (2 workers, HTTPS) takes to be ready on 500 templates and
2,000 constraints (target: <= 10 s).

The templates are five typical ones (those of bench/decision.py) in 100 variants each (a different
kind and a different literal, so that nothing is shared by content); four constraints per template.
Prints the seconds from start to the first /readyz 200 (every worker has compiled and bound the
whole set), the templates compiled per second per process, and each worker's memory.

    .venv/bin/python bench/readiness.py [--engine cel-go|cel-python] [--templates 500] [--constraints 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decision import TEMPLATES
from bench.support.load import rss_mib
from tests.support.serve import ServeProcess


def write_policies(root: Path, templates: int, per_template: int) -> None:
    root.mkdir(parents=True)
    bases = list(TEMPLATES.items())
    for i in range(templates):
        base_kind, spec = bases[i % len(bases)]
        kind = f"{base_kind}V{i}"
        validations = [
            {**v, "expression": f"({v['expression']}) || object.metadata.name == 'exempt-{i}'"}
            for v in spec["validations"]
        ]
        source: dict[str, Any] = {"validations": validations}
        if "variables" in spec:
            source["variables"] = spec["variables"]
        docs = [
            {
                "apiVersion": "templates.gatekeeper.sh/v1",
                "kind": "ConstraintTemplate",
                "metadata": {"name": kind.lower()},
                "spec": {
                    "crd": {
                        "spec": {"names": {"kind": kind}, "validation": {"openAPIV3Schema": spec["schema"]}}
                    },
                    "targets": [
                        {
                            "target": "admission.k8s.gatekeeper.sh",
                            "code": [{"engine": "K8sNativeValidation", "source": source}],
                        }
                    ],
                },
            }
        ]
        for j in range(per_template):
            docs.append(
                {
                    "apiVersion": "constraints.gatekeeper.sh/v1beta1",
                    "kind": kind,
                    "metadata": {"name": f"c{i}-{j}"},
                    "spec": {
                        "match": {"kinds": [{"apiGroups": [""], "kinds": ["Pod"]}]},
                        "parameters": spec["parameters"](i * per_template + j),
                    },
                }
            )
        (root / f"{kind.lower()}.yaml").write_text("\n---\n".join(json.dumps(d) for d in docs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="cel-go")
    parser.add_argument("--templates", type=int, default=500)
    parser.add_argument("--constraints", type=int, default=4, help="constraints per template")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="celkeeper-readiness-") as tmp:
        work = Path(tmp)
        write_policies(work / "policies", args.templates, args.constraints)
        server = ServeProcess(work, work / "policies", workers=2, args=["--engine", args.engine])
        started = time.monotonic()
        server.start(timeout=600)
        ready = time.monotonic() - started
        try:
            pids = server.worker_pids()
            print(
                f"engine {args.engine}: {args.templates} templates, {args.templates * args.constraints} "
                f"constraints: ready in {ready:.1f} s (target <= 10 s); "
                f"{args.templates / ready:.0f} templates/s per process; workers' RSS "
                + ", ".join(f"{rss_mib({p}):.0f} MiB" for p in sorted(pids))
            )
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
