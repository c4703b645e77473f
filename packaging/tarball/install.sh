#!/bin/sh
# Install nthd from the release tarball, on distributions with neither .deb nor
# .rpm: does what the packages' maintainer scripts do.
#
#   sudo ./install.sh                 install, create user nthd, enable and start nthd
#   sudo ./install.sh --no-start      install and enable only (image builds, chroots:
#                                     nthd starts on the next boot)
#   sudo ./install.sh --uninstall     stop, disable and remove what install.sh installed;
#                                     keeps user nthd, /var/lib/nthd and an edited
#                                     /etc/default/nthd (as the packages do)
#   sudo ./install.sh --uninstall --purge   ... and remove those too
#   --prefix DIR   the binary, man pages, docs and completions go under DIR (default /usr);
#                  with any other prefix the unit, sysusers entry and polkit rule go to
#                  /etc (for hosts whose /usr is read-only)
#
# Files (prefix /usr, the packages' paths):
#   /usr/bin/nthd (and /usr/libexec/nthd/nthd, for node-problem-detector's DaemonSet),
#   /usr/lib/systemd/system/nthd.service, /usr/lib/sysusers.d/nthd.conf,
#   /usr/share/polkit-1/rules.d/50-nthd.rules (polkit >= 0.106),
#   /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla (only where polkit is 0.105,
#   which reads nothing else), /etc/default/nthd (an existing one is kept), the man pages
#   (nthd(8) and one per command: nthd-status(8), ...), bash/zsh/fish completions,
#   /usr/share/doc/nthd/ (the README, docs/ and examples/50-nthd-reboot.rules.example,
#   which docs/configuration.md copies; under --prefix DIR: DIR/share/doc/nthd/). The list
#   of what was installed is kept in /var/lib/nthd-install/manifest for --uninstall.
#
# Refuses (message on stderr, exit 1) when: not root; the binary is for another
# architecture; systemd is not PID 1 (unless --no-start); systemd is older than 235;
# polkit is not installed; nthd is installed from a package already.
set -eu

MIN_SYSTEMD=235
UNIT=nthd.service
MANIFEST_DIR=/var/lib/nthd-install
MANIFEST=$MANIFEST_DIR/manifest

say() { printf 'install.sh: %s\n' "$*"; }
refuse() { printf 'install.sh: cannot install: %s\n' "$*" >&2; exit 1; }
die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }

usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# Sets here, mode, start, purge and prefix.
parse_args() {
    here=$(cd "$(dirname "$0")" && pwd)
    mode=install start=1 purge=0 prefix=/usr
    while [ $# -gt 0 ]; do
        case "$1" in
            --uninstall) mode=uninstall ;;
            --purge) purge=1 ;;
            --no-start) start=0 ;;
            --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix=$2; shift ;;
            --prefix=*) prefix=${1#--prefix=} ;;
            -h | --help) usage; exit 0 ;;
            *) usage >&2; die "unknown argument '$1'" ;;
        esac
        shift
    done
    [ -z "${DESTDIR:-}" ] || refuse "DESTDIR is not supported: to install into an image, run install.sh inside its chroot with --no-start"
    case "$prefix" in /*) ;; *) die "--prefix must be an absolute path" ;; esac
    prefix=${prefix%/}
    [ -n "$prefix" ] || prefix=/usr
}

# True when systemd is PID 1 (sd_booted(3)) and we were not told to stay offline,
# as in the packages' scripts.
systemd_running() { [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; }

# ------------------------------------------------------------------ uninstall
# Removes what the manifest lists (an edited /etc/default/nthd only with --purge) and exits.
uninstall() {
    [ -r "$MANIFEST" ] || die "no $MANIFEST: nthd was not installed by install.sh"
    if systemd_running; then
        systemctl disable --now "$UNIT" >/dev/null 2>&1 || :
    else
        systemctl --no-reload disable "$UNIT" >/dev/null 2>&1 || :
    fi
    # Files first, then the directories we created, innermost first (if empty).
    grep '^f ' "$MANIFEST" | while IFS= read -r line; do
        f=${line#f }
        if [ "$f" = /etc/default/nthd ] && [ $purge = 0 ] && [ -f "$MANIFEST_DIR/nthd.default" ] &&
            ! cmp -s "$f" "$MANIFEST_DIR/nthd.default"; then
            say "keeping your edited $f (--purge removes it)"
            continue
        fi
        rm -f "$f"
    done
    grep '^d ' "$MANIFEST" | sed -n '1!G;h;$p' | while IFS= read -r line; do
        rmdir "${line#d }" 2>/dev/null || :
    done
    rm -rf "$MANIFEST_DIR"
    if systemd_running; then systemctl daemon-reload || :; fi
    if [ $purge = 1 ]; then
        rm -rf /var/lib/nthd /var/lib/private/nthd
        if getent passwd nthd >/dev/null; then userdel nthd || die "userdel nthd failed"; fi
        if getent group nthd >/dev/null; then groupdel nthd || die "groupdel nthd failed"; fi
        say "removed nthd, its state and user nthd"
    else
        say "removed nthd (kept user nthd and /var/lib/nthd, as the packages do; --purge removes them)"
    fi
    exit 0
}

# ------------------------------------------------------------------- checks
check_files() {
    for f in nthd nthd.service nthd.sysusers 50-nthd.rules nthd.pkla nthd.default; do
        [ -r "$here/$f" ] || die "$here/$f is missing: run install.sh from the unpacked tarball"
    done
}

# The binary's architecture, from its ELF header (e_machine at byte 18, little endian),
# not by running it: with binfmt_misc + qemu-user a foreign binary would even run.
elf_arch() {
    case $(od -An -tx1 -j18 -N2 "$1" | tr -d ' \n') in
        3e00) echo x86_64 ;;
        b700) echo aarch64 ;;
        *) echo unknown ;;
    esac
}
check_arch() {
    bin_arch=$(elf_arch "$here/nthd")
    host_arch=$(uname -m)
    [ "$host_arch" != arm64 ] || host_arch=aarch64
    [ "$bin_arch" = "$host_arch" ] ||
        refuse "this tarball's nthd is built for $bin_arch, this machine is $host_arch: use nthd-<version>-$host_arch.tar.gz"
}

# Sets sd_version.
check_systemd() {
    command -v systemctl >/dev/null 2>&1 || refuse "systemd is not installed: nthd is a systemd service"
    command -v systemd-sysusers >/dev/null 2>&1 || refuse "systemd-sysusers not found (systemd >= $MIN_SYSTEMD is needed)"
    if systemd_running; then
        :
    elif [ $start = 1 ]; then
        refuse "systemd is not running as PID 1 here (no /run/systemd/system), so nthd cannot be started. In a chroot or image build, rerun with --no-start: nthd is then installed and enabled, and starts on the next boot"
    fi
    sd_version=$(systemctl --version 2>/dev/null | sed -n '1s/^systemd \([0-9][0-9]*\).*/\1/p')
    [ -n "$sd_version" ] || refuse "cannot tell the systemd version from 'systemctl --version'"
    [ "$sd_version" -ge $MIN_SYSTEMD ] ||
        refuse "systemd $sd_version is too old: nthd.service needs systemd >= $MIN_SYSTEMD (StateDirectory=: under ProtectSystem=strict an older systemd leaves /var/lib/nthd unwritable). Amazon Linux 2 and CentOS 7 (systemd 219) cannot do kubelet's graceful node shutdown either"
}

# polkit: logind lets user nthd power off only through a polkit grant. polkitd is
# D-Bus activated: its bus service file, or the daemon itself, says it is installed.
# Sets pkla and polkit_version.
check_polkit() {
    polkit_present=0
    for f in /usr/share/dbus-1/system-services/org.freedesktop.PolicyKit1.service \
        /usr/lib/polkit-1/polkitd /usr/libexec/polkitd /usr/libexec/polkit-1/polkitd \
        /usr/lib/policykit-1/polkitd; do
        [ -f "$f" ] && polkit_present=1
    done
    [ $polkit_present = 1 ] ||
        refuse "polkit is not installed, and without it logind refuses nthd's power-off. Install it first (Debian/Ubuntu: apt-get install polkitd, or policykit-1 on older releases; Fedora/RHEL/SUSE: polkit)"
    # polkit 0.105 (Debian <= 11, Ubuntu <= 22.04) reads only .pkla files, newer only JS rules.
    polkit_version=$(pkaction --version 2>/dev/null | sed -n 's/^pkaction version //p') || :
    case "$polkit_version" in
        0.10[0-5] | 0.10[0-5].* | 0.[0-9][0-9] | 0.[0-9][0-9].*) pkla=1 ;;
        "") # No pkaction: judge by the local authority's presence.
            pkla=0
            if [ -d /etc/polkit-1/localauthority ] && [ ! -d /etc/polkit-1/rules.d ]; then pkla=1; fi
            polkit_version=unknown ;;
        *) pkla=0 ;;
    esac
}

