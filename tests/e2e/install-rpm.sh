# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The .rpm on Debian's rpm, sourced by tests/e2e/install.sh, whose helpers (boot,
# spot_terminate, rpm_path, debian_provides_rpm) and driver run these scenarios: rpm-12 and
# rpm-13 (rpm -i, -U to a bumped version and from the previous release and back, -e) and
# rpm-deferred (rpm -U from the previous release while a deferred action waits).

# The same package at version <ver>+1 (patch bumped): cargo generate-rpm with
# --set-metadata, Cargo.toml untouched.  Same files; the version is what rpm -U sees.
bumped_rpm() {
  local v nv; v="$(pkg_version)"; nv="${v%.*}.$(( ${v##*.} + 1 ))"
  rm -rf "$ART/rpm-bumped"; mkdir -p "$ART/rpm-bumped"
  (cd "$REPO" && cargo generate-rpm --target x86_64-unknown-linux-musl --arch x86_64 --auto-req disabled \
     --set-metadata "version = \"$nv\"" --output "$ART/rpm-bumped/") >&2 || return 1
  echo "$ART/rpm-bumped/nthd-$nv-1.$ARCH_RPM.rpm"
}

# The previous release's .rpm (0.1.0, tests/e2e/previous-release: built once from its commit
# by its own packaging/build.sh, cached under target/previous-release/).
previous_rpm() {
  local dir f
  dir="$(bash "$HERE/previous-release.sh")" || return 1
  f="$(compgen -G "$dir/nthd-*-1.$ARCH_RPM.rpm" | head -n 1)"
  [[ -n "$f" ]] || { log "no $ARCH_RPM .rpm in $dir"; return 1; }
  echo "$f"
}

# The settings file as the admin left it (sha256), and what lies beside it.
_sysconfig_sum() { ct_exec sha256sum "${1:-/etc/sysconfig/nthd}" 2>/dev/null | cut -c1-64; }
_sysconfig_beside() { ct_sh 'ls -d /etc/sysconfig/nthd?* 2>/dev/null' || true; }
# nthd runs with the admin's settings: its environment (EnvironmentFile=) has the edited line.
_expect_rpm_settings_kept() {
  [[ "$(_sysconfig_sum)" == "$1" ]] || fail "/etc/sysconfig/nthd is not the admin's after $2: $(ct_sh 'ls -l /etc/sysconfig/nthd*; head -n 3 /etc/sysconfig/nthd' 2>&1)"
  wait_until 10 nthd_active || fail "nthd is not active after $2"
  wait_until 5 nthd_env_has NTHD_SAFETY_MARGIN=7s \
    || fail "nthd does not run with the admin's settings after $2: $(ct_exec cat "/proc/$(nthd_main_pid)/environ" | tr '\0' ' ')"
}

