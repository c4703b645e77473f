#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted scripts run inside the container
# Real-system idle cost: nthd as users run it. Boots the e2e suite's Debian 12 tree with
# systemd-nspawn (real systemd, dbus, logind and journald), installs the .deb (the packaged unit
# with its seccomp filter, sandboxing and Type=notify + WatchdogSec=30s), serves a quiet AWS
# metadata service (the testkit's mock on 169.254.169.254 in the container's private network,
# no notice), sets NTHD_PROVIDER=aws and leaves everything else at the package's defaults.
# Over the window it reads, from the host, every thread of nthd's
#   /proc/PID/task/TID/schedstat   on-CPU ns (first field) and run slices (third)
#   /proc/PID/task/TID/status      voluntary_ctxt_switches, nonvoluntary_ctxt_switches
#   /proc/PID/status               VmRSS, VmHWM
# and the mock's request log. With --loop it also runs the bash + curl loop (bench/curl-loop.sh)
# as a unit in the same container and reads its CPU (utime+stime+cutime+cstime, /proc ticks).
#
#   bash bench/real-idle.sh [--secs N] [--out FILE.json] [--label TEXT]
#                           [--nthd PATH]        replace /usr/bin/nthd after installing the .deb
#                           [--no-seccomp]       drop-in SystemCallFilter= (the filter off)
#                           [--dropin 'Key=val'] any other [Service] line for a drop-in (repeatable)
#                           [--env 'NTHD_X=v']   an extra /etc/default/nthd line (repeatable)
#                           [--loop EVERY]       also the curl loop sleeping EVERY s (0: none)
#                           [--strace SECS]      after the window, strace -f nthd for SECS s and
#                                                count syscalls per spot poll
#                           [--floor K]          beside nthd, in its window, bench/floor.c in the
#                                                container's network: K GETs a second on K kept
#                                                connections, the least any client can spend on
#                                                them here
#                           [--stack K]          beside nthd too, the same reads made the way
#                                                nthd makes them with nothing of nthd: the
#                                                testkit's nthd-stack-floor (tokio + hyper),
#                                                another with --raw (tokio alone) and one with
#                                                --blocking (no runtime: blocking sockets on
#                                                one thread, httparse) and one with --ureq
#                                                (the same with ureq 3)
#
# Needs root, systemd-nspawn, nsenter, jq and the cached tree (tests/e2e/rootfs.sh builds it;
# E2E_ROOTFS names another). The package is tests/e2e/lib.sh's choice (E2E_NTHD_DEB, else the
# newest target/dist or target/debian .deb); the mock is E2E_MOCK_IMDS (default the static
# testkit build, made here if missing). Prints one JSON object (also written to --out).
# Exit: 0 measured, 1 could not measure, 4 a prerequisite is missing (not root, no tree).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
export REPO
# shellcheck source-path=SCRIPTDIR source=../tests/e2e/lib.sh
. "$REPO/tests/e2e/lib.sh"

secs=120 out="" label="packaged unit" nthd_bin="" loop_every=2 strace_secs=0 floor_k="" stack_k=""
dropins=() envs=() stack_pids=()
# nthd-stack-floor's modes, in the order of the JSON's stack fields: tokio + hyper, tokio,
# blocking, ureq.
STACK_MODES=("" raw blocking ureq)
SPOT=/latest/meta-data/spot/instance-action

parse_args() {
  while (($#)); do
    case "$1" in
      --secs) secs="$2"; shift ;;
      --out) out="$2"; shift ;;
      --label) label="$2"; shift ;;
      --nthd) nthd_bin="$(realpath "$2")"; shift ;;
      --no-seccomp) dropins+=("SystemCallFilter=") ;;
      --dropin) dropins+=("$2"); shift ;;
      --env) envs+=("$2"); shift ;;
      --loop) loop_every="$2"; shift ;;
      --strace) strace_secs="$2"; shift ;;
      --floor) floor_k="$2"; shift ;;
      --stack) stack_k="$2"; shift ;;
      -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
      *) echo "real-idle.sh: unknown argument $1" >&2; exit 1 ;;
    esac
    shift
  done
}

