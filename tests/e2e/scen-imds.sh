# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts and jq programs run inside the container
# shellcheck disable=SC2034  # MOCK_URL is read by lib.sh's mock helpers (the control API's address)
# Scenarios sourced by run.sh: a host whose instance metadata service is locked by
# systemd-imdsd (systemd >= 261, the sid tree's `systemd-imds` package). Only imdsd, which marks
# its sockets with firewall mark 0x7FFF0815, reaches the metadata address; everyone else gets
# EACCES from a prohibit route and reads through imdsd's Varlink service, guarded by the polkit
# action io.systemd.imds.get. A spot notice and an Azure Preempt are drained and powered off
# through that path; without the grant nthd names what is missing.
#
# The node: the mock's 169.254.169.254 moves from lo to a veth link (imdsd skips lo), imdsd is
# configured for the mock by credentials in a drop-in (what the hwdb gives on a real cloud), and
# the routing is what imdsd's generated 85-imds-early.network builds for
# systemd.imds.network=locked, adapted to a mock on a local address (imds_lock). The harness
# talks to the mock's control API on 100.100.100.200, which the lock does not touch.

IMDS_ADDR=169.254.169.254
IMDS_FWMARK=0x7FFF0815
IMDSD_DROPIN=/run/systemd/system/systemd-imdsd@.service.d/50-mock.conf
IMDS_POLICY=/usr/share/polkit-1/actions/io.systemd.imds.policy
IMDS_OWNER='<annotate key="org.freedesktop.policykit.owner">unix-user:systemd-imds</annotate>'
SYSTEMD_IMDS=/usr/lib/systemd/systemd-imds
AWS_INSTANCE_ID_PATH=/latest/meta-data/instance-id
IMDS_E2E_ID=i-0e2e1mds0locked0
# What nthd says about the locked host (src/imds).
IMDS_SAYS_LOCKED="IMDS is locked by systemd-imdsd (prohibit route"  # then ")" or ": connect() to ..."
IMDS_SAYS_VARLINK="reading through its Varlink service"
IMDS_SAYS_VENDOR="cloud: aws (systemd-imdsd's GetVendorInfo: vendor amazon-ec2"

# imdsd's configuration for the mock, as credentials (systemd 262.1's names: imds.vendor_token
# is the token URL; there is no imds.token_url). The values are those of systemd's hwdb entry
# for the cloud (hwdb.d/40-imds.hwdb), Azure's suffix included, so the mock sees the very
# requests a real imdsd sends.
IMDSD_CREDS_AWS=(imds.vendor:amazon-ec2 "imds.vendor_token:http://$IMDS_ADDR/latest/api/token"
  imds.refresh_header_name:X-aws-ec2-metadata-token-ttl-seconds
  imds.token_header_name:X-aws-ec2-metadata-token "imds.data_url:http://$IMDS_ADDR/latest"
  "imds.address_ipv4:$IMDS_ADDR")
IMDSD_CREDS_AZURE=(imds.vendor:microsoft-azure "imds.data_url:http://$IMDS_ADDR/metadata"
  "imds.data_url_suffix:?api-version=2025-04-07&format=text" imds.extra_header:Metadata:true
  "imds.address_ipv4:$IMDS_ADDR")
IMDS_AZURE_SUFFIX="api-version=2025-04-07&format=text"

# The mock's address on a veth link of its own (the host kernel has no dummy module): imdsd
# skips lo, so with the address on lo it never finds the service (Timeout). Before the mock
# starts, so that it listens on the address where it now lives.
_imds_veth() {
  ct_sh 'ip link add imds0 type veth peer name imds1 && ip link set imds0 up && ip link set imds1 up &&
         ip addr del "$1/32" dev lo && ip addr add "$1/32" dev imds1' "$IMDS_ADDR" \
    || fail "could not move $IMDS_ADDR from lo to a veth link"
}

# Configure imdsd for the mock: SetCredential= lines in a drop-in of its template unit (imdsd
# imports imds.*), then its socket. GetVendorInfo, which needs no polkit, must echo the data URL.
# Usage: imdsd_configure CREDENTIAL...
imdsd_configure() {
  local c conf="[Service]"$'\n' info
  for c in "$@"; do conf+="SetCredential=$c"$'\n'; done
  ct_sh 'mkdir -p "${1%/*}" && printf "%s" "$2" >"$1" && systemctl daemon-reload &&
         systemctl start systemd-imdsd.socket' "$IMDSD_DROPIN" "$conf" || fail "could not configure systemd-imdsd"
  info="$(ct_exec varlinkctl call /run/systemd/io.systemd.InstanceMetadata \
            io.systemd.InstanceMetadata.GetVendorInfo '{}' 2>&1)" || fail "imdsd's GetVendorInfo failed: $info"
  log "systemd-imdsd configured by credentials ($IMDSD_DROPIN): $(hjq -c . <<<"$info")"
  [[ "$(hjq -r .dataUrl <<<"$info")" == "$(printf '%s\n' "$@" | sed -n 's/^imds\.data_url://p')" ]] \
    || fail "imdsd did not take the credentials: $info"
}

