#!/usr/bin/env bash
# Build kube-apiserver at the Kubernetes version of celkeeper's native library (k8s.io/kubernetes in
# celkeeper/native/go/go.mod, pinned by Gatekeeper's k8s.io/apiserver) into the test cluster's cache, beside
# the test cluster's own version: the admission policy differential (tests/e2e/admissionpolicy) compares
# celkeeper's offline answers with this API server, the one whose policy code the library runs.
#
#   hack/admissionpolicy/build.sh            build if missing or stale, print the binary directory
#   hack/admissionpolicy/build.sh --force    rebuild
#   hack/admissionpolicy/build.sh --print    print the binary directory and exit (no build)
#   hack/admissionpolicy/build.sh --check    exit 0 when the cached binary is up to date, 1 when missing or stale
#
# The Go module is hack/kube/apiserver-native (generated like hack/kube/apiserver by hack/kube/gen-gomod.py:
# `hack/kube/gen-gomod.py 1.36.2 --dir hack/kube/apiserver-native --node-dir /tmp/unused`). Cache:
# ${CELKEEPER_KUBE_CACHE:-~/.cache/celkeeper-kube}/<version>/kube-apiserver with its stamp; etcd is the
# test cluster's (hack/kube/build.sh builds it), linked beside it. Cold build: about 5 minutes on 2 cores.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
MOD=$HERE/../kube/apiserver-native
# shellcheck source=../lib/gobuild.sh
. "$HERE/../lib/gobuild.sh"
gobuild_args 2,10 "$@"

version=$(gobuild_require "$MOD/go.mod" k8s.io/kubernetes)
version=${version#v}
native=$(gobuild_require "$HERE/../../celkeeper/native/go/go.mod" k8s.io/kubernetes)
if [ "v$version" != "$native" ]; then
    echo "build.sh: hack/kube/apiserver-native builds Kubernetes v$version but the native library is built with $native" >&2
    exit 1
fi
cache=${CELKEEPER_KUBE_CACHE:-$HOME/.cache/celkeeper-kube}
out=$cache/$version
FLAGS_REV=1
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=v$version -X $vpkg.gitMajor=${version%%.*} \
-X $vpkg.gitMinor=$(echo "$version" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
if [ "$print_only" = 1 ]; then
    echo "$out"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    gobuild_current "$out/kube-apiserver" "$MOD" "$FLAGS_REV"
    exit
fi
gobuild_init admissionpolicy "$out" "$force"
gobuild_build kube-apiserver "$MOD" k8s.io/kubernetes/cmd/kube-apiserver "$ldflags" "$FLAGS_REV"
etcd=$("$HERE/../kube/build.sh" --print)/etcd
if [ ! -x "$out/etcd" ] && [ -x "$etcd" ]; then
    ln -sf "$etcd" "$out/etcd"
fi
echo "$out"
