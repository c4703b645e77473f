# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs are run inside the container
# shellcheck disable=SC2034  # CT_* globals are read by the sourcing scripts
# Library for the nthd real-system e2e harness: boot throwaway systemd-nspawn
# instances of target/e2e/rootfs, run commands inside them, drive the mock
# IMDS and the kubelet stand-in, and tear everything down reliably.
#
# One container at a time (scenarios run sequentially); its state lives in
# the CT_* globals below.  Source this file; it has no side effects.
#
# Paths: HOST paths are used by the harness (e.g. $CT_DIR/kubelet.jsonl);
# the same directory is bind-mounted at /e2e inside the container, and
# everything run with ct_exec sees CONTAINER paths (nsenter -a enters the
# mount namespace too).  The container's root is a throwaway overlay, so
# anything we need after power-off must be written under /e2e.

E2E_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="${REPO:-$(cd "$E2E_LIB_DIR/../.." && pwd)}"
E2E_DIR="${E2E_DIR:-$REPO/target/e2e}"
# shellcheck source=packaging/host-tools.sh
. "$E2E_LIB_DIR/../../packaging/host-tools.sh"
# The tree booted and the packages under test: E2E_* from the environment, else the defaults.
e2e_tree_defaults() {
  # E2E_SUITE: the Debian release booted (bookworm = Debian 12 with systemd 252, the default;
  # bullseye = Debian 11 with 247; trixie = Debian 13 with 257; sid with the newest, 262 at the
  # time of writing). Each release has its own cached tree.
  E2E_SUITE="${E2E_SUITE:-bookworm}"
  # E2E_ARCH: the Debian architecture of the tree (default: the host's; arm64 boots through
  # qemu-user-static + binfmt_misc). E2E_FLAVOUR: empty, or "install" for a tree that also
  # carries rpm and cloud-init (tests/e2e/install.sh). Each combination has its own cached tree.
  E2E_HOST_ARCH="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
  E2E_ARCH="${E2E_ARCH:-$E2E_HOST_ARCH}"
  E2E_FLAVOUR="${E2E_FLAVOUR:-}"
  # E2E_NTHD_ARCH: the architecture of the nthd package under test (default: the tree's).  arm64
  # in the host's tree runs the arm64 nthd through qemu-user under the tree's native systemd,
  # which enforces the unit's IP firewall (a foreign tree's emulated systemd cannot: no bpf()).
  E2E_NTHD_ARCH="${E2E_NTHD_ARCH:-$E2E_ARCH}"
  local tree="$E2E_DIR/rootfs"
  [[ "$E2E_SUITE" == bookworm ]] || tree+="-$E2E_SUITE"
  [[ "$E2E_ARCH" == "$E2E_HOST_ARCH" ]] || tree+="-$E2E_ARCH"
  [[ -z "$E2E_FLAVOUR" ]] || tree+="-$E2E_FLAVOUR"
  ROOTFS="${E2E_ROOTFS:-$tree}"
}

# Artefacts built by others (override with env vars).
e2e_artefact_defaults() {
  # E2E_NTHD_DEB: default the newest target/dist/nthd_*_$E2E_ARCH.deb (packaging/build.sh),
  # else the newest target/debian/nthd_*_$E2E_ARCH.deb (cargo deb); see nthd_deb_path.
  E2E_NTHD_DEB="${E2E_NTHD_DEB:-}"
  # run.sh (re)builds the testkit binaries with cargo unless both are given.
  if [[ -n "${E2E_MOCK_IMDS:-}" && -n "${E2E_FAKE_KUBELET:-}" ]]; then E2E_BUILD_TESTKIT=0; else E2E_BUILD_TESTKIT=1; fi
  # The mock IMDS and the kubelet stand-in run INSIDE the container, so by default they are
  # built static (musl) for the host: they then run in every suite whatever its glibc (Debian 11
  # has 2.31, older than the host's), and in an arm64 tree too, where the host kernel runs these
  # x86_64 binaries natively (binfmt_misc is only consulted for foreign ELF).  Only nthd, the
  # software under test, is the tree's architecture.  E2E_TESTKIT_TARGET= (empty) builds them
  # as before: debug, dynamically linked, target/debug/.  _testkit_dir is where they are.
  E2E_TESTKIT_TARGET="${E2E_TESTKIT_TARGET-$(uname -m)-unknown-linux-musl}"
  if [[ -n "$E2E_TESTKIT_TARGET" ]]; then _testkit_dir="$REPO/target/$E2E_TESTKIT_TARGET/release"; else _testkit_dir="$REPO/target/debug"; fi
  E2E_MOCK_IMDS="${E2E_MOCK_IMDS:-$_testkit_dir/nthd-mock-imds}"
  E2E_FAKE_KUBELET="${E2E_FAKE_KUBELET:-$_testkit_dir/nthd-fake-kubelet}"
  # nthd-many-locks: beside the kubelet stand-in, wherever that is.
  E2E_MANY_LOCKS="${E2E_MANY_LOCKS:-$(dirname "$E2E_FAKE_KUBELET")/nthd-many-locks}"
}

# The harness' waits. A foreign-architecture tree runs every instruction through qemu-user:
# boots and shutdowns take several times longer.  E2E_SLOW scales the harness' waits (not the
# daemon's deadlines, which the scenarios assert).
e2e_wait_defaults() {
  if [[ "$E2E_ARCH" == "$E2E_HOST_ARCH" ]]; then E2E_SLOW="${E2E_SLOW:-1}"; else E2E_SLOW="${E2E_SLOW:-4}"; fi
  E2E_BOOT_TIMEOUT="${E2E_BOOT_TIMEOUT:-$((60 * E2E_SLOW))}"  # s, boot to running/degraded
  E2E_DRAIN_SECS="${E2E_DRAIN_SECS:-5}"       # kubelet stand-in drain time
  E2E_INHIBIT_DELAY="${E2E_INHIBIT_DELAY:-30}" # logind InhibitDelayMaxSec we set
}
e2e_tree_defaults; e2e_artefact_defaults; e2e_wait_defaults

CT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# ---------------------------------------------------------------- utilities

