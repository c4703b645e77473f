# shellcheck shell=bash
# shellcheck disable=SC2154  # root, dist, tmp, version and SOURCE_DATE_EPOCH are build.sh's
# Signing and the package repositories, for packaging/build.sh, which sources this file (it
# is not run on its own) and calls it on its full and --all-arches paths only: --deb-only
# signs nothing. It uses build.sh's die, $root, $dist, $tmp, $version and SOURCE_DATE_EPOCH.
#
# The key. A release is signed with the project's own key (packaging/README.md, "The release
# key": how to make it and keep it):
#   NTHD_SIGNING_KEY=<fingerprint>   a secret key that can sign, in
#   GNUPGHOME=<dir>                  its keyring (default ~/.gnupg), and if it has a passphrase
#   NTHD_SIGNING_PASSPHRASE_FILE=<file>   (a path without spaces: rpmsign splits it) for gpg's
#                                    loopback pinentry; else gpg-agent must have it cached.
# Without it (build.sh --test-key; build.sh without --all-arches), a TEST key: made for this
# run (RSA 3072, signing only, no passphrase), expiring one day later, in a GNUPGHOME made by
# mktemp -d under ${TMPDIR:-/tmp}, never under target/, removed by build.sh's trap on EXIT,
# INT, TERM and HUP. Its public half is exported under names that say so, nthd-TEST-key.asc
# and nthd-TEST-keyring.gpg, never under the names clients pin.
#
# What it writes into target/dist/ (besides signing the .rpm files in place):
#   nthd-archive-key.asc       the public key, ASCII-armoured: rpm --import, dnf's gpgkey=
#   nthd-archive-keyring.gpg   the same key as a binary keyring: apt's signed-by=
#     (nthd-TEST-key.asc and nthd-TEST-keyring.gpg instead for a TEST key; the other pair is
#     removed, so target/dist/ holds the key its signatures verify with, and no other)
#   apt/                       pool/main/n/nthd/*.deb; dists/stable/{Release,InRelease,
#                              Release.gpg}; dists/stable/main/binary-{amd64,arm64}/Packages{,.gz}
#   rpm/                       the signed .rpm files; repodata/ (createrepo_c) and
#                              repodata/repomd.xml.asc
#   SHA256SUMS.asc             a detached signature of SHA256SUMS
# Each signature is checked with gpgv (or rpmkeys -K) against the exported key before
# build.sh goes on. The repositories hold every package of this version in target/dist/, as
# SHA256SUMS does.

REPO_SUITE=stable
REPO_COMPONENT=main
REPO_DEB_ARCHES=(amd64 arm64)
SIGN_FPR=""
SIGN_HOME_TMP=""
SIGN_GPG_ARGS=()
# The exported public key's file names in target/dist/: the release's, or the TEST key's.
RELEASE_KEY_ASC=nthd-archive-key.asc RELEASE_KEY_GPG=nthd-archive-keyring.gpg
TEST_KEY_ASC=nthd-TEST-key.asc TEST_KEY_GPG=nthd-TEST-keyring.gpg
KEY_ASC=$RELEASE_KEY_ASC KEY_GPG=$RELEASE_KEY_GPG
# How long a TEST key is valid (gpg's expire syntax): it must not outlive the day.
TEST_KEY_EXPIRY=1d

# The Debian packages of the tools below that this host lacks, one a line.
repo_missing_tools() {
    command -v gpg >/dev/null || echo gnupg
    command -v gpgv >/dev/null || echo gpgv
    command -v apt-ftparchive >/dev/null || echo apt-utils
    command -v createrepo_c >/dev/null || echo createrepo-c
    command -v rpmsign >/dev/null || echo rpm
    command -v objcopy >/dev/null || echo binutils
    return 0
}

