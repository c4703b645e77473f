# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The tarball's installer (packaging/tarball/install.sh), sourced by tests/e2e/install.sh, whose
# helpers (boot, spot_terminate, fs_snapshot, tarball_for) and driver run these scenarios:
# tarball (Debian 13: its refusals, --no-start, --uninstall [--purge], --prefix, a rerun, the
# .deb present) and tarball-11 (Debian 11: polkit 0.105, the .pkla).

deb_path() {
  local v; v="$(pkg_version)"
  if [[ -r "$DIST/nthd_${v}-1_amd64.deb" ]]; then echo "$DIST/nthd_${v}-1_amd64.deb"; return; fi
  local d="$REPO/target/x86_64-unknown-linux-musl/debian/nthd_${v}-1_amd64.deb"
  [[ -r "$d" ]] || (cd "$REPO" && cargo deb --no-build --target x86_64-unknown-linux-musl) >&2 || return 1
  echo "$d"
}

# install.sh in the container: run_installer [ENV=..] ARGS...  (stdout+stderr to
# $SDIR/installer.log, appended; prints them too).  Returns install.sh's status.
TARDIR=""
run_installer() {
  local rc out
  out="$(ct_exec "$@" 2>&1)" && rc=0 || rc=$?
  printf '$ %s\n%s\n(rc %s)\n' "$*" "$out" "$rc" >>"$SDIR/installer.log"
  printf '%s\n' "$out"
  return "$rc"
}
# expect_refusal PHRASE CMD...: non-zero, the phrase on the output, nothing installed.
expect_refusal() {
  local phrase="$1" out rc; shift
  out="$(run_installer "$@")" && rc=0 || rc=$?
  ((rc != 0)) || fail "install.sh did not refuse ($*): $out"
  [[ "$out" == *"$phrase"* ]] || fail "install.sh refused ($*) without saying '$phrase': $out"
  ! ct_exec test -e /usr/bin/nthd || fail "install.sh refused but left /usr/bin/nthd ($*)"
  ! ct_exec getent passwd nthd >/dev/null || fail "install.sh refused but created user nthd ($*)"
  log "refused (rc $rc): ${out##*cannot install: }"
  REFUSALS+=("$phrase")
}

# The x86_64 tarball checked against SHA256SUMS (itself checked with gpgv against the key the
# build exported, as the README says) and unpacked at $TARDIR; the file system before.
_tarball_unpack() {
  local tb name before keyring
  tb="$(tarball_for x86_64)" || fail "no x86_64 tarball"
  name="$(basename "$tb" .tar.gz)"
  step "unpack $name (gpgv SHA256SUMS.asc, sha256sum -c)"
  ct_put "$tb" >/dev/null
  [[ -r "$DIST/SHA256SUMS" ]] || fail "no $DIST/SHA256SUMS"
  keyring="$(dist_key gpg)" || fail "no public key in $DIST"
  gpgv --keyring "$keyring" "$DIST/SHA256SUMS.asc" "$DIST/SHA256SUMS" >"$SDIR/gpgv.txt" 2>&1 ||
    fail "gpgv --keyring $keyring SHA256SUMS.asc SHA256SUMS: $(cat "$SDIR/gpgv.txt")"
  ct_put "$DIST/SHA256SUMS" >/dev/null
  ct_sh 'cd /e2e/bin && sha256sum -c --ignore-missing SHA256SUMS' >&2 || fail "sha256sum -c SHA256SUMS failed"
  ct_sh 'mkdir -p /opt/dl && tar -xzf "/e2e/bin/$1.tar.gz" -C /opt/dl' "$name" || fail "tar -x failed"
  TARDIR="/opt/dl/$name"  # readable by nobody, for the not-root refusal
  before="$(fs_snapshot)" || fail "snapshot"
  printf '%s\n' "$before" >"$SDIR/fs-before.txt"
}

# install.sh's refusals: each names the reason and installs nothing.
_tarball_refusals() {
  local tb_arm
  step "refusals"
  REFUSALS=()
  expect_refusal "must run as root" runuser -u nobody -- sh "$TARDIR/install.sh"
  tb_arm="$(tarball_for aarch64)" || fail "no aarch64 tarball for the wrong-architecture refusal"
  ct_put "$tb_arm" >/dev/null
  ct_sh 'mkdir -p /opt/arm && tar -xzf "/e2e/bin/$1" -C /opt/arm' "$(basename "$tb_arm")" || fail "tar -x arm"
  expect_refusal "built for aarch64, this machine is x86_64" sh -c 'sh /opt/arm/*/install.sh'
  ct_exec rm -rf /opt/arm
  # systemd not PID 1: what a chroot looks like (no /run/systemd/system).
  expect_refusal "systemd is not running as PID 1" \
    unshare -m sh -c 'mount -t tmpfs none /run/systemd && exec sh "$1/install.sh"' sh "$TARDIR"
  # systemd too old: a systemctl that reports CentOS 7's version first in PATH.
  ct_sh 'mkdir -p /root/old && printf "#!/bin/sh\n[ \"\$1\" = --version ] && { echo \"systemd 219\"; echo \"+PAM\"; exit 0; }\nexec /usr/bin/systemctl \"\$@\"\n" >/root/old/systemctl && chmod 755 /root/old/systemctl'
  expect_refusal "systemd 219 is too old" env PATH="/root/old:$CT_PATH" sh "$TARDIR/install.sh"
  ct_exec rm -rf /root/old
  # no polkit: its D-Bus activation file and polkitd hidden.
  expect_refusal "polkit is not installed" unshare -m sh -c \
    'mount -t tmpfs none /usr/share/dbus-1/system-services &&
      mount -t tmpfs none /usr/lib/polkit-1 &&
      exec sh "$1/install.sh"' sh "$TARDIR"
  expect_refusal "unknown argument" sh "$TARDIR/install.sh" --frobnicate
  timing "${#REFUSALS[@]} refusals"
}

