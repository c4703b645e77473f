# shellcheck shell=bash
# The documentation as the .deb installs it (sourced by run.sh): the man pages and the
# Markdown under /usr/share/doc/nthd, read in the booted tree after dpkg -i.

# System pages the man pages may cite although the tree does not carry them (kubelet is not
# installed; a minimal tree may lack the others' pages). Anything else must be in the tree.
DOCS_SYSTEM_PAGES=(systemd-logind.8 logind.conf.5 polkit.8 kubelet.1)

# PAGE.N: installed in the tree ($1), or an allowed system page.
_man_page_resolves() {
  local root="$1" page="$2" p
  compgen -G "$root/usr/share/man/man${page##*.}/$page*" >/dev/null && return 0
  for p in "${DOCS_SYSTEM_PAGES[@]}"; do [[ "$p" == "$page" ]] && return 0; done
  return 1
}

# Every cross-reference (\fBx\fR(N), .BR x (N), x(N)) in the installed nthd man pages,
# one "FILE PAGE.N" a line.
_man_xrefs() {
  local f
  for f in "$1"/usr/share/man/man*/nthd*; do
    zcat -f "$f" | sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/^\.BR \([^ ]*\) (\([1-9]\)).*/\1(\2)/' |
      grep -oE '[A-Za-z0-9_.:-]+\([1-9]\)' | sed -e "s|^|${f##*/} |" -e 's/(\([1-9]\))$/.\1/'
  done | sort -u
}

