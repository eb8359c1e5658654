#!/usr/bin/env bash
# Build vapgen (Gatekeeper's own ValidatingAdmissionPolicy transform, see main.go) into a cache outside
# the repository, only when the cache lacks it or holds a build of other module files.
#
#   hack/vap/build.sh            build if missing or stale, print the binary's path
#   hack/vap/build.sh --print    print the binary's path and exit (no build)
#   hack/vap/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#
# Cache: ${CELKEEPER_VAPGEN_CACHE:-~/.cache/celkeeper-vapgen}/<gatekeeper version>/vapgen with
# vapgen.stamp (a hash of this module's files and the build flags), built to a temporary name and
# renamed into place; a lock serialises concurrent runs.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
FLAGS_REV=1  # bump when the build flags below change

print_only=0
check_only=0
for arg in "$@"; do
    case "$arg" in
        --print) print_only=1 ;;
        --check) check_only=1 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

version=$(awk '$1 == "require" && $2 == "github.com/open-policy-agent/gatekeeper/v3" {print $3; exit}
               $1 == "github.com/open-policy-agent/gatekeeper/v3" {print $2; exit}' "$HERE/go.mod")
if [ -z "$version" ]; then
    echo "build.sh: cannot read the gatekeeper version from $HERE/go.mod" >&2
    exit 1
fi
cache=${CELKEEPER_VAPGEN_CACHE:-$HOME/.cache/celkeeper-vapgen}
out=$cache/${version#v}
target=$out/vapgen
if [ "$print_only" = 1 ]; then
    echo "$target"
    exit 0
fi
want=$({ echo "flags-rev $FLAGS_REV"; cd "$HERE" && cat go.mod go.sum ./*.go; } | sha256sum | cut -c1-16)
current() { [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$want" ]; }
if [ "$check_only" = 1 ]; then
    current
    exit
fi
log() { echo "vapgen: $*" >&2; }
if current; then
    log "up to date: $target"
    echo "$target"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    log "no Go toolchain on PATH: cannot build vapgen"
    exit 1
fi
mkdir -p "$out"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.build.lock"
    flock 9
    if current; then
        echo "$target"
        exit 0
    fi
fi
tmp=$out/.vapgen.tmp.$$
trap 'rm -f "$tmp"' EXIT
t0=$SECONDS
log "building Gatekeeper $version's transform into $target"
(cd "$HERE" && go build -mod=readonly -buildvcs=false -ldflags "-s -w" -o "$tmp" .)
mv -f "$tmp" "$target"
echo "$want" >"$target.stamp"
log "built in $((SECONDS - t0))s"
echo "$target"
