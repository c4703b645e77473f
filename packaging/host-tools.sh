# shellcheck shell=bash
# The build and test host's tools, installed without failing when another installer runs at the
# same time: the README's demo and its test suite started together, or unattended-upgrades on a
# machine that has just booted. Sourced by packaging/build.sh, packaging/ami/validate.sh,
# tests/run-all.sh, tests/e2e/demo.sh and every script that installs a host package or a Rust
# target; nothing else in the tree runs apt-get or `rustup target add` on the host.
#
# apt-get's own DPkg::Lock::Timeout waits for dpkg's lock only: `apt-get update` still fails at
# once on /var/lib/apt/lists/lock (measured on Debian 12's apt 2.6.2, docs/testing.md). So every
# call is retried while the failure is a lock, for NTHD_APT_LOCK_WAIT seconds in all (default
# 900), saying who holds it; any other failure is returned at once with apt's own words.

# apt_get ARGS...: DEBIAN_FRONTEND=noninteractive apt-get ARGS, retried while a lock is held.
# apt's output goes to stdout on success and to stderr on failure.
apt_get() {
    local limit=${NTHD_APT_LOCK_WAIT:-900} t0=$SECONDS said=-30 out rc holder
    while :; do
        # (`&& rc=0 || rc=$?`: a caller's `set -e` must not end the script on a held lock.)
        out=$(DEBIAN_FRONTEND=noninteractive apt-get "$@" 2>&1) && rc=0 || rc=$?
        if [ "$rc" = 0 ]; then
            [ -z "$out" ] || printf '%s\n' "$out"
            return 0
        fi
        if ! grep -qE 'Could not get lock|Unable to lock|Unable to acquire the dpkg frontend lock' <<<"$out"; then
            printf '%s\n' "$out" >&2
            return "$rc"
        fi
        holder=$(grep -m 1 -oE '(lock [^ ]+|held by process [0-9]+ \([^)]*\))' <<<"$out" | tail -n 1)
        if ((SECONDS - t0 >= limit)); then
            printf '%s\n' "$out" >&2
            echo "apt-get $1: gave up after ${limit}s waiting for the apt/dpkg lock${holder:+ ($holder)};" \
                "let that install finish or stop it, or raise NTHD_APT_LOCK_WAIT, and rerun" >&2
            return "$rc"
        fi
        if ((SECONDS - said >= 30)); then
            echo "==> apt-get $1: another apt-get or dpkg holds its lock${holder:+ ($holder)};" \
                "waiting ($((SECONDS - t0))s of ${limit}s, NTHD_APT_LOCK_WAIT)" >&2
            said=$SECONDS
        fi
        sleep 2
    done
}

# apt_install [APT-GET OPTIONS] PACKAGES...: refresh the lists, then install, both waiting for
# the locks as apt_get does.
apt_install() {
    apt_get update -qq && apt_get install -y -qq "$@"
}

# rustup_target_add TRIPLE...: the Rust targets not installed yet, one rustup at a time. rustup
# takes no lock of its own (rust-lang/rustup#988): two `rustup target add` of one target at once
# can leave a half-installed component, so the suite and the demo serialize on a lock file.
rustup_target_add() {
    local t lock
    lock="${TMPDIR:-/tmp}/nthd-rustup-$(id -u).lock"
    (
        flock -w "${NTHD_APT_LOCK_WAIT:-900}" 9 || {
            echo "rustup target add: another rustup held $lock for ${NTHD_APT_LOCK_WAIT:-900}s" >&2
            exit 1
        }
        for t in "$@"; do
            rustup target list --installed 2>/dev/null | grep -qx "$t" && continue
            echo "==> rustup target add $t"
            rustup target add "$t" || exit 1
        done
    ) 9>"$lock"
}
