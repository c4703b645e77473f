#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2015,SC2119  # single-quoted scripts run inside the container; A && B || fail is meant
# nthd's installers, proven on booted Debian trees (systemd-nspawn, real systemd,
# dbus, polkitd, logind; tests/e2e/lib.sh): each scenario installs nthd the way a
# user would, checks what the installer promises, then runs spot-terminate
# (notice on the mock IMDS -> kubelet stand-in's delay lock -> one logind PowerOff
# -> the container powers off) with the nthd it installed.
#
# Usage (as root):
#   tests/e2e/install.sh                     all scenarios
#   tests/e2e/install.sh NAME...             only these (see --list)
#   tests/e2e/install.sh --list
#
# Scenarios (each boots the Debian tree it names; trees are built on demand by
# tests/e2e/rootfs.sh and cached under target/e2e/):
#   tarball             Debian 13: refusals of packaging/tarball/install.sh (not root,
#                       wrong arch, no systemd PID 1, systemd 219, no polkit, bad flag,
#                       .deb present), --no-start, --uninstall (keeps the user),
#                       --uninstall --purge (nothing left), --prefix, rerun, spot-terminate
#   tarball-11          Debian 11 (systemd 247, polkit 0.105): install.sh picks the .pkla,
#                       nthd may power off, spot-terminate
#   rpm-12, rpm-13      Debian 12 (rpm 4.18) / 13 (rpm 4.20) + rpm: rpm -i (no --nodeps:
#                       a provides-rpm names what dpkg installed), rpm -U to a bumped
#                       version, rpm -e, rpm -i again, spot-terminate
#   cloud-init-12       Debian 12 + cloud-init: the shipped user-data under real
#   cloud-init-13       cloud-init (NoCloud seed) installs nthd from the signed apt
#                       repository (target/dist/apt) with its key, nthd check, spot-terminate
#   sysext              Debian 13: systemd-sysext image, merge, spot-terminate
#   repo-11, repo-12,   Debian 11 / 12 / 13: the signed apt repository over HTTP with
#   repo-13             signed-by=; apt's refusals (another key, altered InRelease, Packages
#                       and .deb), apt-get install nthd, spot-terminate; on 12 and 13 rpm -K
#                       of the signed .rpm (tests/e2e/install-repo.sh)
#   repo-dnf            the host's dnf and the signed rpm repository: refusals, install
#
# Output: "PASS|FAIL name (timings)" per scenario, then "N passed, M failed".
# Artefacts: target/e2e/runs-install/<name>/.
# Inputs: target/dist/ (packaging/build.sh --all-arches) when present: the x86_64
# tarball, .rpm and amd64 .deb, apt/ and the public key (repo-*, cloud-init-*: required);
# otherwise built here from the same files
# (target/x86_64-unknown-linux-musl/release/nthd, cargo deb / cargo generate-rpm into
# target/e2e/install-artefacts/). The testkit binaries as for run.sh.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=scenario.sh
. "$HERE/scenario.sh"
# shellcheck source-path=SCRIPTDIR source=install-repo.sh
. "$HERE/install-repo.sh"

RUNS_DIR="$E2E_DIR/runs-install"
ART="$E2E_DIR/install-artefacts"
DIST="$REPO/target/dist"

SCENARIOS=(tarball tarball-11 rpm-12 rpm-13 rpm-deferred cloud-init-12 cloud-init-13 sysext repo-11 repo-12 repo-13 repo-dnf)
# Which tree each scenario boots: "suite flavour".
declare -A TREE=([tarball]="trixie " [tarball-11]="bullseye " [rpm-12]="bookworm install" [rpm-13]="trixie install" [rpm-deferred]="bookworm install" [cloud-init-12]="bookworm install"
                 [cloud-init-13]="trixie install" [sysext]="trixie "
                 [repo-11]="bullseye " [repo-12]="bookworm install" [repo-13]="trixie install"
                 [repo-dnf]="bookworm install")