# Every relative Markdown link outside code under DIR: "FILE TARGET" a line.
_doc_links() {
  # shellcheck disable=SC2016  # a perl program, not shell
  find "$1" -name '*.md' -print0 | xargs -0 perl -ne '
    if (/^\s*```/) { $f = !$f; next } next if $f;
    my @p = split /(`[^`]*`)/;
    for (grep { !/^`/ } @p) { print "$ARGV $1\n" while /\]\(([^)\s]+)\)/g }
  } continue { if (eof) { close ARGV; $f = 0 }' | grep -vE ' ([a-z][a-z0-9+.-]*:|#)'
}

scen_installed_docs() {
  need zcat perl
  step "boot"
  ct_boot "$SCEN" "$SDIR" || fail "container did not boot"
  step "dpkg -i nthd"
  nthd_install || fail "nthd package did not install"
  # man runs on the node (the tree carries man-db); the host reads the tree's files for the rest.
  local root="/proc/$CT_PID/root" out refs=0 links=0 file target page bad=()
  ct_exec dpkg -L nthd >"$SDIR/dpkg-L.txt" || fail "dpkg -L nthd failed"
  step "man nthd-status, on the node"
  out="$(ct_exec man -w nthd-status)" || fail "man -w nthd-status on the node found nothing"
  [[ "$out" == /usr/share/man/man8/nthd-status.8.gz ]] || fail "man -w nthd-status on the node: $out"
  grep -qx /usr/share/man/man8/nthd-status.8.gz "$SDIR/dpkg-L.txt" || fail "dpkg does not list nthd-status.8.gz"
  ct_exec env MANWIDTH=80 man nthd-status >"$SDIR/nthd-status.txt" 2>"$SDIR/man-stderr.txt" \
    || fail "man nthd-status on the node failed: $(cat "$SDIR/man-stderr.txt")"
  for want in "NTHD-STATUS(8)" "--npd" "EXIT STATUS" "/run/nthd/status.json" "SEE ALSO"; do
    grep -qF -- "$want" "$SDIR/nthd-status.txt" || fail "man nthd-status has no '$want'"
  done
  step "man page cross-references"
  while read -r file page; do
    refs=$((refs + 1))
    _man_page_resolves "$root" "$page" || bad+=("$file cites ${page%.*}(${page##*.})")
  done < <(_man_xrefs "$root")
  ((${#bad[@]} == 0)) || fail "cross-references not in the tree nor allowed: ${bad[*]}"
  ((refs >= 20)) || fail "only $refs cross-references found in the nthd man pages"
  step "links under /usr/share/doc/nthd"
  while read -r file target; do
    links=$((links + 1))
    target="${target%%#*}"
    [[ -e "$(dirname "$file")/$target" ]] || bad+=("${file#"$root"} -> $target")
  done < <(_doc_links "$root/usr/share/doc/nthd")
  ((${#bad[@]} == 0)) || fail "links that do not resolve in the installed tree: ${bad[*]}"
  ((links >= 20)) || fail "only $links relative links found under /usr/share/doc/nthd"
  log "installed docs: man nthd-status renders; $refs cross-references and $links relative links resolve"
}

# A reader's first contact: the README's trial, its three commands as they stand, run as root
# in the directory holding the .deb on a Debian 12 node that has the metadata service (the
# mock) and kubelet (the stand-in) but no nthd. nthd ends up installed in dry run, watching;
# the drill reaches logind's door and does not knock; every line of the output the README
# shows is in what the commands printed.
scen_readme_trial() {
  step "boot"
  ct_boot "$SCEN" "$SDIR" || fail "container did not boot"
  ct_net_setup || fail "could not add IMDS addresses to lo"
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  local deb name dir lines out rc line missing=()
  deb="$(nthd_deb_path)"
  [[ -r "$deb" ]] || fail "nthd .deb missing"
  # Named as build.sh names it (the harness may hand over a copy named otherwise).
  name="nthd_$(dpkg-deb -f "$deb" Version)_$(dpkg-deb -f "$deb" Architecture).deb"
  dir="$(dirname "$(ct_put "$deb" "$name")")"
  lines="$(doc_block "$REPO/README.md" trial)"
  (( $(grep -c . <<<"$lines") == 3 )) || fail "the README's trial is not three commands: $lines"
  step "the README's trial, as it stands"
  out="$(ct_exec bash -c "cd $dir && $lines" 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$lines" "--- rc $rc" "$out" >"$SDIR/trial.txt"
  ((rc == 0)) || fail "the trial's last command exited $rc: $(tail -n 5 <<<"$out")"
  expect_nthd_active
  ct_exec grep -qx NTHD_DRY_RUN=true /etc/default/nthd || fail "the package replaced the trial's settings file"
  wait_until 10 _journal_has "dry run: nthd will not call logind" || fail "nthd does not say it runs dry"
  while IFS= read -r line; do
    [[ -z "$line" ]] || grep -qF -- "$line" <<<"$out" || missing+=("$line")
  done < <(doc_block "$REPO/README.md" trial-output)
  ((${#missing[@]} == 0)) || fail "the README shows output the trial did not print: ${missing[*]}"
  expect_no_poweroff 5
  log "trial: $(grep -c . <<<"$out") lines of output, rc $rc; README's excerpt all there"
  _status_sample_holds
  _failing_check_sample_holds
}

# docs/commands.md's sample of a failing `nthd check` (<!-- check-fail-output:begin/end -->):
# with kubelet's stand-in stopped (no delay lock), `nthd check` exits 1 and prints each line.
_failing_check_sample_holds() {
  local out rc line missing=()
  step "nthd check with no kubelet lock, against docs/commands.md's sample"
  ct_exec systemctl stop fake-kubelet.service || fail "could not stop the kubelet stand-in"
  out="$(ct_exec nthd check 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "--- rc $rc" "$out" >"$SDIR/check-fail.txt"
  ((rc == 1)) || fail "nthd check exited $rc, not 1, with no kubelet lock: $out"
  while IFS= read -r line; do
    [[ -z "$line" ]] || sample_line_in "$out" "$line" || missing+=("$line")
  done < <(doc_block "$REPO/docs/commands.md" check-fail-output)
  ((${#missing[@]} > 0)) || return 0
  fail "docs/commands.md shows check output nthd did not print: ${missing[*]} (it printed: $out)"
}

# docs/commands.md's sample of `nthd status` (<!-- status-output:begin/end -->): each line is in
# what `nthd status` prints, as any user, on the trial's node after its drill.
_status_sample_holds() {
  local out line missing=()
  step "nthd status, as nobody, against docs/commands.md's sample"
  out="$(ct_exec runuser -u nobody -- /usr/bin/nthd status 2>&1)" || true
  printf '%s\n' "$out" >"$SDIR/status.txt"
  while IFS= read -r line; do
    [[ -z "$line" ]] || grep -qF -- "$line" <<<"$out" || missing+=("$line")
  done < <(doc_block "$REPO/docs/commands.md" status-output)
  ((${#missing[@]} == 0)) || fail "docs/commands.md shows status output nthd did not print: ${missing[*]} (it printed: $out)"
}
