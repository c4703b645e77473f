# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs run inside the container
# Faults and refusals, sourced by run.sh: someone else's shutdown already under way, SIGHUP and
# a clean exit, a bad setting, nthd's shutdown cancelled, a block inhibitor; logind or polkitd
# restarted and the package upgraded while a deferred action waits (setup_deferred_node and
# friends, which scen-upgrade.sh uses too); a neighbour container left untouched.

# --- someone else's shutdown is already held by kubelet's lock when the notice comes: nthd
# must not call PowerOff again (real logind refuses a second one with OperationInProgress).

_nthd_saw_shutdown_under_way() {
  (( $(ct_journal -u nthd | grep -cF "logind is already preparing for shutdown; not calling PowerOff again") > 0 ))
}

scen_shutdown_under_way() {
  # A longer drain leaves time to probe logind and post the notice during the delay.
  local E2E_DRAIN_SECS=15 out prep
  setup_node
  step "root asks logind to power off (someone else's shutdown)"
  NOTICE_MS="$(now_ms)"
  ct_exec busctl call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager PowerOff b false || fail "root's PowerOff was refused"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown after root's PowerOff"
  [[ "$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
        org.freedesktop.login1.Manager PreparingForShutdown)" == "b true" ]] \
    || fail "logind does not report PreparingForShutdown during the delay"
  step "real logind: a second PowerOff during the delay"
  out="$(logind_as nthd PowerOff b false)" && fail "logind accepted a second PowerOff: $out"
  log "logind answered: $out"
  [[ "$out" == *"already a shutdown or sleep operation in progress"* ]] \
    || fail "unexpected answer to a second PowerOff: $out"
  step "spot terminate notice while the node drains"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_until 8 _nthd_saw_shutdown_under_way \
    || fail "nthd did not notice the shutdown under way"
  timing "nthd stood down +$(fmt_ms $(( $(now_ms) - NOTICE_MS )))"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd called logind although a shutdown was under way"
  expect_nthd_active
  save_mock_state
  step "the first shutdown completes through the lock"
  ct_wait_exit $((E2E_DRAIN_SECS + 20)) || fail "container still running after the drain"
  timing "halted +$(fmt_ms $((CT_EXIT_MS - prep))) after PrepareForShutdown"
  (( CT_EXIT_MS - prep >= E2E_DRAIN_SECS * 1000 - 200 )) || fail "halted before the drain ended"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd called logind during the shutdown"
}

# --- Never stop quietly: SIGHUP is ignored; any exit but a bad setting restarts

scen_sighup_and_restart() {
  setup_node
  local pid pid2 n0
  pid="$(nthd_main_pid)"; n0="$(nthd_restarts)"
  step "SIGHUP to nthd's main process (KillUnit main)"
  ct_kill_main nthd HUP || fail "SIGHUP to nthd's main process"
  wait_until 5 _nthd_logged "SIGHUP: ignored" || fail "nthd did not log the SIGHUP"
  sleep 1
  expect_nthd_active
  [[ "$(nthd_main_pid)" == "$pid" ]] || fail "nthd's MainPID changed after SIGHUP ($pid -> $(nthd_main_pid))"
  step "an exit systemd counts as clean (SIGTERM to the main process, not systemctl stop)"
  ct_kill_main nthd TERM || fail "SIGTERM to nthd's main process"
  wait_until 15 _nthd_restarted_from "$pid" || fail "nthd was not restarted after a clean exit (Restart=always)"
  pid2="$(nthd_main_pid)"
  log "restarted: MainPID $pid -> $pid2, NRestarts $n0 -> $(nthd_restarts)"
  timing "restart after clean exit, NRestarts $n0 -> $(nthd_restarts)"
  step "the restarted nthd still acts"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}
_nthd_logged() { (( $(nthd_journal_count "$1") > 0 )); }

# /etc/default/nthd written with printf FORMAT (octal escapes for bytes that are not UTF-8; its
# one %s the mock's endpoint), nthd restarted, and after four RestartSec=2s periods, in which a
# restart loop would show, nthd still active with NRestarts still N0.
# Usage: _restarted_with_settings N0 FORMAT
_restarted_with_settings() {
  local st
  ct_sh 'printf "$2" "$1" >/etc/default/nthd && systemctl restart nthd' "$IMDS" "$2" \
    || fail "writing the settings and restarting nthd"
  sleep 8
  st="$(ct_exec systemctl show -p ActiveState -p NRestarts nthd | tr '\n' ' ')"
  [[ "$st" == *"ActiveState=active"* && "$st" == *"NRestarts=$1"* ]] \
    || fail "nthd did not stay up with these settings: $st"
}
_nthd_restarted_from() { nthd_active && [[ "$(nthd_main_pid)" != "$1" && "$(nthd_main_pid)" != 0 ]]; }

# --- A bad setting costs that setting, never nthd (docs/configuration.md, "When a setting is
# wrong"): NTHD_ACTION_SCHEDULED_REBOOT=lgo and a Latin-1 byte in a comment and in another
# setting's value, all in /etc/default/nthd, which systemd then refuses whole. nthd stays up
# without a restart, applies the file's good lines itself, takes `log` for the bad action,
# names every bad line (journal, status file, nthd check, NPD), and a spot notice 20 s later
# is drained and powered off.

scen_bad_setting() {
  setup_node
  local n0 out npd code
  n0="$(nthd_restarts)"
  step "NTHD_ACTION_SCHEDULED_REBOOT=lgo and two Latin-1 bytes in /etc/default/nthd"
  # Octal escapes: POSIX printf (dash's) has no \x.
  _restarted_with_settings "$n0" \
    '# caf\351\nNTHD_PROVIDER=aws\nNTHD_IMDS_ENDPOINT=%s\nNTHD_ACTION_SCHEDULED_REBOOT=lgo\nNTHD_WEBHOOK_FORMAT=sl\374ck\n'
  _nthd_logged 'NTHD_ACTION_SCHEDULED_REBOOT="lgo" cannot be used' \
    || fail "the journal does not name the bad action: $(ct_journal -u nthd | tail -n 5)"
  _nthd_logged 'line 5: the value of NTHD_WEBHOOK_FORMAT is not valid UTF-8' \
    || fail "the journal does not name the bad line: $(ct_journal -u nthd | tail -n 5)"
  out="$(ct_exec cat "$NTHD_STATUS")"
  hjq -e '[.degraded[].setting] == ["NTHD_ACTION_SCHEDULED_REBOOT", "NTHD_WEBHOOK_FORMAT"]' <<<"$out" >/dev/null \
    || fail "the status file does not list both as degraded: $(hjq -c .degraded <<<"$out")"
  # The NPD monitor's command, as nobody (this lane's tree has no python3 for npd-run.py).
  npd="$(ct_exec runuser -u nobody -- /usr/libexec/nthd/nthd status --npd)"
  code=$?
  (( code == 2 )) || fail "NPD plugin exit $code, not 2: $npd"
  [[ "$npd" == "unknown: degraded: NTHD_ACTION_SCHEDULED_REBOOT fell back (+1 more)"* ]] \
    || fail "NPD line does not name the setting: $npd"
  out="$(nthd_check_as_nthd --json)" && fail "nthd check passed with bad settings"
  hjq -e '[.checks[] | select(.name == "settings" and .status == "fail" and (.fix | test("line 5")))] | length == 1' \
    <<<"$out" >/dev/null || fail "nthd check does not fail 'settings' naming line 5: $(hjq -c '[.checks[] | select(.name == "settings")]' <<<"$out")"
  timing "up with the bad settings, NRestarts $n0 -> $(nthd_restarts), all four reports name them"
  step "a spot notice 20 s after the restart: drained and powered off"
  sleep 12
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}

# --- Never stranded by a typo or a protected settings file: NTHD_LOG_LEVEL=warning (tracing
# wants warn) and /etc/default/nthd at mode 0600 (to keep a webhook URL secret) each leave nthd
# running with a warning, and a spot notice 15 s later is drained and powered off.

scen_typo_and_locked_settings() {
  local n0 st
  setup_node --env NTHD_LOG_LEVEL=warning --env NTHD_POLL_INTERVALL=1s
  n0="$(nthd_restarts)"
  step "NTHD_LOG_LEVEL=warning: nthd runs at info and says so"
  (( $(nthd_journal_count 'NTHD_LOG_LEVEL="warning" cannot be used') > 0 )) \
    || fail "no warning for NTHD_LOG_LEVEL=warning: $(ct_journal -u nthd | tail -n 5)"
  (( $(nthd_journal_count 'NTHD_POLL_INTERVALL is set but is no setting of nthd') > 0 )) \
    || fail "no warning for the misspelt NTHD_POLL_INTERVALL: $(ct_journal -u nthd | tail -n 5)"
  step "chmod 600 /etc/default/nthd, restart: systemd passes the values, nthd cannot reread the file"
  ct_sh 'chmod 600 /etc/default/nthd && systemctl restart nthd' || fail "chmod and restart"
  wait_until 10 nthd_active || fail "nthd is not active with a 0600 settings file"
  wait_until 10 _nthd_logged "systemd read it when it started nthd and passed its values in" \
    || fail "no word about the unreadable settings file: $(ct_journal -u nthd | tail -n 5)"
  nthd_env_has "NTHD_IMDS_ENDPOINT=$IMDS" || fail "systemd did not pass the file's values"
  sleep 15
  st="$(ct_exec systemctl show -p ActiveState -p NRestarts nthd | tr '\n' ' ')"
  [[ "$st" == *"ActiveState=active"* && "$st" == *"NRestarts=$n0"* ]] \
    || fail "nthd did not stay up with the typo and the 0600 file: $st"
  timing "up 15 s with NTHD_LOG_LEVEL=warning and a 0600 settings file: $st"
  step "a spot notice 15 s after the restart: drained and powered off"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}

# --- The shutdown nthd requested is cancelled (logind restarted mid-drain,
# so the delayed PowerOff is gone): nthd sees it and asks again, once.

scen_shutdown_cancelled() {
  local E2E_DRAIN_SECS=20
  setup_node
  local prep st
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown"
  step "restart systemd-logind during the delay (the pending PowerOff is lost)"
  ct_exec systemctl restart systemd-logind || fail "systemctl restart systemd-logind"
  st="$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
        org.freedesktop.login1.Manager PreparingForShutdown)"
  log "after the logind restart: PreparingForShutdown $st"
  [[ "$st" == "b false" ]] || fail "logind still prepares for shutdown after its restart ($st): nothing was cancelled"
  wait_until 15 _nthd_logged "acting again, once" || fail "nthd did not see the cancelled shutdown"
  timing "cancel seen +$(fmt_ms $(( $(now_ms) - prep )))"
  save_mock_state
  ct_wait_exit $((E2E_DRAIN_SECS + 30)) || fail "the node did not power off after nthd asked again"
  timing "halted +$(fmt_ms $((CT_EXIT_MS - prep)))"
  local calls; calls="$(journal_json "$MSG_ACTION" | grep -c . || true)"
  ((calls == 2)) || fail "expected nthd's PowerOff twice (first, then once after the cancellation), journal has $calls"
  _one_report_of_the_second_shutdown
}

