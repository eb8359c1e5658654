# Shared by the scripts that build test tools from Go modules into caches outside the repository
# (hack/kube/build.sh, hack/helm/build.sh, hack/vap/build.sh, hack/gator/build.sh; sourced, not run). A
# binary is rebuilt only when its stamp (a hash of the Go module that builds it, the build flags' revision
# and the extra `go build` arguments, if any) differs from the module in the tree; builds go to a
# temporary name and are renamed into place; a lock file serialises concurrent runs.
#
#   gobuild_args HELP_LINES "$@"             sets force / print_only / check_only from --force / --print /
#                                            --check (-h: the script's lines HELP_LINES, e.g. 2,13); any
#                                            other argument goes to the script's gobuild_option, if defined
#                                            (it returns non-zero for arguments it does not know)
#   gobuild_current TARGET MODULE_DIR FLAGS_REV [GO BUILD ARGS...]   0 when TARGET is built from the module
#                                            as it is
#   gobuild_require GO_MOD MODULE            the version GO_MOD requires of MODULE (exits when none)
#   gobuild_init PREFIX OUT_DIR FORCE       log prefix, where binaries go, 1 to rebuild regardless
#   gobuild_build NAME MODULE_DIR PACKAGE LDFLAGS FLAGS_REV [GO BUILD ARGS...]   (environment variables set
#                                            on the call, e.g. CGO_ENABLED=0, reach `go build`)
# shellcheck shell=bash

gobuild_args() {
    local help=$1 arg
    shift
    force=0
    print_only=0
    check_only=0
    for arg in "$@"; do
        case "$arg" in
            --force) force=1 ;;
            --print) print_only=1 ;;
            --check) check_only=1 ;;
            -h|--help) sed -n "${help}p" "$0"; exit 0 ;;
            *)
                if declare -F gobuild_option >/dev/null && gobuild_option "$arg"; then continue; fi
                echo "$(basename "$0"): unknown argument $arg" >&2; exit 2
                ;;
        esac
    done
}

gobuild_require() {
    local gomod=$1 module=$2 version
    version=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3; exit} $1 == m {print $2; exit}' "$gomod")
    if [ -z "$version" ]; then
        echo "$(basename "$0"): cannot read the version of $module from $gomod" >&2
        exit 1
    fi
    echo "$version"
}

gobuild_log() { echo "$GOBUILD_PREFIX: $*" >&2; }

gobuild_fmt_secs() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

gobuild_stamp() {
    local mod=$1 rev=$2
    shift 2
    {
        echo "flags-rev $rev"
        if [ $# -gt 0 ]; then echo "args $*"; fi
        cd "$mod" && cat go.mod go.sum ./*.go
    } | sha256sum | cut -c1-16
}

gobuild_current() {
    local target=$1 mod=$2 rev=$3
    shift 3
    [ -x "$target" ] && [ "$(cat "$target.stamp" 2>/dev/null)" = "$(gobuild_stamp "$mod" "$rev" "$@")" ]
}

# A line every minute while a long step runs, so CI logs show the build is alive.
GOBUILD_HEARTBEAT=
gobuild_start_heartbeat() {
    local what=$1 started=$SECONDS
    (
        trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
        while :; do
            sleep 60 &
            sleeper=$!
            wait "$sleeper"
            gobuild_log "  ... still $what ($(gobuild_fmt_secs $((SECONDS - started))))"
        done
    ) &
    GOBUILD_HEARTBEAT=$!
}
gobuild_stop_heartbeat() {
    if [ -n "$GOBUILD_HEARTBEAT" ]; then
        kill "$GOBUILD_HEARTBEAT" 2>/dev/null || true
        wait "$GOBUILD_HEARTBEAT" 2>/dev/null || true
        GOBUILD_HEARTBEAT=
    fi
}

GOBUILD_TMP=
gobuild_cleanup() {
    gobuild_stop_heartbeat
    if [ -n "$GOBUILD_TMP" ]; then rm -f "$GOBUILD_TMP"; fi
}

gobuild_init() {
    GOBUILD_PREFIX=$1
    GOBUILD_OUT=$2
    GOBUILD_FORCE=$3
    if ! command -v go >/dev/null 2>&1; then
        gobuild_log "no Go toolchain on PATH: cannot build"
        exit 1
    fi
    trap gobuild_cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$GOBUILD_OUT"
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$GOBUILD_OUT/.build.lock"
        if ! flock -n 9; then
            gobuild_log "another build holds $GOBUILD_OUT/.build.lock; waiting for it"
            flock 9
        fi
    fi
}

gobuild_build() {
    local name=$1 mod=$2 pkg=$3 ldflags=$4 rev=$5
    shift 5
    local target=$GOBUILD_OUT/$name want t0 t1
    want=$(gobuild_stamp "$mod" "$rev" "$@")
    if [ "$GOBUILD_FORCE" = 0 ] && gobuild_current "$target" "$mod" "$rev" "$@"; then
        gobuild_log "$name is up to date: $target"
        return 0
    fi
    gobuild_log "building $name ($pkg) into $target"
    GOBUILD_TMP=$GOBUILD_OUT/.$name.tmp.$$
    t0=$SECONDS
    gobuild_log "  fetching Go modules (GOMODCACHE=$(go env GOMODCACHE))"
    gobuild_start_heartbeat "fetching modules for $name"
    (cd "$mod" && go list -mod=readonly -deps "$@" "$pkg" >/dev/null)
    gobuild_stop_heartbeat
    t1=$SECONDS
    gobuild_log "  modules ready in $(gobuild_fmt_secs $((t1 - t0))); compiling (GOCACHE=$(go env GOCACHE))"
    gobuild_start_heartbeat "compiling $name"
    (cd "$mod" && go build -mod=readonly -buildvcs=false -ldflags "$ldflags" "$@" -o "$GOBUILD_TMP" "$pkg")
    gobuild_stop_heartbeat
    mv -f "$GOBUILD_TMP" "$target"
    GOBUILD_TMP=
    echo "$want" >"$target.stamp"
    gobuild_log "  built $name in $(gobuild_fmt_secs $((SECONDS - t0))) (compile $(gobuild_fmt_secs $((SECONDS - t1))))"
}
