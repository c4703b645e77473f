#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs run inside the container
# Build (once) the Debian rootfs (E2E_SUITE: 11, 12 or 13; E2E_ARCH) that every
# e2e scenario boots with systemd-nspawn --volatile=overlay.  Idempotent and cached under
# $REPO/target/e2e/:
#
#   target/e2e/rootfs/              the bootable tree (never modified by tests:
#                                   scenarios run on a throwaway overlay)
#   target/e2e/rootfs.stamp         package list + mirror the tree was built from;
#                                   if it differs from what we want -> full rebuild
#   target/e2e/rootfs.setup-stamp   hash of the customisation step; if it differs
#                                   -> re-run customisation + test boot only
#   target/e2e/debs/<tree>/         debootstrap's .deb cache (makes rebuilds cheap), one per
#                                   tree: trees are built at the same time, and debootstrap
#                                   validates a .deb another one is still writing
#
# Usage: tests/e2e/rootfs.sh [--force]    (must run as root)
# Env:   E2E_MIRROR   Debian mirror (default: first bookworm "main" URI found in
#                     /etc/apt/sources.list{,.d/*}, else http://deb.debian.org/debian;
#                     the same archive serves every suite)
#        E2E_SUITE    bookworm (default, target/e2e/rootfs), bullseye or trixie
#                     (target/e2e/rootfs-<suite>, their own stamps)
#        E2E_ARCH     amd64 (the host's, default) or arm64 (rootfs[-<suite>]-arm64,
#                     debootstrapped and booted through qemu-user-static + binfmt_misc)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$HERE/lib.sh"

SUITE="$E2E_SUITE"   # lib.sh: bookworm unless E2E_SUITE says otherwise
# Keep this list minimal: every package costs debootstrap time on a cold CI.
#  - polkitd: bookworm splits polkit; polkitd (122) evaluates JS rules in
#    /usr/share/polkit-1/rules.d. pkexec is not needed.
#  - libpam-systemd: logind sessions for runuser/sudo.
#  - adduser + init-system-helpers: what a cargo-deb/debhelper style postinst
#    typically calls (adduser --system, deb-systemd-helper/-invoke).
#  - jq: parse the mock's JSON (/_mock/events, /_mock/log) inside the container.
#  - curl: talk to the mock's control API on 169.254.169.254 inside the
#    container's private network namespace.
#  - Debian 11 (bullseye) has no polkitd package: polkit 0.105 is one package,
#    policykit-1 (polkitd + pkexec + pkaction), and reads only the .pkla files of
#    its "local authority" (/var/lib/polkit-1/localauthority, /etc/polkit-1/
#    localauthority), never the JS rules.  Every other name is the same in 11, 12, 13.
case "$SUITE" in
  bullseye|buster) POLKIT_PACKAGE=policykit-1 ;;
  *)               POLKIT_PACKAGE=polkitd ;;
esac
PACKAGES=(systemd systemd-sysv dbus "$POLKIT_PACKAGE" libpam-systemd iproute2 curl sudo
          procps jq adduser init-system-helpers)
# The "install" flavour (tests/e2e/install.sh): rpm for the .rpm, cloud-init for the user-data.
# python3-cffi-backend: debootstrap does not resolve virtual packages, and cloud-init ->
# python3-cryptography needs python3-cffi-backend-api-{min,max}, provided only by it.
[[ "$E2E_FLAVOUR" != install ]] || PACKAGES+=(rpm cloud-init python3-cffi-backend)
# The tree that runs every scenario (Debian 12, the host's arch, no flavour) also carries what
# the `observability` scenario runs next to nthd: python3 for the CloudEvents webhook receiver
# (tests/e2e/receiver.py, the SDK's wheels come from the host's pip cache, the container has no
# network) and Debian's node_exporter reading nthd's textfile, and man-db, so that the
# `installed-docs` scenario runs `man nthd-status` on the node itself.  Only there: the other trees keep
# their cached stamps and their debootstrap time.  (The package list is in the stamp, so adding
# these rebuilds a tree cached without them.)
if [[ "$SUITE" == bookworm && "$E2E_ARCH" == "$E2E_HOST_ARCH" && -z "$E2E_FLAVOUR" ]]; then
  PACKAGES+=(python3 prometheus-node-exporter man-db)
fi
# The sid tree runs the drain report's and the Auto Scaling completion's scenarios on the newest
# systemd: python3 for the same receiver and for the botocore mock (tests/e2e/asg-mock.py).
# systemd-imds (systemd 261+, split out of systemd in Debian's 261-2): every sid scenario runs
# with the package installed and IMDS unlocked (nthd reads directly, as before); the imds-*
# scenarios lock IMDS and read through systemd-imdsd's Varlink service (scen-imds.sh).
if [[ "$SUITE" == sid && -z "$E2E_FLAVOUR" ]]; then
  PACKAGES+=(python3 systemd-imds)
fi