# The drain report after a shutdown logind dropped by restarting: none for the dropped one (no
# false `released`), one for the second, written before the halt and after nthd asked again.
_one_report_of_the_second_shutdown() {
  local reports second
  _nthd_logged "counts as cancelled, with no drain report" \
    || fail "nthd did not say the dropped shutdown has no drain report"
  reports="$(journal_json "$MSG_DRAINED" | hjq -sc 'map({o: .NTHD_DRAIN_OUTCOME, n: .NTHD_NOTICE_ID, t: (.__REALTIME_TIMESTAMP | tonumber)})')"
  second="$(journal_json "$MSG_ACTION" | hjq -s 'map(.__REALTIME_TIMESTAMP | tonumber) | max')"
  hjq -e --argjson s "$second" 'length == 1 and .[0].o == "released" and .[0].n == "aws/spot/terminate" and .[0].t > $s' \
    <<<"$reports" >/dev/null || fail "not one released report of the second shutdown, after it: $reports (second PowerOff at $second)"
  log "drain reports: $reports"
}

# --- A block inhibitor on shutdown (a backup agent): real logind refuses nthd's PowerOff;
# nthd names the holder, never overrides it, and powers off once it is released.

_blocker_named() {
  (( $(nthd_journal_count "logind refused PowerOff: backup-agent (why: nightly backup, pid") > 0 ))
}

