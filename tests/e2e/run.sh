#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2119  # single-quoted scripts/jq programs run inside the container
# nthd real-system end-to-end tests.  Each scenario boots a fresh throwaway
# Debian 12 systemd-nspawn container (tests/e2e/lib.sh), installs the real
# nthd .deb with dpkg -i, runs the real mock IMDS and kubelet stand-in as
# transient units, and checks what real systemd-logind + polkitd do.
#
# Usage (as root):
#   tests/e2e/run.sh                   all scenarios
#   tests/e2e/run.sh NAME...           only these (see --list)
#   tests/e2e/run.sh --list
#   tests/e2e/run.sh --narrate         README demo: spot-terminate, narrated
#   tests/e2e/run.sh --shell           boot a node (nthd, mock, stand-in all up)
#                                      and open a root shell in it, for debugging
#   E2E_VERBOSE=1 tests/e2e/run.sh     stream harness logs
#   E2E_SUITE=trixie tests/e2e/run.sh   boot Debian 13 (systemd 257, polkit 126) instead of 12
#
# Output: one line per scenario "PASS|FAIL name (timings)", then exactly
# "N passed, M failed" alone on a line.  Exit status non-zero if any failed.
# Artefacts per run: target/e2e/runs/<name>/ (journal/, console.log,
# kubelet.jsonl, mock-*.json, harness.log, journal.txt).
#
# Env: E2E_NTHD_DEB, E2E_MOCK_IMDS, E2E_FAKE_KUBELET, E2E_DRAIN_SECS,
#      E2E_INHIBIT_DELAY, E2E_NTHD_EXTRA_ENV, E2E_SKIP_ROOTFS (see README.md)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR
# shellcheck source=lib.sh
. "$HERE/lib.sh"
# shellcheck source-path=SCRIPTDIR source=scenario.sh
. "$HERE/scenario.sh"
# shellcheck source-path=SCRIPTDIR source=scen-health.sh
. "$HERE/scen-health.sh"
# shellcheck source-path=SCRIPTDIR source=scen-sandbox.sh
. "$HERE/scen-sandbox.sh"
# shellcheck source-path=SCRIPTDIR source=scen-upgrade.sh
. "$HERE/scen-upgrade.sh"

# Artefacts per tree: target/e2e/runs/ for rootfs/ (Debian 12 amd64), runs-<suffix>/ for
# rootfs-<suffix>/ (runs-bullseye, runs-trixie, runs-arm64, ...).
_tree="$(basename "$ROOTFS")"; RUNS_DIR="$E2E_DIR/runs${_tree#rootfs}"
[[ "$E2E_NTHD_ARCH" == "$E2E_ARCH" ]] || RUNS_DIR+="-nthd-$E2E_NTHD_ARCH"
AWS_REBALANCE=/latest/meta-data/events/recommendations/rebalance

GCP_PREEMPTED=/computeMetadata/v1/instance/preempted
GCP_MAINTENANCE=/computeMetadata/v1/instance/maintenance-event
AZURE_EVENTS=/metadata/scheduledevents
AZURE_NAME=/metadata/instance/compute/name
ALIBABA_SPOT=/latest/meta-data/instance/spot/termination-time
ALIBABA_IMDS="http://100.100.100.200"
# The grant nthd's package ships: lib.sh NTHD_RULE (polkit >= 0.106) and NTHD_PKLA (0.105);
# polkit_grant_file says which one the booted release's polkit reads.

# Scenario registry: name -> function scen_<name with - as _>.
SCENARIOS=(spot-terminate no-action-defaults polkit-denied-then-restored scoped-grant imds-late
           gcp-preempt azure-preempt-this-vm azure-other-vm alibaba-spot check simulate
           shutdown-under-way sighup-and-restart azure-restart-mid-drain bad-setting
           shutdown-cancelled block-inhibitor logind-restart polkitd-restart upgrade-while-deferred
           neighbour observability extras-degrade blind-npd npd-daemonset-restart tencent-auto
           sandbox-imds sandbox-webhook upgrade-configured)

# ------------------------------------------------------- scenario toolkit
# These run inside the scenario subshell (set -e, EXIT trap = ct_cleanup).




# Boot a node with nthd installed and configured.
# Usage: setup_node [--no-mock] [--no-kubelet] [--provider P] [--endpoint URL ("": none)]
#                   [--env NTHD_X=value]...   (extra /etc/default/nthd lines)
#                   [--pre FUNCTION]  (run after the mock is up, before nthd
#                                      is configured: initial routes/config)
setup_node() {
  local mock=1 kubelet=1 provider=aws endpoint="$IMDS" env=() pre=""
  while (($#)); do case "$1" in
    --no-mock) mock=0;; --no-kubelet) kubelet=0;;
    --provider) provider="$2"; shift;; --endpoint) endpoint="$2"; shift;;
    --env) env+=("$2"); shift;;
    --pre) pre="$2"; shift;;
    *) fail "setup_node: bad arg $1";; esac; shift; done
  step "boot"
  ct_boot "$SCEN" "$SDIR" || fail "container did not boot"
  timing "boot $(fmt_ms "$CT_BOOT_MS")"
  ct_net_setup || fail "could not add IMDS addresses to lo"
  step "dpkg -i nthd"
  nthd_install || fail "nthd package did not install"
  if ((kubelet)); then
    step "kubelet stand-in"
    kubelet_start || fail "kubelet stand-in did not take its delay lock"
  fi
  if ((mock)); then
    step "mock IMDS"
    mock_start || fail "mock IMDS did not start"
  fi
  if [[ -n "$pre" ]]; then
    step "before nthd is configured: $pre"
    "$pre"
  fi
  step "configure nthd ($provider, ${endpoint:-the default endpoint})"
  [[ -z "$endpoint" ]] || env=("NTHD_IMDS_ENDPOINT=$endpoint" ${env[@]+"${env[@]}"})
  nthd_configure "NTHD_PROVIDER=$provider" ${env[@]+"${env[@]}"} \
    || fail "nthd did not come back after reconfiguration"
}


# How many requests for PATH the mock logged at or after epoch ms SINCE
# (GET /_mock/log is a JSON array of {t_ms, method, path, status, ...}).
mock_requests_since() {
  local n
  n="$(mock_log | ct_exec jq --arg p "$1" --argjson since "$2" \
        '[.[] | select(.path == $p and .t_ms >= $since)] | length')" || n=0
  echo "${n:-0}"
}


# Expect: no PrepareForShutdown for SECS seconds and the container still up.
expect_no_poweroff() {
  local secs="$1"
  no_prepare_for "$secs" || fail "unexpected PrepareForShutdown within ${secs}s"
  ct_alive || fail "container powered off unexpectedly"
}

expect_nthd_active() { nthd_active || fail "nthd is not active ($(ct_exec systemctl is-active nthd 2>&1))"; }

# busctl call logind Manager METHOD as USER; prints the reply or the error.
logind_as() {
  local user="$1"; shift
  ct_exec runuser -u "$user" -- busctl call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager "$@" 2>&1
}

