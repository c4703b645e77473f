#!/usr/bin/env bash
# Build, check and lint every nthd artifact: a static (musl) binary, the .deb, the .rpm and a
# tarball, into target/dist/; sign them and make signed apt and dnf repositories of them.
#
#   packaging/build.sh [--all-arches [--test-key] | --test-key | --deb-only]
#
# (no flag)     the host architecture: .deb, .rpm, tarball, sysext image, lints, SHA256SUMS,
#               the signatures and the repositories (below); without NTHD_SIGNING_KEY signed
#               with a TEST key, as with --test-key.
# --all-arches  x86_64 and aarch64: nthd_<ver>-1_{amd64,arm64}.deb,
#               nthd-<ver>-1.{x86_64,aarch64}.rpm (signed), nthd-<ver>-{x86_64,aarch64}.tar.gz,
#               nthd-<ver>-{x86_64,aarch64}.raw (systemd-sysext images), SHA256SUMS and
#               SHA256SUMS.asc, nthd-archive-key.asc and nthd-archive-keyring.gpg (the public
#               key), apt/ (a signed apt repository: pool/, dists/stable/) and rpm/ (a dnf/yum
#               repository: repodata/ with repomd.xml.asc). This is the release command: it
#               refuses to run without NTHD_SIGNING_KEY (the release key) unless --test-key.
# --test-key    sign with a TEST key made for this run (expires within a day; its secret lives
#               in a mktemp -d directory outside target/, removed when build.sh ends, killed or
#               not), exported as nthd-TEST-key.asc and nthd-TEST-keyring.gpg. For tests only.
# --deb-only    only what the README demo needs: the host .deb with its file list and
#               maintainer-script checks. No .rpm, tarball, lintian, rpmlint, signing or
#               repository.
#
# The binary is fully static (x86_64/aarch64-unknown-linux-musl), so no package depends on a
# libc version: one .deb installs on Debian 11 to 13 and Ubuntu 20.04 on, one .rpm on the
# RHEL 8 family on. aarch64 builds on any host: gcc-aarch64-linux-gnu compiles ring's C, rust-lld
# (shipped with rustup) links it (.cargo/config.toml).
#
# Idempotent: installs the tools it needs only when they are missing, and can be rerun at
# will. Steps, for each architecture:
#   1. tools: rustup targets, cargo-deb, cargo-generate-rpm, cargo-auditable (pinned),
#      lintian, rpmlint, and for the signing gnupg, rpm (rpmsign), apt-utils, createrepo-c
#   2. cargo auditable build --release --target <arch>-unknown-linux-musl (the dependency
#      list, crate names and versions, embedded in the binary's .dep-v0 section; --deb-only
#      uses plain cargo build when cargo-auditable is not installed); the binary must be
#      static and <= 6 MiB and carry that list; `nthd generate-assets` must reproduce the
#      committed packaging/assets/
#   3. systemd-analyze verify + security (exposure must be <= 1.5), once
#   4. cargo deb --no-build, cargo generate-rpm, the tarball, the sysext image
#      (packaging/sysext/build.sh); rpmsign of every .rpm of this version (packaging/repo.sh)
#   5. exact file lists, maintainer scripts, lintian and rpmlint (errors or warnings fail the
#      build; justified exceptions live in packaging/debian/nthd.lintian-overrides and
#      packaging/rpm/rpmlint.toml)
#   6. SHA256SUMS, its signature, the apt and rpm repositories (packaging/repo.sh), each
#      signature checked with gpgv or rpmkeys against the exported public key
#
# The version comes from Cargo.toml alone. The Debian changelog the .deb ships is
# target/packaging/changelog: packaging/debian/changelog (the released entries), with an entry
# for this version put on top when it has none.
#
# Environment:
#   NTHD_PACKAGE_PREBUILT=1  skip the build and the asset check and package
#                            target/<triple>/release/nthd as it is (CI caches, or
#                            testing the packaging with a stand-in binary).
#                            Never for a release.
#   SOURCE_DATE_EPOCH        timestamps inside the packages (default: the
#                            last git commit).
#   NTHD_SIGNING_KEY         fingerprint of the secret key that signs (in GNUPGHOME,
#                            default ~/.gnupg); unset: --all-arches refuses, --test-key
#                            (or no flag) makes a TEST key for this run (packaging/repo.sh).
#   NTHD_SIGNING_PASSPHRASE_FILE  that key's passphrase, for gpg's loopback pinentry.
set -euo pipefail

CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
CARGO_AUDITABLE_VERSION=0.7.7
# systemd-analyze security exposure, 0.0 (best) .. 10.0; see README.md.
MAX_EXPOSURE=1.5
# The bound for the stripped static binary: a node agent stays small.
MAX_BINARY_BYTES=$((6 * 1024 * 1024))

cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=packaging/repo.sh
. packaging/repo.sh
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh
assets=target/assets
dist=target/dist

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }
triple() { echo "$1-unknown-linux-musl"; }
deb_arch() { case "$1" in x86_64) echo amd64 ;; aarch64) echo arm64 ;; esac; }
usage="usage: packaging/build.sh [--all-arches [--test-key] | --test-key | --deb-only]"
deb_only=0 all_arches=0 test_key=0
host_arch=$(uname -m)
arches=("$host_arch")
debs=() rpms=() tarballs=() raws=()

# The flags, and what they exclude; sets deb_only, all_arches, test_key and arches.
parse_args() {
    local arg a
    for arg in "$@"; do
        case "$arg" in
            --deb-only) deb_only=1 ;;
            --all-arches) all_arches=1 arches=(x86_64 aarch64) ;;
            --test-key) test_key=1 ;;
            *) die "unknown argument '$arg' ($usage)" ;;
        esac
    done
    [ $deb_only = 0 ] || [ $((all_arches + test_key)) = 0 ] ||
        die "--deb-only builds one unsigned .deb: it takes neither --all-arches nor --test-key ($usage)"
    # The release command signs with the release key or says, in the key's own name, that it did
    # not: never a key that looks like the one clients pin. Checked before any slow work.
    if [ $all_arches = 1 ] && [ $test_key = 0 ] && [ -z "${NTHD_SIGNING_KEY:-}" ]; then
        die "--all-arches is the release build and NTHD_SIGNING_KEY is not set. Either sign with the release key:
  NTHD_SIGNING_KEY=<fingerprint> GNUPGHOME=<its keyring> packaging/build.sh --all-arches
(packaging/README.md, \"The release key\", says how to make and keep it), or sign with a TEST key
made for this run, exported as nthd-TEST-key.asc, which expires within a day:
  packaging/build.sh --all-arches --test-key"
    fi
    [ $test_key = 0 ] || [ -z "${NTHD_SIGNING_KEY:-}" ] ||
        die "--test-key and NTHD_SIGNING_KEY=$NTHD_SIGNING_KEY both given: drop one (the release key or a TEST key)"
    for a in "${arches[@]}"; do
        case "$a" in
            x86_64 | aarch64) ;;
            *) die "no static build for '$a': nthd packages x86_64 and aarch64" ;;
        esac
    done
}

# --- 1. tools -----------------------------------------------------------------
install_tools() {
    local a spec name version missing=() p tools
    tools=("cargo-deb@$CARGO_DEB_VERSION" "cargo-generate-rpm@$CARGO_GENERATE_RPM_VERSION"
        "cargo-auditable@$CARGO_AUDITABLE_VERSION")
    [ $deb_only = 0 ] || tools=("cargo-deb@$CARGO_DEB_VERSION")

    # --- 1. tools -----------------------------------------------------------------
    say "tools"
    for a in "${arches[@]}"; do
        rustup_target_add "$(triple "$a")" || die "rustup target add $(triple "$a") failed"
    done
    for spec in "${tools[@]}"; do
        name=${spec%@*} version=${spec#*@}
        cargo_tool "$name" "$version" "${name#cargo-}" || die "cargo install $name@$version failed"
    done
    missing=()
    if [ $deb_only = 0 ]; then
        command -v lintian >/dev/null || missing+=(lintian)
        command -v rpmlint >/dev/null || missing+=(rpmlint)
        command -v rpm >/dev/null || missing+=(rpm)
        command -v mksquashfs >/dev/null || missing+=(squashfs-tools)
        for p in $(repo_missing_tools); do missing+=("$p"); done
    fi
    # dpkg-parsechangelog; lintian pulls it in, a plain Debian 12 lacks it.
    command -v dpkg-parsechangelog >/dev/null || missing+=(dpkg-dev)
    command -v systemd-analyze >/dev/null || missing+=(systemd)
    command -v readelf >/dev/null || missing+=(binutils)
    # C compilers for ring (rustls's crypto, HTTPS webhooks): .cargo/config.toml names them.
    command -v musl-gcc >/dev/null || missing+=(musl-tools)
    if [[ " ${arches[*]} " == *" aarch64 "* ]]; then
        command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        [ "$(id -u)" = 0 ] || die "please install: ${missing[*]}"
        apt_install "${missing[@]}" || die "could not install ${missing[*]} (apt-get install ${missing[*]})"
    fi
}

# Sets version (Cargo.toml's) and exports SOURCE_DATE_EPOCH.
read_version() {
    version=$(cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "nthd"))')
    echo "nthd version $version, for ${arches[*]}"
    if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
        SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
    fi
    export SOURCE_DATE_EPOCH
}

