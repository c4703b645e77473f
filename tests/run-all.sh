#!/usr/bin/env bash
# The full test suite, as the README gives it and CI runs it (as root, on a fresh Debian 12
# machine of this kind). It installs what it needs, keeps every build under target/, and runs:
#   1. cargo fmt --check, clippy -D warnings, cargo test (unit, mock IMDS, fake logind)
#   2. packages: cargo deb + cargo generate-rpm, lintian, rpmlint, unit exposure score
#   3. the real-system e2e suite: a booted Debian 12 with systemd, dbus, polkit and logind
#   4. smoke runs of the benchmark and the fuzzers, and cargo-deny
# Usage: tests/run-all.sh [--quick]   (--quick: stage 1 only)
set -uo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
quick=0
[ "${1:-}" = "--quick" ] && quick=1

# System packages the tests use (dbus-daemon for the fake logind, debootstrap and
# systemd-nspawn for the real-system suite, the linters for the packages).
need=()
for pair in dbus-daemon:dbus debootstrap:debootstrap systemd-nspawn:systemd-container \
            ip:iproute2 curl:curl lintian:lintian rpmlint:rpmlint rpm:rpm busctl:systemd; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "==> installing ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

declare -a names results
stage() {
    local name=$1; shift
    echo
    echo "==> $name"
    local t0=$SECONDS
    "$@"
    local rc=$?
    names+=("$name")
    results+=("$rc")
    echo "==> $name: $([ $rc = 0 ] && echo ok || echo "FAILED ($rc)") in $((SECONDS - t0))s"
    return $rc
}

stage "cargo fmt --check" cargo fmt --all -- --check
stage "cargo clippy" cargo clippy --workspace --all-targets -- -D warnings
stage "cargo test" cargo test --workspace
if [ $quick = 0 ]; then
    stage "packages (deb, rpm, lint, exposure)" bash packaging/build.sh
    stage "real-system e2e" bash tests/e2e/run.sh
    stage "benchmark smoke" bash bench/run.sh --smoke
    stage "fuzz smoke" bash fuzz/run.sh --smoke
    stage "cargo deny" bash tests/deny.sh
fi

echo
pass=0 fail=0
for i in "${!names[@]}"; do
    if [ "${results[$i]}" = 0 ]; then pass=$((pass + 1)); echo "  ok      ${names[$i]}"
    else fail=$((fail + 1)); echo "  FAILED  ${names[$i]}"; fi
done
echo "stages: $pass passed, $fail failed"
[ $fail = 0 ]