# The mock's request log as saved on disk: the copy its ExecStop= wrote
# at shutdown (complete, includes what nthd sent while being stopped), else
# the one save_mock_state took at PrepareForShutdown.
mock_log_saved() {
  if [[ -s "$SDIR/mock-log.final.json" ]]; then echo "$SDIR/mock-log.final.json"
  elif [[ -s "$SDIR/mock-log.json" ]]; then echo "$SDIR/mock-log.json"
  else fail "no saved mock request log in $SDIR"; fi
}
# jq over the mock's request log: live while the container runs, else the
# saved copy.  Usage: mock_log_jq [jq args] FILTER
mock_log_jq() {
  if ct_alive; then mock_log | hjq "$@"; else hjq "$@" <"$(mock_log_saved)"; fi
}



# ------------------------------------------------------------- scenarios

# The nthd under test is of the tree's architecture (ELF e_machine of /usr/bin/nthd: 0x3e
# x86_64, 0xb7 aarch64); on a foreign tree it runs through qemu-user (binfmt_misc).
expect_nthd_arch() {
  local want m
  case "$E2E_NTHD_ARCH" in amd64) want=003e;; arm64) want=00b7;; *) return 0;; esac
  m="$(ct_exec od -An -tx2 -j18 -N2 /usr/bin/nthd | tr -d ' ')"
  [[ "$m" == "$want" ]] || fail "/usr/bin/nthd has ELF machine $m, not $want ($E2E_NTHD_ARCH)"
  log "/usr/bin/nthd is $E2E_NTHD_ARCH (e_machine 0x${m#00})"
  if [[ "$E2E_NTHD_ARCH" != "$E2E_HOST_ARCH" ]]; then
    # binfmt_misc (flag P): the running process is the qemu interpreter with nthd's path.
    local cmd; cmd="$(ct_exec cat "/proc/$(nthd_main_pid)/cmdline" | tr '\0' ' ')"
    [[ "$cmd" == *qemu*" /usr/bin/nthd "* ]] || fail "nthd does not run under qemu-user: $cmd"
    log "nthd runs emulated: $cmd"
  fi
}

scen_spot_terminate() {
  setup_node
  local user; user="$(nthd_user)" || fail "cannot determine nthd's user"
  [[ "$user" == nthd ]] || fail "nthd runs as '$user', not 'nthd'"
  log "nthd main pid $(nthd_main_pid) runs as $user; $(ct_exec /usr/bin/nthd --version 2>&1 | head -n1)"
  log "booted: $(ct_exec systemctl --version | head -n1); polkit $(polkit_version); $(ct_exec dpkg-query -W -f '${Package} ${Version} ${Architecture}' libc6 2>/dev/null)"
  expect_nthd_arch
  log "cgroup v2, IPAddressDeny= enforced (ct_boot's probe): nthd.service's IP allow-list is in effect"
  step "spot terminate notice"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  step "journald: MESSAGE_ID and NTHD_* fields"
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
}

scen_no_action_defaults() {
  # Rebalance is a "slow" source (default every 20s): poll it every 2s here
  # so nthd really sees the recommendation inside the 15s window.  Only the
  # poll interval changes; the actions are the package defaults.
  setup_node --env NTHD_SLOW_POLL_INTERVAL=2s
  step "spot hibernate + rebalance recommendation"
  local spot reb
  set_route "$AWS_REBALANCE" "{\"noticeTime\":\"$(iso_in 0)\"}" || fail "set rebalance route"
  set_notice "$AWS_SPOT" "{\"action\":\"hibernate\",\"time\":\"$(iso_in 120)\"}"
  expect_no_poweroff 15
  expect_nthd_active
  spot="$(mock_requests_since "$AWS_SPOT" "$NOTICE_MS")"
  reb="$(mock_requests_since "$AWS_REBALANCE" "$NOTICE_MS")"
  log "nthd fetched $AWS_SPOT $spot times and $AWS_REBALANCE $reb times during the window"
  # Without these the no-action result would prove nothing.
  ((spot > 0)) || fail "nthd never fetched $AWS_SPOT during the window"
  ((reb > 0)) || fail "nthd never fetched $AWS_REBALANCE during the window"
  timing "window 15s, $spot spot + $reb rebalance polls"
  save_mock_state
}

# Remove the grant polkit reads here (the JS rule, or the .pkla on polkit 0.105), saved to
# /e2e/grant.saved, and wait until polkitd has noticed: CanPowerOff as nthd flips from "yes"
# to "challenge"/"no".  polkitd watches rules.d (JS) and the local authority's directories
# (.pkla) with inotify and reloads.  Sets GRANT to the file.
remove_grant() {
  GRANT="$(polkit_grant_file)" || fail "cannot tell polkit's version (pkaction --version)"
  log "polkit $(polkit_version): the grant it reads is $GRANT"
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "nthd cannot power off even with $GRANT: $(logind_as nthd CanPowerOff)"
  step "remove $GRANT"
  ct_sh 'cp -a "$1" /e2e/grant.saved && rm -f "$1"' "$GRANT" || fail "could not remove $GRANT"
  local t0; t0="$(now_ms)"
  wait_until 5 _nthd_can_poweroff_is_not yes || fail "polkitd did not pick up the removal of $GRANT: $(logind_as nthd CanPowerOff)"
  log "polkitd reloaded after $(fmt_ms $(( $(now_ms) - t0 ))): CanPowerOff as nthd -> $(logind_as nthd CanPowerOff)"
}
# Put it back atomically (temp name polkit does not read + rename): polkitd reloads on every
# inotify event, and a plain cp makes polkit >= 0.106 parse a half-written file first
# ("Error loading script"), which would muddy the journal.
restore_grant() {
  ct_sh 'cp -a /e2e/grant.saved "$1.e2e-tmp" && mv -f "$1.e2e-tmp" "$1"' "$GRANT" \
    || fail "could not restore $GRANT"
}

scen_polkit_denied_then_restored() {
  setup_node
  # The package ships both files; only one of them is read by this polkit.  Removing the
  # other one must change nothing (polkitd reloads within ~0.1 s; 1 s is ample).
  local other
  if [[ "$(polkit_grant_file)" == "$NTHD_PKLA" ]]; then other="$NTHD_RULE"; else other="$NTHD_PKLA"; fi
  step "remove $other: this polkit does not read it"
  ct_sh 'mv -f "$1" /e2e/other.saved' "$other" || fail "could not remove $other"
  sleep 1
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "without $other, CanPowerOff as nthd is $(logind_as nthd CanPowerOff): polkit $(polkit_version) reads it after all"
  ct_sh 'cp -a /e2e/other.saved "$1"' "$other" || fail "could not put $other back"
  remove_grant
  step "spot terminate notice while denied"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_no_poweroff 10
  # (grep -c, not -q: with pipefail an early-exiting grep -q can SIGPIPE
  # journalctl and fail the pipeline although the text was found)
  (( $(ct_journal -u nthd | grep -cF org.freedesktop.login1.power-off) > 0 )) \
    || fail "nthd's journal does not name the polkit action org.freedesktop.login1.power-off"
  step "restore $GRANT"
  local t_restore; t_restore="$(now_ms)"
  restore_grant
  NOTICE_MS="$t_restore"  # measure from the restore from here on
  expect_poweroff_through_lock 15
}
_alice_has_user_session() {
  local id
  for id in $(ct_exec loginctl list-sessions --no-legend 2>/dev/null | awk '$3 == "alice" {print $1}'); do
    [[ "$(ct_exec loginctl show-session -p Class --value "$id")" == user ]] && return 0
  done
  return 1
}
_nthd_can_poweroff_is_not() { [[ "$(logind_as nthd CanPowerOff)" != "s \"$1\"" ]]; }

