# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts run inside the container
# Upgrades that never ask, from the real previous release, sourced by run.sh.
#
# The previous release is 0.1.0, the commit in tests/e2e/previous-release; its .deb shipped
# /etc/default/nthd as a dpkg conffile. tests/e2e/previous-release.sh builds it from that
# commit when the scenario first needs it (once, cached under target/previous-release/; a
# second caller waits for the first's build), so no other scenario waits for it.

# The previous release's .deb for the architecture under test (host path).
previous_deb() {
  local dir f
  dir="$(bash "$HERE/previous-release.sh")" || { log "no previous release: tests/e2e/previous-release.sh failed (see above)"; return 1; }
  f="$(compgen -G "$dir/nthd_*_$E2E_NTHD_ARCH.deb" | head -n 1)"
  [[ -n "$f" ]] || { log "no $E2E_NTHD_ARCH .deb in $dir (tests/e2e/previous-release.sh builds the host's architecture)"; return 1; }
  echo "$f"
}

# Run a dpkg or apt-get command in the container with stdin closed, as cloud-init,
# unattended-upgrades or a configuration-management run do: a conffile prompt there reads
# end-of-file and fails.  The output goes to $SDIR/LOGNAME.log; fails on a non-zero status or
# any word of a conffile prompt.
_noninteractive() {
  local logname="$1" out rc; shift
  out="$(ct_exec env DEBIAN_FRONTEND=noninteractive "$@" </dev/null 2>&1)" && rc=0 || rc=$?
  printf '$ %s </dev/null\n%s\n(rc %s)\n' "$*" "$out" "$rc" >"$SDIR/$logname.log"
  ((rc == 0)) || fail "'$*' failed (rc $rc): $(tail -n 5 <<<"$out")"
  [[ "$out" != *"Configuration file"* && "$out" != *"conffile"* ]] || fail "'$*' spoke of a conffile: $out"
}

_installed_version() { ct_exec dpkg-query -W -f '${Version} ${db:Status-Status}' nthd; }

# The admin's settings, byte for byte, and no dpkg leftovers beside them.
SETTINGS_SUM=""
_expect_settings_kept() {
  local sum; sum="$(ct_exec sha256sum /etc/default/nthd | cut -c1-64)" || fail "/etc/default/nthd is gone ($1)"
  [[ "$sum" == "$SETTINGS_SUM" ]] || fail "/etc/default/nthd changed ($1): $(ct_exec cat /etc/default/nthd | head -n 5)"
  ct_exec grep -qx '# edited by the admin' /etc/default/nthd || fail "the admin's edit is gone ($1)"
  [[ -z "$(ct_exec sh -c 'ls -d /etc/default/nthd?* 2>/dev/null')" ]] \
    || fail "leftovers beside /etc/default/nthd ($1): $(ct_exec sh -c 'ls -d /etc/default/nthd?*')"
}

# nthd runs, restarted with the admin's settings: its environment has them (EnvironmentFile=).
_expect_nthd_with_settings() {
  wait_until 10 nthd_active || fail "nthd is not active ($1)"
  wait_until 5 nthd_env_has "NTHD_SAFETY_MARGIN=${DEFER_MARGIN}s" \
    || fail "nthd does not run with the admin's settings ($1): $(ct_exec cat "/proc/$(nthd_main_pid)/environ" | tr '\0' ' ')"
}

# /var/lib/nthd as it is: paths, modes, owners, sizes and checksums.
_state_snapshot() {
  ct_sh 'test -d /var/lib/nthd && find /var/lib/nthd -printf "%p %y %m %u:%g %s\n" | LC_ALL=C sort &&
         find /var/lib/nthd -type f -exec sha256sum {} + | LC_ALL=C sort'
}