# Sets SIGN_FPR, GNUPGHOME, KEY_ASC and KEY_GPG: the user's key (NTHD_SIGNING_KEY) or, with
# $1 = test, a new TEST key. Called before any slow work, so a missing key fails at once.
signing_key_init() {
    local uid
    if [ -n "${NTHD_SIGNING_PASSPHRASE_FILE:-}" ]; then
        [ -r "$NTHD_SIGNING_PASSPHRASE_FILE" ] ||
            die "NTHD_SIGNING_PASSPHRASE_FILE=$NTHD_SIGNING_PASSPHRASE_FILE is not readable: name the file that holds the key's passphrase"
        SIGN_GPG_ARGS=(--pinentry-mode loopback --passphrase-file "$NTHD_SIGNING_PASSPHRASE_FILE")
    fi
    if [ -n "${NTHD_SIGNING_KEY:-}" ]; then
        export GNUPGHOME="${GNUPGHOME:-$HOME/.gnupg}"
        # gpg fails for an unknown key: not fatal here (set -e, pipefail), the message below says it.
        SIGN_FPR=$(gpg --batch --no-auto-check-trustdb --with-colons --list-secret-keys -- "$NTHD_SIGNING_KEY" \
            2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }') || true
        [ -n "$SIGN_FPR" ] || die "NTHD_SIGNING_KEY=$NTHD_SIGNING_KEY: no such secret key in $GNUPGHOME (gpg --list-secret-keys; set GNUPGHOME to the keyring that holds it, or import it: gpg --import)"
        echo "signing key: $SIGN_FPR from $GNUPGHOME (NTHD_SIGNING_KEY)"
        return 0
    fi
    [ "${1:-}" = test ] || die "no signing key (set NTHD_SIGNING_KEY, or pass --test-key)"
    KEY_ASC=$TEST_KEY_ASC KEY_GPG=$TEST_KEY_GPG
    SIGN_HOME_TMP=$(mktemp -d "${TMPDIR:-/tmp}/nthd-TEST-gnupg.XXXXXX") ||
        die "mktemp -d in ${TMPDIR:-/tmp} failed: set TMPDIR to a writable directory"
    case "$SIGN_HOME_TMP" in
        "$root"/target/*) die "TMPDIR=$TMPDIR is under target/: the TEST key's secret must never be there; set TMPDIR elsewhere (e.g. /tmp)" ;;
    esac
    export GNUPGHOME="$SIGN_HOME_TMP"
    uid="nthd TEST key $(date -u +%Y%m%dT%H%M%SZ) (packaging/build.sh --test-key, NOT a release key) <nthd@example.invalid>"
    gpg --batch --quiet --passphrase '' --quick-gen-key "$uid" rsa3072 sign "$TEST_KEY_EXPIRY" 2>"$tmp/keygen.txt" ||
        die "gpg --quick-gen-key could not make the TEST key in $GNUPGHOME: $(cat "$tmp/keygen.txt")"
    SIGN_FPR=$(gpg --batch --no-auto-check-trustdb --with-colons --list-secret-keys 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
    [ -n "$SIGN_FPR" ] || die "no key in $GNUPGHOME after gpg --quick-gen-key"
    echo "signing key: $SIGN_FPR, a TEST key made for this run in $GNUPGHOME, expires in $TEST_KEY_EXPIRY; exported as $KEY_ASC (set NTHD_SIGNING_KEY for a release)"
}

# build.sh's trap (EXIT, and INT, TERM, HUP through exit): the TEST key and its agent go; a
# user's key is left alone.
signing_key_cleanup() {
    [ -n "$SIGN_HOME_TMP" ] || return 0
    gpgconf --homedir "$SIGN_HOME_TMP" --kill gpg-agent >/dev/null 2>&1 || true
    rm -rf "$SIGN_HOME_TMP"
    SIGN_HOME_TMP=""
}

gpg_sign() {
    gpg --batch --yes --quiet --no-auto-check-trustdb --digest-algo SHA512 --local-user "$SIGN_FPR" \
        ${SIGN_GPG_ARGS[@]+"${SIGN_GPG_ARGS[@]}"} "$@"
}
# gpgv against the exported keyring only: what a client that trusts that key alone sees.
gpg_check() {
    gpgv --quiet --keyring "$root/$dist/$KEY_GPG" "$@" 2>"$tmp/gpgv.txt" ||
        die "gpgv $*: $(cat "$tmp/gpgv.txt")"
}

# The public key, armoured and as a binary keyring, under KEY_ASC and KEY_GPG (the other
# names' files go: target/dist/ holds only the key that verifies it); prints its
# fingerprint, user id and expiry.
export_public_key() {
    rm -f "$dist/$RELEASE_KEY_ASC" "$dist/$RELEASE_KEY_GPG" "$dist/$TEST_KEY_ASC" "$dist/$TEST_KEY_GPG"
    gpg --batch --armor --export-options export-minimal --export "$SIGN_FPR" >"$dist/$KEY_ASC"
    gpg --batch --export-options export-minimal --export "$SIGN_FPR" >"$dist/$KEY_GPG"
    [ -s "$dist/$KEY_GPG" ] || die "gpg exported nothing for $SIGN_FPR"
    local expires
    expires=$(gpg --batch --with-colons --show-keys "$dist/$KEY_GPG" 2>/dev/null | awk -F: '$1 == "pub" { print $7; exit }')
    gpg --batch --with-colons --show-keys "$dist/$KEY_GPG" 2>/dev/null |
        awk -F: '$1 == "fpr" && !f { f = $10 } $1 == "uid" && !u { u = $10 } END { print f "  " u }'
    echo "expires: $([ -n "$expires" ] && date -u -d "@$expires" +%Y-%m-%dT%H:%M:%SZ || echo never)"
}

# rpmsign --addsign (replacing any older signature), then rpmkeys -K of each file in an
# rpm database that holds only the exported key.
sign_rpms() {
    local args f db=$tmp/rpmdb out
    args=(--define "_gpg_name $SIGN_FPR" --define "_gpg_path $GNUPGHOME" --define "__gpg $(command -v gpg)")
    [ ${#SIGN_GPG_ARGS[@]} = 0 ] || args+=(--define "_gpg_sign_cmd_extra_args ${SIGN_GPG_ARGS[*]}")
    rpmsign --addsign "${args[@]}" "$@" </dev/null >/dev/null 2>"$tmp/rpmsign.txt" ||
        die "rpmsign: $(cat "$tmp/rpmsign.txt")"
    rm -rf "$db" && mkdir -p "$db"
    rpmkeys --dbpath "$db" --import "$dist/$KEY_ASC"
    for f in "$@"; do
        out=$(rpmkeys --dbpath "$db" -K "$f" 2>&1) || die "rpmkeys -K: $out"
        [ "$out" = "$f: digests signatures OK" ] || die "rpmkeys -K: $out"
        echo "$out ($(rpm -qp --qf '%{RSAHEADER:pgpsig}' "$f" 2>/dev/null))"
    done
}

# Copies, not hard links: cargo deb rewrites target/dist/*.deb in place (same inode), so a
# later --deb-only would change a linked pool file under the signed Packages index.
copy_into() { local d=$1; shift; mkdir -p "$d" && cp -f "$@" "$d/"; }

# dist/apt: a flat pool and one suite, signed both ways apt reads (InRelease, Release.gpg).
make_apt_repo() {
    local apt=$dist/apt a d n rel=$dist/apt/dists/$REPO_SUITE
    rm -rf "$apt"
    copy_into "$apt/pool/$REPO_COMPONENT/n/nthd" "$dist"/nthd_"$version"-1_*.deb
    for a in "${REPO_DEB_ARCHES[@]}"; do
        d=$rel/$REPO_COMPONENT/binary-$a
        mkdir -p "$d"
        (cd "$apt" && apt-ftparchive --arch "$a" packages pool) >"$d/Packages" 2>"$tmp/ftp.txt" ||
            die "apt-ftparchive packages: $(cat "$tmp/ftp.txt")"
        gzip -9n <"$d/Packages" >"$d/Packages.gz"
        n=$(grep -c '^Package: nthd$' "$d/Packages" || true)
        printf '%s: %s package(s)\n' "${d#"$dist"/}" "$n"
    done
    (cd "$apt" && apt-ftparchive \
        -o APT::FTPArchive::Release::Origin=nthd -o APT::FTPArchive::Release::Label=nthd \
        -o APT::FTPArchive::Release::Suite="$REPO_SUITE" \
        -o APT::FTPArchive::Release::Codename="$REPO_SUITE" \
        -o APT::FTPArchive::Release::Architectures="${REPO_DEB_ARCHES[*]}" \
        -o APT::FTPArchive::Release::Components="$REPO_COMPONENT" \
        -o APT::FTPArchive::Release::Description="nthd packages" \
        release "dists/$REPO_SUITE") >"$tmp/Release"
    mv "$tmp/Release" "$rel/Release"
    gpg_sign --clearsign -o "$rel/InRelease" "$rel/Release"
    gpg_sign --armor --detach-sign -o "$rel/Release.gpg" "$rel/Release"
    gpg_check "$rel/InRelease"
    gpg_check "$rel/Release.gpg" "$rel/Release"
    echo "${rel#"$dist"/}: Release, InRelease, Release.gpg (signature good)"
}

# dist/rpm: the signed .rpm files and their repodata, repomd.xml signed for repo_gpgcheck=1.
make_rpm_repo() {
    local r=$dist/rpm
    rm -rf "$r"
    copy_into "$r" "$dist"/nthd-"$version"-1.*.rpm
    # gzip, not zstd: dnf on the RHEL 8 family reads it. Timestamps from SOURCE_DATE_EPOCH.
    createrepo_c --quiet --general-compress-type=gz --revision "$SOURCE_DATE_EPOCH" \
        --set-timestamp-to-revision "$r" >"$tmp/createrepo.txt" 2>&1 ||
        die "createrepo_c: $(cat "$tmp/createrepo.txt")"
    gpg_sign --armor --detach-sign -o "$r/repodata/repomd.xml.asc" "$r/repodata/repomd.xml"
    gpg_check "$r/repodata/repomd.xml.asc" "$r/repodata/repomd.xml"
    echo "rpm/repodata: $(grep -c '<package type="rpm">' < <(zcat "$r"/repodata/*-primary.xml.gz)) package(s), repomd.xml.asc (signature good)"
}

# SHA256SUMS.asc: armoured, detached.
sign_sums() {
    gpg_sign --armor --detach-sign -o "$dist/SHA256SUMS.asc" "$dist/SHA256SUMS"
    gpg_check "$dist/SHA256SUMS.asc" "$dist/SHA256SUMS"
    echo "SHA256SUMS.asc (signature good)"
}