check_sources() {
    local sysusers_line
    # Files that others own but the packages ship.
    [ -f README.md ] || die "README.md is missing (shipped as /usr/share/doc/nthd/README.md)"
    [ -f LICENSE ] || die "LICENSE is missing"

    # The RPM %pre carries its own copy of the sysusers line (the file is not
    # installed yet when %pre runs); both must say the same.
    sysusers_line=$(grep -E '^u[[:space:]]' systemd/nthd.sysusers)
    grep -qxF "$sysusers_line" packaging/rpm/pre_install.sh ||
        die "the sysusers line in packaging/rpm/pre_install.sh differs from systemd/nthd.sysusers"
}

# Sets tmp, removed on exit with the TEST key; the signing key unless --deb-only.
prepare_workdir() {
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"; signing_key_cleanup' EXIT
    # A killed build runs the EXIT trap too: the TEST key's secret never outlives build.sh.
    trap 'exit 129' HUP
    trap 'exit 130' INT
    trap 'exit 143' TERM
    mkdir -p "$dist" target/packaging
    # Builds before the TEST key moved out of target/ kept their throwaway GNUPGHOME here; one
    # that was killed left its secret key behind.
    rm -rf target/packaging/gnupg.*
    if [ $deb_only = 0 ]; then
        say "signing key (packaging/repo.sh)"
        signing_key_init test
    fi
}

make_changelog() {
    local changelog top
    # The Debian changelog: the released entries, and one for this version on top if missing.
    # Cargo.toml is the only place a version is written.
    changelog=target/packaging/changelog
    top=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
    if [ "$top" = "$version-1" ]; then
        cp packaging/debian/changelog "$changelog"
    else
        {
            printf 'nthd (%s-1) unstable; urgency=medium\n\n' "$version"
            printf '  * Release %s. The changes are in the project'"'"'s git history.\n\n' "$version"
            printf ' -- nthd maintainers <nthd@example.invalid>  %s\n\n' \
                "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
            cat packaging/debian/changelog
        } >"$changelog"
    fi
    [ "$(dpkg-parsechangelog -l "$changelog" -S Version)" = "$version-1" ] ||
        die "$changelog is not at $version-1"
}

