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
  # The only drop-in allowed is the harness' own for a foreign nthd (MemoryDenyWriteExecute=,
  # nthd_qemu_user_dropin), and it must not touch the firewall.
  dropins="${dropins//\/etc\/systemd\/system\/nthd.service.d\/50-e2e-qemu-user.conf/}"
  [[ -z "${dropins// /}" ]] || fail "nthd.service has drop-ins ($dropins): not the packaged unit"
  ! ct_exec grep -qs IPAddress /etc/systemd/system/nthd.service.d/50-e2e-qemu-user.conf \
    || fail "the harness' qemu-user drop-in changes the IP firewall"
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

# A command run the way nthd.service runs it, in a transient unit with the unit's user, its
# settings and its IP firewall (the README's "run it inside the unit's sandbox" block).
# Prints the output and returns the command's status (bash: mapfile).  Usage: in_unit_sandbox ARGS...
in_unit_sandbox() {
  ct_exec bash -c 'mapfile -t props < <(systemctl show nthd -p IPAddressDeny -p IPAddressAllow -p RestrictAddressFamilies)
         systemd-run --pipe --wait --quiet --collect -p User=nthd -p EnvironmentFile=-/etc/default/nthd \
           "${props[@]/#/-p}" /usr/bin/nthd "$@" 2>&1' bash "$@"
}

# Text that names the unit's allow-list as the cause for ADDRESS, with the drop-in.
expect_names_the_allow_list() {
  local what="$1" addr="$2" text="$3"
  [[ "$text" == *"allow-list blocks $addr"* && "$text" == *"IPAddressAllow=$addr"* &&
     "$text" == *"systemctl edit nthd.service"* ]] \
    || fail "$what does not name the unit's allow-list and the drop-in for $addr: $(tail -c 600 <<<"$text")"
  [[ "$text" != *"slow or throttling"* ]] || fail "$what blames a slow metadata service: $(grep -m1 'slow or throttling' <<<"$text")"
  log "$what: $(grep -m1 -F "IPAddressAllow=$addr" <<<"$text" | cut -c1-400)"
}

scen_sandbox_imds() {
  MOCK_LISTEN+=("$BLOCKED_IMDS:80")
  setup_node --endpoint "http://$BLOCKED_IMDS"
  ct_exec curl -sf -m 2 -o /dev/null "http://$BLOCKED_IMDS/_mock/health" \
    || fail "the mock does not answer at $BLOCKED_IMDS outside the unit"
  step "the daemon: the unit's allow-list is named as the cause, never a slow service"
  wait_until 20 _journal_has "IPAddressAllow=$BLOCKED_IMDS" \
    || fail "no journal line names IPAddressAllow=$BLOCKED_IMDS: $(ct_journal -u nthd -p warning | tail -n 3)"
  expect_names_the_allow_list "the daemon's log" "$BLOCKED_IMDS" "$(ct_journal -u nthd)"
  expect_nthd_active
  local out
  step "nthd check, run by hand outside the unit: the daemon's unit blocks the endpoint"
  out="$(ct_exec /usr/bin/nthd check --json 2>/dev/null)" && fail "nthd check passed although the unit blocks $BLOCKED_IMDS"
  hjq -e '[.checks[] | select(.name == "metadata service" and .status == "fail"
           and (.value | test("so the daemon cannot reach it")))] | length == 1' <<<"$out" >/dev/null \
    || fail "nthd check's metadata service check does not say the daemon's unit blocks it: $out"
  expect_names_the_allow_list "nthd check" "$BLOCKED_IMDS" "$out"
  step "nthd once inside the unit's sandbox"
  out="$(in_unit_sandbox once)" && fail "nthd once succeeded inside a sandbox that blocks $BLOCKED_IMDS"
  expect_names_the_allow_list "nthd once" "$BLOCKED_IMDS" "$out"
  step "the drop-in the message gives: nthd reads the metadata service, a spot notice powers off"
  ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
         printf "[Service]\nIPAddressAllow=%s\n" "$1" >/etc/systemd/system/nthd.service.d/allow.conf &&
         systemctl daemon-reload && systemctl restart nthd' "$BLOCKED_IMDS" || fail "could not add the drop-in"
  NTHD_START_MS="$(now_ms)"
  wait_until 10 _read_from "$BLOCKED_IMDS" || fail "nthd still does not reach $BLOCKED_IMDS with the drop-in"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}
# nthd's reads that reached the mock at ADDRESS since NTHD_START_MS.
_read_from() {
  local n; n="$(mock_log | hjq --arg a "$1:" --argjson since "$NTHD_START_MS" \
    '[.[] | select((.local | startswith($a)) and .t_ms >= $since and (.path | startswith("/_mock") | not))] | length')"
  ((n > 0))
}

# A receiver on 127.0.0.1:8099 (the mock, which answers and logs any path) that nthd.service
# may not reach: the packaged unit, without the README's webhook drop-in.
scen_sandbox_webhook() {
  MOCK_LISTEN+=(127.0.0.1:8099)
  setup_node --env NTHD_WEBHOOK=http://127.0.0.1:8099/events --env NTHD_SLOW_POLL_INTERVAL=2s
  ct_exec curl -s -m 2 -o /dev/null -X POST http://127.0.0.1:8099/events \
    || fail "the receiver does not answer outside the unit"
  local out
  step "nthd check, run by hand outside the unit: the daemon's unit blocks the receiver"
  out="$(ct_exec /usr/bin/nthd check --json 2>/dev/null)" && fail "nthd check passed although the unit blocks the webhook"
  hjq -e '[.checks[] | select(.name == "webhook" and .status == "fail" and .required)] | length == 1' \
    <<<"$out" >/dev/null || fail "nthd check's webhook check does not fail: $out"
  expect_names_the_allow_list "nthd check" 127.0.0.1 "$out"
  step "a rebalance recommendation: its event cannot go out, and the log says why"
  local since; since="$(now_ms)"   # the receiver saw the two probes above, from outside the unit
  set_route "$AWS_REBALANCE" "{\"noticeTime\":\"$(iso_in 0)\"}" || fail "set rebalance route"
  wait_until 20 _journal_has "IPAddressAllow=127.0.0.1" \
    || fail "no journal line names IPAddressAllow=127.0.0.1: $(ct_journal -u nthd -p warning | tail -n 3)"
  expect_names_the_allow_list "the daemon's log" 127.0.0.1 "$(ct_journal -u nthd)"
  NTHD_START_MS="$since"
  ! _read_from 127.0.0.1 || fail "a request from nthd reached the receiver through the firewall"
  step "the node is protected all the same: a spot notice powers off"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}
