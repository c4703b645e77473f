# shellcheck shell=bash
# The build and test host's tools, installed without failing when another installer runs at the
# same time: the README's demo and its test suite started together, or unattended-upgrades on a
# machine that has just booted. Sourced by packaging/build.sh, packaging/ami/validate.sh,
# tests/run-all.sh, tests/e2e/demo.sh and every script that installs a host package, a Rust
# target or a cargo tool; nothing else in the tree runs apt-get, `rustup target add` or
# `cargo install` on the host.
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

# cargo_tool CRATE VERSION SUBCOMMAND: the cargo tool CRATE at VERSION, installed unless the tool
# itself answers `cargo SUBCOMMAND --version` with that version. The tool is asked, not
# `cargo install --list`: that reads only the current CARGO_HOME's records, so a binary of the
# pinned version that another CARGO_HOME put in a shared bin/ would make `cargo install` refuse
# ("binary already exists in destination"). --force replaces a binary of another version.
# cargo-auditable alone cannot be asked (`cargo auditable --version` is cargo's own version):
# for it the records are read, and a binary they do not know is replaced (--force).
# Two callers at once (the demo beside the suite) install one at a time, behind a lock file.
cargo_tool() {
    local crate=$1 version=$2 sub=$3 lock
    lock="${TMPDIR:-/tmp}/nthd-cargo-install-$(id -u).lock"
    (
        flock -w "${NTHD_APT_LOCK_WAIT:-900}" 9 || {
            echo "cargo install $crate: another install held $lock for ${NTHD_APT_LOCK_WAIT:-900}s" >&2
            exit 1
        }
        if _cargo_tool_has "$crate" "$version" "$sub"; then
            echo "$crate $version already installed ($(command -v "cargo-$sub" || echo "cargo $sub"))"
            exit 0
        fi
        echo "==> cargo install --locked $crate@$version"
        cargo install --locked --force "$crate@$version"
    ) 9>"$lock"
}
_cargo_tool_has() {
    if [ "$1" = cargo-auditable ]; then
        command -v cargo-auditable >/dev/null && cargo install --list | grep -qxF "$1 v$2:"
        return
    fi
    cargo "$3" --version 2>/dev/null | tr -s '[:blank:]' '\n' | grep -qxF -e "$2" -e "v$2"
}

# cargo-nextest, which runs the test suite (tests/run-all.sh, tests/arm64.sh; .config/nextest.toml).
NEXTEST_VERSION=0.9.143
nextest_tool() { cargo_tool cargo-nextest "$NEXTEST_VERSION" nextest; }
