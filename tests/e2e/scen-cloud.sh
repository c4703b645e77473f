# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted jq programs
# The other clouds' notices, sourced by run.sh: GCP's preempted flag through the metadata
# long-poll and a maintenance window moved at the last minute, Azure's Scheduled Events (this VM's, another VM's, nthd restarted mid-drain: one
# acknowledgement, after the drain) and Alibaba's termination-time in hardened (token) mode.
# Tencent is in scen-sandbox.sh.

GCP_PREEMPTED=/computeMetadata/v1/instance/preempted
GCP_MAINTENANCE=/computeMetadata/v1/instance/maintenance-event
AZURE_EVENTS=/metadata/scheduledevents
AZURE_NAME=/metadata/instance/compute/name
ALIBABA_SPOT=/latest/meta-data/instance/spot/termination-time
ALIBABA_IMDS="http://100.100.100.200"

# --- GCP: instance/preempted through the metadata long-poll

_gcp_pre() {
  set_route_text "$GCP_PREEMPTED" FALSE || fail "could not set $GCP_PREEMPTED"
  set_route_text "$GCP_MAINTENANCE" NONE || fail "could not set $GCP_MAINTENANCE"
}
# True while nthd has a wait_for_change=true request for PATH open at the
# mock (logged, not answered yet).
_gcp_long_poll_pending() {
  local n
  n="$(mock_log_jq --arg p "$1" --argjson since "$NTHD_START_MS" \
        '[.[] | select(.path == $p and .t_ms >= $since and .status == null
                       and (.query | test("(^|&)wait_for_change=true(&|$)")))] | length')" || return 1
  (( n > 0 ))
}

scen_gcp_preempt() {
  setup_node --provider gcp --pre _gcp_pre
  step "nthd long-polls both keys"
  wait_until 10 _gcp_long_poll_pending "$GCP_PREEMPTED" \
    || fail "nthd has no wait_for_change=true request open on $GCP_PREEMPTED"
  wait_until 5 _gcp_long_poll_pending "$GCP_MAINTENANCE" \
    || fail "nthd has no wait_for_change=true request open on $GCP_MAINTENANCE"
  # A poller would show up as fresh requests while nothing changes; a
  # long-poll as none at all.
  local quiet_from n; quiet_from="$(now_ms)"
  sleep 3
  n="$(mock_requests_since "$GCP_PREEMPTED" "$quiet_from")"
  ((n == 0)) || fail "nthd sent $n requests for $GCP_PREEMPTED in 3 s without a change (polling, not long-polling)"
  log "no new request for $GCP_PREEMPTED in 3 s: the long-poll is holding"
  step "flip instance/preempted to TRUE"
  set_notice --text "$GCP_PREEMPTED" TRUE
  expect_poweroff_through_lock 10 2000
  local prep lp lag; prep="$(kubelet_event_ms prepare)"; lag=$((prep - NOTICE_MS))
  # The answer that carried TRUE: a long-poll sent before the flip and
  # answered by the mock because the value changed.
  lp="$(mock_log_jq -c --arg p "$GCP_PREEMPTED" --argjson flip "$NOTICE_MS" --argjson since "$NTHD_START_MS" \
        '[.[] | select(.path == $p and .t_ms >= $since and .t_ms < $flip
                       and (.query | test("(^|&)wait_for_change=true(&|$)"))
                       and .note == "long poll: value changed" and .status == 200)] | last // empty')"
  [[ -n "$lp" ]] || fail "no wait_for_change=true request on $GCP_PREEMPTED was open at the flip and answered by it"
  log "answered long-poll: $(hjq -r '"\(.method) \(.path)?\(.query) sent \(.t_ms) -> \(.status) (\(.note))"' <<<"$lp")"
  [[ "$(hjq -r '[.headers[] | select((.[0] | ascii_downcase) == "metadata-flavor") | .[1]] | first' <<<"$lp")" == Google ]] \
    || fail "the long-poll lacks Metadata-Flavor: Google"
  # Within ~1 s: one round trip, not a poll interval.
  (( lag <= 1200 )) || fail "PrepareForShutdown $(fmt_ms "$lag") after the flip: slower than a long-poll round trip"
  timing "long-poll open $(fmt_ms $((NOTICE_MS - $(hjq -r .t_ms <<<"$lp")))) before the flip"
}

# --- Azure Scheduled Events

