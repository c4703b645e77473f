# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs run inside the container
# Scenarios of what nthd shows, sourced by run.sh: `nthd simulate` as user nthd (a drill, visible
# as one at the webhook, in the status file and the journal) and observability (status, the NPD
# plugin, CloudEvents webhooks, node_exporter).  scen-health.sh uses NTHD_STATUS and expect_npd.

# --- nthd simulate, as user nthd: the real polkit grant

# A drill is visible like a real action, marked as one: the webhook (NTHD_WEBHOOK from
# /etc/default/nthd, as the daemon reads it), the daemon's status file, the journal.
# shellcheck disable=SC2034  # the local E2E_DRAIN_SECS is read by lib.sh's kubelet_start
scen_simulate() {
  local E2E_DRAIN_SECS=15
  wheels_fetch || fail "could not download the CloudEvents SDK's wheels (pip download)"
  setup_node --pre _identity_and_receiver --env "NTHD_WEBHOOK=$WEBHOOK_URL"
  wait_until 10 _status_identity || fail "$NTHD_STATUS does not name the instance: $(ct_exec cat "$NTHD_STATUS" | hjq -c .instance)"
  local out rc
  step "nthd simulate spot-terminate (no --yes)"
  out="$(ct_exec runuser -u nthd -- /usr/bin/nthd simulate spot-terminate </dev/null 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/simulate-dry.txt"
  indent <<<"$out" >&2
  ((rc == 0)) || fail "nthd simulate (dry run) exited $rc"
  grep -q 'dry run' <<<"$out" || fail "nthd simulate without --yes does not say dry run"
  expect_no_poweroff 3
  step "nthd simulate spot-terminate --yes (stdin not a terminal)"
  NOTICE_MS="$(now_ms)"
  out="$(ct_exec runuser -u nthd -- env NTHD_LOG_TARGET=journald /usr/bin/nthd simulate spot-terminate --yes </dev/null 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/simulate-yes.txt"
  indent <<<"$out" >&2
  ((rc == 0)) || fail "nthd simulate --yes exited $rc: $out"
  grep -q 'logind accepted PowerOff' <<<"$out" || fail "nthd simulate --yes did not report the PowerOff as accepted"
  drill_visible
  # The drill took the executor's path: real logind is now preparing for shutdown (the
  # stand-in's drain), so a second drill stands down; run as root, it hands the state file
  # back to user nthd.
  step "a second drill, as root, during the first one's drain"
  out="$(ct_exec /usr/bin/nthd simulate spot-terminate --yes </dev/null 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/simulate-again.txt"
  ((rc == 0)) || fail "the second drill exited $rc: $out"
  grep -q 'stood down: logind is already preparing for shutdown' <<<"$out" || fail "the second drill did not stand down: $out"
  local st owner
  st="$(ct_exec cat /var/lib/nthd/state.json)"
  grep -q '"id": "simulate/spot-terminate/' <<<"$st" || fail "no drill record in /var/lib/nthd/state.json: $st"
  owner="$(ct_exec stat -c %U /var/lib/nthd/state.json)"
  [[ "$owner" == nthd ]] || fail "root's drill left /var/lib/nthd/state.json owned by $owner, not nthd"
  log "second drill stood down; drill record in the state file, owned by $owner"
  owner="$(ct_exec stat -c '%a %U' "$NTHD_STATUS")"
  [[ "$owner" == "644 nthd" ]] || fail "root's drill left $NTHD_STATUS $owner, not 644 nthd"
  [[ "$(ct_exec cat "$NTHD_STATUS" | hjq '[.actions[] | select(.drill and .result == "already_shutting_down")] | length')" == 1 ]] \
    || fail "$NTHD_STATUS does not list the second drill's stand-down: $(ct_exec cat "$NTHD_STATUS" | hjq -c .actions)"
  expect_poweroff_through_lock 10 2000
}

