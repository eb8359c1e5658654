#!/usr/bin/env bash
# Build vapgen (Gatekeeper's own ValidatingAdmissionPolicy transform, see main.go) into a cache outside
# the repository, only when the cache lacks it or holds a build of other module files.
#
#   hack/vap/build.sh            build if missing or stale, print the binary's path
#   hack/vap/build.sh --print    print the binary's path and exit (no build)
#   hack/vap/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#   hack/vap/build.sh --force    rebuild
#
# Cache: ${CELKEEPER_VAPGEN_CACHE:-~/.cache/celkeeper-vapgen}/<gatekeeper version>/vapgen with
# vapgen.stamp (a hash of this module's files and the build flags), built to a temporary name and
# renamed into place; a lock serialises concurrent runs (hack/lib/gobuild.sh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
FLAGS_REV=1  # bump when the build flags below change

gobuild_args 2,12 "$@"

version=$(gobuild_require "$HERE/go.mod" github.com/open-policy-agent/gatekeeper/v3)
out=${CELKEEPER_VAPGEN_CACHE:-$HOME/.cache/celkeeper-vapgen}/${version#v}
if [ "$print_only" = 1 ]; then
    echo "$out/vapgen"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    gobuild_current "$out/vapgen" "$HERE" "$FLAGS_REV"
    exit
fi

gobuild_init vapgen "$out" "$force"
gobuild_build vapgen "$HERE" . "-s -w" "$FLAGS_REV"
echo "$out/vapgen"