# The locked routing of 85-imds-early.network: a prohibit route to the metadata address, and a
# rule that lets traffic with imdsd's mark through. The mock is on a local address, so the local
# table (which would deliver every connection first) moves below the prohibit rule and the mark
# rule goes above it.
imds_lock() {
  step "lock the metadata address (systemd.imds.network=locked, as imdsd's networkd file does)"
  ct_sh 'ip route add prohibit "$1/32" &&
         ip rule add pref 10 fwmark "$2" lookup local &&
         ip rule add pref 20 to "$1" ipproto tcp dport 80 lookup main &&
         ip rule del pref 0 lookup local && ip rule add pref 100 lookup local' "$IMDS_ADDR" "$IMDS_FWMARK" \
    || fail "could not build the locked routing"
  log "routing: $(ct_exec ip rule show | paste -sd';'); $(ct_exec ip route show type prohibit)"
}

# The owner annotation systemd 262.1's io.systemd.imds.policy lacks, without which polkitd refuses
# imdsd's question and no rule can grant the action: the documented workaround (docs/clouds.md),
# what an admin adds until systemd ships it. polkitd notices the change by itself.
imds_policy_add_owner() {
  step "the documented workaround: the org.freedesktop.policykit.owner annotation on io.systemd.imds.get"
  ct_sh 'grep -q policykit.owner "$1" || sed -i "s|<defaults>|$2\n                <defaults>|" "$1"' \
    "$IMDS_POLICY" "$IMDS_OWNER" || fail "could not annotate $IMDS_POLICY"
  ct_exec grep -qF "$IMDS_OWNER" "$IMDS_POLICY" || fail "the annotation is not in $IMDS_POLICY"
}

# systemd-imds KEY as USER (no cache: every call reaches the mock). Prints output, returns status.
imds_read_as() { ct_exec timeout 60 runuser -u "$1" -- "$SYSTEMD_IMDS" --cache=no "$2" 2>&1; }
_imds_read_as_ok() { [[ "$(imds_read_as "$1" "$2")" == "$3" ]]; }

# Direct access refused for user nthd (curl exit 7: EACCES from the prohibit route), and imdsd
# reads the mock for root.
expect_imds_locked() {
  local out rc
  out="$(ct_exec runuser -u nthd -- curl -sS -m 3 -o /dev/null "http://$IMDS_ADDR$AWS_INSTANCE_ID_PATH" 2>&1)" && rc=0 || rc=$?
  ((rc == 7)) || fail "curl as nthd to $IMDS_ADDR exited $rc, not 7 (refused): $out"
  log "direct, as nthd: curl exit 7 ($out)"
  out="$(imds_read_as root /meta-data/instance-id)" || fail "systemd-imds as root failed: $out"
  [[ "$out" == "$IMDS_E2E_ID" ]] || fail "systemd-imds as root read '$out', not $IMDS_E2E_ID"
  log "through systemd-imdsd, as root: $SYSTEMD_IMDS --cache=no /meta-data/instance-id -> $out"
}

# Requests for PATH since epoch ms SINCE that reached the mock's metadata address: "imdsd"
# (User-Agent systemd-imdsd/VERSION) or "direct" (anyone else, nthd included).
# Usage: _imds_reads imdsd|direct PATH SINCE
_imds_reads() {
  mock_log_jq --arg p "$2" --argjson since "$3" --arg how "$1" --arg a "$IMDS_ADDR:" \
    '[.[] | select(.path == $p and .t_ms >= $since and (.local | startswith($a))
                   and (([.headers[] | select((.[0] | ascii_downcase) == "user-agent") | .[1]] | first // ""
                         | startswith("systemd-imdsd/")) == ($how == "imdsd")))] | length'
}
_imds_read_since() { (( $(_imds_reads "$1" "$2" "$3") > 0 )); }