scen_block_inhibitor() {
  setup_node
  local out rc sysver t_rel prep
  sysver="$(ct_exec busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
        org.freedesktop.systemd1.Manager Version)"
  log "systemd $sysver"
  step "systemd-inhibit --what=shutdown --mode=block (backup-agent)"
  ct_exec systemd-run -q --unit=blocker systemd-inhibit --what=shutdown --mode=block \
    --who=backup-agent --why='nightly backup' sleep 600 || fail "could not start the blocker"
  wait_until 5 _block_held || fail "the block inhibitor is not listed"
  _can_power_off_while_blocked "$sysver"
  step "nthd check names the holder"
  out="$(nthd_check_as_nthd --json 2>/dev/null)" && rc=0 || rc=$?
  ((rc != 0)) || fail "nthd check passed with a block inhibitor held"
  [[ "$(hjq -r '[.checks[] | select(.name == "no block inhibitor on shutdown") | .value] | first' <<<"$out")" \
      == "backup-agent (why: nightly backup, pid "* ]] || fail "nthd check does not name the holder: $out"
  step "spot notice while the block is held"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_until 10 _blocker_named || fail "nthd did not name the block inhibitor's holder: $(ct_journal -u nthd | tail -n 3)"
  (( $(nthd_journal_count "50-nthd.rules") == 0 )) || fail "nthd blamed the polkit rule for a block inhibitor"
  (( $(nthd_journal_count "nthd never overrides it") > 0 )) || fail "nthd did not say it never overrides the lock"
  ct_journal -u nthd | grep -F "logind refused PowerOff" | tail -n 1 | indent >&2
  _refusal_recorded "$sysver"
  expect_no_poweroff 6
  step "the holder exits"
  ct_exec systemctl stop blocker || fail "could not stop the blocker"
  t_rel="$(now_ms)"; NOTICE_MS="$t_rel"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown after the release"
  # One retry interval (NTHD_RETRY_DELAY, 5 s) plus a poll.
  (( prep - t_rel <= 6500 )) || fail "PrepareForShutdown $(fmt_ms $((prep - t_rel))) after the release: more than one retry interval"
  timing "release -> prepare $(fmt_ms $((prep - t_rel)))"
  expect_poweroff_through_lock 5
}
# What logind's CanPowerOff tells user nthd while the block is held: from systemd 260 on it
# must say so (262 answers "inhibited"; inhibitor-blocked and challenge-inhibitor-blocked are
# the other new answers), before that challenge or yes.
_can_power_off_while_blocked() {
  local major answer
  major="$(sed -E 's/^s "([0-9]+).*/\1/' <<<"$1")"
  answer="$(logind_as nthd CanPowerOff)"
  log "CanPowerOff as nthd while the block is held (systemd $major): $answer"
  if [[ "$major" =~ ^[0-9]+$ ]] && ((major >= 260)); then
    [[ "$answer" == *'"inhibited"'* || "$answer" == *inhibitor-blocked* ]] || fail "systemd $major's CanPowerOff does not report the block: $answer"
  fi
}
_block_held() { ct_exec systemd-inhibit --list --mode=block 2>/dev/null | grep -q backup-agent; }
# The action record of the refused PowerOff carries logind's error name, as this systemd gives
# it (258 and later BlockedByInhibitorLock, 257 AccessDenied, older InteractiveAuthorization-
# Required), and the holder from ListInhibitors: the journal entry (MSG_ACTION_FAILED with
# NTHD_LOGIND_ERROR and NTHD_BLOCKED_BY) and the status file's last action.
_refusal_recorded() {
  local major want entry status
  major="$(sed -E 's/^s "([0-9]+).*/\1/' <<<"$1")"
  if ((major >= 258)); then want=org.freedesktop.login1.BlockedByInhibitorLock
  elif ((major == 257)); then want=org.freedesktop.DBus.Error.AccessDenied
  else want=org.freedesktop.DBus.Error.InteractiveAuthorizationRequired; fi
  step "the action record names logind's error ($want) and the holder"
  entry="$(journal_json "$MSG_ACTION_FAILED" | hjq -sc '[.[] | select(.NTHD_ACTION == "poweroff")] | last // empty')"
  [[ -n "$entry" ]] || fail "no journal entry MESSAGE_ID=$MSG_ACTION_FAILED for the refused PowerOff"
  log "journal action: $(hjq -r '"NTHD_LOGIND_ERROR=\(.NTHD_LOGIND_ERROR) NTHD_BLOCKED_BY=\(.NTHD_BLOCKED_BY)"' <<<"$entry")"
  [[ "$(hjq -r .NTHD_LOGIND_ERROR <<<"$entry")" == "$want" ]] || fail "the journal's action record does not carry $want: $entry"
  [[ "$(hjq -r .NTHD_BLOCKED_BY <<<"$entry")" == "backup-agent (why: nightly backup, pid "* ]] \
    || fail "the journal's action record does not name the holder: $entry"
  wait_until 5 _status_names_the_refusal "$want" \
    || fail "the status file's last action does not carry $want and the holder: $(ct_exec jq -c '.actions[-1]' /run/nthd/status.json 2>&1)"
  status="$(ct_exec jq -c '.actions[-1] | {logind_error, blocked_by}' /run/nthd/status.json)"
  log "status file: $status"
}
_status_names_the_refusal() {
  ct_exec jq -e --arg e "$1" '.actions[-1] | .logind_error == $e and .blocked_by[0].who == "backup-agent"
    and .blocked_by[0].why == "nightly backup" and .blocked_by[0].mode == "block" and .blocked_by[0].pid > 0' \
    /run/nthd/status.json >/dev/null 2>&1
}

