#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2119  # single-quoted scripts/jq programs run inside the container
# nthd real-system end-to-end tests.  Each scenario boots a fresh throwaway
# Debian 12 systemd-nspawn container (tests/e2e/lib.sh), installs the real
# nthd .deb with dpkg -i, runs the real mock IMDS and kubelet stand-in as
# transient units, and checks what real systemd-logind + polkitd do.
#
# Usage (as root):
#   tests/e2e/run.sh                   all scenarios (the imds-locked* ones only where the
#                                      tree has systemd-imdsd: sid)
#   tests/e2e/run.sh NAME...           only these (see --list)
#   tests/e2e/run.sh --list
#   tests/e2e/run.sh --narrate         README demo: spot-terminate, narrated
#   tests/e2e/run.sh --shell           boot a node (nthd, mock, stand-in all up)
#                                      and open a root shell in it, for debugging
#   E2E_VERBOSE=1 tests/e2e/run.sh     stream harness logs
#   E2E_SUITE=trixie tests/e2e/run.sh   boot Debian 13 (systemd 257, polkit 126) instead of 12
#   E2E_JOBS=1 tests/e2e/run.sh        one scenario at a time (default: E2E_SLOTS, 8, at once,
#                                      within the machine's slots; see lib.sh)
#
# Output: one line per scenario "PASS|FAIL name (timings)" as each ends (with its report),
# then exactly "N passed, M failed" alone on a line.  Exit status non-zero if any failed.
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
# The scenarios (scen_*) and their own helpers, by family, one file each. run.sh is only the
# runner (arguments, SCENARIOS, the run loop, the lock); what the scenarios share is in
# scenario.sh, the one toolkit.
# shellcheck source-path=SCRIPTDIR source=scen-core.sh
. "$HERE/scen-core.sh"
# shellcheck source-path=SCRIPTDIR source=scen-cloud.sh
. "$HERE/scen-cloud.sh"
# shellcheck source-path=SCRIPTDIR source=scen-faults.sh
. "$HERE/scen-faults.sh"
# shellcheck source-path=SCRIPTDIR source=scen-observability.sh
. "$HERE/scen-observability.sh"
# shellcheck source-path=SCRIPTDIR source=scen-health.sh
. "$HERE/scen-health.sh"
# shellcheck source-path=SCRIPTDIR source=scen-drain.sh
. "$HERE/scen-drain.sh"
# shellcheck source-path=SCRIPTDIR source=scen-asg.sh
. "$HERE/scen-asg.sh"
# shellcheck source-path=SCRIPTDIR source=scen-imds.sh
. "$HERE/scen-imds.sh"
# shellcheck source-path=SCRIPTDIR source=scen-sandbox.sh
. "$HERE/scen-sandbox.sh"
# shellcheck source-path=SCRIPTDIR source=scen-upgrade.sh
. "$HERE/scen-upgrade.sh"
# shellcheck source-path=SCRIPTDIR source=scen-docs.sh
. "$HERE/scen-docs.sh"

