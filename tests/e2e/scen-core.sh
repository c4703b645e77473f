# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs run inside the container
# The power-off path's scenarios, sourced by run.sh: a spot notice drained and powered off
# through the kubelet stand-in's lock as user nthd; the package's default actions; the polkit
# grant removed and put back, scoped to power-off only; a metadata service that comes up late;
# and `nthd check` as user nthd, passing, then failing on the removed grant (remove_grant).

# The nthd under test is of the tree's architecture (ELF e_machine of /usr/bin/nthd: 0x3e
# x86_64, 0xb7 aarch64); on a foreign tree it runs through qemu-user (binfmt_misc).
expect_nthd_arch() {
  local want m
  case "$E2E_NTHD_ARCH" in amd64) want=003e;; arm64) want=00b7;; *) return 0;; esac
  m="$(ct_exec od -An -tx2 -j18 -N2 /usr/bin/nthd | tr -d ' ')"
  [[ "$m" == "$want" ]] || fail "/usr/bin/nthd has ELF machine $m, not $want ($E2E_NTHD_ARCH)"
  log "/usr/bin/nthd is $E2E_NTHD_ARCH (e_machine 0x${m#00})"
  if [[ "$E2E_NTHD_ARCH" != "$E2E_HOST_ARCH" ]]; then
    # binfmt_misc (flag P): the running process is the qemu interpreter with nthd's path.
    local cmd; cmd="$(ct_exec cat "/proc/$(nthd_main_pid)/cmdline" | tr '\0' ' ')"
    [[ "$cmd" == *qemu*" /usr/bin/nthd "* ]] || fail "nthd does not run under qemu-user: $cmd"
    log "nthd runs emulated: $cmd"
  fi
}

scen_spot_terminate() {
  setup_node
  local user; user="$(nthd_user)" || fail "cannot determine nthd's user"
  [[ "$user" == nthd ]] || fail "nthd runs as '$user', not 'nthd'"
  log "nthd main pid $(nthd_main_pid) runs as $user; $(ct_exec /usr/bin/nthd --version 2>&1 | head -n1)"
  log "booted: $(ct_exec systemctl --version | head -n1); polkit $(polkit_version); $(ct_exec dpkg-query -W -f '${Package} ${Version} ${Architecture}' libc6 2>/dev/null)"
  expect_nthd_arch
  log "cgroup v2, IPAddressDeny= enforced (ct_boot's probe): nthd.service's IP allow-list is in effect"
  step "spot terminate notice"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  step "journald: MESSAGE_ID and NTHD_* fields"
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
}

scen_no_action_defaults() {
  # Rebalance is a "slow" source (default every 20s): poll it every 2s here
  # so nthd really sees the recommendation inside the 15s window.  Only the
  # poll interval changes; the actions are the package defaults.
  setup_node --env NTHD_SLOW_POLL_INTERVAL=2s
  step "spot hibernate + rebalance recommendation"
  local spot reb
  set_route "$AWS_REBALANCE" "{\"noticeTime\":\"$(iso_in 0)\"}" || fail "set rebalance route"
  set_notice "$AWS_SPOT" "{\"action\":\"hibernate\",\"time\":\"$(iso_in 120)\"}"
  expect_no_poweroff 15
  expect_nthd_active
  spot="$(mock_requests_since "$AWS_SPOT" "$NOTICE_MS")"
  reb="$(mock_requests_since "$AWS_REBALANCE" "$NOTICE_MS")"
  log "nthd fetched $AWS_SPOT $spot times and $AWS_REBALANCE $reb times during the window"
  # Without these the no-action result would prove nothing.
  ((spot > 0)) || fail "nthd never fetched $AWS_SPOT during the window"
  ((reb > 0)) || fail "nthd never fetched $AWS_REBALANCE during the window"
  timing "window 15s, $spot spot + $reb rebalance polls"
  save_mock_state
}

# The grant nthd's package ships: lib.sh NTHD_RULE (polkit >= 0.106) and NTHD_PKLA (0.105);
# polkit_grant_file says which one the booted release's polkit reads.
# Remove the grant polkit reads here (the JS rule, or the .pkla on polkit 0.105), saved to
# /e2e/grant.saved, and wait until polkitd has noticed: CanPowerOff as nthd flips from "yes"
# to "challenge"/"no".  polkitd watches rules.d (JS) and the local authority's directories
# (.pkla) with inotify and reloads.  Sets GRANT to the file.
remove_grant() {
  GRANT="$(polkit_grant_file)" || fail "cannot tell polkit's version (pkaction --version)"
  log "polkit $(polkit_version): the grant it reads is $GRANT"
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "nthd cannot power off even with $GRANT: $(logind_as nthd CanPowerOff)"
  step "remove $GRANT"
  ct_sh 'cp -a "$1" /e2e/grant.saved && rm -f "$1"' "$GRANT" || fail "could not remove $GRANT"
  local t0; t0="$(now_ms)"
  wait_until 5 _nthd_can_poweroff_is_not yes || fail "polkitd did not pick up the removal of $GRANT: $(logind_as nthd CanPowerOff)"
  log "polkitd reloaded after $(fmt_ms $(( $(now_ms) - t0 ))): CanPowerOff as nthd -> $(logind_as nthd CanPowerOff)"
}
# Put it back atomically (temp name polkit does not read + rename): polkitd reloads on every
# inotify event, and a plain cp makes polkit >= 0.106 parse a half-written file first
# ("Error loading script"), which would muddy the journal.
restore_grant() {
  ct_sh 'cp -a /e2e/grant.saved "$1.e2e-tmp" && mv -f "$1.e2e-tmp" "$1"' "$GRANT" \
    || fail "could not restore $GRANT"
}

