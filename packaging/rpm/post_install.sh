# %post for nthd ($1: 1 = first install, 2 = upgrade).
# systemd is "running" only if it is PID 1 here and we were not told to stay
# offline: in a chroot (image builders) or with SYSTEMD_OFFLINE=1 (e.g.
# Packer on a live builder instance) the unit is enabled but not started.
running=0
if [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
    running=1
fi
if [ "$running" = 1 ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
fi
if [ "$1" -eq 1 ]; then
    # First install: enable (works offline too), then start if we can.
    # Upgrades keep whatever the admin chose.
    systemctl --no-reload enable nthd.service >/dev/null 2>&1 || :
    if [ "$running" = 1 ]; then
        systemctl start nthd.service >/dev/null 2>&1 || :
    fi
fi
exit 0
