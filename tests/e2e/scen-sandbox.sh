# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts run inside the container
# Scenarios of issue "proven where it runs", sourced by run.sh.  Every container enforces the
# unit's IP firewall (ct_boot refuses to go on otherwise), so these prove what production sees:
# Tencent found and served through the packaged unit's allow-list, and a connection the
# allow-list drops named as such, with the drop-in that allows it, for the metadata service
# and for a webhook.

TENCENT_IMDS=169.254.0.23
TENCENT_SPOT=/latest/meta-data/spot/termination-time
# An address on the container's lo that nthd.service's IPAddressAllow= does not list.
BLOCKED_IMDS=169.254.0.99

# The packaged unit, unchanged: no drop-in, and Tencent's address in its allow-list.
expect_packaged_unit_allows() {
  local allow dropins
  allow="$(ct_exec systemctl show -p IPAddressAllow --value nthd)"
  dropins="$(ct_exec systemctl show -p DropInPaths --value nthd)"
  [[ -z "$dropins" ]] || fail "nthd.service has drop-ins ($dropins): not the packaged unit"
  [[ " $allow " == *" $1/32 "* ]] || fail "the packaged unit's IPAddressAllow= ($allow) lacks $1"
  log "packaged unit, no drop-in: IPAddressAllow=$allow"
}

# A node with no DMI to read (as in containers, and as the host's would be here otherwise):
# detection must go by the metadata probes.
_no_dmi() {
  ct_sh '[ ! -d /sys/class/dmi/id ] || mount -t tmpfs -o ro,mode=0555 nodmi /sys/class/dmi/id' \
    || fail "could not hide /sys/class/dmi/id"
}

_tencent_pre() {
  _no_dmi
  # The mock answers Tencent's paths without a token, and installs the Tencent identity.
  mock_config '{"aws_token":"optional"}' || fail "could not configure the mock's token mode"
  ct_exec curl -sS -f -m 5 -X PUT "$MOCK_URL/_mock/identity?cloud=tencent" >/dev/null \
    || fail "could not install the Tencent identity on the mock"
  set_route_text /latest/meta-data/ $'instance-id\ninstance-name\nplacement/\nspot/' \
    || fail "could not serve the meta-data directory"
}

# Tencent's termination-time: "YYYY-MM-DD hh:mm:ss" in UTC+8, SECS from now.
tencent_time_in() { date -u -d "@$(( $(date +%s) + $1 + 8 * 3600 ))" '+%Y-%m-%d %H:%M:%S'; }

scen_tencent_auto() {
  # Only Tencent's address answers: every other cloud's probe is refused.
  MOCK_URL="http://$TENCENT_IMDS"; MOCK_LISTEN=("$TENCENT_IMDS:80")
  setup_node --provider auto --endpoint "" --pre _tencent_pre
  expect_packaged_unit_allows "$TENCENT_IMDS"
  step "auto-detection by probe, no DNS: Tencent at http://$TENCENT_IMDS"
  wait_until 10 _journal_has "http://$TENCENT_IMDS/latest/meta-data/ answered HTTP 200" \
    || fail "nthd did not detect Tencent by its probe: $(ct_journal -u nthd | grep -i -m3 -e detect -e cloud)"
  log "$(ct_journal -u nthd | grep -m1 -F "http://$TENCENT_IMDS/latest/meta-data/ answered")"
  step "spot termination-time 2 min ahead (UTC+8)"
  set_notice --text "$TENCENT_SPOT" "$(tencent_time_in 120)"
  expect_poweroff_through_lock 10 3000
  local n; n="$(mock_log_jq --arg p "$TENCENT_SPOT" '[.[] | select(.path == $p and (.local | startswith("169.254.0.23:")))] | length')"
  ((n > 0)) || fail "no read of $TENCENT_SPOT at $TENCENT_IMDS in the mock's log"
  timing "$n reads of $TENCENT_SPOT through the packaged unit's allow-list"
}
_journal_has() { ct_journal -u nthd | grep -qF -- "$1"; }
