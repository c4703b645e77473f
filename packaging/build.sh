#!/usr/bin/env bash
# Build, check and lint the nthd .deb and .rpm.
#
#   packaging/build.sh [--deb-only]
#
# --deb-only: only what the README demo needs: the .deb with its file list
#             and maintainer-script checks (steps 2-4, first check of 5).
#             No cargo-generate-rpm, no .rpm, no lintian, no rpmlint: run
#             without it before a release.
#
# Idempotent: installs the tools it needs only when they are missing, and
# can be rerun at will. Steps:
#   1. tools: cargo-deb, cargo-generate-rpm (pinned), lintian, rpmlint
#   2. cargo build --release; `nthd generate-assets --out target/assets` must
#      reproduce the committed packaging/assets/ (man page, completions);
#      packaging/debian/changelog must be at this version
#   3. systemd-analyze verify + security (exposure must be <= 1.5)
#   4. cargo deb --no-build, cargo generate-rpm
#   5. exact file lists, maintainer scripts, lintian and rpmlint (errors or
#      warnings fail the build; justified exceptions live in
#      packaging/debian/nthd.lintian-overrides and packaging/rpm/rpmlint.toml)
#
# Environment:
#   NTHD_PACKAGE_PREBUILT=1  skip the build and the asset check and package
#                            target/release/nthd as it is (CI caches, or
#                            testing the packaging with a stand-in binary).
#                            Never for a release.
#   SOURCE_DATE_EPOCH        timestamps inside the packages (default: the
#                            last git commit).
set -euo pipefail

CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1
# systemd-analyze security exposure, 0.0 (best) .. 10.0; see README.md.
MAX_EXPOSURE=1.5

cd "$(dirname "$0")/.."
root=$PWD
assets=target/assets

say() { printf '\n==> %s\n' "$*"; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }

deb_only=0
case "${1:-}" in
    "") ;;
    --deb-only) deb_only=1 ;;
    *) die "unknown argument '$1' (usage: packaging/build.sh [--deb-only])" ;;
esac
tools=("cargo-deb@$CARGO_DEB_VERSION" "cargo-generate-rpm@$CARGO_GENERATE_RPM_VERSION")
[ $deb_only = 0 ] || tools=("cargo-deb@$CARGO_DEB_VERSION")

# --- 1. tools -----------------------------------------------------------------
say "tools"
installed=$(cargo install --list)
for spec in "${tools[@]}"; do
    name=${spec%@*} version=${spec#*@}
    if grep -qx "$name v$version:" <<<"$installed"; then
        echo "$name $version already installed"
    else
        cargo install --locked "$name@$version"
    fi
done
missing=()
if [ $deb_only = 0 ]; then
    command -v lintian >/dev/null || missing+=(lintian)
    command -v rpmlint >/dev/null || missing+=(rpmlint)
    command -v rpm >/dev/null || missing+=(rpm)
fi
# dpkg-parsechangelog; lintian pulls it in, a plain Debian 12 lacks it.
command -v dpkg-parsechangelog >/dev/null || missing+=(dpkg-dev)
command -v systemd-analyze >/dev/null || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "please install: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "nthd"))')
echo "nthd version $version"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
    SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

# Files that others own but the packages ship.
[ -f README.md ] || die "README.md is missing (shipped as /usr/share/doc/nthd/README.md)"
[ -f LICENSE ] || die "LICENSE is missing"

# The RPM %pre carries its own copy of the sysusers line (the file is not
# installed yet when %pre runs); both must say the same.
sysusers_line=$(grep -E '^u[[:space:]]' systemd/nthd.sysusers)
grep -qxF "$sysusers_line" packaging/rpm/pre_install.sh ||
    die "the sysusers line in packaging/rpm/pre_install.sh differs from systemd/nthd.sysusers"

# --- 2. binary and generated assets -------------------------------------------
# The packages ship the man page and completions committed in
# packaging/assets/ (so that a plain `cargo deb` works). Here they are
# generated afresh from the binary being packaged and must be identical.
if [ "${NTHD_PACKAGE_PREBUILT:-0}" = 1 ]; then
    say "NTHD_PACKAGE_PREBUILT=1: packaging target/release/nthd as it is"
else
    say "cargo build --release"
    cargo build --release --locked --bin nthd

    say "generate assets"
    if ! target/release/nthd generate-assets --help >/dev/null 2>&1; then
        die "target/release/nthd has no 'generate-assets' subcommand.
  The packages need the man page and shell completions it writes
  (set NTHD_PACKAGE_PREBUILT=1 to package packaging/assets/ unchecked)"
    fi
    rm -rf "$assets"
    mkdir -p "$assets"
    target/release/nthd generate-assets --out "$assets" ||
        die "'nthd generate-assets --out $assets' failed (see above)"
    for f in nthd.8 nthd.bash _nthd nthd.fish; do
        cmp -s "$assets/$f" "packaging/assets/$f" ||
            die "packaging/assets/$f is stale or missing; run:
  cargo run -- generate-assets --out packaging/assets"
    done
    echo "packaging/assets/ matches the binary"
fi
[ -x target/release/nthd ] || die "target/release/nthd is missing"
for f in nthd.8 nthd.bash _nthd nthd.fish; do
    [ -s "packaging/assets/$f" ] || die "packaging/assets/$f is missing or empty"
done
# The Debian changelog is kept by hand; its top entry must be this version.
deb_version=$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)
[ "$deb_version" = "$version-1" ] || die "packaging/debian/changelog is at $deb_version, Cargo.toml at $version.
  Add an entry for $version-1 at the top (e.g. dch -c packaging/debian/changelog -v $version-1)"