# From the previous release (0.1.0, whose .rpm owned /etc/sysconfig/nthd as
# %config(noreplace)) to the package under test and back, with the admin's settings; erase.
rpm_from_previous_release() {
  local v_old="$1" v="$2" sum out
  step "rpm -i $v_old (the previous release), settings edited by the admin"
  out="$(ct_exec rpm -i /e2e/bin/nthd-previous.rpm 2>&1)" || fail "rpm -i $v_old failed: $out"
  [[ "$(ct_exec rpm -qc nthd)" == /etc/sysconfig/nthd ]] || fail "$v_old does not own /etc/sysconfig/nthd as %config: $(ct_exec rpm -qc nthd)"
  ct_sh 'printf "%s\n" "# edited by the admin" NTHD_SAFETY_MARGIN=7s >>/etc/sysconfig/nthd && systemctl restart nthd' \
    || fail "could not edit /etc/sysconfig/nthd"
  sum="$(_sysconfig_sum)"
  _expect_rpm_settings_kept "$sum" "the edit"

  step "rpm -U $v_old -> $v: settings kept, no .rpmnew, no .rpmsave"
  ct_exec rpm -U /e2e/bin/nthd.rpm >"$SDIR/rpm-U-from-previous.log" 2>&1 </dev/null \
    || fail "rpm -U from $v_old failed: $(cat "$SDIR/rpm-U-from-previous.log")"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$v.$ARCH_RPM" ]] || fail "after rpm -U: $(ct_exec rpm -q nthd 2>&1)"
  [[ -z "$(_sysconfig_beside)" ]] || fail "rpm -U from $v_old left $(_sysconfig_beside | tr '\n' ' ')(rpm said: $(tr '\n' ' ' <"$SDIR/rpm-U-from-previous.log"))"
  _expect_rpm_settings_kept "$sum" "rpm -U from $v_old"
  ! ct_exec rpm -qf /etc/sysconfig/nthd >/dev/null 2>&1 || fail "$v owns /etc/sysconfig/nthd: $(ct_exec rpm -qf /etc/sysconfig/nthd)"
  ! ct_exec test -e /var/lib/rpm-state/nthd || fail "%posttrans left /var/lib/rpm-state/nthd"
  log "rpm -U $v_old -> $v said: $(tr '\n' ' ' <"$SDIR/rpm-U-from-previous.log")"

  step "rpm -U --oldpackage back to $v_old: settings kept"
  ct_exec rpm -U --oldpackage /e2e/bin/nthd-previous.rpm >"$SDIR/rpm-U-oldpackage.log" 2>&1 </dev/null \
    || fail "rpm -U --oldpackage $v_old failed: $(cat "$SDIR/rpm-U-oldpackage.log")"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$v_old.$ARCH_RPM" ]] || fail "after the downgrade: $(ct_exec rpm -q nthd 2>&1)"
  _expect_rpm_settings_kept "$sum" "the downgrade"
  # $v_old's own %config(noreplace) meets a file it did not install: rpm keeps the file and
  # writes $v_old's template beside it.
  [[ "$(_sysconfig_beside)" == /etc/sysconfig/nthd.rpmnew ]] || fail "after the downgrade, beside the settings: '$(_sysconfig_beside | tr '\n' ' ')', not just $v_old's .rpmnew"
  log "downgrade said: $(tr '\n' ' ' <"$SDIR/rpm-U-oldpackage.log")"

  step "rpm -e $v_old: the edited settings kept as .rpmsave (rpm's %config)"
  ct_exec rpm -e nthd >"$SDIR/rpm-e-previous.log" 2>&1 || fail "rpm -e $v_old failed: $(cat "$SDIR/rpm-e-previous.log")"
  ! ct_exec test -e /etc/sysconfig/nthd || fail "rpm -e $v_old left /etc/sysconfig/nthd"
  [[ "$(_sysconfig_sum /etc/sysconfig/nthd.rpmsave)" == "$sum" ]] || fail "rpm -e $v_old did not keep the settings as .rpmsave: $(_sysconfig_beside | tr '\n' ' ')"
  log "rpm -e $v_old said: $(tr '\n' ' ' <"$SDIR/rpm-e-previous.log"); left: $(_sysconfig_beside | tr '\n' ' ')"

  step "the admin puts the settings back; rpm -i $v keeps them; rpm -e $v keeps them as .rpmsave"
  ct_sh 'mv /etc/sysconfig/nthd.rpmsave /etc/sysconfig/nthd && rm -f /etc/sysconfig/nthd.rpmnew' || fail "could not put the settings back"
  ct_exec rpm -i /e2e/bin/nthd.rpm >"$SDIR/rpm-i-over-settings.log" 2>&1 || fail "rpm -i $v failed: $(cat "$SDIR/rpm-i-over-settings.log")"
  _expect_rpm_settings_kept "$sum" "rpm -i $v over existing settings"
  [[ -z "$(_sysconfig_beside)" ]] || fail "rpm -i $v left $(_sysconfig_beside | tr '\n' ' ')"
  ct_exec rpm -e nthd >"$SDIR/rpm-e-edited.log" 2>&1 || fail "rpm -e $v failed: $(cat "$SDIR/rpm-e-edited.log")"
  ! ct_exec test -e /etc/sysconfig/nthd || fail "rpm -e $v left the edited /etc/sysconfig/nthd in place"
  [[ "$(_sysconfig_beside)" == /etc/sysconfig/nthd.rpmsave && "$(_sysconfig_sum /etc/sysconfig/nthd.rpmsave)" == "$sum" ]] \
    || fail "rpm -e $v did not keep the edited settings as .rpmsave: $(_sysconfig_beside | tr '\n' ' ')"
  grep -qF 'saved as /etc/sysconfig/nthd.rpmsave' "$SDIR/rpm-e-edited.log" || fail "rpm -e $v did not say where the settings went: $(cat "$SDIR/rpm-e-edited.log")"
  expect_inactive_and_gone
  ct_exec rm -f /etc/sysconfig/nthd.rpmsave
}

