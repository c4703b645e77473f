# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The signed repositories of packaging/build.sh (packaging/repo.sh: target/dist/apt,
# target/dist/rpm and the public key: nthd-TEST-key.asc and nthd-TEST-keyring.gpg from a
# --test-key build, nthd-archive-key.asc and nthd-archive-keyring.gpg from a release; install.sh's
# dist_key picks the one there), used the way a node uses
# them. Sourced by tests/e2e/install.sh, whose helpers (boot, spot_terminate, dist_artifact,
# pkg_version) and driver run these scenarios:
#
#   repo-11, repo-12, repo-13   Debian 11 (apt 2.2, gpgv), 12 (apt 2.6, gpgv), 13 (apt 3.0,
#       sqv). target/dist/apt is served over HTTP from the host: the host's python3 in the
#       container's network namespace, on 127.0.0.1 there. The key goes to
#       /usr/share/keyrings/nthd-archive-keyring.gpg and is named by signed-by= only (a
#       one-line .list on 11, a deb822 .sources on 12 and 13). First what apt must refuse,
#       each in apt's own words: the repository checked against another key, an InRelease
#       altered after signing, a Packages file that is not the one InRelease names (update
#       fails, nthd cannot be installed), a .deb that is not the one Packages names (install
#       fails, nothing installed). Then signed-by= the armoured .asc (as the cloud-init
#       example writes it) lets apt-get update through, and with the binary keyring apt-get
#       update, apt-get install nthd: installed from the repository, active, spot-terminate.
#       12 and 13 (their trees carry rpm 4.18 and 4.20): rpm -K of the signed .rpm says NOKEY
#       before rpm --import of the key and OK after; a copy altered in its header
#       and one altered in its payload are NOT OK.
#   repo-dnf   Debian's dnf 4.14 on the host (no tree booted; --installroot, scriptlets off)
#       with packaging/README.md's .repo file (gpgcheck=1, repo_gpgcheck=1, gpgkey=): refuses
#       a repomd.xml altered after signing ("Bad GPG signature") and a package without
#       signature ("is not signed", "GPG check FAILED"), installs nthd from target/dist/rpm.

REPO_PORT=8081
REPO_URL="http://127.0.0.1:$REPO_PORT"
REPO_HTTP_PID=""
REPO_KEYRING=/usr/share/keyrings/nthd-archive-keyring.gpg

# Serve DIR (a host directory) on 127.0.0.1:$REPO_PORT in the container's network namespace:
# a host process, so any tree can be served, python3 or not.  Stopped by the EXIT trap (the
# process holds the namespace after the container is gone).
# Without a container (repo-dnf): on the host's 127.0.0.1:$REPO_DNF_PORT.
repo_http_start() {
  local ns=(nsenter -t "$CT_PID" -n --) port="$REPO_PORT" probe=ct_exec where="in the container's network namespace"
  [[ -n "$CT_PID" ]] || { ns=(); port="$REPO_DNF_PORT"; probe=""; where="on the host"; }
  ${ns[@]+"${ns[@]}"} python3 -u -m http.server --bind 127.0.0.1 --directory "$1" "$port" \
    </dev/null >>"$SDIR/http.log" 2>&1 &
  REPO_HTTP_PID=$!
  trap 'repo_http_stop; ct_cleanup' EXIT
  wait_until 10 $probe curl -sf -o /dev/null "http://127.0.0.1:$port/" || fail "http.server is not reachable at 127.0.0.1:$port $where"
  log "serving $1 at http://127.0.0.1:$port (host pid $REPO_HTTP_PID, $where)"
}
repo_http_stop() {
  [[ -n "$REPO_HTTP_PID" ]] || return 0
  kill "$REPO_HTTP_PID" 2>/dev/null || true
  wait "$REPO_HTTP_PID" 2>/dev/null || true   # 143 (SIGTERM); under set -e it would end the trap
  REPO_HTTP_PID=""
}

# Replace FILE (a hard link into target/dist) by a copy changed by the sed script or by
# python's FLIP (one byte inverted, 200 bytes before the end): the release stays intact.
# Usage: tamper FILE sed SCRIPT | tamper FILE flip
tamper() {
  local f="$1" new="$1.tampered"
  case "$2" in
    sed) sed "$3" "$f" >"$new";;
    flip) python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[-200] ^= 0xff