log()  { printf '[e2e %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
die()  { log "ERROR: $*"; exit 1; }
need() { local c; for c in "$@"; do command -v "$c" >/dev/null || die "missing host tool: $c"; done; }
now_ms() { date +%s%3N; }

# ms -> "1.234s"
fmt_ms() { local ms="$1" s=""; [[ $ms -lt 0 ]] && { s=-; ms=$((-ms)); }; printf '%s%d.%03ds' "$s" $((ms / 1000)) $((ms % 1000)); }

# Poll "$@" every 0.2 s until it succeeds or TIMEOUT seconds pass.
# Usage: wait_until TIMEOUT cmd args...
wait_until() {
  local timeout="$1"; shift
  local deadline=$(( $(now_ms) + timeout * 1000 ))
  until "$@"; do
    (( $(now_ms) >= deadline )) && return 1
    sleep 0.2
  done
}

# Extract integer field FIELD from the first/last JSON line whose "event" is
# EVENT in FILE (flat one-object-per-line JSON, as the kubelet stand-in
# writes).  Host-side and tool-free on purpose: it must work after the
# container is gone and on hosts without jq.
# Usage: jsonl_event_field FILE EVENT [FIELD=t_ms] [first|last]
jsonl_event_field() {
  local file="$1" ev="$2" field="${3:-t_ms}" which="${4:-first}" line
  [[ -r "$file" ]] || return 1
  line="$(grep -E "\"event\"[[:space:]]*:[[:space:]]*\"$ev\"" "$file" | { if [[ $which == last ]]; then tail -n1; else head -n1; fi; })" || true
  [[ -n "$line" ]] || return 1
  local v; v="$(sed -nE "s/.*\"$field\"[[:space:]]*:[[:space:]]*([0-9]+).*/\\1/p" <<<"$line")"
  [[ -n "$v" ]] || { log "malformed $ev record in $file: $line"; return 1; }
  echo "$v"
}

# jq on the host, for artefacts read after the container is gone.  Falls
# back to the rootfs's jq (chroot, read-only use) if the host has none.
hjq() {
  if command -v jq >/dev/null; then jq "$@"; else chroot "$ROOTFS" /usr/bin/jq "$@"; fi
}

# ------------------------------------------------------ concurrent scenarios
# Scenarios run several at a time: each boots its own container (own PID, network and cgroup
# namespaces, own overlay), and most of a scenario's time is spent waiting on timers (a notice
# at t=10 s, a drain, a halt).  Two limits apply:
#   E2E_JOBS   how many scenarios one run.sh or install.sh starts at once (default: E2E_SLOTS);
#   E2E_SLOTS  how many scenario containers run on this machine at once, over every run.sh and
#              install.sh of every checkout (the suite's concurrent stages, the demo beside it):
#              a slot is a directory under E2E_SLOTS_DIR, taken with mkdir (atomic) and given
#              back when the scenario ends; a slot whose owner died is taken over.
# E2E_SLOTS=8 was chosen by measurement on the 2-core CI machine (docs/testing.md, "Concurrent
# scenarios").
e2e_slot_defaults() {
  E2E_SLOTS="${E2E_SLOTS:-8}"
  E2E_JOBS="${E2E_JOBS:-$E2E_SLOTS}"
  E2E_SLOTS_DIR="${E2E_SLOTS_DIR:-/run/nthd-e2e-slots}"
  if ! [[ "$E2E_SLOTS$E2E_JOBS" =~ ^[0-9]+$ ]] || ((E2E_SLOTS < 1 || E2E_JOBS < 1)); then
    die "E2E_SLOTS ($E2E_SLOTS) and E2E_JOBS ($E2E_JOBS) must be numbers >= 1"
  fi
  E2E_SLOT=""
}
e2e_slot_defaults

# Take a free slot, waiting for one (sets E2E_SLOT, the slot's directory); the caller gives it
# back with e2e_slot_give, or it goes stale with the caller's process.
e2e_slot_take() {
  local i d said=0
  mkdir -p "$E2E_SLOTS_DIR" || return 1
  while :; do
    for ((i = 0; i < E2E_SLOTS; i++)); do
      d="$E2E_SLOTS_DIR/$i"
      if mkdir "$d" 2>/dev/null; then
        echo "$BASHPID" >"$d/owner"; E2E_SLOT="$d"; return 0
      fi
      ! _e2e_slot_stale "$d" || rm -rf "$d"
    done
    ((said)) || { log "all $E2E_SLOTS scenario slots ($E2E_SLOTS_DIR) are taken; waiting for one"; said=1; }
    sleep 0.5
  done
}
# A slot is stale when its owner process is gone, or when it has had no owner for 60 s (its
# taker died between mkdir and writing the owner).
_e2e_slot_stale() {
  local owner
  if owner="$(cat "$1/owner" 2>/dev/null)" && [[ -n "$owner" ]]; then
    [[ ! -d "/proc/$owner" ]]
  else
    [[ -d "$1" && -n "$(find "$1" -maxdepth 0 -mmin +1 2>/dev/null)" ]]
  fi
}
e2e_slot_give() { [[ -z "$E2E_SLOT" ]] || rm -rf "$E2E_SLOT"; E2E_SLOT=""; }

