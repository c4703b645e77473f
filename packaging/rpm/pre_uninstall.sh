# %preun for nthd ($1: 0 = erase, 1 = upgrade).
# Stop and disable only on erase; an upgrade is handled by %postun.
if [ "$1" -eq 0 ]; then
    if [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
        systemctl --no-reload disable --now nthd.service >/dev/null 2>&1 || :
    else
        systemctl --no-reload disable nthd.service >/dev/null 2>&1 || :
    fi
    # The settings file is no package's file (%post made it), so rpm would leave it behind.
    # Do what rpm does with a %config file on erase: unedited (the template), it goes;
    # edited, it is kept as .rpmsave, with rpm's own warning.
    settings=/etc/sysconfig/nthd
    # (sha256sum, not cmp: coreutils is on every system, diffutils not on a minimal one.)
    if [ -f "$settings" ] && [ ! -L "$settings" ]; then
        if [ -f /usr/share/nthd/default ] &&
            [ "$(sha256sum <"$settings")" = "$(sha256sum </usr/share/nthd/default)" ]; then
            rm -f "$settings"
        elif mv -f "$settings" "$settings.rpmsave"; then
            echo "warning: $settings saved as $settings.rpmsave" >&2
        fi
    fi
fi
exit 0
