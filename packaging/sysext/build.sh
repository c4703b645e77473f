#!/bin/sh
# Build nthd-<version>-<arch>.raw, a systemd-sysext(8) extension image for image-based
# hosts whose /usr is read-only (Flatcar, Fedora CoreOS/IoT, ...).
#
#   packaging/sysext/build.sh BINARY ARCH VERSION OUTDIR [--dir]
#
#   BINARY   the static nthd (target/<triple>/release/nthd)
#   ARCH     x86_64 | aarch64 (the tarball's names)
#   VERSION  nthd's version (Cargo.toml)
#   OUTDIR   where nthd-VERSION-ARCH.raw is written
#   --dir    also leave the tree as OUTDIR/nthd-VERSION-ARCH/ (a plain directory
#            extension: copy it to /var/lib/extensions/nthd/)
#
# The image is squashfs (mksquashfs, Debian package squashfs-tools), or erofs when
# mksquashfs is missing and mkfs.erofs (erofs-utils) is there. It holds /usr only:
#   usr/bin/nthd, usr/lib/systemd/system/nthd.service, usr/lib/sysusers.d/nthd.conf,
#   usr/share/polkit-1/rules.d/50-nthd.rules, the man pages (nthd(8), nthd-status(8), ...),
#   completions, usr/share/doc/nthd/examples/ (nthd.default, 50-nthd-reboot.rules.example) and
#   usr/lib/extension-release.d/extension-release.nthd (ID=_any, ARCHITECTURE=).
# On the host:  cp nthd-VERSION-ARCH.raw /var/lib/extensions/nthd.raw
#               systemd-sysext merge   (or refresh)
#               systemd-sysusers && systemctl daemon-reload && systemctl enable --now nthd
# (extension images cannot carry /etc: settings go to /etc/default/nthd; the unit
# treats that file as optional.)
set -eu

die() { printf 'sysext/build.sh: %s\n' "$*" >&2; exit 1; }
# Sets bin, arch, version, outdir, keepdir, sdarch, root, name and tree.
check_args() {
    [ $# -ge 4 ] || die "usage: build.sh BINARY ARCH VERSION OUTDIR [--dir]"
    bin=$1 arch=$2 version=$3 outdir=$4 keepdir=0
    [ "${5:-}" != --dir ] || keepdir=1
    [ -x "$bin" ] || die "$bin is not an executable"
    case "$arch" in
        x86_64) sdarch=x86-64 ;;
        aarch64) sdarch=arm64 ;;
        *) die "unknown architecture '$arch' (x86_64 | aarch64)" ;;
    esac
    root=$(cd "$(dirname "$0")/../.." && pwd)
    name=nthd-$version-$arch
    mkdir -p "$outdir"
    outdir=$(cd "$outdir" && pwd)
    tree=$outdir/$name
    rm -rf "$tree" "$outdir/$name.raw"
}

i() { install -D -m "$1" "$2" "$tree/$3"; }
fill_tree() {
    i 755 "$bin" usr/bin/nthd
    i 755 "$bin" usr/libexec/nthd/nthd
    i 644 "$root/systemd/nthd.service" usr/lib/systemd/system/nthd.service
    i 644 "$root/systemd/nthd.sysusers" usr/lib/sysusers.d/nthd.conf
    i 644 "$root/polkit/50-nthd.rules" usr/share/polkit-1/rules.d/50-nthd.rules
    for page in "$root"/packaging/assets/*.8; do
        i 644 "$page" "usr/share/man/man8/${page##*/}"
    done
    for cfg in "$root"/packaging/node-problem-detector/*.json; do
        i 644 "$cfg" "usr/share/nthd/node-problem-detector/${cfg##*/}"
    done
    i 644 "$root/packaging/assets/nthd.bash" usr/share/bash-completion/completions/nthd
    i 644 "$root/packaging/assets/_nthd" usr/share/zsh/site-functions/_nthd
    i 644 "$root/packaging/assets/nthd.fish" usr/share/fish/vendor_completions.d/nthd.fish
    i 644 "$root/packaging/default/nthd" usr/share/doc/nthd/examples/nthd.default
    # Where docs/configuration.md says to copy it from, as in the packages.
    i 644 "$root/polkit/50-nthd-reboot.rules.example" usr/share/doc/nthd/examples/50-nthd-reboot.rules.example
    i 644 "$root/LICENSE" usr/share/licenses/nthd/LICENSE
}

# extension-release: the file name must match the image name without .raw, or be
# named after the image's file name on the host; systemd-sysext matches it to the
# image name ("nthd" when installed as /var/lib/extensions/nthd.raw). ID=_any: the
# binary is static, so the image fits every distribution (systemd >= 252 reads _any).
# EXTENSION_RELOAD_MANAGER=1: systemd >= 255 daemon-reloads after a merge by itself.
write_release() {
    mkdir -p "$tree/usr/lib/extension-release.d"
    cat >"$tree/usr/lib/extension-release.d/extension-release.nthd" <<EOF
ID=_any
ARCHITECTURE=$sdarch
SYSEXT_ID=nthd
SYSEXT_VERSION_ID=$version
EXTENSION_RELOAD_MANAGER=1
EOF
    # Reproducible: fixed times; every file owned by root.
    find "$tree" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-0}" {} +
}

make_image() {
    if command -v mksquashfs >/dev/null 2>&1; then
        # mksquashfs (>= 4.5) takes every timestamp from SOURCE_DATE_EPOCH when it is set, and
        # refuses -mkfs-time/-all-time beside it.
        mksquashfs "$tree" "$outdir/$name.raw" -all-root -noappend -quiet -comp xz >/dev/null
    elif command -v mkfs.erofs >/dev/null 2>&1; then
        mkfs.erofs --all-root ${SOURCE_DATE_EPOCH:+-T "$SOURCE_DATE_EPOCH"} "$outdir/$name.raw" "$tree" >/dev/null
    else
        die "need mksquashfs (apt-get install squashfs-tools) or mkfs.erofs (erofs-utils)"
    fi
    [ $keepdir = 1 ] || rm -rf "$tree"
    echo "$outdir/$name.raw"
}

main() {
    check_args "$@"
    fill_tree
    write_release
    make_image
}

main "$@"
