# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted jq programs
# The drain report's scenarios, sourced by run.sh: nthd's own delay lock sees every shutdown
# through and reports how its drain went (io.nthd.drained to the CloudEvents receiver, the
# journal's MSG_DRAINED entry, the metrics textfile), with the kubelet stand-in laying pods out
# as kubelet does (kubepods.slice cgroups, /var/log/pods):
#   drain-report       a spot notice, a 5 s drain: released, held about 5 s, no pods left;
#   drain-budget       a drain longer than InhibitDelayMaxSec: budget_exhausted, held about the
#                      budget, the pods still running named;
#   drain-lock-cost    an admin's `systemctl poweroff`, booted twice: without nthd, then with
#                      it (reported with no notice); nthd's lock delays the halt by <= 2 s;
#   many-locks         user nobody holds 8,000 delay locks: nthd's loop still answers within
#                      2 s during the drain, the report comes before the halt and names 32.

DRAIN_METRICS_DIR=/e2e/metrics          # the textfile on the host bind: readable after the halt

# The receiver (scen-observability.sh), and nthd's drop-ins: the webhook on the loopback and
# the textfile on the bind.
_drain_pre() {
  _identity_and_receiver
  ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d "$1" && chown nthd:nthd "$1" &&
         printf "[Service]\nIPAddressAllow=localhost\n" >/etc/systemd/system/nthd.service.d/webhook.conf &&
         printf "[Service]\nReadWritePaths=%s\n" "$1" >/etc/systemd/system/nthd.service.d/textfile.conf &&
         systemctl daemon-reload' "$DRAIN_METRICS_DIR" || fail "could not write nthd's drop-ins"
}

# The node for the drain scenarios: the receiver, the textfile, and the stand-in's pods
# (KUBELET_ARGS, read by kubelet_start through setup_node); ARGS go to setup_node.
_drain_node() {
  wheels_fetch || fail "could not download the CloudEvents SDK's wheels (pip download)"
  setup_node --pre _drain_pre --env "NTHD_WEBHOOK=$WEBHOOK_URL" \
    --env "NTHD_METRICS_TEXTFILE=$DRAIN_METRICS_DIR/nthd.prom" "$@"
  wait_until 10 _nthd_holds_its_lock || fail "nthd holds no delay lock on shutdown: $(ct_exec systemd-inhibit --list --no-pager 2>&1)"
}
_nthd_holds_its_lock() {
  ct_exec systemd-inhibit --list --no-pager 2>/dev/null | grep -E '^ *nthd ' | grep -q delay
}

# The validated io.nthd.drained event (one line of JSON), or nothing.
drained_event() {
  hjq -c -s 'map(select(.ok and .type == "io.nthd.drained")) | first // empty' "$SDIR/receiver.jsonl" 2>/dev/null
}

# Expect exactly one io.nthd.drained event with OUTCOME and held_s within [LO, HI]; it reached
# the receiver before the halt.  Prints the event's data.  Usage: expect_drained OUTCOME LO HI
expect_drained() {
  local want="$1" lo="$2" hi="$3" ev data n
  n="$(hjq -s 'map(select(.ok and .type == "io.nthd.drained")) | length' "$SDIR/receiver.jsonl")"
  [[ "$n" == 1 ]] || fail "$n io.nthd.drained events, not one: $(hjq -c 'select(.type == "io.nthd.drained")' "$SDIR/receiver.jsonl")"
  ev="$(drained_event)"; data="$(hjq -c .data <<<"$ev")"
  log "io.nthd.drained: $data"
  [[ "$(hjq -r .outcome <<<"$data")" == "$want" ]] || fail "outcome is not $want: $data"
  hjq -e --argjson lo "$lo" --argjson hi "$hi" '.held_s >= $lo and .held_s <= $hi' <<<"$data" >/dev/null \
    || fail "held_s $(hjq .held_s <<<"$data") is not within [$lo, $hi]"
  (( $(hjq .t_ms <<<"$ev") < CT_EXIT_MS )) || fail "the drained event arrived after the halt"
  timing "drained event $(fmt_ms $(( CT_EXIT_MS - $(hjq .t_ms <<<"$ev") ))) before the halt"
  echo "$data"
}

# The journal's MSG_DRAINED entry and the textfile agree with the event.  Usage:
# expect_drain_recorded OUTCOME
expect_drain_recorded() {
  local j prom
  j="$(journal_json "$MSG_DRAINED" | hjq -sc 'first // empty')"
  [[ -n "$j" ]] || fail "no journal entry MESSAGE_ID=$MSG_DRAINED"
  [[ "$(hjq -r .NTHD_DRAIN_OUTCOME <<<"$j")" == "$1" && "$(hjq -r ._SYSTEMD_UNIT <<<"$j")" == nthd.service ]] \
    || fail "the journal's drain entry is not nthd's $1: $(hjq -c '{NTHD_DRAIN_OUTCOME, _SYSTEMD_UNIT, MESSAGE}' <<<"$j")"
  log "journal: $(hjq -r .MESSAGE <<<"$j")"
  prom="$CT_DIR/metrics/nthd.prom"
  grep -qx "nthd_drain_outcome{outcome=\"$1\"} 1" "$prom" 2>/dev/null \
    || fail "the textfile does not say nthd_drain_outcome{outcome=\"$1\"} 1: $(grep drain "$prom" 2>&1)"
  grep -qE '^nthd_drain_seconds [0-9.]+$' "$prom" || fail "no nthd_drain_seconds in the textfile"
}