# --no-start for image builds, then --uninstall (which keeps user nthd).
_tarball_no_start() {
  local out
  step "install --no-start where systemd is not PID 1 (image build)"
  out="$(run_installer unshare -m sh -c 'mount -t tmpfs none /run/systemd && exec sh "$1/install.sh" --no-start' sh "$TARDIR")" \
    || fail "install.sh --no-start failed: $out"
  ct_exec systemctl daemon-reload
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "--no-start did not enable nthd: $(ct_exec systemctl is-enabled nthd 2>&1)"
  ! nthd_active || fail "--no-start started nthd"
  ct_exec getent passwd nthd >/dev/null || fail "--no-start did not create user nthd"
  step "--uninstall: files gone, user nthd kept"
  out="$(run_installer sh "$TARDIR/install.sh" --uninstall)" || fail "--uninstall failed: $out"
  expect_inactive_and_gone
  ct_exec getent passwd nthd >/dev/null || fail "--uninstall removed user nthd (the packages keep it)"
  ! ct_exec test -e /usr/bin/nthd || fail "--uninstall left /usr/bin/nthd"
}

# A full install, then --uninstall --purge leaves the system as it was.
_tarball_install_purge() {
  local out after page
  step "install (systemd running): user through sysusers, enabled, started"
  local t0; t0="$(now_ms)"
  out="$(run_installer sh "$TARDIR/install.sh")" || fail "install.sh failed: $out"
  timing "install.sh $(fmt_ms $(( $(now_ms) - t0 )))"
  log "install.sh said: $out"
  nthd_active || fail "nthd not active after install.sh"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "nthd not enabled"
  [[ "$(ct_exec getent passwd nthd | cut -d: -f5-7)" == "nthd node termination handler:/var/lib/nthd:/usr/sbin/nologin" ]] \
    || fail "user nthd is not the sysusers entry: $(ct_exec getent passwd nthd)"
  ct_exec test -f /usr/share/polkit-1/rules.d/50-nthd.rules || fail "polkit rule not installed"
  ! ct_exec test -e /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla || fail ".pkla installed on polkit 126"
  for page in nthd nthd-run nthd-once nthd-check nthd-simulate nthd-status; do
    ct_exec test -s "/usr/share/man/man8/$page.8" || fail "install.sh did not install man page $page(8)"
  done
  ct_exec test -s /usr/share/doc/nthd/examples/50-nthd-reboot.rules.example ||
    fail "install.sh did not install the reboot example that docs/configuration.md copies"
  [[ "$out" == *"polkit 126, grant: /usr/share/polkit-1/rules.d/50-nthd.rules"* ]] || fail "install.sh did not choose the JS rule for polkit 126: $out"
  ct_exec cmp -s /etc/default/nthd "$TARDIR/nthd.default" || fail "/etc/default/nthd is not the shipped file"
  [[ "$(ct_exec runuser -u nthd -- busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff)" == 's "yes"' ]] \
    || fail "user nthd may not power off after install.sh"

  step "--uninstall --purge: nothing left behind"
  ct_sh 'echo "NTHD_LOG_LEVEL=debug" >>/etc/default/nthd'   # an admin's edit: --purge removes it too
  out="$(run_installer sh "$TARDIR/install.sh" --uninstall --purge)" || fail "--uninstall --purge failed: $out"
  expect_inactive_and_gone
  after="$(fs_snapshot)" || fail "snapshot"
  printf '%s\n' "$after" >"$SDIR/fs-after-purge.txt"
  diff -u "$SDIR/fs-before.txt" "$SDIR/fs-after-purge.txt" >"$SDIR/fs-purge.diff" \
    || fail "install + --uninstall --purge left the system different: $(head -c 1500 "$SDIR/fs-purge.diff")"
  log "file system and accounts identical to before the first install ($(wc -l <"$SDIR/fs-before.txt") paths compared)"
}