# --- 2. binaries and generated assets ------------------------------------------
# A binary must be static: no program interpreter and no shared-library dependency.
check_static() {
    local bin=$1 size
    ! readelf -lW "$bin" | grep -q 'Requesting program interpreter' ||
        die "$bin asks for a program interpreter (dynamic glibc build?)"
    ! readelf -dW "$bin" 2>/dev/null | grep -q '(NEEDED)' ||
        die "$bin needs shared libraries: $(readelf -dW "$bin" | grep '(NEEDED)' | tr -s ' ')"
    size=$(stat -c %s "$bin")
    [ "$size" -le $MAX_BINARY_BYTES ] || die "$bin is $size bytes, above $MAX_BINARY_BYTES (6 MiB)"
    printf '%s: static, %s bytes\n' "$bin" "$size"
}
# cargo-auditable's dependency list: a zlib-compressed JSON in the .dep-v0 section, which
# `cargo audit bin` and syft read. Decoded here: nthd is its root, and every crate in it is
# in Cargo.lock at that version.
check_auditable() {
    local bin=$1
    # elf64-little: the host's objcopy reads the other architecture's binary too.
    # objcopy (2.40) exits 0 when the section is missing: the dump's presence tells.
    rm -f "$tmp/dep-v0"
    if ! objcopy -I elf64-little --dump-section .dep-v0="$tmp/dep-v0" "$bin" "$tmp/dep-v0.elf" \
        2>"$tmp/objcopy.txt" || [ ! -s "$tmp/dep-v0" ]; then
        die "$bin has no .dep-v0 section (cargo auditable): $(cat "$tmp/objcopy.txt")"
    fi
    python3 - "$tmp/dep-v0" Cargo.lock "$bin" <<'EOF' || die "$bin: bad cargo-auditable data"
import json, re, sys, zlib
pkgs = json.loads(zlib.decompress(open(sys.argv[1], "rb").read()))["packages"]
lock = set(re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"', open(sys.argv[2]).read()))
roots = [p["name"] for p in pkgs if p.get("root")]
assert roots == ["nthd"], f"root crates: {roots}"
stray = [f'{p["name"]} {p["version"]}' for p in pkgs if (p["name"], p["version"]) not in lock]
assert not stray, f"not in Cargo.lock: {stray}"
missing = {"tokio", "rustls", "ring", "zbus", "hyper"} - {p["name"] for p in pkgs}
assert not missing, f"not recorded: {missing}"
build = sum(p.get("kind") == "build" for p in pkgs)
print(f"{sys.argv[3]}: .dep-v0 lists {len(pkgs)} crates ({build} build-time), all at their Cargo.lock versions")
EOF
}
build_binaries() {
    local a bin
    # Every binary that is packaged carries its dependency list; only --deb-only, where
    # cargo-auditable may not be installed (the README demo must not wait for it), may skip it.
    build_cmd=(build)
    if [ $deb_only = 0 ] || command -v cargo-auditable >/dev/null; then build_cmd=(auditable build); fi
    for a in "${arches[@]}"; do
        bin=target/$(triple "$a")/release/nthd
        if [ "${NTHD_PACKAGE_PREBUILT:-0}" = 1 ]; then
            say "NTHD_PACKAGE_PREBUILT=1: packaging $bin as it is"
        else
            say "cargo ${build_cmd[*]} --release --target $(triple "$a")"
            cargo "${build_cmd[@]}" --release --locked --target "$(triple "$a")" --bin nthd
        fi
        [ -x "$bin" ] || die "$bin is missing"
        check_static "$bin"
        if [ "${NTHD_PACKAGE_PREBUILT:-0}" != 1 ] && [ "${build_cmd[0]}" = auditable ]; then
            check_auditable "$bin"
        fi
    done
}

check_assets() {
    local runnable f
    # The packages ship the man pages and completions committed in packaging/assets/ (so that a
    # plain `cargo deb` works). Here they are generated afresh from a binary being packaged (one
    # this host can run) and must be identical.
    runnable=target/$(triple "$host_arch")/release/nthd
    if [ "${NTHD_PACKAGE_PREBUILT:-0}" != 1 ] && [ -x "$runnable" ]; then
        say "generate assets with $runnable"
        rm -rf "$assets"
        mkdir -p "$assets"
        "$runnable" generate-assets --out "$assets" ||
            die "'$runnable generate-assets --out $assets' failed (see above)"
        # Both ways: a page generated but not committed, and a committed one no longer generated.
        for f in "$assets"/* packaging/assets/*; do
            cmp -s "$assets/${f##*/}" "packaging/assets/${f##*/}" ||
                die "packaging/assets/${f##*/} is stale, missing or no longer generated; run:
  rm packaging/assets/*; cargo run -- generate-assets --out packaging/assets"
        done
        echo "packaging/assets/ matches the binary"
        "$runnable" --version
    fi
    for f in nthd.8 nthd-run.8 nthd-status.8 nthd.bash _nthd nthd.fish; do
        [ -s "packaging/assets/$f" ] || die "packaging/assets/$f is missing or empty"
    done
}

ship_docs() {
    local docs_url=${NTHD_DOCS_URL:-} doc_pairs f
    # The Markdown the packages ship, with repository-relative links made to work where it is
    # read: to the shipped copy, else to NTHD_DOCS_URL/PATH, else named as a path in nthd's
    # source (packaging/README.md, "Links in the shipped docs"). Cargo.toml's asset lists and
    # the tarball take them from here.
    say "shipped docs, links to files not shipped -> ${docs_url:-named as paths in the source}"
    doc_pairs=("README.md=README.md" "packaging/README.md=README.packaging.md")
    for f in docs/*.md docs/*.svg; do doc_pairs+=("$f=$f"); done
    rm -rf target/packaging/doc
    perl packaging/doclinks.pl "$docs_url" target/packaging/doc "${doc_pairs[@]}"
    echo "ok (${#doc_pairs[@]} files in target/packaging/doc)"
}

# --- 3. unit checks -----------------------------------------------------------
# Sets exposure.
check_unit() {
    local exec_bin
    say "systemd-analyze verify"
    # verify insists that ExecStart= exists; point it at a built binary.
    exec_bin=$root/target/$(triple "${arches[0]}")/release/nthd
    sed "s|^ExecStart=/usr/bin/nthd |ExecStart=$exec_bin |" \
        systemd/nthd.service >"$tmp/nthd.service"
    grep -q "^ExecStart=$exec_bin " "$tmp/nthd.service" ||
        die "unexpected ExecStart= in systemd/nthd.service"
    systemd-analyze verify --man=no "$tmp/nthd.service"
    echo "ok"

    say "systemd-analyze security --offline=yes systemd/nthd.service"
    systemd-analyze security --offline=yes --no-pager systemd/nthd.service >"$tmp/security.txt" 2>&1 || true
    exposure=$(sed -n 's/.*Overall exposure level for nthd.service: \([0-9.]*\).*/\1/p' "$tmp/security.txt")
    [ -n "$exposure" ] || { cat "$tmp/security.txt"; die "no exposure level in systemd-analyze output"; }
    grep '✗' "$tmp/security.txt" || true
    echo "exposure: $exposure (max $MAX_EXPOSURE)"
    awk -v e="$exposure" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(e <= m) }' ||
        die "exposure $exposure is above $MAX_EXPOSURE"
}

