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
# (CGO_ENABLED=0, -trimpath, -X .../pkg/version.Version=v<version>) to a temporary name, then renamed into
# place; a lock serialises concurrent runs (hack/lib/gobuild.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
PKG=github.com/open-policy-agent/gatekeeper/v3/cmd/gator

gobuild_args 2,13 "$@"

version=$(gobuild_require "$HERE/go.mod" github.com/open-policy-agent/gatekeeper/v3)
ldflags="-X github.com/open-policy-agent/gatekeeper/v3/pkg/version.Version=$version"
# Bump the leading number when the build flags change, so cached binaries are rebuilt. The ldflags are
# part of the revision (the stamp's first line reads `flags-rev 1 -X ...`).
FLAGS_REV="1 $ldflags"
out=${CELKEEPER_GATOR_CACHE:-$HOME/.cache/celkeeper-gator}/${version#v}
if [ "$print_only" = 1 ]; then
    echo "$out/gator"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    gobuild_current "$out/gator" "$HERE" "$FLAGS_REV"
    exit
fi

gobuild_init gator "$out" "$force"
# -trimpath through GOFLAGS, not as an argument: arguments are part of the stamp (see FLAGS_REV above)
GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" CGO_ENABLED=0 \
    gobuild_build gator "$HERE" "$PKG" "$ldflags" "$FLAGS_REV"
echo "$out/gator"