# The receiver validated an io.nthd.action for the drill, marked as one (the CloudEvents
# extension attribute nthddrill and data.drill), naming the instance.
_receiver_has_drill_action() {
  hjq -e 'select(.ok and .type == "io.nthd.action" and .kind == "spot-terminate" and .data.drill == true
                 and (.data.notice.id | startswith("simulate/spot-terminate/")))' "$SDIR/receiver.jsonl" >/dev/null 2>&1
}

# After the first drill: its action is at the webhook, in the daemon's status file and in the
# journal, each marked as a drill.
drill_visible() {
  step "the drill is visible: webhook, $NTHD_STATUS, journal"
  wait_until 10 _receiver_has_drill_action || fail "the receiver got no io.nthd.action marked as a drill: $(cat "$SDIR/receiver.jsonl" 2>/dev/null)"
  [[ "$(hjq -rs 'map(select(.ok and .type == "io.nthd.action" and .data.drill)) | first | .data.result.outcome' "$SDIR/receiver.jsonl")" == accepted ]] \
    || fail "the drill's action event does not say accepted"
  log "webhook: $(hjq -c 'select(.ok and .type == "io.nthd.action") | {type, kind, subject, drill: .data.drill, outcome: .data.result.outcome}' "$SDIR/receiver.jsonl")"
  local st line
  st="$(ct_exec cat "$NTHD_STATUS")"
  line="$(hjq -c '[.actions[] | select(.drill and .result == "accepted" and (.notice_id | startswith("simulate/spot-terminate/")))] | first // empty' <<<"$st")"
  [[ -n "$line" ]] || fail "$NTHD_STATUS lists no accepted drill action: $(hjq -c .actions <<<"$st")"
  log "status: $line"
  line="$(journal_json "$MSG_ACTION" | hjq -c 'select(.NTHD_DRILL == "true") | {MESSAGE, NTHD_DRILL, NTHD_NOTICE_ID}' | head -n1)"
  [[ "$line" == *'fire drill: action poweroff for spot-terminate: called'* ]] \
    || fail "no journal entry MESSAGE_ID=$MSG_ACTION with NTHD_DRILL=true saying fire drill: $(journal_json "$MSG_ACTION" | hjq -c '{MESSAGE, NTHD_DRILL}')"
  log "journal: $line"
}

# --- Observability: `nthd status`, the node-problem-detector plugin, CloudEvents
# webhooks and node_exporter, all on one node.  nthd is configured as a user would: webhook
# and textfile in /etc/default/nthd, the drop-ins of docs/observability.md for the unit.  Before a notice the
# NPD plugin says 0; a scheduled stop far ahead (deferred, so there is time) makes it 1 with
# the kind and deadline, and node_exporter serves the deadline; a rebalance recommendation
# (logged only) leaves it 0; the scheduled stop withdrawn brings it back to 0; nthd stopped
# makes it 2.  Then a spot terminate: the CloudEvents SDK validates every event, the notice
# event arrives before logind powers off and the action event after logind's PowerOff.

RECEIVER=127.0.0.1:8099
WEBHOOK_URL="http://$RECEIVER/events"
AWS_INSTANCE_ID="i-0123456789abcdef0"         # the mock's identity (testkit)
NTHD_TEXTFILE_DIR=/var/lib/node_exporter/textfile_collector   # docs/observability.md, "Metrics"
NPD_CONFIG=/usr/share/nthd/node-problem-detector/nthd-monitor.json
NTHD_STATUS=/run/nthd/status.json
NODE_EXPORTER=127.0.0.1:9100
OBS_CE_DIR=/opt/e2e-cloudevents

_receiver_up() { ct_exec curl -sf -m 2 -o /dev/null "http://$RECEIVER/health"; }
_node_exporter_up() { ct_exec curl -sf -m 2 -o /dev/null "http://$NODE_EXPORTER/metrics"; }