# --- 4. packages --------------------------------------------------------------
# The tarball: for distributions with neither package format. install.sh does what the
# packages' scripts do (packaging/tarball/install.sh).
make_tarball() {
    local a=$1 name="nthd-$version-$1" d
    d=$tmp/tar/$name
    rm -rf "$tmp/tar"
    mkdir -p "$d/completions" "$d/man" "$d/examples"
    install -m 755 "target/$(triple "$a")/release/nthd" "$d/nthd"
    install -m 755 packaging/tarball/install.sh "$d/install.sh"
    install -m 644 systemd/nthd.service "$d/nthd.service"
    install -m 644 systemd/nthd.sysusers "$d/nthd.sysusers"
    install -m 644 polkit/50-nthd.rules "$d/50-nthd.rules"
    install -m 644 polkit/nthd.pkla "$d/nthd.pkla"
    install -m 644 packaging/node-problem-detector/*.json "$d/"
    install -m 644 packaging/default/nthd "$d/nthd.default"
    install -m 644 packaging/warn-uid.sh "$d/warn-uid.sh"
    install -m 644 packaging/assets/*.8 "$d/man/"
    install -m 644 polkit/50-nthd-reboot.rules.example "$d/examples/"
    install -m 644 packaging/assets/nthd.bash packaging/assets/_nthd packaging/assets/nthd.fish \
        "$d/completions/"
    install -m 644 LICENSE target/packaging/doc/README.md target/packaging/doc/README.packaging.md "$d/"
    install -d "$d/docs" && install -m 644 target/packaging/doc/docs/* "$d/docs/"
    # Reproducible: sorted names, fixed owner and times, no name or time in the gzip header.
    tar -C "$tmp/tar" --sort=name --owner=0 --group=0 --numeric-owner \
        --mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
    echo "$dist/$name.tar.gz"
}
# Fills debs, and unless --deb-only rpms, tarballs and raws.
make_packages() {
    local a t deb rpm_out found
    for a in "${arches[@]}"; do
        t=$(triple "$a")
        say "cargo deb --target $t"
        deb=$(cargo deb --no-build --target "$t" --output "$dist" | tail -n1)
        [ -f "$deb" ] || die "cargo deb did not report a package path"
        debs+=("$deb")
        [ $deb_only = 0 ] || continue

        say "cargo generate-rpm --target $t"
        rpm_out=$tmp/rpm-$a
        mkdir -p "$rpm_out"
        # No automatic requirements: a static binary needs no library, and the systemd, dbus and
        # polkit requirements are written in Cargo.toml.
        cargo generate-rpm --target "$t" --arch "$a" --auto-req disabled --output "$rpm_out/"
        found=("$rpm_out"/nthd-"$version"-1."$a".rpm)
        [ -f "${found[0]}" ] || die "expected $rpm_out/nthd-$version-1.$a.rpm, got: $(ls "$rpm_out")"
        mv "${found[0]}" "$dist/"
        rpms+=("$dist/nthd-$version-1.$a.rpm")

        say "tarball for $a"
        [ -f packaging/tarball/install.sh ] || die "packaging/tarball/install.sh is missing"
        tarballs+=("$(make_tarball "$a")")

        say "systemd-sysext image for $a"
        raws+=("$(sh packaging/sysext/build.sh "target/$t/release/nthd" "$a" "$version" "$dist" | tail -n1)")
        [ -s "${raws[-1]}" ] || die "packaging/sysext/build.sh made no image for $a"
    done
}

sign_packages() {
    if [ $deb_only = 0 ]; then
        say "public key"
        export_public_key
        echo "  in $dist/$KEY_ASC and $dist/$KEY_GPG"
        # Every .rpm of this version here, another architecture's from an earlier run too: that
        # one was signed with that run's key, and the repository must verify with this one.
        say "rpmsign"
        sign_rpms "$dist"/nthd-"$version"-1.*.rpm
        # From here on rpm and rpmlint read an rpm database of their own that holds the key
        # (sign_rpms made it): they check the signed packages as a client that imported it.
        rpm() { command rpm --dbpath "$tmp/rpmdb" "$@"; }
        mkdir -p "$tmp/rpmhome"
        printf '%%_dbpath %s\n' "$tmp/rpmdb" >"$tmp/rpmhome/.rpmmacros"
    fi
}

# --- 5. checks ----------------------------------------------------------------
# Adds docs/*.md and docs/*.svg as a package carries them, under PREFIX, to the sorted list FILE
# (the README links to docs/NAME.md and shows docs/NAME.svg).
expect_docs() {
    local f
    for f in docs/*.md docs/*.svg; do echo "$2/$f"; done >>"$1"
    sort -o "$1" "$1"
}
# Adds every man page in packaging/assets/ as a package carries it: PREFIX/NAME.8SUFFIX.
expect_man() {
    local f
    for f in packaging/assets/*.8; do echo "$2/${f##*/}${3:-}"; done >>"$1"
    sort -o "$1" "$1"
}
check_deb() {
    local deb=$1 a=$2 depends
    say "deb contents: $deb"
    dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub("^\\./", "/", $6); print $6 }' | sort >"$tmp/deb.files"
    sort >"$tmp/deb.expected" <<'EOF'