scen_polkit_denied_then_restored() {
  setup_node
  # The package ships both files; only one of them is read by this polkit.  Removing the
  # other one must change nothing (polkitd reloads within ~0.1 s; 1 s is ample).
  local other
  if [[ "$(polkit_grant_file)" == "$NTHD_PKLA" ]]; then other="$NTHD_RULE"; else other="$NTHD_PKLA"; fi
  step "remove $other: this polkit does not read it"
  ct_sh 'mv -f "$1" /e2e/other.saved' "$other" || fail "could not remove $other"
  sleep 1
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "without $other, CanPowerOff as nthd is $(logind_as nthd CanPowerOff): polkit $(polkit_version) reads it after all"
  ct_sh 'cp -a /e2e/other.saved "$1"' "$other" || fail "could not put $other back"
  remove_grant
  step "spot terminate notice while denied"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_no_poweroff 10
  # (grep -c, not -q: with pipefail an early-exiting grep -q can SIGPIPE
  # journalctl and fail the pipeline although the text was found)
  (( $(ct_journal -u nthd | grep -cF org.freedesktop.login1.power-off) > 0 )) \
    || fail "nthd's journal does not name the polkit action org.freedesktop.login1.power-off"
  step "restore $GRANT"
  local t_restore; t_restore="$(now_ms)"
  restore_grant
  NOTICE_MS="$t_restore"  # measure from the restore from here on
  expect_poweroff_through_lock 15
}
_alice_has_user_session() {
  local id
  for id in $(ct_exec loginctl list-sessions --no-legend 2>/dev/null | awk '$3 == "alice" {print $1}'); do
    [[ "$(ct_exec loginctl show-session -p Class --value "$id")" == user ]] && return 0
  done
  return 1
}
_nthd_can_poweroff_is_not() { [[ "$(logind_as nthd CanPowerOff)" != "s \"$1\"" ]]; }

scen_scoped_grant() {
  setup_node
  ct_exec useradd -M -s /bin/sh alice || fail "useradd alice"
  step "alice: PowerOff must be refused"
  local out
  if out="$(logind_as alice PowerOff b false)"; then fail "alice was allowed to power off: $out"; fi
  log "alice PowerOff -> $out"
  grep -qiE 'access denied|interactive authentication required|not authorized|permission denied' <<<"$out" \
    || fail "unexpected error for alice: $out"
  step "nthd: CanPowerOff yes, CanReboot not yes"
  out="$(logind_as nthd CanPowerOff)"; log "nthd CanPowerOff -> $out"
  [[ "$out" == 's "yes"' ]] || fail "CanPowerOff as nthd: $out"
  out="$(logind_as nthd CanReboot)"; log "nthd CanReboot -> $out"
  [[ "$out" == s\ * && "$out" != 's "yes"' ]] || fail "CanReboot as nthd: $out (grant must be scoped to power-off)"
  step "nthd: Reboot must be refused"
  if out="$(logind_as nthd Reboot b false)"; then fail "nthd was allowed to reboot: $out"; fi
  log "nthd Reboot -> $out"
  grep -qiE 'access denied|interactive authentication required|not authorized|permission denied' <<<"$out" \
    || fail "unexpected error for nthd Reboot: $out"
  out="$(logind_as alice CanPowerOff)"; log "alice CanPowerOff -> $out"
  [[ "$out" != 's "yes"' ]] || fail "alice CanPowerOff: $out"
  # With another user logged in (an admin on the node), logind checks
  # org.freedesktop.login1.power-off-multiple-sessions instead; the grant
  # must cover that too.  Class=user matters: a tty-less PAM session would
  # be class "background", which logind does not count.
  step "alice logged in: nthd CanPowerOff still yes (power-off-multiple-sessions)"
  ct_exec systemd-run --quiet --unit=alice-session -p User=alice -p PAMName=login \
    -p Environment=XDG_SESSION_CLASS=user -p Environment=XDG_SESSION_TYPE=tty sleep 600 \
    || fail "could not open a session for alice"
  wait_until 5 _alice_has_user_session || fail "alice's session did not appear in logind: $(ct_exec loginctl list-sessions --no-legend 2>&1)"
  out="$(logind_as nthd CanPowerOff)"; log "nthd CanPowerOff with alice's session open -> $out"
  [[ "$out" == 's "yes"' ]] || fail "CanPowerOff as nthd with another user's session: $out (power-off-multiple-sessions not granted?)"
  expect_no_poweroff 2
  timing "alice denied, nthd power-off only"
}