# --- 3. unit checks -----------------------------------------------------------
say "systemd-analyze verify"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# verify insists that ExecStart= exists; point it at the built binary.
sed "s|^ExecStart=/usr/bin/nthd |ExecStart=$root/target/release/nthd |" \
    systemd/nthd.service >"$tmp/nthd.service"
grep -q "^ExecStart=$root/target/release/nthd " "$tmp/nthd.service" ||
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

# --- 4. packages --------------------------------------------------------------
say "cargo deb"
deb=$(cargo deb --no-build | tail -n1)
[ -f "$deb" ] || die "cargo deb did not report a package path"

if [ $deb_only = 0 ]; then
    say "cargo generate-rpm"
    rm -rf target/generate-rpm
    cargo generate-rpm
    rpms=(target/generate-rpm/nthd-"$version"-1.*.rpm)
    if [ ${#rpms[@]} -ne 1 ] || [ ! -f "${rpms[0]}" ]; then
        die "expected one rpm, got: ${rpms[*]}"
    fi
    rpmfile=${rpms[0]}
fi

# --- 5. checks ----------------------------------------------------------------
say "deb contents"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { sub("^\\./", "/", $6); print $6 }' | sort >"$tmp/deb.files"
sort >"$tmp/deb.expected" <<'EOF'
/etc/default/nthd
/usr/bin/nthd
/usr/lib/systemd/system/nthd.service
/usr/lib/sysusers.d/nthd.conf
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
/usr/share/man/man8/nthd.8.gz
/usr/share/polkit-1/rules.d/50-nthd.rules
/usr/share/zsh/vendor-completions/_nthd
/var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla
EOF
diff -u "$tmp/deb.expected" "$tmp/deb.files" || die "unexpected files in $deb"
dpkg-deb -f "$deb" Depends
[ "$(dpkg-deb -I "$deb" conffiles)" = /etc/default/nthd ] || die "conffiles must be exactly /etc/default/nthd"
for s in postinst prerm postrm; do
    dpkg-deb -I "$deb" "$s" | sh -n || die "$s: syntax error"
done
echo "ok"

if [ $deb_only = 1 ]; then
    say "package (--deb-only: no .rpm, no lintian)"
    printf '%s\t%s bytes\n' "$deb" "$(stat -c %s "$deb")"
    echo "systemd-analyze security exposure: $exposure"
    exit 0
fi

say "rpm contents"
rpm -qp --qf '[%{FILENAMES}\n]' "$rpmfile" | sort >"$tmp/rpm.files"
sort >"$tmp/rpm.expected" <<'EOF'
/etc/sysconfig/nthd
/usr/bin/nthd
/usr/lib/systemd/system/nthd.service
/usr/lib/sysusers.d/nthd.conf
/usr/share/bash-completion/completions/nthd
/usr/share/doc/nthd/README.md
/usr/share/doc/nthd/README.packaging.md
/usr/share/doc/nthd/examples/50-nthd-reboot.rules.example
/usr/share/doc/nthd/examples/cloud-init-user-data.yaml
/usr/share/doc/nthd/examples/nthd.pkr.hcl
/usr/share/fish/vendor_completions.d/nthd.fish
/usr/share/licenses/nthd/LICENSE
/usr/share/man/man8/nthd.8
/usr/share/polkit-1/rules.d/50-nthd.rules
/usr/share/zsh/site-functions/_nthd
EOF
diff -u "$tmp/rpm.expected" "$tmp/rpm.files" || die "unexpected files in $rpmfile"
[ "$(rpm -qp --configfiles "$rpmfile")" = /etc/sysconfig/nthd ] || die "config files must be exactly /etc/sysconfig/nthd"
rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' "$rpmfile" | grep -qx 'cn /etc/sysconfig/nthd' ||
    die "/etc/sysconfig/nthd must be %config(noreplace)"
# cargo-generate-rpm embeds a script path literally if the file is missing.
rpm -qp --scripts "$rpmfile" >"$tmp/scripts"
for s in '%pre for nthd' '%post for nthd' '%preun for nthd' '%postun for nthd'; do
    grep -qF "# $s" "$tmp/scripts" || die "rpm scriptlet '$s' missing"
done
for s in pre_install post_install pre_uninstall post_uninstall; do
    sh -n "packaging/rpm/$s.sh" || die "packaging/rpm/$s.sh: syntax error"
done
rpm -qp --requires "$rpmfile" | grep -Ex 'systemd|dbus|polkit' | sort | tr '\n' ' '
echo
echo "ok"

say "lintian"
lintian --fail-on error,warning --info --pedantic --display-experimental "$deb"
echo "lintian: no errors, no warnings"

say "rpmlint"
rpmlint -c packaging/rpm/rpmlint.toml "$rpmfile" | tee "$tmp/rpmlint.txt"
summary=$(grep -E '[0-9]+ errors, [0-9]+ warnings' "$tmp/rpmlint.txt") || die "no rpmlint summary"
grep -qE ' 0 errors, 0 warnings' <<<"$summary" || die "rpmlint: $summary"

say "packages"
for f in "$deb" "$rpmfile"; do
    printf '%s\t%s bytes\n' "$f" "$(stat -c %s "$f")"
done
echo "systemd-analyze security exposure: $exposure"