# The runner's tables, set by main before anything reads them: the scenario registry (name ->
# function scen_<name with - as _>, in a scen-*.sh), the scenarios that need systemd-imdsd, and
# where this tree's artefacts go: target/e2e/runs/ for rootfs/ (Debian 12 amd64), runs-<suffix>/
# for rootfs-<suffix>/ (runs-bullseye, runs-trixie, runs-arm64, ...).
registry() {
  SCENARIOS=(spot-terminate no-action-defaults polkit-denied-then-restored scoped-grant imds-late
             gcp-preempt azure-preempt-this-vm azure-other-vm alibaba-spot check simulate
             shutdown-under-way sighup-and-restart azure-restart-mid-drain bad-setting
             shutdown-cancelled block-inhibitor logind-restart polkitd-restart upgrade-while-deferred
             neighbour observability extras-degrade blind-npd npd-daemonset-restart tencent-auto
             sandbox-imds sandbox-webhook upgrade-configured typo-and-locked-settings
             drain-report drain-budget drain-lock-cost asg-complete asg-complete-off
             imds-locked imds-locked-azure imds-locked-no-grant installed-docs readme-trial
             retry-after headers-fifo many-locks asg-credentials-not-utf8 gcp-window-moved
             bad-dry-run)
  # systemd-imdsd is systemd >= 261's systemd-imds package, in the sid tree only: run.sh without
  # names leaves these out on a tree that lacks it, or is not built yet (default_scenarios).
  IMDSD_SCENARIOS=(imds-locked imds-locked-azure imds-locked-no-grant)
  local tree
  tree="$(basename "$ROOTFS")"; RUNS_DIR="$E2E_DIR/runs${tree#rootfs}"
  [[ "$E2E_NTHD_ARCH" == "$E2E_ARCH" ]] || RUNS_DIR+="-nthd-$E2E_NTHD_ARCH"
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

# Run one scenario in a subshell with set -e and a cleanup trap, in a scenario slot of its own
# (lib.sh, e2e_slot_take).  run_concurrently runs this in the background, several at once; the
# subshell runs in the background too and we `wait` for it, so a SIGTERM/SIGINT is handled at
# once (bash defers traps until a foreground child finishes) and forwarded to the scenario,
# whose EXIT trap tears the container down.
run_scenario() {
  local name="$1" fn="scen_${1//-/_}" t0 rc scen_pid
  SCEN="$name"; SDIR="$RUNS_DIR/$name"; SREPORT="$SDIR"
  rm -rf "$SDIR"; mkdir -p "$SDIR"
  e2e_slot_take 2>>"$SDIR/harness.log" || { echo "FAIL $name (no scenario slot under $E2E_SLOTS_DIR)"; return 1; }
  t0=$SECONDS
  (
    trap 'ct_cleanup' EXIT
    trap 'exit 130' INT TERM
    set -e
    if [[ -n "${E2E_VERBOSE:-}" ]]; then exec 2> >(tee -a "$SDIR/harness.log" >&2); else exec 2>>"$SDIR/harness.log"; fi
    log "=== scenario $name (slot $E2E_SLOT)"
    "$fn"
    log "=== scenario $name passed"
  ) &
  scen_pid=$!
  trap 'kill -TERM "$scen_pid" 2>/dev/null; wait "$scen_pid"; e2e_slot_give; exit 130' TERM INT
  wait "$scen_pid"; rc=$?
  e2e_slot_give
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
  stop_concurrent
  kill_our_containers
  exit 130
}


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

# Every scenario, less those the tree cannot run: IMDSD_SCENARIOS without systemd-imdsd.
default_scenarios() {
  local n
  if [[ -x "$ROOTFS/usr/lib/systemd/systemd-imdsd" ]]; then printf '%s\n' "${SCENARIOS[@]}"; return; fi
  log "$(basename "$ROOTFS") has no systemd-imdsd (package systemd-imds, systemd >= 261): not running ${IMDSD_SCENARIOS[*]}"
  for n in "${SCENARIOS[@]}"; do
    [[ " ${IMDSD_SCENARIOS[*]} " == *" $n "* ]] || echo "$n"
  done
}

usage() { sed -n '2,/^set -uo/p' "$0" | grep -v '^# shellcheck' | sed '$d; s/^# \{0,1\}//'; }

# Everything the scenarios NAMES need: the testkit, the package, binfmt for a foreign nthd, the
# tree (upgrade-configured builds the previous release itself, when it needs it).  On failure
# NOT_RUN says why.
_prepare() {
  local missing
  build_testkit
  # Fail fast (and clearly) instead of debootstrapping and booting N containers to find out.
  if missing="$(missing_artefacts)"; then
    NOT_RUN="missing $missing"
    echo "    build them first: packaging/build.sh --all-arches --test-key (or cargo deb --target $(uname -m)-unknown-linux-musl), and cargo build -p nthd-testkit --release --target $E2E_TESTKIT_TARGET --bins  (or set E2E_NTHD_DEB/E2E_MOCK_IMDS/E2E_FAKE_KUBELET)" >&2
    return 1
  fi
  snapshot_deb || { NOT_RUN="$(nthd_deb_path) is not a readable .deb"; return 1; }
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
  registry
  while (($#)); do case "$1" in
    -h|--help) usage; exit 0;;
    --list) printf '%s\n' "${SCENARIOS[@]}"; exit 0;;
    --narrate) narrate=1;;
    --shell) debug_shell; exit;;
    -*) echo "unknown option $1" >&2; usage >&2; exit 2;;
    *) names+=("$1");; esac; shift; done
  # The demo's node runs two pods in two priority groups (the stand-in stops them in turn), so
  # the narration ends with the drain report naming what was left, or that nothing was.
  # shellcheck disable=SC2034  # KUBELET_ARGS is read by setup_node (scenario.sh)
  ((narrate)) && { names=(spot-terminate); KUBELET_ARGS=(--pod default/web-1:burstable:0
    --pod kube-system/dns-1:guaranteed:1 --group 0:3 --group 1:2); }
  ((${#names[@]})) || mapfile -t names < <(default_scenarios)
  for n in "${names[@]}"; do
    declare -F "scen_${n//-/_}" >/dev/null || { echo "unknown scenario: $n (try --list)" >&2; exit 2; }
  done

  [[ $EUID -eq 0 ]] || die "must run as root (systemd-nspawn)"
  need systemd-nspawn nsenter journalctl flock
  mkdir -p "$RUNS_DIR"
  # One run per tree and architecture at a time (they share RUNS_DIR and its package copy);
  # runs of other trees go on beside it, their scenarios bounded by the machine's slots.
  exec 8>"$RUNS_DIR.lock"
  flock -n 8 || { log "another e2e run holds $RUNS_DIR.lock; waiting"; flock 8; }
  kill_our_containers
  if ! _prepare "${names[@]}"; then
    for n in "${names[@]}"; do echo "FAIL $n (not run: $NOT_RUN)"; done
    echo "0 passed, ${#names[@]} failed"
    return 1
  fi
  trap on_signal INT TERM
  log "${#names[@]} scenarios, up to $E2E_JOBS at once (E2E_JOBS), $E2E_SLOTS on this machine (E2E_SLOTS)"
  run_concurrently run_scenario "$RUNS_DIR/.reports" "${names[@]}"
  local passed=$E2E_PASSED failed=$E2E_FAILED
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
