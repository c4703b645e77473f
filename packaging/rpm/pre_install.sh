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
exit 0