open(sys.argv[2], "wb").write(b)' "$f" "$new";;
  esac
  cmp -s "$f" "$new" && fail "tamper $f $2 changed nothing"
  rm -f "$f"; mv "$new" "$f"
}

# The trees served, under $SDIR/www: good, and one altered copy per refusal.
repo_trees() {
  local www="$SDIR/www" rel=dists/stable t bp
  [[ -r "$DIST/apt/$rel/InRelease" ]] || fail "no $DIST/apt/$rel/InRelease: run packaging/build.sh --all-arches --test-key first"
  mkdir -p "$www"
  cp -al "$DIST/apt" "$www/good"
  for t in bad-inrelease bad-packages bad-deb; do cp -al "$www/good" "$www/$t"; done
  tamper "$www/bad-inrelease/$rel/InRelease" sed 's/^Description: .*/Description: nthd packages, and more/'
  bp="$www/bad-packages/$rel/main/binary-amd64"
  tamper "$bp/Packages" sed 's/^Priority: .*/Priority: required/'
  gzip -9n <"$bp/Packages" >"$bp/Packages.gz.new"; rm -f "$bp/Packages.gz"; mv "$bp/Packages.gz.new" "$bp/Packages.gz"
  tamper "$(echo "$www"/bad-deb/pool/main/n/nthd/nthd_*_amd64.deb)" flip
  # A second key, in no way the repository's: signed-by= naming it must not let the repo in.
  local gh="$SDIR/other-gnupg"; mkdir -m 700 "$gh"
  GNUPGHOME="$gh" gpg --batch -q --passphrase '' --quick-gen-key 'another key <other@example.invalid>' rsa3072 sign 1d 2>/dev/null &&
    GNUPGHOME="$gh" gpg --batch --export >"$SDIR/bin-other-keyring.gpg" || fail "could not make the other key"
  gpgconf --homedir "$gh" --kill gpg-agent 2>/dev/null || true
}

# Point apt at $REPO_URL/TREE with signed-by=KEYRING (the suite's format), forget every list.
repo_sources() {
  local tree="$1" keyring="$2"
  if [[ "$REPO_SOURCES_FORMAT" == list ]]; then
    ct_sh 'printf "deb [signed-by=%s] %s stable main\n" "$2" "$1" >/etc/apt/sources.list.d/nthd.list' "$REPO_URL/$tree" "$keyring"
  else
    ct_sh 'printf "%s\n" "Types: deb" "URIs: $1" "Suites: stable" "Components: main" "Signed-By: $2" \
             >/etc/apt/sources.list.d/nthd.sources' "$REPO_URL/$tree" "$keyring"
  fi
  ct_sh 'rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb; mkdir -p /var/lib/apt/lists/partial'
}

# Run CMD in the container: output in APT_OUT and $SDIR/apt-NAME.log, status in APT_RC.
apt_run() {
  local name="$1"; shift
  APT_OUT="$(ct_exec env DEBIAN_FRONTEND=noninteractive "$@" 2>&1)" && APT_RC=0 || APT_RC=$?
  printf '$ %s\n%s\n(rc %s)\n' "$*" "$APT_OUT" "$APT_RC" >"$SDIR/apt-$name.log"
}
# The last command failed and said each of the extended regexps given.
# Usage: expect_apt_said WHAT REGEXP...
expect_apt_said() {
  local what="$1" re; shift
  ((APT_RC != 0)) || fail "$what: apt succeeded: $APT_OUT"
  for re in "$@"; do
    grep -Eq -- "$re" <<<"$APT_OUT" || fail "$what: apt (rc $APT_RC) did not say /$re/: $APT_OUT"
  done
  log "$what: apt refused (rc $APT_RC): $(grep -E '^(E|W|Err):|NO_PUBKEY|BADSIG|Hash Sum|[Ss]ignature|[Kk]ey' <<<"$APT_OUT" | head -n 4 | tr '\n' ' ' | cut -c1-400)"
}
# After a refused update: no nthd to install, nothing installed.
expect_no_nthd() {
  apt_run "$1-install" apt-get install -y nthd
  expect_apt_said "$1: apt-get install nthd" 'Unable to locate package nthd'
  ! ct_exec dpkg-query -W -f '${db:Status-Status}' nthd 2>/dev/null | grep -q installed || fail "$1: nthd got installed"
}

