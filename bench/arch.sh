#!/usr/bin/env bash
# Per-build cost of nthd: stripped binary size, idle memory and the poll path's
# instruction count, for the glibc build and the static musl builds (x86_64 and aarch64).
#
#   bash bench/arch.sh [--secs N] [--no-build] [LABEL=PATH ...]
#       Size and idle memory. Every subject polls its own mock IMDS (AWS, default intervals, no
#       notice) for N seconds (default 60), all side by side, with a fake logind on a private
#       dbus-daemon. Then VmRSS and VmHWM are read from /proc/PID/status.
#       An aarch64 binary runs through qemu-user (binfmt_misc): its /proc/PID/status is the
#       whole qemu process (qemu's own code, its translation cache and heap, and the guest).
#       The guest's own figure is the Rss (from /proc/PID/smaps) of the mappings that lie in
#       the guest's address ranges, which qemu logs itself (QEMU_LOG=page: the guest's page
#       layout after every guest mmap; qemu maps guest memory 1:1 at the guest's addresses).
#       -> bench/results/arch.md
#
#   bash bench/arch.sh --callgrind [--secs N] [--no-build] [LABEL=PATH ...]
#       Instructions executed on the poll path (valgrind --tool=callgrind; immune to other
#       load on the machine). After start-up and 5 s of polling, the counters are zeroed; N
#       seconds later (default 60) they are dumped, and the mock's request log says how many
#       polls that window held. Reports instructions per spot poll (each with its share of the
#       ASG, rebalance and scheduled-event reads), and the share spent in the allocator and in
#       mem*/str* routines. x86_64 builds only (valgrind does not run aarch64 code here). The
#       default subjects are unstripped builds (for symbols) in target/arch-bench/.
#       ARCH_BENCH_KEEP=DIR keeps the callgrind dumps (callgrind_annotate DIR/callgrind-N.out).
#       -> bench/results/poll-cost.md
#
# Default subjects (built unless --no-build):
#   x86_64 glibc   target/release/nthd
#   x86_64 musl    target/x86_64-unknown-linux-musl/release/nthd
#   aarch64 musl   target/aarch64-unknown-linux-musl/release/nthd     (idle only)
# Needs: cargo, dbus-daemon, python3; qemu-user-static with qemu-aarch64 registered for an
# aarch64 subject (tests/arm64.sh sets that up); valgrind for --callgrind.
# shellcheck disable=SC2016,SC2012 # backticks are Markdown; dump names are ours
set -euo pipefail
cd "$(dirname "$0")/.."

secs=60
build=1
mode=idle
subjects=()
mock=target/release/nthd-mock-imds
fake_logind=target/release/nthd-fake-logind
out_dir=bench/results

# Sets secs, build, mode and subjects; --help prints the header above.
parse_args() {
    while [ $# -gt 0 ]; do
        case "$1" in
            --secs) secs=$2; shift ;;
            --secs=*) secs=${1#*=} ;;
            --no-build) build=0 ;;
            --callgrind) mode=callgrind ;;
            -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
            *=*) subjects+=("$1") ;;
            *) echo "bench/arch.sh: unknown argument $1 (LABEL=PATH, --secs N, --no-build, --callgrind)" >&2; exit 2 ;;
        esac
        shift
    done
}