/usr/bin/nthd
/usr/lib/systemd/system/nthd.service
/usr/lib/sysusers.d/nthd.conf
/usr/libexec/nthd/nthd
/usr/share/bash-completion/completions/nthd
/usr/share/doc/nthd/README.md
/usr/share/doc/nthd/README.packaging.md
/usr/share/doc/nthd/changelog.Debian.gz
/usr/share/doc/nthd/copyright
/usr/share/doc/nthd/examples/50-nthd-reboot.rules.example
/usr/share/doc/nthd/examples/cloud-init-user-data.yaml
/usr/share/doc/nthd/examples/nthd.pkr.hcl
/usr/share/fish/vendor_completions.d/nthd.fish
/usr/share/lintian/overrides/nthd
/usr/share/nthd/default
/usr/share/nthd/warn-uid.sh
/usr/share/nthd/node-problem-detector/nthd-karpenter-azure.json
/usr/share/nthd/node-problem-detector/nthd-karpenter-gcp.json
/usr/share/nthd/node-problem-detector/nthd-monitor.json
/usr/share/polkit-1/rules.d/50-nthd.rules
/usr/share/zsh/vendor-completions/_nthd
/var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla
EOF
    expect_docs "$tmp/deb.expected" /usr/share/doc/nthd
    expect_man "$tmp/deb.expected" /usr/share/man/man8 .gz
    diff -u "$tmp/deb.expected" "$tmp/deb.files" || die "unexpected files in $deb"
    [ "$(dpkg-deb -f "$deb" Architecture)" = "$(deb_arch "$a")" ] ||
        die "$deb: Architecture is $(dpkg-deb -f "$deb" Architecture), not $(deb_arch "$a")"
    [ "$(dpkg-deb -f "$deb" Version)" = "$version-1" ] || die "$deb: Version is not $version-1"
    depends=$(dpkg-deb -f "$deb" Depends)
    echo "Depends: $depends"
    # A static binary: no libc (or any library) version may be pinned.
    ! grep -Eq 'libc|libgcc' <<<"$depends" || die "$deb pins a library: $depends"
    # No conffile: /etc/default/nthd is made by postinst from /usr/share/nthd/default, so no
    # upgrade of a configured node ever stops at dpkg's conffile prompt.
    ! dpkg-deb -I "$deb" conffiles >/dev/null 2>&1 || die "the .deb must ship no conffile: $(dpkg-deb -I "$deb" conffiles)"
    for s in postinst prerm postrm; do
        dpkg-deb -I "$deb" "$s" | sh -n || die "$s: syntax error"
    done
    echo "ok"
}

