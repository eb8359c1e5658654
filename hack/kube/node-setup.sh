#!/usr/bin/env bash
# The operating-system packages a test node needs, from Debian: runc (the OCI runtime containerd calls),
# the CNI plugins (bridge, host-local, loopback), nftables (kube-proxy's `nft`), and a C compiler with a
# static libc (Kubernetes' pause.c, hack/kube/images/build.py). iproute2 and util-linux (ip, nsenter,
# mount) are part of the base system.
#
#   hack/kube/node-setup.sh          install what is missing (apt-get, as root); say what is missing otherwise
#   hack/kube/node-setup.sh --check  only say what is missing (exit 1 if anything is)
set -euo pipefail

check_only=0
case "${1:-}" in
    --check) check_only=1 ;;
    "") ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "node-setup.sh: unknown argument $1" >&2; exit 2 ;;
esac

log() { echo "node-setup: $*" >&2; }

have() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1" >/dev/null 2>&1; }
have_cni() { [ -x /usr/lib/cni/bridge ] || [ -x /opt/cni/bin/bridge ]; }

missing=()
have runc || missing+=(runc)
have_cni || missing+=(containernetworking-plugins)
have nft || missing+=(nftables)
have gcc || missing+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/libc.a ] || missing+=(libc6-dev)
have ip || missing+=(iproute2)
have nsenter || missing+=(util-linux)

if [ ${#missing[@]} = 0 ]; then
    log "runc, CNI plugins, nftables and a C compiler are installed"
    exit 0
fi
if [ "$check_only" = 1 ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing: ${missing[*]} (as root on Debian: apt-get install ${missing[*]}); node tests will skip"
    exit 1
fi
log "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS
if ! apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}" >/dev/null
fi
log "installed in $((SECONDS - t0))s"