# The instance's identity on the mock, the CloudEvents SDK and its receiver (ce-receiver).
_identity_and_receiver() {
  local t0; t0="$(now_ms)"
  step "the instance's identity on the mock (what status, nthd_info and the events name)"
  local kv
  for kv in "instance-id=$AWS_INSTANCE_ID" instance-type=m5.large \
            placement/availability-zone=us-east-1a instance-life-cycle=spot; do
    set_route_text "/latest/meta-data/${kv%%=*}" "${kv#*=}" || fail "could not set /latest/meta-data/${kv%%=*}"
  done
  step "CloudEvents SDK: pip (from its wheel) installs the host's cached wheels, --no-index"
  wheels_install_in_ct "$OBS_CE_DIR" || fail "could not install the CloudEvents SDK into the container"
  log "cloudevents $(ct_exec env PYTHONPATH="$OBS_CE_DIR" python3 -c 'import cloudevents; print(cloudevents.__version__)') in $(fmt_ms $(( $(now_ms) - t0 )))"
  ct_put "$HERE/receiver.py" receiver.py >/dev/null
  ct_put "$HERE/npd-run.py" npd-run.py >/dev/null
  # Before=nthd.service: at the shutdown systemd stops nthd first and the receiver after it,
  # so an action event sent while the stand-in drains still finds it (as for the mock).
  ct_exec systemd-run --quiet --unit=ce-receiver --service-type=simple -p Before=nthd.service \
    -p StandardOutput=journal -p StandardError=journal -p "Environment=PYTHONPATH=$OBS_CE_DIR" \
    python3 /e2e/bin/receiver.py --listen "$RECEIVER" --path /events --log /e2e/receiver.jsonl \
    --instance-id "$AWS_INSTANCE_ID" || fail "could not start the receiver"
  wait_until 10 _receiver_up || fail "the CloudEvents receiver did not come up: $(ct_journal -u ce-receiver | tail -n 5)"
}

# Before nthd is configured: the SDK, the receiver, the drop-ins, node_exporter.
_obs_pre() {
  local t0; t0="$(now_ms)"
  _identity_and_receiver
  step "nthd.service drop-ins: webhook.conf (docs/observability.md), the textfile directory"
  ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
         printf "[Service]\nIPAddressAllow=localhost\n" >/etc/systemd/system/nthd.service.d/webhook.conf &&
         printf "[Service]\nReadWritePaths=/var/lib/node_exporter\n" >/etc/systemd/system/nthd.service.d/textfile.conf &&
         install -d -o nthd -g nthd -m 0755 "$1" && systemctl daemon-reload' "$NTHD_TEXTFILE_DIR" \
    || fail "could not write nthd's drop-ins"
  step "node_exporter: Debian's unit, its textfile collector on $NTHD_TEXTFILE_DIR"
  ct_sh 'printf "ARGS=\"--collector.textfile.directory=%s --web.listen-address=%s\"\n" "$1" "$2" \
           >/etc/default/prometheus-node-exporter && systemctl start prometheus-node-exporter' \
    "$NTHD_TEXTFILE_DIR" "$NODE_EXPORTER" || fail "could not start prometheus-node-exporter"
  wait_until 10 _node_exporter_up || fail "node_exporter does not answer on $NODE_EXPORTER"
  timing "pre $(fmt_ms $(( $(now_ms) - t0 )))"
}

