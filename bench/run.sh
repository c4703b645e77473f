#!/usr/bin/env bash
# nthd benchmark: detection latency, idle cost, startup time and binary size, compared with the
# bash + curl loop people run instead. See bench/README.md.
#
#   bash bench/run.sh           full run (200 trials per case, 120 s idle window; ~6 min once built)
#                               -> bench/results/latest.{md,json}
#   bash bench/run.sh --smoke   a few trials per case, 10 s idle window (< 2 min once built);
#                               fails (exit 3) if anything could not be measured. For CI.
#                               -> bench/results/smoke/latest.{md,json}
#
#   bash bench/run.sh --nthd PATH   the nthd binary under test (default target/release/nthd, the
#                               glibc build made here), e.g. the static build:
#                               --nthd target/x86_64-unknown-linux-musl/release/nthd
#                               (cargo build --release --target x86_64-unknown-linux-musl first)
#   bash bench/run.sh --bin-dir DIR   nthd-bench (and, unless --nthd says otherwise, nthd) from DIR,
#                               built already: nothing is built. The suite passes the static
#                               build's directory (target/x86_64-unknown-linux-musl/release), so
#                               its smoke measures the nthd that is packaged, built once.
#   bash bench/run.sh --no-real-idle   skip bench/real-idle.sh (the packaged unit on a booted
#                               Debian 12: 120 s window, 20 s with --smoke; needs root and the
#                               e2e suite's cached tree; see bench/README.md)
#
# Any other arguments go to nthd-bench (e.g. --cases nthd-aws-1s,curl-5s --trials 50).
# Needs: cargo, dbus-daemon, dbus-send, curl, bash; perf is used when it works (precise CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
real_idle=1
nthd=""
bin_dir=""
args=()
parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --smoke) smoke=1; args+=("$1") ;;
            --no-real-idle) real_idle=0 ;;
            --nthd) nthd=${2:?--nthd needs a path}; shift ;;
            --nthd=*) nthd=${1#*=} ;;
            --bin-dir) bin_dir=${2:?--bin-dir needs a directory}; shift ;;
            --bin-dir=*) bin_dir=${1#*=} ;;
            *) args+=("$1") ;;
        esac
        shift
    done
}

check_tools() {
    local tool
    for tool in dbus-daemon dbus-send curl; do
        command -v "$tool" >/dev/null || { echo "bench/run.sh: $tool is not installed" >&2; exit 1; }
    done
}

# The real-system idle cost first, while nothing else of this benchmark runs. Its result (or
# why it could not be measured) goes into the report through --real-idle.
measure_real_idle() {
    local real_json secs
    real_json=target/bench/real-idle.json
    mkdir -p target/bench
    secs=120
    [ "$smoke" = 1 ] && secs=20
    echo "bench/run.sh: bench/real-idle.sh --secs $secs (the packaged unit on a booted Debian 12)" >&2
    if ! bash bench/real-idle.sh --secs "$secs" --out "$real_json" >/dev/null; then
        echo '{"error": "bench/real-idle.sh could not measure (its messages are above)"}' >"$real_json"
    fi
    extra+=(--real-idle "$real_json")
}

main() {
    parse_args "$@"
    check_tools
    if [ -z "$bin_dir" ]; then
        echo "bench/run.sh: building (cargo build --release -p nthd -p nthd-testkit)" >&2
        cargo build --release -p nthd -p nthd-testkit >&2
        bin_dir=target/release
    fi
    nthd=${nthd:-$bin_dir/nthd}
    [ -x "$bin_dir/nthd-bench" ] || { echo "bench/run.sh: no $bin_dir/nthd-bench (build it first)" >&2; exit 1; }

    extra=()
    limit=3600
    if [ "$smoke" = 1 ]; then
        extra+=(--check)
        limit=300
    fi

    [ -x "$nthd" ] || { echo "bench/run.sh: $nthd is not an executable (build it first)" >&2; exit 1; }
    echo "bench/run.sh: nthd under test: $nthd ($("$nthd" --version 2>&1 | head -n 1))" >&2
    if [ "$real_idle" = 1 ]; then measure_real_idle; fi

    # nthd-bench kills all its children on SIGTERM; the hard kill is a last resort.
    exec timeout --kill-after=20 "$limit" "$bin_dir/nthd-bench" \
        --nthd "$nthd" "${extra[@]}" "${args[@]}"
}

main "$@"
