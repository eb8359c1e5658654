#!/usr/bin/env python3
"""Dump a benchmark's workload (templates, the constraints a Pod review selects, the request) as
JSON for the Go benchmark that replays it (celkeeper/native/go/k8scel/workload_test.go), so that
the Go path can be profiled on exactly what the Python benchmarks decide: bench/decision.py's
(`decision`) or bench/webhook.py's (`webhook`: the examples' 20 Pod constraints). Prints the CPU
time of one decision in process (Python and Go) and the part spent in the library call.

    .venv/bin/python bench/engine_workload.py [decision|webhook [/tmp/w.json]]
    cd celkeeper/native/go && CELGO_WORKLOAD=/tmp/w.json go test -run XXX -bench Workload \\
        -cpuprofile /tmp/cpu.prof ./k8scel/

Without arguments (`./dev bench`): both workloads, figures only.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import decision, webhook
from celkeeper.cel import get_engine
from celkeeper.documents import parse_sources
from celkeeper.model import EnforcementPoint
from celkeeper.policy import PolicySet, TemplateCompiler, build_policy_set
from celkeeper.review import decide, parse_admission_review
from tests.support.serve import review

ROUNDS = 2000


def webhook_workload(compiler: TemplateCompiler) -> tuple[PolicySet, dict[str, Any], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "policies"
        webhook.write_policies(folder)
        webhook.write_namespaces(Path(tmp) / "namespaces.yaml")
        files = sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".json"))
        parsed = parse_sources((str(p), p.read_text()) for p in files)
        namespaces = parse_sources([("ns", (Path(tmp) / "namespaces.yaml").read_text())])
    policies = build_policy_set(parsed.documents, compiler)
    assert not policies.errors, policies.errors
    by_name = {d.data["metadata"]["name"]: d.data for d in namespaces.documents}
    return policies, review(webhook.bench_pod(), uid="bench-0001"), by_name


def main() -> int:
    args = sys.argv[1:]
    if len(args) > 2 or (args and args[0] not in ("decision", "webhook")):
        raise SystemExit(__doc__)
    for name in args[:1] or ["decision", "webhook"]:
        run(name, Path(args[1]) if len(args) == 2 else None)
    return 0


def run(name: str, out_path: Path | None) -> None:
    engine = get_engine("cel-go")
    library = engine.library  # type: ignore[attr-defined]
    templates: list[dict[str, Any]] = []
    handles: dict[int, int] = {}  # template handle -> index in templates
    constraints: dict[int, dict[str, Any]] = {}  # constraint handle -> entry
    calls: list[tuple[bytes, ...]] = []
    template, constraint, validate = library.template, library.constraint, library.validate

    def record_template(source: bytes, options: bytes = b"") -> tuple[int, dict[str, Any]]:
        handle, reply = template(source, options)
        handles[handle] = len(templates)
        templates.append({"name": str(len(templates)), "source": json.loads(source)})
        return handle, reply

    def record_constraint(of: int, document: bytes) -> tuple[int, dict[str, Any]]:
        handle, reply = constraint(of, document)
        constraints[handle] = {"template": handles[of], "object": json.loads(document)}
        return handle, reply

    def record_validate(*args: Any, **options: Any) -> Any:
        calls.append(args)
        return validate(*args, **options)

    library.template, library.constraint, library.validate = (
        record_template,
        record_constraint,
        record_validate,
    )
    if name == "decision":
        policies, body, namespaces = (
            decision.policy_set(TemplateCompiler(engine), 20),
            decision.review(),
            decision.NAMESPACES,
        )
    else:
        policies, body, namespaces = webhook_workload(TemplateCompiler(engine))
    decide(parse_admission_review(body), policies, namespaces.get, EnforcementPoint.WEBHOOK)
    header, obj, old, namespace, packed, _timeout, *_store = calls[-1]
    selected = [int.from_bytes(packed[i : i + 8], sys.byteorder) for i in range(0, len(packed), 8)]
    out = {
        "templates": templates,
        "constraints": [constraints[h] for h in selected],
        "header": json.loads(header),
        "object": json.loads(obj) if obj else None,
        "oldObject": json.loads(old) if old else None,
        "namespace": json.loads(namespace) if namespace else None,
    }
    if out_path is not None:
        out_path.write_text(json.dumps(out))
        print(f"{len(templates)} templates, {len(selected)} constraints -> {out_path}")
    spent = [0.0]

    def timed_validate(*args: Any, **options: Any) -> Any:
        started = time.process_time()
        try:
            return validate(*args, **options)
        finally:
            spent[0] += time.process_time() - started

    library.validate = timed_validate
    started = time.process_time()
    for _ in range(ROUNDS):
        decision_ = decide(parse_admission_review(body), policies, namespaces.get, EnforcementPoint.WEBHOOK)
    total = (time.process_time() - started) / ROUNDS * 1e6
    print(
        f"{name} workload, one decision: {total:.0f} us CPU, {spent[0] / ROUNDS * 1e6:.0f} us of it in "
        f"the library call ({len(decision_.results)} results)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
