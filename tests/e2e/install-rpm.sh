# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The .rpm on Debian's rpm, sourced by tests/e2e/install.sh, whose helpers (boot,
# spot_terminate, rpm_path, debian_provides_rpm) and driver run these scenarios: rpm-12 and
# rpm-13 (rpm -i, -U to a bumped version and from the previous release and back, -e) and
# rpm-deferred (rpm -U from the previous release while a deferred action waits), and
# rpm-long-transaction (rpm -U in one long transaction, a spot notice during it).

# The same package at version <ver>+1 (patch bumped): cargo generate-rpm with
# --set-metadata, Cargo.toml untouched.  Same files; the version is what rpm -U sees.
bumped_rpm() {
  local v nv; v="$(pkg_version)"; nv="${v%.*}.$(( ${v##*.} + 1 ))"
  rm -rf "$SDIR/art/rpm-bumped"; mkdir -p "$SDIR/art/rpm-bumped"
  (cd "$REPO" && cargo generate-rpm --target x86_64-unknown-linux-musl --arch x86_64 --auto-req disabled \
     --set-metadata "version = \"$nv\"" --output "$SDIR/art/rpm-bumped/") >&2 || return 1
  echo "$SDIR/art/rpm-bumped/nthd-$nv-1.$ARCH_RPM.rpm"
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

  step "rpm -U to $nv: nthd restarted once (by %post; the old package's %postun leaves it)"
  pid0="$(nthd_main_pid)"
  local stops0; stops0="$(ct_journal -u nthd | grep -c 'Stopping nthd.service' || true)"
  ct_exec rpm -U /e2e/bin/nthd-bumped.rpm >"$SDIR/rpm-U.log" 2>&1 || fail "rpm -U failed: $(cat "$SDIR/rpm-U.log")"
  [[ "$(ct_exec rpm -q nthd)" == "nthd-$nv.$ARCH_RPM" ]] || fail "after rpm -U: $(ct_exec rpm -q nthd 2>&1)"
  wait_until 10 nthd_active || fail "nthd not active after rpm -U"
  [[ "$(nthd_main_pid)" != "$pid0" ]] || fail "rpm -U did not restart nthd on upgrade (MainPID still $pid0)"
  local stops; stops=$(( $(ct_journal -u nthd | grep -c 'Stopping nthd.service' || true) - stops0 ))
  ((stops == 1)) || fail "rpm -U stopped nthd $stops times, not once (%post restarts it; the old %postun must not again)"
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
# rpm -U in one transaction with a package whose %post is slow (RPM_SLOW_SECS), ordered after
# nthd's own scriptlets (Requires(post): nthd), and a spot notice while that %post runs: nthd
# acts on it before the transaction ends, and was never inactive for more than a restart
# (RPM_MAX_GAP_MS), sampled every 0.1 s by a watcher unit. In 0.1.0 nthd's %post stopped
# it on every upgrade and %posttrans started it at the end: the notice found nobody.
RPM_SLOW_SECS=40 RPM_MAX_GAP_MS=3000
# A noarch rpm whose %post writes its start time and nthd's inode, sleeps RPM_SLOW_SECS, then
# writes its end time, all under /e2e.
slow_post_rpm() {
  local top="$SDIR/art/slow"
  rm -rf "$top"; mkdir -p "$top/SPECS"
  cat >"$top/SPECS/s.spec" <<SPEC
Name: nthd-e2e-slow-post
Version: 1
Release: 1
Summary: A package whose post-install script takes ${RPM_SLOW_SECS} s, installed after nthd
License: Apache-2.0
BuildArch: noarch
Requires(post): nthd
%description
Test helper for tests/e2e/install-rpm.sh (rpm-long-transaction).
%post
{ date +%s%3N; stat -c %i /usr/bin/nthd; } >/e2e/slow-post.start
sleep ${RPM_SLOW_SECS}
date +%s%3N >/e2e/slow-post.end
%files
SPEC
  rpmbuild --quiet -bb --define "_topdir $top" "$top/SPECS/s.spec" >&2 || return 1
  echo "$top/RPMS/noarch/nthd-e2e-slow-post-1-1.noarch.rpm"
}
# Every 0.1 s: "<ms> <ActiveState> <MainPID> <the main process's executable>" to
# /e2e/nthd-watch.log; an executable "(deleted)" is the binary the upgrade replaced.
_rpm_watch_start() {
  ct_exec systemd-run --quiet --unit=e2e-nthd-watch /bin/sh -c \
    'while :; do s=$(systemctl show -p ActiveState --value nthd); p=$(systemctl show -p MainPID --value nthd)
       echo "$(date +%s%3N) $s $p $(readlink /proc/"$p"/exe 2>/dev/null | tr " " _)" >>/e2e/nthd-watch.log; sleep 0.1; done'
}
# The longest time nthd was not active in the watcher's log from $1 to $2 (ms): "<ms> <from>".
_rpm_longest_gap() {
  awk -v t0="$1" -v t1="$2" '$1 < t0 { next } $1 > t1 { exit } $2 != "active" { if (!from) from = $1; next }
    from { if ($1 - from > gap) { gap = $1 - from; at = from }; from = 0 }
    END { if (from && t1 - from > gap) { gap = t1 - from; at = from }; printf "%.0f %.0f\n", gap, (at ? at : t0) }' "$SDIR/nthd-watch.log"
}
scen_rpm_long_transaction() {
  local rpm bumped prov slow v nv t0 ino0 start gap at
  rpm="$(rpm_path)" || fail "no .rpm"
  bumped="$(bumped_rpm)" || fail "could not build the bumped .rpm"
  prov="$(debian_provides_rpm)" || fail "could not build the provides .rpm"
  slow="$(slow_post_rpm)" || fail "could not build the slow-%post .rpm"
  v="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$rpm")"; nv="$(rpm -qp --qf '%{VERSION}-%{RELEASE}' "$bumped")"
  boot
  ct_put "$rpm" nthd.rpm >/dev/null; ct_put "$bumped" nthd-bumped.rpm >/dev/null
  ct_put "$prov" provides.rpm >/dev/null; ct_put "$slow" slow.rpm >/dev/null
  step "rpm -i $v, the kubelet stand-in, the mock IMDS, nthd configured"
  ct_exec rpm -i /e2e/bin/provides.rpm /e2e/bin/nthd.rpm >"$SDIR/rpm-i.log" 2>&1 || fail "rpm -i failed: $(cat "$SDIR/rpm-i.log")"
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back after reconfiguration"
  _rpm_watch_start || fail "could not start the watcher"
  ino0="$(ct_exec stat -c %i /usr/bin/nthd)"
  step "rpm -U $v -> $nv in one transaction with a package whose %post takes ${RPM_SLOW_SECS} s"
  t0="$(now_ms)"
  # A unit, so that the shutdown nthd starts stops it (rpm holds SIGTERM off in a transaction).
  ct_exec systemd-run --quiet --unit=e2e-rpm-upgrade -p TimeoutStopSec=2 /bin/sh -c \
    'rpm -U /e2e/bin/nthd-bumped.rpm /e2e/bin/slow.rpm >/e2e/rpm-U.log 2>&1; echo $? >/e2e/rpm-U.rc' || fail "could not start rpm -U"
  wait_until 60 test -s "$SDIR/slow-post.start" || fail "the slow %post did not start within 60 s: $(cat "$SDIR/rpm-U.log" 2>/dev/null)"
  start="$(head -n 1 "$SDIR/slow-post.start")"
  [[ "$(sed -n 2p "$SDIR/slow-post.start")" != "$ino0" ]] || fail "the slow %post ran before nthd's files were replaced: this would prove nothing"
  timing "slow %post began $(fmt_ms $((start - t0))) into rpm -U"
  sleep 2
  [[ ! -e "$SDIR/rpm-U.rc" ]] || fail "rpm -U ended before the notice: $(cat "$SDIR/rpm-U.log")"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  read -r gap at < <(_rpm_longest_gap "$t0" "$NOTICE_MS")
  wait_for_prepare 10 >/dev/null || fail "no PrepareForShutdown within 10 s of a spot notice during rpm -U: nthd was not active for $(fmt_ms "$gap") from $(fmt_ms $((at - t0))) into the transaction, until the notice (nthd-watch.log)"
  expect_poweroff_through_lock 10 2000
  [[ ! -e "$SDIR/slow-post.end" && ! -e "$SDIR/rpm-U.rc" ]] || fail "the transaction ended before the power-off: $(cat "$SDIR/rpm-U.log")"
  (( $(kubelet_event_ms prepare) < start + RPM_SLOW_SECS * 1000 )) || fail "PrepareForShutdown came after the slow %post would have ended"
  _rpm_expect_one_restart "$t0"
}
# From rpm -U ($1) to the notice: nthd never inactive longer than RPM_MAX_GAP_MS, at most one
# new main process, and the process that took the notice runs the upgraded binary.
_rpm_expect_one_restart() {
  local gap at pids exe
  read -r gap at < <(_rpm_longest_gap "$1" "$NOTICE_MS")
  ((gap <= RPM_MAX_GAP_MS)) || fail "nthd was not active for $(fmt_ms "$gap") from $(fmt_ms $((at - $1))) into rpm -U (limit $(fmt_ms "$RPM_MAX_GAP_MS"), one restart)"
  pids="$(awk -v t0="$1" -v n="$NOTICE_MS" '$1 >= t0 && $1 <= n && $3 != 0 { print $3 }' "$SDIR/nthd-watch.log" | uniq | tr '\n' ' ')"
  (($(wc -w <<<"$pids") <= 2)) || fail "nthd's main process changed more than once during rpm -U: $pids"
  exe="$(awk -v n="$NOTICE_MS" '$1 <= n { e = $4 } END { print e }' "$SDIR/nthd-watch.log")"
  [[ -n "$exe" && "$exe" != *deleted* ]] || fail "at the notice nthd still ran the replaced binary ('$exe'): the upgrade did not restart it promptly"
  timing "longest inactive $(fmt_ms "$gap"), main processes: $pids"
  log "the notice was taken by $exe; main processes during rpm -U: $pids"
}
scen_rpm_12() { scen_rpm; }
scen_rpm_13() { scen_rpm; }
