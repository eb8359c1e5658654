"""celkeeper's wheel, as hack/wheel/build.sh builds it from this checkout (the cel-go engine's library inside,
a manylinux tag), for the tests that install it (tests/e2e/wheel).

    wheel = built_wheel()      # Path; builds it when missing (needs Go), else raises WheelUnavailable

The wheel is cached by the hash of the package's sources in ${CELKEEPER_WHEEL_CACHE:-~/.cache/celkeeper-wheel}
(the native library in setup.py's cache): building it again after a change takes seconds. Tests that need
it use the `wheel` fixture: they skip with the reason when it cannot be built here, and fail instead when
CELKEEPER_REQUIRE_WHEEL=1 (CI sets it; tests/support/requirements.py).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "wheel" / "build.sh"


class WheelUnavailable(Exception):
    """The wheel cannot be built here; the message says why and how to fix it."""


def built_wheel() -> Path:
    """The wheel of these sources, built now when the cache lacks it."""
    where = subprocess.run([str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=True)
    if where.stdout.strip():
        return Path(where.stdout.strip())
    if shutil.which("go") is None:
        raise WheelUnavailable(
            "no Go toolchain: the wheel carries the cel-go engine's library, built with Go"
        )
    done = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise WheelUnavailable(f"{BUILD_SCRIPT} failed ({done.returncode}): {done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])
