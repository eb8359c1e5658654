"""The library parsers take time linear in their input (issue 12): each is fed 100 KB of adversarial
text and must finish within a small bound.

Kubernetes' parsers are linear scanners; celkeeper's once had a backtracking regular expression
(`quantity`: `"0" * 2000 + "x"` took 23 s, 4,000 zeros killed a worker) and quadratic big-number
conversions. Each case runs in a forked child, so a regression fails in bounded time instead of hanging
the suite; the bound is on the child's CPU time (other processes on the machine do not count).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

import pytest

from celkeeper.cel.k8slib import LibraryError, ip, quantity, semver, urls
from celkeeper.cel.k8slib import format as formats

SIZE = 100_000
BOUND = 1.0  # CPU seconds for one call on 100 KB; linear code needs a few to a few hundred ms
KILL_AFTER = 20.0  # wall-clock seconds before a child still running is killed (then the case fails)


def _patterns(n: int) -> dict[str, str]:
    half = n // 2
    return {
        "zeros": "0" * n + "x",
        "digits": "1" * n + "x",
        "all-digits": "7" * n,
        "number-dot": "1" * n + ".x",
        "long-fraction": "1" * half + "." + "1" * half + "Gi",
        "tiny-fraction": "0." + "0" * n + "1",
        "exponent-letters": "1" + "e" * n + "1x",
        "suffix-letters": "1" + "m" * n,
        "dotted-digits": "1." * half + "x",
        "label-dashes": "a-" * half + "-",
        "label-dots": "a." * half + "-",
        "letters": "a" * n + "-",
        "upper": "A" * n + "_",
        "percent": "/" + "%4" * half,
        "colons": ":" * n,
        "digit-colons": "1:" * half,
        "hex-groups": "::" + "f" * n,
        "base64-ish": "A" * n + "=",
        "slashes": "a:" + "/" * n,
        "ipv6-host": "http://[" + "1:" * half,
        "query": "http://a/?" + "a=1&" * (n // 4),
        "at-signs": "http://" + "@" * n,
        "datetime": "2020-01-01t" + "1" * n,
        "v-zeros": "v" + "0" * n,
        "prerelease": "1.2.3-" + "a." * half,
        "build": "1.2.3+" + "a." * half,
        "semver-zeros": "0" * half + "." + "0" * half + ".1",
        "cidr-bits": "10.0.0.0/" + "1" * n,
        "invalid-utf8": "a\udcff" * half,
    }


def _parsers() -> dict[str, Callable[[str], object]]:
    found: dict[str, Callable[[str], object]] = {
        "quantity": quantity.quantity,
        "isQuantity": quantity.is_quantity,
        "semver": semver.semver,
        "semver-normalized": lambda s: semver.semver(s, True),
        "url": urls.url,
        "isURL": urls.is_url,
        "ip": ip.ip,
        "ip.isCanonical": ip.ip_is_canonical,
        "cidr": ip.cidr,
        "isCIDR": ip.is_cidr,
    }
    for name, fmt in formats.FORMATS.items():
        found[f"format.{name}"] = lambda s, f=fmt: formats.validate(f, s)
    return found


PARSERS = _parsers()


def _run(parser: str, out: Connection) -> None:
    """In the child: every pattern through one parser; sends (pattern, CPU seconds, problem)."""
    fn = PARSERS[parser]
    results = []
    for name, text in _patterns(SIZE).items():
        start = time.process_time()
        problem = ""
        try:
            fn(text)
        except LibraryError:
            pass  # Kubernetes' error: fine
        except Exception as err:  # anything else would be an internal error, not Kubernetes' answer
            problem = f"{type(err).__name__}: {err}"[:200]
        results.append((name, time.process_time() - start, problem))
        out.send(results[-1])
    out.send(None)


@pytest.mark.parametrize("parser", sorted(PARSERS))
def test_100_kb_of_adversarial_input_is_parsed_in_bounded_time(parser: str) -> None:
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_run, args=(parser, send), daemon=True)
    child.start()
    send.close()
    done: list[tuple[str, float, str]] = []
    deadline = time.monotonic() + KILL_AFTER
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not receive.poll(left):
                names = [name for name, _, _ in done]
                stuck = next(p for p in _patterns(0) if p not in names)
                pytest.fail(f"{parser}: still running on {stuck!r} after {KILL_AFTER} s")
            try:
                item = receive.recv()
            except EOFError:
                pytest.fail(f"{parser}: the child died (exit code {child.exitcode}) after {len(done)} inputs")
            if item is None:
                break
            done.append(item)
    finally:
        if child.is_alive():
            child.kill()
        child.join()
    slow = [f"{name} {cpu:.2f} s" for name, cpu, _ in done if cpu > BOUND]
    assert not slow, f"{parser}: above {BOUND} s of CPU on {SIZE // 1000} KB: {slow}"
    failed = [f"{name}: {problem}" for name, _, problem in done if problem]
    assert not failed, f"{parser}: raised something other than Kubernetes' error: {failed}"
