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

force=0
print_only=0
node=1
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --print) print_only=1 ;;
        --control-plane) node=0 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

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

log() { echo "kube: $*" >&2; }

if ! command -v go >/dev/null 2>&1; then
    log "no Go toolchain on PATH: cannot build kube-apiserver and etcd"
    exit 1
fi

# The stamp names what a binary was built from: the module's files, these build flags and the extra
# `go build` arguments, if any (none for kube-apiserver and etcd, whose stamps predate them).
stamp_of() {
    local mod=$1
    shift
    {
        echo "flags-rev $FLAGS_REV"
        if [ $# -gt 0 ]; then echo "args $*"; fi
        cd "$mod" && cat go.mod go.sum ./*.go
    } | sha256sum | cut -c1-16
}

fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# Print a line every minute while a long step runs, so CI logs show the build is alive.
heartbeat_pid=
start_heartbeat() {
    local what=$1 started=$SECONDS
    (
        # `sleep & wait`: a TERM interrupts the wait at once (a foreground sleep would delay it a minute).
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        while :; do
            sleep 60 &
            sleeper=$!
            wait "$sleeper"
            log "  ... still $what ($(fmt_secs $((SECONDS - started))))"
        done
    ) &
    heartbeat_pid=$!
}
stop_heartbeat() {
    if [ -n "$heartbeat_pid" ]; then
        kill "$heartbeat_pid" 2>/dev/null || true
        wait "$heartbeat_pid" 2>/dev/null || true
        heartbeat_pid=
    fi
}

tmp_bin=
cleanup() {
    stop_heartbeat
    if [ -n "$tmp_bin" ]; then rm -f "$tmp_bin"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# build NAME MODULE_DIR PACKAGE LDFLAGS [GO BUILD ARGS...]
build() {
    local name=$1 mod=$2 pkg=$3 ldflags=$4
    shift 4
    local target=$out/$name stamp want t0 t1
    want=$(stamp_of "$mod" "$@")
    if [ "$force" = 0 ] && [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$want" ]; then
        log "$name is up to date: $target"
        return 0
    fi
    log "building $name ($pkg) into $target"
    tmp_bin=$out/.$name.tmp.$$
    t0=$SECONDS
    log "  fetching Go modules (GOMODCACHE=$(go env GOMODCACHE))"
    start_heartbeat "fetching modules for $name"
    (cd "$mod" && go list -mod=readonly -deps "$@" "$pkg" >/dev/null)
    stop_heartbeat
    t1=$SECONDS
    log "  modules ready in $(fmt_secs $((t1 - t0))); compiling (GOCACHE=$(go env GOCACHE))"
    start_heartbeat "compiling $name"
    (cd "$mod" && go build -mod=readonly -buildvcs=false -ldflags "$ldflags" "$@" -o "$tmp_bin" "$pkg")
    stop_heartbeat
    mv -f "$tmp_bin" "$target"
    tmp_bin=
    echo "$want" >"$target.stamp"
    log "  built $name in $(fmt_secs $((SECONDS - t0))) (compile $(fmt_secs $((SECONDS - t1))))"
}

mkdir -p "$out"
# Two builds at once (two shells running ./dev test) would only race for the rename; serialise them.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.build.lock"
    if ! flock -n 9; then
        log "another build holds $cache/.build.lock; waiting for it"
        flock 9
    fi
fi

total0=$SECONDS
log "go: $(go version | cut -d' ' -f3-); kubernetes v$kube_version, etcd ${etcd_version:-?}; cache $out"
vpkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $vpkg.gitVersion=v$kube_version -X $vpkg.gitMajor=${kube_version%%.*} \
-X $vpkg.gitMinor=$(echo "$kube_version" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
build kube-apiserver "$APISERVER_MOD" k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build etcd "$ETCD_MOD" . "-s -w"
if [ "$node" = 1 ]; then
    for cmd in kube-controller-manager kube-scheduler kubelet kube-proxy; do
        build "$cmd" "$NODE_MOD" "k8s.io/kubernetes/cmd/$cmd" "$kube_ldflags"
    done
    containerd_version=$(awk '$1 == "require" && $2 == "github.com/containerd/containerd/v2" {print $3; exit}
                              $1 == "github.com/containerd/containerd/v2" {print $2; exit}' "$CONTAINERD_MOD/go.mod")
    cpkg=github.com/containerd/containerd/v2
    # CGO off: static binaries, and the btrfs snapshotter (the one cgo plugin) is left out by its build tag.
    for cmd in containerd containerd-shim-runc-v2 ctr; do
        CGO_ENABLED=0 build "$cmd" "$CONTAINERD_MOD" "$cpkg/cmd/$cmd" \
            "-s -w -X $cpkg/version.Version=$containerd_version -X $cpkg/version.Package=$cpkg" \
            -tags "no_devmapper no_zfs"
    done
    t0=$SECONDS
    log "node images (pause, nodetest) in $cache/images"
    python3 "$HERE/images/build.py" --out "$cache/images" >/dev/null
    log "  images ready in $(fmt_secs $((SECONDS - t0)))"
fi
log "binaries ready in $out ($(fmt_secs $((SECONDS - total0))))"