# --- Real-system faults: logind or polkitd restarted, the package upgraded, while nthd is
# idle or waits for a deferred action.  An AWS scheduled event `instance-stop` is deferred to
# the last safe moment: NotBefore - logind's InhibitDelayMaxSec (the drain budget) - the
# safety margin.  Short values keep it quick: delay 10 s, margin 2 s, NotBefore 28 s ahead,
# so nthd acts about 16 s after the notice.

DEFER_DELAY=10   # InhibitDelayMaxSec for these scenarios (> the 5 s drain)
DEFER_MARGIN=2   # NTHD_SAFETY_MARGIN
DEFER_AHEAD=28   # NotBefore, seconds after the notice
DEFER_AT_MS=""   # when nthd must act (epoch ms), set by set_scheduled_stop

# Boot a node whose nthd polls scheduled events every second.
# shellcheck disable=SC2120  # setup_node's options may be passed on
setup_deferred_node() {
  E2E_INHIBIT_DELAY=$DEFER_DELAY setup_node --env NTHD_SLOW_POLL_INTERVAL=1s --env "NTHD_SAFETY_MARGIN=${DEFER_MARGIN}s" "$@"
}

# List an `instance-stop` scheduled event with NotBefore DEFER_AHEAD s from now (whole
# seconds, as AWS gives it), in the format of the EC2 metadata service.
set_scheduled_stop() {
  local nb id="instance-event-e2e$RANDOM"
  nb=$(( $(date +%s) + DEFER_AHEAD ))
  DEFER_AT_MS=$(( (nb - DEFER_DELAY - DEFER_MARGIN) * 1000 ))
  set_notice "$AWS_SCHEDULED" "[{\"NotBefore\":\"$(date -u -d "@$nb" '+%d %b %Y %H:%M:%S GMT')\",\"Code\":\"instance-stop\",\"EventId\":\"$id\",\"State\":\"active\",\"Description\":\"The instance is scheduled for stop\",\"NotBeforeDeadline\":\"$(date -u -d "@$((nb + 86400))" '+%d %b %Y %H:%M:%S GMT')\"}]"
  log "instance-stop $id, NotBefore $(date -u -d "@$nb" +%T): nthd must act at $(date -u -d "@$((DEFER_AT_MS / 1000))" +%T) (NotBefore - ${DEFER_DELAY}s - ${DEFER_MARGIN}s)"
}