# rpm -i of the package under test into Debian's empty rpm database: refused without the
# provides-rpm, accepted with it (no --nodeps); the user, enabled, started, may power off.
_rpm_first_install() {
  local v="$1" out
  step "rpm -i without the provides: every requirement is missing (empty rpm database)"
  out="$(ct_exec rpm -i /e2e/bin/nthd.rpm 2>&1)" && fail "rpm -i succeeded on an empty rpm database?!"
  log "rpm -i: $(tr '\n' ' ' <<<"$out")"
  step "rpm -i debian-dpkg-provides (systemd, dbus, polkit, /bin/sh), then rpm -i nthd WITHOUT --nodeps"
  ct_exec rpm -i /e2e/bin/provides.rpm || fail "rpm -i provides failed"
  out="$(ct_exec rpm -i /e2e/bin/nthd.rpm 2>&1)" || fail "rpm -i nthd failed: $out"
  printf '%s\n' "$out" >"$SDIR/rpm-i.log"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$v.$ARCH_RPM" ]] || fail "rpm -q nthd: $(ct_exec rpm -q nthd 2>&1)"
  # The user comes from the package's sysusers.d entry: rpm >= 4.19 creates it itself
  # (its %sysusers step, from /usr/lib/sysusers.d/nthd.conf, before %pre: Debian 13's
  # rpm 4.20 through %__systemd_sysusers = /usr/lib/rpm/sysusers.sh, Fedora through
  # systemd-sysusers); older rpm (Debian 12's 4.18) leaves it to our %pre, whose
  # systemd-sysusers prints what it creates.
  local rpmver sysusers_macro; rpmver="$(ct_exec rpm --version)"
  sysusers_macro="$(ct_exec rpm --eval '%{?__systemd_sysusers}')"
  if [[ -n "$sysusers_macro" ]]; then
    log "$rpmver creates users from sysusers.d itself (%__systemd_sysusers = $sysusers_macro); %pre found nthd present"
  else
    grep -q "Creating group 'nthd'" <<<"$out" && grep -q "Creating user 'nthd'" <<<"$out" \
      || fail "%pre did not create nthd through systemd-sysusers ($rpmver): $out"
    log "$rpmver: %pre's systemd-sysusers created nthd: $(grep Creating <<<"$out" | tr '\n' ' ')"
  fi
  [[ "$(ct_exec getent passwd nthd | cut -d: -f5-7)" == "nthd node termination handler:/var/lib/nthd:/usr/sbin/nologin" ]] \
    || fail "user nthd is not the sysusers entry: $(ct_exec getent passwd nthd)"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "%post did not enable nthd"
  wait_until 10 nthd_active || fail "%post did not start nthd"
  [[ "$(ct_exec runuser -u nthd -- busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff)" == 's "yes"' ]] \
    || fail "user nthd may not power off after rpm -i"
}