# Says why nothing was measured, also as {"error": ...} in --out, and exits with $1.
give_up() {
  local rc="$1"; shift
  echo "real-idle.sh: not measured: $*" >&2
  [[ -z "$out" ]] || { mkdir -p "$(dirname "$out")"; jq -n --arg e "$*" '{error: $e}' >"$out"; }
  exit "$rc"
}
skip() { give_up 4 "$@"; }
fail() { give_up 1 "$@"; }
# Root, the tools, the tree, the package and the mock, or exit 4.
preflight() {
  [[ $EUID -eq 0 ]] || skip "needs root (systemd-nspawn)"
  for t in systemd-nspawn nsenter jq; do command -v "$t" >/dev/null || skip "$t is not installed"; done
  [[ -d "$ROOTFS/usr" ]] || skip "no Debian tree at $ROOTFS (bash tests/e2e/rootfs.sh builds it, or set E2E_ROOTFS)"
  [[ -n "$(nthd_deb_path)" ]] || skip "no nthd .deb (bash packaging/build.sh, or set E2E_NTHD_DEB)"
  [[ -x "$E2E_MOCK_IMDS" ]] || build_testkit
  [[ -x "$E2E_MOCK_IMDS" ]] || skip "no mock IMDS binary at $E2E_MOCK_IMDS"
}

cleanup() { ct_cleanup; rm -rf "$work"; }

# The host PID of container PID $1 (its innermost NSpid), in the container's PID namespace.
host_pid() {
  local want="$1" ns p
  ns="$(readlink "/proc/$CT_PID/ns/pid")"
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/ns/pid" 2>/dev/null)" == "$ns" ]] || continue
    awk -v w="$want" '/^NSpid:/{exit !($NF==w)}' "$p/status" 2>/dev/null && { echo "${p#/proc/}"; return 0; }
  done
  return 1
}

# One line per thread: tid comm run_ns slices voluntary nonvoluntary.
threads() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" \
      "$(awk '{print $1, $3}' "$t/schedstat")" \
      "$(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' "$t/status")"
  done
}
status_kib() { awk -v k="$2:" '$1==k{print $2}' "/proc/$1/status"; }
# utime+stime+cutime+cstime in clock ticks.
proc_ticks() { awk '{sub(/.*\) /, ""); print $12 + $13 + $14 + $15}' "/proc/$1/stat"; }

