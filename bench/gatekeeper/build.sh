#!/usr/bin/env bash
# Build Gatekeeper's manager (the `gatekeeper` binary of its image: validating webhook, audit,
# controllers) from Go modules into a cache outside the repository, for the benchmarks that run it side
# by side with celkeeper (bench/webhook.py --gatekeeper). Only when the cache lacks it or holds a build
# of other module files.
#
#   bench/gatekeeper/build.sh            build if missing or stale, print where the binary is
#   bench/gatekeeper/build.sh --force    rebuild
#   bench/gatekeeper/build.sh --print    print the binary's path and exit (no build)
#   bench/gatekeeper/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#
# Cache: ${CELKEEPER_GATEKEEPER_BENCH_CACHE:-~/.cache/celkeeper-gatekeeper-bench}/<version>/manager with
# manager.stamp. Built as Gatekeeper's Dockerfile builds it (CGO_ENABLED=0, -trimpath,
# -X .../pkg/version.Version=v<version>), through hack/lib/gobuild.sh (a lock, a temporary name).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../hack/lib/gobuild.sh
. "$HERE/../../hack/lib/gobuild.sh"
PKG=github.com/open-policy-agent/gatekeeper/v3

gobuild_args 2,14 "$@"

version=$(gobuild_require "$HERE/go.mod" github.com/open-policy-agent/gatekeeper/v3)
ldflags="-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$version"
FLAGS_REV="1 $ldflags"
out=${CELKEEPER_GATEKEEPER_BENCH_CACHE:-$HOME/.cache/celkeeper-gatekeeper-bench}/${version#v}
if [ "$print_only" = 1 ]; then
    echo "$out/manager"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    gobuild_current "$out/manager" "$HERE" "$FLAGS_REV"
    exit
fi

gobuild_init gatekeeper "$out" "$force"
GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" CGO_ENABLED=0 \
    gobuild_build manager "$HERE" "$PKG" "$ldflags" "$FLAGS_REV"
echo "$out/manager"
