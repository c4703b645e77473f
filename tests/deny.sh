#!/usr/bin/env bash
# cargo-deny for nthd, as CI runs it (deny.toml holds the policy).
#
#   tests/deny.sh [--install-only]
#
# 0. `cargo fetch --locked` (crates.io only): cargo-deny reads `cargo metadata`, which needs
#    the crates of every platform (windows-sys and the like) even though deny.toml checks
#    Linux targets only. A cache that never fetched them fails under --offline.
# 1. Licences, bans and sources: always, offline. Any finding fails.
# 2. Advisories (RustSec): the database is fetched from GitHub. Where GitHub cannot be reached
#    (this project's CI machines), a database already on the machine is used instead, and its
#    date is printed. With neither, the step says so loudly and is skipped, unless
#    NTHD_REQUIRE_ADVISORIES=1, which makes that a failure.
#    NTHD_ADVISORY_DB=DIR: a checkout (or clone URL) of github.com/rustsec/advisory-db to use
#    when the fetch fails, for machines without GitHub access.
# Any advisory against a crate in Cargo.lock fails the step.
set -euo pipefail
cd "$(dirname "$0")/.."

db_root=${CARGO_HOME:-$HOME/.cargo}/advisory-dbs
have_db() { compgen -G "$db_root/advisory-db-*/crates" >/dev/null; }
CARGO_DENY_VERSION=0.20.2
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh

# The advisory database: sets fetch_log and fetched (1 when the fetch worked).
fetch_db() {
    local dest
    fetch_log=$(timeout 300 cargo deny fetch db 2>&1) && fetched=1 || fetched=0
    if [ "$fetched" = 0 ] && [ -n "${NTHD_ADVISORY_DB:-}" ]; then
        # cargo-deny names the directory after the database URL; its failed clone says which.
        dest=$(printf '%s\n' "$fetch_log" | sed -n "s/^Cloning into '\(.*\)'\.\.\.$/\1/p" | tail -n 1)
        if [ -n "$dest" ]; then
            echo "deny.sh: GitHub unreachable; using the advisory database from $NTHD_ADVISORY_DB" >&2
            rm -rf "$dest"
            git clone -q "$NTHD_ADVISORY_DB" "$dest"
        else
            echo "deny.sh: cannot tell where cargo-deny keeps its database; fetch said:" >&2
            printf '%s\n' "$fetch_log" >&2
        fi
    fi
}

check_advisories() {
    local d when age
    if [ "$fetched" = 1 ] || have_db; then
        # `cargo deny fetch db` can exit 0 with a stale copy when GitHub is unreachable, so the
        # date printed is the database's own, not the time of this run.
        for d in "$db_root"/advisory-db-*/; do
            [ -d "$d/crates" ] || continue
            when=$(git -C "$d" log -1 --format=%ct 2>/dev/null || echo 0)
            age=$((($(date +%s) - when) / 86400))
            echo "deny.sh: RustSec database $(git -C "$d" log -1 --format='%h of %cs' 2>/dev/null || echo '(undated)'), $age days old" >&2
            [ "$age" -le 30 ] || echo "deny.sh: warning: advisories published since then are not checked" >&2
        done
        cargo deny --offline check advisories
    else
        echo "deny.sh: ADVISORIES NOT CHECKED: the RustSec database could not be fetched:" >&2
        printf '%s\n' "$fetch_log" | tail -n 2 | sed 's/^/    /' >&2
        echo "    Run this where github.com is reachable, or set NTHD_ADVISORY_DB to a clone of" >&2
        echo "    https://github.com/rustsec/advisory-db." >&2
        if [ "${NTHD_REQUIRE_ADVISORIES:-0}" = 1 ]; then
            exit 1
        fi
    fi
}

main() {
    cargo_tool cargo-deny "$CARGO_DENY_VERSION" deny >&2
    # Every platform's crates, so that the offline steps below find them (a no-op once cached).
    cargo fetch --locked
    # --install-only: the tool and the crates, no check (the suite does this while other stages
    # wait on timers, and checks later).
    [ "${1:-}" != --install-only ] || return 0

    # Duplicate versions only warn (deny.toml); their inclusion trees are noise here.
    cargo deny --offline check --hide-inclusion-graph licenses bans sources
    fetch_db
    check_advisories
}

main "$@"
