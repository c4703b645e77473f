#!/usr/bin/env bash
# Runs nthd's fuzz targets one after the other and writes a summary table.
#
#   fuzz/run.sh [--smoke] [--time SECS] [--runs N] [--sanitizer S] [--results FILE]
#               [--update] [--jobs N] [--build-only] [TARGET...]
#
# Full campaign (the default): each target until 10,000,000 executions or 30 minutes,
# whichever comes first; the table goes to fuzz/results.md.
# --smoke: 20,000 executions each (at most 30 s), for CI; the table goes to
# fuzz/logs/results-smoke.md so the committed figures are left alone.
# --update: keep the rows of targets not run this time (from an existing table).
# --jobs N: run N targets at a time (default 1); each libFuzzer process uses one core.
# --build-only: install cargo-fuzz and build the targets, run none (the suite builds them while
# other stages wait on timers, and runs them later).
#
# Seeds are read from fuzz/corpus/<target>/ (committed). What the fuzzer finds goes to
# fuzz/corpus-grown/<target>/, crashes to fuzz/artifacts/<target>/, logs to fuzz/logs/: all
# three are gitignored. The toolchain is stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz use
# the -Z flags it needs. Exits 1 when any target crashed (or libFuzzer failed otherwise).
set -euo pipefail

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
CARGO_FUZZ_VERSION=0.13.2

smoke=0
secs=""
runs=""
sanitizer=address
results=""
update=0
build_only=0
jobs=1
targets=()
# Sets the options above and targets; the mode's defaults for --time and --runs.
parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
        --smoke) smoke=1 ;;
        --time) secs="$2"; shift ;;
        --time=*) secs="${1#*=}" ;;
        --runs) runs="$2"; shift ;;
        --runs=*) runs="${1#*=}" ;;
        --sanitizer) sanitizer="$2"; shift ;;
        --sanitizer=*) sanitizer="${1#*=}" ;;
        --update) update=1 ;;
        --build-only) build_only=1 ;;
        --jobs) jobs="$2"; shift ;;
        --jobs=*) jobs="${1#*=}" ;;
        --results) results="$2"; shift ;;
        --results=*) results="${1#*=}" ;;
        -h | --help) usage; exit 0 ;;
        -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) targets+=("$1") ;;
        esac
        shift
    done
    # An explicit --time/--runs wins over the mode's default.
    if [ "$smoke" = 1 ]; then
        secs=${secs:-30} runs=${runs:-20000}
    else
        secs=${secs:-1800} runs=${runs:-10000000}
    fi
    case "$secs$runs$jobs" in *[!0-9]*) echo "run.sh: --time, --runs and --jobs take numbers" >&2; exit 2 ;; esac
    [ "$jobs" -ge 1 ] || { echo "run.sh: --jobs must be at least 1" >&2; exit 2; }
}