check_tools() {
    local tool
    for tool in dbus-daemon python3; do
        command -v "$tool" >/dev/null || { echo "bench/arch.sh: $tool is not installed" >&2; exit 1; }
    done
    [ "$mode" = idle ] || command -v valgrind >/dev/null ||
        { echo "bench/arch.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
}

# The mock IMDS and the fake logind, unless --no-build.
build_helpers() {
    if [ $build = 1 ]; then
        echo "bench/arch.sh: building the mock IMDS and fake logind (host)" >&2
        cargo build -q --release -p nthd-testkit --bin nthd-mock-imds --bin nthd-fake-logind >&2
    fi
}

# The subjects when none is named, built unless --no-build.
default_subjects() {
    if [ ${#subjects[@]} = 0 ]; then
        if [ "$mode" = idle ]; then
            subjects=("x86_64 glibc=target/release/nthd"
                      "x86_64 musl=target/x86_64-unknown-linux-musl/release/nthd"
                      "aarch64 musl=target/aarch64-unknown-linux-musl/release/nthd")
            if [ $build = 1 ]; then
                echo "bench/arch.sh: building nthd (release: glibc, x86_64 musl, aarch64 musl)" >&2
                cargo build -q --release --bin nthd >&2
                cargo build -q --release --bin nthd --target x86_64-unknown-linux-musl >&2
                cargo build -q --release --bin nthd --target aarch64-unknown-linux-musl >&2
            fi
        else
            # Same code as the release builds (stripping happens after linking), with symbols.
            subjects=("x86_64 glibc=target/arch-bench/release/nthd"
                      "x86_64 musl=target/arch-bench/x86_64-unknown-linux-musl/release/nthd")
            if [ $build = 1 ]; then
                echo "bench/arch.sh: building unstripped nthd (glibc, x86_64 musl) in target/arch-bench" >&2
                CARGO_TARGET_DIR=target/arch-bench CARGO_PROFILE_RELEASE_STRIP=false \
                    cargo build -q --release --bin nthd >&2
                CARGO_TARGET_DIR=target/arch-bench CARGO_PROFILE_RELEASE_STRIP=false \
                    cargo build -q --release --bin nthd --target x86_64-unknown-linux-musl >&2
            fi
        fi
    fi
}

check_subjects() {
    local s b
    for s in "${subjects[@]}"; do
        [ -x "${s#*=}" ] || { echo "bench/arch.sh: ${s#*=} is missing or not executable" >&2; exit 1; }
    done
    for b in "$mock" "$fake_logind"; do
        [ -x "$b" ] || { echo "bench/arch.sh: $b is missing (run without --no-build)" >&2; exit 1; }
    done
}

cleanup() {
    local p _
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    # valgrind writes its last dump on the way out: give everything up to 10 s.
    for _ in $(seq 100); do
        local alive=0
        for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ $alive = 0 ] && break
        sleep 0.1
    done
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}

start_bus() {
    # A private system-like bus with a fake logind (nthd checks logind at start).
    cat >"$work/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path=$work/bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>
<allow receive_sender="*"/></policy></busconfig>
EOF
    dbus-daemon --config-file="$work/bus.conf" --nofork >"$work/dbus.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [ -S "$work/bus" ] && break; sleep 0.05; done
    export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus"
    "$fake_logind" >"$work/logind.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '"ready"' "$work/logind.log" 2>/dev/null && break; sleep 0.05; done
    grep -q '"ready"' "$work/logind.log" || { echo "bench/arch.sh: the fake logind did not start" >&2; cat "$work/logind.log" >&2; exit 1; }
}

machine() { # ELF e_machine: b700 = aarch64, 3e00 = x86_64
    od -An -tx1 -j18 -N2 "$1" | tr -d ' \n'
}
spot_polls() { grep -c 'GET /latest/meta-data/spot/instance-action' "$1" || true; }
all_requests() { grep -c ' -> ' "$1" || true; }

# start_subject INDEX PATH [WRAPPER...]: its own mock IMDS, then nthd with AWS defaults.
# Sets nthd_pid (the process to measure: nthd, qemu running nthd, or valgrind running nthd).
start_subject() {
    local i=$1 bin=$2; shift 2
    "$mock" --listen 127.0.0.1:0 >/dev/null 2>"$work/imds-$i.log" &
    pids+=($!)
    local url=""
    for _ in $(seq 100); do
        url=$(sed -n 's/^nthd-mock-imds: listening on //p' "$work/imds-$i.log")
        [ -n "$url" ] && break
        sleep 0.05
    done
    [ -n "$url" ] || { echo "bench/arch.sh: mock IMDS $i did not start" >&2; exit 1; }
    mkdir -p "$work/state-$i"
    local qemu_env=()
    if [ "$(machine "$bin")" = b700 ] && [ "$(uname -m)" != aarch64 ]; then
        # qemu-user reads QEMU_LOG from the environment that binfmt_misc passes through.
        qemu_env=(QEMU_LOG=page "QEMU_LOG_FILENAME=$work/qemu-$i.log")
    fi
    env -i PATH=/usr/bin:/bin DBUS_SYSTEM_BUS_ADDRESS="$DBUS_SYSTEM_BUS_ADDRESS" \
        NTHD_SETTINGS_FILE=none NTHD_PROVIDER=aws NTHD_IMDS_ENDPOINT="$url" \
        NTHD_STATE_DIR="$work/state-$i" NTHD_LOG_TARGET=stderr "${qemu_env[@]}" \
        "$@" "$bin" run 2>"$work/nthd-$i.log" &
    nthd_pid=$!
    pids+=("$nthd_pid")
}

describe() { # size, stripped or not, linkage, version
    local bin=$1 size strip link
    size=$(stat -c %s "$bin")
    if readelf -S -W "$bin" 2>/dev/null | grep -q ' \.symtab '; then strip=no; else strip=yes; fi
    if readelf -l -W "$bin" 2>/dev/null | grep -q 'INTERP'; then
        link="dynamic ($(readelf -d -W "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ' | sed 's/ $//'))"
    else
        link=static
    fi
    echo "$size|$strip|$link"
}

# --- idle: every subject started; sets labels, bins and npids.
idle_start() {
    local i s
    labels=(); bins=(); npids=()
    i=0
    for s in "${subjects[@]}"; do
        labels[i]=${s%%=*}
        bins[i]=${s#*=}
        [ -x "${bins[i]}" ] || { echo "bench/arch.sh: ${bins[i]} is missing" >&2; exit 1; }
        start_subject "$i" "${bins[i]}"
        npids[i]=$nthd_pid
        i=$((i + 1))
    done
    echo "bench/arch.sh: ${#labels[@]} subjects idle for ${secs}s (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}

idle_sample() {
    local t_end j
    # Sample every 5 s: the guest's Rss has no high-water mark of its own, so its peak is the
    # largest sample.
    t_end=$((SECONDS + secs))
    while [ $SECONDS -lt $t_end ]; do
        for j in "${!labels[@]}"; do
            kill -0 "${npids[j]}" 2>/dev/null || { echo "bench/arch.sh: ${labels[j]} exited:" >&2; cat "$work/nthd-$j.log" >&2; exit 1; }
            if [ -e "$work/qemu-$j.log" ]; then
                python3 bench/qemu_guest_rss.py "${npids[j]}" "$work/qemu-$j.log" >>"$work/guest-$j.samples"
            fi
        done
        sleep 5
    done
}

# The table of sizes and memory, then bench/results/arch.md.
idle_report() {
    local j p size strip link rss hwm reqs notes g_rss g_file g_anon q_rss g_peak
    {
        echo "# nthd per build: binary size and idle memory"
        echo
        echo "\`bash bench/arch.sh --secs $secs\` at $commit, $(date -u +%Y-%m-%d). Host: $host."
        echo "Each subject: AWS defaults (spot every 1 s, ASG every 3 s, rebalance and scheduled"
        echo "events every 20 s), its own mock IMDS answering 404 (no notice), ${secs} s, all side by side."
        echo
        echo "| build | binary | size | stripped | linkage | VmRSS | VmHWM | requests | notes |"
        echo "|---|---|---|---|---|---|---|---|---|"
    } >"$work/arch.md"
    for j in "${!labels[@]}"; do
        p=${npids[j]}
        IFS='|' read -r size strip link < <(describe "${bins[j]}")
        rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status")
        hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$p/status")
        reqs=$(all_requests "$work/imds-$j.log")
        notes=""
        if [ -e "$work/qemu-$j.log" ]; then
            read -r g_rss g_file g_anon q_rss < <(python3 bench/qemu_guest_rss.py "$p" "$work/qemu-$j.log")
            g_peak=$(awk 'BEGIN {m = 0} $1 > m {m = $1} END {print m}' "$work/guest-$j.samples" <(echo "$g_rss"))
            notes="qemu-user process (qemu + guest). Guest alone: Rss $(awk -v k="$g_rss" 'BEGIN{printf "%.1f", k/1024}') MiB (nthd image $(awk -v k="$g_file" 'BEGIN{printf "%.1f", k/1024}') MiB + anonymous $(awk -v k="$g_anon" 'BEGIN{printf "%.1f", k/1024}') MiB), peak of 5 s samples $(awk -v k="$g_peak" 'BEGIN{printf "%.1f", k/1024}') MiB; qemu's own $(awk -v k="$q_rss" 'BEGIN{printf "%.1f", k/1024}') MiB"
        fi
        printf '| %s | `%s` | %s B (%.2f MiB) | %s | %s | %.1f MiB | %.1f MiB | %s in %ss | %s |\n' \
            "${labels[j]}" "${bins[j]}" "$size" "$(awk -v s="$size" 'BEGIN{print s/1048576}')" \
            "$strip" "$link" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" \
            "$(awk -v k="$hwm" 'BEGIN{print k/1024}')" "$reqs" "$secs" "$notes" >>"$work/arch.md"
    done
    {
        echo
        echo "Limits: stripped binary ≤ 6 MiB, idle RSS ≤ 8 MiB."
        echo "Versions: $(for j in "${!labels[@]}"; do printf '%s: `%s`; ' "${labels[j]}" "$(env -i "${bins[j]}" --version 2>&1 | head -n 1)"; done)"
    } >>"$work/arch.md"
    cp "$work/arch.md" "$out_dir/arch.md"
    cat "$out_dir/arch.md"
}

# --- callgrind: every subject under valgrind; sets labels, bins, vpids, s0 and r0.
callgrind_start() {
    local i s j
    {
        echo "# nthd poll path: instructions per poll (callgrind)"
        echo
        echo "\`bash bench/arch.sh --callgrind --secs $secs\` at $commit, $(date -u +%Y-%m-%d). Host: $host."
        echo "valgrind $(valgrind --version | sed 's/valgrind-//'). AWS defaults, mock IMDS answering 404."
        echo "Counters zeroed after start-up + 5 s of polling, dumped ${secs} s later. Instruction"
        echo "counts do not depend on other load on the machine; the poll count per window does a little."
        echo
        echo "| build | binary | size | spot polls | all requests | instructions | per spot poll | allocator | mem*/str* |"
        echo "|---|---|---|---|---|---|---|---|---|"
    } >"$work/poll.md"
    # All subjects side by side (instruction counts do not depend on the load they put on the
    # machine); each has its own mock IMDS, so each has its own poll count.
    labels=(); bins=(); vpids=(); s0=(); r0=()
    i=0
    for s in "${subjects[@]}"; do
        labels[i]=${s%%=*}
        bins[i]=${s#*=}
        [ -x "${bins[i]}" ] || { echo "bench/arch.sh: ${bins[i]} is missing" >&2; exit 1; }
        [ "$(machine "${bins[i]}")" = 3e00 ] ||
            { echo "bench/arch.sh: --callgrind needs x86_64 binaries; ${bins[i]} is not" >&2; exit 1; }
        start_subject "$i" "${bins[i]}" valgrind --tool=callgrind "--callgrind-out-file=$work/callgrind-$i.out"
        vpids[i]=$nthd_pid
        i=$((i + 1))
    done
    # Start-up under valgrind is slow: wait for every subject's first spot poll, then 5 s more.
    for j in "${!labels[@]}"; do
        for _ in $(seq 600); do [ "$(spot_polls "$work/imds-$j.log")" -gt 0 ] && break; sleep 0.1; done
        [ "$(spot_polls "$work/imds-$j.log")" -gt 0 ] ||
            { echo "bench/arch.sh: ${labels[j]} never polled" >&2; cat "$work/nthd-$j.log" >&2; exit 1; }
    done
}

# Zero the counters, count for secs, dump, and one row per subject.
callgrind_count() {
    local j s1 r1 spots reqs dump total alloc mem size
    sleep 5
    for j in "${!labels[@]}"; do
        callgrind_control -z "${vpids[j]}" >/dev/null
        s0[j]=$(spot_polls "$work/imds-$j.log"); r0[j]=$(all_requests "$work/imds-$j.log")
    done
    echo "bench/arch.sh: ${#labels[@]} subjects under callgrind, counting for ${secs}s" >&2
    sleep "$secs"
    for j in "${!labels[@]}"; do
        callgrind_control -d "${vpids[j]}" >/dev/null
        s1=$(spot_polls "$work/imds-$j.log"); r1=$(all_requests "$work/imds-$j.log")
        spots=$((s1 - s0[j])); reqs=$((r1 - r0[j]))
        # The dump made by -d is the first numbered file (the final one, at exit, has no number).
        dump=$(ls -1v "$work/callgrind-$j.out".* 2>/dev/null | head -n 1)
        [ -n "$dump" ] || { echo "bench/arch.sh: no callgrind dump for ${labels[j]}" >&2; exit 1; }
        read -r total alloc mem < <(python3 bench/callgrind_split.py "$dump" "${bins[j]}")
        IFS='|' read -r size _ _ < <(describe "${bins[j]}")
        printf '| %s | `%s` | %.2f MiB | %s | %s | %s | %s | %s (%s) | %s (%s) |\n' "${labels[j]}" "${bins[j]}" \
            "$(awk -v s="$size" 'BEGIN{print s/1048576}')" "$spots" "$reqs" "$total" \
            "$(awk -v t="$total" -v n="$spots" 'BEGIN{printf "%.0f", t/n}')" \
            "$(awk -v t="$alloc" -v n="$spots" 'BEGIN{printf "%.0f", t/n}')" \
            "$(awk -v a="$alloc" -v t="$total" 'BEGIN{printf "%.1f%%", 100*a/t}')" \
            "$(awk -v t="$mem" -v n="$spots" 'BEGIN{printf "%.0f", t/n}')" \
            "$(awk -v a="$mem" -v t="$total" 'BEGIN{printf "%.1f%%", 100*a/t}')" >>"$work/poll.md"
        if [ -n "${ARCH_BENCH_KEEP:-}" ]; then
            mkdir -p "$ARCH_BENCH_KEEP" && cp "$dump" "$ARCH_BENCH_KEEP/callgrind-$j.out"
        fi
    done
}

callgrind_notes() {
    {
        echo
        echo "\"allocator\": instructions in malloc/free/realloc/calloc and the allocator's internals"
        echo "(glibc: _int_malloc, _int_free, …; musl: mallocng's alloc_slot, get_meta, …; or the Rust"
        echo "allocator crate's symbols), per spot poll and as a share of all. \"mem*/str*\": memcpy,"
        echo "memmove, memset, memcmp, bcmp, strlen and the like. See bench/callgrind_split.py."
    } >>"$work/poll.md"
    cp "$work/poll.md" "$out_dir/poll-cost.md"
    cat "$out_dir/poll-cost.md"
}

main() {
    parse_args "$@"
    check_tools
    build_helpers
    default_subjects
    check_subjects
    work=$(mktemp -d)
    pids=()
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    start_bus
    commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
    host="$(uname -m), $(nproc) cores, Linux $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
    mkdir -p "$out_dir"
    if [ "$mode" = idle ]; then
        idle_start
        idle_sample
        idle_report
        exit 0
    fi
    callgrind_start
    callgrind_count
    callgrind_notes
}

main "$@"