detect_mirror() {
  if [[ -n "${E2E_MIRROR:-}" ]]; then echo "$E2E_MIRROR"; return; fi
  local f m=""
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -r "$f" ]] || continue
    if [[ "$f" == *.sources ]]; then
      # deb822: take URIs of a stanza whose Suites contain bookworm (not -security)
      m="$(awk 'BEGIN{RS="";FS="\n"}
                 /Suites:[^\n]*bookworm( |$|\n)/ && !/security/ {
                   for(i=1;i<=NF;i++) if($i ~ /^URIs:/){ split($i,a," "); print a[2]; exit } }' "$f")"
    else
      m="$(awk '$1=="deb" && $0 ~ / bookworm / && $0 !~ /security/ {
                  for(i=2;i<=NF;i++) if($i ~ /^(https?|file):/){ print $i; exit } }' "$f")"
    fi
    [[ -n "$m" ]] && { echo "$m"; return; }
  done
  echo "http://deb.debian.org/debian"
}

# Everything customise() does is hashed into the setup stamp, so editing it
# re-applies it (cheap) without a new debootstrap.
customise() {
  local r="$1"
  log "customising $r"
  echo nthd-e2e >"$r/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 nthd-e2e\n::1 localhost\n' >"$r/etc/hosts"
  # Fixed machine-id: every boot of this tree is "the same machine"; each
  # scenario has its own journal directory anyway.  An empty machine-id would
  # make systemd treat the (read-only-overlay) boot as first boot.
  echo 6e746864653265656e746864653265ff >"$r/etc/machine-id"
  mkdir -p "$r/e2e" "$r/var/log/journal"

  # Units that are useless in a container or only slow boot/shutdown down.
  # (Masking a unit that does not exist is harmless: it is just a symlink.)
  local u
  for u in console-getty.service getty@.service serial-getty@.service \
           container-getty@.service getty.target \
           systemd-networkd-wait-online.service systemd-networkd.service \
           systemd-networkd.socket systemd-resolved.service systemd-timesyncd.service \
           systemd-firstboot.service systemd-journald-audit.socket \
           systemd-hwdb-update.service systemd-udevd.service \
           apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
           e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer \
           systemd-tmpfiles-clean.timer motd-news.timer; do
    ln -sfn /dev/null "$r/etc/systemd/system/$u"
  done
  ln -sfn /lib/systemd/system/multi-user.target "$r/etc/systemd/system/default.target"

  _customise_conf "$r"
  # The stock InhibitDelayMaxSec (5 s) stays in place on purpose: the
  # scenarios raise it at run time like kubelet does (drop-in + SIGHUP).

  # No apt inside the container (private network anyway); drop the lists.
  rm -rf "$r/var/lib/apt/lists/"* "$r/var/cache/apt/"*.bin
  # No policy-rc.d: dpkg -i of nthd inside the booted container must really
  # enable+start the service, exactly as on a real node.
  rm -f "$r/usr/sbin/policy-rc.d"
  # node_exporter (Debian 12 tree only) is enabled by its postinst; only the observability
  # scenario starts it, so it costs the other scenarios' boots nothing.
  rm -f "$r/etc/systemd/system/multi-user.target.wants/prometheus-node-exporter.service"
}

# systemd's and journald's configuration for the tests (part of customise()).
_customise_conf() {
  local r="$1"
  # journald: no rate limiting (we grep the journal for evidence), sync
  # quickly, persistent storage into /var/log/journal which the harness binds
  # to a host directory so the journal survives the container's power-off.
  mkdir -p "$r/etc/systemd/journald.conf.d"
  cat >"$r/etc/systemd/journald.conf.d/50-e2e.conf" <<'EOF'
[Journal]
Storage=persistent
RateLimitIntervalSec=0
RateLimitBurst=0
SyncIntervalSec=1s
ForwardToConsole=no
MaxLevelStore=debug
EOF
  # A stuck unit must not turn a failing scenario into a 90 s shutdown hang.
  # (This does NOT affect the logind delay-inhibitor window, which is
  # governed by logind's InhibitDelayMaxSec.)
  mkdir -p "$r/etc/systemd/system.conf.d"
  cat >"$r/etc/systemd/system.conf.d/50-e2e.conf" <<'EOF'
[Manager]
DefaultTimeoutStartSec=30s
DefaultTimeoutStopSec=10s
ShowStatus=no
EOF
}