AZ_VM=node-1
# Usage: _azure_doc INCARNATION EVENT_ID EVENT_TYPE RESOURCE NOT_BEFORE_SECS
_azure_doc() {
  local nb; nb="$(date -u -d "+$5 sec" '+%a, %d %b %Y %H:%M:%S GMT')"
  printf '{"DocumentIncarnation":%s,"Events":[{"EventId":"%s","EventStatus":"Scheduled","EventType":"%s","ResourceType":"VirtualMachine","Resources":["%s"],"NotBefore":"%s","Description":"Virtual machine is being preempted.","EventSource":"Platform","DurationInSeconds":-1}]}' \
    "$1" "$2" "$3" "$4" "$nb"
}
_azure_event_id() { tr 'a-f' 'A-F' </proc/sys/kernel/random/uuid; }
_azure_pre() {
  set_route_text "$AZURE_NAME" "$AZ_VM" || fail "could not set $AZURE_NAME"
  set_route "$AZURE_EVENTS" '{"DocumentIncarnation":1,"Events":[]}' || fail "could not set $AZURE_EVENTS"
}
# nthd read this VM's name (200) since it was configured.
_azure_name_read() {
  local n
  n="$(mock_log_jq --arg p "$AZURE_NAME" --argjson since "$NTHD_START_MS" \
        '[.[] | select(.method == "GET" and .path == $p and .t_ms >= $since and .status == 200)] | length')" || return 1
  (( n > 0 ))
}
# Acknowledgements (POST /metadata/scheduledevents) in the mock's log, JSON lines.
_azure_acks() {
  mock_log_jq -c --arg p "$AZURE_EVENTS" '.[] | select(.method == "POST" and .path == $p)'
}

scen_azure_preempt_this_vm() {
  setup_node --provider azure --pre _azure_pre
  wait_until 10 _azure_name_read || fail "nthd did not read its VM name from $AZURE_NAME"
  local id; id="$(_azure_event_id)"
  step "Preempt for $AZ_VM (EventId $id)"
  set_notice "$AZURE_EVENTS" "$(_azure_doc 2 "$id" Preempt "$AZ_VM" 30)"
  expect_poweroff_through_lock 10 2000
  step "acknowledgement sent when systemd stopped nthd"
  [[ -s "$SDIR/mock-log.final.json" ]] || fail "the mock's log was not saved at shutdown (mock-log.final.json)"
  local acks n ack body drained released t
  acks="$(_azure_acks)"; n="$(grep -c . <<<"$acks" || true)"
  ((n == 1)) || fail "expected exactly one acknowledgement POST, the mock logged $n: $acks"
  ack="$acks"
  body="$(hjq -r .body <<<"$ack")"
  log "acknowledgement: $(hjq -r '"\(.method) \(.path)?\(.query) at \(.t_ms) -> \(.status)"' <<<"$ack") body $body"
  hjq -e --arg id "$id" '. == {"StartRequests":[{"EventId":$id}]}' <<<"$body" >/dev/null \
    || fail "acknowledgement body is not StartRequests for exactly $id: $body"
  [[ "$(hjq -r '[.headers[] | select((.[0] | ascii_downcase) == "metadata") | .[1]] | first' <<<"$ack")" == true ]] \
    || fail "the acknowledgement lacks the Metadata: true header"
  [[ "$(hjq -r .status <<<"$ack")" == 200 ]] || fail "the mock answered the acknowledgement with $(hjq -r .status <<<"$ack")"
  drained="$(kubelet_event_ms drained)"; released="$(kubelet_event_ms released)"; t="$(hjq -r .t_ms <<<"$ack")"
  (( t >= drained )) || fail "acknowledged $(fmt_ms $((drained - t))) BEFORE the stand-in finished draining"
  (( t >= released )) || fail "acknowledged $(fmt_ms $((released - t))) before the stand-in released its lock"
  (( t <= CT_EXIT_MS )) || fail "acknowledgement logged after the halt?!"
  timing "ack +$(fmt_ms $((t - drained))) after drained"
}

scen_azure_other_vm() {
  setup_node --provider azure --pre _azure_pre
  wait_until 10 _azure_name_read || fail "nthd did not read its VM name from $AZURE_NAME (the window would prove nothing)"
  local id; id="$(_azure_event_id)"
  step "Preempt for node-2 only (EventId $id)"
  set_notice "$AZURE_EVENTS" "$(_azure_doc 2 "$id" Preempt node-2 30)"
  expect_no_poweroff 15
  expect_nthd_active
  (( $(ct_journal -u nthd | grep -cF "this VM is \"$AZ_VM\"") > 0 )) \
    || fail "nthd's journal does not say it knows its VM name ($AZ_VM)"
  local polls; polls="$(mock_requests_since "$AZURE_EVENTS" "$NOTICE_MS")"
  log "nthd fetched $AZURE_EVENTS $polls times during the window"
  ((polls > 0)) || fail "nthd never fetched $AZURE_EVENTS during the window"
  [[ -z "$(_azure_acks)" ]] || fail "nthd acknowledged an event for another VM: $(_azure_acks)"
  # Stopping nthd (the moment it would acknowledge its own events) must not
  # acknowledge this one either.
  ct_exec systemctl stop nthd || fail "systemctl stop nthd"
  [[ -z "$(_azure_acks)" ]] || fail "nthd acknowledged an event for another VM when stopped: $(_azure_acks)"
  save_mock_state
  timing "window 15s, $polls polls, no ack"
}