# Wait for the notice to be announced (and not acted on), with PrepareForShutdown not yet seen.
expect_deferred() {
  wait_until 10 _deferred_announced || fail "nthd did not announce the scheduled stop within 10 s"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd acted at once on a deferred scheduled stop"
  ! kubelet_event_ms prepare >/dev/null || fail "PrepareForShutdown before the deferred time"
  log "announced and deferred: $(ct_journal -u nthd | grep -F 'last safe moment' | tail -n 1 | cut -c1-300)"
}

# The deferred action fired ONCE, at its time: PrepareForShutdown not before DEFER_AT_MS
# (0.3 s of clock slack) and within 2.5 s after it; then power-off through the lock; exactly
# one action entry in nthd's journal, one PrepareForShutdown at the stand-in, one "power off
# now" from logind.
expect_deferred_fired_once() {
  local prep late n
  NOTICE_MS="$DEFER_AT_MS"   # times below are relative to the deferred moment
  expect_poweroff_through_lock $(( (DEFER_AT_MS - $(now_ms)) / 1000 + 10 ))
  prep="$(kubelet_event_ms prepare)"; late=$((prep - DEFER_AT_MS))
  (( late >= -300 )) || fail "PrepareForShutdown $(fmt_ms $((-late))) BEFORE the deferred time"
  (( late <= 2500 )) || fail "PrepareForShutdown $(fmt_ms "$late") after the deferred time"
  n="$(journal_json "$MSG_ACTION" | grep -c . || true)"
  ((n == 1)) || fail "expected exactly one action entry from nthd, the journal has $n"
  n="$(grep -c '"event"[[:space:]]*:[[:space:]]*"prepare"' "$SDIR/kubelet.jsonl" || true)"
  ((n == 1)) || fail "the stand-in saw PrepareForShutdown $n times"
  n="$(journalctl -D "$SDIR/journal" -q --no-pager -u systemd-logind -g 'system will power ?off now' 2>/dev/null | grep -c . || true)"
  # logind 247 (Debian 11) does not log "The system will power off now!": count its
  # "System is powering down." instead, which every release logs once per shutdown.
  ((n > 0)) || n="$(journalctl -D "$SDIR/journal" -q --no-pager -u systemd-logind -g 'System is powering down' 2>/dev/null | grep -c . || true)"
  ((n == 1)) || fail "logind announced the power-off $n times"
  timing "fired $(fmt_ms "$late") after its time, once"
}

