# %pre for nthd ($1: 1 = first install, 2 = upgrade).
# Create the static system user "nthd" before the files are laid down, so
# that /var/lib/nthd and the polkit rule can refer to it. The sysusers line
# below must stay identical to systemd/nthd.sysusers (packaging/build.sh
# checks this); the same file is installed as /usr/lib/sysusers.d/nthd.conf.
# useradd is the fallback for a systemd-sysusers without --replace (< 238).
if command -v systemd-sysusers >/dev/null 2>&1 &&
    systemd-sysusers --replace=/usr/lib/sysusers.d/nthd.conf - <<'SYSUSERS'
u     nthd -  "nthd node termination handler" /var/lib/nthd  /usr/sbin/nologin
SYSUSERS
then
    :
else
    getent group nthd >/dev/null || groupadd -r nthd || exit 1
    getent passwd nthd >/dev/null ||
        useradd -r -g nthd -d /var/lib/nthd -M -s /usr/sbin/nologin \
            -c "nthd node termination handler" nthd || exit 1
fi
# The polkit rule grants power-off to whoever is named nthd. sysusers and useradd never change an
# existing user, so an older account of that name (a person's, uid above SYS_UID_MAX) would
# receive the grant: say so loudly. `nthd check` fails on it too.
nthd_uid=$(getent passwd nthd | cut -d: -f3)
sys_uid_max=$(awk '$1 == "SYS_UID_MAX" { print $2 }' /etc/login.defs 2>/dev/null)
if [ -n "$nthd_uid" ] && [ "$nthd_uid" -gt "${sys_uid_max:-999}" ]; then
    echo "nthd: WARNING: user nthd (uid $nthd_uid) is not a system user (SYS_UID_MAX ${sys_uid_max:-999})," >&2
    echo "nthd: WARNING: yet the polkit rule grants it power-off. If the account is not nthd's own," >&2
    echo "nthd: WARNING: remove or rename it, then run: systemd-sysusers nthd.conf" >&2
fi
exit 0