check_rpm() {
    local rpmfile=$1 a=$2
    say "rpm contents: $rpmfile"
    rpm -qp --qf '[%{FILENAMES}\n]' "$rpmfile" | sort >"$tmp/rpm.files"
    sort >"$tmp/rpm.expected" <<'EOF'
/usr/bin/nthd
/usr/lib/systemd/system/nthd.service
/usr/lib/sysusers.d/nthd.conf
/usr/libexec/nthd/nthd
/usr/share/bash-completion/completions/nthd
/usr/share/doc/nthd/README.md
/usr/share/doc/nthd/README.packaging.md
/usr/share/doc/nthd/examples/50-nthd-reboot.rules.example
/usr/share/doc/nthd/examples/cloud-init-user-data.yaml
/usr/share/doc/nthd/examples/nthd.pkr.hcl
/usr/share/fish/vendor_completions.d/nthd.fish
/usr/share/licenses/nthd/LICENSE
/usr/share/nthd/default
/usr/share/nthd/warn-uid.sh
/usr/share/nthd/node-problem-detector/nthd-karpenter-azure.json
/usr/share/nthd/node-problem-detector/nthd-karpenter-gcp.json
/usr/share/nthd/node-problem-detector/nthd-monitor.json
/usr/share/polkit-1/rules.d/50-nthd.rules
/usr/share/zsh/site-functions/_nthd
EOF
    expect_docs "$tmp/rpm.expected" /usr/share/doc/nthd
    expect_man "$tmp/rpm.expected" /usr/share/man/man8
    diff -u "$tmp/rpm.expected" "$tmp/rpm.files" || die "unexpected files in $rpmfile"
    [ "$(rpm -qp --qf '%{ARCH} %{VERSION}-%{RELEASE}' "$rpmfile")" = "$a $version-1" ] ||
        die "$rpmfile: $(rpm -qp --qf '%{ARCH} %{VERSION}-%{RELEASE}' "$rpmfile"), not $a $version-1"
    # No %config file: %post makes /etc/sysconfig/nthd from /usr/share/nthd/default, so no
    # upgrade leaves an .rpmnew (%posttrans undoes the .rpmsave of 0.1.0's erase).
    [ -z "$(rpm -qp --configfiles "$rpmfile")" ] || die "the .rpm must ship no config file: $(rpm -qp --configfiles "$rpmfile")"
    # cargo-generate-rpm embeds a script path literally if the file is missing.
    rpm -qp --scripts "$rpmfile" >"$tmp/scripts"
    for s in '%pre for nthd' '%post for nthd' '%preun for nthd' '%postun for nthd' '%posttrans for nthd'; do
        grep -qF "# $s" "$tmp/scripts" || die "rpm scriptlet '$s' missing"
    done
    for s in pre_install post_install pre_uninstall post_uninstall post_trans; do
        sh -n "packaging/rpm/$s.sh" || die "packaging/rpm/$s.sh: syntax error"
    done
    # The three services, the scriptlets' /bin/sh and rpm's own entries: no library, no libc.
    rpm -qp --requires "$rpmfile" | grep -Ev '^(rpmlib\(|config\(nthd\) = |/bin/sh$)' |
        sort >"$tmp/requires"
    printf 'dbus\npolkit\nsystemd\n' | diff -u - "$tmp/requires" || die "$rpmfile: unexpected Requires"
    echo "ok"
}

check_tarball() {
    local tarball=$1 a=$2 name="nthd-$version-$2"
    say "tarball contents: $tarball"
    tar -tzf "$tarball" | grep -v '/$' | sort >"$tmp/tar.files"
    sed "s|^|$name/|" <<'EOF' | sort >"$tmp/tar.expected"
50-nthd.rules
LICENSE
README.md
README.packaging.md
completions/_nthd
completions/nthd.bash
completions/nthd.fish
install.sh
nthd
examples/50-nthd-reboot.rules.example
nthd-karpenter-azure.json
nthd-karpenter-gcp.json
nthd-monitor.json
nthd.default
nthd.pkla
nthd.service
nthd.sysusers
warn-uid.sh
EOF
    expect_docs "$tmp/tar.expected" "$name"
    expect_man "$tmp/tar.expected" "$name/man"
    diff -u "$tmp/tar.expected" "$tmp/tar.files" || die "unexpected files in $tarball"
    tar -xzf "$tarball" -C "$tmp" "$name/install.sh"
    sh -n "$tmp/$name/install.sh" || die "$name/install.sh: syntax error"
    echo "ok"
}

# The sysext image: /usr only, the binary for this architecture, and an extension-release
# whose ARCHITECTURE= systemd-sysext compares with the host's.
check_raw() {
    local raw=$1 a=$2 want
    say "sysext contents: $raw"
    unsquashfs -lc "$raw" | sed 's|^squashfs-root||' | sort >"$tmp/raw.files"
    ! grep -v '^/usr/' "$tmp/raw.files" || die "$raw has files outside /usr"
    grep -qx /usr/bin/nthd "$tmp/raw.files" || die "$raw has no /usr/bin/nthd"
    grep -qx /usr/libexec/nthd/nthd "$tmp/raw.files" || die "$raw has no /usr/libexec/nthd/nthd (the NPD DaemonSet's)"
    for f in packaging/assets/*.8 polkit/50-nthd-reboot.rules.example; do
        case $f in *.8) f=/usr/share/man/man8/${f##*/} ;; *) f=/usr/share/doc/nthd/examples/${f##*/} ;; esac
        grep -qx "$f" "$tmp/raw.files" || die "$raw has no $f"
    done
    rm -rf "$tmp/raw"
    unsquashfs -q -d "$tmp/raw" "$raw" usr/lib/extension-release.d usr/bin/nthd >/dev/null
    want=$(case "$a" in x86_64) echo x86-64 ;; aarch64) echo arm64 ;; esac)
    grep -qx "ARCHITECTURE=$want" "$tmp/raw/usr/lib/extension-release.d/extension-release.nthd" ||
        die "$raw: extension-release does not say ARCHITECTURE=$want"
    cmp -s "$tmp/raw/usr/bin/nthd" "target/$(triple "$a")/release/nthd" ||
        die "$raw: /usr/bin/nthd is not the $a build"
    echo "ok ($(wc -l <"$tmp/raw.files") files)"
}