# --- Alibaba Cloud spot termination-time, hardened (token) mode

_alibaba_pre() {
  # Token required for Alibaba; AWS tokens optional, else every tokenless
  # /latest/ request would get 401 for AWS' sake.
  mock_config '{"alibaba_token":"required","aws_token":"optional"}' || fail "could not configure the mock's token modes"
}

scen_alibaba_spot() {
  setup_node --provider alibaba --endpoint "$ALIBABA_IMDS" --pre _alibaba_pre
  step "termination-time 5 min ahead"
  set_notice --text "$ALIBABA_SPOT" "$(iso_in 300)"
  expect_poweroff_through_lock 10 2000
  step "token PUT and token header on the read"
  local put read
  put="$(mock_log_jq -c --argjson since "$NTHD_START_MS" \
        '[.[] | select(.method == "PUT" and .path == "/latest/api/token" and .t_ms >= $since
                       and ([.headers[][0] | ascii_downcase] | index("x-aliyun-ecs-metadata-token-ttl-seconds")))] | first // empty')"
  [[ -n "$put" ]] || fail "no token PUT with X-aliyun-ecs-metadata-token-ttl-seconds from nthd"
  log "token PUT: $(hjq -r '"\(.local) \(.method) \(.path) -> \(.status) (\(.note))"' <<<"$put")"
  [[ "$(hjq -r .status <<<"$put")" == 200 ]] || fail "token PUT answered $(hjq -r .status <<<"$put")"
  [[ "$(hjq -r .local <<<"$put")" == 100.100.100.200:* ]] || fail "nthd did not use $ALIBABA_IMDS: $(hjq -r .local <<<"$put")"
  read="$(mock_log_jq -c --arg p "$ALIBABA_SPOT" --argjson since "$NOTICE_MS" \
        '[.[] | select(.method == "GET" and .path == $p and .t_ms >= $since and .status == 200)] | first // empty')"
  [[ -n "$read" ]] || fail "no 200 read of $ALIBABA_SPOT after the notice"
  [[ -n "$(hjq -r '[.headers[] | select((.[0] | ascii_downcase) == "x-aliyun-ecs-metadata-token") | .[1]] | first // empty' <<<"$read")" ]] \
    || fail "the read of $ALIBABA_SPOT carried no X-aliyun-ecs-metadata-token"
  local n401; n401="$(mock_log_jq --arg p "$ALIBABA_SPOT" --argjson since "$NTHD_START_MS" \
        '[.[] | select(.path == $p and .t_ms >= $since and .status == 401)] | length')"
  ((n401 == 0)) || fail "$n401 reads of $ALIBABA_SPOT were refused (401): nthd read without its token"
  timing "token PUT at +$(fmt_ms $(( $(hjq -r .t_ms <<<"$put") - NTHD_START_MS ))) after start"
}

# --- Azure: a restart of nthd in the middle of the drain acknowledges nothing;
# the real shutdown's stop acknowledges once.