# One round of the shipped NPD config's rules, exec'd as NPD does (tests/e2e/npd-run.py), as
# user nobody.  Appends to npd-sequence.jsonl; every rule but GracefulNodeShutdownInProgress's
# (True only once logind accepted a power action) must exit alike; prints its exit code and
# output (tab-separated).  Usage: npd_round PHASE
npd_round() {
  local phase="$1" out codes
  out="$(ct_exec runuser -u nobody -- python3 /e2e/bin/npd-run.py "$NPD_CONFIG")" \
    || fail "npd-run.py failed as nobody: $out"
  hjq -c --arg p "$phase" '. + {phase: $p}' <<<"$out" >>"$SDIR/npd-sequence.jsonl"
  codes="$(hjq -sc '[.[] | select(.condition != "GracefulNodeShutdownInProgress") | .exit_code] | unique' <<<"$out")"
  [[ "$codes" =~ ^\[-?[0-9]+\]$ ]] || fail "the NPD rules disagree ($phase): $out"
  hjq -rs '.[0] | "\(.exit_code)\t\(.output)"' <<<"$out"
}
# The exit code and output (tab-separated) of CONDITION's rule in PHASE's last round.
# Usage: npd_rule PHASE CONDITION
npd_rule() {
  hjq -rs --arg p "$1" --arg c "$2" '[.[] | select(.phase == $p and .condition == $c)] | last
    | "\(.exit_code)\t\(.output)"' "$SDIR/npd-sequence.jsonl"
}
# Usage: expect_npd PHASE CODE [TIMEOUT_S]: the rules exit CODE, within TIMEOUT_S (polling).
NPD_OUT=""
expect_npd() {
  local phase="$1" want="$2" timeout="${3:-0}" got deadline
  deadline=$(( $(now_ms) + timeout * 1000 ))
  while :; do
    got="$(npd_round "$phase")"
    [[ "${got%%$'\t'*}" == "$want" ]] && break
    (( $(now_ms) < deadline )) || fail "NPD plugin ($phase): exit ${got%%$'\t'*}, not $want: ${got#*$'\t'}"
    sleep 0.5
  done
  NPD_OUT="${got#*$'\t'}"
  log "NPD plugin ($phase): exit $want: $NPD_OUT"
}

_status_identity() {
  [[ "$(ct_exec cat "$NTHD_STATUS" | hjq -r '.instance | "\(.id) \(.type) \(.zone) \(.lifecycle)"')" \
       == "$AWS_INSTANCE_ID m5.large us-east-1a spot" ]]
}
# nthd's status file lists a notice of KIND (whatever its place in the schema).
_status_lists() {
  ct_exec cat "$NTHD_STATUS" 2>/dev/null | hjq -e --arg k "$1" '[.. | objects | select(.kind? == $k)] | length > 0' >/dev/null
}
_node_exporter_metric() { ct_exec curl -sf -m 2 "http://$NODE_EXPORTER/metrics" | grep -E "^$1( |\{)" ; }
_receiver_has() { hjq -e --arg t "$1" --arg k "$2" 'select(.ok and .type == $t and .kind == $k)' \
                    "$SDIR/receiver.jsonl" >/dev/null 2>&1; }
_receiver_probed() { hjq -e 'select(.probe and .ok)' "$SDIR/receiver.jsonl" >/dev/null 2>&1; }
# Realtime (ms) of the first journal entry of UNIT whose MESSAGE matches REGEX: when the process
# logged it (_SOURCE_REALTIME_TIMESTAMP), else when journald received it.
journal_first_ms() {
  local us
  us="$(journalctl -D "$SDIR/journal" -q --no-pager -o json -u "$1" -g "$2" 2>/dev/null | head -n1 |
        hjq -r '._SOURCE_REALTIME_TIMESTAMP // .__REALTIME_TIMESTAMP')"
  [[ "$us" =~ ^[0-9]+$ ]] && echo $((us / 1000))
}

# Idle: the status file, the NPD plugin at 0, nthd check's webhook probe, node_exporter.
_obs_idle() {
  step "idle: status file, NPD plugin 0, nthd check probes the webhook, node_exporter reads the textfile"
  wait_until 10 ct_exec test -s "$NTHD_STATUS" || fail "nthd wrote no $NTHD_STATUS"
  [[ "$(ct_exec stat -c '%a %U' "$NTHD_STATUS")" == "644 nthd" ]] || fail "$NTHD_STATUS is $(ct_exec stat -c '%a %U' "$NTHD_STATUS"), not 644 nthd"
  [[ "$(ct_exec cat "$NTHD_STATUS" | hjq .schema)" == 1 ]] || fail "$NTHD_STATUS has no \"schema\": 1"
  wait_until 5 _status_identity || fail "$NTHD_STATUS does not name the instance: $(ct_exec cat "$NTHD_STATUS" | hjq -c .instance)"
  expect_npd idle 0
  obs_check_in_sandbox
  wait_until 10 _node_exporter_metric nthd_info >/dev/null || fail "node_exporter does not serve nthd_info from the textfile"
  _node_exporter_metric node_textfile_scrape_error >"$SDIR/ne-idle.txt"
  [[ "$(awk '{print $NF}' "$SDIR/ne-idle.txt")" == 0 ]] || fail "node_textfile_scrape_error: $(cat "$SDIR/ne-idle.txt")"
  log "node_exporter: $(_node_exporter_metric nthd_info)"
}

