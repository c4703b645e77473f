#!/usr/bin/env bash
# The previous release's packages, built from its own commit with its own packaging/build.sh
# and cached, so that the upgrade scenarios start from exactly what nodes run.
#
#   tests/e2e/previous-release.sh           build once, print the cache directory
#   tests/e2e/previous-release.sh --commit  print the commit (tests/e2e/previous-release)
#
# The cache is target/previous-release/<commit>/: nthd_<ver>-1_<deb arch>.deb and
# nthd-<ver>-1.<rpm arch>.rpm for this host's architecture, build.log, and a stamp written
# last (no stamp: built again). The source is `git archive <commit>` into <commit>/src/ (no
# worktree to register; removed after a successful build), built with NTHD_GIT_COMMIT and
# SOURCE_DATE_EPOCH of that commit (the archive has no .git of its own: git would answer for
# the checkout around it). That tree's build.sh installs the tools it needs, builds the static
# binary and checks and lints its packages, as it did for the release. It needs the commit:
# a clone with full history (CI's is; a shallow one: git fetch --unshallow).
# Concurrent callers (run.sh, install.sh) wait for one another on target/previous-release/lock.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
say() { printf '[previous-release] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Sets commit; --commit prints it and exits.
read_commit() {
  commit="$(grep -Ev '^[[:space:]]*(#|$)' "$HERE/previous-release" | head -n 1 | tr -d '[:space:]')"
  [[ "$commit" =~ ^[0-9a-f]{40}$ ]] || die "$HERE/previous-release names no full commit id: '$commit'"
  if [[ "${1:-}" == --commit ]]; then echo "$commit"; exit 0; fi
  [[ $# -eq 0 ]] || die "usage: $0 [--commit]"
}

# Sets top and out; waits for another caller's build.
take_lock() {
  top="$REPO/target/previous-release"
  out="$top/$commit"
  mkdir -p "$top"
  exec 9>"$top/lock"
  flock -n 9 || { say "another build of the previous release holds $top/lock; waiting"; flock 9; }
}

# Sets epoch, short and t0; the tree's own build.sh in $out/src.
build() {
  git -C "$REPO" cat-file -e "$commit^{commit}" 2>/dev/null ||
    die "commit $commit is not in this clone (shallow? git fetch --unshallow)"
  rm -rf "$out"; mkdir -p "$out/src"
  git -C "$REPO" archive --format=tar "$commit" | tar -x -C "$out/src"
  epoch="$(git -C "$REPO" show -s --format=%ct "$commit")"
  short="$(git -C "$REPO" rev-parse --short=12 "$commit")"
  say "building nthd at $short ($(git -C "$REPO" show -s --format=%cs "$commit")) with its own packaging/build.sh; log: $out/build.log"
  t0=$SECONDS
  if ! (cd "$out/src" && NTHD_GIT_COMMIT="$short" SOURCE_DATE_EPOCH="$epoch" bash packaging/build.sh) >"$out/build.log" 2>&1; then
    tail -n 30 "$out/build.log" >&2
    die "the build of $short failed (see $out/build.log; the tree is left in $out/src)"
  fi
}

# The .deb and .rpm into the cache, and the stamp last.
collect() {
  local f
  version="$(cd "$out/src" && cargo metadata --no-deps --format-version 1 --offline |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "nthd"))')"
  arch="$(uname -m)"; deb_arch="$(dpkg --print-architecture)"
  deb="nthd_${version}-1_${deb_arch}.deb" rpm="nthd-${version}-1.${arch}.rpm"
  for f in "$deb" "$rpm"; do
    [[ -s "$out/src/target/dist/$f" ]] || die "the build of $short made no target/dist/$f"
    cp "$out/src/target/dist/$f" "$out/$f"
  done
  rm -rf "$out/src"
  printf 'commit=%s version=%s deb=%s rpm=%s built_in=%ss\n' "$commit" "$version" "$deb" "$rpm" "$((SECONDS - t0))" >"$out/stamp"
  say "built $deb and $rpm in $((SECONDS - t0))s"
}

main() {
  read_commit "$@"
  take_lock
  if [[ -f "$out/stamp" ]]; then
    say "cached: $out ($(tr '\n' ' ' <"$out/stamp"))"
    echo "$out"; exit 0
  fi
  build
  collect
  echo "$out"
}

main "$@"