# --prefix /opt/nthd for a read-only /usr, then purged.
_tarball_prefix() {
  local out
  step "--prefix /opt/nthd (read-only /usr): binary there, unit/sysusers/rule in /etc"
  out="$(run_installer sh "$TARDIR/install.sh" --prefix /opt/nthd)" || fail "install.sh --prefix failed: $out"
  nthd_active || fail "nthd not active after install.sh --prefix /opt/nthd"
  [[ "$(ct_exec systemctl show -p FragmentPath --value nthd)" == /etc/systemd/system/nthd.service ]] \
    || fail "unit not in /etc/systemd/system: $(ct_exec systemctl show -p FragmentPath --value nthd)"
  ct_exec systemctl show -p ExecStart --value nthd | grep -q 'path=/opt/nthd/bin/nthd ' || fail "ExecStart is not /opt/nthd/bin/nthd"
  ! ct_exec test -e /usr/bin/nthd || fail "--prefix /opt/nthd wrote /usr/bin/nthd"
  ct_exec test -f /etc/polkit-1/rules.d/50-nthd.rules -a -f /etc/sysusers.d/nthd.conf || fail "rule or sysusers entry not in /etc"
  [[ "$(ct_exec runuser -u nthd -- busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff)" == 's "yes"' ]] \
    || fail "user nthd may not power off with the rule in /etc/polkit-1/rules.d"
  out="$(run_installer sh "$TARDIR/install.sh" --uninstall --purge)" || fail "--uninstall --purge (prefix) failed: $out"
  expect_inactive_and_gone
  fs_snapshot >"$SDIR/fs-after-prefix-purge.txt" || fail "snapshot"
  diff -u "$SDIR/fs-before.txt" "$SDIR/fs-after-prefix-purge.txt" >"$SDIR/fs-prefix.diff" \
    || fail "--prefix install + --uninstall --purge left the system different: $(head -c 1500 "$SDIR/fs-prefix.diff")"
}

# No install over the .deb; an existing settings file kept; a rerun restarts the daemon.
_tarball_deb_rerun() {
  local out
  step "refuses to install over the .deb"
  local deb; deb="$(deb_path)" || fail "no amd64 .deb"
  ct_put "$deb" nthd.deb >/dev/null
  ct_exec dpkg -i /e2e/bin/nthd.deb >"$SDIR/dpkg.log" 2>&1 || fail "dpkg -i failed: $(cat "$SDIR/dpkg.log")"
  out="$(run_installer sh "$TARDIR/install.sh")" && fail "install.sh installed over the .deb: $out"
  [[ "$out" == *"nthd is installed from a .deb"* ]] || fail "install.sh did not say the .deb is in the way: $out"
  ! ct_exec test -e /var/lib/nthd-install || fail "install.sh refused but wrote its manifest"
  log "refused: ${out##*cannot install: }"
  ct_exec dpkg --purge nthd >>"$SDIR/dpkg.log" 2>&1 || fail "dpkg --purge failed"
  ct_sh 'userdel nthd 2>/dev/null; groupdel nthd 2>/dev/null; true'   # Debian keeps the user on purge

  step "install again, keep an existing /etc/default/nthd"
  ct_sh 'printf "NTHD_LOG_LEVEL=info\n" >/etc/default/nthd'
  out="$(run_installer sh "$TARDIR/install.sh")" || fail "install.sh failed: $out"
  [[ "$(ct_exec cat /etc/default/nthd)" == NTHD_LOG_LEVEL=info ]] || fail "install.sh replaced an existing /etc/default/nthd"
  step "rerun (upgrade in place): restarts the running daemon"
  local pid0; pid0="$(nthd_main_pid)"
  out="$(run_installer sh "$TARDIR/install.sh")" || fail "install.sh (second run) failed: $out"
  wait_until 10 nthd_active || fail "nthd not active after the rerun"
  [[ "$(nthd_main_pid)" != "$pid0" ]] || fail "rerunning install.sh did not restart nthd"
}

scen_tarball() {
  boot
  _tarball_unpack
  _tarball_refusals
  _tarball_no_start
  _tarball_install_purge
  _tarball_prefix
  _tarball_deb_rerun
  spot_terminate
}

# polkit 0.105 reads only .pkla files: install.sh must see that and install the .pkla.
scen_tarball_11() {
  local tb name out
  tb="$(tarball_for x86_64)" || fail "no x86_64 tarball"
  name="$(basename "$tb" .tar.gz)"
  boot
  ct_put "$tb" >/dev/null
  ct_sh 'mkdir -p /opt/dl && tar -xzf "/e2e/bin/$1.tar.gz" -C /opt/dl' "$name" || fail "tar -x failed"
  step "install.sh on systemd $(ct_exec systemctl --version | sed -n '1s/systemd \([0-9]*\).*/\1/p'), $(ct_exec pkaction --version)"
  out="$(run_installer sh "/opt/dl/$name/install.sh")" || fail "install.sh failed: $out"
  log "install.sh said: $out"
  [[ "$out" == *"polkit 0.105, grant: /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla"* ]] \
    || fail "install.sh did not choose the .pkla for polkit 0.105: $out"
  ct_exec cmp -s /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla "/opt/dl/$name/nthd.pkla" || fail ".pkla not installed"
  nthd_active || fail "nthd not active after install.sh"
  out="$(ct_exec runuser -u nthd -- busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff)"
  [[ "$out" == 's "yes"' ]] || fail "user nthd may not power off on polkit 0.105 after install.sh: $out"
  spot_terminate
}
