# %posttrans for nthd: runs once, at the end of the transaction, after the erase of the
# package this one replaced.
# 0.1.0 owned /etc/sysconfig/nthd as %config(noreplace), and this package does not: the
# erase of 0.1.0 (after our %post) removed the file, or renamed it to .rpmsave when it was
# edited. Put back the copy %post kept and drop the .rpmsave that is that same file. Then
# start the daemon %post stopped (on an upgrade from 0.1.0 only), now with its settings.
settings=/etc/sysconfig/nthd
state=/var/lib/rpm-state/nthd
kept=$state/sysconfig
if [ -e "$kept" ] || [ -L "$kept" ]; then
    if [ ! -e "$settings" ] && [ ! -L "$settings" ]; then
        if cp -pP "$kept" "$settings.rpm-tmp" && mv -f "$settings.rpm-tmp" "$settings"; then
            if [ -f "$settings.rpmsave" ] && [ -f "$settings" ] &&
                [ "$(sha256sum <"$settings.rpmsave")" = "$(sha256sum <"$settings")" ]; then
                rm -f "$settings.rpmsave"
            fi
            echo "nthd: $settings kept as it was (the erase of the older package had taken it away)"
        fi
    fi
fi
if [ -e "$state/was-active" ] && [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
    systemctl start nthd.service >/dev/null 2>&1 || :
fi
rm -rf "$state"
exit 0
