#!/usr/bin/env bash
# Build celkeeper's image from the Dockerfile with buildah, on a Debian base made here with debootstrap
# and with this machine's Go toolchain as the Dockerfile's Go stage (no registry needed), into
# ${CELKEEPER_IMAGE_CACHE:-~/.cache/celkeeper-image}/ as OCI archives. See hack/image/README.md.
#
#   hack/image/build.sh            build what is missing or stale, print the image archive's path
#   hack/image/build.sh --base     only the base
#   hack/image/build.sh --force    rebuild the base and the image
#   hack/image/build.sh --print    print the image archive's path and exit
#
# Needs root (debootstrap, buildah's chroot isolation) and Go (the cel-go engine is built in the image
# with it); apt-get installs buildah and debootstrap when missing. buildah's storage is private to this
# cache (vfs driver), so nothing else's images are touched. The build reads this machine's Go module
# cache as a module proxy and shares its Go build cache (both keyed by content), so a warm build does
# not download or compile the engine's dependencies again.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REV=1                                   # bump when this script's way of making the base changes
IMAGE_REV=2                             # bump when its way of building the image changes
SUITE=bookworm
MIRROR=${CELKEEPER_DEBIAN_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=python3.11,python3.11-venv,python3-distutils,python3-lib2to3,ca-certificates
BASE_REF=localhost/celkeeper-base:$SUITE-python3.11

cache=${CELKEEPER_IMAGE_CACHE:-$HOME/.cache/celkeeper-image}
force=0 base_only=0 print_only=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --base) base_only=1 ;;
        --print) print_only=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done
if [ "$print_only" = 1 ]; then echo "$cache/celkeeper.oci.tar"; exit 0; fi

log() { echo "image: $*" >&2; }
fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

if [ "$(id -u)" != 0 ]; then
    log "needs root (debootstrap and buildah's chroot isolation); run as root or use docker build"
    exit 1
fi
if ! command -v go >/dev/null 2>&1; then
    log "needs Go: the image builds the cel-go engine with this machine's toolchain (or use docker build)"
    exit 1
fi
missing=()
command -v buildah >/dev/null 2>&1 || missing+=(buildah)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} with apt-get"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