scen_repo() {
  local v fpr apt_ver keyring key_asc
  v="$(pkg_version)"
  keyring="$(dist_key gpg)" && key_asc="$(dist_key asc)" || fail "no public key in $DIST (packaging/build.sh --all-arches --test-key)"
  fpr="$(gpg --batch --with-colons --show-keys "$keyring" 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')"
  [[ -n "$fpr" ]] || fail "no key in $keyring"
  repo_trees
  boot
  apt_ver="$(ct_exec dpkg-query -W -f '${Version}' apt)"
  if [[ "$apt_ver" == 2.2.* ]]; then REPO_SOURCES_FORMAT=list; else REPO_SOURCES_FORMAT=sources; fi
  step "apt $apt_ver ($(ct_exec sh -c 'command -v sqv || command -v gpgv')); key $fpr; sources as .$REPO_SOURCES_FORMAT"
  # The container has no route to Debian's mirror, which the tree's sources.list names: only
  # nthd's repository is configured (nthd's dependencies are installed already).
  ct_sh 'for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do [ -e "$f" ] && mv "$f" "$f.e2e-off"; done; true'
  # On the node the key goes where the docs put it, under the name clients pin, whichever
  # key (the release's or a TEST key) signed target/dist.
  ct_put "$keyring" nthd-archive-keyring.gpg >/dev/null
  ct_put "$SDIR/bin-other-keyring.gpg" other-keyring.gpg >/dev/null
  ct_exec install -m 644 /e2e/bin/nthd-archive-keyring.gpg "$REPO_KEYRING"
  ct_exec install -m 644 /e2e/bin/other-keyring.gpg /usr/share/keyrings/other-keyring.gpg
  repo_http_start "$SDIR/www"
  repo_refusals "$fpr"

  step "signed-by= the armoured key (.asc, as the cloud-init example writes it): apt-get update works"
  ct_put "$key_asc" nthd-archive-key.asc >/dev/null
  ct_exec install -m 644 /e2e/bin/nthd-archive-key.asc /usr/share/keyrings/nthd-archive-keyring.asc
  repo_sources good /usr/share/keyrings/nthd-archive-keyring.asc
  apt_run update-asc apt-get update
  ((APT_RC == 0)) && ! grep -Eq '^(W|E|Err):' <<<"$APT_OUT" || fail "apt-get update, signed-by= the .asc key: $APT_OUT"

  step "the good repository, signed-by= the binary keyring: apt-get update, apt-get install nthd"
  local t0; t0="$(now_ms)"
  repo_sources good "$REPO_KEYRING"
  apt_run update apt-get update
  ((APT_RC == 0)) || fail "apt-get update failed: $APT_OUT"
  ! grep -Eq '^(W|E|Err):' <<<"$APT_OUT" || fail "apt-get update warned or failed: $APT_OUT"
  apt_run install apt-get install -y nthd
  ((APT_RC == 0)) || fail "apt-get install nthd failed: $APT_OUT"
  timing "apt-get update + install $(fmt_ms $(( $(now_ms) - t0 )))"
  [[ "$(ct_exec dpkg-query -W -f '${db:Status-Status} ${Version}' nthd)" == "installed $v-1" ]] || fail "nthd $v-1 not installed"
  grep -q "GET /good/pool/main/n/nthd/nthd_${v}-1_amd64.deb HTTP/1.1\" 200" "$SDIR/http.log" || fail "the .deb was not downloaded from the repository"
  log "$(ct_exec apt-cache policy nthd | tr -s ' ' | tr '\n' ' ')"
  wait_until 10 nthd_active || fail "nthd not active after apt-get install"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "nthd not enabled after apt-get install"
  if ct_exec sh -c 'command -v rpm' >/dev/null; then repo_rpm_checks; fi
  spot_terminate
}