scen_scoped_grant() {
  setup_node
  ct_exec useradd -M -s /bin/sh alice || fail "useradd alice"
  step "alice: PowerOff must be refused"
  local out
  if out="$(logind_as alice PowerOff b false)"; then fail "alice was allowed to power off: $out"; fi
  log "alice PowerOff -> $out"
  grep -qiE 'access denied|interactive authentication required|not authorized|permission denied' <<<"$out" \
    || fail "unexpected error for alice: $out"
  step "nthd: CanPowerOff yes, CanReboot not yes"
  out="$(logind_as nthd CanPowerOff)"; log "nthd CanPowerOff -> $out"
  [[ "$out" == 's "yes"' ]] || fail "CanPowerOff as nthd: $out"
  out="$(logind_as nthd CanReboot)"; log "nthd CanReboot -> $out"
  [[ "$out" == s\ * && "$out" != 's "yes"' ]] || fail "CanReboot as nthd: $out (grant must be scoped to power-off)"
  step "nthd: Reboot must be refused"
  if out="$(logind_as nthd Reboot b false)"; then fail "nthd was allowed to reboot: $out"; fi
  log "nthd Reboot -> $out"
  grep -qiE 'access denied|interactive authentication required|not authorized|permission denied' <<<"$out" \
    || fail "unexpected error for nthd Reboot: $out"
  out="$(logind_as alice CanPowerOff)"; log "alice CanPowerOff -> $out"
  [[ "$out" != 's "yes"' ]] || fail "alice CanPowerOff: $out"
  # With another user logged in (an admin on the node), logind checks
  # org.freedesktop.login1.power-off-multiple-sessions instead; the grant
  # must cover that too.  Class=user matters: a tty-less PAM session would
  # be class "background", which logind does not count.
  step "alice logged in: nthd CanPowerOff still yes (power-off-multiple-sessions)"
  ct_exec systemd-run --quiet --unit=alice-session -p User=alice -p PAMName=login \
    -p Environment=XDG_SESSION_CLASS=user -p Environment=XDG_SESSION_TYPE=tty sleep 600 \
    || fail "could not open a session for alice"
  wait_until 5 _alice_has_user_session || fail "alice's session did not appear in logind: $(ct_exec loginctl list-sessions --no-legend 2>&1)"
  out="$(logind_as nthd CanPowerOff)"; log "nthd CanPowerOff with alice's session open -> $out"
  [[ "$out" == 's "yes"' ]] || fail "CanPowerOff as nthd with another user's session: $out (power-off-multiple-sessions not granted?)"
  expect_no_poweroff 2
  timing "alice denied, nthd power-off only"
}

scen_imds_late() {
  setup_node --no-mock
  local pid0 r0
  pid0="$(nthd_main_pid)"; r0="$(nthd_restarts)"
  step "IMDS unreachable for 10s"
  sleep 10
  expect_nthd_active
  [[ "$(nthd_restarts)" == "$r0" && "$(nthd_main_pid)" == "$pid0" ]] \
    || fail "nthd restarted while IMDS was unreachable (NRestarts $r0 -> $(nthd_restarts), pid $pid0 -> $(nthd_main_pid))"
  timing "survived 10s without IMDS (NRestarts $r0)"
  step "start mock with a terminate notice"
  mock_start || fail "mock IMDS did not start"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 15
}

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

# --- nthd check, inside the node, as user nthd

# nthd check as user nthd, run by hand: it reads /etc/default/nthd itself, as
# the unit's EnvironmentFile= gives it to the daemon.
nthd_check_as_nthd() {
  ct_exec runuser -u nthd -- /usr/bin/nthd check "$@" </dev/null
}

scen_check() {
  setup_node
  local out rc bad name t0 took err
  step "nthd check --json as nthd (rule in place)"
  t0="$(now_ms)"
  out="$(nthd_check_as_nthd --json 2>"$SDIR/check-stderr.txt")" && rc=0 || rc=$?
  err="$(cat "$SDIR/check-stderr.txt")"
  [[ "$err" == *"settings from /etc/default/nthd ("*"values); the environment and flags override them"* ]] \
    || fail "nthd check did not say it read /etc/default/nthd: $err"
  [[ "$(hjq -r '[.checks[] | select(.name == "cloud") | .value] | first' <<<"$out")" == *"set by NTHD_PROVIDER"* ]] \
    || fail "nthd check run by hand did not take NTHD_PROVIDER from /etc/default/nthd"
  log "nthd check read its settings itself: $err"
  took=$(( $(now_ms) - t0 ))
  printf '%s\n' "$out" >"$SDIR/check-pass.json"
  ((rc == 0)) || fail "nthd check --json exited $rc with everything in place: $(hjq -c '[.checks[] | select(.status != "pass")]' <<<"$out" 2>/dev/null)"
  [[ "$(hjq -r .ok <<<"$out")" == true ]] || fail "nthd check --json: ok is not true"
  bad="$(hjq -r '[.checks[] | select(.required and .status != "pass") | "\(.name)=\(.status) (\(.value))"] | join("; ")' <<<"$out")"
  [[ -z "$bad" ]] || fail "required checks not passing: $bad"
  for name in "cloud" "metadata service" "system bus and logind" "logind permits power-off" \
              "systemd version" "kubelet inhibitor lock" "user nthd" "nthd.service"; do
    [[ "$(hjq -r --arg n "$name" '[.checks[] | select(.name == $n) | .status] | first // "missing"' <<<"$out")" == pass ]] \
      || fail "check '$name' is not pass: $(hjq -c --arg n "$name" '[.checks[] | select(.name == $n)]' <<<"$out")"
  done
  out="$(nthd_check_as_nthd)" || fail "nthd check (human) failed although --json passed"
  printf '%s\n' "$out" >"$SDIR/check-pass.txt"
  log "nthd check as nthd, everything in place:"
  indent <<<"$out" >&2
  remove_grant
  step "nthd check --json as nthd (grant removed)"
  out="$(nthd_check_as_nthd --json)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/check-fail.json"
  ((rc != 0)) || fail "nthd check exited 0 without the polkit rule"
  [[ "$(hjq -r .ok <<<"$out")" == false ]] || fail "nthd check --json: ok is not false without the rule"
  local pk; pk="$(hjq -c '[.checks[] | select(.name == "logind permits power-off")] | first // empty' <<<"$out")"
  log "without the rule: $pk"
  [[ "$(hjq -r .status <<<"$pk")" == fail ]] || fail "'logind permits power-off' is not fail without the rule: $pk"
  # The fix names both files, so it is right on every polkit.
  hjq -e --arg g "$(basename "$GRANT")" '.fix | test("polkit rule") and contains($g)' <<<"$pk" >/dev/null \
    || fail "the fix for 'logind permits power-off' does not point at $GRANT: $(hjq -r .fix <<<"$pk")"
  bad="$(hjq -r '[.checks[] | select(.required and .status == "fail") | .name] | join(",")' <<<"$out")"
  [[ "$bad" == "logind permits power-off" ]] || fail "failing required checks without the rule: '$bad' (expected only logind permits power-off)"
  nthd_check_as_nthd >"$SDIR/check-fail.txt" && fail "nthd check (human) exited 0 without the rule"
  expect_nthd_active
  timing "check --json $(fmt_ms "$took"), pass, then fail on the removed rule"
}

