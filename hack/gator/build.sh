#!/usr/bin/env bash
# Build Gatekeeper's `gator` (the CLI behind `gator verify` / `gator test`) from Go modules into a cache
# outside the repository, only when the cache lacks it or holds a build of other module files.
#
#   hack/gator/build.sh            build if missing or stale, print where the binary is
#   hack/gator/build.sh --force    rebuild
#   hack/gator/build.sh --print    print the binary's path and exit (no build)
#   hack/gator/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#
# Cache: ${CELKEEPER_GATOR_CACHE:-~/.cache/celkeeper-gator}/<gatekeeper version>/gator with gator.stamp
# (a hash of this module's files and the build flags). Built as Gatekeeper's Makefile builds it
# (CGO_ENABLED=0, -X .../pkg/version.Version=v<version>) to a temporary name, then renamed into place.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# Bump when the build flags below change, so cached binaries are rebuilt.
FLAGS_REV=1
PKG=github.com/open-policy-agent/gatekeeper/v3/cmd/gator

force=0
print_only=0
check_only=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --print) print_only=1 ;;
        --check) check_only=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

version=$(awk '$1 == "require" && $2 == "github.com/open-policy-agent/gatekeeper/v3" {print $3; exit}
               $1 == "github.com/open-policy-agent/gatekeeper/v3" {print $2; exit}' "$HERE/go.mod")
if [ -z "$version" ]; then
    echo "build.sh: cannot read the gatekeeper version from $HERE/go.mod" >&2
    exit 1
fi
cache=${CELKEEPER_GATOR_CACHE:-$HOME/.cache/celkeeper-gator}
out=$cache/${version#v}
target=$out/gator
if [ "$print_only" = 1 ]; then
    echo "$target"
    exit 0
fi

log() { echo "gator: $*" >&2; }
fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

ldflags="-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$version"
want=$({ echo "flags-rev $FLAGS_REV $ldflags"; cd "$HERE" && cat go.mod go.sum ./*.go; } | sha256sum | cut -c1-16)
if [ "$check_only" = 1 ]; then
    [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$want" ]
    exit
fi

if ! command -v go >/dev/null 2>&1; then
    log "no Go toolchain on PATH: cannot build gator"
    exit 1
fi
if [ "$force" = 0 ] && [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$want" ]; then
    log "up to date: $target"
    echo "$target"
    exit 0
fi

mkdir -p "$out"
# Two ./dev test runs at once would only race for the rename; serialise them.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.build.lock"
    if ! flock -n 9; then
        log "another build holds $cache/.build.lock; waiting for it"
        flock 9
    fi
    if [ "$force" = 0 ] && [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$want" ]; then
        log "built meanwhile: $target"
        echo "$target"
        exit 0
    fi
fi

tmp_bin=$out/.gator.tmp.$$
heartbeat=
cleanup() {
    if [ -n "$heartbeat" ]; then kill "$heartbeat" 2>/dev/null || true; wait "$heartbeat" 2>/dev/null || true; fi
    rm -f "$tmp_bin"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
log "go: $(go version | cut -d' ' -f3-); building gator $version into $target"
# A line every minute, so CI logs show a long cold build is alive.
( trap 'kill "$s" 2>/dev/null; exit 0' TERM
  while :; do sleep 60 & s=$!; wait "$s"; log "  ... still building ($(fmt_secs $((SECONDS - t0))))"; done ) &
heartbeat=$!
(cd "$HERE" && go list -mod=readonly -deps "$PKG" >/dev/null)
t1=$SECONDS
log "  modules ready in $(fmt_secs $((t1 - t0))); compiling"
(cd "$HERE" && CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath -ldflags "$ldflags" -o "$tmp_bin" "$PKG")
mv -f "$tmp_bin" "$target"
echo "$want" >"$target.stamp"
log "  built in $(fmt_secs $((SECONDS - t0))) (compile $(fmt_secs $((SECONDS - t1))))"
echo "$target"
