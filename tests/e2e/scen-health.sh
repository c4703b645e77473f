# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts run inside the container
# Scenarios of issue "never switched off by an extra, never all clear while blind", sourced by
# run.sh: a webhook setup error degrades and the node is still drained; a daemon that cannot
# read the metadata service is "unknown" to NPD, never "all clear"; the NPD DaemonSet's view of
# /run/nthd survives nthd's restarts.

# journald MESSAGE_IDs (src/extras.rs, src/daemon.rs): stable across releases.
MSG_EXTRA_DISABLED=e7b1c0d24f6a4a5e9c3b8d7f6e5a4b3c
MSG_BLIND=4a2f9e8d1c7b4d6a8e3f0b1c2d9a7e5f
# A secret planted in every webhook setting: it must appear nowhere nthd writes.
PLANTED=e2e-planted-s3cret

# Entries of nthd's journal with MESSAGE_ID $1 at priority err or worse, as text.
nthd_err_with_id() { ct_journal -u nthd -p err "MESSAGE_ID=$1"; }
_err_logged() { nthd_err_with_id "$1" | grep -qF -- "$2"; }

# The headers file a secret rotation left world-readable (0644).
_headers_world_readable() {
  ct_sh 'mkdir -p /etc/nthd && printf "Authorization: Bearer %s\n" "$1" >/etc/nthd/webhook-headers &&
         chmod 0644 /etc/nthd/webhook-headers' "$PLANTED" || fail "could not write the headers file"
}

# No trace of the planted secret in the journal, the status file or nthd check's output.
expect_no_planted_secret() {
  local where
  for where in "journal:$(ct_journal -u nthd)" "status:$(ct_exec cat "$NTHD_STATUS" 2>&1)" \
               "check:$(nthd_check_as_nthd 2>&1)" "help:$(ct_exec /usr/bin/nthd --help 2>&1)"; do
    [[ "$where" != *"$PLANTED"* ]] || fail "the planted secret shows in ${where%%:*}"
  done
  log "the planted secret is in none of: journal, status file, nthd check, --help"
}

scen_extras_degrade() {
  setup_node --pre _headers_world_readable \
    --env "NTHD_WEBHOOK=http://127.0.0.1:9/hooks/$PLANTED" \
    --env NTHD_WEBHOOK_HEADERS_FILE=/etc/nthd/webhook-headers
  ct_put "$HERE/npd-run.py" npd-run.py >/dev/null
  local out
  step "the headers file is 0644: nthd runs on with webhooks disabled (no exit 2)"
  expect_nthd_active
  wait_until 10 _err_logged "$MSG_EXTRA_DISABLED" "extra webhooks disabled" \
    || fail "no err-priority MESSAGE_ID=$MSG_EXTRA_DISABLED line: $(ct_journal -u nthd | tail -n 5)"
  log "journal: $(nthd_err_with_id "$MSG_EXTRA_DISABLED" | tail -n 1)"
  wait_until 10 ct_exec test -s "$NTHD_STATUS" || fail "nthd wrote no $NTHD_STATUS"
  out="$(ct_exec cat "$NTHD_STATUS")"
  hjq -e '.extras_disabled[0].name == "webhooks" and (.extras_disabled[0].reason | test("readable by others"))' \
    <<<"$out" >/dev/null || fail "the status file does not list webhooks as disabled: $(hjq -c .extras_disabled <<<"$out")"
  expect_npd webhooks-disabled 2 10
  [[ "$NPD_OUT" == "unknown: webhooks disabled"* ]] || fail "NPD line does not name the disabled extra: $NPD_OUT"
  out="$(nthd_check_as_nthd --json)" && fail "nthd check passed with the headers file 0644"
  hjq -e '[.checks[] | select(.name == "webhook setup" and .status == "fail")] | length == 1' <<<"$out" >/dev/null \
    || fail "nthd check does not fail 'webhook setup': $(hjq -c '[.checks[] | select(.status != "pass")]' <<<"$out")"
  expect_no_planted_secret
  step "a spot notice 10 s later: the node is drained and powered off all the same"
  sleep 10
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}

# An endpoint nothing answers on: the shipped NPD rules (run as NPD runs them) say unknown once
# the 30 s bound has passed, not "no interruption pending", and all clear again once fixed.
# Runs the plugin until its line says blind, for at most $1 s; every answer on the way must be
# unknown (2): nthd reads nothing meanwhile.
_await_npd_blind() {
  local end got
  end=$(( $(now_ms) + $1 * 1000 ))
  while :; do
    got="$(npd_round blind)"
    [[ "${got%%$'\t'*}" == 2 ]] || fail "NPD plugin exit ${got%%$'\t'*} while nthd reads nothing: ${got#*$'\t'}"
    NPD_OUT="${got#*$'\t'}"
    [[ "$NPD_OUT" == "unknown: nthd is blind"* ]] && return 0
    (( $(now_ms) < end )) || fail "NPD line does not say blind after $1 s: $NPD_OUT"
    sleep 0.5
  done
}