# Restart UNIT with systemctl (systemd stops only its own processes: a neighbour's
# same-named unit shares the cgroup directory but is not touched, see README) and wait for
# the new main process.
restart_unit() {
  local unit="$1" pid0 pid1 t0
  pid0="$(ct_exec systemctl show -p MainPID --value "$unit")"
  t0="$(now_ms)"
  ct_exec systemctl restart "$unit" || fail "systemctl restart $unit"
  pid1="$(ct_exec systemctl show -p MainPID --value "$unit")"
  [[ "$pid1" != 0 && "$pid1" != "$pid0" ]] || fail "$unit has no new main process after the restart ($pid0 -> $pid1)"
  log "$unit restarted in $(fmt_ms $(( $(now_ms) - t0 ))): MainPID $pid0 -> $pid1"
}

# After a logind restart, logind must still list the stand-in's delay lock (logind keeps
# inhibitor fds in systemd's fd store) and the raised InhibitDelayMaxSec (the drop-in).
expect_logind_state_kept() {
  wait_until 5 _logind_delay_is "$DEFER_DELAY" || fail "after its restart logind's InhibitDelayMaxUSec is not ${DEFER_DELAY}s"
  [[ "$(logind_delay_locks)" -ge 1 ]] || fail "after its restart logind lists no delay lock: the stand-in's inhibitor is gone"
}

scen_logind_restart() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY
  setup_deferred_node
  step "restart systemd-logind while nthd is idle"
  restart_unit systemd-logind
  expect_logind_state_kept
  sleep 2; expect_nthd_active
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "restart systemd-logind while the action waits"
  restart_unit systemd-logind
  expect_logind_state_kept
  expect_nthd_active
  expect_deferred_fired_once
}

scen_polkitd_restart() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY
  setup_deferred_node
  # polkitd is bus-activated; make sure it runs (CanPowerOff asks it) before restarting it.
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "CanPowerOff as nthd: $(logind_as nthd CanPowerOff)"
  step "restart polkit while nthd is idle"
  restart_unit polkit
  expect_nthd_active
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "restart polkit while the action waits"
  restart_unit polkit
  expect_nthd_active
  expect_deferred_fired_once
}

# Repack the package under test with its version bumped (dpkg-deb -R / -b): a newer build
# of the same source, as an upgrade brings it.  Prints the new file.
repack_bumped_deb() {
  local deb="$1" out="$2" v
  rm -rf "$out.d"; dpkg-deb -R "$deb" "$out.d" || return 1
  v="$(sed -n 's/^Version: //p' "$out.d/DEBIAN/control")"
  sed -i "s/^Version: .*/Version: ${v}+e2e1/" "$out.d/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip -b "$out.d" "$out" >/dev/null || return 1
  rm -rf "$out.d"
}

# shellcheck disable=SC2034  # the local E2E_INHIBIT_DELAY is read by lib.sh's logind_set_inhibit_delay
scen_upgrade_while_deferred() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY v0 v1 pid0 pid1 in
  setup_deferred_node
  repack_bumped_deb "$(nthd_deb_path)" "$SDIR/nthd-bumped.deb" || fail "could not repack the .deb with a bumped version"
  in="$(ct_put "$SDIR/nthd-bumped.deb" nthd-bumped.deb)"
  v0="$(ct_exec dpkg-query -W -f '${Version}' nthd)"
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "dpkg -i a newer build while the action waits"
  pid0="$(nthd_main_pid)"
  ct_exec dpkg -i "$in" >"$SDIR/dpkg-upgrade.log" 2>&1 || { cat "$SDIR/dpkg-upgrade.log" >&2; fail "dpkg -i of the newer build failed"; }
  v1="$(ct_exec dpkg-query -W -f '${Version}' nthd)"
  wait_until 10 nthd_active || fail "nthd not active after the upgrade"
  pid1="$(nthd_main_pid)"
  [[ "$v1" != "$v0" ]] || fail "the package version did not change ($v0)"
  [[ "$pid1" != "$pid0" ]] || fail "the upgrade did not restart nthd (MainPID $pid0)"
  log "upgraded $v0 -> $v1; nthd MainPID $pid0 -> $pid1"
  timing "upgraded at $(fmt_ms $(( $(now_ms) - DEFER_AT_MS ))) to the deferred time"
  (( $(now_ms) < DEFER_AT_MS - 2000 )) || fail "the upgrade ended too close to the deferred time to prove anything"
  expect_deferred_fired_once
  # The action came from the new process: the action entry's _PID is the upgraded nthd's.
  [[ "$(journal_json "$MSG_ACTION" | hjq -r ._PID)" == "$pid1" ]] || fail "the action entry is not from the upgraded nthd (pid $pid1)"
}