scen_drain_report() {
  KUBELET_ARGS=(--pod default/web-1:burstable:0 --pod kube-system/dns-1:guaranteed:1
                --group 0:3 --group 1:2)
  _drain_node
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  local data; data="$(expect_drained released 4.5 7)"
  [[ "$(hjq -c .pods_left <<<"$data")" == '[]' ]] || fail "pods_left is not empty: $data"
  [[ "$(hjq -r .notice.kind <<<"$data")" == spot-terminate ]] || fail "the report does not name the spot notice: $data"
  hjq -e '.notice.seconds_left > 90 and (.holders | map(.who) | index("kubelet"))' <<<"$data" >/dev/null \
    || fail "the report lacks the seconds left or kubelet as holder: $data"
  expect_drain_recorded released
}

# shellcheck disable=SC2034  # E2E_INHIBIT_DELAY / E2E_DRAIN_SECS are read by lib.sh
scen_drain_budget() {
  local E2E_INHIBIT_DELAY=10 E2E_DRAIN_SECS=30
  KUBELET_ARGS=(--pod default/quick-1:besteffort:0 --pod default/slow-1:burstable:1
                --pod default/slow-2:guaranteed:1 --group 0:2 --group 1:28)
  _drain_node
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_for_prepare 10 >/dev/null || fail "no PrepareForShutdown"
  ct_wait_exit 30 || fail "still running 30 s after PrepareForShutdown with a 10 s budget"
  local data; data="$(expect_drained budget_exhausted 7 10)"
  [[ "$(hjq -c '.pods_left | sort' <<<"$data")" == '["default/slow-1","default/slow-2"]' ]] \
    || fail "pods_left does not name the two slow pods: $(hjq -c .pods_left <<<"$data")"
  hjq -e '.holders[] | select(.who == "kubelet") | .released_s == null' <<<"$data" >/dev/null \
    || fail "kubelet is not named as still holding its lock: $data"
  expect_drain_recorded budget_exhausted
  _drain_sample_holds "$data"
}

# docs/observability.md's drain report sample: the journal line (`…` for the seconds left) and
# the event's data, the same but for the times, the process id and the seconds left.
_drain_sample_holds() {
  local doc="$REPO/docs/observability.md" msg vary='del(.started, .notice.deadline,
    .notice.seconds_left, .holders[].pid) | .pods_left |= sort'
  msg="$(journal_json "$MSG_DRAINED" | hjq -sr 'first | .MESSAGE')"
  sample_line_in "$msg" "$(doc_block "$doc" drained-journal)" ||
    fail "docs/observability.md's drain journal line is not what nthd logged: $msg"
  [[ "$(hjq -cS "$vary" <<<"$1")" == "$(doc_block "$doc" drained-event | hjq -cS "$vary")" ]] ||
    fail "docs/observability.md's io.nthd.drained sample differs from the event: $1"
}

# One admin `systemctl poweroff`: how long after the stand-in's release logind went ahead
# ("System is powering down") and the container halted, into LOCK_COST_DOWN / LOCK_COST_HALT
# (not printed: CT_EXIT_MS must reach the caller, so no command substitution).
_admin_poweroff() {
  ct_exec systemctl poweroff --no-block || fail "systemctl poweroff"
  wait_for_prepare 10 >/dev/null || fail "no PrepareForShutdown after systemctl poweroff"
  ct_journal_sync
  ct_wait_exit $((E2E_DRAIN_SECS + 20)) || fail "still running after the drain"
  local released down
  released="$(kubelet_event_ms released)" || fail "the stand-in never released its lock"
  down="$(journal_first_ms systemd-logind 'System is powering down')" || {
    log "note: logind logged no 'System is powering down'; measuring to the halt only"; down="$CT_EXIT_MS"; }
  LOCK_COST_DOWN=$((down - released)); LOCK_COST_HALT=$((CT_EXIT_MS - released))
}

LOCK_COST_PODS=(--pod default/web-1:burstable:0 --group 0:5)

