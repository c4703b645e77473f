# %postun for nthd ($1: 0 = erase, 1 = upgrade).
# The "nthd" user and /var/lib/nthd are kept on erase (RPM has no purge;
# files owned by the uid may remain).
if [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ] && [ ! -e /var/lib/rpm-state/nthd/restarted ]; then
        # Upgrade: run the new binary if the daemon was running, unless the new package's %post
        # has done so already (it leaves /var/lib/rpm-state/nthd/restarted: 0.2.0 on; not 0.1.0,
        # whose upgrade stops nthd until %posttrans).
        systemctl try-restart nthd.service >/dev/null 2>&1 || :
    fi
fi
exit 0
