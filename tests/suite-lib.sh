#!/usr/bin/env bash
# The test suite's stages, their times and its time budget: sourced by tests/run-all.sh.
#
#   stage NAME CMD...     runs CMD in the foreground as one stage and records its time
#   lane NAME CMD...      starts CMD in the background as a stage that runs beside others;
#                         its output goes to a file
#   lanes_wait GROUP      waits for every lane started since the last lanes_wait, prints each
#                         lane's output whole, records each lane with its own time and GROUP
#                         with the time from the first lane's start to the last one's end
#   background NAME CMD...  like lane, but in no group: it runs beside every stage until
#   background_wait       waits for it, prints and records it
#   suite_summary         the stage table, the whole time, the margins to the budget and to
#                         CI's limit; fails when a stage failed or the time is over the budget
#
# The budget is set in one place, SUITE_BUDGET_S below (NTHD_SUITE_BUDGET_S overrides it): a run
# over it fails loudly, naming the slowest stages, so that growth is seen there and not at CI's
# limit (SUITE_CI_LIMIT_S), where a run is stopped unfinished. The table is also written as
# Markdown to SUITE_TABLE (docs/testing.md's "Measured times" is that table).
#
#   bash tests/suite-lib.sh --self-test   a slowed stage over a tiny budget must fail the run,
#                                         naming the budget and the stage; one within must pass
SUITE_BUDGET_S=${NTHD_SUITE_BUDGET_S:-3600}
SUITE_CI_LIMIT_S=5400
SUITE_LANES_DIR=${SUITE_LANES_DIR:-target/suite/lanes}
SUITE_TABLE=${SUITE_TABLE:-target/suite/times.md}
declare -a suite_names=() suite_results=() suite_secs=() suite_kinds=()
declare -a lane_pids=() lane_names=() lane_logs=()
suite_t0=$SECONDS

disk_free_gb() { df -Pk . | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
# suite_record NAME RC SECS KIND: one row of the table (KIND: serial, lane or group).
suite_record() { suite_names+=("$1"); suite_results+=("$2"); suite_secs+=("$3"); suite_kinds+=("$4"); }

stage() {
    local name=$1 t0=$SECONDS rc; shift
    echo
    echo "==> $name"
    "$@"
    rc=$?
    suite_record "$name" "$rc" $((SECONDS - t0)) serial
    echo "==> $name: $([ $rc = 0 ] && echo ok || echo "FAILED ($rc)") in $((SECONDS - t0))s ($(disk_free_gb) GB free)"
    return $rc
}

# Starts CMD in the background with its output in a file under SUITE_LANES_DIR; its status,
# seconds and end go to the file's .end. Sets LANE_PID and LANE_LOG.
_lane_start() {
    local name=$1; shift
    mkdir -p "$SUITE_LANES_DIR"
    LANE_LOG="$SUITE_LANES_DIR/$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '-' | cut -c1-60)-$RANDOM.log"
    echo "==> started beside the others: $name (output: $LANE_LOG)"
    (
        t0=$SECONDS
        "$@"
        rc=$?
        echo "$rc $((SECONDS - t0)) $SECONDS" >"$LANE_LOG.end"
        exit $rc
    ) </dev/null >"$LANE_LOG" 2>&1 &
    LANE_PID=$!
}

# Waits for one started lane, prints its output whole and records it with its own time.
# Usage: _lane_report PID NAME LOG
_lane_report() {
    local rc=1 secs=0
    wait "$1"
    read -r rc secs _ <"$3.end" || echo "(the lane ended without its record)"
    echo
    echo "==> $2 (ran beside the others)"
    cat "$3"
    echo "==> $2: $([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)") in ${secs}s"
    suite_record "$2" "$rc" "$secs" lane
    return "$rc"
}

lane() {
    [ -n "${lanes_t0:-}" ] || lanes_t0=$SECONDS
    _lane_start "$@"
    lane_pids+=("$LANE_PID") lane_names+=("$1") lane_logs+=("$LANE_LOG")
}

# Prints and records each lane in the order started, then the group.
lanes_wait() {
    local group=$1 i worst=0
    for i in "${!lane_pids[@]}"; do
        _lane_report "${lane_pids[$i]}" "${lane_names[$i]}" "${lane_logs[$i]}" || worst=$?
    done
    suite_record "$group" "$worst" $((SECONDS - lanes_t0)) group
    echo "==> $group: $([ "$worst" = 0 ] && echo ok || echo FAILED) in $((SECONDS - lanes_t0))s ($(disk_free_gb) GB free)"
    lane_pids=() lane_names=() lane_logs=() lanes_t0=""
    return "$worst"
}

# background NAME CMD...: one lane that runs beside every stage until background_wait, in no
# group (its time is counted by the stages it ran beside).
background() { bg_name=$1; _lane_start "$@"; bg_pid=$LANE_PID bg_log=$LANE_LOG; }
background_wait() { _lane_report "$bg_pid" "$bg_name" "$bg_log"; }

