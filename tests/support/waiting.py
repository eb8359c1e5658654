"""Polling helper for tests that wait on an eventually-consistent system (an API server, a webhook)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str = "condition",
) -> T:
    """Call `predicate` until it returns something truthy (returned) or `timeout` passes.

    Exceptions from `predicate` count as "not yet"; the last one is named in the TimeoutError.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except Exception as exc:  # retried; reported on timeout
            last_error = exc
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}{detail}")
        time.sleep(interval)