_imds_pre_aws() {
  _imds_veth
  step "mock IMDS on the veth link"
  mock_start || fail "mock IMDS did not start"
  set_route_text "$AWS_INSTANCE_ID_PATH" "$IMDS_E2E_ID" || fail "could not set $AWS_INSTANCE_ID_PATH"
  step "systemd-imdsd for the mock (AWS, by credentials)"
  imdsd_configure "${IMDSD_CREDS_AWS[@]}"
}

# nthd's log since nthd_configure last started it (the phases share one boot's journal).
_log_since_start() { ct_journal -u nthd --since "@$((NTHD_START_MS / 1000))"; }
# (grep -c, not -q: an early-exiting grep -q can SIGPIPE journalctl and, with pipefail, fail)
_logged_since_start() { (( $(_log_since_start | grep -cF -- "$1") > 0 )); }

# nthd check --json as nthd: prints it; the row "metadata access" (JSON) goes to IMDS_ROW.
IMDS_ROW=""
_imds_check() {
  local out rc
  out="$(nthd_check_as_nthd --json 2>/dev/null)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/check-$1.json"
  IMDS_ROW="$(hjq -c '[.checks[] | select(.name == "metadata access")] | first // empty' <<<"$out")"
  [[ -n "$IMDS_ROW" ]] || fail "nthd check ($1) has no row 'metadata access': $out"
  log "nthd check ($1, exit $rc): metadata access: $IMDS_ROW"
  return "$rc"
}

# The mock answers as EC2 does: a 404 with EC2's page while no notice is pending. imdsd 261-262
# cannot pass an error with a body on (io.systemd.System, errno ENOTRECOVERABLE with systemd's
# internal bit): nthd must say so, decoded, with the way out, in its log within 30 s, and the
# NPD plugin must not say "no interruption pending" (its 80 characters say blind).
_imds_limit_named() {
  local says="ENOTRECOVERABLE"
  step "imdsd cannot pass EC2's 404 page on: nthd names it"
  wait_until 30 _logged_since_start "$says" \
    || fail "nthd does not name imdsd's ENOTRECOVERABLE within 30 s: $(_log_since_start | tail -n 5)"
  _logged_since_start "systemd.imds.network=unlocked" || fail "nthd's log does not give the way out"
  log "nthd: $(_log_since_start | grep -m1 -oF "errno 1073741955: $says")"
  wait_until 45 _imds_npd_blind || fail "the NPD line does not say blind: $NPD_LINE"
  log "NPD (nthd status --npd as nobody): $NPD_LINE"
}
_imds_npd_blind() {
  declare -g NPD_LINE
  NPD_LINE="$(ct_exec runuser -u nobody -- /usr/libexec/nthd/nthd status --npd)"
  [[ "$NPD_LINE" == "unknown: nthd is blind"* ]]
}

scen_imds_locked() {
  MOCK_URL="http://100.100.100.200"
  setup_node --no-mock --pre _imds_pre_aws
  step "unlocked, with systemd-imds installed: nthd reads the metadata service directly"
  wait_until 10 _imds_read_since direct "$AWS_SPOT" "$NTHD_START_MS" || fail "nthd does not read $AWS_SPOT directly"
  _imds_check unlocked || fail "nthd check fails on the unlocked host"
  [[ "$(hjq -r .value <<<"$IMDS_ROW")" == direct* ]] || fail "metadata access is not 'direct' on the unlocked host: $IMDS_ROW"
  imds_lock
  expect_imds_locked
  imds_policy_add_owner
  wait_until 10 _imds_read_as_ok nthd /meta-data/instance-id "$IMDS_E2E_ID" \
    || fail "systemd-imds as nthd, with nthd's rule and the annotation: $(imds_read_as nthd /meta-data/instance-id)"
  local out
  out="$(imds_read_as nobody /meta-data/instance-id)" && fail "systemd-imds as nobody read the metadata: $out"
  log "through systemd-imdsd: nthd allowed by its rule; nobody refused ($out)"
  step "nthd (NTHD_IMDS_VIA and NTHD_PROVIDER default auto) started on the locked host"
  nthd_configure "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back"
  wait_until 20 _logged_since_start "$IMDS_SAYS_VENDOR" \
    || fail "nthd does not name the cloud from imdsd's GetVendorInfo: $(_log_since_start | grep -m1 'cloud:')"
  log "nthd: $(_log_since_start | grep -m1 -F "$IMDS_SAYS_VENDOR")"
  wait_until 20 _logged_since_start "$IMDS_SAYS_LOCKED" \
    || fail "nthd does not say '$IMDS_SAYS_LOCKED': $(_log_since_start | tail -n 5)"
  _logged_since_start "$IMDS_SAYS_VARLINK" || fail "nthd does not say '$IMDS_SAYS_VARLINK'"
  log "nthd: $(_log_since_start | grep -m1 -F "$IMDS_SAYS_LOCKED")"
  ! _journal_has "slow or throttling" || fail "nthd blames a slow metadata service on the locked host"
  wait_until 15 _imds_read_since imdsd "$AWS_SPOT" "$NTHD_START_MS" || fail "no read of $AWS_SPOT through imdsd"
  _imds_limit_named
  _imds_check locked || log "nthd check fails on the locked host, as it must while imdsd hides the 404"
  # Reads get through; what imdsd hides is a warning on this row, named.
  [[ "$(hjq -r .value <<<"$IMDS_ROW")" == "locked by systemd-imdsd"* && "$(hjq -r .status <<<"$IMDS_ROW")" == warn ]] \
    || fail "metadata access is not a warning 'locked by systemd-imdsd ...': $IMDS_ROW"
  [[ "$(hjq -r .fix <<<"$IMDS_ROW")" == *"cannot tell \"no notice\" from"* ]] || fail "nthd check does not name imdsd's 404 limit: $IMDS_ROW"
  step "spot terminate notice, read through systemd-imdsd"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 15
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
  (( $(_imds_reads direct "$AWS_SPOT" "$NTHD_START_MS") == 0 )) || fail "a direct read of $AWS_SPOT got through the lock"
  timing "$(_imds_reads imdsd "$AWS_SPOT" "$NTHD_START_MS") reads of $AWS_SPOT through systemd-imdsd"
}