# A deferred scheduled stop 10 min ahead, then canceled: NPD 1 then 0, the status screens, the
# deadline metric, io.nthd.notice and io.nthd.canceled.  (The rebalance recommendation listed
# before it is logged only: NPD stays 0.)
_obs_scheduled() {
  step "a rebalance recommendation (logged, not acted on): NPD stays 0"
  set_route "$AWS_REBALANCE" "{\"noticeTime\":\"$(iso_in 0)\"}" || fail "set rebalance route"
  wait_until 10 _status_lists rebalance || fail "the status file never listed the rebalance recommendation"
  expect_npd rebalance 0

  step "a scheduled instance-stop 10 min ahead (deferred): NPD 1, status screens, deadline metric"
  local nb deadline_iso line v
  nb=$(( $(date +%s) + 600 ))
  deadline_iso="$(date -u -d "@$nb" +%Y-%m-%dT%H:%M:%SZ)"
  OBS_SCHED="{\"NotBefore\":\"$(date -u -d "@$nb" '+%d %b %Y %H:%M:%S GMT')\",\"Code\":\"instance-stop\",\"EventId\":\"instance-event-e2eobs\",\"State\":\"active\",\"Description\":\"The instance is scheduled for stop\"}"
  set_notice "$AWS_SCHEDULED" "[$OBS_SCHED]"
  expect_npd scheduled 1 10
  line="$(ct_exec runuser -u nobody -- /usr/bin/nthd status --npd)" && fail "nthd status --npd exited 0 during the notice"
  # NPD cuts at max_output_length BYTES (Go string): count bytes, not characters.
  (( $(printf %s "$line" | wc -c) <= 80 )) || fail "nthd status --npd printed $(printf %s "$line" | wc -c) bytes (NPD keeps 80): $line"
  [[ "$line" == "$NPD_OUT" ]] || fail "nthd status --npd printed '$line' by hand, '$NPD_OUT' through the NPD runner"
  [[ "$line" == *scheduled-stop* ]] || fail "nthd status --npd does not name the kind: $line"
  [[ "$line" == *"${deadline_iso:11:8}"* ]] || fail "nthd status --npd does not name the deadline ($deadline_iso): $line"
  # Kubernetes' words for the same (KEP-5683): planned, the cloud named; no shutdown asked yet.
  [[ "$(npd_rule scheduled MaintenancePlanned)" == $'1\taws scheduled-stop: '* ]] \
    || fail "MaintenancePlanned is not True naming aws scheduled-stop: $(npd_rule scheduled MaintenancePlanned)"
  [[ "$(npd_rule scheduled GracefulNodeShutdownInProgress)" == 0$'\t'* ]] \
    || fail "GracefulNodeShutdownInProgress is not False before any shutdown: $(npd_rule scheduled GracefulNodeShutdownInProgress)"
  ct_exec runuser -u nobody -- /usr/bin/nthd status >"$SDIR/status-screen.txt" 2>"$SDIR/status-screen.stderr" \
    || fail "nthd status as nobody exited non-zero with a fresh status file: $(cat "$SDIR/status-screen.stderr")"
  ct_exec runuser -u nobody -- /usr/bin/nthd status --json >"$SDIR/status.json" || fail "nthd status --json failed as nobody"
  ct_exec cp "$NTHD_STATUS" /e2e/status-file.json || fail "cannot copy $NTHD_STATUS"
  hjq -e '.schema == 1' "$SDIR/status.json" >/dev/null || fail "nthd status --json: schema is not 1"
  grep -q "$AWS_INSTANCE_ID" "$SDIR/status-screen.txt" || fail "the status screen does not show the instance id"
  grep -q scheduled-stop "$SDIR/status-screen.txt" || fail "the status screen does not show the notice"
  log "nthd status, as nobody, during the notice:"; indent <"$SDIR/status-screen.txt" >&2
  wait_until 10 _node_exporter_metric nthd_termination_deadline_timestamp_seconds >/dev/null \
    || fail "node_exporter does not serve nthd_termination_deadline_timestamp_seconds during the notice"
  v="$(_node_exporter_metric nthd_termination_deadline_timestamp_seconds | awk '{print $NF}' | head -n1)"
  [[ "$(awk -v v="$v" 'BEGIN { printf "%d", v }')" == "$nb" ]] || fail "deadline metric $v, not NotBefore $nb"
  _node_exporter_metric 'node_textfile_scrape_error' | grep -q ' 0$' || fail "node_textfile_scrape_error is not 0 during the notice"
  ct_exec curl -sf -m 2 "http://$NODE_EXPORTER/metrics" | grep -E '^(node_textfile|nthd_)' >"$SDIR/ne-notice.txt"
  wait_until 10 _receiver_has io.nthd.notice scheduled-stop || fail "no io.nthd.notice for the scheduled stop at the receiver"

  step "the scheduled stop canceled (AWS keeps it listed, State canceled): NPD back to 0, an io.nthd.canceled"
  set_route "$AWS_SCHEDULED" "[${OBS_SCHED/\"State\":\"active\"/\"State\":\"canceled\"}]" || fail "could not cancel the scheduled event"
  expect_npd withdrawn 0 10
  wait_until 10 _receiver_has io.nthd.canceled scheduled-stop || fail "no io.nthd.canceled for the withdrawn scheduled stop"
  del_route "$AWS_REBALANCE" || true
}

