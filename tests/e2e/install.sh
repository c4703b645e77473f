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
#   rpm-deferred        Debian 12: rpm -U from 0.1.0 while a deferred action waits
#   rpm-long-transaction  Debian 12: rpm -U to a bumped version in one transaction with a
#                       package whose %post sleeps 40 s; a spot notice during it is acted on
#                       before the transaction ends, nthd never down longer than a restart
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
# Inputs: target/dist/ (packaging/build.sh --all-arches --test-key): the x86_64 tarball, .rpm
# and amd64 .deb, apt/ and the public key (nthd-TEST-key.asc, or the release's
# nthd-archive-key.asc). The rpms a scenario builds for itself (a bumped version, the provides
# rpm, the slow %post) go to its own target/e2e/runs-install/<name>/art/, since scenarios run at
# once. The testkit binaries as for run.sh.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=scenario.sh
. "$HERE/scenario.sh"
# shellcheck source-path=SCRIPTDIR source=install-repo.sh
. "$HERE/install-repo.sh"
# The scenarios (scen_*) and their own helpers, one file per installer; install.sh is the driver
# and the helpers they share (spot_terminate, boot, the artefacts).
# shellcheck source-path=SCRIPTDIR source=install-tarball.sh
. "$HERE/install-tarball.sh"
# shellcheck source-path=SCRIPTDIR source=install-rpm.sh
. "$HERE/install-rpm.sh"
# shellcheck source-path=SCRIPTDIR source=install-cloud-init.sh
. "$HERE/install-cloud-init.sh"
# shellcheck source-path=SCRIPTDIR source=install-sysext.sh
. "$HERE/install-sysext.sh"

RUNS_DIR="$E2E_DIR/runs-install"
DIST="$REPO/target/dist"

SCENARIOS=(tarball tarball-11 rpm-12 rpm-13 rpm-deferred rpm-long-transaction cloud-init-12 cloud-init-13 sysext repo-11 repo-12 repo-13 repo-dnf)
# Which tree each scenario boots: "suite flavour".
declare -A TREE=([tarball]="trixie " [tarball-11]="bullseye " [rpm-12]="bookworm install" [rpm-13]="trixie install" [rpm-deferred]="bookworm install" [rpm-long-transaction]="bookworm install" [cloud-init-12]="bookworm install"
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
  [[ -r "$DIST/$1" ]] || { log "no $DIST/$1: run packaging/build.sh --all-arches --test-key first"; return 1; }
  echo "$DIST/$1"
}
# The public key target/dist's signatures verify with, $1 = asc (armoured) or gpg (binary
# keyring): the release key (nthd-archive-key.asc, nthd-archive-keyring.gpg) or a TEST key
# (nthd-TEST-key.asc, nthd-TEST-keyring.gpg), whichever the build exported; build.sh removes
# the other pair, so both present means target/dist was put together by hand.
dist_key() {
  local rel test
  case "$1" in
    asc) rel=nthd-archive-key.asc test=nthd-TEST-key.asc ;;
    gpg) rel=nthd-archive-keyring.gpg test=nthd-TEST-keyring.gpg ;;
  esac
  if [[ -r "$DIST/$rel" && -r "$DIST/$test" ]]; then
    log "both $DIST/$rel and $DIST/$test exist: build again (packaging/build.sh --all-arches --test-key) so that one key signs target/dist"; return 1
  fi
  [[ -r "$DIST/$test" ]] && { echo "$DIST/$test"; return 0; }
  dist_artifact "$rel"
}
tarball_for() { dist_artifact "nthd-$(pkg_version)-$1.tar.gz"; }
rpm_path() { dist_artifact "nthd-$(pkg_version)-1.$ARCH_RPM.rpm"; }

# An rpm that tells Debian's (empty) rpm database what dpkg already installed, so
# `rpm -i nthd` needs no --nodeps: it provides exactly the names nthd's .rpm
# requires that Fedora/RHEL packages provide and Debian's dpkg database holds
# instead (systemd, dbus, polkit, and /bin/sh for the scriptlets).
debian_provides_rpm() {
  local top="$SDIR/art/provides"
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

# ---------------------------------------------------------------- driver

# shellcheck disable=SC2031  # its subshell sources lib.sh again for the scenario's tree, on purpose
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
    # A scenario slot (lib.sh) once the tree is there: a tree being built holds none.
    e2e_slot_take; trap 'ct_cleanup; e2e_slot_give' EXIT
    log "scenario slot $E2E_SLOT"
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

# shellcheck disable=SC2031  # its subshell sources lib.sh again for the scenario's tree, on purpose
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
  mkdir -p "$RUNS_DIR"
  exec 7>"$E2E_DIR/install.lock"
  flock -n 7 || { log "another tests/e2e/install.sh holds $E2E_DIR/install.lock; waiting"; flock 7; }
  build_testkit
  [[ -x "$E2E_MOCK_IMDS" && -x "$E2E_FAKE_KUBELET" ]] ||
    die "no testkit binaries at $E2E_MOCK_IMDS and $E2E_FAKE_KUBELET (see the build above)"
  local t0=$SECONDS
  trap 'stop_concurrent; exit 130' INT TERM
  log "${#names[@]} scenarios, up to $E2E_JOBS at once (E2E_JOBS), $E2E_SLOTS on this machine (E2E_SLOTS)"
  run_concurrently run_scenario "$RUNS_DIR/.reports" "${names[@]}"
  passed=$E2E_PASSED failed=$E2E_FAILED
  echo "(install.sh took $((SECONDS - t0))s)"
  echo "$passed passed, $failed failed"
  ((failed == 0))
}

main "$@"