# --- nthd simulate, as user nthd: the real polkit grant

# A drill is visible like a real action, marked as one: the webhook (NTHD_WEBHOOK from
# /etc/default/nthd, as the daemon reads it), the daemon's status file, the journal.
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

# --- someone else's shutdown is already held by kubelet's lock when the notice comes: nthd
# must not call PowerOff again (real logind refuses a second one with OperationInProgress).

_nthd_saw_shutdown_under_way() {
  (( $(ct_journal -u nthd | grep -cF "logind is already preparing for shutdown; not calling PowerOff again") > 0 ))
}

scen_shutdown_under_way() {
  # A longer drain leaves time to probe logind and post the notice during the delay.
  local E2E_DRAIN_SECS=15 out prep
  setup_node
  step "root asks logind to power off (someone else's shutdown)"
  NOTICE_MS="$(now_ms)"
  ct_exec busctl call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager PowerOff b false || fail "root's PowerOff was refused"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown after root's PowerOff"
  [[ "$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
        org.freedesktop.login1.Manager PreparingForShutdown)" == "b true" ]] \
    || fail "logind does not report PreparingForShutdown during the delay"
  step "real logind: a second PowerOff during the delay"
  out="$(logind_as nthd PowerOff b false)" && fail "logind accepted a second PowerOff: $out"
  log "logind answered: $out"
  [[ "$out" == *"already a shutdown or sleep operation in progress"* ]] \
    || fail "unexpected answer to a second PowerOff: $out"
  step "spot terminate notice while the node drains"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_until 8 _nthd_saw_shutdown_under_way \
    || fail "nthd did not notice the shutdown under way"
  timing "nthd stood down +$(fmt_ms $(( $(now_ms) - NOTICE_MS )))"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd called logind although a shutdown was under way"
  expect_nthd_active
  save_mock_state
  step "the first shutdown completes through the lock"
  ct_wait_exit $((E2E_DRAIN_SECS + 20)) || fail "container still running after the drain"
  timing "halted +$(fmt_ms $((CT_EXIT_MS - prep))) after PrepareForShutdown"
  (( CT_EXIT_MS - prep >= E2E_DRAIN_SECS * 1000 - 200 )) || fail "halted before the drain ended"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd called logind during the shutdown"
}

# --- Never stop quietly: SIGHUP is ignored; any exit but a bad setting restarts

scen_sighup_and_restart() {
  setup_node
  local pid pid2 n0
  pid="$(nthd_main_pid)"; n0="$(nthd_restarts)"
  step "SIGHUP to nthd's main process (KillUnit main)"
  ct_kill_main nthd HUP || fail "SIGHUP to nthd's main process"
  wait_until 5 _nthd_logged "SIGHUP: ignored" || fail "nthd did not log the SIGHUP"
  sleep 1
  expect_nthd_active
  [[ "$(nthd_main_pid)" == "$pid" ]] || fail "nthd's MainPID changed after SIGHUP ($pid -> $(nthd_main_pid))"
  step "an exit systemd counts as clean (SIGTERM to the main process, not systemctl stop)"
  ct_kill_main nthd TERM || fail "SIGTERM to nthd's main process"
  wait_until 15 _nthd_restarted_from "$pid" || fail "nthd was not restarted after a clean exit (Restart=always)"
  pid2="$(nthd_main_pid)"
  log "restarted: MainPID $pid -> $pid2, NRestarts $n0 -> $(nthd_restarts)"
  timing "restart after clean exit, NRestarts $n0 -> $(nthd_restarts)"
  step "the restarted nthd still acts"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 3000
}
_nthd_logged() { (( $(nthd_journal_count "$1") > 0 )); }
_nthd_restarted_from() { nthd_active && [[ "$(nthd_main_pid)" != "$1" && "$(nthd_main_pid)" != 0 ]]; }

# --- A bad setting stops nthd with status 2, and systemd does not restart it

scen_bad_setting() {
  setup_node
  local st n0 n1
  n0="$(nthd_restarts)"
  step "NTHD_POLL_INTERVAL=-1s in /etc/default/nthd"
  ct_sh 'printf "NTHD_PROVIDER=aws\nNTHD_IMDS_ENDPOINT=%s\nNTHD_POLL_INTERVAL=-1s\n" "$1" >/etc/default/nthd && systemctl restart nthd' "$IMDS" || true
  sleep 8   # four RestartSec=2s periods: a restart loop would show
  st="$(ct_exec systemctl show -p ActiveState -p Result -p ExecMainStatus -p NRestarts nthd | tr '\n' ' ')"
  log "nthd after 8 s: $st"
  [[ "$st" == *"ActiveState=failed"* ]] || fail "nthd is not failed with a bad setting: $st"
  [[ "$st" == *"ExecMainStatus=2"* ]] || fail "nthd did not exit 2 with a bad setting: $st"
  n1="$(nthd_restarts)"
  [[ "$n1" == "$n0" ]] || fail "systemd restarted nthd $((n1 - n0)) times for a bad setting"
  (( $(nthd_journal_count "invalid value '-1s' for '--poll-interval") > 0 )) \
    || fail "the journal does not name the bad setting: $(ct_journal -u nthd | tail -n 3)"
  timing "failed with status 2, NRestarts $n0 -> $n1"
  step "fixed and started again"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not start with the setting fixed"
}

# --- Azure: a restart of nthd in the middle of the drain acknowledges nothing;
# the real shutdown's stop acknowledges once.

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

# --- The shutdown nthd requested is cancelled (logind restarted mid-drain,
# so the delayed PowerOff is gone): nthd sees it and asks again, once.

scen_shutdown_cancelled() {
  local E2E_DRAIN_SECS=20
  setup_node
  local prep st
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown"
  step "restart systemd-logind during the delay (the pending PowerOff is lost)"
  ct_exec systemctl restart systemd-logind || fail "systemctl restart systemd-logind"
  st="$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
        org.freedesktop.login1.Manager PreparingForShutdown)"
  log "after the logind restart: PreparingForShutdown $st"
  [[ "$st" == "b false" ]] || fail "logind still prepares for shutdown after its restart ($st): nothing was cancelled"
  wait_until 15 _nthd_logged "acting again, once" || fail "nthd did not see the cancelled shutdown"
  timing "cancel seen +$(fmt_ms $(( $(now_ms) - prep )))"
  save_mock_state
  ct_wait_exit $((E2E_DRAIN_SECS + 30)) || fail "the node did not power off after nthd asked again"
  timing "halted +$(fmt_ms $((CT_EXIT_MS - prep)))"
  local calls; calls="$(journal_json "$MSG_ACTION" | grep -c . || true)"
  ((calls == 2)) || fail "expected nthd's PowerOff twice (first, then once after the cancellation), journal has $calls"
}

# --- A block inhibitor on shutdown (a backup agent): real logind refuses nthd's PowerOff;
# nthd names the holder, never overrides it, and powers off once it is released.

_blocker_named() {
  (( $(nthd_journal_count "logind refused PowerOff: backup-agent (why: nightly backup, pid") > 0 ))
}