# shellcheck disable=SC2034  # KUBELET_ARGS is read by setup_node (run.sh)
scen_drain_lock_cost() {
  local top="$SDIR" without with KUBELET_ARGS=("${LOCK_COST_PODS[@]}")
  step "without nthd's lock: nthd stopped, an admin's systemctl poweroff"
  SDIR="$top/without"; mkdir -p "$SDIR"
  setup_node --no-mock
  ct_exec systemctl stop nthd
  ! _nthd_holds_its_lock || fail "nthd's lock outlived nthd"
  _admin_poweroff; without=("$LOCK_COST_DOWN" "$LOCK_COST_HALT")
  step "with nthd's lock: the same, nthd running"
  SDIR="$top/with"; mkdir -p "$SDIR"
  _drain_node
  _admin_poweroff; with=("$LOCK_COST_DOWN" "$LOCK_COST_HALT")
  local data; data="$(expect_drained released 4.5 7)"
  [[ "$(hjq -c .notice <<<"$data")" == null ]] || fail "an admin's poweroff is reported as following a notice: $data"
  [[ "$(hjq -c .pods_left <<<"$data")" == '[]' ]] || fail "pods_left is not empty: $data"
  expect_drain_recorded released
  SDIR="$top"
  timing "release -> powering down: $(fmt_ms "${without[0]}") without nthd, $(fmt_ms "${with[0]}") with"
  timing "release -> halt: $(fmt_ms "${without[1]}") without nthd, $(fmt_ms "${with[1]}") with"
  printf '{"without":{"down_ms":%s,"halt_ms":%s},"with":{"down_ms":%s,"halt_ms":%s}}\n' \
    "${without[0]}" "${without[1]}" "${with[0]}" "${with[1]}" >"$SDIR/lock-cost.json"
  (( with[0] - without[0] <= 2000 )) || fail "nthd's lock held logind back $(fmt_ms $((with[0] - without[0]))) longer"
  (( with[1] - without[1] <= 2000 )) || fail "the halt came $(fmt_ms $((with[1] - without[1]))) later with nthd's lock"
}

# --- A neighbour's 8,000 delay locks (any local user may take up to logind's InhibitorsMax,
# 8192): user nobody holds them through the shutdown that a spot notice starts. Kubelet's
# stand-in releases after its 5 s drain, the neighbour never does, so the drain runs to the
# 10 s budget. Meanwhile nthd's loop lists a rebalance recommendation (read every second) in the
# status file within 2 s and its peak RSS stays under a quarter of the unit's MemoryMax=; the
# report reaches the receiver before the halt: budget_exhausted, kubelet named first among 32
# holders, the rest counted.

# shellcheck disable=SC2034  # E2E_INHIBIT_DELAY is read by lib.sh
scen_many_locks() {
  local E2E_INHIBIT_DELAY=10 bin data t0
  _drain_node --env NTHD_SLOW_POLL_INTERVAL=1s   # the recommendation is read every second
  step "user nobody takes 8,000 delay locks on shutdown"
  bin="$(ct_put "$E2E_MANY_LOCKS" nthd-many-locks)" || fail "could not put nthd-many-locks in the container"
  ct_exec systemd-run --quiet --unit=many-locks --uid=nobody -p LimitNOFILE=16384 "$bin" --count 8000 \
    || fail "could not start nthd-many-locks"
  wait_until 120 _many_locks_held || fail "nobody does not hold 8,000 locks: $(ct_journal -u many-locks | tail -n 3)"
  timing "8,000 locks held"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_for_prepare 10 >/dev/null || fail "no PrepareForShutdown"
  step "during the drain: a rebalance recommendation is in the status file within 2 s"
  sleep 1
  t0="$(now_ms)"
  set_route "$AWS_REBALANCE" \
    "{\"noticeTime\":\"$(iso_in 0)\"}" || fail "could not set the rebalance recommendation"
  wait_until 2 _status_lists rebalance || fail "nthd's status file did not list the rebalance recommendation within 2 s of it"
  timing "status file written $(fmt_ms $(( $(now_ms) - t0 ))) after the recommendation, mid-drain"
  local hwm max
  max="$(ct_exec systemctl show -p MemoryMax --value nthd)"
  [[ "$max" == 67108864 ]] || fail "nthd.service's MemoryMax is $max, not 64M"
  hwm="$(ct_exec awk '/^VmHWM:/ { print $2 }' "/proc/$(nthd_main_pid)/status")"
  ((hwm > 0 && hwm < 16384)) || fail "nthd's peak RSS mid-drain is ${hwm} KiB, not under a quarter of the unit's MemoryMax=64M"
  timing "nthd's peak RSS mid-drain $((hwm / 1024)) MiB"
  ct_wait_exit 30 || fail "still running 30 s after PrepareForShutdown with a 10 s budget"
  data="$(expect_drained budget_exhausted 7 10)"
  hjq -e '.holders[0].who == "kubelet" and (.holders | length) == 32 and .holders_more >= 7968' \
    <<<"$data" >/dev/null || fail "the report does not name kubelet first among 32 and count the rest: $(hjq -c '{h: (.holders | length), first: .holders[0].who, more: .holders_more}' <<<"$data")"
  expect_drain_recorded budget_exhausted
}
_many_locks_held() { ct_journal -u many-locks | grep -q 'holding 8000 delay locks'; }
_status_lists() { ct_exec cat "$NTHD_STATUS" 2>/dev/null | hjq -e --arg k "$1" '[.notices[].kind] | index($k)' >/dev/null; }
