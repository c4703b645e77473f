# shellcheck shell=bash
# shellcheck disable=SC2034  # the globals below are read by the sourcing scripts
# shellcheck disable=SC2016  # single-quoted jq programs
# The e2e toolkit, the one file of helpers the scenarios share; sourced (after lib.sh) by the
# runners tests/e2e/run.sh and tests/e2e/install.sh, which only drive. It has how a scenario
# reports (fail, timing, step), boots a node (setup_node), sets a notice on the mock IMDS,
# reads the mock's log, and judges a power-off by its evidence (the kubelet stand-in's lock,
# logind, nthd's journal). The functions run inside a scenario's subshell (set -e, EXIT
# trap = ct_cleanup).

# Copies of values in the Rust code; tests/shell_values.rs fails when one drifts from its source
# (the paths: src/provider/aws.rs; the MESSAGE_IDs: the file named beside each).
IMDS="http://169.254.169.254"
AWS_SPOT=/latest/meta-data/spot/instance-action
AWS_SCHEDULED=/latest/meta-data/events/maintenance/scheduled
AWS_REBALANCE=/latest/meta-data/events/recommendations/rebalance
# MESSAGE_IDs of nthd's journal entries (src/daemon.rs MSG_NOTICE, src/executor.rs MSG_ACTION*)
MSG_NOTICE=9d3f6a0c4b1e4f2a8c7d5e6f1a2b3c4d
MSG_ACTION=5b8e2d1f7a9c4e3b9f0a1c2d3e4f5a6b
MSG_ACTION_FAILED=c1e4a7b2d5f84c6e8a9b0c1d2e3f4a5b   # src/executor.rs
MSG_DRAINED=3c9e1f4a6b2d4e8f9a7c5b3d1e0f2a4c   # src/drain/mod.rs

SCEN=""      # current scenario name
SDIR=""      # its host directory (bound at /e2e)
SREPORT=""   # where failure/timings go (the scenario's top directory; SDIR may be a part of it)

fail() { log "FAIL: $*"; echo "$*" >>"${SREPORT:-$SDIR}/failure"; exit 1; }

# Record a timing for the PASS/FAIL line.  Usage: timing "prepare +0.41s"
timing() { echo "$*" >>"${SREPORT:-$SDIR}/timings"; log "timing: $*"; }

step() { log "--- $*"; }

indent() { sed 's/^/    /'; }

iso_in() { date -u -d "+$1 sec" +%Y-%m-%dT%H:%M:%SZ; }

# Save the mock's view (request log, route events) under the run dir.
save_mock_state() {
  mock_events >"$SDIR/mock-events.json" 2>/dev/null || true
  mock_log >"$SDIR/mock-log.json" 2>/dev/null || true
}

# Set a notice and return (in NOTICE_MS) the instant it became visible: the
# mock's own route-change event timestamp if it reports epoch ms, else the
# host clock right after the control call returned (the container shares the
# host clock).
# Usage: set_notice [--text] PATH BODY   (--text: text/plain, GCP/Alibaba)
NOTICE_MS=""
set_notice() {
  local setter=set_route
  [[ "$1" == --text ]] && { setter=set_route_text; shift; }
  local path="$1" body="$2" before after ev
  before="$(now_ms)"
  "$setter" "$path" "$body" || fail "could not set route $path on the mock"
  after="$(now_ms)"
  ev="$(mock_event_ms "$path" || true)"
  if [[ "$ev" =~ ^[0-9]{13}$ ]] && (( ev >= before - 1000 && ev <= after + 1000 )); then
    NOTICE_MS="$ev"
  else
    log "mock event t_ms for $path is '${ev}' (not epoch ms within the call); using host clock"
    NOTICE_MS="$after"
  fi
  echo "$NOTICE_MS" >"$SDIR/notice_ms"
  log "notice at $path set (t=$NOTICE_MS): $body"
}

