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
#
# Any other arguments go to nthd-bench (e.g. --cases nthd-aws-1s,curl-5s --trials 50).
# Needs: cargo, dbus-daemon, dbus-send, curl, bash; perf is used when it works (precise CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=0
nthd=target/release/nthd
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) smoke=1; args+=("$1") ;;
        --nthd) nthd=${2:?--nthd needs a path}; shift ;;
        --nthd=*) nthd=${1#*=} ;;
        *) args+=("$1") ;;
    esac
    shift
done

for tool in dbus-daemon dbus-send curl; do
    command -v "$tool" >/dev/null || { echo "bench/run.sh: $tool is not installed" >&2; exit 1; }
done

echo "bench/run.sh: building (cargo build --release -p nthd -p nthd-testkit)" >&2
cargo build --release -p nthd -p nthd-testkit >&2

extra=()
limit=3600
if [ "$smoke" = 1 ]; then
    extra+=(--check)
    limit=300
fi

[ -x "$nthd" ] || { echo "bench/run.sh: $nthd is not an executable (build it first)" >&2; exit 1; }
echo "bench/run.sh: nthd under test: $nthd ($("$nthd" --version 2>&1 | head -n 1))" >&2

# nthd-bench kills all its children on SIGTERM; the hard kill is a last resort.
exec timeout --kill-after=20 "$limit" target/release/nthd-bench \
    --nthd "$nthd" "${extra[@]}" "${args[@]}"