# --- Neighbour isolation: another container, booted from the same tree and not managed by
# the scenario, runs the same units (nthd, fake-kubelet, mock-imds, logind, polkit) under the
# same machine-wide names (this host's PID 1 is not systemd; each container has a cgroup v2
# subtree of its own, _ct_own_cgroup).  spot-terminate, check and sighup-and-restart run next
# to it; afterwards it must be up and untouched: the same init and main PIDs, no restarts, no
# signal seen by its logind or nthd.

scen_neighbour() {
  local top="$SDIR" before after part
  step "boot the neighbour (systemd-nspawn -b of $ROOTFS, its own name and overlay)"
  nb_boot "$top/neighbour" || fail "the neighbour container did not boot"
  trap 'ct_cleanup; nb_stop' EXIT
  before="$(nb_snapshot)" || fail "cannot read the neighbour's state"
  log "neighbour before: $before"
  for part in spot-terminate check sighup-and-restart; do
    step "$part next to the neighbour"
    SDIR="$top/$part"; mkdir -p "$SDIR"
    "scen_${part//-/_}"
    ct_cleanup
    after="$(nb_snapshot)" || fail "the neighbour is gone after $part"
    [[ "$after" == "$before" ]] || fail "the neighbour changed during $part: before $before; after $after"
    nb_untouched || fail "the neighbour's logind or nthd saw a signal during $part: $(nb_signal_lines | head -n 3)"
    log "neighbour untouched after $part"
  done
  SDIR="$top"
  timing "neighbour up and untouched through spot-terminate, check, sighup-and-restart"
}

# --- A throttling metadata service (docs/clouds.md, "When a read fails"): the spot path answers
# 429 with Retry-After: 3, then 429 with Retry-After: 120, then 404 (no notice). The read after
# the first comes no sooner than 3 s and no later than the spot source's ceiling (five 1 s
# intervals: 5 s); the one after the second, which asked for more than the ceiling, at the
# ceiling. Reads then go back to every second, and a spot notice is drained and powered off.

scen_retry_after() {
  setup_node
  local since reads a b c
  step "429 Retry-After: 3, 429 Retry-After: 120, then 404 on $AWS_SPOT"
  since="$(now_ms)"
  mock_route "$AWS_SPOT" '{"sequence":[
    {"status":429,"body":"throttled","headers":{"Retry-After":"3"}},
    {"status":429,"body":"throttled","headers":{"Retry-After":"120"}},
    {"status":404,"body":"<?xml version=\"1.0\"?><title>404 - Not Found</title>"}]}' \
    || fail "could not script the spot path"
  sleep 14
  reads="$(mock_log | hjq -c --arg p "$AWS_SPOT" --argjson s "$since" \
             '[.[] | select(.path == $p and .t_ms >= $s) | [.t_ms, .status]]')"
  printf '%s\n' "$reads" >"$SDIR/spot-reads.json"
  a="$(hjq '[.[] | select(.[1] == 429)][0][0]' <<<"$reads")"
  b="$(hjq '[.[] | select(.[1] == 429)][1][0]' <<<"$reads")"
  c="$(hjq '[.[] | select(.[1] == 404)][0][0]' <<<"$reads")"
  [[ "$a" =~ ^[0-9]+$ && "$b" =~ ^[0-9]+$ && "$c" =~ ^[0-9]+$ ]] \
    || fail "not two 429s and a 404 on the spot path within 14 s: $reads"
  ((b - a >= 2900 && b - a <= 5500)) || fail "asked for 3 s, read again after $(fmt_ms $((b - a))): $reads"
  ((c - b >= 4900 && c - b <= 5600)) || fail "asked for 120 s, read again after $(fmt_ms $((c - b))), not at the 5 s ceiling: $reads"
  (( $(hjq --argjson c "$c" '[.[] | select(.[0] > $c)] | length' <<<"$reads") >= 3 )) \
    || fail "reads did not go back to every second after the 404: $reads"
  timing "Retry-After 3 -> $(fmt_ms $((b - a))), Retry-After 120 -> $(fmt_ms $((c - b)))"
  expect_nthd_active
  step "a spot notice: drained and powered off"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}