# Not on top of a package: two owners of the same files would fight.
check_no_package() {
    if command -v dpkg-query >/dev/null 2>&1 &&
        [ "$(dpkg-query -W -f '${db:Status-Status}' nthd 2>/dev/null)" = installed ]; then
        refuse "nthd is installed from a .deb; remove it first (apt-get remove nthd) or upgrade the package"
    fi
    if command -v rpm >/dev/null 2>&1 && rpm -q nthd >/dev/null 2>&1; then
        refuse "nthd is installed from an .rpm; remove it first (rpm -e nthd) or upgrade the package"
    fi
}

# -------------------------------------------------------------------- install
# Sets unitdir, sysusersdir, rulesdir, bin and pkla_path.
choose_dirs() {
    if [ "$prefix" = /usr ]; then
        unitdir=/usr/lib/systemd/system sysusersdir=/usr/lib/sysusers.d rulesdir=/usr/share/polkit-1/rules.d
    else
        unitdir=/etc/systemd/system sysusersdir=/etc/sysusers.d rulesdir=/etc/polkit-1/rules.d
    fi
    bin=$prefix/bin/nthd
    pkla_path=/var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla
}

start_manifest() {
    mkdir -p "$MANIFEST_DIR"
    chmod 755 "$MANIFEST_DIR"
    # A reinstall (upgrade) starts from the old manifest: directories created then are ours.
    if [ -r "$MANIFEST" ]; then grep '^d ' "$MANIFEST" >"$MANIFEST.new" || :; else : >"$MANIFEST.new"; fi
}

# Manifest lines: "d DIR" (a directory we created), "f FILE" (a file we installed).
# mkdirs DIR: mkdir -p, recording each directory that did not exist, outermost first.
mkdirs() {
    [ -d "$1" ] && return 0
    mkdirs "$(dirname "$1")"
    mkdir "$1"
    echo "d $1" >>"$MANIFEST.new"
}
# put MODE SOURCE DEST: atomic (temp file + rename), recorded in the manifest.
put() {
    mkdirs "$(dirname "$3")"
    cp "$2" "$3.nthd-new"
    chmod "$1" "$3.nthd-new"
    chown root:root "$3.nthd-new"
    mv -f "$3.nthd-new" "$3"
    grep -qxF "f $3" "$MANIFEST.new" || echo "f $3" >>"$MANIFEST.new"
}

