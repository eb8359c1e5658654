#!/usr/bin/env bash
# Build the test cluster's binaries into a cache outside the repository, only when the cache lacks them
# (or holds a build of other module files): kube-apiserver and etcd (the control plane every kube test
# uses) and the node (kubelet, kube-controller-manager, kube-scheduler, kube-proxy from the same
# k8s.io/kubernetes version; containerd 2.x with its runc shim and ctr).
#
#   hack/kube/build.sh                  build what is missing, print where the binaries are
#   hack/kube/build.sh --force          rebuild everything
#   hack/kube/build.sh --control-plane  only kube-apiserver and etcd
#   hack/kube/build.sh --print          print the binary directory and exit (no build)
#
# Cache: ${CELKEEPER_KUBE_CACHE:-~/.cache/celkeeper-kube}/<kubernetes version>/<binary>, each with a
# <binary>.stamp (a hash of the Go module that built it and the build flags). Binaries are built to a
# temporary name and renamed into place, so an interrupted build never leaves a half-written binary behind.
# Go's own module and build caches (GOMODCACHE, GOCACHE) are used as usual; a cold build on 2 cores takes
# minutes and about 3 GB of RAM, see hack/kube/README.md. The node's images and OS packages are
# hack/kube/node-setup.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
APISERVER_MOD=$HERE/apiserver
ETCD_MOD=$HERE/etcd
NODE_MOD=$HERE/node
CONTAINERD_MOD=$HERE/containerd
# Bump this when the build flags below change, so cached binaries are rebuilt.
FLAGS_REV=1

# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
node=1
gobuild_option() {
    case "$1" in
        --control-plane) node=0 ;;
        *) return 1 ;;
    esac
}
gobuild_args 2,18 "$@"

kube_version=$(sed -n 's|^require k8s.io/kubernetes v\([0-9][0-9.]*\)$|\1|p' "$APISERVER_MOD/go.mod")
if [ -z "$kube_version" ]; then
    kube_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {sub(/^v/, "", $2); print $2; exit}' \
        "$APISERVER_MOD/go.mod")
fi
if [ -z "$kube_version" ]; then
    echo "build.sh: cannot read the k8s.io/kubernetes version from $APISERVER_MOD/go.mod" >&2
    exit 1
fi
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}
                    $1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3; exit}' "$ETCD_MOD/go.mod")

cache=${CELKEEPER_KUBE_CACHE:-$HOME/.cache/celkeeper-kube}
out=$cache/$kube_version
if [ "$print_only" = 1 ]; then
    echo "$out"
    exit 0
fi

gobuild_init kube "$out" "$force"

total0=$SECONDS
gobuild_log "go: $(go version | cut -d' ' -f3-); kubernetes v$kube_version, etcd ${etcd_version:-?}; cache $out"
vpkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $vpkg.gitVersion=v$kube_version -X $vpkg.gitMajor=${kube_version%%.*} \
-X $vpkg.gitMinor=$(echo "$kube_version" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
gobuild_build kube-apiserver "$APISERVER_MOD" k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags" "$FLAGS_REV"
gobuild_build etcd "$ETCD_MOD" . "-s -w" "$FLAGS_REV"
if [ "$node" = 1 ]; then
    for cmd in kube-controller-manager kube-scheduler kubelet kube-proxy; do
        gobuild_build "$cmd" "$NODE_MOD" "k8s.io/kubernetes/cmd/$cmd" "$kube_ldflags" "$FLAGS_REV"
    done
    containerd_version=$(gobuild_require "$CONTAINERD_MOD/go.mod" github.com/containerd/containerd/v2)
    cpkg=github.com/containerd/containerd/v2
    # CGO off: static binaries, and the btrfs snapshotter (the one cgo plugin) is left out by its build tag.
    for cmd in containerd containerd-shim-runc-v2 ctr; do
        CGO_ENABLED=0 gobuild_build "$cmd" "$CONTAINERD_MOD" "$cpkg/cmd/$cmd" \
            "-s -w -X $cpkg/version.Version=$containerd_version -X $cpkg/version.Package=$cpkg" "$FLAGS_REV" \
            -tags "no_devmapper no_zfs"
    done
    t0=$SECONDS
    gobuild_log "node images (pause, nodetest) in $cache/images"
    python3 "$HERE/images/build.py" --out "$cache/images" >/dev/null
    gobuild_log "  images ready in $(gobuild_fmt_secs $((SECONDS - t0)))"
fi
gobuild_log "binaries ready in $out ($(gobuild_fmt_secs $((SECONDS - total0))))"
