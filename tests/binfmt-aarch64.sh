#!/usr/bin/env bash
# Makes aarch64 binaries run on this x86_64 host: qemu-user-static installed, binfmt_misc
# mounted and enabled, and qemu-aarch64 registered and enabled. Idempotent; run as root by
# every stage that runs aarch64 code (tests/arm64.sh, and tests/e2e/rootfs.sh before it
# debootstraps an arm64 tree), so each works on a new machine whatever ran before it.
# Debian registers the entry through systemd-binfmt (/usr/lib/binfmt.d) or binfmt-support;
# neither runs where PID 1 is not systemd (containers, the CI machine), so it is written here.
set -euo pipefail
# shellcheck source=packaging/host-tools.sh
. "$(dirname "$0")/../packaging/host-tools.sh"
BINFMT=/proc/sys/fs/binfmt_misc
say() { echo "==> binfmt: $*"; }
die() { echo "binfmt-aarch64.sh: $*" >&2; exit 1; }
# qemu-aarch64 in binfmt_misc: by update-binfmts where it can, else from the binfmt.d file.
register() {
    local conf
        conf=/usr/lib/binfmt.d/qemu-aarch64.conf
        if command -v update-binfmts >/dev/null 2>&1 && [ -e /usr/share/binfmts/qemu-aarch64 ]; then
            say "registering qemu-aarch64 (update-binfmts --import)"
            update-binfmts --import qemu-aarch64 >/dev/null 2>&1 || true
        fi
        if [ ! -e "$BINFMT/qemu-aarch64" ]; then
            [ -r "$conf" ] || die "$conf is missing (is qemu-user-static >= 7.2 installed?)"
            say "registering qemu-aarch64 from $conf"
            grep -v '^[[:space:]]*\(#\|$\)' "$conf" >"$BINFMT/register" ||
                die "cannot register qemu-aarch64 with binfmt_misc"
        fi
}

# Several callers at once (the suite's e2e lanes and the aarch64 build start together): one at a
# time, or the second registration fails with EEXIST while the first is being written.
main() {
    [ "$(id -u)" = 0 ] || die "needs root (binfmt_misc registration)"
    exec 8>"${TMPDIR:-/tmp}/nthd-binfmt.lock"
    flock -w 120 8 || die "another registration held ${TMPDIR:-/tmp}/nthd-binfmt.lock for 120 s"
    if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
        say "installing qemu-user-static"
        apt_install qemu-user-static >/dev/null ||
            die "could not install qemu-user-static (apt-get install qemu-user-static)"
    fi
    if [ ! -e "$BINFMT/register" ]; then
        say "mounting binfmt_misc at $BINFMT"
        mount -t binfmt_misc binfmt_misc "$BINFMT" || die "cannot mount binfmt_misc at $BINFMT"
    fi
    [ "$(head -n 1 "$BINFMT/status")" = enabled ] || echo 1 >"$BINFMT/status" ||
        die "binfmt_misc is disabled and cannot be enabled"
    if [ ! -e "$BINFMT/qemu-aarch64" ]; then register; fi
    [ "$(head -n 1 "$BINFMT/qemu-aarch64")" = enabled ] || echo 1 >"$BINFMT/qemu-aarch64" ||
        die "qemu-aarch64 is registered but disabled, and cannot be enabled"
    say "qemu-aarch64: $(grep -E '^(interpreter|flags)' "$BINFMT/qemu-aarch64" | tr '\n' ' ')"
}

main "$@"