scen_block_inhibitor() {
  setup_node
  local out rc sysver t_rel prep
  sysver="$(ct_exec busctl get-property org.freedesktop.systemd1 /org/freedesktop/systemd1 \
        org.freedesktop.systemd1.Manager Version)"
  log "systemd $sysver"
  step "systemd-inhibit --what=shutdown --mode=block (backup-agent)"
  ct_exec systemd-run -q --unit=blocker systemd-inhibit --what=shutdown --mode=block \
    --who=backup-agent --why='nightly backup' sleep 600 || fail "could not start the blocker"
  wait_until 5 _block_held || fail "the block inhibitor is not listed"
  _can_power_off_while_blocked "$sysver"
  step "nthd check names the holder"
  out="$(nthd_check_as_nthd --json 2>/dev/null)" && rc=0 || rc=$?
  ((rc != 0)) || fail "nthd check passed with a block inhibitor held"
  [[ "$(hjq -r '[.checks[] | select(.name == "no block inhibitor on shutdown") | .value] | first' <<<"$out")" \
      == "backup-agent (why: nightly backup, pid "* ]] || fail "nthd check does not name the holder: $out"
  step "spot notice while the block is held"
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  wait_until 10 _blocker_named || fail "nthd did not name the block inhibitor's holder: $(ct_journal -u nthd | tail -n 3)"
  (( $(nthd_journal_count "50-nthd.rules") == 0 )) || fail "nthd blamed the polkit rule for a block inhibitor"
  (( $(nthd_journal_count "nthd never overrides it") > 0 )) || fail "nthd did not say it never overrides the lock"
  ct_journal -u nthd | grep -F "logind refused PowerOff" | tail -n 1 | indent >&2
  expect_no_poweroff 6
  step "the holder exits"
  ct_exec systemctl stop blocker || fail "could not stop the blocker"
  t_rel="$(now_ms)"; NOTICE_MS="$t_rel"
  prep="$(wait_for_prepare 10)" || fail "no PrepareForShutdown after the release"
  # One retry interval (NTHD_RETRY_DELAY, 5 s) plus a poll.
  (( prep - t_rel <= 6500 )) || fail "PrepareForShutdown $(fmt_ms $((prep - t_rel))) after the release: more than one retry interval"
  timing "release -> prepare $(fmt_ms $((prep - t_rel)))"
  expect_poweroff_through_lock 5
}
# What logind's CanPowerOff tells user nthd while the block is held: from systemd 260 on it
# must say so (262 answers "inhibited"; inhibitor-blocked and challenge-inhibitor-blocked are
# the other new answers), before that challenge or yes.
_can_power_off_while_blocked() {
  local major answer
  major="$(sed -E 's/^s "([0-9]+).*/\1/' <<<"$1")"
  answer="$(logind_as nthd CanPowerOff)"
  log "CanPowerOff as nthd while the block is held (systemd $major): $answer"
  if [[ "$major" =~ ^[0-9]+$ ]] && ((major >= 260)); then
    [[ "$answer" == *'"inhibited"'* || "$answer" == *inhibitor-blocked* ]] || fail "systemd $major's CanPowerOff does not report the block: $answer"
  fi
}
_block_held() { ct_exec systemd-inhibit --list --mode=block 2>/dev/null | grep -q backup-agent; }

# --- Real-system faults: logind or polkitd restarted, the package upgraded, while nthd is
# idle or waits for a deferred action.  An AWS scheduled event `instance-stop` is deferred to
# the last safe moment: NotBefore - logind's InhibitDelayMaxSec (the drain budget) - the
# safety margin.  Short values keep it quick: delay 10 s, margin 2 s, NotBefore 28 s ahead,
# so nthd acts about 16 s after the notice.

DEFER_DELAY=10   # InhibitDelayMaxSec for these scenarios (> the 5 s drain)
DEFER_MARGIN=2   # NTHD_SAFETY_MARGIN
DEFER_AHEAD=28   # NotBefore, seconds after the notice
DEFER_AT_MS=""   # when nthd must act (epoch ms), set by set_scheduled_stop

# Boot a node whose nthd polls scheduled events every second.
# shellcheck disable=SC2120  # setup_node's options may be passed on
setup_deferred_node() {
  E2E_INHIBIT_DELAY=$DEFER_DELAY setup_node --env NTHD_SLOW_POLL_INTERVAL=1s --env "NTHD_SAFETY_MARGIN=${DEFER_MARGIN}s" "$@"
}

# List an `instance-stop` scheduled event with NotBefore DEFER_AHEAD s from now (whole
# seconds, as AWS gives it), in the format of the EC2 metadata service.
set_scheduled_stop() {
  local nb id="instance-event-e2e$RANDOM"
  nb=$(( $(date +%s) + DEFER_AHEAD ))
  DEFER_AT_MS=$(( (nb - DEFER_DELAY - DEFER_MARGIN) * 1000 ))
  set_notice "$AWS_SCHEDULED" "[{\"NotBefore\":\"$(date -u -d "@$nb" '+%d %b %Y %H:%M:%S GMT')\",\"Code\":\"instance-stop\",\"EventId\":\"$id\",\"State\":\"active\",\"Description\":\"The instance is scheduled for stop\",\"NotBeforeDeadline\":\"$(date -u -d "@$((nb + 86400))" '+%d %b %Y %H:%M:%S GMT')\"}]"
  log "instance-stop $id, NotBefore $(date -u -d "@$nb" +%T): nthd must act at $(date -u -d "@$((DEFER_AT_MS / 1000))" +%T) (NotBefore - ${DEFER_DELAY}s - ${DEFER_MARGIN}s)"
}


# Wait for the notice to be announced (and not acted on), with PrepareForShutdown not yet seen.
expect_deferred() {
  wait_until 10 _deferred_announced || fail "nthd did not announce the scheduled stop within 10 s"
  [[ -z "$(journal_json "$MSG_ACTION")" ]] || fail "nthd acted at once on a deferred scheduled stop"
  ! kubelet_event_ms prepare >/dev/null || fail "PrepareForShutdown before the deferred time"
  log "announced and deferred: $(ct_journal -u nthd | grep -F 'last safe moment' | tail -n 1 | cut -c1-300)"
}

# The deferred action fired ONCE, at its time: PrepareForShutdown not before DEFER_AT_MS
# (0.3 s of clock slack) and within 2.5 s after it; then power-off through the lock; exactly
# one action entry in nthd's journal, one PrepareForShutdown at the stand-in, one "power off
# now" from logind.
expect_deferred_fired_once() {
  local prep late n
  NOTICE_MS="$DEFER_AT_MS"   # times below are relative to the deferred moment
  expect_poweroff_through_lock $(( (DEFER_AT_MS - $(now_ms)) / 1000 + 10 ))
  prep="$(kubelet_event_ms prepare)"; late=$((prep - DEFER_AT_MS))
  (( late >= -300 )) || fail "PrepareForShutdown $(fmt_ms $((-late))) BEFORE the deferred time"
  (( late <= 2500 )) || fail "PrepareForShutdown $(fmt_ms "$late") after the deferred time"
  n="$(journal_json "$MSG_ACTION" | grep -c . || true)"
  ((n == 1)) || fail "expected exactly one action entry from nthd, the journal has $n"
  n="$(grep -c '"event"[[:space:]]*:[[:space:]]*"prepare"' "$SDIR/kubelet.jsonl" || true)"
  ((n == 1)) || fail "the stand-in saw PrepareForShutdown $n times"
  n="$(journalctl -D "$SDIR/journal" -q --no-pager -u systemd-logind -g 'system will power ?off now' 2>/dev/null | grep -c . || true)"
  # logind 247 (Debian 11) does not log "The system will power off now!": count its
  # "System is powering down." instead, which every release logs once per shutdown.
  ((n > 0)) || n="$(journalctl -D "$SDIR/journal" -q --no-pager -u systemd-logind -g 'System is powering down' 2>/dev/null | grep -c . || true)"
  ((n == 1)) || fail "logind announced the power-off $n times"
  timing "fired $(fmt_ms "$late") after its time, once"
}