# From the repository root: results, cargo-fuzz, the targets (all by default), their
# build, and rev.
prepare() {
    fuzz_dir=$(cd "$(dirname "$0")" && pwd)
    root=$(dirname "$fuzz_dir")
    cd "$root"
    if [ -z "$results" ]; then
        if [ "$smoke" = 1 ]; then results=fuzz/logs/results-smoke.md; else results=fuzz/results.md; fi
    fi

    # shellcheck source=packaging/host-tools.sh
    . packaging/host-tools.sh
    cargo_tool cargo-fuzz "$CARGO_FUZZ_VERSION" fuzz >&2 || { echo "run.sh: cargo install cargo-fuzz failed" >&2; exit 1; }
    export RUSTC_BOOTSTRAP=1

    if [ ${#targets[@]} -eq 0 ]; then
        mapfile -t targets < <(cargo fuzz list)
    fi
    [ ${#targets[@]} -gt 0 ] || { echo "run.sh: no fuzz targets" >&2; exit 2; }

    echo "run.sh: building the fuzz targets (sanitizer: $sanitizer)" >&2
    cargo fuzz build -O --sanitizer "$sanitizer"

    # FUZZ_REV names the source when it is not a git checkout (e.g. a `git archive` snapshot).
    if [ -n "${FUZZ_REV:-}" ]; then
        rev=$FUZZ_REV
    elif rev=$(git rev-parse --short HEAD 2>/dev/null); then
        git diff --quiet HEAD -- src 2>/dev/null || rev="$rev (src/ modified)"
    else
        rev=unknown
    fi
    mkdir -p fuzz/logs
}

# One target: its summary row goes to fuzz/logs/<target>.row; returns libFuzzer's exit code.
run_one() {
    local t=$1 dict log before start rc wall after crashes done_line execs took rate grown
    mkdir -p "fuzz/corpus-grown/$t" "fuzz/corpus/$t" "fuzz/artifacts/$t"
    dict=()
    case "$t" in
    aws_* | gcp* | azure* | alibaba* | varlink) dict=(-dict=fuzz/dict/json.dict) ;;
    timefmt | duration | tencent) dict=(-dict=fuzz/dict/time.dict) ;;
    cli) dict=(-dict=fuzz/dict/cli.dict) ;;
    imds_answer) dict=(-dict=fuzz/dict/http.dict) ;;
    esac
    log="fuzz/logs/$t.log"
    before=$(find "fuzz/artifacts/$t" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    echo "run.sh: $t: up to $runs runs or $secs s (log: $log)" >&2
    start=$(date +%s)
    rc=0
    # The grown corpus comes first: libFuzzer writes new inputs to the first directory only,
    # so the committed seeds are never touched.
    cargo fuzz run -O --sanitizer "$sanitizer" "$t" "fuzz/corpus-grown/$t" "fuzz/corpus/$t" -- \
        -runs="$runs" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "${dict[@]}" >"$log" 2>&1 || rc=$?
    wall=$(($(date +%s) - start))
    after=$(find "fuzz/artifacts/$t" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    crashes=$((after - before))
    # "Done 10000000 runs in 212 second(s)" when it finishes; the final stats otherwise.
    done_line=$(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -n 1 || true)
    if [ -n "$done_line" ]; then
        execs=$(echo "$done_line" | awk '{print $2}')
        took=$(echo "$done_line" | awk '{print $5}')
    else
        execs=$(grep -Eo 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{print $2}' | tail -n 1 || true)
        execs=${execs:-0}
        took=$wall
    fi
    if [ "$took" -gt 0 ]; then
        rate=$(awk -v e="$execs" -v s="$took" 'BEGIN { printf "%.0f", e / s }')
    else
        rate="-"
    fi
    if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then
        crashes="failed (exit $rc, see $log)"
    fi
    if [ "$rc" -ne 0 ]; then
        echo "run.sh: $t FAILED (exit $rc); artifacts in fuzz/artifacts/$t, log $log" >&2
        grep -E 'panicked at|^thread .* panicked|ERROR: libFuzzer|Test unit written' "$log" | head -n 5 >&2 || true
    fi
    grown=$(find "fuzz/corpus-grown/$t" -type f | wc -l)
    echo "| $t | $execs | $took | $rate | $crashes | $grown | $rev | $(date -u +%Y-%m-%d) |" >"fuzz/logs/$t.row"
    echo "run.sh: $t: $execs runs in $took s ($rate/s), crashes: $crashes" >&2
    return "$rc"
}
# Every target, $jobs at a time; fills rows and sets failed.
run_all() {
    local t running
    rows=()
    failed=0
    for t in "${targets[@]}"; do rm -f "fuzz/logs/$t.row"; done
    if [ "$jobs" -eq 1 ]; then
        for t in "${targets[@]}"; do run_one "$t" || failed=1; done
    else
        # At most $jobs libFuzzer processes at once; `wait -n` frees a slot as each one ends.
        running=0
        for t in "${targets[@]}"; do
            if [ "$running" -ge "$jobs" ]; then
                wait -n || failed=1
                running=$((running - 1))
            fi
            run_one "$t" &
            running=$((running + 1))
        done
        while [ "$running" -gt 0 ]; do
            wait -n || failed=1
            running=$((running - 1))
        done
    fi
    for t in "${targets[@]}"; do
        if [ -f "fuzz/logs/$t.row" ]; then
            rows+=("$(cat "fuzz/logs/$t.row")")
        else
            rows+=("| $t | 0 | 0 | - | failed (no result, see fuzz/logs/$t.log) | - | $rev | $(date -u +%Y-%m-%d) |")
            failed=1
        fi
    done
}

write_results() {
    local row name
    if [ "$update" = 1 ] && [ -f "$results" ]; then
        # Rows of the targets not run this time stay as they were.
        while IFS= read -r row; do
            name=$(echo "$row" | awk -F'|' '{gsub(/ /, "", $2); print $2}')
            case " ${targets[*]} " in *" $name "*) ;; *) rows+=("$row") ;; esac
        done < <(grep -E '^\| [a-z0-9_]+ \| [0-9]' "$results" || true)
    fi
    {
        echo "# Fuzzing results"
        echo
        if [ "$smoke" = 1 ]; then
            echo "Smoke run: up to $runs executions or $secs s per target."
        else
            echo "Full campaign: each target until $runs executions or $secs s, whichever came first."
        fi
        echo "Written by \`fuzz/run.sh\`; built with $(rustc --version | cut -d' ' -f1-2), sanitizer: $sanitizer,"
        echo "debug assertions and overflow checks on; $jobs target(s) at a time on $(nproc) CPUs shared with other builds."
        echo
        echo "Executions and seconds are libFuzzer's own (\`Done N runs in S second(s)\`); a crash stops"
        echo "a target early. Corpus: inputs the fuzzer kept in fuzz/corpus-grown (not committed), which"
        echo "carries over between runs."
        echo "Commit: the nthd source the target ran against."
        echo
        echo "| target | execs | seconds | execs/s | crashes | corpus | commit | date |"
        echo "|---|---:|---:|---:|---:|---:|---|---|"
        printf '%s\n' "${rows[@]}" | sort
    } >"$results.tmp"
    mv "$results.tmp" "$results"
    echo "run.sh: wrote $results" >&2
}

main() {
    parse_args "$@"
    prepare
    [ "$build_only" = 0 ] || { echo "run.sh: built the fuzz targets; --build-only: running none" >&2; exit 0; }
    run_all
    write_results
    exit "$failed"
}

main "$@"