# Expect: the kubelet stand-in sees PrepareForShutdown within PREP_S of
# NOTICE_MS (when given), finishes its drain, releases its lock, and only
# then does the container power off (nspawn exits).
# Usage: expect_poweroff_through_lock PREP_TIMEOUT_S [MAX_NOTICE_TO_PREPARE_MS]
expect_poweroff_through_lock() {
  local prep_timeout="$1" max_lag="${2:-}" prep drained released
  prep="$(wait_for_prepare "$prep_timeout")" || fail "no PrepareForShutdown within ${prep_timeout}s"
  timing "prepare +$(fmt_ms $((prep - NOTICE_MS)))"
  if [[ -n "$max_lag" ]] && (( prep - NOTICE_MS > max_lag )); then
    fail "PrepareForShutdown $(fmt_ms $((prep - NOTICE_MS))) after the notice (limit $(fmt_ms "$max_lag"))"
  fi
  save_mock_state   # container is alive while the stand-in drains
  ct_journal_sync
  ct_wait_exit $((E2E_DRAIN_SECS + 20 * E2E_SLOW)) || fail "container still running $((E2E_DRAIN_SECS + 20 * E2E_SLOW))s after PrepareForShutdown"
  timing "halted +$(fmt_ms $((CT_EXIT_MS - NOTICE_MS)))"
  drained="$(kubelet_event_ms drained)" || fail "stand-in never recorded 'drained' before power-off"
  released="$(kubelet_event_ms released)" || fail "stand-in never recorded 'released' before power-off"
  (( released <= CT_EXIT_MS )) || fail "lock released after the container had halted?!"
  timing "drain $(fmt_ms $((drained - prep))), released->halted $(fmt_ms $((CT_EXIT_MS - released)))"
  # systemd SIGTERMs the stand-in right after the release; it records that.
  local stopped
  if stopped="$(kubelet_event_ms stopped)"; then
    log "stand-in stopped (SIGTERM) $(fmt_ms $((stopped - released))) after its release"
  else
    log "note: the stand-in recorded no 'stopped' (no SIGTERM seen before the halt?)"
  fi
  # A slow tail usually means a unit ignored SIGTERM (DefaultTimeoutStopSec
  # is 10s in the test rootfs); not a failure, but worth seeing.
  if (( CT_EXIT_MS - released >= 5000 )); then
    log "warning: $(fmt_ms $((CT_EXIT_MS - released))) from lock release to halt; slow units:"
    journalctl -D "$SDIR/journal" -q --no-pager -o short-precise \
      -g 'State .stop-sigterm. timed out|Killing process' 2>/dev/null | tail -n 5 >&2 || true
  fi
  # The lock must really have held the shutdown back for the drain.
  (( CT_EXIT_MS - prep >= E2E_DRAIN_SECS * 1000 - 200 )) \
    || fail "container halted $(fmt_ms $((CT_EXIT_MS - prep))) after PrepareForShutdown, before the ${E2E_DRAIN_SECS}s drain"
  [[ "$CT_EXIT_RC" == 0 ]] || log "note: systemd-nspawn exit status $CT_EXIT_RC"
}

# The container's journal entries with MESSAGE_ID=$1 as JSON lines
# (readable after the container is gone: the journal is on the bind).
journal_json() {
  ct_journal_sync
  journalctl -D "$SDIR/journal" -o json --no-pager -q "MESSAGE_ID=$1" 2>/dev/null
}

# How much later than the event journald may receive an entry written before it (above).
JOURNAL_LAG_MS=250