# Restart UNIT with systemctl (systemd stops only its own processes: a neighbour's
# same-named unit shares the cgroup directory but is not touched, see README) and wait for
# the new main process.
restart_unit() {
  local unit="$1" pid0 pid1 t0
  pid0="$(ct_exec systemctl show -p MainPID --value "$unit")"
  t0="$(now_ms)"
  ct_exec systemctl restart "$unit" || fail "systemctl restart $unit"
  pid1="$(ct_exec systemctl show -p MainPID --value "$unit")"
  [[ "$pid1" != 0 && "$pid1" != "$pid0" ]] || fail "$unit has no new main process after the restart ($pid0 -> $pid1)"
  log "$unit restarted in $(fmt_ms $(( $(now_ms) - t0 ))): MainPID $pid0 -> $pid1"
}

# After a logind restart, logind must still list the stand-in's delay lock (logind keeps
# inhibitor fds in systemd's fd store) and the raised InhibitDelayMaxSec (the drop-in).
expect_logind_state_kept() {
  wait_until 5 _logind_delay_is "$DEFER_DELAY" || fail "after its restart logind's InhibitDelayMaxUSec is not ${DEFER_DELAY}s"
  [[ "$(logind_delay_locks)" -ge 1 ]] || fail "after its restart logind lists no delay lock: the stand-in's inhibitor is gone"
}

scen_logind_restart() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY
  setup_deferred_node
  step "restart systemd-logind while nthd is idle"
  restart_unit systemd-logind
  expect_logind_state_kept
  sleep 2; expect_nthd_active
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "restart systemd-logind while the action waits"
  restart_unit systemd-logind
  expect_logind_state_kept
  expect_nthd_active
  expect_deferred_fired_once
}

scen_polkitd_restart() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY
  setup_deferred_node
  # polkitd is bus-activated; make sure it runs (CanPowerOff asks it) before restarting it.
  [[ "$(logind_as nthd CanPowerOff)" == 's "yes"' ]] || fail "CanPowerOff as nthd: $(logind_as nthd CanPowerOff)"
  step "restart polkit while nthd is idle"
  restart_unit polkit
  expect_nthd_active
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "restart polkit while the action waits"
  restart_unit polkit
  expect_nthd_active
  expect_deferred_fired_once
}

# Repack the package under test with its version bumped (dpkg-deb -R / -b): a newer build
# of the same source, as an upgrade brings it.  Prints the new file.
repack_bumped_deb() {
  local deb="$1" out="$2" v
  rm -rf "$out.d"; dpkg-deb -R "$deb" "$out.d" || return 1
  v="$(sed -n 's/^Version: //p' "$out.d/DEBIAN/control")"
  sed -i "s/^Version: .*/Version: ${v}+e2e1/" "$out.d/DEBIAN/control"
  dpkg-deb --root-owner-group -Zgzip -b "$out.d" "$out" >/dev/null || return 1
  rm -rf "$out.d"
}

scen_upgrade_while_deferred() {
  local E2E_INHIBIT_DELAY=$DEFER_DELAY v0 v1 pid0 pid1 in
  setup_deferred_node
  repack_bumped_deb "$(nthd_deb_path)" "$SDIR/nthd-bumped.deb" || fail "could not repack the .deb with a bumped version"
  in="$(ct_put "$SDIR/nthd-bumped.deb" nthd-bumped.deb)"
  v0="$(ct_exec dpkg-query -W -f '${Version}' nthd)"
  step "scheduled instance-stop, deferred"
  set_scheduled_stop
  expect_deferred
  step "dpkg -i a newer build while the action waits"
  pid0="$(nthd_main_pid)"
  ct_exec dpkg -i "$in" >"$SDIR/dpkg-upgrade.log" 2>&1 || { cat "$SDIR/dpkg-upgrade.log" >&2; fail "dpkg -i of the newer build failed"; }
  v1="$(ct_exec dpkg-query -W -f '${Version}' nthd)"
  wait_until 10 nthd_active || fail "nthd not active after the upgrade"
  pid1="$(nthd_main_pid)"
  [[ "$v1" != "$v0" ]] || fail "the package version did not change ($v0)"
  [[ "$pid1" != "$pid0" ]] || fail "the upgrade did not restart nthd (MainPID $pid0)"
  log "upgraded $v0 -> $v1; nthd MainPID $pid0 -> $pid1"
  timing "upgraded at $(fmt_ms $(( $(now_ms) - DEFER_AT_MS ))) to the deferred time"
  (( $(now_ms) < DEFER_AT_MS - 2000 )) || fail "the upgrade ended too close to the deferred time to prove anything"
  expect_deferred_fired_once
  # The action came from the new process: the action entry's _PID is the upgraded nthd's.
  [[ "$(journal_json "$MSG_ACTION" | hjq -r ._PID)" == "$pid1" ]] || fail "the action entry is not from the upgraded nthd (pid $pid1)"
}

# --- Neighbour isolation: another container, booted from the same tree and not managed by
# the scenario, runs the same units (nthd, fake-kubelet, mock-imds, logind, polkit) under the
# same machine-wide names (this host's PID 1 is not systemd; each container has a cgroup v2
# subtree of its own, _ct_own_cgroup).  spot-terminate, check and sighup-and-restart run next
# to it; afterwards it must be up and untouched: the same init and main PIDs, no restarts, no
# signal seen by its logind or nthd.

scen_neighbour() {
  local top="$SDIR" before after part
  step "boot the neighbour (systemd-nspawn -b of $ROOTFS, its own name and overlay)"
  nb_boot "$top/neighbour" || fail "the neighbour container did not boot"
  trap 'ct_cleanup; nb_stop' EXIT
  before="$(nb_snapshot)" || fail "cannot read the neighbour's state"
  log "neighbour before: $before"
  for part in spot-terminate check sighup-and-restart; do
    step "$part next to the neighbour"
    SDIR="$top/$part"; mkdir -p "$SDIR"
    "scen_${part//-/_}"
    ct_cleanup
    after="$(nb_snapshot)" || fail "the neighbour is gone after $part"
    [[ "$after" == "$before" ]] || fail "the neighbour changed during $part: before $before; after $after"
    nb_untouched || fail "the neighbour's logind or nthd saw a signal during $part: $(nb_signal_lines | head -n 3)"
    log "neighbour untouched after $part"
  done
  SDIR="$top"
  timing "neighbour up and untouched through spot-terminate, check, sighup-and-restart"
}