# ------------------------------------------------------------- helpers

# The standard evidence, on whatever nthd the scenario installed: user nthd runs
# it, the stand-in holds its lock, the mock serves a terminate notice, logind
# delays the power-off for the drain, the container halts.
spot_terminate() {
  local user pid uid
  step "spot-terminate with the installed nthd"
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back after reconfiguration"
  pid="$(nthd_main_pid)"; uid="$(ct_exec awk '/^Uid:/{print $2}' "/proc/$pid/status")"
  user="$(ct_exec getent passwd "$uid" | cut -d: -f1)"
  [[ "$user" == nthd ]] || fail "nthd runs as '$user', not 'nthd'"
  log "nthd $(ct_exec systemctl show -p ExecStart --value nthd | grep -o 'path=[^ ;]*') pid $pid runs as $user"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
  expect_one_poweroff_action
}

boot() {
  step "boot $ROOTFS"
  ct_boot "$SCEN" "$SDIR" "$@" || fail "container did not boot"
  timing "boot $(fmt_ms "$CT_BOOT_MS")"
  ct_net_setup || fail "could not add IMDS addresses to lo"
}

# Everything on the container's root file system that an installer could leave
# behind (paths, types, modes, owners; checksums of the account files).  /e2e, the
# journal, /run, /tmp and /proc-like trees are not part of the comparison.
fs_snapshot() {
  ct_sh 'find / -xdev \( -path /e2e -o -path /proc -o -path /sys -o -path /dev -o -path /run \
           -o -path /tmp -o -path /var/tmp -o -path /var/log -o -path /var/cache -o -path /var/lib/systemd \
           -o -path /var/lib/polkit-1/.cache -o -path /var/lib/dbus \) -prune -o \
           \( -name "passwd-" -o -name "group-" -o -name "shadow-" -o -name "gshadow-" \) -prune -o \
           -printf "%p %y %m %u:%g\n" | LC_ALL=C sort
         sha256sum /etc/passwd /etc/group /etc/shadow /etc/gshadow'
}

expect_inactive_and_gone() {
  local ls; ls="$(ct_exec systemctl show -p LoadState --value nthd.service)"
  [[ "$ls" == not-found ]] || fail "nthd.service LoadState is '$ls' after removal (unit still there)"
  ! ct_exec pgrep -x nthd >/dev/null || fail "an nthd process still runs after removal"
}

# ------------------------------------------------------------- artefacts

ARCH_RPM=x86_64
pkg_version() {
  cargo metadata --no-deps --format-version 1 --manifest-path "$REPO/Cargo.toml" 2>/dev/null |
    hjq -r '.packages[] | select(.name == "nthd") | .version'
}

# The artifacts under test are the release's own, from target/dist (packaging/build.sh
# --all-arches), never a copy assembled here: what users download is what is tested.
dist_artifact() {
  [[ -r "$DIST/$1" ]] || { log "no $DIST/$1: run packaging/build.sh --all-arches first"; return 1; }
  echo "$DIST/$1"
}
tarball_for() { dist_artifact "nthd-$(pkg_version)-$1.tar.gz"; }
rpm_path() { dist_artifact "nthd-$(pkg_version)-1.$ARCH_RPM.rpm"; }

# The same package at version <ver>+1 (patch bumped): cargo generate-rpm with
# --set-metadata, Cargo.toml untouched.  Same files; the version is what rpm -U sees.
bumped_rpm() {
  local v nv; v="$(pkg_version)"; nv="${v%.*}.$(( ${v##*.} + 1 ))"
  rm -rf "$ART/rpm-bumped"; mkdir -p "$ART/rpm-bumped"
  (cd "$REPO" && cargo generate-rpm --target x86_64-unknown-linux-musl --arch x86_64 --auto-req disabled \
     --set-metadata "version = \"$nv\"" --output "$ART/rpm-bumped/") >&2 || return 1
  echo "$ART/rpm-bumped/nthd-$nv-1.$ARCH_RPM.rpm"
}

