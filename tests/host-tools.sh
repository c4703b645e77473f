#!/usr/bin/env bash
# packaging/host-tools.sh holds: the README's demo and the suite can start together on a bare
# machine because every host install waits for a held apt lock. Checks, as root:
#   1. no script in the tree runs apt-get update/install or `rustup target add` on the host
#      except through packaging/host-tools.sh;
#   2. apt_install waits for /var/lib/apt/lists/lock held by another process, says who holds
#      it, and succeeds once it is free;
#   3. with NTHD_APT_LOCK_WAIT=1 it gives up, naming the lock and the setting;
#   4. a failure that is not a lock (an unknown package) is returned at once, in apt's words;
#   5. cargo_tool asks the tool: a cargo-deb of the pinned version in CARGO_HOME/bin that
#      CARGO_HOME's records do not know (another CARGO_HOME put it in a shared bin/) is used as
#      it is, and one of another version is replaced with --force; no script runs
#      `cargo install` but through it.
# Usage: tests/host-tools.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# 1. apt-get or rustup at a command's position (not inside a message or a container's call).
direct_calls() {
    git ls-files -z '*.sh' .ci/run ':!packaging/host-tools.sh' | xargs -0 grep -nE \
        '(^[[:space:]]*|[;&|{][[:space:]]*|\$\([[:space:]]*|DEBIAN_FRONTEND=[^ ]+[[:space:]]+)(apt-get[[:space:]]+(-[^ ]+[[:space:]]+)*(update|install)|rustup[[:space:]]+target[[:space:]]+add)'
}

check_direct_calls() {
    local calls
    if calls=$(direct_calls); then
        fail "host installs that do not wait for the apt lock (use apt_install / rustup_target_add from packaging/host-tools.sh):"$'\n'"$calls"
    else
        ok "every host apt-get and rustup target add goes through packaging/host-tools.sh"
    fi
}

# Holds apt's lists lock (an fcntl lock, as apt takes it) for $1 seconds in the background.
hold_lists_lock() {
    python3 -c 'import fcntl, sys, time
f = open("/var/lib/apt/lists/lock", "w"); fcntl.lockf(f, fcntl.LOCK_EX)
time.sleep(float(sys.argv[1]))' "$1" &
    holder=$!
    sleep 0.5
}

# 2. A held lock is waited for.
check_lock_waited() {
    local t0 out waited
    hold_lists_lock 5
    t0=$SECONDS
    if out=$(apt_get update -qq 2>&1); then
        waited=$((SECONDS - t0))
        grep -q "held by process $holder (python3)" <<<"$out" ||
            fail "apt_get waited without naming the holder (pid $holder): $out"
        ((waited >= 3)) || fail "apt_get update returned after ${waited}s while the lock was held for 5 s"
        ok "apt_get update waited ${waited}s for a held lists lock, naming process $holder"
    else
        fail "apt_get update failed while another process held the lists lock for 5 s: $out"
    fi
    wait "$holder"
}

# 3. The wait is bounded.
check_wait_bounded() {
    local out
    hold_lists_lock 6
    if out=$(NTHD_APT_LOCK_WAIT=1 apt_get update -qq 2>&1); then
        fail "apt_get update succeeded while the lock was held (NTHD_APT_LOCK_WAIT=1)"
    else
        { grep -q 'gave up after 1s waiting for the apt/dpkg lock' <<<"$out" && grep -q NTHD_APT_LOCK_WAIT <<<"$out"; } ||
            fail "the give-up message names neither the wait nor NTHD_APT_LOCK_WAIT: $out"
        ok "NTHD_APT_LOCK_WAIT=1: gave up, naming the lock and the setting"
    fi
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
}

# 4. Any other failure is not retried.
check_not_retried() {
    local t0 out
    t0=$SECONDS
    if out=$(apt_get install -y -qq nthd-no-such-package 2>&1); then
        fail "apt_get installed a package that does not exist"
    else
        grep -q 'Unable to locate package nthd-no-such-package' <<<"$out" || fail "apt's own words are lost: $out"
        ((SECONDS - t0 < 10)) || fail "a missing package was retried for $((SECONDS - t0))s"
        ok "a missing package fails at once in apt's words"
    fi
}

# 5. A cargo tool is asked its version. `cargo install` is recorded by a stand-in, never run.
check_cargo_tool_asks() {
    local home calls out
    home=$(mktemp -d) calls=$(mktemp)
    mkdir -p "$home/bin"
    printf '#!/bin/sh\necho "cargo-deb 3.8.0"\n' >"$home/bin/cargo-deb"
    chmod +x "$home/bin/cargo-deb"
    # shellcheck disable=SC2317  # called by cargo_tool through its name
    cargo() { if [ "$1" = install ]; then echo "cargo install $*" >>"$calls"; else command cargo "$@"; fi; }
    out=$(CARGO_HOME=$home PATH=$home/bin:$PATH cargo_tool cargo-deb 3.8.0 deb 2>&1)
    if [ -s "$calls" ] || ! grep -q 'cargo-deb 3.8.0 already installed' <<<"$out"; then
        fail "a cargo-deb 3.8.0 unknown to CARGO_HOME's records was not used as it is: $out $(cat "$calls")"
    else
        ok "cargo-deb 3.8.0 in CARGO_HOME/bin, unknown to its records: asked, used as it is"
    fi
    printf '#!/bin/sh\necho "cargo-deb 3.7.0"\n' >"$home/bin/cargo-deb"
    CARGO_HOME=$home PATH=$home/bin:$PATH cargo_tool cargo-deb 3.8.0 deb >/dev/null 2>&1
    grep -q -- '--force cargo-deb@3.8.0' "$calls" ||
        fail "a cargo-deb of another version was not replaced with --force: $(cat "$calls")"
    unset -f cargo
    rm -rf "$home" "$calls"
    if git ls-files -z '*.sh' .ci/run ':!packaging/host-tools.sh' | xargs -0 grep -nE \
        '(^[[:space:]]*|[;&|{][[:space:]]*|\$\([[:space:]]*)cargo[[:space:]]+install'; then
        fail "cargo install outside packaging/host-tools.sh's cargo_tool (above)"
    fi
}

main() {
    check_direct_calls
    check_cargo_tool_asks
    check_lock_waited
    check_wait_bounded
    check_not_retried
    ((fails == 0)) || { echo "host-tools.sh: $fails failed" >&2; exit 1; }
}

main "$@"