mkdir -p "$cache"
exec 9>"$cache/.build.lock"
if ! flock -n 9; then log "another build holds $cache/.build.lock; waiting"; flock 9; fi

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/celkeeper/__init__.py")
IMAGE_REF=docker.io/celkeeper/celkeeper:v$version
STORE=(--root "$cache/storage" --runroot "$cache/run" --storage-driver vfs)
work=$(mktemp -d "$cache/.work.XXXXXX")
cleanup() { rm -rf "$work"; buildah "${STORE[@]}" rm --all >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the base: debootstrap minbase + Debian's python3.11 ------------------------------------------
base_stamp=$(printf '%s\n' "rev $REV" "$SUITE" "$BASE_PACKAGES" | sha256sum | cut -c1-16)
if [ "$force" = 1 ] || [ ! -f "$cache/base.oci.tar" ] || [ "$(cat "$cache/base.stamp" 2>/dev/null)" != "$base_stamp" ]; then
    t0=$SECONDS
    log "making the base: debootstrap --variant=minbase $SUITE + $BASE_PACKAGES"
    rootfs=$work/rootfs
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    # what a runtime image does not need: package caches and lists, documentation, locales
    rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/* "$rootfs"/tmp/*
    find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
    ctr=$(buildah "${STORE[@]}" from scratch)
    mnt=$(buildah "${STORE[@]}" mount "$ctr")
    cp -a "$rootfs"/. "$mnt"/
    buildah "${STORE[@]}" umount "$ctr" >/dev/null
    buildah "${STORE[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd /usr/bin/python3 --os linux --arch amd64 "$ctr"
    buildah "${STORE[@]}" commit -q --rm "$ctr" "$BASE_REF" >/dev/null
    buildah "${STORE[@]}" push -q "$BASE_REF" "oci-archive:$work/base.oci.tar:$BASE_REF"
    mv -f "$work/base.oci.tar" "$cache/base.oci.tar"
    echo "$base_stamp" >"$cache/base.stamp"
    rm -f "$cache/celkeeper.stamp"    # the image depends on the base
    log "base ready in $(fmt_secs $((SECONDS - t0))) ($(du -m "$cache/base.oci.tar" | cut -f1) MB archive)"
elif ! buildah "${STORE[@]}" inspect --type image "$BASE_REF" >/dev/null 2>&1; then
    buildah "${STORE[@]}" pull -q "oci-archive:$cache/base.oci.tar" >/dev/null
    buildah "${STORE[@]}" tag "$(buildah "${STORE[@]}" images -q | head -1)" "$BASE_REF" 2>/dev/null || true
fi
if [ "$base_only" = 1 ]; then echo "$cache/base.oci.tar"; exit 0; fi

# ---- the Go stage: this machine's toolchain in /usr/local/go (what the Dockerfile takes from GO_IMAGE) -------
go_version=$(go env GOVERSION)
GO_REF=localhost/celkeeper-go:$go_version
if ! buildah "${STORE[@]}" inspect --type image "$GO_REF" >/dev/null 2>&1; then
    t0=$SECONDS
    log "making $GO_REF from $(go env GOROOT)"
    ctr=$(buildah "${STORE[@]}" from scratch)
    mnt=$(buildah "${STORE[@]}" mount "$ctr")
    mkdir -p "$mnt/usr/local/go"
    cp -a "$(go env GOROOT)"/. "$mnt/usr/local/go/"
    buildah "${STORE[@]}" umount "$ctr" >/dev/null
    buildah "${STORE[@]}" config --env PATH=/usr/local/go/bin:/usr/bin:/bin --os linux --arch amd64 "$ctr"
    buildah "${STORE[@]}" commit -q --rm "$ctr" "$GO_REF" >/dev/null
    log "Go stage ready in $(fmt_secs $((SECONDS - t0)))"
fi

# ---- the image: the Dockerfile, built on that base --------------------------------------------------
# inputs: what the Dockerfile copies (the context after .dockerignore), the Dockerfile, the base
context_files() {
    (cd "$ROOT" && git ls-files -co --exclude-standard -- pyproject.toml setup.cfg setup.py README.md celkeeper \
        | grep -v -e '__pycache__' -e '\.pyc$' -e '_libcelkeeper[-a-z]*\.so$' | LC_ALL=C sort)
}
image_stamp=$( {
    echo "rev $IMAGE_REV base $base_stamp ref $IMAGE_REF go $go_version"
    (cd "$ROOT" && sha256sum Dockerfile .dockerignore)  # by content and name, not by where the checkout is
    sha256sum <"$0"
    context_files | (cd "$ROOT" && xargs -d '\n' sha256sum)
} | sha256sum | cut -c1-16)
if [ "$force" = 0 ] && [ -f "$cache/celkeeper.oci.tar" ] && [ "$(cat "$cache/celkeeper.stamp" 2>/dev/null)" = "$image_stamp" ]; then
    log "image is up to date: $IMAGE_REF"
    echo "$cache/celkeeper.oci.tar"
    exit 0
fi
t0=$SECONDS
log "building $IMAGE_REF from the Dockerfile on $BASE_REF"
secret=()
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
    secret=(--secret "id=cacert,src=/etc/ssl/certs/ca-certificates.crt")
fi
# Go modules: this machine's module cache first (a file proxy; go.sum still checks every module), then
# the public proxy for anything it lacks; the Go build cache is shared (its entries are keyed by content)
modcache=$(go env GOMODCACHE) gocache=$(go env GOCACHE)
mkdir -p "$modcache/cache/download" "$gocache"
buildah "${STORE[@]}" build --isolation chroot --network host --layers=false -q \
    --pull=never --build-arg "BASE=$BASE_REF" --build-arg "GO_IMAGE=$GO_REF" \
    --build-arg "GOPROXY=file:///run/goproxy,https://proxy.golang.org,direct" \
    --volume "$modcache/cache/download:/run/goproxy:ro" --volume "$gocache:/root/.cache/go-build" \
    "${secret[@]}" \
    -f "$ROOT/Dockerfile" -t "$IMAGE_REF" "$ROOT" >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; exit 1; }
buildah "${STORE[@]}" push -q "$IMAGE_REF" "oci-archive:$work/celkeeper.oci.tar:$IMAGE_REF"
mv -f "$work/celkeeper.oci.tar" "$cache/celkeeper.oci.tar"
echo "$IMAGE_REF" >"$cache/celkeeper.ref"
echo "$image_stamp" >"$cache/celkeeper.stamp"
# keep only the base, the Go stage and this image in the private store
buildah "${STORE[@]}" rmi --prune >/dev/null 2>&1 || true
log "image ready in $(fmt_secs $((SECONDS - t0))): $(du -m "$cache/celkeeper.oci.tar" | cut -f1) MB archive"
echo "$cache/celkeeper.oci.tar"