scen_rpm() {
  local rpm bumped prov prev out v nv v_old pid0 f
  rpm="$(rpm_path)" || fail "no .rpm"
  prev="$(previous_rpm)" || fail "no .rpm of the previous release (tests/e2e/previous-release.sh)"
  bumped="$(bumped_rpm)" || fail "could not build the bumped .rpm"
  prov="$(debian_provides_rpm)" || fail "could not build the provides .rpm"
  v="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm")"; nv="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$bumped")"
  v_old="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$prev")"
  log "requires of $(basename "$rpm"): $(rpm -qp --requires "$rpm" | grep -v '^rpmlib(' | sort -u | tr '\n' ' ')"
  boot
  ct_put "$rpm" nthd.rpm >/dev/null; ct_put "$bumped" nthd-bumped.rpm >/dev/null; ct_put "$prov" provides.rpm >/dev/null
  ct_put "$prev" nthd-previous.rpm >/dev/null
  _rpm_first_install "$v"

  step "rpm -U to $nv"
  pid0="$(nthd_main_pid)"
  ct_exec rpm -U /e2e/bin/nthd-bumped.rpm >"$SDIR/rpm-U.log" 2>&1 || fail "rpm -U failed: $(cat "$SDIR/rpm-U.log")"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$nv.$ARCH_RPM" ]] || fail "after rpm -U: $(ct_exec rpm -q nthd 2>&1)"
  wait_until 10 nthd_active || fail "nthd not active after rpm -U"
  [[ "$(nthd_main_pid)" != "$pid0" ]] || fail "%postun did not restart nthd on upgrade (MainPID still $pid0)"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "nthd not enabled after rpm -U"

  step "rpm -e: files, unit and process gone; user and /var/lib/nthd kept (as %postun says)"
  local files; files="$(ct_exec rpm -ql nthd)"
  ct_exec rpm -e nthd >"$SDIR/rpm-e.log" 2>&1 || fail "rpm -e failed: $(cat "$SDIR/rpm-e.log")"
  for f in $files; do ! ct_exec test -e "$f" || fail "rpm -e left $f"; done
  ! ct_exec sh -c 'ls /etc/sysconfig/nthd* 2>/dev/null | grep -q .' || fail "rpm -e left $(ct_exec sh -c 'ls /etc/sysconfig/nthd*')"
  ! ct_exec test -e /etc/systemd/system/multi-user.target.wants/nthd.service || fail "rpm -e left the enablement symlink"
  expect_inactive_and_gone
  ct_exec getent passwd nthd >/dev/null || fail "rpm -e removed user nthd (%postun says it is kept)"
  log "rpm -e removed $(wc -w <<<"$files") files; user nthd and /var/lib/nthd kept"

  rpm_from_previous_release "$v_old" "$v"

  step "rpm -i $nv again"
  ct_exec rpm -i /e2e/bin/nthd-bumped.rpm >"$SDIR/rpm-i2.log" 2>&1 || fail "rpm -i (again) failed: $(cat "$SDIR/rpm-i2.log")"
  wait_until 10 nthd_active || fail "nthd not active after rpm -i (again)"
  spot_terminate
}

