#!/usr/bin/env bash
# Headless Chromium, for the tests that render the pages celkeeper writes (`celkeeper audit -o html`):
# Debian's package `chromium`, installed with apt-get when missing (as root); otherwise says what is missing.
#
#   hack/browser/setup.sh          install it when missing (apt-get, as root); say so otherwise
#   hack/browser/setup.sh --check  only say whether it is installed (exit 1 if not)
set -euo pipefail

log() { echo "browser-setup: $*" >&2; }

if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    log "chromium is installed"
    exit 0
fi
if [ "${1:-}" = "--check" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "chromium is missing (as root on Debian: apt-get install chromium); the page tests will skip"
    exit 1
fi
log "installing chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS
if ! apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends chromium >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends chromium >/dev/null
fi
log "installed in $((SECONDS - t0))s"
