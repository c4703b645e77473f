# shellcheck shell=sh
# The one warning every package form gives about user nthd, sourced by the Debian postinst,
# the rpm %post (from /usr/share/nthd/warn-uid.sh) and the tarball installer (beside it).
# POSIX sh; defines warn_uid and runs nothing.
#
# The polkit rule grants power-off to whoever is named nthd. sysusers and useradd never change
# an existing user, so an older account of that name (a person's, uid above SYS_UID_MAX) would
# receive the grant: say so loudly. `nthd check` fails on it too.
warn_uid() {
    nthd_uid=$(getent passwd nthd | cut -d: -f3)
    sys_uid_max=$(awk '$1 == "SYS_UID_MAX" { print $2 }' /etc/login.defs 2>/dev/null)
    if [ -n "$nthd_uid" ] && [ "$nthd_uid" -gt "${sys_uid_max:-999}" ]; then
        echo "nthd: WARNING: user nthd (uid $nthd_uid) is not a system user (SYS_UID_MAX ${sys_uid_max:-999})," >&2
        echo "nthd: WARNING: yet the polkit rule grants it power-off. If the account is not nthd's own," >&2
        echo "nthd: WARNING: remove or rename it, then run: systemd-sysusers nthd.conf" >&2
    fi
    return 0
}