# rpm -U from the previous release while a deferred action waits: 0.1.0 configured through
# /etc/sysconfig/nthd (its %config), a scheduled instance-stop deferred to the last safe
# moment, then rpm -U of the package under test, stdin closed.  The settings survive the
# %config hand-over (0.1.0's erase renames them, %posttrans puts them back), and the action is
# carried out once, at its moment, never early (nthd restarted without its settings would
# compute another moment).
RPM_DEFER_DELAY=10 RPM_DEFER_MARGIN=2 RPM_DEFER_AHEAD=45
# shellcheck disable=SC2034  # E2E_INHIBIT_DELAY and NOTICE_MS are read by lib.sh and scenario.sh
scen_rpm_deferred() {
  local prev rpm prov v_old v sum nb at_ms prep late n E2E_INHIBIT_DELAY=$RPM_DEFER_DELAY
  rpm="$(rpm_path)" || fail "no .rpm"
  prev="$(previous_rpm)" || fail "no .rpm of the previous release (tests/e2e/previous-release.sh)"
  prov="$(debian_provides_rpm)" || fail "could not build the provides .rpm"
  v="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm")"; v_old="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$prev")"
  boot
  ct_put "$rpm" nthd.rpm >/dev/null; ct_put "$prev" nthd-previous.rpm >/dev/null; ct_put "$prov" provides.rpm >/dev/null
  step "$v_old from its .rpm, configured by its admin through /etc/sysconfig/nthd"
  ct_exec rpm -i /e2e/bin/provides.rpm /e2e/bin/nthd-previous.rpm >"$SDIR/rpm-i.log" 2>&1 || fail "rpm -i $v_old failed: $(cat "$SDIR/rpm-i.log")"
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  ct_sh 'printf "%s\n" "# the admin'"'"'s settings" NTHD_PROVIDER=aws "NTHD_IMDS_ENDPOINT=$1" NTHD_SLOW_POLL_INTERVAL=1s \
           "NTHD_SAFETY_MARGIN=$2s" >/etc/sysconfig/nthd && systemctl restart nthd' "$IMDS" "$RPM_DEFER_MARGIN" \
    || fail "could not configure /etc/sysconfig/nthd"
  wait_until 10 nthd_active || fail "$v_old not active with the admin's settings"
  sum="$(_sysconfig_sum)"
  step "a scheduled instance-stop, deferred to the last safe moment"
  nb=$(( $(date +%s) + RPM_DEFER_AHEAD )); at_ms=$(( (nb - RPM_DEFER_DELAY - RPM_DEFER_MARGIN) * 1000 ))
  set_notice "$AWS_SCHEDULED" "[{\"NotBefore\":\"$(date -u -d "@$nb" '+%d %b %Y %H:%M:%S GMT')\",\"Code\":\"instance-stop\",\"EventId\":\"instance-event-e2erpm$RANDOM\",\"State\":\"active\",\"Description\":\"The instance is scheduled for stop\"}]"
  wait_until 10 _deferred_announced || fail "$v_old did not announce the scheduled stop"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "$v_old acted at once on a deferred scheduled stop"
  step "rpm -U $v_old -> $v while the action waits, stdin closed"
  ct_exec rpm -U /e2e/bin/nthd.rpm >"$SDIR/rpm-U.log" 2>&1 </dev/null || fail "rpm -U failed: $(cat "$SDIR/rpm-U.log")"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$v.$ARCH_RPM" ]] || fail "after rpm -U: $(ct_exec rpm -q nthd 2>&1)"
  [[ "$(_sysconfig_sum)" == "$sum" && -z "$(_sysconfig_beside)" ]] \
    || fail "the admin's /etc/sysconfig/nthd did not come through rpm -U alone: $(ct_sh 'ls -l /etc/sysconfig/nthd*' 2>&1)"
  wait_until 10 nthd_active || fail "nthd is not active after rpm -U"
  (( $(now_ms) < at_ms - 2000 )) || fail "rpm -U ended too close to the deferred time to prove anything"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd acted before the deferred time, during or after rpm -U: $(journal_json "$MSG_ACTION" | head -c 400)"
  ! kubelet_event_ms prepare >/dev/null || fail "PrepareForShutdown before the deferred time"
  timing "upgraded $(fmt_ms $(( at_ms - $(now_ms) ))) before the deferred time"
  step "the action at its moment, once"
  NOTICE_MS="$at_ms"
  expect_poweroff_through_lock $(( (at_ms - $(now_ms)) / 1000 + 10 ))
  prep="$(kubelet_event_ms prepare)"; late=$((prep - at_ms))
  (( late >= -300 && late <= 2500 )) || fail "PrepareForShutdown $(fmt_ms "$late") from the deferred time"
  n="$(journal_json "$MSG_ACTION" | grep -c . || true)"
  ((n == 1)) || fail "expected exactly one action entry from nthd, the journal has $n"
  timing "fired $(fmt_ms "$late") after its time, once"
}
scen_rpm_12() { scen_rpm; }
scen_rpm_13() { scen_rpm; }