# The container with nthd (and the curl loop) running; sets pid and lpid.
start_node() {
  log "booting $ROOTFS"
  ct_boot bench-idle "$work/ct" || fail "the container did not boot"
  ct_net_setup
  nthd_install || fail "the .deb did not install"
  # shellcheck disable=SC2119  # the mock takes no extra arguments here
  mock_start || fail "the mock IMDS did not start"
  set_route /latest/meta-data/events/maintenance/scheduled '[]'
  if [[ -n "$nthd_bin" ]]; then
    ct_exec install -m 755 "$(ct_put "$nthd_bin" nthd.test)" /usr/bin/nthd
  fi
  if ((${#dropins[@]})); then
    ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
           { echo "[Service]"; printf "%s\n" "$@"; } >/etc/systemd/system/nthd.service.d/90-bench.conf &&
           systemctl daemon-reload' "${dropins[@]}"
  fi
  nthd_configure NTHD_PROVIDER=aws ${envs[@]+"${envs[@]}"} || fail "nthd did not start"
  if [[ "$loop_every" != 0 ]]; then
    # A copy: ct_put hard-links and chmods, which would touch the repository's file.
    mkdir -p "$CT_DIR/bin" && cp "$HERE/curl-loop.sh" "$CT_DIR/bin/curl-loop.sh"
    ct_exec systemd-run --quiet --unit=curl-loop --service-type=simple -E "URL=$MOCK_URL" \
      -E "EVERY=$loop_every" -p StandardOutput=null /bin/bash /e2e/bin/curl-loop.sh
  fi
  # Let the start-up reads (token, first round of every source, logind) pass.
  sleep 5
  nthd_active || { ct_exec systemctl status --no-pager nthd >&2; fail "nthd is not active"; }
  pid="$(host_pid "$(nthd_main_pid)")" || fail "cannot find nthd's host PID"
  lpid=""
  [[ "$loop_every" == 0 ]] || lpid="$(host_pid "$(ct_exec systemctl show -p MainPID --value curl-loop)")"
}

# The window: sets t0_ms, t1_ms, l0, l1, rss and hwm; the thread rows are in $work/t0, t1.
measure() {
  log "nthd is host PID $pid ($(ct_exec nthd --version | head -n1)); measuring ${secs} s"
  t0_ms="$(now_ms)"; threads "$pid" >"$work/t0"; l0="${lpid:+$(proc_ticks "$lpid")}"
  sleep "$secs"
  threads "$pid" >"$work/t1"; l1="${lpid:+$(proc_ticks "$lpid")}"; t1_ms="$(now_ms)"
  rss="$(status_kib "$pid" VmRSS)"; hwm="$(status_kib "$pid" VmHWM)"
  nthd_active || fail "nthd stopped during the window"
  [[ "$(ct_exec systemctl show -p NRestarts --value nthd)" == 0 ]] || fail "nthd restarted during the window"
}

# nthd's own requests (its User-Agent is nthd/VERSION; the loop's is curl's) between two instants,
# all of them or those for one path.
nthd_requests() {
  mock_log | jq --argjson a "$1" --argjson b "$2" --arg p "${3:-}" '
    def ua: [(.headers // [])[] | select(.[0] | ascii_downcase == "user-agent") | .[1]] | first // "";
    [.[] | select(.t_ms >= $a and .t_ms < $b and (ua | startswith("nthd/"))
                  and ($p == "" or .path == $p))] | length'
}
# Sets strace_json (null without --strace or strace).
strace_run() {
  strace_json=null
  if ((strace_secs > 0)) && command -v strace >/dev/null; then
    log "strace -f for ${strace_secs} s"
    s0="$(now_ms)"
    timeout -s INT "$strace_secs" strace -f -qq -o "$work/strace" -p "$pid" 2>/dev/null || true
    s1="$(now_ms)"
    polls="$(nthd_requests "$s0" "$s1" "$SPOT")"
    strace_json="$(awk -v polls="$polls" -v secs="$strace_secs" '
        { line = $0; sub(/^[0-9]+ +/, "", line); if (line ~ /^<\.\.\./) next
          n = split(line, a, "("); name = a[1]; if (name == "" || name ~ /^[+-]/) next; c[name]++; total++ }
        END { printf "{\"window_s\":%s,\"spot_polls\":%d,\"syscalls\":%d,\"per_poll\":%.1f,\"by_name\":{", secs, polls, total, polls ? total / polls : 0
              sep = ""; for (k in c) { printf "%s\"%s\":%d", sep, k, c[k]; sep = "," } printf "}}" }' "$work/strace")"
  fi
}

# --floor and --stack run beside nthd, in its window, not after it: this VM's CPU cost per
# wakeup drifts by tens of percent from one minute to the next, and a ratio of figures taken in
# different minutes carries that drift. Each is one wakeup a second of well under a millisecond,
# started a quarter of a second apart, so they do not meet nthd's or each other's.
# Starts them in the background (bench/floor.c, then nthd-stack-floor with hyper, --raw,
# --blocking and --ureq).
beside_start() {
  local bin="$_testkit_dir/nthd-stack-floor" net=(nsenter --net="/proc/$pid/ns/net")
  if [[ -n "$floor_k" ]]; then
    cc -O2 -static -o "$work/floor" "$HERE/floor.c" || fail "cannot build bench/floor.c (cc)"
    log "beside nthd: bench/floor.c, $floor_k GET(s) a second"
    "${net[@]}" "$work/floor" "$secs" "$floor_k" >"$work/floor.json" & floor_pid=$!
  fi
  [[ -n "$stack_k" ]] || return 0
  [[ -x "$bin" ]] || (cd "$REPO" && cargo build --quiet --release --target "$(uname -m)-unknown-linux-musl" \
    -p nthd-testkit --bin nthd-stack-floor) || fail "cannot build the testkit's nthd-stack-floor"
  log "beside nthd: nthd-stack-floor, $stack_k GET(s) a second: tokio + hyper, tokio alone, blocking, ureq"
  local mode
  stack_pids=()
  for mode in "${STACK_MODES[@]}"; do
    sleep 0.25
    # shellcheck disable=SC2086  # an empty mode is no argument (tokio + hyper)
    "${net[@]}" "$bin" "$secs" "$stack_k" ${mode:+--$mode} >"$work/stack-${mode:-hyper}.json" &
    stack_pids+=($!)
  done
}

# Sets floor_json and stack_json (null without --floor, --stack) when they are done.
beside_wait() {
  floor_json=null stack_json=null
  if [[ -n "$floor_k" ]]; then
    wait "$floor_pid" || fail "bench/floor.c could not read the mock"
    floor_json="$(cat "$work/floor.json")"
  fi
  [[ -n "$stack_k" ]] || return 0
  local i mode files=()
  for i in "${!STACK_MODES[@]}"; do
    mode="${STACK_MODES[i]}"
    wait "${stack_pids[i]}" || fail "nthd-stack-floor ${mode:+--$mode }could not read the mock"
    files+=("$work/stack-${mode:-hyper}.json")
  done
  stack_json="$(jq -sc '{hyper: .[0], tokio: .[1], blocking: .[2], ureq: .[3]}' "${files[@]}")"
}

# The JSON result: printed, written to --out, and a one-line summary.
report() {
  dropins_json="$(printf '%s\n' ${dropins[@]+"${dropins[@]}"} | jq -R . | jq -sc 'map(select(. != ""))')"
  version="$(ct_exec nthd --version | head -n1)"
  result="$(jq -n --arg lbl "$label" --arg version "$version" --argjson secs "$(( t1_ms - t0_ms ))" \
    --argjson dropins "$dropins_json" --rawfile t0 "$work/t0" --rawfile t1 "$work/t1" \
    --argjson rss "$rss" --argjson hwm "$hwm" --argjson reqs "$reqs" --argjson spot "$spot" \
    --argjson strace "$strace_json" --argjson floor "$floor_json" --argjson stack "$stack_json" --arg l0 "${l0:-}" --arg l1 "${l1:-}" \
    --argjson tick "$(getconf CLK_TCK)" --argjson every "$loop_every" '
    def rows: split("\n") | map(select(. != "") | split(" ") | {tid: .[0], comm: .[1], ns: (.[2]|tonumber),
              slices: (.[3]|tonumber), vol: (.[4]|tonumber), invol: (.[5]|tonumber)}) | INDEX(.tid);
    ($secs / 1000) as $w | ($t0 | rows) as $a | ($t1 | rows) as $b |
    [$b | to_entries[] | .value as $x | ($a[$x.tid] // {ns: 0, slices: 0, vol: 0, invol: 0}) as $y |
      {tid: $x.tid, comm: $x.comm, cpu_ms: (($x.ns - $y.ns) / 1e6), switches: (($x.vol - $y.vol) + ($x.invol - $y.invol)),
       voluntary: ($x.vol - $y.vol), nonvoluntary: ($x.invol - $y.invol)}] as $th |
    ($th | map(.cpu_ms) | add) as $cpu | ($th | map(.switches) | add) as $sw |
    def r3: . * 1000 | round / 1000;
    {"label": $lbl, nthd_version: $version, window_s: $w, dropins: $dropins,
     cpu_s_per_hour: ($cpu / 1000 / $w * 3600 | r3), cpu_method: "schedstat",
     switches_per_s: ($sw / $w | r3), voluntary_per_s: ($th | map(.voluntary) | add / $w | r3),
     nonvoluntary_per_s: ($th | map(.nonvoluntary) | add / $w | r3),
     rss_kib: $rss, peak_rss_kib: $hwm, imds_requests: $reqs, imds_req_per_s: ($reqs / $w | r3),
     spot_polls: $spot, switches_per_spot_poll: (if $spot > 0 then $sw / $spot | r3 else null end),
     cpu_us_per_request: (if $reqs > 0 then $cpu * 1000 / $reqs | round else null end),
     threads: $th, strace: $strace, floor: $floor, stack: $stack,
     ratio_to_floor: (if $floor == null then null else ($floor.us_per_tick) as $f |
       {nthd: ($cpu * 1000 / $w / $f | . * 100 | round / 100),
        stack_hyper: (if $stack == null then null else $stack.hyper.us_per_tick / $f | . * 100 | round / 100 end),
        stack_tokio: (if $stack == null then null else $stack.tokio.us_per_tick / $f | . * 100 | round / 100 end),
        stack_blocking: (if $stack == null then null else $stack.blocking.us_per_tick / $f | . * 100 | round / 100 end),
        stack_ureq: (if $stack == null then null else $stack.ureq.us_per_tick / $f | . * 100 | round / 100 end)} end),
     curl_loop: (if $every > 0 and $l0 != "" then {every_s: $every,
       cpu_s_per_hour: ((($l1|tonumber) - ($l0|tonumber)) / $tick / $w * 3600 | r3), cpu_method: "/proc ticks"} else null end)}')"
  [[ -z "$out" ]] || { mkdir -p "$(dirname "$out")"; printf '%s\n' "$result" >"$out"; }
  printf '%s\n' "$result"
  log "$(jq -r '"\(.label): \(.cpu_s_per_hour) CPU-s/h, \(.switches_per_s) switches/s, RSS \(.rss_kib) KiB (peak \(.peak_rss_kib)), \(.imds_req_per_s) req/s" + (if .curl_loop then "; curl loop \(.curl_loop.every_s) s: \(.curl_loop.cpu_s_per_hour) CPU-s/h" else "" end) + (if .ratio_to_floor then "; to the floor: nthd \(.ratio_to_floor.nthd)×, tokio+hyper \(.ratio_to_floor.stack_hyper)×, tokio \(.ratio_to_floor.stack_tokio)×, blocking \(.ratio_to_floor.stack_blocking)×, ureq \(.ratio_to_floor.stack_ureq)×" else "" end)' <<<"$result")"
}

main() {
  parse_args "$@"
  preflight
  work="$(mktemp -d "${TMPDIR:-/tmp}/nthd-real-idle.XXXXXX")"
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  start_node
  beside_start
  measure
  beside_wait
  reqs="$(nthd_requests "$t0_ms" "$t1_ms")"
  spot="$(nthd_requests "$t0_ms" "$t1_ms" "$SPOT")"
  strace_run
  report
}

main "$@"