# nthd stopped: NPD 2 (no status file); started again: 0.
_obs_stopped() {
  step "nthd stopped: NPD 2 (no status); started again: 0"
  ct_exec systemctl stop nthd || fail "systemctl stop nthd"
  expect_npd stopped 2
  ct_exec runuser -u nobody -- /usr/bin/nthd status >"$SDIR/status-stopped.txt" 2>&1 \
    && fail "nthd status exited 0 with nthd stopped"
  grep -qi 'not running' "$SDIR/status-stopped.txt" || fail "nthd status does not say nthd is not running: $(cat "$SDIR/status-stopped.txt")"
  obs_stale_status
  ct_exec systemctl start nthd || fail "systemctl start nthd"
  expect_npd restarted 0 10
}
# shellcheck disable=SC2034  # the local E2E_INHIBIT_DELAY is read by lib.sh's logind_set_inhibit_delay
scen_observability() {
  local E2E_INHIBIT_DELAY=10
  wheels_fetch || fail "could not download the CloudEvents SDK's wheels (pip download)"
  setup_node --pre _obs_pre --env "NTHD_WEBHOOK=$WEBHOOK_URL" \
    --env "NTHD_METRICS_TEXTFILE=$NTHD_TEXTFILE_DIR/nthd.prom" --env NTHD_SLOW_POLL_INTERVAL=1s
  local t0
  t0="$(now_ms)"
  [[ "$(ct_exec systemctl show -p IPAddressAllow --value nthd)" == *127.0.0.0/8* ]] \
    || fail "webhook.conf is not in effect: IPAddressAllow=$(ct_exec systemctl show -p IPAddressAllow --value nthd)"
  ct_exec test -r "$NPD_CONFIG" || fail "the package does not ship $NPD_CONFIG"
  ct_exec cat "$NPD_CONFIG" >"$SDIR/nthd-monitor.json"
  _obs_idle
  _obs_scheduled
  _obs_stopped
  timing "status/NPD/node_exporter phases $(fmt_ms $(( $(now_ms) - t0 )))"

  step "spot terminate: webhooks around logind's PowerOff"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  # While kubelet's stand-in holds its delay lock, logind has accepted: the condition is True.
  wait_until 10 _obs_shutdown_condition || fail "GracefulNodeShutdownInProgress never turned True during the drain"
  expect_poweroff_through_lock 10 2000
  obs_webhook_timings
}