# journald structured logging: nthd's notice entry (MSG_NOTICE) with
# NTHD_KIND=KIND and NTHD_ACTION=poweroff was written before the stand-in saw
# PrepareForShutdown, and its action entry (MSG_ACTION, "PowerOff") before
# the container halted; both from nthd.service.
# Usage: expect_journal_notice_and_action KIND PREPARE_MS
expect_journal_notice_and_action() {
  local kind="$1" prep="$2" n a nts ats
  n="$(journal_json "$MSG_NOTICE" | hjq -sc --arg k "$kind" \
        '[.[] | select(.NTHD_KIND == $k and .NTHD_ACTION == "poweroff")] | first // empty')"
  [[ -n "$n" ]] || fail "no journal entry MESSAGE_ID=$MSG_NOTICE with NTHD_KIND=$kind NTHD_ACTION=poweroff"
  a="$(journal_json "$MSG_ACTION" | hjq -sc --arg k "$kind" \
        '[.[] | select(.NTHD_KIND == $k and .NTHD_ACTION == "poweroff")] | first // empty')"
  [[ -n "$a" ]] || fail "no journal entry MESSAGE_ID=$MSG_ACTION with NTHD_KIND=$kind NTHD_ACTION=poweroff"
  log "journal notice: $(hjq -r '"\(._SYSTEMD_UNIT) NTHD_KIND=\(.NTHD_KIND) NTHD_NOTICE_ID=\(.NTHD_NOTICE_ID) NTHD_DEADLINE=\(.NTHD_DEADLINE) NTHD_ACTION=\(.NTHD_ACTION): \(.MESSAGE)"' <<<"$n")"
  log "journal action: $(hjq -r '"\(._SYSTEMD_UNIT) NTHD_ACTION=\(.NTHD_ACTION): \(.MESSAGE)"' <<<"$a")"
  [[ "$(hjq -r ._SYSTEMD_UNIT <<<"$n")" == nthd.service && "$(hjq -r ._SYSTEMD_UNIT <<<"$a")" == nthd.service ]] \
    || fail "the notice/action journal entries are not from nthd.service"
  [[ "$(hjq -r .NTHD_NOTICE_ID <<<"$n")" == "$(hjq -r .NTHD_NOTICE_ID <<<"$a")" ]] \
    || fail "notice and action entries name different NTHD_NOTICE_IDs"
  [[ "$(hjq -r .MESSAGE <<<"$a")" == *"Manager.PowerOff(false)"* ]] || fail "action entry does not name PowerOff: $(hjq -r .MESSAGE <<<"$a")"
  # __REALTIME_TIMESTAMP is when journald received the entry, not when nthd wrote it: on a
  # loaded 2-core machine journald received the notice 4 ms after the stand-in saw
  # PrepareForShutdown (a bare machine's proof), although nthd writes it before its
  # PowerOff call. So the notice may trail PrepareForShutdown by JOURNAL_LAG_MS, no more;
  # notice before action (one socket, in order) stays exact.
  nts=$(( $(hjq -r .__REALTIME_TIMESTAMP <<<"$n") / 1000 ))
  ats=$(( $(hjq -r .__REALTIME_TIMESTAMP <<<"$a") / 1000 ))
  (( nts <= prep + JOURNAL_LAG_MS )) ||
    fail "notice journal entry ($nts) is more than ${JOURNAL_LAG_MS} ms later than PrepareForShutdown ($prep)"
  (( nts <= ats && ats <= CT_EXIT_MS )) || fail "action journal entry at $ats is not between the notice ($nts) and the halt ($CT_EXIT_MS)"
  timing "journal notice +$(fmt_ms $((nts - NOTICE_MS))), action +$(fmt_ms $((ats - NOTICE_MS)))"
}

# The one PowerOff: nthd logged exactly one PowerOff action entry in this boot.
expect_one_poweroff_action() {
  local count
  count="$(journal_json "$MSG_ACTION" | hjq -s '[.[] | select(.NTHD_ACTION == "poweroff")] | length')"
  [[ "$count" == 1 ]] || fail "nthd logged $count PowerOff actions, not exactly one"
}

# nthd announced a scheduled stop (its notice entry is in the journal); run.sh's deferred
# scenarios and install.sh's rpm-deferred wait for it before they look for an early action.
_deferred_announced() {
  [[ -n "$(journal_json "$MSG_NOTICE" | hjq -c 'select(.NTHD_KIND == "scheduled-stop")' 2>/dev/null)" ]]
}