# Every way the repository must be refused; $1: the long key id of the repository's key.
# apt 2.x verifies with gpgv, apt 3.x (Debian 13) with sqv, in other words.
repo_refusals() {
  local fpr="$1" keyid="${1: -16}" no_key manipulated
  if ct_exec test -x /usr/bin/sqv && ct_exec dpkg --compare-versions "$(ct_exec dpkg-query -W -f '${Version}' apt)" ge 3; then
    no_key="Sub-process /usr/bin/sqv returned an error code \\(1\\), error message is: Missing key $fpr, which is needed to verify signature"
    manipulated="Sub-process /usr/bin/sqv returned an error code \\(1\\), error message is: Verifying signature: +Message has been manipulated"
  else
    no_key="The following signatures couldn't be verified because the public key is not available: NO_PUBKEY $keyid"
    manipulated="The following signatures were invalid: BADSIG $keyid"
  fi
  step "signed-by= a keyring without the repository's key: apt-get update refuses"
  repo_sources good /usr/share/keyrings/other-keyring.gpg
  apt_run other-key apt-get update
  expect_apt_said "another key" "$no_key" "E: The repository '$REPO_URL/good stable InRelease' is not signed\\."
  expect_no_nthd other-key

  step "InRelease altered after signing: apt-get update refuses"
  repo_sources bad-inrelease "$REPO_KEYRING"
  apt_run bad-inrelease apt-get update
  expect_apt_said "altered InRelease" "$manipulated" "E: The repository '$REPO_URL/bad-inrelease stable InRelease' is not signed\\."
  expect_no_nthd bad-inrelease

  step "a Packages file that is not the one InRelease names: apt-get update refuses"
  repo_sources bad-packages "$REPO_KEYRING"
  apt_run bad-packages apt-get update
  # apt compares the size first: a Packages.gz of another size is "File has unexpected size".
  expect_apt_said "altered Packages" "Failed to fetch $REPO_URL/bad-packages/dists/stable/main/binary-amd64/Packages" \
    "Hash Sum mismatch|File has unexpected size \([0-9]+ != [0-9]+\)" "Some index files failed to download"
  expect_no_nthd bad-packages

  step "a .deb that is not the one Packages names: update works, apt-get install refuses"
  repo_sources bad-deb "$REPO_KEYRING"
  apt_run bad-deb-update apt-get update
  ((APT_RC == 0)) || fail "apt-get update of bad-deb failed (its indices are intact): $APT_OUT"
  apt_run bad-deb apt-get install -y nthd
  expect_apt_said "altered .deb" "Failed to fetch $REPO_URL/bad-deb/pool/main/n/nthd/nthd_.*_amd64.deb" "Hash Sum mismatch"
  ! ct_exec dpkg-query -W -f '${db:Status-Status}' nthd 2>/dev/null | grep -q installed || fail "the altered .deb got installed"
  ! ct_exec test -e /usr/bin/nthd || fail "the altered .deb left /usr/bin/nthd"
  timing "4 refusals"
}

# rpm -K: NOKEY without the key, OK with it, NOT OK for a copy altered in its header and one
# altered in its payload.
repo_rpm_checks() {
  local rpm out key_asc
  rpm="$(dist_artifact "nthd-$(pkg_version)-1.$ARCH_RPM.rpm")" || fail "no .rpm"
  key_asc="$(dist_key asc)" || fail "no public key in $DIST"
  step "rpm -K of $(basename "$rpm") with $(ct_exec rpm --version)"
  mkdir -p "$SDIR/bin"
  cp "$rpm" "$SDIR/bin/header.rpm"; cp "$rpm" "$SDIR/bin/payload.rpm"
  # The header: one letter of the Summary; the payload: a byte near the end of the file.
  python3 -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read())
