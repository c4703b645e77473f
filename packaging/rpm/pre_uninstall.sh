# %preun for nthd ($1: 0 = erase, 1 = upgrade).
# Stop and disable only on erase; an upgrade is handled by %postun.
if [ "$1" -eq 0 ]; then
    if [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
        systemctl --no-reload disable --now nthd.service >/dev/null 2>&1 || :
    else
        systemctl --no-reload disable nthd.service >/dev/null 2>&1 || :
    fi
fi
exit 0
