# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts run inside the container
# Upgrades that never stop at dpkg's conffile prompt (issue 22), sourced by run.sh.

# A package as nthd was built before the settings file left /etc: the package under test,
# repacked with its template at /etc/default/nthd as a conffile (other text than today's),
# version 0.0.1-1.  Prints the container path.
_conffile_era_deb() {
  ct_sh 'set -e; d=$(mktemp -d); dpkg-deb -R /e2e/bin/nthd.deb "$d/p"
         mkdir -p "$d/p/etc/default"
         { echo "# the settings file of an older nthd"; cat "$d/p/usr/share/nthd/default"; } >"$d/p/etc/default/nthd"
         echo /etc/default/nthd >"$d/p/DEBIAN/conffiles"
         sed -i "s/^Version: .*/Version: 0.0.1-1/" "$d/p/DEBIAN/control"
         dpkg-deb -b --root-owner-group "$d/p" /e2e/bin/nthd-old.deb >/dev/null && echo /e2e/bin/nthd-old.deb'
}

scen_upgrade_configured() {
  setup_node
  local old out
  step "a node on an older package, whose /etc/default/nthd was a conffile, configured by its admin"
  ct_exec dpkg --purge nthd >/dev/null || fail "could not purge nthd"
  ct_exec test ! -e /etc/default/nthd || fail "purge left /etc/default/nthd behind"
  old="$(_conffile_era_deb)" || fail "could not repack the package as a conffile-era one"
  ct_exec dpkg -i "$old" >"$SDIR/dpkg-old.log" 2>&1 || fail "the old package did not install: $(tail -n 5 "$SDIR/dpkg-old.log")"
  [[ "$(ct_exec dpkg-query -W -f '${Conffiles}' nthd)" == *"/etc/default/nthd"* ]] || fail "the repacked package has no conffile"
  ct_sh 'printf "NTHD_PROVIDER=aws\nNTHD_IMDS_ENDPOINT=%s\nNTHD_LOG_LEVEL=debug\n" "$1" >/etc/default/nthd' "$IMDS"
  step "dpkg -i of the package under test, stdin closed (as cloud-init, apt-get -y, unattended-upgrades)"
  out="$(ct_exec dpkg -i /e2e/bin/nthd.deb </dev/null 2>&1)" || fail "the upgrade failed: $(tail -n 5 <<<"$out")"
  [[ "$out" != *"conffile"* && "$out" != *"Configuration file"* ]] || fail "dpkg spoke of a conffile: $out"
  [[ "$(ct_exec dpkg-query -W -f '${Version} ${db:Status-Status}' nthd)" == "$(dpkg-deb -f "$(nthd_deb_path)" Version) installed" ]] \
    || fail "nthd is not the new version, installed: $(ct_exec dpkg-query -W -f '${Version} ${db:Status-Status}' nthd)"
  ct_exec grep -qx NTHD_LOG_LEVEL=debug /etc/default/nthd || fail "the admin's settings were not kept"
  wait_until 10 nthd_active || fail "nthd is not active after the upgrade"
  log "upgraded without a prompt, settings kept; dpkg: $(ct_exec dpkg-query -W -f '${Conffiles}' nthd | tr -s ' \n' ' ')"
  step "purge removes the settings file; a fresh install writes the template"
  ct_exec dpkg --purge nthd >/dev/null || fail "could not purge nthd"
  ct_exec test ! -e /etc/default/nthd || fail "purge left /etc/default/nthd behind"
  ct_exec dpkg -i /e2e/bin/nthd.deb >/dev/null 2>&1 || fail "the fresh install failed"
  ct_exec cmp -s /usr/share/nthd/default /etc/default/nthd || fail "a fresh install did not write the template"
  [[ "$(ct_exec stat -c %a /etc/default/nthd)" == 644 ]] || fail "/etc/default/nthd is not 0644"
  [[ -z "$(ct_exec dpkg-query -W -f '${Conffiles}' nthd)" ]] || fail "the package under test ships a conffile"
}