# --- A FIFO where an operator file belongs: NTHD_WEBHOOK_HEADERS_FILE names a named pipe that
# nobody writes. nthd never waits for a writer: it is up (READY=1) within 5 s of its start, the
# journal says why the webhook is off, and a spot notice is drained and powered off.

_headers_fifo() {
  ct_sh 'mkdir -p /etc/nthd && mkfifo -m 0640 /etc/nthd/webhook-headers &&
         chown root:nthd /etc/nthd/webhook-headers' || fail "could not make the FIFO"
}
scen_headers_fifo() {
  setup_node --pre _headers_fifo --env "NTHD_WEBHOOK=$WEBHOOK_URL" \
    --env NTHD_WEBHOOK_HEADERS_FILE=/etc/nthd/webhook-headers
  local up
  up="$(ct_exec systemctl show -p InactiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic nthd |
        awk -F= '/^Inactive/ { s = $2 } /^Active/ { a = $2 } END { print int((a - s) / 1000) }')"
  ((up >= 0 && up <= 5000)) || fail "nthd took $up ms from start to READY=1 with a FIFO as headers file"
  expect_nthd_active
  wait_until 5 _nthd_logged "/etc/nthd/webhook-headers is a FIFO (named pipe)" \
    || fail "the journal does not name the FIFO: $(ct_journal -u nthd | tail -n 5)"
  _nthd_logged "webhook" || fail "the journal does not say the webhook is off"
  timing "up in $(fmt_ms "$up") with a FIFO as headers file"
  step "a spot notice: drained and powered off"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}

# --- A bad NTHD_DRY_RUN (docs/configuration.md, "When a setting is wrong"): `NTHD_DRY_RUN=ture`
# in /etc/default/nthd. nthd stays up and takes the choice that cannot power off where the admin
# may have meant a dry run: it runs dry, says so in all four reports, and a spot notice is
# read, decided and logged as the action it would take, on time, with no shutdown.

scen_bad_dry_run() {
  setup_node
  local n0 npd code out
  n0="$(nthd_restarts)"
  step "NTHD_DRY_RUN=ture in /etc/default/nthd"
  _restarted_with_settings "$n0" 'NTHD_PROVIDER=aws\nNTHD_IMDS_ENDPOINT=%s\nNTHD_DRY_RUN=ture\n'
  _nthd_logged 'NTHD_DRY_RUN="ture" cannot be used' \
    || fail "the journal does not name the bad setting: $(ct_journal -u nthd | tail -n 5)"
  _nthd_logged "dry run: nthd will not call logind" || fail "nthd does not say it runs dry"
  hjq -e '[.degraded[].setting] == ["NTHD_DRY_RUN"]' <<<"$(ct_exec cat "$NTHD_STATUS")" >/dev/null \
    || fail "the status file does not list NTHD_DRY_RUN as degraded: $(ct_exec cat "$NTHD_STATUS")"
  npd="$(ct_exec runuser -u nobody -- /usr/libexec/nthd/nthd status --npd)"
  code=$?
  (( code == 2 )) || fail "NPD plugin exit $code, not 2: $npd"
  [[ "$npd" == "unknown: degraded: NTHD_DRY_RUN fell back"* ]] || fail "NPD line does not name NTHD_DRY_RUN: $npd"
  out="$(nthd_check_as_nthd --json)" && fail "nthd check passed with NTHD_DRY_RUN=ture"
  hjq -e '[.checks[] | select(.name == "settings" and .status == "fail" and (.fix | test("NTHD_DRY_RUN")))] | length == 1' \
    <<<"$out" >/dev/null || fail "nthd check does not fail 'settings' naming NTHD_DRY_RUN: $(hjq -c '[.checks[] | select(.name == "settings")]' <<<"$out")"
  step "a spot notice: read and logged on time as the power-off it would be, no shutdown"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_until 3 _nthd_logged "dry run: would call org.freedesktop.login1.Manager.PowerOff(false)" \
    || fail "the notice was not logged as the dry run's power-off within 3 s"
  timing "dry-run action logged $(fmt_ms $(( $(now_ms) - NOTICE_MS ))) after the notice"
  expect_no_poweroff 8
  expect_nthd_active
}
