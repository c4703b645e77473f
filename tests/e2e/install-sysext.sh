# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The systemd-sysext image, sourced by tests/e2e/install.sh, whose helpers (boot,
# spot_terminate, dist_artifact) and driver run the sysext scenario (Debian 13).

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
