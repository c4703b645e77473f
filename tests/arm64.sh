#!/usr/bin/env bash
# The aarch64 build of the test suite, run under emulation.
#
# Builds the whole workspace's tests for aarch64-unknown-linux-musl and runs them on this
# (x86_64) host through qemu-user (Debian's qemu-user-static) and binfmt_misc:
#   - cargo-nextest runs each test, in a process of its own, through the runner
#     qemu-aarch64-static, several at once (.config/nextest.toml, profile ci);
#   - the doc tests run through the same runner (cargo test --doc);
#   - the aarch64 nthd binary that the daemon tests spawn runs through binfmt_misc;
#   - dbus-daemon (for the fake logind) and the mock IMDS's sockets are the host's.
# Every test binary of the workspace runs: unit tests, provider, policy (incl. policy_props),
# the daemon-against-fake-logind tests, the testkit's tests and the doc tests. None is skipped,
# and none is retried: a test that fails under emulation fails the script.
#
# Usage (as root on Debian 12, or with qemu-user-static installed and qemu-aarch64 registered):
#   bash tests/arm64.sh [build|run]    (default: both; the suite builds while other stages wait
#                                       on timers, and runs later)
# Logs: target/arm64/. Prints each step's time and nextest's closing summary. Exit 0 only if
# every test passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh
export CARGO_TERM_COLOR=never

TARGET=aarch64-unknown-linux-musl
RUNNER_VAR=CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_RUNNER
log_dir=target/arm64

say() { echo "==> arm64: $*"; }
die() { echo "arm64.sh: $*" >&2; exit 1; }
stage_time() { say "$1: $2 in $((SECONDS - $3))s"; }

# --- 1. qemu-user-static, binfmt_misc, the Rust target ------------------------------------
setup() {
    local t0=$SECONDS need=()
    command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
    command -v dbus-daemon >/dev/null 2>&1 || need+=(dbus)
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu)
    if [ ${#need[@]} -gt 0 ]; then
        say "installing ${need[*]}"
        [ "$(id -u)" = 0 ] || die "needs root to install ${need[*]} (apt-get install ${need[*]})"
        apt_install "${need[@]}" >/dev/null ||
            die "could not install ${need[*]}"
    fi
    qemu=$(command -v qemu-aarch64-static)

    # binfmt_misc: mounted, enabled, and qemu-aarch64 registered and enabled (shared with the
    # arm64 e2e tree's debootstrap, which may run first on a new machine).
    bash tests/binfmt-aarch64.sh || die "aarch64 binaries cannot run here (see above)"

    rustup_target_add "$TARGET" || die "rustup target add $TARGET failed"
    nextest_tool || die "cargo install cargo-nextest failed"
    stage_time "setup" ok "$t0"
}

# --- 2. build the tests (and the aarch64 nthd and testkit binaries they spawn) ------------------
build() {
    local t0=$SECONDS nthd_bin file_out version
    say "cargo test --workspace --target $TARGET --no-run"
    if ! cargo test --workspace --target "$TARGET" --no-run >"$log_dir/build.log" 2>&1; then
        tail -n 40 "$log_dir/build.log"
        stage_time "build" FAILED "$t0"
        die "the aarch64 test build failed (log: $log_dir/build.log)"
    fi
    stage_time "build" ok "$t0"

    # The binaries the tests spawn must run through binfmt_misc, not only the runner's.
    nthd_bin=${CARGO_TARGET_DIR:-target}/$TARGET/debug/nthd
    file_out=$(od -An -tx1 -j18 -N2 "$nthd_bin" 2>/dev/null | tr -d ' \n')
    [ "$file_out" = b700 ] || die "$nthd_bin is not an aarch64 ELF (e_machine $file_out)"
    version=$("$nthd_bin" --version 2>&1) ||
        die "the aarch64 nthd does not run through binfmt_misc: $version"
    say "binfmt runs the aarch64 nthd: $version"
}

# --- 3. every test under qemu-user, then the doc tests -------------------------------------
run_tests() {
    local t0=$SECONDS rc=0 doc_rc=0
    say "running the tests under $qemu ($("$qemu" --version | head -n 1))"
    export "$RUNNER_VAR=$qemu"
    cargo nextest run --workspace --target "$TARGET" --profile ci >"$log_dir/test.log" 2>&1 || rc=$?
    grep -E '^ +(FAIL|SLOW|TIMEOUT|SIGSEGV|SIGABRT|LEAK)|^ +Summary|tests? (run|failed)' "$log_dir/test.log"
    stage_time "tests (cargo nextest)" "$([ $rc = 0 ] && echo ok || echo "exit $rc")" "$t0"
    t0=$SECONDS
    cargo test --workspace --target "$TARGET" --doc >"$log_dir/doc.log" 2>&1 || doc_rc=$?
    grep -E '^test result:' "$log_dir/doc.log"
    stage_time "doc tests" "$([ $doc_rc = 0 ] && echo ok || echo "exit $doc_rc")" "$t0"
    [ $rc = 0 ] || say "failed: see $log_dir/test.log"
    [ $doc_rc = 0 ] || { say "doc tests failed: see $log_dir/doc.log"; tail -n 30 "$log_dir/doc.log"; }
    [ $rc = 0 ] && [ $doc_rc = 0 ]
}

main() {
    local t_all=$SECONDS rc=0
    mkdir -p "$log_dir"
    case "${1:-all}" in
        build) setup; build ;;
        run) setup; run_tests || rc=$? ;;
        all) setup; build; run_tests || rc=$? ;;
        *) die "usage: bash tests/arm64.sh [build|run]" ;;
    esac
    stage_time "arm64 ${1:-all}" "$([ $rc = 0 ] && echo ok || echo FAILED)" "$t_all"
    return $rc
}

main "$@"