# Every package's contents; --deb-only ends here.
check_packages() {
    local i
    for i in "${!arches[@]}"; do
        check_deb "${debs[$i]}" "${arches[$i]}"
    done
    if [ $deb_only = 1 ]; then
        say "package (--deb-only: no .rpm, tarball or lintian)"
        printf '%s\t%s bytes\n' "${debs[0]}" "$(stat -c %s "${debs[0]}")"
        echo "systemd-analyze security exposure: $exposure"
        exit 0
    fi
    for i in "${!arches[@]}"; do
        check_rpm "${rpms[$i]}" "${arches[$i]}"
        check_tarball "${tarballs[$i]}" "${arches[$i]}"
        check_raw "${raws[$i]}" "${arches[$i]}"
    done
}

lint_packages() {
    local deb rpmfile summary
    for deb in "${debs[@]}"; do
        say "lintian $deb"
        lintian --fail-on error,warning --info --pedantic --display-experimental "$deb"
        echo "lintian: no errors, no warnings"
    done

    for rpmfile in "${rpms[@]}"; do
        say "rpmlint $rpmfile"
        HOME=$tmp/rpmhome rpmlint -c packaging/rpm/rpmlint.toml "$rpmfile" | tee "$tmp/rpmlint.txt"
        summary=$(grep -E '[0-9]+ errors, [0-9]+ warnings' "$tmp/rpmlint.txt") || die "no rpmlint summary"
        grep -qE ' 0 errors, 0 warnings' <<<"$summary" || die "rpmlint: $summary"
    done
}

# docs/performance.md quotes every size once, in its sizes block: fail when one is 5 % off, so
# the block is updated with the change that moves it.
check_sizes_quoted() {
    local sizes paths p a key have want
    sizes=$(sed -n '/<!-- sizes:begin -->/,/<!-- sizes:end -->/p' docs/performance.md)
    paths=("${artifacts[@]/#/$dist/}")
    for a in "${arches[@]}"; do paths+=("target/$(triple "$a")/release/nthd"); done
    for p in "${paths[@]}"; do
        key=${p#"$dist"/}; key=${key//$version/VERSION}; have=$(stat -c %s "$p")
        want=$(awk -F'|' -v k="\`$key\`" 'index($2, k) { gsub(/[^0-9]/, "", $3); print $3 }' <<<"$sizes")
        if [ -z "$want" ] || [ $((have * 20)) -lt $((want * 19)) ] || [ $((have * 20)) -gt $((want * 21)) ]; then
            die "docs/performance.md's sizes block says ${want:-nothing} for $key; built: $have bytes (update the block)"
        fi
    done
    echo "sizes: every artifact within 5 % of docs/performance.md's sizes block"
}

# --- 6. SHA256SUMS (sets artifacts), its signature and the repositories.
sums_and_repos() {
    local f
    say "SHA256SUMS"
    artifacts=()
    for f in "${debs[@]}" "${rpms[@]}" "${tarballs[@]}" "${raws[@]}"; do artifacts+=("$(basename "$f")"); done
    # Every artifact of this version in target/dist/, including another architecture's from an
    # earlier run of this version; nothing stale from another version.
    # shellcheck disable=SC2012  # our own artifact names: no spaces, no newlines
    (cd "$dist" && ls nthd_"$version"-1_*.deb nthd-"$version"-1.*.rpm nthd-"$version"-*.tar.gz \
        nthd-"$version"-*.raw |
        sort | xargs sha256sum >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
    cat "$dist/SHA256SUMS"
    sign_sums

    say "apt repository $dist/apt"
    make_apt_repo
    say "rpm repository $dist/rpm"
    make_rpm_repo
}

summary() {
    local f
    say "artifacts in $dist"
    for f in "${artifacts[@]}" SHA256SUMS SHA256SUMS.asc "$KEY_ASC" "$KEY_GPG"; do
        printf '%-40s %9s bytes\n' "$f" "$(stat -c %s "$dist/$f")"
    done
    printf '%-40s %9s files\n' apt/ "$(find "$dist/apt" -type f | wc -l)" rpm/ "$(find "$dist/rpm" -type f | wc -l)"
    check_sizes_quoted
    echo "signed by: $SIGN_FPR${SIGN_HOME_TMP:+ (a TEST key, $KEY_ASC: its secret goes with $SIGN_HOME_TMP now)}"
    echo "systemd-analyze security exposure: $exposure"
}

main() {
    parse_args "$@"
    install_tools
    read_version
    check_sources
    prepare_workdir
    make_changelog
    build_binaries
    check_assets
    ship_docs
    check_unit
    make_packages
    sign_packages
    check_packages
    lint_packages
    sums_and_repos
    summary
}

main "$@"