install_files() {
    put 755 "$here/nthd" "$bin"
    # node-problem-detector's DaemonSet mounts this directory (docs/observability.md).
    put 755 "$here/nthd" "$prefix/libexec/nthd/nthd"
    if [ "$bin" = /usr/bin/nthd ]; then
        put 644 "$here/nthd.service" "$unitdir/$UNIT"
    else
        sed "s|^ExecStart=/usr/bin/nthd |ExecStart=$bin |" "$here/nthd.service" >"$MANIFEST_DIR/$UNIT"
        grep -q "^ExecStart=$bin " "$MANIFEST_DIR/$UNIT" || die "could not point ExecStart= at $bin"
        put 644 "$MANIFEST_DIR/$UNIT" "$unitdir/$UNIT"
        rm -f "$MANIFEST_DIR/$UNIT"
    fi
    put 644 "$here/nthd.sysusers" "$sysusersdir/nthd.conf"
    put 644 "$here/50-nthd.rules" "$rulesdir/50-nthd.rules"
    if [ $pkla = 1 ]; then put 644 "$here/nthd.pkla" "$pkla_path"; fi
    for f in "$here"/man/*.8; do
        [ ! -r "$f" ] || put 644 "$f" "$prefix/share/man/man8/${f##*/}"
    done
    for f in "$here"/nthd-monitor.json "$here"/nthd-karpenter-*.json; do
        [ ! -r "$f" ] || put 644 "$f" "$prefix/share/nthd/node-problem-detector/${f##*/}"
    done
    [ ! -r "$here/completions/nthd.bash" ] || put 644 "$here/completions/nthd.bash" "$prefix/share/bash-completion/completions/nthd"
    [ ! -r "$here/completions/_nthd" ] || put 644 "$here/completions/_nthd" "$prefix/share/zsh/site-functions/_nthd"
    [ ! -r "$here/completions/nthd.fish" ] || put 644 "$here/completions/nthd.fish" "$prefix/share/fish/vendor_completions.d/nthd.fish"
    for f in README.md README.packaging.md LICENSE examples/50-nthd-reboot.rules.example; do
        [ ! -r "$here/$f" ] || put 644 "$here/$f" "$prefix/share/doc/nthd/$f"
    done
    # The pages and pictures the README links to, beside it.
    for f in "$here"/docs/*.md "$here"/docs/*.svg; do
        [ ! -r "$f" ] || put 644 "$f" "$prefix/share/doc/nthd/docs/${f##*/}"
    done
}

# The settings file: an existing one (the admin's, or cloud-init's) is kept; then the
# manifest is complete.
install_settings() {
    cp "$here/nthd.default" "$MANIFEST_DIR/nthd.default"
    if [ -e /etc/default/nthd ]; then
        say "keeping the existing /etc/default/nthd"
        if grep -qx 'f /etc/default/nthd' "$MANIFEST" 2>/dev/null; then echo 'f /etc/default/nthd' >>"$MANIFEST.new"; fi
    else
        put 644 "$here/nthd.default" /etc/default/nthd
    fi
    mv -f "$MANIFEST.new" "$MANIFEST"
}

# The static system user, exactly as the packages create it.
create_user() {
    systemd-sysusers "$sysusersdir/nthd.conf" || die "systemd-sysusers could not create user nthd"
    getent passwd nthd >/dev/null || die "systemd-sysusers did not create user nthd"
    # A foreign account named nthd gets the polkit grant: the one warning, shared by every form.
    # shellcheck source=packaging/warn-uid.sh
    . "$here/warn-uid.sh"
    warn_uid
}

enable_unit() {
    if systemd_running; then
        systemctl daemon-reload
        systemctl enable "$UNIT" >/dev/null 2>&1 || die "systemctl enable $UNIT failed"
        if [ $start = 0 ]; then
            say "installed and enabled (not started: --no-start)"
        else
            if [ $was_active = 1 ]; then systemctl restart "$UNIT"; else systemctl start "$UNIT"; fi ||
                die "nthd did not start: see systemctl status nthd and journalctl -u nthd"
            systemctl is-active --quiet "$UNIT" || die "nthd is not active: see journalctl -u nthd"
            say "installed, enabled and started"
        fi
    else
        systemctl --no-reload enable "$UNIT" >/dev/null 2>&1 || die "systemctl enable $UNIT failed"
        say "installed and enabled; systemd is not running, nthd starts on the next boot"
    fi
}

report() {
    if [ $pkla = 1 ]; then grant=$pkla_path; else grant=$rulesdir/50-nthd.rules; fi
    say "$("$bin" --version 2>/dev/null | head -n1 || echo "nthd ?") at $bin; systemd $sd_version; polkit $polkit_version, grant: $grant"
    say "settings: /etc/default/nthd; self-test: nthd check; remove: $here/install.sh --uninstall"
}

main() {
    parse_args "$@"
    [ "$(id -u)" = 0 ] || refuse "must run as root (try: sudo $0)"
    if [ $mode = uninstall ]; then uninstall; fi
    check_files
    check_arch
    check_systemd
    check_polkit
    check_no_package
    choose_dirs
    start_manifest
    was_active=0
    if systemd_running && systemctl is-active --quiet "$UNIT"; then was_active=1; fi
    install_files
    install_settings
    create_user
    enable_unit
    report
}

main "$@"