_imds_pre_azure() {
  _imds_veth
  step "mock IMDS on the veth link"
  mock_start || fail "mock IMDS did not start"
  _azure_pre
  step "systemd-imdsd for the mock (Azure, by credentials: data URL, its suffix, Metadata:true)"
  imdsd_configure "${IMDSD_CREDS_AZURE[@]}"
}
# nthd's reads of Scheduled Events through imdsd since it started carry imdsd's suffix and header.
_azure_events_through_imdsd() {
  local n
  n="$(mock_log_jq --argjson since "$NTHD_START_MS" --arg p "$AZURE_EVENTS" --arg q "$IMDS_AZURE_SUFFIX" \
        '[.[] | select(.method == "GET" and .path == $p and .t_ms >= $since and .query == $q
                       and ([.headers[] | select((.[0] | ascii_downcase) == "metadata") | .[1]] | first) == "true"
                       and ([.headers[] | select((.[0] | ascii_downcase) == "user-agent") | .[1]] | first // ""
                            | startswith("systemd-imdsd/")))] | length')" || return 1
  ((n > 0))
}

# An Azure Preempt through imdsd. imdsd only reads (GET): the acknowledgement POST that lets
# Azure go ahead early cannot go through it, nthd says so, and Azure then starts the event at
# its NotBefore time, as it does for a VM that never acknowledges.
scen_imds_locked_azure() {
  MOCK_URL="http://100.100.100.200"
  setup_node --no-mock --provider azure --pre _imds_pre_azure
  imds_lock
  imds_policy_add_owner
  local out
  wait_until 10 _imds_read_as_ok nthd /instance/compute/name "$AZ_VM" \
    || fail "systemd-imds as nthd: $(imds_read_as nthd /instance/compute/name)"
  out="$(ct_exec runuser -u nthd -- curl -sS -m 3 -H Metadata:true "http://$IMDS_ADDR$AZURE_NAME?api-version=2021-02-01" 2>&1)" \
    && fail "curl as nthd reached Azure's metadata through the lock: $out"
  log "direct as nthd refused ($out); /instance/compute/name through imdsd as nthd: $AZ_VM"
  step "nthd started on the locked Azure host"
  nthd_configure NTHD_PROVIDER=azure "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back"
  wait_until 20 _logged_since_start "$IMDS_SAYS_LOCKED" \
    || fail "nthd does not say '$IMDS_SAYS_LOCKED': $(_log_since_start | tail -n 5)"
  wait_until 15 _azure_events_through_imdsd \
    || fail "no read of $AZURE_EVENTS?$IMDS_AZURE_SUFFIX with Metadata: true through imdsd"
  _imds_check azure-locked || fail "nthd check fails on the locked Azure host: $(hjq -c '[.checks[] | select(.status != "pass")]' <"$SDIR/check-azure-locked.json")"
  [[ "$(hjq -r '.value + " " + (.fix // "")' <<<"$IMDS_ROW")" == *"cannot acknowledge"* ]] \
    || fail "nthd check's metadata access does not name the acknowledgement it cannot send: $IMDS_ROW"
  local id; id="$(_azure_event_id)"
  step "Preempt for $AZ_VM (EventId $id), read through systemd-imdsd"
  set_notice "$AZURE_EVENTS" "$(_azure_doc 2 "$id" Preempt "$AZ_VM" 30)"
  expect_poweroff_through_lock 15
  step "no acknowledgement reached the metadata service"
  [[ -s "$SDIR/mock-log.final.json" ]] || fail "the mock's log was not saved at shutdown (mock-log.final.json)"
  [[ -z "$(_azure_acks)" ]] || fail "an acknowledgement POST reached the mock through the lock: $(_azure_acks)"
  _logged_since_start "cannot acknowledge" || fail "nthd's log does not say it cannot acknowledge through systemd-imdsd"
  log "nthd: $(_log_since_start | grep -m1 -F "cannot acknowledge" | cut -c1-400)"
  timing "$(_imds_reads imdsd "$AZURE_EVENTS" "$NTHD_START_MS") reads of Scheduled Events through systemd-imdsd, no acknowledgement"
}