# An rpm that tells Debian's (empty) rpm database what dpkg already installed, so
# `rpm -i nthd` needs no --nodeps: it provides exactly the names nthd's .rpm
# requires that Fedora/RHEL packages provide and Debian's dpkg database holds
# instead (systemd, dbus, polkit, and /bin/sh for the scriptlets).
debian_provides_rpm() {
  local top="$ART/provides"
  rm -rf "$top"; mkdir -p "$top/SPECS"
  cat >"$top/SPECS/p.spec" <<'EOF'
Name: debian-dpkg-provides
Version: 1
Release: 1
Summary: Names that dpkg, not rpm, installed on this Debian system
License: Apache-2.0
BuildArch: noarch
Provides: systemd
Provides: dbus
Provides: polkit
Provides: /bin/sh
%description
Test helper for tests/e2e/install.sh.
%files
EOF
  rpmbuild --quiet -bb --define "_topdir $top" "$top/SPECS/p.spec" >&2 || return 1
  echo "$top/RPMS/noarch/debian-dpkg-provides-1-1.noarch.rpm"
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
_nthd_env_has() { ct_exec cat "/proc/$(nthd_main_pid)/environ" 2>/dev/null | tr '\0' '\n' | grep -qxF "$1"; }
_expect_rpm_settings_kept() {
  [[ "$(_sysconfig_sum)" == "$1" ]] || fail "/etc/sysconfig/nthd is not the admin's after $2: $(ct_sh 'ls -l /etc/sysconfig/nthd*; head -n 3 /etc/sysconfig/nthd' 2>&1)"
  wait_until 10 nthd_active || fail "nthd is not active after $2"
  wait_until 5 _nthd_env_has NTHD_SAFETY_MARGIN=7s \
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

deb_path() {
  local v; v="$(pkg_version)"
  if [[ -r "$DIST/nthd_${v}-1_amd64.deb" ]]; then echo "$DIST/nthd_${v}-1_amd64.deb"; return; fi
  local d="$REPO/target/x86_64-unknown-linux-musl/debian/nthd_${v}-1_amd64.deb"
  [[ -r "$d" ]] || (cd "$REPO" && cargo deb --no-build --target x86_64-unknown-linux-musl) >&2 || return 1
  echo "$d"
}

# ------------------------------------------------------------- scenarios

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

# The x86_64 tarball checked against SHA256SUMS and unpacked at $TARDIR; the file system before.
_tarball_unpack() {
  local tb name before
  tb="$(tarball_for x86_64)" || fail "no x86_64 tarball"
  name="$(basename "$tb" .tar.gz)"
  step "unpack $name (sha256sum -c)"
  ct_put "$tb" >/dev/null
  [[ -r "$DIST/SHA256SUMS" ]] || fail "no $DIST/SHA256SUMS"
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
  local out after
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

# cloud-init: NoCloud seed directory, the shipped user-data with only the repository URL
# and the key substituted; target/dist/apt (the signed repository) served by python3 -m
# http.server on 127.0.0.1:8080 inside the container (a unit started before
# cloud-final.service).
CI_PORT=8080
# The shipped user-data as the user makes it, on stdout: the repo= URL replaced by $1, and
# the key's lines (target/dist/nthd-archive-key.asc) in place of the placeholder between
# BEGIN and END; nothing else changed (checked against $SDIR/user-data.diff).
ci_user_data() {
  local ud="$REPO/packaging/cloud-init/user-data.yaml"
  sed "s|^\\([[:space:]]*\\)repo=https://example.invalid/nthd\$|\\1repo=$1|" "$ud" |
    awk -v key="$DIST/nthd-archive-key.asc" '
      /^ *-----BEGIN PGP PUBLIC KEY BLOCK-----$/ { ind = substr($0, 1, index($0, "-") - 1)
        while ((getline l < key) > 0) print (l == "" ? "" : ind l); skip = 1; next }
      skip { if ($0 ~ /^ *-----END PGP PUBLIC KEY BLOCK-----$/) skip = 0; next }
      { print }' >"$SDIR/user-data"
  diff "$ud" "$SDIR/user-data" >"$SDIR/user-data.diff"
  [[ "$(grep -c '^<' "$SDIR/user-data.diff")" == 2 ]] && grep -q '^< *repo=https://example.invalid/nthd$' "$SDIR/user-data.diff" &&
    grep -q '^< *REPLACE THIS LINE' "$SDIR/user-data.diff" ||
    fail "substituting the URL and the key did not change exactly those 2 lines: $(cat "$SDIR/user-data.diff")"
  cat "$SDIR/user-data"
}

# What the user-data did with apt: fetched InRelease and the .deb from the repository
# (the server's log), Signed-By: the key file, which is the release's key byte for byte.
ci_expect_repo_install() {
  local base="$1" v="$2" http
  http="$(ct_journal -u e2e-http)"
  grep -q 'GET /nthd/apt/dists/stable/InRelease' <<<"$http" || fail "the user-data's apt-get update never fetched $base/apt/dists/stable/InRelease"
  grep -q "GET /nthd/apt/pool/main/n/nthd/nthd_${v}-1_amd64.deb" <<<"$http" || fail "the user-data never downloaded the .deb from $base/apt"
  ct_exec grep -qx "Signed-By: /usr/share/keyrings/nthd-archive-keyring.asc" /etc/apt/sources.list.d/nthd.sources ||
    fail "no Signed-By in /etc/apt/sources.list.d/nthd.sources: $(ct_exec cat /etc/apt/sources.list.d/nthd.sources 2>&1)"
  ct_put "$DIST/nthd-archive-key.asc" >/dev/null
  ct_exec cmp /usr/share/keyrings/nthd-archive-keyring.asc /e2e/bin/nthd-archive-key.asc ||
    fail "the user-data's /usr/share/keyrings/nthd-archive-keyring.asc is not $DIST/nthd-archive-key.asc"
  log "apt: $(ct_exec apt-cache policy nthd | tr -s ' ' | tr '\n' ' ')"
}

# The files the boot binds in: the NoCloud meta-data, ds-identify's and cloud-init's
# settings, and the unit that serves $1/www. Usage: ci_boot_files CIDIR
ci_boot_files() {
  printf 'instance-id: iid-nthd-e2e-%s\nlocal-hostname: nthd-e2e\n' "$$" >"$1/seed/meta-data"
  # ds-identify: find NoCloud (the seed directory) and enable cloud-init; no network
  # configuration (the container has only lo).
  printf 'policy: enabled\ndatasource: NoCloud\n' >"$1/ds-identify.cfg"
  # The minbase tree lacks what a cloud image has, and cloud-init would report errors
  # that have nothing to do with nthd: no OpenSSH (ssh_genkeytypes: [] skips cc_ssh's
  # key generation, a "recoverable error" on 13) and no locales package (locale: false
  # skips cc_locale, whose update-locale fails on 12).
  printf 'datasource_list: [ NoCloud, None ]\nnetwork: {config: disabled}\nssh_genkeytypes: []\nlocale: false\n' >"$1/99-e2e.cfg"
  cat >"$1/e2e-http.service" <<EOF
[Unit]
Description=e2e: serve the nthd packages (the user's release location)
DefaultDependencies=no
[Service]
ExecStart=/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory /e2e/ci/www $CI_PORT
EOF
  printf '[Unit]\nWants=e2e-http.service\nAfter=e2e-http.service\n' >"$1/final.d/50-e2e-http.conf"
}

scen_cloud_init() {
  local v base ci seed st rc long
  v="$(pkg_version)"; base="http://127.0.0.1:$CI_PORT/nthd"
  ci="$SDIR/ci"; seed="$ci/seed"; mkdir -p "$seed" "$ci/www/nthd" "$ci/final.d"
  [[ -r "$DIST/apt/dists/stable/InRelease" && -r "$DIST/nthd-archive-key.asc" ]] ||
    fail "no signed apt repository in $DIST: run packaging/build.sh --all-arches first"
  cp -al "$DIST/apt" "$ci/www/nthd/apt"
  ci_user_data "$base" >"$seed/user-data"
  # The container has no route to Debian's mirror, which the tree's sources.list names, and
  # nthd's dependencies are installed: the user-data's apt-get update sees nthd's repository only.
  : >"$ci/sources.list.empty"
  ci_boot_files "$ci"
  # cloud-init runs inside the boot (cloud-final is part of multi-user.target).
  E2E_BOOT_TIMEOUT=300 boot --bind-ro="$seed:/var/lib/cloud/seed/nocloud" \
       --bind-ro="$ci/sources.list.empty:/etc/apt/sources.list" \
       --bind-ro="$ci/ds-identify.cfg:/etc/cloud/ds-identify.cfg" \
       --bind-ro="$ci/99-e2e.cfg:/etc/cloud/cloud.cfg.d/99-e2e.cfg" \
       --bind-ro="$ci/e2e-http.service:/etc/systemd/system/e2e-http.service" \
       --bind-ro="$ci/final.d:/etc/systemd/system/cloud-final.service.d"
  step "cloud-init status --wait"
  local t0; t0="$(now_ms)"
  st="$(ct_exec timeout 240 cloud-init status --wait --long 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$st" >"$SDIR/cloud-init-status.txt"
  ct_exec cat /var/log/cloud-init-output.log >"$SDIR/cloud-init-output.log" 2>&1 || true
  ct_exec cat /var/log/cloud-init.log >"$SDIR/cloud-init.log" 2>&1 || true
  timing "cloud-init done +$(fmt_ms $(( $(now_ms) - t0 ))) after boot"
  ((rc == 0)) || fail "cloud-init status --wait exited $rc: $(tr '\n' ' ' <<<"$st" | head -c 600); output: $(tail -n 15 "$SDIR/cloud-init-output.log" | tr '\n' ' ')"
  [[ "$st" == *"status: done"* ]] || fail "cloud-init status: $st"
  grep -q 'logind permits power-off .*CanPowerOff = yes for nthd' "$SDIR/cloud-init-output.log" \
    || fail "the user-data's nthd check did not run as nthd with the grant in place (see cloud-init-output.log)"
  long="$(ct_exec cloud-init query v1.platform 2>/dev/null)" || true
  log "cloud-init datasource: ${long:-?}; $(grep -m1 -i 'detail' <<<"$st")"
  step "what the user-data promises"
  ci_expect_repo_install "$base" "$v"
  [[ "$(ct_exec dpkg-query -W -f '${db:Status-Status} ${Version}' nthd)" == "installed $v-1" ]] || fail "nthd .deb not installed by the user-data"
  nthd_active || fail "nthd not active after cloud-init"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "nthd not enabled after cloud-init"
  ct_exec grep -qx 'NTHD_PROVIDER=auto' /etc/default/nthd || fail "the user-data's /etc/default/nthd was not kept (--force-confold)"
  ! ct_exec grep -q '^# Settings for nthd' /etc/default/nthd || fail "/etc/default/nthd is the package's, not the user-data's"
  local gns=/etc/kubernetes/kubelet.conf.d/50-graceful-node-shutdown.conf
  ct_exec grep -qx 'shutdownGracePeriod: 90s' "$gns" && ct_exec grep -qx 'shutdownGracePeriodCriticalPods: 30s' "$gns" \
    && ct_exec grep -qx 'kind: KubeletConfiguration' "$gns" || fail "kubelet GNS drop-in $gns missing or wrong: $(ct_exec cat "$gns" 2>&1)"
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back after reconfiguration"
  step "nthd check, as the user runs it (sudo -u nthd nthd check)"
  local out; out="$(ct_exec sudo -u nthd nthd check </dev/null 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/nthd-check.txt"
  ((rc == 0)) || fail "nthd check exited $rc: $out"
  log "nthd check passed ($(grep -c '✔' <<<"$out") checks ✔)"
  # spot_terminate would start the stand-in and mock again: do the rest here.
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
  expect_one_poweroff_action
}
# rpm -U from the previous release while a deferred action waits: 0.1.0 configured through
# /etc/sysconfig/nthd (its %config), a scheduled instance-stop deferred to the last safe
# moment, then rpm -U of the package under test, stdin closed.  The settings survive the
# %config hand-over (0.1.0's erase renames them, %posttrans puts them back), and the action is
# carried out once, at its moment, never early (nthd restarted without its settings would
# compute another moment).
RPM_DEFER_DELAY=10 RPM_DEFER_MARGIN=2 RPM_DEFER_AHEAD=45
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
scen_cloud_init_12() { scen_cloud_init; }
scen_cloud_init_13() { scen_cloud_init; }

scen_sysext() {
  local v raw out rc loopargs=() loopnodes=() i
  v="$(pkg_version)"
  raw="$(dist_artifact "nthd-$v-x86_64.raw")" || fail "no x86_64 sysext image"
  log "built $(basename "$raw") ($(stat -c %s "$raw") bytes, $(file -b "$raw" 2>/dev/null | cut -c1-40))"
  # systemd-sysext attaches a .raw to a loop device.  nspawn gives the container no
  # /dev/loop*: without them merge fails with "Failed to read metadata for image nthd:
  # No such file or directory" (SYSTEMD_LOG_LEVEL=debug shows nothing more).  Passing
  # the host's loop-control and loop nodes in makes the real image merge.  (On a host
  # whose PID 1 is systemd, nspawn's device cgroup would also need
  # --property=DeviceAllow=block-loop and /dev/loop-control.)
  # Binding the nodes that exist is not enough.  sysext attaches the image twice
  # (dissect, then merge), and systemd removes each loop device it is done with
  # (LOOP_CTL_REMOVE), so the kernel may hand out an index whose node the container
  # lacks: on a CI host with loop0 busy and no loop1 node, sysext retried 64 times and
  # reported "Device or resource busy".  So pass in a node for every index the kernel
  # can hand out here (_loop_nodes).
  if [[ -c /dev/loop-control ]] && mapfile -t loopnodes < <(_loop_nodes) && ((${#loopnodes[@]})); then
    loopargs+=(--bind=/dev/loop-control)
    for i in "${loopnodes[@]}"; do loopargs+=(--bind="$i:/dev/${i##*/}"); done
  fi
  boot "${loopargs[@]}"
  step "systemd-sysext merge of /var/lib/extensions/nthd.raw (${#loopargs[@]} loop nodes passed in)"
  ct_put "$raw" nthd.raw >/dev/null
  ct_sh 'mkdir -p /var/lib/extensions && cp /e2e/bin/nthd.raw /var/lib/extensions/nthd.raw'
  ! ct_exec test -e /usr/bin/nthd || fail "/usr/bin/nthd exists before the merge"
  out="$(ct_exec env SYSTEMD_LOG_LEVEL=debug systemd-sysext merge 2>&1)" && rc=0 || rc=$?
  printf '$ systemd-sysext merge   (/var/lib/extensions/nthd.raw)\n%s\n(rc %s)\n' "$out" "$rc" >"$SDIR/sysext-raw.txt"
  if ((rc == 0)); then
    timing "merged the .raw (squashfs)"
  elif ((${#loopargs[@]})); then
    fail "systemd-sysext merge of the .raw failed with loop devices available: $out"
  else
    log "the .raw did not merge (no usable loop device on this host): $out"
    ct_exec rm -f /var/lib/extensions/nthd.raw
    step "systemd-sysext merge of the same tree as a directory extension"
    mkdir -p "$SDIR/bin"; unsquashfs -q -d "$SDIR/bin/sysext-tree" "$raw" >/dev/null || fail "unsquashfs $raw"
    ct_sh 'cp -a /e2e/bin/sysext-tree /var/lib/extensions/nthd' || fail "copy the directory extension"
    out="$(ct_exec systemd-sysext merge 2>&1)" || fail "systemd-sysext merge (directory) failed: $out"
    timing "merged as a directory (no loop devices)"
  fi
  ct_exec systemd-sysext status --no-pager >"$SDIR/sysext-status.txt" 2>&1 || true
  grep -q 'nthd' "$SDIR/sysext-status.txt" || fail "systemd-sysext status does not list nthd: $(cat "$SDIR/sysext-status.txt")"
  ct_exec test -x /usr/bin/nthd || fail "/usr/bin/nthd not there after the merge"
  ct_exec findmnt -n -o FSTYPE /usr | grep -qx overlay || fail "/usr is not the sysext overlay: $(ct_exec findmnt -n /usr)"
  # EXTENSION_RELOAD_MANAGER=1: systemd-sysext reloaded systemd itself.
  [[ "$(ct_exec systemctl show -p LoadState --value nthd.service)" == loaded ]] \
    || fail "nthd.service not loaded after merge (EXTENSION_RELOAD_MANAGER=1): $(ct_exec systemctl show -p LoadState --value nthd.service)"
  step "systemd-sysusers, start"
  ct_exec systemd-sysusers || fail "systemd-sysusers"
  ct_exec getent passwd nthd >/dev/null || fail "no user nthd after systemd-sysusers"
  ct_exec systemctl start nthd || fail "systemctl start nthd failed: $(ct_exec systemctl status --no-pager nthd 2>&1 | tail -n 5)"
  wait_until 10 nthd_active || fail "nthd not active"
  out="$(ct_exec runuser -u nthd -- busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff)"
  log "CanPowerOff as nthd after the merge: $out"
  [[ "$out" == 's "yes"' ]] || fail "polkit does not grant nthd power-off from the extension's rule: $out"
  spot_terminate
  # The container is gone: its loop device must have been released.
  wait_until 10 _no_loop_on "$CT_NAME" || log "warning: a loop device still holds nthd.raw: $(losetup -a | grep nthd.raw)"
}
# Loop device nodes for indexes 0 .. N+8, where N is the index the kernel hands out
# next (LOOP_CTL_GET_FREE, via losetup -f): the host's node where /dev has one, else
# one made under $SDIR (major 7; minor = index << the partition shift of max_part).
# Prints nothing, and the scenario falls back to a directory extension, when this host
# cannot set up loop devices at all.
_loop_nodes() {
  local dev n i shift=0 maxpart
  dev="$(losetup -f 2>/dev/null)" || { log "losetup -f: no free loop device on this host" >&2; return 0; }
  n="${dev#/dev/loop}"
  maxpart="$(cat /sys/module/loop/parameters/max_part 2>/dev/null || echo 0)"
  while ((maxpart >> shift)); do shift=$((shift + 1)); done
  mkdir -p "$SDIR/loop-nodes"
  for ((i = 0; i <= n + 8; i++)); do
    if [[ -b /dev/loop$i ]]; then echo "/dev/loop$i"
    elif mknod "$SDIR/loop-nodes/loop$i" b 7 $((i << shift)); then echo "$SDIR/loop-nodes/loop$i"
    fi
  done
}
_no_loop_on() { ! losetup -a 2>/dev/null | grep -q 'nthd.raw'; }

# ---------------------------------------------------------------- driver

run_scenario() {
  local name="$1" fn="scen_${1//-/_}" t0 rc suite flavour
  read -r suite flavour <<<"${TREE[$name]}"
  SCEN="$name"; SDIR="$RUNS_DIR/$name"
  rm -rf "$SDIR"; mkdir -p "$SDIR"
  t0=$SECONDS
  (
    trap 'ct_cleanup' EXIT
    trap 'exit 130' INT TERM
    set -e
    exec 2>>"$SDIR/harness.log"
    # lib.sh picks the tree from these.
    export E2E_SUITE="$suite" E2E_FLAVOUR="$flavour"; unset E2E_ROOTFS
    # shellcheck disable=SC1091  # the lib.sh sourced at the top, again for this tree
    . "$HERE/lib.sh"
    log "=== scenario $name on $ROOTFS"
    if [[ -z "${E2E_SKIP_ROOTFS:-}" ]]; then
      local tr0=$SECONDS
      "$HERE/rootfs.sh" >>"$SDIR/rootfs.log" 2>&1 \
        || fail "rootfs.sh failed for $suite ${flavour:-plain} (see $SDIR/rootfs.log)"
      ((SECONDS - tr0 < 5)) || timing "tree built $((SECONDS - tr0))s"
    fi
    "$fn"
    log "=== scenario $name passed"
  ) &
  wait $!; rc=$?
  journalctl -D "$SDIR/journal" -o short-precise --no-pager -q >"$SDIR/journal.txt" 2>/dev/null || true
  local timings; timings="$(awk 'NR > 1 { printf ", " } { printf "%s", $0 }' "$SDIR/timings" 2>/dev/null)"
  timings="${timings:+$timings, }total $((SECONDS - t0))s"
  local label="$name (Debian ${suite/bookworm/12}${flavour:+, $flavour tree})"; label="${label/trixie/13}"; label="${label/bullseye/11}"
  if ((rc == 0)); then echo "PASS $label ($timings)"; return 0; fi
  echo "FAIL $label ($timings)"
  echo "    reason: $(cat "$SDIR/failure" 2>/dev/null || echo "exit status $rc (see $SDIR/harness.log)")"
  echo "    --- harness log (last 25 lines):"
  tail -n 25 "$SDIR/harness.log" | sed 's/^/    /'
  echo "    artefacts: $SDIR"
  return 1
}

main() {
  local names=() n passed=0 failed=0
  while (($#)); do case "$1" in
    -h|--help) sed -n '2,/^set -uo/p' "$0" | grep -v '^# shellcheck' | sed '$d; s/^# \{0,1\}//'; exit 0;;
    --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0;;
    -*) echo "unknown option $1" >&2; exit 2;;
    *) names+=("$1");; esac; shift; done
  ((${#names[@]})) || names=("${SCENARIOS[@]}")
  for n in "${names[@]}"; do
    declare -F "scen_${n//-/_}" >/dev/null || { echo "unknown scenario: $n (try --list)" >&2; exit 2; }
  done
  [[ $EUID -eq 0 ]] || die "must run as root (systemd-nspawn)"
  need systemd-nspawn nsenter journalctl flock rpm rpmbuild cargo
  mkdir -p "$RUNS_DIR" "$ART"
  exec 7>"$E2E_DIR/install.lock"
  flock -n 7 || { log "another tests/e2e/install.sh holds $E2E_DIR/install.lock; waiting"; flock 7; }
  build_testkit
  [[ -x "$E2E_MOCK_IMDS" && -x "$E2E_FAKE_KUBELET" ]] ||
    die "no testkit binaries at $E2E_MOCK_IMDS and $E2E_FAKE_KUBELET (see the build above)"
  local t0=$SECONDS
  for n in "${names[@]}"; do
    if run_scenario "$n"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  echo "(install.sh took $((SECONDS - t0))s)"
  echo "$passed passed, $failed failed"
  ((failed == 0))
}

main "$@"
