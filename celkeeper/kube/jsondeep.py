"""JSON as deep as the API server stores it.

The API server accepts objects nested up to 10,000 levels (k8s.io/apimachinery/pkg/util/json maxDepth);
orjson stops at 1024 and Python's json module at the interpreter's recursion limit. `loads_deep` parses
such a document with the standard parser, on a thread of its own with a stack and a recursion limit
large enough for 10,000 levels.

Adapter (celkeeper.kube): how the client decodes API responses (and the webhook, reviews orjson refuses).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

API_MAX_DEPTH = 10_000
_STACK_BYTES = 256 * 1024 * 1024  # reserved address space; only what the parse touches is used
_lock = threading.Lock()  # the recursion limit and the thread stack size are process-wide


def loads_deep(data: bytes | str) -> Any:
    """json.loads for documents nested up to API_MAX_DEPTH levels; raises ValueError as json.loads does
    (RecursionError, deeper still, is reported as ValueError too)."""
    outcome: dict[str, Any] = {}

    def parse() -> None:
        try:
            outcome["value"] = json.loads(data)
        except (ValueError, RecursionError) as err:
            outcome["error"] = ValueError(f"not JSON, or nested too deeply: {err}")

    with _lock:
        previous_limit = sys.getrecursionlimit()
        previous_stack = threading.stack_size()
        sys.setrecursionlimit(max(previous_limit, 3 * API_MAX_DEPTH))
        try:
            threading.stack_size(_STACK_BYTES)
            thread = threading.Thread(target=parse, name="deep json", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous_stack)
        thread.join()
        sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