# shellcheck disable=SC2034  # the local E2E_DRAIN_SECS is read by lib.sh's kubelet_start
scen_azure_restart_mid_drain() {
  local E2E_DRAIN_SECS=15
  setup_node --provider azure --pre _azure_pre
  wait_until 10 _azure_name_read || fail "nthd did not read its VM name from $AZURE_NAME"
  local id prep restarted acks n ack t released
  id="$(_azure_event_id)"
  step "Preempt for $AZ_VM (EventId $id)"
  set_notice "$AZURE_EVENTS" "$(_azure_doc 2 "$id" Preempt "$AZ_VM" 60)"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown"
  step "systemctl restart nthd while kubelet drains"
  ct_exec systemctl restart nthd || fail "systemctl restart nthd during the drain"
  restarted="$(now_ms)"
  wait_until 10 nthd_active || fail "nthd did not come back after the restart"
  (( $(nthd_journal_count "not acknowledging $id") > 0 )) \
    || fail "the stopped nthd did not say it held back the acknowledgement"
  [[ -z "$(_azure_acks)" ]] || fail "a restart mid-drain acknowledged: $(_azure_acks)"
  timing "restart +$(fmt_ms $((restarted - prep))) into the drain, no ack"
  expect_poweroff_through_lock 5
  step "the real shutdown acknowledged once, after the drain"
  acks="$(_azure_acks)"; n="$(grep -c . <<<"$acks" || true)"
  ((n == 1)) || fail "expected exactly one acknowledgement, the mock logged $n: $acks"
  ack="$acks"; t="$(hjq -r .t_ms <<<"$ack")"; released="$(kubelet_event_ms released)"
  hjq -e --arg id "$id" '(.body | fromjson) == {"StartRequests":[{"EventId":$id}]}' <<<"$ack" >/dev/null \
    || fail "the acknowledgement is not StartRequests for $id: $ack"
  (( t >= released )) || fail "acknowledged $(fmt_ms $((released - t))) before the lock was released"
  timing "ack +$(fmt_ms $((t - released))) after release"
}

# --- GCP: Google moves a maintenance window at the last minute (docs/clouds.md, GCP). With
# TERMINATE_ON_HOST_MAINTENANCE listed and instance/upcoming-maintenance starting 40 s ahead,
# logind's 10 s budget and a 2 s margin, nthd plans the power-off 28 s ahead, at the last safe
# moment. 6 s before it the window moves 20 s later; the regular re-read is a minute away
# (NTHD_SLOW_POLL_INTERVAL=1m), so only nthd's read just before acting can see the move. No
# shutdown at the first planned time; one at the moved one.

GCP_UPCOMING=/computeMetadata/v1/instance/upcoming-maintenance
# A window starting at epoch second START, an hour long.
_gcp_window() {
  printf '{"can_reschedule":"true","maintenance_status":"PENDING","type":"SCHEDULED","window_start_time":"%s","window_end_time":"%s"}' \
    "$(date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ)" "$(date -u -d "@$(($1 + 3600))" +%Y-%m-%dT%H:%M:%SZ)"
}
_gcp_window_pre() {
  _gcp_pre
  set_route "$GCP_UPCOMING" '{ }' || fail "could not set $GCP_UPCOMING"
}

# shellcheck disable=SC2034  # E2E_INHIBIT_DELAY is read by lib.sh
scen_gcp_window_moved() {
  local E2E_INHIBIT_DELAY=10 start planned moved prep
  setup_node --provider gcp --pre _gcp_window_pre --env NTHD_SAFETY_MARGIN=2s \
    --env NTHD_SLOW_POLL_INTERVAL=1m
  wait_until 10 _gcp_long_poll_pending "$GCP_MAINTENANCE" \
    || fail "nthd has no wait_for_change=true request open on $GCP_MAINTENANCE"
  step "a maintenance window 40 s ahead, then TERMINATE_ON_HOST_MAINTENANCE"
  start=$(( $(now_ms) / 1000 + 40 ))
  planned=$(( (start - 12) * 1000 ))   # the budget (10 s) and the margin (2 s) before it
  set_route "$GCP_UPCOMING" "$(_gcp_window "$start")" || fail "could not set the window"
  set_notice --text "$GCP_MAINTENANCE" TERMINATE_ON_HOST_MAINTENANCE
  wait_until 5 _nthd_logged "at the last safe moment" \
    || fail "nthd did not defer the power-off to the last safe moment: $(ct_journal -u nthd | tail -n 3)"
  sleep "$(( (planned - 6000 - $(now_ms)) / 1000 ))"
  step "6 s before the planned power-off: the window moves 20 s later"
  set_route "$GCP_UPCOMING" "$(_gcp_window $((start + 20)))" || fail "could not move the window"
  moved=$((planned + 20000))
  no_prepare_for $(( (planned + 3000 - $(now_ms)) / 1000 )) \
    || fail "a shutdown began at the first planned time, though the window had moved"
  _nthd_logged "the maintenance now starts" || fail "nthd did not say the window moved"
  prep="$(wait_for_prepare 25)" || fail "no shutdown at the moved window's last safe moment"
  (( prep >= moved - 500 && prep <= moved + 3000 )) \
    || fail "the shutdown began $(fmt_ms $((prep - moved))) from the moved window's last safe moment"
  timing "window moved 20 s, 6 s before the plan; shutdown $(fmt_ms $((prep - moved))) from the moved plan"
  ct_wait_exit 30 || fail "the node did not power off"
}
