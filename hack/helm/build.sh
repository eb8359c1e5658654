#!/usr/bin/env bash
# Build `helm` (helm.sh/helm/v3, the version go.mod requires) for celkeeper's chart tests into a cache
# outside the repository, only when the cache lacks it or holds a build of other module files.
#
#   hack/helm/build.sh            build when missing, print where the binary is
#   hack/helm/build.sh --force    rebuild
#   hack/helm/build.sh --print    print the binary's path and exit (no build)
#
# Cache: ${CELKEEPER_HELM_CACHE:-~/.cache/celkeeper-helm}/<helm version>/helm, with helm.stamp (a hash of
# this module and the build flags). Linked like helm's own Makefile does: the version, and the
# Kubernetes version `helm template` and `helm lint` assume (from the client-go it is built with).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
FLAGS_REV=1

gobuild_args 2,11 "$@"

helm_version=$(gobuild_require "$HERE/go.mod" helm.sh/helm/v3)
client_go=$(gobuild_require "$HERE/go.mod" k8s.io/client-go)
out=${CELKEEPER_HELM_CACHE:-$HOME/.cache/celkeeper-helm}/${helm_version#v}
if [ "$print_only" = 1 ]; then
    echo "$out/helm"
    exit 0
fi

gobuild_init helm "$out" "$force"
k8s_minor=$(echo "$client_go" | cut -d. -f2)
pkg=helm.sh/helm/v3
gobuild_build helm "$HERE" helm.sh/helm/v3/cmd/helm \
    "-s -w -X $pkg/internal/version.version=$helm_version -X $pkg/internal/version.metadata= \
-X $pkg/internal/version.gitTreeState=clean \
-X $pkg/pkg/lint/rules.k8sVersionMajor=1 -X $pkg/pkg/lint/rules.k8sVersionMinor=$k8s_minor \
-X $pkg/pkg/chartutil.k8sVersionMajor=1 -X $pkg/pkg/chartutil.k8sVersionMinor=$k8s_minor" "$FLAGS_REV"
echo "$out/helm"