# Run FN NAME for every NAME, up to E2E_JOBS at once, each in the background with its report
# (stdout and stderr) in a file; each report is printed whole as its scenario ends, so the
# reports of concurrent scenarios never interleave.  Sets E2E_PASSED and E2E_FAILED, and
# E2E_PIDS (the running jobs, for a signal handler).
# Usage: run_concurrently FN REPORT_DIR NAME...
declare -gA E2E_PIDS=()
run_concurrently() {
  local fn="$1" dir="$2" n; shift 2
  E2E_PASSED=0 E2E_FAILED=0
  mkdir -p "$dir"
  for n in "$@"; do
    while ((${#E2E_PIDS[@]} >= E2E_JOBS)); do _reap_one "$dir"; done
    # Under an `if`, as the runners have always called a scenario: bash then ignores `set -e`
    # in everything the scenario runs (its subshell's own `set -e` included), and each step
    # says itself what failed (fail). Run bare, a scenario would end silently at the first
    # command that returns non-zero on purpose (diff of two files that differ).
    ( if "$fn" "$n"; then exit 0; else exit 1; fi ) >"$dir/$n.report" 2>&1 &
    E2E_PIDS[$!]="$n"
  done
  while ((${#E2E_PIDS[@]})); do _reap_one "$dir"; done
}
_reap_one() {
  local pid rc n
  wait -n -p pid "${!E2E_PIDS[@]}"; rc=$?
  [[ -n "${pid:-}" && -n "${E2E_PIDS[$pid]:-}" ]] || return 0
  n="${E2E_PIDS[$pid]}"; unset "E2E_PIDS[$pid]"
  cat "$1/$n.report"
  if ((rc == 0)); then E2E_PASSED=$((E2E_PASSED + 1)); else E2E_FAILED=$((E2E_FAILED + 1)); fi
}
# SIGTERM to every running job (their EXIT traps tear their containers down), then wait.
stop_concurrent() {
  local pid
  for pid in "${!E2E_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${!E2E_PIDS[@]}"; do wait_until 15 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null; done
}
_pid_gone() { ! kill -0 "$1" 2>/dev/null || [[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" == Z ]]; }

# ------------------------------------------------------- container lifecycle

# The one container's state, empty; ct_boot starts each container from it.
ct_state_reset() {
  CT_NAME=""        # machine name
  CT_DIR=""         # host dir bound at /e2e
  CT_NSPAWN_PID=""  # systemd-nspawn
  CT_WATCHER_PID="" # our subshell that waits for nspawn and stamps its exit
  CT_PID=""         # the container's systemd (PID 1 inside), host PID
  CT_BOOT_MS=""     # nspawn start -> is-system-running running/degraded
  CT_START_MS=""
  CT_EXIT_MS=""     # host time nspawn exited (set by ct_wait_exit / ct_alive)
  CT_EXIT_RC=""
}
ct_state_reset

# Find the host PID of the container's init: a descendant of nspawn whose
# comm is "systemd" and whose innermost namespace PID is 1.
_ct_find_init() {
  local root="$1" queue=("$1") p kids c
  while ((${#queue[@]})); do
    p="${queue[0]}"; queue=("${queue[@]:1}")
    if [[ "$p" != "$root" ]] && [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == systemd ]] \
       && awk '/^NSpid:/{exit !($NF==1 && NF>2)}' "/proc/$p/status" 2>/dev/null; then
      echo "$p"; return 0
    fi
    kids="$(cat /proc/"$p"/task/*/children 2>/dev/null)" || true
    for c in $kids; do queue+=("$c"); done
  done
  return 1
}

# Wait for the booting container's systemd to reach running (or degraded), up to
# E2E_BOOT_TIMEOUT; sets CT_PID, and ST_BOOTED to the state.  On failure, the console's tail.
_ct_wait_booted() {
  local dir="$1" deadline=$(( $(now_ms) + E2E_BOOT_TIMEOUT * 1000 )) st=""
  while :; do
    if ! ct_alive; then
      log "container exited during boot (rc=$CT_EXIT_RC); console:"; tail -n 30 "$dir/console.log" >&2
      return 1
    fi
    if [[ -z "$CT_PID" ]]; then
      CT_PID="$(_ct_find_init "$CT_NSPAWN_PID")" || CT_PID=""
    fi
    if [[ -n "$CT_PID" ]]; then
      st="$(ct_exec systemctl is-system-running 2>/dev/null)" || true
      [[ "$st" == running || "$st" == degraded ]] && break
    fi
    if (( $(now_ms) >= deadline )); then
      log "boot timeout after ${E2E_BOOT_TIMEOUT}s (init pid '${CT_PID}', state '${st}'); console:"
      tail -n 30 "$dir/console.log" >&2
      if [[ -n "$CT_PID" ]]; then ct_exec systemctl list-jobs --no-legend >&2 || true; fi
      return 1
    fi
    sleep 0.2
  done
  ST_BOOTED="$st"
}

# Boot a fresh throwaway instance.
# Usage: ct_boot NAME HOSTDIR [extra systemd-nspawn args...]
# HOSTDIR is created, bound at /e2e; HOSTDIR/journal is the container's
# persistent journal (/var/log/journal), HOSTDIR/console.log its console.
ct_boot() {
  local name="$1" dir="$2"; shift 2
  [[ -d "$ROOTFS" ]] || die "no rootfs at $ROOTFS (run tests/e2e/rootfs.sh)"
  [[ -z "$CT_NSPAWN_PID" ]] || ct_cleanup
  mkdir -p "$dir/journal"
  dir="$(cd "$dir" && pwd)"
  rm -f "$dir/nspawn.pid" "$dir/nspawn.rc" "$dir/nspawn.exit_ms"
  # Unique per harness process: /run/systemd/nspawn/{locks,propagate}/NAME
  # are host-global.
  ct_state_reset; CT_NAME="e2e-${name//[^a-zA-Z0-9-]/-}-$$"; CT_DIR="$dir"
  CT_START_MS="$(now_ms)"
  # The watcher subshell waits for nspawn and stamps the exit time, so the
  # power-off instant is measured where it happens, independent of how often
  # the harness polls.  (Polling `kill -0` would not work: an exited but
  # unreaped child still answers kill -0.)
  (
    trap '' INT  # Ctrl-C is handled by the harness' trap (ct_cleanup)
    _ct_own_cgroup enter "$CT_NAME"
    # As production hosts run: a cgroup v2 hierarchy (systemd >= 258, sid's, boots on no
    # other) and the bpf() syscall allowed, so systemd in the container can attach its BPF
    # cgroup programs and nthd.service's IPAddressDeny=/IPAddressAllow= are enforced
    # (ct_require_ip_firewall checks that they are).
    SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 systemd-nspawn --quiet -D "$ROOTFS" -M "$CT_NAME" \
      --volatile=overlay --register=no --keep-unit --private-network \
      --system-call-filter=bpf --link-journal=no -b --console=pipe \
      --bind="$dir:/e2e" --bind="$dir/journal:/var/log/journal" \
      "$@" </dev/null >"$dir/console.log" 2>&1 &
    echo $! >"$dir/nspawn.pid"
    wait $!; rc=$?
    now_ms >"$dir/nspawn.exit_ms"
    _ct_own_cgroup leave "$CT_NAME"
    echo "$rc" >"$dir/nspawn.rc"
  ) </dev/null >/dev/null 2>&1 &  # must not hold the caller's stdout/stderr pipes open
  CT_WATCHER_PID=$!
  wait_until 5 test -s "$dir/nspawn.pid" || { log "nspawn did not start"; return 1; }
  CT_NSPAWN_PID="$(cat "$dir/nspawn.pid")"

  _ct_wait_booted "$dir" || return 1
  CT_BOOT_MS=$(( $(now_ms) - CT_START_MS ))
  [[ "$ST_BOOTED" == degraded ]] && { log "note: container is degraded; failed units:"; ct_exec systemctl --failed --no-legend >&2 || true; }
  ct_require_ip_firewall
}

# The container runs as production hosts do, or the run fails: a cgroup v2 hierarchy, and
# systemd enforcing a unit's IPAddressDeny= (its BPF cgroup firewall), without which
# nthd.service's allow-list would silently not be in effect.  The probe sends one UDP datagram
# to 127.0.0.1:9 from a transient unit, once with IPAddressDeny=any (a firewall drops it at
# once with EPERM) and once without (must go out, or the probe proves nothing).  --collect: the
# refused probe's failed unit must not leave the container "degraded".
ct_require_ip_firewall() {
  local fs send='echo probe >/dev/udp/127.0.0.1/9' denied
  fs="$(ct_exec stat -fc %T /sys/fs/cgroup)"
  [[ "$fs" == cgroup2fs ]] || { log "the container's /sys/fs/cgroup is $fs, not cgroup2fs (cgroup v2)"; return 1; }
  ct_exec systemd-run -P -q bash -c "$send" ||
    { log "IP firewall probe: a UDP send from a transient unit fails even without IPAddressDeny="; return 1; }
  if denied="$(ct_exec systemd-run -P -q --collect -p IPAddressDeny=any bash -c "$send" 2>&1)"; then
    if [[ "$E2E_ARCH" != "$E2E_HOST_ARCH" ]]; then
      # A foreign tree's systemd runs under qemu-user, which implements no bpf() syscall
      # (ENOSYS, checked with qemu 7.2): no firewall can be attached there, whatever the host.
      # The host's own trees are held to the rule; this one says so on every boot.
      log "note: IPAddressDeny= is not enforced in this $E2E_ARCH tree: its systemd runs under" \
          "qemu-user, which has no bpf() syscall (ENOSYS); nthd.service's allow-list is proven" \
          "in the $E2E_HOST_ARCH trees"
      CT_IP_FIREWALL=emulated; return 0
    fi
    log "IPAddressDeny= is NOT enforced in this container: systemd cannot attach its BPF cgroup" \
        "firewall (needs cgroup v2 and the bpf() syscall: SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1," \
        "--system-call-filter=bpf, a kernel with CONFIG_CGROUP_BPF), so nthd.service's" \
        "IPAddressAllow= would not be tested"
    return 1
  fi
  [[ "$denied" == *"not permitted"* ]] || { log "IP firewall probe failed, but not with EPERM: $denied"; return 1; }
  CT_IP_FIREWALL=enforced
}

# Each container in a cgroup v2 subtree of its own.  With --keep-unit --register=no, nspawn
# puts the container's systemd in "payload" (and itself in "supervisor") below the cgroup it
# was started in; on a host whose PID 1 is not systemd that is the hierarchy's root for every
# container, so two containers at once (neighbour, or the demo beside the suite) would share
# one system.slice/nthd.service, its processes and its BPF firewall.  The watcher subshell
# moves itself into <its cgroup>/e2e-NAME before starting nspawn and back out after.
# Usage: _ct_own_cgroup enter|leave|remove NAME   (leave: the watcher, from inside; remove: the
# harness, from outside.  Best effort: without cgroup2 there is no subtree to make.)
_ct_own_cgroup() {
  local mnt cur dir
  mnt="$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)"
  [[ -n "$mnt" ]] || return 0
  cur="$(sed -n 's/^0:://p' /proc/self/cgroup)"
  case "$1" in
    enter) dir="$mnt${cur%/}/e2e-$2"; mkdir -p "$dir" && echo "$BASHPID" >"$dir/cgroup.procs";;
    leave) dir="$mnt$cur"; [[ "$dir" == */e2e-"$2" ]] || return 0
           echo "$BASHPID" >"${dir%/*}/cgroup.procs" && _ct_rm_cgroup "$dir";;
    remove) _ct_rm_cgroup "$mnt${cur%/}/e2e-$2";;
  esac
  return 0
}
_ct_rm_cgroup() { [[ ! -d "$1" ]] || find "$1" -depth -type d -exec rmdir {} + 2>/dev/null || true; }

# Run a command inside the container (container paths, clean environment).
ct_exec() {
  [[ -n "$CT_PID" ]] || { log "ct_exec: no container"; return 125; }
  nsenter -t "$CT_PID" -a -- /usr/bin/env -i PATH="$CT_PATH" LANG=C.UTF-8 TERM=dumb \
    SYSTEMD_PAGER= SYSTEMD_COLORS=0 HOME=/root "$@"
}
# Run a shell snippet inside: ct_sh 'script' [args for $1...]
ct_sh() { local s="$1"; shift; ct_exec /bin/sh -c "$s" sh "$@"; }

# True while nspawn runs; once it has exited sets CT_EXIT_MS / CT_EXIT_RC.
ct_alive() {
  [[ -n "$CT_DIR" ]] || return 1
  if [[ -s "$CT_DIR/nspawn.rc" ]]; then
    CT_EXIT_RC="$(cat "$CT_DIR/nspawn.rc")"; CT_EXIT_MS="$(cat "$CT_DIR/nspawn.exit_ms")"
    return 1
  fi
  return 0
}

# Wait up to TIMEOUT s for the container to power off (nspawn exits).
ct_wait_exit() {
  local timeout="$1"
  wait_until "$timeout" _ct_exited
}
_ct_exited() { ! ct_alive; }

# Give the container's network the metadata addresses on lo: AWS/GCP/Azure 169.254.169.254,
# Alibaba 100.100.100.200, Tencent 169.254.0.23 (all in nthd.service's IPAddressAllow=), and
# 169.254.0.99, which the unit does not allow (the sandbox scenarios).  The container has a
# private netns, so this cannot touch the host.
ct_net_setup() {
  ct_sh 'ip link set lo up && for a in 169.254.169.254 100.100.100.200 169.254.0.23 169.254.0.99; do
           ip addr replace "$a/32" dev lo || exit 1; done'
}

# Copy a host file into the container via the bind mount; prints the
# container path.  Hard-links when possible (debug binaries are big).
# Usage: ct_put HOSTFILE [NAME]
ct_put() {
  local src="$1" name="${2:-$(basename "$1")}"
  mkdir -p "$CT_DIR/bin"
  ln -f "$src" "$CT_DIR/bin/$name" 2>/dev/null || cp -f "$src" "$CT_DIR/bin/$name"
  chmod a+rx "$CT_DIR/bin/$name" 2>/dev/null || true
  echo "/e2e/bin/$name"
}

# Ask journald to write everything to disk (the journal is on the bind).
ct_journal_sync() { ct_alive && timeout 5 nsenter -t "$CT_PID" -a -- journalctl --sync 2>/dev/null; true; }

# The container's journal, readable during and after its life (host side).
# Usage: ct_journal [journalctl args...]   e.g. ct_journal -u nthd
ct_journal() {
  ct_journal_sync
  journalctl -D "$CT_DIR/journal" -o short-precise --no-pager -q "$@" 2>/dev/null
}

# Tear down whatever is running; safe to call any number of times.  Never
# waits for an orderly shutdown (that could again be held by a delay
# inhibitor): SIGKILL to the container's init kills its whole PID namespace,
# after which nspawn exits by itself.
ct_cleanup() {
  [[ -n "$CT_NSPAWN_PID" ]] || return 0
  if ct_alive; then
    ct_journal_sync
    if [[ -n "$CT_PID" ]] && [[ -d /proc/$CT_PID ]]; then kill -KILL "$CT_PID" 2>/dev/null || true; fi
    if ! wait_until 10 _ct_exited; then
      kill -KILL "$CT_NSPAWN_PID" 2>/dev/null || true
      wait_until 5 _ct_exited || log "warning: nspawn $CT_NSPAWN_PID for $CT_NAME would not die"
    fi
  fi
  [[ -n "$CT_WATCHER_PID" ]] && wait "$CT_WATCHER_PID" 2>/dev/null
  CT_NSPAWN_PID=""; CT_WATCHER_PID=""; CT_PID=""
  return 0
}

# --------------------------------------------------------------- mock IMDS
# Whether OUT (a command's output) has LINE of a sample in it, `…` in LINE standing for anything
# (a process id, a time).  Usage: sample_line_in OUT LINE
sample_line_in() {
  [[ "$2" == *…* ]] || { grep -qF -- "$2" <<<"$1"; return; }
  local re
  re="$(sed 's/[][\.*^$+?(){}|/]/\\&/g; s/…/.*/g' <<<"$2")"
  grep -qE -- "$re" <<<"$1"
}

# The lines of FILE's block between <!-- NAME:begin --> and <!-- NAME:end -->, inside its code
# fence (a sample of output the docs show).  Usage: doc_block FILE NAME
doc_block() {
  awk -v b="<!-- $2:begin -->" -v e="<!-- $2:end -->" '$0 == b { f = 1; next } $0 == e { exit }
       f && /^```/ { g = !g; next } f && g' "$1"
}

# The mock (testkit's nthd-mock-imds) runs inside the container as transient
# unit mock-imds.service, listening on both link-local IMDS addresses.  Its
# control API is on the same addresses under /_mock/.

MOCK_URL="http://169.254.169.254"
# Where the mock listens (its control API is at MOCK_URL, one of them).  A scenario that must
# find only one cloud (tencent-auto) sets both before setup_node.
MOCK_LISTEN=(169.254.169.254:80 100.100.100.200:80)

# Usage: mock_start [extra mock args...]
mock_start() {
  [[ -x "$E2E_MOCK_IMDS" ]] || { log "mock IMDS binary missing: $E2E_MOCK_IMDS"; return 1; }
  local bin; bin="$(ct_put "$E2E_MOCK_IMDS" nthd-mock-imds)"
  # The mock keeps its request log in memory.  At shutdown ExecStop= (which
  # runs before the SIGTERM) saves it to /e2e/mock-log.final.json, so what
  # nthd sent while systemd stopped it (the Azure acknowledgement) can be
  # checked after the container is gone.  Before=nthd.service makes systemd
  # stop nthd first and the mock only after it (stop order is the reverse).
  cat >"$CT_DIR/bin/mock-dump.sh" <<EOF
#!/bin/sh
for what in log events; do
  curl -s -m 2 -o "/e2e/mock-\$what.final.json.tmp" "$MOCK_URL/_mock/\$what" &&
    mv -f "/e2e/mock-\$what.final.json.tmp" "/e2e/mock-\$what.final.json"
done
exit 0
EOF
  local listen=() a
  for a in "${MOCK_LISTEN[@]}"; do listen+=(--listen "$a"); done
  ct_exec systemd-run --quiet --unit=mock-imds --service-type=simple \
    -p StandardOutput=journal -p StandardError=journal \
    -p Before=nthd.service -p "ExecStop=/bin/sh /e2e/bin/mock-dump.sh" \
    "$bin" "${listen[@]}" "$@" || return 1
  wait_until 10 mock_healthy || { log "mock IMDS not healthy"; ct_exec systemctl status --no-pager mock-imds >&2; return 1; }
}
mock_healthy() { ct_exec curl -sf -m 2 -o /dev/null "$MOCK_URL/_mock/health"; }

# Low-level: PUT a full route spec.  Usage: mock_route PATH ROUTE_JSON
# ROUTE_JSON is the mock's route object: {"status":..,"body":"..","headers":{..}}
mock_route() {
  local path="$1" spec="$2"
  ct_sh 'printf %s "$2" | curl -sS -f -m 5 -X PUT -H "Content-Type: application/json" \
           --data-binary @- "$3/_mock/route?path=$1" >/dev/null' "$path" "$spec" "$MOCK_URL"
}

# Serve JSON document BODY (a string) at PATH with 200 + application/json.
# Usage: set_route PATH BODY_JSON [STATUS]
set_route() {
  local path="$1" body="$2" status="${3:-200}" spec
  spec="$(ct_exec jq -cn --arg b "$body" --argjson s "$status" \
            '{status:$s, body:$b, headers:{"Content-Type":"application/json"}}')" || return 1
  mock_route "$path" "$spec"
}
# Serve plain text at PATH (GCP/Alibaba style). Usage: set_route_text PATH TEXT [STATUS]
set_route_text() {
  local path="$1" body="$2" status="${3:-200}" spec
  spec="$(ct_exec jq -cn --arg b "$body" --argjson s "$status" \
            '{status:$s, body:$b, headers:{"Content-Type":"text/plain"}}')" || return 1
  mock_route "$path" "$spec"
}
del_route() { ct_exec curl -sS -f -m 5 -X DELETE "$MOCK_URL/_mock/route?path=$1" >/dev/null; }
# Usage: mock_config JSON
mock_config() {
  ct_sh 'printf %s "$1" | curl -sS -f -m 5 -X PUT -H "Content-Type: application/json" \
           --data-binary @- "$2/_mock/config" >/dev/null' "$1" "$MOCK_URL"
}
mock_events() { ct_exec curl -sS -f -m 5 "$MOCK_URL/_mock/events"; }
mock_log()    { ct_exec curl -sS -f -m 5 "$MOCK_URL/_mock/log"; }

# t_ms of the LAST route-change event for PATH in /_mock/events.  Accepts
# either a JSON array or JSON lines, and any object that mentions the path
# in a "path" field.  Prints nothing if not found.
mock_event_ms() {
  local path="$1"
  mock_events | ct_exec jq -r --arg p "$path" -s '
      [ .[] | if type == "array" then .[] elif type == "object" and has("events") then .events[] else . end
        | select(type == "object" and ((.path // .route // "") == $p)) | .t_ms ] | last // empty' 2>/dev/null
}

# ------------------------------------------------------ kubelet stand-in

# Signal only the MAIN process of UNIT inside the container.  Never a plain `systemctl kill`
# (--kill-whom=all): this host's PID 1 is not systemd, so every container's units share the
# host's cgroup directories, and "all processes of systemd-logind.service" includes every
# neighbour container's logind, which systemd cannot even see in its PID namespace ("Failed
# to send signal SIGHUP to auxiliary processes: Input/output error", and the call fails).
# Through the manager's D-Bus API (KillUnit(name, "main", signo)), because the option is
# --kill-whom= on systemd >= 252 but --kill-who= on 247 (Debian 11).
# Usage: ct_kill_main UNIT SIGNAL   (SIGNAL: a name such as HUP or TERM)
ct_kill_main() {
  local unit="$1" sig="$2" no
  no="$(kill -l "$sig" 2>/dev/null)" || { log "ct_kill_main: unknown signal $sig"; return 1; }
  [[ "$unit" == *.* ]] || unit+=.service
  ct_exec busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 \
    org.freedesktop.systemd1.Manager KillUnit ssi "$unit" main "$no"
}

# Raise logind's InhibitDelayMaxSec like kubelet does (drop-in + SIGHUP to
# logind), and verify logind picked it up.
# shellcheck disable=SC2120  # optional argument
logind_set_inhibit_delay() {
  local secs="${1:-$E2E_INHIBIT_DELAY}" got
  ct_sh 'mkdir -p /etc/systemd/logind.conf.d &&
         printf "[Login]\nInhibitDelayMaxSec=%s\n" "$1" >/etc/systemd/logind.conf.d/99-kubelet.conf' "$secs" || return 1
  ct_kill_main systemd-logind HUP || return 1
  # logind re-reads its config asynchronously after SIGHUP.
  wait_until 5 _logind_delay_is "$secs" || {
    got="$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec)"
    log "logind InhibitDelayMaxUSec is '$got', wanted ${secs}s"; return 1; }
}
_logind_delay_is() {
  [[ "$(ct_exec busctl get-property org.freedesktop.login1 /org/freedesktop/login1 \
          org.freedesktop.login1.Manager InhibitDelayMaxUSec 2>/dev/null)" == "t $(( $1 * 1000000 ))" ]]
}

# Number of delay-mode shutdown inhibitors currently held.
logind_delay_locks() {
  ct_exec busctl --json=short call org.freedesktop.login1 /org/freedesktop/login1 \
    org.freedesktop.login1.Manager ListInhibitors 2>/dev/null \
    | ct_exec jq '[.data[0][] | select((.[0] | split(":") | index("shutdown")) and .[3] == "delay")] | length'
}

# Start the kubelet stand-in as transient unit fake-kubelet.service and wait
# until it holds its delay lock.  Records go to /e2e/kubelet.jsonl
# (host: $CT_DIR/kubelet.jsonl).  Extra arguments go to the stand-in, e.g.
# pods laid out as kubelet's systemd cgroup driver does, stopped group by
# group during the drain (testkit/src/kubelet/pods.rs):
#   kubelet_start --pod kube-system/coredns-1:burstable:1 --pod web/db-0:guaranteed:2 \
#                 --group 1:2 --group 2:40
# Usage: kubelet_start [STAND-IN ARGS...]
kubelet_start() {
  [[ -x "$E2E_FAKE_KUBELET" ]] || { log "kubelet stand-in binary missing: $E2E_FAKE_KUBELET"; return 1; }
  # shellcheck disable=SC2119
  logind_set_inhibit_delay || return 1
  local bin; bin="$(ct_put "$E2E_FAKE_KUBELET" nthd-fake-kubelet)"
  # logind starts the shutdown the instant the lock's fd closes, and systemd
  # SIGTERMs this unit within milliseconds, racing the stand-in's "released"
  # record.  nthd-fake-kubelet handles SIGTERM itself (testkit/src/kubelet.rs):
  # it finishes its records, appends "stopped", and exits within 3 s.  (An
  # ExecStop= that waited for "released" papered over this until the fix.)
  ct_exec systemd-run --quiet --unit=fake-kubelet --service-type=simple \
    -p StandardOutput=journal -p StandardError=journal \
    "$bin" --record /e2e/kubelet.jsonl --drain-secs "$E2E_DRAIN_SECS" "$@" || return 1
  wait_until 10 _kubelet_locked || {
    log "kubelet stand-in did not take its delay lock"; ct_exec systemctl status --no-pager fake-kubelet >&2
    return 1; }
}
_kubelet_locked() {
  jsonl_event_field "$CT_DIR/kubelet.jsonl" locked >/dev/null && [[ "$(logind_delay_locks)" -ge 1 ]]
}

# The pods whose cgroups have processes now, as nthd names them: namespace/name
# from /var/log/pods (pod-uid:UID without a log directory), one a line, sorted.
# Reads cgroup v2 with the systemd driver's layout inside the container.
kubelet_pods_running() {
  ct_sh 'cd /sys/fs/cgroup/kubepods.slice 2>/dev/null || exit 0
         for d in kubepods-pod*.slice kubepods-*.slice/kubepods-*-pod*.slice; do
           grep -qx "populated 1" "$d/cgroup.events" 2>/dev/null || continue
           uid="${d##*-pod}"; uid="${uid%.slice}"; uid="$(printf %s "$uid" | tr _ -)"
           log="$(ls -d /var/log/pods/*_"$uid" 2>/dev/null | head -n1)"
           if [ -n "$log" ]; then log="${log##*/}"; log="${log%_*}"; printf "%s/%s\n" "${log%%_*}" "${log#*_}"
           else printf "pod-uid:%s\n" "$uid"; fi
         done | LC_ALL=C sort'
}

# Host-side view of the stand-in's record.  Usage: kubelet_event_ms EVENT
kubelet_event_ms() { jsonl_event_field "$CT_DIR/kubelet.jsonl" "$1"; }

# Wait until the stand-in recorded PrepareForShutdown; prints its t_ms.
# Usage: wait_for_prepare TIMEOUT_S
wait_for_prepare() {
  wait_until "$1" kubelet_event_ms prepare >/dev/null || return 1
  kubelet_event_ms prepare
}
# True if no PrepareForShutdown was recorded for TIMEOUT_S seconds.
no_prepare_for() {
  ! wait_until "$1" kubelet_event_ms prepare >/dev/null
}

# ------------------------------------------------------------------- nthd

# The package under test: $E2E_NTHD_DEB, else the newest target/dist/nthd_*_$E2E_ARCH.deb
# (packaging/build.sh: static musl binary), else the newest target/debian/nthd_*_$E2E_ARCH.deb
# (cargo deb).  Always of the tree's architecture.
nthd_deb_path() {
  if [[ -n "$E2E_NTHD_DEB" ]]; then echo "$E2E_NTHD_DEB"; return; fi
  local d f
  for d in "$REPO/target/dist" "$REPO/target/debian"; do
    # shellcheck disable=SC2012  # cargo-deb names have no odd characters
    f="$(ls -t "$d"/nthd_*_"$E2E_NTHD_ARCH".deb 2>/dev/null | head -n1)"
    [[ -z "$f" ]] || { echo "$f"; return; }
  done
}

# dpkg -i the package inside the running container.  The package's
# maintainer scripts create user nthd, install the unit, polkit rule and
# /etc/default/nthd, and enable+start nthd.
nthd_install() {
  local deb; deb="$(nthd_deb_path)"
  [[ -n "$deb" && -r "$deb" ]] || { log "nthd .deb missing (set E2E_NTHD_DEB or run cargo deb)"; return 1; }
  local in; in="$(ct_put "$deb" nthd.deb)"
  if [[ "$E2E_NTHD_ARCH" != "$E2E_ARCH" ]]; then   # multiarch: the package is static
    ct_exec dpkg --add-architecture "$E2E_NTHD_ARCH" || { log "dpkg --add-architecture $E2E_NTHD_ARCH failed"; return 1; }
  fi
  ct_exec dpkg -i "$in" >"$CT_DIR/dpkg.log" 2>&1 || { log "dpkg -i failed:"; cat "$CT_DIR/dpkg.log" >&2; return 1; }
  ct_exec id nthd >/dev/null || { log "dpkg -i did not create user nthd"; return 1; }
  ct_exec test -f /usr/share/polkit-1/rules.d/50-nthd.rules || { log "polkit rule not installed"; return 1; }
  ct_exec test -f "$NTHD_PKLA" || { log "polkit .pkla not installed"; return 1; }
  nthd_qemu_user_dropin
}

# On a foreign-architecture tree systemd itself (PID 1, an arm64 binary) runs under
# qemu-user, which cannot do two of nthd.service's sandboxing steps for it:
#   PrivateIPC=yes   -> "Failed to set up IPC namespacing: Input/output error" (226/NAMESPACE)
#   PrivateUsers=yes -> "Failed at step USER spawning /usr/bin/nthd: Invalid argument" (217/USER)
# (the same limitation makes systemd-sysusers/tmpfiles-setup/sysctl.service fail with
# 243/CREDENTIALS at boot).  A drop-in turns only these two off there; everything else in
# the unit stays as shipped.  Not an nthd problem: on real arm64 hardware systemd runs
# natively.  Callers restart nthd afterwards (nthd_configure does).
nthd_qemu_user_dropin() {
  if [[ "$E2E_NTHD_ARCH" != "$E2E_ARCH" ]]; then
    # Native systemd runs the foreign nthd through qemu-user, whose JIT needs writable and
    # then executable memory: MemoryDenyWriteExecute= stops it ("mprotect of jit buffer:
    # Operation not permitted").  Everything else, the IP firewall included, stays as shipped.
    log "foreign nthd ($E2E_NTHD_ARCH) under native systemd: nthd.service drop-in MemoryDenyWriteExecute=no (qemu-user's JIT)"
    ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
           printf "[Service]\nMemoryDenyWriteExecute=no\n" >/etc/systemd/system/nthd.service.d/50-e2e-qemu-user.conf &&
           systemctl daemon-reload'
    return
  fi
  [[ "$E2E_ARCH" != "$E2E_HOST_ARCH" ]] || return 0
  log "foreign arch $E2E_ARCH: nthd.service drop-in PrivateIPC=no PrivateUsers=no (systemd under qemu-user cannot set them up)"
  ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
         printf "[Service]\nPrivateIPC=no\nPrivateUsers=no\n" >/etc/systemd/system/nthd.service.d/50-e2e-qemu-user.conf &&
         systemctl daemon-reload'
}

# polkit: 0.105 (Debian 11's policykit-1) reads only the .pkla files of its local authority;
# 0.106 and later (Debian 12: 122, Debian 13: 126) only the JS rules.  The package ships both.
NTHD_RULE=/usr/share/polkit-1/rules.d/50-nthd.rules
NTHD_PKLA=/var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla
# polkit's version in the container, e.g. 0.105 or 122 (pkaction is in polkitd/policykit-1).
polkit_version() { ct_exec pkaction --version 2>/dev/null | awk '{print $NF; exit}'; }
# The file that grants nthd power-off on this polkit: the .pkla on 0.105, else the JS rule.
polkit_grant_file() {
  local v; v="$(polkit_version)" || return 1
  [[ -n "$v" ]] || return 1
  if [[ "$v" == 0.* ]] && (( 10#${v#0.} <= 105 )); then echo "$NTHD_PKLA"; else echo "$NTHD_RULE"; fi
}

# Write /etc/default/nthd (the ONLY way the harness configures nthd) and
# restart nthd.  Extra lines can be injected with E2E_NTHD_EXTRA_ENV
# (newline-separated KEY=VALUE), e.g. a shorter poll interval.
# Stop, rewrite, start (rather than restart) so that NTHD_START_MS separates
# the requests of the package-default nthd (NTHD_PROVIDER=auto probes every
# cloud) from those of the configured one in the mock's log: `systemctl
# stop` returns only once the old process is gone.
# Usage: nthd_configure KEY=VALUE...
NTHD_START_MS=""
nthd_configure() {
  local content; content="$(printf '%s\n' "# written by tests/e2e" "$@")"
  [[ -n "${E2E_NTHD_EXTRA_ENV:-}" ]] && content+=$'\n'"$E2E_NTHD_EXTRA_ENV"
  ct_exec systemctl stop nthd || return 1
  NTHD_START_MS="$(now_ms)"
  ct_sh 'printf "%s\n" "$1" >/etc/default/nthd && systemctl start nthd' "$content" || return 1
  wait_until 10 nthd_active || { log "nthd not active after restart"; ct_exec systemctl status --no-pager nthd >&2; return 1; }
}
# Lines of nthd's journal (this boot) matching a fixed string, counted.
nthd_journal_count() { ct_journal -u nthd | grep -cF -- "$1" || true; }
nthd_active() { [[ "$(ct_exec systemctl is-active nthd 2>/dev/null)" == active ]]; }
nthd_main_pid() { ct_exec systemctl show -p MainPID --value nthd; }
# Whether the running nthd has VAR=VALUE in its environment (its settings file as it read it).
nthd_env_has() { ct_exec cat "/proc/$(nthd_main_pid)/environ" 2>/dev/null | tr '\0' '\n' | grep -qxF "$1"; }
nthd_restarts() { ct_exec systemctl show -p NRestarts --value nthd; }
# User name nthd's main process runs as (from /proc/PID/status Uid).
nthd_user() {
  local pid uid; pid="$(nthd_main_pid)"
  [[ -n "$pid" && "$pid" != 0 ]] || return 1
  uid="$(ct_exec awk '/^Uid:/{print $2}' "/proc/$pid/status")" || return 1
  ct_exec getent passwd "$uid" | cut -d: -f1
}

# -------------------------------------------------------------- neighbour
# An unrelated container next to the scenario's: booted from the same tree under its own
# machine name, NOT managed by ct_* (its own globals), with nthd installed and transient
# units named like the scenario's.  Used to prove the harness and nthd never reach into a
# neighbour (with a plain `systemctl kill`, they did).

NB_NSPAWN_PID=""; NB_PID=""; NB_DIR=""
# Usage: nb_boot HOSTDIR
nb_boot() {
  NB_DIR="$1"; mkdir -p "$NB_DIR"
  # Booted as ct_boot boots: cgroup v2, bpf() allowed, in a cgroup subtree of its own.
  ( _ct_own_cgroup enter "nthd-neighbour-$$"
    SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 exec systemd-nspawn --quiet -D "$ROOTFS" \
      -M "nthd-neighbour-$$" --volatile=overlay --register=no --keep-unit --private-network \
      --system-call-filter=bpf --link-journal=no -b --console=pipe --bind="$NB_DIR:/e2e" \
  ) </dev/null >"$NB_DIR/console.log" 2>&1 &
  NB_NSPAWN_PID=$!
  wait_until "$E2E_BOOT_TIMEOUT" _nb_running || { log "neighbour did not boot"; tail -n 20 "$NB_DIR/console.log" >&2; return 1; }
  mkdir -p "$NB_DIR/bin"; cp -f "$(nthd_deb_path)" "$NB_DIR/bin/nthd.deb"
  nb_exec dpkg -i /e2e/bin/nthd.deb >"$NB_DIR/dpkg.log" 2>&1 || { log "dpkg -i in the neighbour failed"; return 1; }
  nb_exec systemd-run -q --unit=fake-kubelet sleep 100000 &&
    nb_exec systemd-run -q --unit=mock-imds sleep 100000 &&
    nb_exec systemctl start polkit || return 1
}
_nb_running() {
  [[ -n "$NB_PID" ]] || NB_PID="$(_ct_find_init "$NB_NSPAWN_PID")" || return 1
  [[ "$(nb_exec systemctl is-system-running 2>/dev/null)" == @(running|degraded) ]]
}
nb_exec() {
  nsenter -t "$NB_PID" -a -- /usr/bin/env -i PATH="$CT_PATH" LANG=C.UTF-8 SYSTEMD_PAGER= "$@"
}
# One line: the neighbour's init PID, state, and per unit MainPID/NRestarts/ActiveState.
nb_snapshot() {
  kill -0 "$NB_NSPAWN_PID" 2>/dev/null && [[ -d "/proc/$NB_PID" ]] || return 1
  local u out
  out="init=$NB_PID state=$(nb_exec systemctl is-system-running)"
  for u in systemd-logind polkit dbus nthd fake-kubelet mock-imds; do
    out+=" $u=$(nb_exec systemctl show -p MainPID -p NRestarts -p ActiveState --value "$u" | paste -sd/)"
  done
  echo "$out"
}
# Lines of the neighbour's journal that show its logind or nthd got a signal or reloaded.
nb_signal_lines() {
  nb_exec journalctl -q --no-pager -u systemd-logind -u nthd -u fake-kubelet -u mock-imds \
    -g 'SIGHUP|SIGTERM|config file reloaded|stopping|Stopped|Deactivated' 2>/dev/null
}
nb_untouched() { [[ -z "$(nb_signal_lines)" ]]; }
nb_stop() {
  [[ -n "$NB_NSPAWN_PID" ]] || return 0
  [[ -z "$NB_PID" ]] || kill -KILL "$NB_PID" 2>/dev/null
  wait_until 10 _nb_exited || kill -KILL "$NB_NSPAWN_PID" 2>/dev/null
  wait_until 5 _nb_exited; _ct_own_cgroup remove "nthd-neighbour-$$"
  NB_NSPAWN_PID=""; NB_PID=""
}
_nb_exited() { _pid_gone "$NB_NSPAWN_PID"; }

# The mock IMDS and the kubelet stand-in are cheap to build (and a no-op when
# up to date), so build them here: a fresh clone then needs only the .deb.
build_testkit() {
  ((E2E_BUILD_TESTKIT)) && [[ -z "${E2E_NO_BUILD:-}" ]] || return 0
  command -v cargo >/dev/null || { log "cargo not found; not building the testkit binaries"; return 0; }
  local target=()
  [[ -z "$E2E_TESTKIT_TARGET" ]] || target=(--release --target "$E2E_TESTKIT_TARGET")
  log "cargo build -p nthd-testkit ${target[*]} (mock IMDS, kubelet stand-in)"
  (cd "$REPO" && cargo build --quiet ${target[@]+"${target[@]}"} -p nthd-testkit \
     --bin nthd-mock-imds --bin nthd-fake-kubelet --bin nthd-many-locks) >&2 \
    || log "warning: building the testkit binaries failed"
}

# ------------------------------------------------- CloudEvents SDK wheels
# The webhook receiver (tests/e2e/receiver.py) runs inside the container on the CloudEvents SDK
# for Python (PyPI `cloudevents`).  The container has no network, so the wheels of the SDK, of
# its dependencies and of pip itself are downloaded once on the host (pip, through whatever
# index pip is configured with) into target/e2e/wheels/, for the tree's Python (3.11 in Debian
# 12), and reused while the requirement is the same.  Inside, pip runs from its own wheel and
# installs with --no-index from /e2e/wheels (wheels_install_in_ct).
E2E_CLOUDEVENTS_REQ="${E2E_CLOUDEVENTS_REQ:-cloudevents>=2.2,<3}"
E2E_WHEELS="${E2E_WHEELS:-$E2E_DIR/wheels}"
wheels_fetch() { wheels_fetch_for "$E2E_WHEELS" "$E2E_CLOUDEVENTS_REQ" cloudevents; }
# The wheels of REQUIREMENT (NAME-*.whl among them) and pip's, for the trees' Python 3.11, in
# DIR: downloaded once, under DIR.lock, so that scenarios running at once download them once.
# Usage: wheels_fetch_for DIR REQUIREMENT NAME
wheels_fetch_for() {
  mkdir -p "$(dirname "$1")"
  ( flock -w 600 9 || { log "waited 600 s for $1.lock (another download of these wheels)"; exit 1; }
    _wheels_download "$@" ) 9>"$1.lock"
}
_wheels_download() {
  local dir="$1" req="$2" name="$3" want="req=$2 python=3.11" tmp="$1.tmp"
  if [[ "$(cat "$dir/stamp" 2>/dev/null)" == "$want" ]] &&
     compgen -G "$dir/$name-*.whl" >/dev/null && compgen -G "$dir/pip-*.whl" >/dev/null; then
    return 0
  fi
  if ! python3 -m pip --version >/dev/null 2>&1; then
    log "installing python3-pip (apt-get) to download the wheels of $req"
    apt_install python3-pip >/dev/null ||
      { log "no pip on the host: apt-get install python3-pip"; return 1; }
  fi
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "pip download $req pip (wheels for Python 3.11) into $dir"
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 \
      -d "$tmp" "$req" pip >&2 || { rm -rf "$tmp"; return 1; }
  echo "$want" >"$tmp/stamp"
  rm -rf "$dir"; mv "$tmp" "$dir"
}
# Install the SDK into DIR inside the running container with the container's python3, pip run
# from its wheel (no pip package in the tree), nothing but /e2e/wheels as the index.
# Usage: wheels_install_in_ct DIR
wheels_install_in_ct() {
  mkdir -p "$CT_DIR/wheels"
  cp -f "$E2E_WHEELS"/*.whl "$CT_DIR/wheels/" || return 1
  ct_sh 'set -- /e2e/wheels/pip-*.whl "$1"
         python3 "$1/pip" install -q --no-index --find-links /e2e/wheels --disable-pip-version-check \
           --no-cache-dir --no-compile --root-user-action=ignore --target "$2" cloudevents' "$1"
}