scen_imds_late() {
  setup_node --no-mock
  local pid0 r0
  pid0="$(nthd_main_pid)"; r0="$(nthd_restarts)"
  step "IMDS unreachable for 10s"
  sleep 10
  expect_nthd_active
  [[ "$(nthd_restarts)" == "$r0" && "$(nthd_main_pid)" == "$pid0" ]] \
    || fail "nthd restarted while IMDS was unreachable (NRestarts $r0 -> $(nthd_restarts), pid $pid0 -> $(nthd_main_pid))"
  timing "survived 10s without IMDS (NRestarts $r0)"
  step "start mock with a terminate notice"
  mock_start || fail "mock IMDS did not start"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 15
}

# --- nthd check, inside the node, as user nthd

# nthd check as user nthd, run by hand: it reads /etc/default/nthd itself, as
# the unit's EnvironmentFile= gives it to the daemon.
nthd_check_as_nthd() {
  ct_exec runuser -u nthd -- /usr/bin/nthd check "$@" </dev/null
}

scen_check() {
  setup_node
  local out rc bad name t0 took err
  step "nthd check --json as nthd (rule in place)"
  t0="$(now_ms)"
  out="$(nthd_check_as_nthd --json 2>"$SDIR/check-stderr.txt")" && rc=0 || rc=$?
  err="$(cat "$SDIR/check-stderr.txt")"
  [[ "$err" == *"settings from /etc/default/nthd ("*"values); the environment and flags override them"* ]] \
    || fail "nthd check did not say it read /etc/default/nthd: $err"
  [[ "$(hjq -r '[.checks[] | select(.name == "cloud") | .value] | first' <<<"$out")" == *"set by NTHD_PROVIDER"* ]] \
    || fail "nthd check run by hand did not take NTHD_PROVIDER from /etc/default/nthd"
  log "nthd check read its settings itself: $err"
  took=$(( $(now_ms) - t0 ))
  printf '%s\n' "$out" >"$SDIR/check-pass.json"
  ((rc == 0)) || fail "nthd check --json exited $rc with everything in place: $(hjq -c '[.checks[] | select(.status != "pass")]' <<<"$out" 2>/dev/null)"
  [[ "$(hjq -r .ok <<<"$out")" == true ]] || fail "nthd check --json: ok is not true"
  bad="$(hjq -r '[.checks[] | select(.required and .status != "pass") | "\(.name)=\(.status) (\(.value))"] | join("; ")' <<<"$out")"
  [[ -z "$bad" ]] || fail "required checks not passing: $bad"
  for name in "cloud" "metadata service" "system bus and logind" "logind permits power-off" \
              "systemd version" "kubelet inhibitor lock" "user nthd" "nthd.service"; do
    [[ "$(hjq -r --arg n "$name" '[.checks[] | select(.name == $n) | .status] | first // "missing"' <<<"$out")" == pass ]] \
      || fail "check '$name' is not pass: $(hjq -c --arg n "$name" '[.checks[] | select(.name == $n)]' <<<"$out")"
  done
  out="$(nthd_check_as_nthd)" || fail "nthd check (human) failed although --json passed"
  printf '%s\n' "$out" >"$SDIR/check-pass.txt"
  log "nthd check as nthd, everything in place:"
  indent <<<"$out" >&2
  remove_grant
  step "nthd check --json as nthd (grant removed)"
  out="$(nthd_check_as_nthd --json)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/check-fail.json"
  ((rc != 0)) || fail "nthd check exited 0 without the polkit rule"
  [[ "$(hjq -r .ok <<<"$out")" == false ]] || fail "nthd check --json: ok is not false without the rule"
  local pk; pk="$(hjq -c '[.checks[] | select(.name == "logind permits power-off")] | first // empty' <<<"$out")"
  log "without the rule: $pk"
  [[ "$(hjq -r .status <<<"$pk")" == fail ]] || fail "'logind permits power-off' is not fail without the rule: $pk"
  # The fix names both files, so it is right on every polkit.
  hjq -e --arg g "$(basename "$GRANT")" '.fix | test("polkit rule") and contains($g)' <<<"$pk" >/dev/null \
    || fail "the fix for 'logind permits power-off' does not point at $GRANT: $(hjq -r .fix <<<"$pk")"
  bad="$(hjq -r '[.checks[] | select(.required and .status == "fail") | .name] | join(",")' <<<"$out")"
  [[ "$bad" == "logind permits power-off" ]] || fail "failing required checks without the rule: '$bad' (expected only logind permits power-off)"
  nthd_check_as_nthd >"$SDIR/check-fail.txt" && fail "nthd check (human) exited 0 without the rule"
  expect_nthd_active
  timing "check --json $(fmt_ms "$took"), pass, then fail on the removed rule"
}
