#!/usr/bin/env bash
# The aarch64 build of the test suite, run under emulation (issue #11, arm64 item (a)).
#
# Builds the whole workspace's tests for aarch64-unknown-linux-musl and runs them on this
# (x86_64) host through qemu-user (Debian's qemu-user-static) and binfmt_misc:
#   - cargo runs each test binary through the runner qemu-aarch64-static;
#   - the aarch64 nthd binary that the daemon tests spawn runs through binfmt_misc;
#   - dbus-daemon (for the fake logind) and the mock IMDS's sockets are the host's.
# Every test binary of the workspace runs: unit tests, provider, policy (incl. policy_props),
# the daemon-against-fake-logind tests, the testkit's tests and the doc tests. None is skipped.
#
# A test that fails is run once more, alone (--test-threads=1): the suite has wall-clock
# assertions (e.g. "≥ 20 polls at 200 ms within 5 s") that an emulated debug build on a loaded
# 2-core machine can miss. A test that passes only on that retry is listed by name; one that
# fails twice fails the script.
#
# Usage (as root on Debian 12, or with qemu-user-static installed and qemu-aarch64 registered):
#   bash tests/arm64.sh
# Time on this 2-core machine: 6 min 20 s with a warm target/ (build 21 s, tests 359 s), 8 min
# 55 s from an empty CARGO_TARGET_DIR (build 169 s, tests 366 s). Logs: target/arm64/.
# Prints each stage's time and a closing "N passed, N failed" line. Exit 0 only if every test
# passed (at the latest on its retry).
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

# --- 3. run every test binary under qemu-user ----------------------------------------------
# Sets run_log, first_rc, passed, failed, ignored, binaries and groups.
run_tests() {
    local t0=$SECONDS
    say "running the tests under $qemu ($("$qemu" --version | head -n 1))"
    export "$RUNNER_VAR=$qemu"
    run_log=$log_dir/test.log
    cargo test --workspace --target "$TARGET" --no-fail-fast >"$run_log" 2>&1
    first_rc=$?
    grep -E '^( *Running|test result:|error: )|\.\.\. FAILED$' "$run_log"
    stage_time "tests" "$([ $first_rc = 0 ] && echo ok || echo "exit $first_rc")" "$t0"

    # Totals over every "test result:" line (unit, integration and doc tests of both packages).
    read -r passed failed ignored < <(awk '/^test result:/ {
            for (i = 1; i <= NF; i++) {
                if ($(i+1) ~ /^passed;/) p += $i
                if ($(i+1) ~ /^failed;/) f += $i
                if ($(i+1) ~ /^ignored;/) g += $i
            } } END { print p+0, f+0, g+0 }' "$run_log")
    binaries=$(grep -cE '^ *(Running|Doc-tests)' "$run_log")

    # Failed tests, grouped by the cargo arguments that rerun their binary:
    #   "-p nthd --test daemon<TAB>name1 name2"
    mapfile -t groups < <(awk '
        /^ *Running / { names = "" }
        /^test .* \.\.\. FAILED$/ { names = names " " $2 }
        /to rerun pass `/ { match($0, /`[^`]*`/); args = substr($0, RSTART + 1, RLENGTH - 2);
                            print args "\t" names; names = "" }' "$run_log")
}

# --- 4. each failed test once more, alone: sets flaky and still ---------------------------
retry_failed() {
    local t0=$SECONDS g args names n
    flaky=()
    still=()
    [ ${#groups[@]} -gt 0 ] || return 0
    for g in "${groups[@]}"; do
        args=${g%%$'\t'*}
        names=${g#*$'\t'}
        # shellcheck disable=SC2086 # args and names are word lists
        if [ -z "${names// }" ]; then
            # The binary died without naming a test (a crash): rerun it whole, serially.
            say "retrying $args (whole binary), serially"
            if cargo test --target "$TARGET" $args -- --test-threads=1 >>"$log_dir/retry.log" 2>&1; then
                flaky+=("$args (whole binary)")
            else
                still+=("$args (whole binary)")
            fi
            continue
        fi
        for n in $names; do
            say "retrying $args $n, alone"
            # shellcheck disable=SC2086
            if cargo test --target "$TARGET" $args -- --exact "$n" --test-threads=1 \
                >>"$log_dir/retry.log" 2>&1; then
                flaky+=("$args: $n")
            else
                still+=("$args: $n")
            fi
        done
    done
    stage_time "retries" "${#flaky[@]} passed, ${#still[@]} failed again" "$t0"
}

# --- 5. the summary and the closing line; its status is the script's ------------------------
summary() {
    local f
    echo
    say "$binaries test binaries (incl. doc tests) ran under qemu-user; none skipped"
    say "$passed passed, $failed failed and $ignored ignored on the first run (log: $run_log)"
    for f in "${flaky[@]}"; do
        say "passed only when run alone (timing under emulation): $f"
    done
    for f in "${still[@]}"; do
        say "FAILED twice: $f (log: $log_dir/retry.log)"
    done
    if [ $first_rc != 0 ] && [ ${#groups[@]} = 0 ]; then
        say "cargo test exited $first_rc without a failed test to retry; see $run_log"
        still+=("cargo test exit $first_rc")
    fi
    stage_time "arm64 total" "$([ ${#still[@]} = 0 ] && echo ok || echo FAILED)" "$t_all"
    # The closing line: a test that passed on its retry counts as passed, one that failed twice as
    # failed (a binary that crashed and was rerun whole counts once either way).
    say "$ignored ignored (marked #[ignore] in the source, as on x86_64)"
    echo "arm64: $((passed + ${#flaky[@]})) passed, ${#still[@]} failed"
    [ ${#still[@]} = 0 ]
}

main() {
    t_all=$SECONDS
    mkdir -p "$log_dir"
    setup
    build
    run_tests
    retry_failed
    summary
}

main "$@"
