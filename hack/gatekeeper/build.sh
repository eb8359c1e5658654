#!/usr/bin/env bash
# Build Gatekeeper's manager (the module root's main package: its webhooks, audit and controllers) from Go
# modules into a cache outside the repository, only when the cache lacks it or holds a build of other
# module files. The mutation differential (tests/e2e/gatekeeper) runs it as `--operation=mutation-webhook`.
#
#   hack/gatekeeper/build.sh            build if missing or stale, print where the binary is
#   hack/gatekeeper/build.sh --force    rebuild
#   hack/gatekeeper/build.sh --print    print the binary's path and exit (no build)
#   hack/gatekeeper/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#
# Cache: ${CELKEEPER_GATEKEEPER_CACHE:-~/.cache/celkeeper-gatekeeper}/<gatekeeper version>/manager with
# manager.stamp (a hash of this module's files and the build flags). Built as Gatekeeper's Dockerfile
# builds it (CGO_ENABLED=0, -X .../pkg/version.Version=v<version>), with -trimpath, to a temporary name,
# then renamed into place; a lock serialises concurrent runs (hack/lib/gobuild.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
PKG=github.com/open-policy-agent/gatekeeper/v3

gobuild_args 2,14 "$@"

version=$(gobuild_require "$HERE/go.mod" github.com/open-policy-agent/gatekeeper/v3)
ldflags="-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$version"
# Bump the leading number when the build flags change, so cached binaries are rebuilt.
FLAGS_REV="1 $ldflags"
out=${CELKEEPER_GATEKEEPER_CACHE:-$HOME/.cache/celkeeper-gatekeeper}/${version#v}
if [ "$print_only" = 1 ]; then
    echo "$out/manager"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    gobuild_current "$out/manager" "$HERE" "$FLAGS_REV"
    exit
fi

gobuild_init gatekeeper "$out" "$force"
# -trimpath through GOFLAGS, not as an argument: arguments are part of the stamp
GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" CGO_ENABLED=0 \
    gobuild_build manager "$HERE" "$PKG" "$ldflags" "$FLAGS_REV"
echo "$out/manager"