scen_blind_npd() {
  setup_node
  ct_put "$HERE/npd-run.py" npd-run.py >/dev/null
  local t0 took
  expect_npd seeing 0 10
  step "NTHD_IMDS_ENDPOINT=http://169.254.169.253 (nothing answers there)"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=http://169.254.169.253" || fail "nthd did not start"
  t0="$(now_ms)"
  # Before the first successful read nthd cannot vouch for anything: unknown at once, never
  # "no interruption pending"; blind once the bound has passed.
  expect_npd nothing-read-yet 2 10
  [[ "$NPD_OUT" == "unknown: nothing read yet since nthd started" ]] \
    || fail "before any read the NPD line says: $NPD_OUT"
  _await_npd_blind 50
  took=$(( $(now_ms) - t0 ))
  # 30 s is the bound (3 polls or 30 s): not on the first failed read, and not much later.
  (( took >= 25000 )) || fail "blind after only $(fmt_ms "$took"): a hiccup must not raise the alarm"
  timing "blind after $(fmt_ms "$took")"
  wait_until 5 _err_logged "$MSG_BLIND" "nthd is blind" || fail "no err-priority MESSAGE_ID=$MSG_BLIND line"
  ct_exec runuser -u nobody -- /usr/bin/nthd status >"$SDIR/status-blind.txt" 2>&1 \
    && fail "nthd status exited 0 while nthd is blind"
  grep -q "BLIND:" "$SDIR/status-blind.txt" || fail "the status screen does not say BLIND: $(cat "$SDIR/status-blind.txt")"
  log "nthd status while blind:"; indent <"$SDIR/status-blind.txt" >&2
  step "the endpoint fixed: all clear again"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not start"
  expect_npd seeing-again 0 15
}

# The DaemonSet's view: a unit with a mount namespace of its own holding read-only binds of the
# host's /run/nthd and /usr/libexec/nthd (the binary's directory), as hostPath volumes give the
# NPD container (docs/observability.md). A loop there runs the plugin every 0.5 s from the
# directory mount and logs "<exit code> <pid in the file> <inode of the binary it ran> <inode
# behind a single-file mount of the binary>" to /e2e/npd-ds.log (the host's $SDIR/npd-ds.log);
# the last is what the DaemonSet's old hostPath type File mount would have run.
_ds_last() { tail -n 1 "$SDIR/npd-ds.log" 2>/dev/null; }
_ds_says() { [[ "$(_ds_last)" == "$1 "* ]]; }
_ds_field() { _ds_last | cut -d' ' -f"$1"; }
_ds_start() {
  ct_exec systemd-run --quiet --unit=npd-ds -p PrivateMounts=yes \
    -p BindReadOnlyPaths=/run/nthd:/host/run/nthd -p BindReadOnlyPaths=/usr/libexec/nthd:/usr/libexec/nthd \
    -p BindReadOnlyPaths=/usr/libexec/nthd/nthd:/host/file/nthd /bin/sh -c \
    'while :; do /usr/libexec/nthd/nthd status --npd --status-file /host/run/nthd/status.json >/dev/null; rc=$?
       pid=$(jq -r .pid /host/run/nthd/status.json 2>/dev/null || echo none)
       echo "$rc ${pid:-none} $(stat -L -c %i /usr/libexec/nthd/nthd) $(stat -L -c %i /host/file/nthd)" >>/e2e/npd-ds.log
       sleep 0.5; done'
}
scen_npd_daemonset_restart() {
  setup_node
  local pid ino0 ino1
  step "the plugin in its own mount namespace, over binds of the host's /run/nthd and /usr/libexec/nthd"
  _ds_start || fail "could not start the plugin loop"
  pid="$(nthd_main_pid)"
  wait_until 10 _ds_says "0 $pid" || fail "the DaemonSet view does not see nthd $pid: $(_ds_last)"
  step "systemctl stop nthd: unknown (2) in the DaemonSet's view"
  ct_exec systemctl stop nthd || fail "systemctl stop nthd"
  wait_until 10 _ds_says "2 none" || fail "the DaemonSet view does not say unknown with nthd stopped: $(_ds_last)"
  step "systemctl start, then restart: the view follows each new daemon"
  ct_exec systemctl start nthd || fail "systemctl start nthd"
  pid="$(nthd_main_pid)"
  wait_until 10 _ds_says "0 $pid" || fail "after a start the DaemonSet view reads $(_ds_last), not nthd $pid"
  ct_exec systemctl restart nthd || fail "systemctl restart nthd"
  pid="$(nthd_main_pid)"
  wait_until 10 _ds_says "0 $pid" || fail "after a restart the DaemonSet view reads $(_ds_last), not nthd $pid"
  log "DaemonSet view after stop, start and restart: $(_ds_last)"
  step "dpkg -i a newer build: the plugin runs the new binary, the loop untouched"
  ino0="$(ct_exec stat -c %i /usr/libexec/nthd/nthd)"
  [[ "$(_ds_field 3)" == "$ino0" && "$(_ds_field 4)" == "$ino0" ]] || fail "the DaemonSet view does not run the installed binary (inode $ino0): $(_ds_last)"
  repack_bumped_deb "$(nthd_deb_path)" "$SDIR/nthd-bumped.deb" || fail "could not repack the .deb with a bumped version"
  ct_exec dpkg -i "$(ct_put "$SDIR/nthd-bumped.deb" nthd-bumped.deb)" >"$SDIR/dpkg-upgrade.log" 2>&1 || fail "dpkg -i of the newer build failed: $(cat "$SDIR/dpkg-upgrade.log")"
  ino1="$(ct_exec stat -c %i /usr/libexec/nthd/nthd)"
  [[ "$ino1" != "$ino0" ]] || fail "dpkg -i left /usr/libexec/nthd/nthd in place (inode $ino0): the check below would prove nothing"
  pid="$(nthd_main_pid)"
  wait_until 10 _ds_says "0 $pid $ino1" || fail "after the upgrade the DaemonSet view reads $(_ds_last), not nthd $pid through the new binary (inode $ino1)"
  # What the old DaemonSet (a hostPath of type File on the binary) would still run: the replaced one.
  [[ "$(_ds_field 4)" == "$ino0" ]] || fail "a single-file mount followed the upgrade (inode $(_ds_field 4)), so this scenario does not show why the directory is mounted"
  log "after dpkg -i: the directory mount runs inode $ino1 (new), a single-file mount would run $ino0 (replaced): $(_ds_last)"
  ct_exec systemctl stop npd-ds || true
}