# The admin's settings for this scenario: what setup_deferred_node writes, plus their own
# lines.  A scheduled instance-reboot asks for a reboot, which logind refuses (the package
# grants power-off only): that leaves a real record, phase "started", in 0.1.0's state file.
_admin_settings() {
  printf '%s\n' "# edited by the admin" "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" \
    "NTHD_SLOW_POLL_INTERVAL=1s" "NTHD_SAFETY_MARGIN=${DEFER_MARGIN}s" "NTHD_ACTION_SCHEDULED_REBOOT=reboot"
}
_state_has_record() { ct_exec jq -e '.records | length > 0' /var/lib/nthd/state.json >/dev/null 2>&1; }
# The daemon's status lists the record with this notice id as a reboot "started".
_status_lists_record() {
  local j; j="$(ct_exec nthd status --json 2>/dev/null)" || true
  hjq -e --arg id "$1" '.actions[] | select(.notice_id == $id and .action == "reboot" and .result == "started")' <<<"$j" >/dev/null 2>&1
}
_configure_as_admin() {
  # As the settings file says: edit it, then systemctl restart nthd.
  ct_sh 'printf "%s\n" "$1" >/etc/default/nthd && systemctl restart nthd' "$(_admin_settings)" || fail "could not configure nthd"
  SETTINGS_SUM="$(ct_exec sha256sum /etc/default/nthd | cut -c1-64)"
  _expect_nthd_with_settings "configured"
}

# Upgrade, downgrade, upgrade again and purge, each non-interactive; then a fresh install.
_upgrade_round_trip() {
  local old="$1" new="$2" v_old="$3" v_new="$4"
  step "upgrade to $v_new with apt-get install -y of the file, stdin closed"
  _noninteractive apt-upgrade apt-get install -y --no-install-recommends "$new"
  [[ "$(_installed_version)" == "$v_new installed" ]] || fail "not upgraded: $(_installed_version)"
  _expect_settings_kept "upgrade to $v_new"
  _expect_nthd_with_settings "upgrade to $v_new"
  ct_exec test -s /usr/share/nthd/default || fail "$v_new has no /usr/share/nthd/default"
  log "upgraded; dpkg now lists: $(ct_exec dpkg-query -W -f '${Conffiles}' nthd | tr -s ' \n' ' ')"

  step "downgrade to $v_old with dpkg -i, stdin closed"
  _noninteractive dpkg-downgrade dpkg -i "$old"
  [[ "$(_installed_version)" == "$v_old installed" ]] || fail "not downgraded: $(_installed_version)"
  _expect_settings_kept "downgrade to $v_old"
  _expect_nthd_with_settings "downgrade to $v_old"

  step "upgrade to $v_new again, then purge: the settings file and the state go"
  _noninteractive dpkg-upgrade-again dpkg -i "$new"
  _expect_settings_kept "second upgrade to $v_new"
  ct_exec test -d /var/lib/nthd || fail "no /var/lib/nthd before the purge"
  _noninteractive dpkg-purge dpkg --purge nthd
  ! ct_exec test -e /etc/default/nthd || fail "purge left /etc/default/nthd behind"
  ! ct_exec test -e /var/lib/nthd || fail "purge left /var/lib/nthd behind"
  [[ -z "$(ct_exec dpkg-query -W -f '${db:Status-Status}' nthd 2>/dev/null)" || "$(ct_exec dpkg-query -W -f '${db:Status-Status}' nthd 2>/dev/null)" == not-installed ]] \
    || fail "dpkg still knows nthd after the purge: $(ct_exec dpkg-query -W -f '${db:Status-Status}' nthd)"
  step "a fresh install of $v_new writes the template, 0644, no conffile; purge again"
  _noninteractive dpkg-fresh dpkg -i "$new"
  ct_exec cmp -s /usr/share/nthd/default /etc/default/nthd || fail "a fresh install did not write the template"
  [[ "$(ct_exec stat -c %a /etc/default/nthd)" == 644 ]] || fail "/etc/default/nthd is not 0644"
  [[ -z "$(ct_exec dpkg-query -W -f '${Conffiles}' nthd)" ]] || fail "the package under test ships a conffile"
  _noninteractive dpkg-purge-fresh dpkg --purge nthd
}