# --- Observability (#13): `nthd status`, the node-problem-detector plugin, CloudEvents
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
# user nobody.  Appends to npd-sequence.jsonl; every rule must exit alike; prints its exit
# code and output (tab-separated).  Usage: npd_round PHASE
npd_round() {
  local phase="$1" out codes
  out="$(ct_exec runuser -u nobody -- python3 /e2e/bin/npd-run.py "$NPD_CONFIG")" \
    || fail "npd-run.py failed as nobody: $out"
  hjq -c --arg p "$phase" '. + {phase: $p}' <<<"$out" >>"$SDIR/npd-sequence.jsonl"
  codes="$(hjq -sc '[.[].exit_code] | unique' <<<"$out")"
  [[ "$codes" =~ ^\[-?[0-9]+\]$ ]] || fail "the NPD rules disagree ($phase): $out"
  hjq -rs '.[0] | "\(.exit_code)\t\(.output)"' <<<"$out"
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
  expect_poweroff_through_lock 10 2000
  obs_webhook_timings
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
# stuck daemon would have left it: written_at 200 s ago, the file's mtime too.
obs_stale_status() {
  ct_sh 'install -d -m 0755 -o nthd -g nthd /run/nthd &&
         jq ".written_at = (now - 200 | floor | todate)" /e2e/status-file.json >/run/nthd/status.json &&
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

# ---------------------------------------------------------------- driver

# Print the relevant journal lines of a finished (or killed) scenario.
print_journal_excerpt() {
  local dir="$1"
  # The mock logs every request; it is left out here (journal.txt and
  # mock-log.json have it).
  echo "    --- journal (nthd, logind, polkit, kubelet stand-in), last 80 lines:"
  journalctl -D "$dir/journal" -o short-precise --no-pager -q \
    -u nthd -u systemd-logind -u polkit -u fake-kubelet 2>/dev/null | tail -n 80 | sed 's/^/    /'
}

# Run one scenario in a subshell with set -e and a cleanup trap.  The
# subshell runs in the background and we `wait` for it, so a SIGTERM/SIGINT
# to the harness is handled at once (bash defers traps until a foreground
# child finishes) and forwarded to the scenario, whose EXIT trap tears the
# container down.
SCEN_PID=""
run_scenario() {
  local name="$1" fn="scen_${1//-/_}" t0 rc
  SCEN="$name"; SDIR="$RUNS_DIR/$name"; SREPORT="$SDIR"
  rm -rf "$SDIR"; mkdir -p "$SDIR"
  t0=$SECONDS
  (
    trap 'ct_cleanup' EXIT
    trap 'exit 130' INT TERM
    set -e
    if [[ -n "${E2E_VERBOSE:-}" ]]; then exec 2> >(tee -a "$SDIR/harness.log" >&2); else exec 2>>"$SDIR/harness.log"; fi
    log "=== scenario $name"
    "$fn"
    log "=== scenario $name passed"
  ) &
  SCEN_PID=$!
  wait "$SCEN_PID"; rc=$?
  SCEN_PID=""
  # Full journal as text for artefact collection.
  journalctl -D "$SDIR/journal" -o short-precise --no-pager -q >"$SDIR/journal.txt" 2>/dev/null || true
  local timings; timings="$(awk 'NR > 1 { printf ", " } { printf "%s", $0 }' "$SDIR/timings" 2>/dev/null)"
  timings="${timings:+$timings, }total $((SECONDS - t0))s"
  if ((rc == 0)); then
    echo "PASS $name ($timings)"
    return 0
  fi
  echo "FAIL $name ($timings)"
  echo "    reason: $(cat "$SDIR/failure" 2>/dev/null || echo "exit status $rc (see $SDIR/harness.log)")"
  echo "    --- harness log (last 30 lines):"
  tail -n 30 "$SDIR/harness.log" | sed 's/^/    /'
  print_journal_excerpt "$SDIR"
  echo "    artefacts: $SDIR"
  return 1
}

# Post-mortem narration of a spot-terminate run from its artefacts.
narrate() {
  local dir="$RUNS_DIR/spot-terminate" t0 exit_ms
  t0="$(cat "$dir/notice_ms" 2>/dev/null)" || { echo "no notice recorded"; return 1; }
  exit_ms="$(cat "$dir/nspawn.exit_ms" 2>/dev/null || echo "")"
  {
    echo "$t0|spot interruption notice set on the mock IMDS: $AWS_SPOT -> terminate"
    # nthd's and logind's own words, from the container's journal
    journalctl -D "$dir/journal" -o short-unix --no-pager -q \
      _SYSTEMD_UNIT=nthd.service _SYSTEMD_UNIT=systemd-logind.service \
      --since "@$((t0 / 1000 - 1))" 2>/dev/null \
      | awk -v t0="$t0" '{ split($1, a, "."); ms = a[1] substr(a[2] "000", 1, 3);  # string concat: no floats
                           if (ms + 0 < t0 + 0) next; $1 = ""; $2 = ""; sub(/^ +/, ""); print ms "|" $0 }'
    local ms
    ms="$(jsonl_event_field "$dir/kubelet.jsonl" prepare)" && echo "$ms|kubelet stand-in: PrepareForShutdown(true) received, draining pods (${E2E_DRAIN_SECS}s)"
    ms="$(jsonl_event_field "$dir/kubelet.jsonl" drained)" && echo "$ms|kubelet stand-in: drain finished"
    ms="$(jsonl_event_field "$dir/kubelet.jsonl" released)" && echo "$ms|kubelet stand-in: delay inhibitor lock released"
    [[ -n "$exit_ms" ]] && echo "$exit_ms|container halted (systemd-nspawn exited)"
  } | sort -t'|' -k1,1n -s | while IFS='|' read -r ms text; do
    printf '  T%-9s %s\n' "+$(fmt_ms $((ms - t0)))" "$text"
  done
}

# Interactive debugging: a fully set-up node, torn down when the shell exits.
debug_shell() {
  [[ $EUID -eq 0 ]] || die "must run as root (systemd-nspawn)"
  local missing; if missing="$(missing_artefacts)"; then die "missing $missing"; fi
  [[ -n "${E2E_SKIP_ROOTFS:-}" ]] || "$HERE/rootfs.sh" || die "rootfs build failed"
  SCEN=shell; SDIR="$RUNS_DIR/shell"; rm -rf "$SDIR"; mkdir -p "$SDIR"
  trap ct_cleanup EXIT
  ( set -e; setup_node ) || true   # subshell: fail() exits; state is re-found below
  CT_DIR="$SDIR"; CT_NSPAWN_PID="$(cat "$SDIR/nspawn.pid" 2>/dev/null)" || die "no container"
  CT_PID="$(_ct_find_init "$CT_NSPAWN_PID")" || die "container not running"
  log "node up (nspawn $CT_NSPAWN_PID, init $CT_PID); host dir $SDIR = /e2e; exit the shell to tear down"
  log "try: journalctl -u nthd -f;  curl -s $IMDS/_mock/log;  systemd-inhibit --list"
  nsenter -t "$CT_PID" -a -- /usr/bin/env -i PATH="$CT_PATH" TERM="${TERM:-xterm}" HOME=/root /bin/bash -l || true
}

on_signal() {
  trap '' INT TERM
  log "interrupted; cleaning up"
  if [[ -n "$SCEN_PID" ]]; then
    kill -TERM "$SCEN_PID" 2>/dev/null
    wait_until 15 _scen_gone || kill -KILL "$SCEN_PID" 2>/dev/null
  fi
  kill_our_containers
  exit 130
}
_scen_gone() { ! kill -0 "$SCEN_PID" 2>/dev/null || [[ "$(awk '{print $3}' "/proc/$SCEN_PID/stat" 2>/dev/null)" == Z ]]; }


# Prints what is missing (and succeeds) if an artefact we need is absent.
missing_artefacts() {
  local m=() deb; deb="$(nthd_deb_path)"
  [[ -n "$deb" && -r "$deb" ]] || m+=("nthd .deb (${E2E_NTHD_DEB:-$REPO/target/dist/nthd_*_$E2E_NTHD_ARCH.deb or $REPO/target/debian/nthd_*_$E2E_NTHD_ARCH.deb})")
  [[ -x "$E2E_MOCK_IMDS" ]] || m+=("$E2E_MOCK_IMDS")
  [[ -x "$E2E_FAKE_KUBELET" ]] || m+=("$E2E_FAKE_KUBELET")
  ((${#m[@]})) || return 1
  local IFS=,; echo "${m[*]}"
}

# Take the package under test once per run: a copy (ct_put hard-links, and cargo-deb
# rewrites target/dist in place) that dpkg-deb can read, retried for up to 60 s while
# packaging/build.sh may be writing it.  Every scenario of the run then installs the same
# bytes, and E2E_NTHD_DEB points at the copy.
snapshot_deb() {
  local src snap="$RUNS_DIR/nthd-under-test.deb" i
  src="$(nthd_deb_path)"
  for ((i = 0; i < 60; i++)); do
    cp -f "$src" "$snap.tmp" && dpkg-deb -I "$snap.tmp" >/dev/null 2>&1 && break
    log "$src is not a complete .deb yet (being rebuilt?); retrying"; sleep 1
  done
  ((i < 60)) || return 1
  mv -f "$snap.tmp" "$snap"
  log "package under test: $src ($(dpkg-deb -f "$snap" Version) $(dpkg-deb -f "$snap" Architecture), sha256 $(sha256sum "$snap" | cut -c1-16)), copied to $snap"
  E2E_NTHD_DEB="$snap"
}

# Kill containers of ours left over by a killed run, and on SIGINT/SIGTERM our own.  Ours
# are named by ct_boot "e2e-<scenario>-<harness pid>" (-M on the nspawn command line); one
# is left over when that harness process is gone.  Nothing else is touched: not another
# harness' live containers, not a neighbour booted from the very same tree (the rootfs path
# on the command line does not tell ours apart: the neighbour scenario boots one), not
# other users' containers.
# SIGKILL to the container's init (nspawn's child) takes its PID namespace
# down; nspawn then exits by itself.
kill_our_containers() {
  local p c name owner
  for p in $(pgrep -x systemd-nspawn); do
    name="$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | awk 'prev == "-M" { print; exit } { prev = $0 }')"
    [[ "$name" =~ ^e2e-.*-([0-9]+)$ ]] || continue
    owner="${BASH_REMATCH[1]}"
    # A live owner (or a reused PID): not ours to kill.  Leaving one leftover behind is
    # harmless; killing a neighbour's live container is not.
    [[ "$owner" == "$$" || ! -d "/proc/$owner" ]] || continue
    log "killing e2e container (nspawn pid $p)"
    # shellcheck disable=SC2013  # children is a space-separated PID list
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do kill -KILL "$c" 2>/dev/null; done
    sleep 1; kill -KILL "$p" 2>/dev/null
  done
  return 0
}

usage() { sed -n '2,/^set -uo/p' "$0" | grep -v '^# shellcheck' | sed '$d; s/^# \{0,1\}//'; }

# Everything the scenarios NAMES need: the testkit, the package, the previous release (for
# upgrade-configured), binfmt for a foreign nthd, the tree.  On failure NOT_RUN says why.
_prepare() {
  local missing t_prev
  build_testkit
  # Fail fast (and clearly) instead of debootstrapping and booting N containers to find out.
  if missing="$(missing_artefacts)"; then
    NOT_RUN="missing $missing"
    echo "    build them first: packaging/build.sh --all-arches (or cargo deb --target $(uname -m)-unknown-linux-musl), and cargo build -p nthd-testkit --release --target $E2E_TESTKIT_TARGET --bins  (or set E2E_NTHD_DEB/E2E_MOCK_IMDS/E2E_FAKE_KUBELET)" >&2
    return 1
  fi
  snapshot_deb || { NOT_RUN="$(nthd_deb_path) is not a readable .deb"; return 1; }
  # upgrade-configured starts from the previous release's own .deb: built from its commit by
  # that tree's packaging/build.sh the first time, cached under target/previous-release/.
  if [[ " $* " == *" upgrade-configured "* ]]; then
    t_prev=$SECONDS
    if PREV_RELEASE_DIR="$(bash "$HERE/previous-release.sh")"; then
      log "previous release: $PREV_RELEASE_DIR ($((SECONDS - t_prev))s)"
    else
      PREV_RELEASE_DIR=""
      PREV_RELEASE_ERR="tests/e2e/previous-release.sh failed (see its output above)"
    fi
  fi
  # A foreign nthd in the host's tree runs through binfmt_misc: register it first (rootfs.sh
  # does so for a foreign tree), or the first exec fails on a new machine.
  if [[ "$E2E_NTHD_ARCH" != "$E2E_HOST_ARCH" ]] && ! bash "$REPO/tests/binfmt-aarch64.sh" >&2; then
    NOT_RUN="$E2E_NTHD_ARCH binaries cannot run on this host"; return 1
  fi
  if [[ -z "${E2E_SKIP_ROOTFS:-}" ]] && ! "$HERE/rootfs.sh"; then
    NOT_RUN="the rootfs build or its test boot failed; see the rootfs.sh output above and $ROOTFS.debootstrap.log"
    return 1
  fi
}

main() {
  local narrate=0 names=() n
  while (($#)); do case "$1" in
    -h|--help) usage; exit 0;;
    --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0;;
    --narrate) narrate=1;;
    --shell) debug_shell; exit;;
    -*) echo "unknown option $1" >&2; usage >&2; exit 2;;
    *) names+=("$1");; esac; shift; done
  ((narrate)) && names=(spot-terminate)
  ((${#names[@]})) || names=("${SCENARIOS[@]}")
  for n in "${names[@]}"; do
    declare -F "scen_${n//-/_}" >/dev/null || { echo "unknown scenario: $n (try --list)" >&2; exit 2; }
  done

  [[ $EUID -eq 0 ]] || die "must run as root (systemd-nspawn)"
  need systemd-nspawn nsenter journalctl flock
  mkdir -p "$RUNS_DIR"
  exec 8>"$E2E_DIR/run.lock"
  flock -n 8 || { log "another e2e run holds $E2E_DIR/run.lock; waiting"; flock 8; }
  kill_our_containers
  local passed=0 failed=0
  if ! _prepare "${names[@]}"; then
    for n in "${names[@]}"; do echo "FAIL $n (not run: $NOT_RUN)"; done
    echo "0 passed, ${#names[@]} failed"
    return 1
  fi
  trap on_signal INT TERM

  for n in "${names[@]}"; do
    if run_scenario "$n"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  done
  if ((narrate)) && ((passed == 1)); then
    echo
    echo "Narration (times relative to the notice appearing on the IMDS):"
    narrate
    echo
  fi
  echo "$passed passed, $failed failed"
  ((failed == 0))
}

main "$@"