# min:s for a number of seconds.
suite_mmss() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# The table, in Markdown (to stdout): lanes are marked "beside", and only serial stages and
# groups add up to the whole.
suite_table() {
    local i mark total=$1
    echo "| stage | time | result |"
    echo "|---|---:|---|"
    for i in "${!suite_names[@]}"; do
        mark=""
        [ "${suite_kinds[$i]}" = lane ] && mark="↳ beside: "
        [ "${suite_kinds[$i]}" = group ] && mark="**all of the above at once:** "
        printf '| %s%s | %s s | %s |\n' "$mark" "${suite_names[$i]}" "${suite_secs[$i]}" \
            "$([ "${suite_results[$i]}" = 0 ] && echo ok || echo "FAILED (${suite_results[$i]})")"
    done
    printf '| **whole suite** | **%s s** (%s) | |\n' "$total" "$(suite_mmss "$total")"
}

# The slowest serial stages and groups, for the over-budget message.
suite_slowest() {
    local i
    for i in "${!suite_names[@]}"; do
        [ "${suite_kinds[$i]}" = lane ] || printf '%s\t%s\n' "${suite_secs[$i]}" "${suite_names[$i]}"
    done | sort -rn | head -n 3 | awk -F'\t' '{ printf "    %5d s  %s\n", $1, $2 }'
}

suite_summary() {
    local i fail=0 pass=0 total=$((SECONDS - suite_t0))
    echo
    mkdir -p "$(dirname "$SUITE_TABLE")"
    suite_table "$total" | tee "$SUITE_TABLE"
    for i in "${!suite_names[@]}"; do
        [ "${suite_kinds[$i]}" = group ] && continue
        if [ "${suite_results[$i]}" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
    done
    echo
    echo "whole suite: ${total}s ($(suite_mmss "$total")); budget ${SUITE_BUDGET_S}s ($(suite_mmss "$SUITE_BUDGET_S"), NTHD_SUITE_BUDGET_S), $((SUITE_BUDGET_S - total))s to spare; CI's limit ${SUITE_CI_LIMIT_S}s, $((SUITE_CI_LIMIT_S - total))s to spare"
    echo "(table: $SUITE_TABLE)"
    if [ "$total" -gt "$SUITE_BUDGET_S" ]; then
        echo "OVER BUDGET: the suite took ${total}s, $((total - SUITE_BUDGET_S))s over its budget of ${SUITE_BUDGET_S}s" \
            "(tests/suite-lib.sh, SUITE_BUDGET_S). Make the slowest stages faster, or run them beside others:"
        suite_slowest
        fail=$((fail + 1))
    fi
    echo "stages: $pass passed, $fail failed"
    [ $fail = 0 ]
}

# A stage slowed past a 2 s budget must fail the run, naming the budget and the stage; lanes
# beside each other must count once; the same stages within a 10 s budget must pass.
suite_self_test() {
    local dir out rc
    dir=$(mktemp -d)
    # shellcheck disable=SC2064  # expanded now: dir is local
    trap "rm -rf '$dir'" EXIT
    out=$(SUITE_TABLE=$dir/t.md SUITE_LANES_DIR=$dir/lanes NTHD_SUITE_BUDGET_S=2 bash -c '
        . tests/suite-lib.sh
        stage quick true >/dev/null
        stage "deliberately slowed" sleep 3 >/dev/null
        suite_summary' 2>&1) && rc=0 || rc=$?
    if [ "$rc" = 0 ] || ! grep -q 'OVER BUDGET: the suite took 3s, 1s over its budget of 2s' <<<"$out" ||
        ! grep -q 'deliberately slowed' <<<"$(grep -A3 'OVER BUDGET' <<<"$out")"; then
        printf 'suite-lib.sh self-test: a slowed stage over the budget did not fail the run:\n%s\n' "$out" >&2
        return 1
    fi
    out=$(SUITE_TABLE=$dir/t.md SUITE_LANES_DIR=$dir/lanes NTHD_SUITE_BUDGET_S=10 bash -c '
        . tests/suite-lib.sh
        lane one sleep 2; lane two sleep 2; lanes_wait "both at once" >/dev/null
        suite_summary' 2>&1) ||
        { printf 'suite-lib.sh self-test: stages within the budget failed the run:\n%s\n' "$out" >&2; return 1; }
    if ! grep -qE '^whole suite: 2s' <<<"$out" || ! grep -qF '| ↳ beside: two | 2 s | ok |' "$dir/t.md"; then
        printf 'suite-lib.sh self-test: lanes beside each other were not counted once:\n%s\n' "$out" >&2
        return 1
    fi
    echo "suite-lib.sh self-test: the over-budget run failed naming its slowed stage; lanes counted once"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    cd "$(dirname "$0")/.." || exit 1
    case "${1:-}" in
        --self-test) suite_self_test ;;
        *) echo "usage: bash tests/suite-lib.sh --self-test (otherwise source it)" >&2; exit 2 ;;
    esac
fi