# Text that names what nthd misses on a locked host and the fix: every WORD must be in it.
# Usage: expect_names_missing WHAT TEXT WORD...
expect_names_missing() {
  local what="$1" text="$2" w; shift 2
  for w in "$@"; do
    [[ "$text" == *"$w"* ]] || fail "$what does not name $w: $(tail -c 600 <<<"$text")"
  done
  [[ "$text" != *"slow or throttling"* ]] || fail "$what blames a slow metadata service"
  log "$what names $*"
}

# The locked host as systemd 262.1 ships it (no owner annotation), then with the annotation but
# without nthd's rule: nthd cannot read, and its log, nthd check and nthd once say what is
# missing and the fix; the NPD plugin says unknown, never all clear.
scen_imds_locked_no_grant() {
  MOCK_URL="http://100.100.100.200"
  setup_node --no-mock --pre _imds_pre_aws
  ct_put "$HERE/npd-run.py" npd-run.py >/dev/null
  imds_lock
  expect_imds_locked
  local out
  out="$(imds_read_as nthd /meta-data/instance-id)" && fail "systemd-imds as nthd read the metadata without the annotation: $out"
  log "stock policy, as nthd: $out"
  step "nthd started on the locked host, stock policy (no owner annotation)"
  nthd_configure NTHD_PROVIDER=aws "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back"
  _imds_missing stock-policy io.systemd.imds.get org.freedesktop.policykit.owner
  expect_npd locked-no-grant 2 10
  [[ "$NPD_OUT" == unknown:* ]] || fail "the NPD line on a locked host without the grant: $NPD_OUT"
  imds_policy_add_owner
  remove_grant
  step "annotation present, nthd's rule removed"
  nthd_configure NTHD_PROVIDER=aws "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back"
  _imds_missing no-rule io.systemd.imds.get 50-nthd.rules
  step "nthd's rule back: nthd reads through systemd-imdsd"
  restore_grant
  wait_until 30 _imds_read_since imdsd "$AWS_SPOT" "$(now_ms)" || fail "nthd does not read through imdsd with its rule back"
  expect_nthd_active
}
# nthd's log, nthd check (fails on the row metadata access) and nthd once in the unit's sandbox
# all name each of WORDS. Usage: _imds_missing PHASE WORD...
_imds_missing() {
  local phase="$1" out; shift
  wait_until 20 _logged_since_start "$1" || fail "nthd's log does not name $1 ($phase): $(_log_since_start | tail -n 5)"
  expect_names_missing "nthd's log ($phase)" "$(_log_since_start)" "$IMDS_SAYS_LOCKED" "$@"
  expect_nthd_active
  _imds_check "$phase" && fail "nthd check passes on a locked host without the grant ($phase)"
  [[ "$(hjq -r .status <<<"$IMDS_ROW")" == fail ]] || fail "metadata access is not fail ($phase): $IMDS_ROW"
  expect_names_missing "nthd check ($phase)" "$(hjq -r '.value + " " + (.fix // "")' <<<"$IMDS_ROW")" "$@"
  out="$(in_unit_sandbox once)" && fail "nthd once succeeded on a locked host without the grant ($phase)"
  printf '%s\n' "$out" >"$SDIR/once-$phase.txt"
  expect_names_missing "nthd once ($phase)" "$out" "$@"
}