# ------------------------------------------------- node and mock helpers


# Boot a node with nthd installed and configured.
# Usage: setup_node [--no-mock] [--no-kubelet] [--provider P] [--endpoint URL ("": none)]
#                   [--env NTHD_X=value]...   (extra /etc/default/nthd lines)
#                   [--pre FUNCTION]  (run after the mock is up, before nthd
#                                      is configured: initial routes/config)
setup_node() {
  local mock=1 kubelet=1 provider=aws endpoint="$IMDS" env=() pre=""
  while (($#)); do case "$1" in
    --no-mock) mock=0;; --no-kubelet) kubelet=0;;
    --provider) provider="$2"; shift;; --endpoint) endpoint="$2"; shift;;
    --env) env+=("$2"); shift;;
    --pre) pre="$2"; shift;;
    *) fail "setup_node: bad arg $1";; esac; shift; done
  step "boot"
  ct_boot "$SCEN" "$SDIR" || fail "container did not boot"
  timing "boot $(fmt_ms "$CT_BOOT_MS")"
  ct_net_setup || fail "could not add IMDS addresses to lo"
  step "dpkg -i nthd"
  nthd_install || fail "nthd package did not install"
  if ((kubelet)); then
    step "kubelet stand-in"
    # KUBELET_ARGS: the stand-in's pods and priority groups (scen-drain.sh).
    kubelet_start ${KUBELET_ARGS[@]+"${KUBELET_ARGS[@]}"} || fail "kubelet stand-in did not take its delay lock"
  fi
  if ((mock)); then
    step "mock IMDS"
    mock_start || fail "mock IMDS did not start"
  fi
  if [[ -n "$pre" ]]; then
    step "before nthd is configured: $pre"
    "$pre"
  fi
  step "configure nthd ($provider, ${endpoint:-the default endpoint})"
  [[ -z "$endpoint" ]] || env=("NTHD_IMDS_ENDPOINT=$endpoint" ${env[@]+"${env[@]}"})
  nthd_configure "NTHD_PROVIDER=$provider" ${env[@]+"${env[@]}"} \
    || fail "nthd did not come back after reconfiguration"
}

# How many requests for PATH the mock logged at or after epoch ms SINCE
# (GET /_mock/log is a JSON array of {t_ms, method, path, status, ...}).
mock_requests_since() {
  local n
  n="$(mock_log | ct_exec jq --arg p "$1" --argjson since "$2" \
        '[.[] | select(.path == $p and .t_ms >= $since)] | length')" || n=0
  echo "${n:-0}"
}

# Expect: no PrepareForShutdown for SECS seconds and the container still up.
expect_no_poweroff() {
  local secs="$1"
  no_prepare_for "$secs" || fail "unexpected PrepareForShutdown within ${secs}s"
  ct_alive || fail "container powered off unexpectedly"
}

expect_nthd_active() { nthd_active || fail "nthd is not active ($(ct_exec systemctl is-active nthd 2>&1))"; }

# busctl call logind Manager METHOD as USER; prints the reply or the error.
logind_as() {
  local user="$1"; shift
  ct_exec runuser -u "$user" -- busctl call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager "$@" 2>&1
}

# The mock's request log as saved on disk: the copy its ExecStop= wrote
# at shutdown (complete, includes what nthd sent while being stopped), else
# the one save_mock_state took at PrepareForShutdown.
mock_log_saved() {
  if [[ -s "$SDIR/mock-log.final.json" ]]; then echo "$SDIR/mock-log.final.json"
  elif [[ -s "$SDIR/mock-log.json" ]]; then echo "$SDIR/mock-log.json"
  else fail "no saved mock request log in $SDIR"; fi
}
# jq over the mock's request log: live while the container runs, else the
# saved copy.  Usage: mock_log_jq [jq args] FILTER
mock_log_jq() {
  if ct_alive; then mock_log | hjq "$@"; else hjq "$@" <"$(mock_log_saved)"; fi
}