# The previous release with a record in its state and a deferred stop, upgraded while the
# action waits: settings and state kept, the action carried out once, by the new nthd.
_upgrade_while_deferred() {
  local old="$1" new="$2" v_old="$3" v_new="$4" pid0 pid1 state0 state1 record
  step "$v_old again, configured by its admin; a reboot logind refuses leaves a record in its state"
  _noninteractive dpkg-previous dpkg -i "$old"
  _configure_as_admin
  # NotBefore 5 s ahead: less than the drain budget, so nthd acts at once.
  set_notice "$AWS_SCHEDULED" "[{\"NotBefore\":\"$(date -u -d '+5 sec' '+%d %b %Y %H:%M:%S GMT')\",\"Code\":\"instance-reboot\",\"EventId\":\"instance-event-e2ereboot$RANDOM\",\"State\":\"active\",\"Description\":\"The instance is scheduled for reboot\"}]"
  wait_until 15 _state_has_record || fail "$v_old wrote no record for the refused reboot: $(ct_exec cat /var/lib/nthd/state.json 2>&1)"
  del_route "$AWS_SCHEDULED" || fail "could not withdraw the scheduled reboot"
  record="$(ct_exec jq -r '.records[0].id' /var/lib/nthd/state.json)"
  [[ "$(ct_exec jq -r '.records[0] | "\(.action) \(.phase)"' /var/lib/nthd/state.json)" == "reboot started" ]] \
    || fail "$v_old's record is not a started reboot: $(ct_exec cat /var/lib/nthd/state.json)"
  log "$v_old's state: $(ct_exec jq -c '.records' /var/lib/nthd/state.json)"
  step "a scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  state0="$(_state_snapshot)" || fail "no /var/lib/nthd under $v_old"
  pid0="$(nthd_main_pid)"

  step "dpkg -i $v_new while the action waits, stdin closed"
  _noninteractive dpkg-upgrade-deferred dpkg -i "$new"
  [[ "$(_installed_version)" == "$v_new installed" ]] || fail "not upgraded: $(_installed_version)"
  _expect_settings_kept "upgrade while deferred"
  state1="$(_state_snapshot)" || fail "/var/lib/nthd is gone after the upgrade"
  [[ "$state1" == "$state0" ]] || fail "the upgrade changed /var/lib/nthd: $(diff <(echo "$state0") <(echo "$state1") | head -n 10)"
  _expect_nthd_with_settings "upgrade while deferred"
  wait_until 10 _status_lists_record "$record" || fail "the upgraded nthd does not list $v_old's record $record: $(ct_exec nthd status --json 2>&1 | head -c 600)"
  pid1="$(nthd_main_pid)"
  [[ "$pid1" != "$pid0" ]] || fail "the upgrade did not restart nthd (MainPID $pid0)"
  log "upgraded $v_old -> $v_new with the action pending; nthd MainPID $pid0 -> $pid1; /var/lib/nthd unchanged ($(grep -c ' f ' <<<"$state0") files), its record read by $v_new"
  timing "upgraded $(fmt_ms $(( DEFER_AT_MS - $(now_ms) ))) before the deferred time"
  (( $(now_ms) < DEFER_AT_MS - 2000 )) || fail "the upgrade ended too close to the deferred time to prove anything"
  expect_deferred_fired_once
  [[ "$(journal_json "$MSG_ACTION" | hjq -r ._PID)" == "$pid1" ]] || fail "the action entry is not from the upgraded nthd (pid $pid1)"
}

scen_upgrade_configured() {
  local old new v_old v_new
  old="$(previous_deb)" || fail "no package of the previous release"
  v_old="$(dpkg-deb -f "$old" Version)"; v_new="$(dpkg-deb -f "$(nthd_deb_path)" Version)"
  dpkg --compare-versions "$v_new" gt "$v_old" || fail "the package under test ($v_new) is not newer than the previous release ($v_old)"
  log "previous release: $old ($v_old); under test: $(nthd_deb_path) ($v_new)"
  E2E_NTHD_DEB="$old" setup_deferred_node
  old="$(ct_put "$old" nthd-previous.deb)"; new="$(ct_put "$(nthd_deb_path)" nthd-under-test.deb)"
  [[ "$(_installed_version)" == "$v_old installed" ]] || fail "the node does not run $v_old: $(_installed_version)"
  [[ "$(ct_exec dpkg-query -W -f '${Conffiles}' nthd)" == *"/etc/default/nthd"* ]] || fail "$v_old has no conffile /etc/default/nthd"

  step "$v_old configured by its admin through /etc/default/nthd (a dpkg conffile in $v_old)"
  _configure_as_admin

  _upgrade_round_trip "$old" "$new" "$v_old" "$v_new"
  _upgrade_while_deferred "$old" "$new" "$v_old" "$v_new"
}
