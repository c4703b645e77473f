#!/usr/bin/env bash
# shellcheck disable=SC2015  # A && B || fail is meant
# The release is signed with the release key, or says so loudly (packaging/build.sh,
# packaging/repo.sh): tests/run-all.sh's artifacts stage runs
#
#   tests/signing-key.sh --refusal     build.sh --all-arches without NTHD_SIGNING_KEY and
#                                      without --test-key exits non-zero in under 5 s, before
#                                      any slow work, naming both ways out
#   tests/signing-key.sh --killed      build.sh --test-key killed with SIGTERM (its process
#                                      group, as a cancelled CI job is) once its TEST key
#                                      exists: the key's GNUPGHOME is gone, no gpg-agent of it
#                                      runs, no secret key under target/
#   tests/signing-key.sh --artifacts   after build.sh --all-arches --test-key: target/dist/
#                                      holds nthd-TEST-key.asc and nthd-TEST-keyring.gpg and
#                                      not the release names, the key is public only, says
#                                      TEST, expires within 24 h, verifies SHA256SUMS.asc; no
#                                      secret key or GNUPGHOME under target/ or left in TMPDIR
#
# --killed runs a real host-architecture build up to its key (the tools installed first if
# missing, as build.sh does) and kills it there, before it writes anything into target/dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fail() { printf 'signing-key.sh: FAIL: %s\n' "$*" >&2; exit 1; }
ok() { printf 'signing-key.sh: ok: %s\n' "$*"; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# No secret key and no GNUPGHOME anywhere under target/. target/e2e/ is looked at for the TEST
# key's own GNUPGHOME only: its runs make keys of their own on purpose (repo-*'s "another
# key", dnf's key caches) and its trees are debootstrapped Debian; build.sh writes neither.
expect_no_secret_under_target() {
    local found
    [ -d target ] || return 0
    found=$(find target -path target/e2e -prune -o \( -name private-keys-v1.d -o \
        -name secring.gpg -o -name 'S.gpg-agent*' -o -name 'gnupg.*' -o -name 'nthd-TEST-gnupg.*' -o \
        -name pubring.kbx \) -print 2>/dev/null | head -n 5)
    # A fresh clone has no target/e2e yet at the artifacts stage: find's failure there must not
    # end the script (set -e, pipefail) without a word.
    if [ -d target/e2e ]; then
        found+=$(find target/e2e -path 'target/e2e/rootfs*' -prune -o -name 'nthd-TEST-gnupg.*' -print 2>/dev/null | head -n 5)
    fi
    [ -z "$found" ] || fail "$1: a GnuPG home or secret key under target/: $found"
    found=$(grep -rl -- '-----BEGIN PGP PRIVATE KEY BLOCK-----' target/dist 2>/dev/null | head -n 3) || true
    [ -z "$found" ] || fail "$1: a secret key in target/dist/: $found"
}

refusal() {
    local t0 rc=0 out
    t0=$(date +%s%N)
    out=$(env -u NTHD_SIGNING_KEY timeout 60 bash packaging/build.sh --all-arches 2>&1) || rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    [ "$rc" != 0 ] || fail "build.sh --all-arches without NTHD_SIGNING_KEY or --test-key exited 0"
    [ "$rc" != 124 ] || fail "build.sh --all-arches without a key did not stop within 60 s (it started the build?)"
    [ "$ms" -lt 5000 ] || fail "build.sh --all-arches without a key took $ms ms to refuse (slow work before the check?)"
    ! grep -q '^==> ' <<<"$out" || fail "build.sh --all-arches without a key started work before refusing: $out"
    grep -q 'NTHD_SIGNING_KEY=<fingerprint>' <<<"$out" && grep -q -- '--all-arches --test-key' <<<"$out" &&
        grep -q 'nthd-TEST-key.asc' <<<"$out" ||
        fail "the refusal does not name both ways (NTHD_SIGNING_KEY=, --test-key): $out"
    ok "build.sh --all-arches without a key: exit $rc in $ms ms, naming NTHD_SIGNING_KEY and --test-key"
    rc=0; out=$(NTHD_SIGNING_KEY=0123456789ABCDEF timeout 60 bash packaging/build.sh --all-arches --test-key 2>&1) || rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'drop one' <<<"$out" ||
        fail "build.sh with both NTHD_SIGNING_KEY and --test-key did not refuse at once (exit $rc): $out"
    ok "NTHD_SIGNING_KEY with --test-key: refused ($out)"
}

killed() {
    local log=$scratch/build.log pid home i rc=0
    # The log exists before the build starts: the loop below reads it at once, and a build the
    # scheduler has not started yet must not make that read fail (it did, under a loaded suite).
    : >"$log"
    env -u NTHD_SIGNING_KEY setsid bash packaging/build.sh --test-key >>"$log" 2>&1 &
    pid=$!
    # Up to 20 min: on a fresh machine build.sh installs its tools before it makes the key.
    for ((i = 0; i < 12000; i++)); do
        home=$(sed -n 's/.*a TEST key made for this run in \([^ ,]*\),.*/\1/p' "$log" | head -n 1)
        [ -z "$home" ] || break
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; fail "build.sh --test-key ended before it made its TEST key"; }
        sleep 0.1
    done
    [ -n "$home" ] || { kill -TERM -- "-$pid"; fail "build.sh --test-key made no TEST key in 20 min (see above)"; }
    case "$home" in "$root"/target/*) kill -TERM -- "-$pid"; fail "the TEST key's GNUPGHOME $home is under target/" ;; esac
    [ -n "$(find "$home/private-keys-v1.d" -name '*.key' 2>/dev/null)" ] ||
        { kill -TERM -- "-$pid"; fail "no secret key in the TEST key's GNUPGHOME $home (the check below would prove nothing)"; }
    ! grep -q '^==> cargo deb' "$log" || { kill -TERM -- "-$pid"; fail "build.sh got to cargo deb before the kill: target/dist/ is being rewritten"; }
    kill -TERM -- "-$pid"
    wait "$pid" || rc=$?
    [ "$rc" != 0 ] || fail "build.sh exited 0 after SIGTERM"
    [ ! -e "$home" ] || fail "build.sh killed with SIGTERM (exit $rc) left its TEST key's GNUPGHOME $home"
    ! pgrep -f "gpg-agent.*$home" >/dev/null || fail "a gpg-agent for $home still runs after the kill"
    expect_no_secret_under_target "after build.sh --test-key killed with SIGTERM"
    ok "build.sh --test-key killed by SIGTERM (exit $rc): $home removed, no agent, nothing under target/"
}

artifacts() {
    local d=target/dist pub expires now fpr home
    for f in nthd-TEST-key.asc nthd-TEST-keyring.gpg; do
        [ -s "$d/$f" ] || fail "no $d/$f: run packaging/build.sh --all-arches --test-key first"
    done
    for f in nthd-archive-key.asc nthd-archive-keyring.gpg; do
        [ ! -e "$d/$f" ] || fail "$d/$f (the name clients pin) exists beside the TEST key"
    done
    export GNUPGHOME=$scratch/gnupg && mkdir -m 700 "$GNUPGHOME"
    pub=$(gpg --batch --with-colons --show-keys "$d/nthd-TEST-key.asc" 2>/dev/null)
    grep -q '^pub:' <<<"$pub" && ! grep -q '^sec:' <<<"$pub" || fail "$d/nthd-TEST-key.asc is not a public key alone: $pub"
    grep -q '^uid:.*TEST' <<<"$pub" || fail "the TEST key's user id does not say TEST: $(grep '^uid:' <<<"$pub")"
    expires=$(awk -F: '$1 == "pub" { print $7; exit }' <<<"$pub"); now=$(date +%s)
    [ -n "$expires" ] || fail "the TEST key never expires"
    [ "$expires" -gt "$now" ] && [ $((expires - now)) -le 86400 ] ||
        fail "the TEST key expires at $(date -u -d "@$expires"), not within 24 h of now ($(date -u))"
    fpr=$(awk -F: '$1 == "fpr" { print $10; exit }' <<<"$pub")
    cmp -s <(gpg --batch --dearmor <"$d/nthd-TEST-key.asc") "$d/nthd-TEST-keyring.gpg" ||
        fail "$d/nthd-TEST-key.asc and nthd-TEST-keyring.gpg are not the same key"
    gpgv --keyring "$root/$d/nthd-TEST-keyring.gpg" "$d/SHA256SUMS.asc" "$d/SHA256SUMS" 2>/dev/null ||
        fail "gpgv: $d/SHA256SUMS.asc does not verify with nthd-TEST-keyring.gpg"
    expect_no_secret_under_target "after build.sh --all-arches --test-key"
    for home in "${TMPDIR:-/tmp}"/nthd-TEST-gnupg.*; do
        [ -d "$home" ] || continue
        ! GNUPGHOME=$home gpg --batch --with-colons --list-secret-keys 2>/dev/null | grep -q ":$fpr:" ||
            fail "the TEST key's secret is still in $home"
    done
    ok "target/dist/nthd-TEST-key.asc: $fpr, public only, expires $(date -u -d "@$expires" +%FT%TZ) (in $(((expires - now) / 60)) min), verifies SHA256SUMS.asc; no secret left"
}

case "${1:-}" in
    --refusal) refusal ;;
    --killed) killed ;;
    --artifacts) artifacts ;;
    *) fail "usage: tests/signing-key.sh --refusal | --killed | --artifacts" ;;
esac