# Install the host tools that are missing, by their Debian package, as
# tests/run-all.sh and tests/e2e/demo.sh do; or fail at once naming the package.
ensure_host_tools() {
  local pair pkgs=()
  for pair in debootstrap:debootstrap systemd-nspawn:systemd-container \
              nsenter:util-linux flock:util-linux; do
    command -v "${pair%%:*}" >/dev/null || pkgs+=("${pair#*:}")
  done
  ((${#pkgs[@]})) || return 0
  log "installing ${pkgs[*]} (apt-get)"
  { command -v apt-get >/dev/null && apt_install "${pkgs[@]}" >/dev/null; } ||
    die "missing host tools; install the Debian package(s): apt-get install ${pkgs[*]}"
  need debootstrap systemd-nspawn nsenter flock
}

# binfmt_misc's name for a Debian architecture.
_qemu_arch() { case "$1" in arm64) echo aarch64;; *) echo "$1";; esac; }

# debootstrap the tree afresh into $ROOTFS, and stamp it with what it was built from.
_debootstrap() {
  local mirror="$1" want="$2"
  local tmp="$ROOTFS.tmp"
  rm -rf "$tmp" "$ROOTFS.setup-stamp"
  local debs; debs="$E2E_DIR/debs/$(basename "$ROOTFS")"
  mkdir -p "$tmp" "$debs"
  log "debootstrap $SUITE (minbase) from $mirror: ${PACKAGES[*]}"
  local t0=$SECONDS
  debootstrap --variant=minbase --arch="$E2E_ARCH" --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --cache-dir="$debs" "$SUITE" "$tmp" "$mirror" \
    >"$ROOTFS.debootstrap.log" 2>&1 \
    || { tail -n 40 "$ROOTFS.debootstrap.log" >&2; die "debootstrap failed (log: $ROOTFS.debootstrap.log)"; }
  log "debootstrap took $((SECONDS - t0)) s"
  rm -rf "$ROOTFS"
  mv "$tmp" "$ROOTFS"
  echo "$want" >"$ROOTFS.stamp"
}

# Test boot: boot, wait for running/degraded, check logind+polkit are up,
# power off via logind, and require nspawn to exit on its own.
_test_boot() {
  trap ct_cleanup EXIT
  log "test boot"
  local dir; dir="$E2E_DIR/runs/$(basename "$ROOTFS")-selftest"
  rm -rf "$dir"; mkdir -p "$dir"
  ct_boot selftest "$dir" || die "test boot failed (see $dir/console.log)"
  local st; st="$(ct_exec systemctl is-system-running || true)"
  [[ "$st" == running ]] || {
    ct_exec systemctl --failed --no-legend >&2 || true
    log "warning: test boot is '$st' (not 'running'); failed units above"
  }
  ct_exec busctl --quiet status org.freedesktop.login1 >/dev/null || die "logind not on the bus"
  # polkitd is bus-activated: this call starts it and proves it answers.
  ct_exec busctl get-property org.freedesktop.PolicyKit1 /org/freedesktop/PolicyKit1/Authority \
    org.freedesktop.PolicyKit1.Authority BackendName >/dev/null || die "polkitd does not answer on the bus"
  local t_off; t_off="$(now_ms)"
  # The reply can lose the race with the shutdown itself ("Call failed: Connection reset by
  # peer", seen with the Debian 12 tree that carries python3 and node_exporter): the proof
  # that the call worked is the container exiting, below.
  ct_exec busctl call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager PowerOff b false >/dev/null 2>&1 ||
    log "note: PowerOff got no reply (the shutdown closed the bus first); waiting for the exit"
  ct_wait_exit $((60 * E2E_SLOW)) || { ct_cleanup; die "container did not power off within $((60 * E2E_SLOW)) s"; }
  log "test boot ok: boot $(fmt_ms "$CT_BOOT_MS"), PowerOff -> nspawn exit $(fmt_ms $((CT_EXIT_MS - t_off))) (rc $CT_EXIT_RC)"
  ct_cleanup
}

main() {
  [[ $EUID -eq 0 ]] || die "rootfs.sh must run as root"
  local force=0
  [[ "${1:-}" == "--force" ]] && force=1
  ensure_host_tools
  # A foreign tree (arm64 here) is debootstrapped and booted through qemu-user: register it with
  # binfmt_misc first, or debootstrap fails at once with "Unable to execute target architecture"
  # on a new machine where nothing else has registered it yet.
  if [[ "$E2E_ARCH" != "$E2E_HOST_ARCH" ]]; then
    bash "$REPO/tests/binfmt-$(_qemu_arch "$E2E_ARCH").sh" >&2 || die "cannot run $E2E_ARCH binaries on this host"
  fi
  mkdir -p "$E2E_DIR"
  exec 9>"$ROOTFS.lock"
  flock 9

  local mirror want have setup_want setup_have
  mirror="$(detect_mirror)"
  want="suite=$SUITE variant=minbase arch=$E2E_ARCH packages=$(IFS=,; echo "${PACKAGES[*]}")"
  setup_want="$(declare -f customise _customise_conf | sha256sum | cut -d' ' -f1)"
  have="$(cat "$ROOTFS.stamp" 2>/dev/null || true)"
  setup_have="$(cat "$ROOTFS.setup-stamp" 2>/dev/null || true)"

  if [[ $force -eq 0 && -d "$ROOTFS" && "$have" == "$want" && "$setup_have" == "$setup_want" ]]; then
    log "rootfs up to date: $ROOTFS"
    return 0
  fi

  if [[ $force -eq 1 || ! -d "$ROOTFS" || "$have" != "$want" ]]; then
    _debootstrap "$mirror" "$want"
  fi

  customise "$ROOTFS"

  _test_boot
  echo "$setup_want" >"$ROOTFS.setup-stamp"
  log "rootfs ready: $ROOTFS"
}

main "$@"