# Whether `nthd status --npd=graceful-node-shutdown-in-progress`, as nobody, says True.
_obs_shutdown_condition() {
  local line rc
  line="$(ct_exec runuser -u nobody -- /usr/bin/nthd status --npd=graceful-node-shutdown-in-progress)" && rc=0 || rc=$?
  ((rc == 1)) && log "GracefulNodeShutdownInProgress during the drain: $line"
}

# `nthd check` run inside nthd.service's own sandbox: a oneshot copy of the unit (the package's
# file and its drop-ins, webhook.conf included), so the IP allow-list, user, namespaces and
# EnvironmentFile= are the daemon's.  It must probe the webhook (OPTIONS with
# WebHook-Request-Origin, which the receiver logs) and report it reachable.
obs_check_in_sandbox() {
  local rc
  ct_sh 'u=/run/systemd/system/nthd-check.service
         sed -e "s|^Type=.*|Type=oneshot|" -e "s|^ExecStart=.*|ExecStart=/usr/bin/nthd check --json|" \
             -e "/^WatchdogSec=/d" -e "/^Restart=/d" -e "/^RestartSec=/d" -e "/^NotifyAccess=/d" \
             -e "/^RuntimeDirectory/d" -e "/^\[Install\]/,\$d" /usr/lib/systemd/system/nthd.service >$u &&
         printf "StandardOutput=file:/e2e/check-sandbox.json\nStandardError=journal\n" >>$u &&
         mkdir -p $u.d && cp /etc/systemd/system/nthd.service.d/*.conf $u.d/ && systemctl daemon-reload' \
    || fail "could not write nthd-check.service"
  ct_exec systemctl start nthd-check && rc=0 || rc=$?
  cp -f "$SDIR/check-sandbox.json" "$SDIR/check-sandbox.out" 2>/dev/null
  hjq -e . "$SDIR/check-sandbox.json" >/dev/null 2>&1 || fail "nthd check in the unit's sandbox printed no JSON (rc $rc): $(ct_journal -u nthd-check | tail -n 5)"
  log "nthd check in nthd.service's sandbox: rc $rc; webhook: $(hjq -c '[.checks[] | select(.name | test("webhook"; "i"))]' "$SDIR/check-sandbox.json")"
  hjq -e '[.checks[] | select((.name | test("webhook"; "i")) and .status == "pass")] | length >= 1' "$SDIR/check-sandbox.json" >/dev/null \
    || fail "nthd check does not report the webhook reachable: $(hjq -c '[.checks[] | select(.name | test("webhook"; "i"))]' "$SDIR/check-sandbox.json")"
  wait_until 2 _receiver_probed || fail "the receiver logged no OPTIONS validation request from nthd check"
  # docs/observability.md's own command for the same ("Run it inside the unit's sandbox"), run as it stands.
  local cmd out
  cmd="$(awk '/Run it inside the unit.s sandbox/ { f = 1 } f && /^```sh/ { g = 1; next } g && /^```/ { exit } g' "$REPO/docs/observability.md")"
  [[ "$cmd" == *"nthd check"* ]] || fail "docs/observability.md has no sandboxed nthd check command after \"Run it inside the unit's sandbox\""
  out="$(ct_exec bash -c "$cmd" 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$cmd" "--- rc $rc" "$out" >"$SDIR/check-readme-sandbox.txt"
  ((rc == 0)) || fail "the sandboxed nthd check of docs/observability.md exited $rc: $(tail -n 3 <<<"$out")"
  grep -q "webhook.*$RECEIVER.*reachable" <<<"$out" || fail "the README's sandboxed nthd check does not report the webhook reachable: $out"
}

# A status file older than the staleness window (180 s) is unknown (2), whatever it lists.
# nthd is stopped here and its RuntimeDirectory went with it, so the file taken during the
# scheduled stop (it lists a notice nthd would act on: 1 if it were fresh) is put back as a
# stuck daemon would have left it: written 200 s ago on the boot's clock (written_boottime_ms,
# what readers measure the age with: /proc/uptime is CLOCK_BOOTTIME) and on the wall clock
# (written_at), the file's mtime too.
obs_stale_status() {
  ct_sh 'install -d -m 0755 -o nthd -g nthd /run/nthd &&
         up="$(cut -d" " -f1 /proc/uptime)" &&
         jq --argjson up "$up" ".written_at = (now - 200 | floor | todate)
             | .written_boottime_ms = ((\$up - 200) * 1000 | floor)" \
           /e2e/status-file.json >/run/nthd/status.json &&
         chmod 0644 /run/nthd/status.json && touch -d "-200 seconds" /run/nthd/status.json' \
    || fail "could not put a stale status file in place"
  expect_npd stale 2
  [[ "$NPD_OUT" == *stale* ]] || fail "NPD plugin says unknown, but not that the file is stale: $NPD_OUT"
  ct_exec rm -rf /run/nthd
}

# After the power-off: every POST validated; the spot notice event arrived before logind
# powered the system down, the action event after logind took the PowerOff call.
obs_webhook_timings() {
  local bad notice action poweroff down prep
  [[ -s "$SDIR/receiver.jsonl" ]] || fail "the receiver logged nothing"
  bad="$(hjq -c 'select(.ok | not)' "$SDIR/receiver.jsonl")"
  [[ -z "$bad" ]] || fail "the receiver refused events: $bad"
  notice="$(hjq -s 'map(select(.ok and .type == "io.nthd.notice" and .kind == "spot-terminate")) | first | .t_ms // empty' "$SDIR/receiver.jsonl")"
  action="$(hjq -s 'map(select(.ok and .type == "io.nthd.action" and .kind == "spot-terminate")) | first | .t_ms // empty' "$SDIR/receiver.jsonl")"
  [[ -n "$notice" ]] || fail "no validated io.nthd.notice for the spot notice"
  [[ -n "$action" ]] || fail "no validated io.nthd.action for the power-off"
  poweroff="$(journal_first_ms systemd-logind 'system will power ?off now')" || fail "logind did not log the PowerOff"
  down="$(journal_first_ms systemd-logind 'System is powering down')" || down="$CT_EXIT_MS"
  prep="$(kubelet_event_ms prepare)"
  hjq -c 'select(.probe | not) | {t_ms, type, kind, id, data}' "$SDIR/receiver.jsonl" | indent >&2
  [[ "$(hjq -rs 'map(select(.ok and .type == "io.nthd.action" and .kind == "spot-terminate")) | first | .data.result.outcome' "$SDIR/receiver.jsonl")" == accepted ]] \
    || fail "the action event does not say logind accepted the PowerOff"
  # At-least-once with a stable id: a repeated id is the same event (same type and kind).
  [[ -z "$(hjq -rs 'map(select(.ok and (.probe | not))) | group_by(.id)[] | select((map([.type, .kind]) | unique | length) > 1) | .[0].id' "$SDIR/receiver.jsonl")" ]] \
    || fail "one event id was used for different events"
  (( notice < down )) || fail "the notice event arrived $(fmt_ms $((notice - down))) after logind powered down"
  (( action > poweroff )) || fail "the action event arrived $(fmt_ms $((poweroff - action))) before logind's PowerOff"
  (( action < CT_EXIT_MS )) || fail "the action event is after the halt?!"
  timing "webhooks: notice set -> notice event $(fmt_ms $((notice - NOTICE_MS))), -> PowerOff $(fmt_ms $((poweroff - NOTICE_MS))), -> PrepareForShutdown $(fmt_ms $((prep - NOTICE_MS))), -> action event $(fmt_ms $((action - NOTICE_MS))), -> powering down $(fmt_ms $((down - NOTICE_MS)))"
  printf '{"notice_set_ms":%s,"notice_event_ms":%s,"poweroff_ms":%s,"prepare_ms":%s,"action_event_ms":%s,"powering_down_ms":%s,"halt_ms":%s}\n' \
    "$NOTICE_MS" "$notice" "$poweroff" "$prep" "$action" "$down" "$CT_EXIT_MS" >"$SDIR/webhook-timings.json"
}