i = b.index(b"Node termination handler"); b[i] = ord("M"); open(p, "wb").write(b)' "$SDIR/bin/header.rpm"
  tamper "$SDIR/bin/payload.rpm" flip
  ct_put "$rpm" nthd.rpm >/dev/null; ct_put "$key_asc" nthd-archive-key.asc >/dev/null
  out="$(ct_exec rpm -K /e2e/bin/nthd.rpm 2>&1)" && fail "rpm -K passed without the key: $out"
  [[ "$out" == *"/e2e/bin/nthd.rpm: digests SIGNATURES NOT OK"* ]] || fail "rpm -K without the key: $out"
  log "before rpm --import: $out"
  ct_exec rpm --import /e2e/bin/nthd-archive-key.asc || fail "rpm --import failed"
  out="$(ct_exec rpm -K /e2e/bin/nthd.rpm 2>&1)" || fail "rpm -K failed with the key imported: $out"
  [[ "$out" == "/e2e/bin/nthd.rpm: digests signatures OK" ]] || fail "rpm -K with the key: $out"
  log "after rpm --import: $out; $(ct_exec rpm -Kv /e2e/bin/nthd.rpm | grep -i signature | tr -s ' ')"
  out="$(ct_exec rpm -Kv /e2e/bin/header.rpm 2>&1)" && fail "rpm -K passed an altered header: $out"
  printf '%s\n' "$out" >"$SDIR/rpm-K-header.txt"
  grep -Eq 'Header V4 RSA/SHA512 Signature, key ID [0-9a-f]+: BAD' <<<"$out" && grep -q 'Header SHA256 digest: BAD' <<<"$out" ||
    fail "rpm -Kv of the altered header: $out"
  out="$(ct_exec rpm -K /e2e/bin/header.rpm 2>&1)" || true
  [[ "$out" == *"DIGESTS SIGNATURES NOT OK"* ]] || fail "rpm -K of the altered header: $out"
  log "altered header: $out"
  out="$(ct_exec rpm -Kv /e2e/bin/payload.rpm 2>&1)" && fail "rpm -K passed an altered payload: $out"
  printf '%s\n' "$out" >"$SDIR/rpm-K-payload.txt"
  grep -q 'Payload SHA256 digest: BAD' <<<"$out" || fail "rpm -Kv of the altered payload: $out"
  out="$(ct_exec rpm -K /e2e/bin/payload.rpm 2>&1)" || true
  [[ "$out" == *"DIGESTS"*"NOT OK"* ]] || fail "rpm -K of the altered payload: $out"
  log "altered payload: $out"
}
# dnf (Debian's dnf 4.14 on the host, into an --installroot with scriptlets off: rpm-12/13
# prove them) with packaging/README.md's .repo file: gpgcheck=1, repo_gpgcheck=1, gpgkey=.
# The host's port is one the kernel picks free, so two checkouts' suites never meet on it.
REPO_DNF_PORT=""
_free_host_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# Usage: dnf_try NAME TREE GPGKEY_URLS -> DNF_OUT, DNF_RC, $SDIR/dnf-NAME.log
dnf_try() {
  local name="$1" root="$SDIR/dnf/$1"
  mkdir -p "$root/repos" "$root/root"
  printf '%s\n' '[nthd]' 'name=nthd' "baseurl=http://127.0.0.1:$REPO_DNF_PORT/$2" 'enabled=1' 'gpgcheck=1' \
    'repo_gpgcheck=1' "gpgkey=$3" >"$root/repos/nthd.repo"
  # What dpkg installed, told to this rpm database (install.sh's debian_provides_rpm).
  rpm --root "$root/root" -i "$REPO_DNF_PROVIDES" >/dev/null 2>&1 || fail "rpm -i the provides rpm into $root/root"
  DNF_OUT="$(timeout 120 dnf -y --installroot="$root/root" --releasever=12 --setopt=reposdir="$root/repos" \
    --setopt=cachedir="$root/cache" --setopt=tsflags=noscripts --nodocs install nthd 2>&1)" && DNF_RC=0 || DNF_RC=$?
  printf '$ dnf install nthd  (%s)\n%s\n(rc %s)\n' "$2" "$DNF_OUT" "$DNF_RC" >"$SDIR/dnf-$name.log"
  # librepo verifies repomd.xml.asc through gpgme, which leaves a gpg-agent per cache keyring.
  local d; for d in "$root"/cache/*/pubring; do [[ -d "$d" ]] && gpgconf --homedir "$d" --kill gpg-agent 2>/dev/null; done; true
}
scen_repo_dnf() {
  REPO_DNF_PORT="$(_free_host_port)" || fail "no free port on the host's 127.0.0.1"
  local www="$SDIR/www" key gh="$SDIR/other-gnupg" url="http://127.0.0.1:$REPO_DNF_PORT"
  [[ -r "$DIST/rpm/repodata/repomd.xml.asc" ]] || fail "no $DIST/rpm: run packaging/build.sh --all-arches --test-key first"
  command -v dnf >/dev/null || apt_install dnf >/dev/null ||
    fail "no dnf on the host (apt-get install dnf)"
  REPO_DNF_PROVIDES="$(debian_provides_rpm)" || fail "could not build the provides .rpm"
  mkdir -p "$www"; cp -r "$DIST/rpm" "$www/good"
  cp "$(dist_key asc)" "$www/nthd-archive-key.asc" || fail "no public key in $DIST"
  # repomd.xml altered after signing; and a repository whose metadata is signed (by a second
  # key, also listed in gpgkey=) around a package with its signature removed.
  cp -r "$www/good" "$www/bad-repomd"
  tamper "$www/bad-repomd/repodata/repomd.xml" sed 's|<revision>|<revision>1|'
  mkdir -p "$www/unsigned"; cp "$DIST/rpm/"*.x86_64.rpm "$www/unsigned/"
  rpmsign --delsign "$www/unsigned/"*.rpm >/dev/null || fail "rpmsign --delsign"
  createrepo_c -q --general-compress-type=gz "$www/unsigned" || fail "createrepo_c"
  mkdir -m 700 "$gh"
  GNUPGHOME="$gh" gpg --batch -q --passphrase '' --quick-gen-key 'metadata only <other@example.invalid>' rsa3072 sign 1d 2>/dev/null &&
    GNUPGHOME="$gh" gpg --batch -q --armor --detach-sign -o "$www/unsigned/repodata/repomd.xml.asc" "$www/unsigned/repodata/repomd.xml" &&
    GNUPGHOME="$gh" gpg --batch --armor --export >"$www/other-key.asc" || fail "could not sign with a second key"
  gpgconf --homedir "$gh" --kill gpg-agent 2>/dev/null || true
  repo_http_start "$www"
  key="$url/nthd-archive-key.asc"
  step "dnf $(dnf --version | head -n1): altered repomd.xml"
  dnf_try bad-repomd bad-repomd "$key"
  ((DNF_RC != 0)) && grep -q "repomd.xml GPG signature verification error: Bad GPG signature" <<<"$DNF_OUT" ||
    fail "dnf did not refuse the altered repomd.xml (rc $DNF_RC): $DNF_OUT"
  log "refused (rc $DNF_RC): $(grep -m1 'Bad GPG signature' <<<"$DNF_OUT")"
  step "a package without signature in a repository whose metadata verifies"
  dnf_try unsigned unsigned "$key $url/other-key.asc"
  ((DNF_RC != 0)) && grep -q "Package nthd-.*.x86_64.rpm is not signed" <<<"$DNF_OUT" && grep -q "GPG check FAILED" <<<"$DNF_OUT" ||
    fail "dnf did not refuse the unsigned package (rc $DNF_RC): $DNF_OUT"
  ! rpm --root "$SDIR/dnf/unsigned/root" -q nthd >/dev/null 2>&1 || fail "the unsigned nthd got installed"
  log "refused (rc $DNF_RC): $(grep -E 'is not signed|GPG check FAILED' <<<"$DNF_OUT" | tr '\n' ' ')"
  step "the release's repository: dnf install nthd, gpgcheck and repo_gpgcheck on"
  dnf_try good good "$key"
  ((DNF_RC == 0)) || fail "dnf install nthd failed: $DNF_OUT"
  grep -q 'Importing GPG key' <<<"$DNF_OUT" && grep -q 'Key imported successfully' <<<"$DNF_OUT" || fail "dnf imported no key: $DNF_OUT"
  [[ "$(rpm --root "$SDIR/dnf/good/root" -q nthd 2>/dev/null)" == "nthd-$(pkg_version)-1.x86_64" ]] || fail "nthd not in the installroot's rpm database"
  grep -q '"GET /good/repodata/repomd.xml.asc HTTP/1.1" 200' "$SDIR/http.log" || fail "dnf never fetched repomd.xml.asc"
  log "installed $(rpm --root "$SDIR/dnf/good/root" -q nthd 2>/dev/null) with key $(rpm --root "$SDIR/dnf/good/root" -q gpg-pubkey 2>/dev/null | tr '\n' ' ')"
  timing "2 refusals, install"
}
scen_repo_11() { scen_repo; }
scen_repo_12() { scen_repo; }
scen_repo_13() { scen_repo; }
