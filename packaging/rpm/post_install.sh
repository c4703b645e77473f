# %post for nthd ($1: 1 = first install, 2 = upgrade).
# systemd is "running" only if it is PID 1 here and we were not told to stay
# offline: in a chroot (image builders) or with SYSTEMD_OFFLINE=1 (e.g.
# Packer on a live builder instance) the unit is enabled but not started.
# Sets running; reloads systemd when it runs.
check_systemd() {
    running=0
    if [ -d /run/systemd/system ] && [ "${SYSTEMD_OFFLINE:-0}" != 1 ]; then
        running=1
    fi
    if [ "$running" = 1 ]; then
        systemctl daemon-reload >/dev/null 2>&1 || :
    fi
}

# The settings file: the template when there is none, never over an admin's file. No package
# owns it (the template ships as /usr/share/nthd/default), so no upgrade leaves an .rpmnew
# beside it, whatever the new template says.
# $1: as the scriptlet's.
settings_file() {
    settings=/etc/sysconfig/nthd
    if [ -e "$settings" ] || [ -L "$settings" ]; then
        # 0.1.0 owned the file as %config(noreplace): on an upgrade from it, the erase of 0.1.0
        # later in this transaction removes the file (unedited) or renames it to .rpmsave
        # (edited). Keep a copy; %posttrans puts it back.
        if [ "$1" -ge 2 ] && mkdir -p /var/lib/rpm-state/nthd; then
            cp -pP "$settings" /var/lib/rpm-state/nthd/sysconfig
        fi
    elif mkdir -p /etc/sysconfig && cp /usr/share/nthd/default "$settings.rpm-tmp"; then
        chmod 0644 "$settings.rpm-tmp"
        mv -f "$settings.rpm-tmp" "$settings"
    fi
}

# $1: as the scriptlet's.
restart_on_upgrade() {
    state=/var/lib/rpm-state/nthd
    if [ "$1" -ge 2 ] && [ -e "$state/stop-until-posttrans" ]; then
        # Upgrade from 0.1.0 (%pre left stop-until-posttrans): stop the running daemon now and start
        # it again in %posttrans, once the settings are back. In between, the erase of 0.1.0 takes
        # the settings file away (it owned it as %config) and its %postun would restart nthd without
        # it: with the default actions and safety margin, which could power off early or for a
        # notice the admin set to log.
        if [ "$running" = 1 ] && systemctl is-active --quiet nthd.service && : >"$state/was-active"; then
            systemctl stop nthd.service >/dev/null 2>&1 || :
        fi
    elif [ "$1" -ge 2 ] && [ "$running" = 1 ]; then
        # Any other upgrade: restart now, onto the binary just installed, so nthd is down for one
        # restart only. Not left to the old package's %postun: rpm may erase the old package (and
        # run its %postun) only after every other package of the transaction, minutes later. The
        # mark tells that %postun (0.2.0 on) not to restart it a second time; %posttrans removes it.
        systemctl try-restart nthd.service >/dev/null 2>&1 || :
        if mkdir -p "$state"; then : >"$state/restarted"; fi
    fi
}

# $1: as the scriptlet's.
enable_on_first_install() {
    if [ "$1" -eq 1 ]; then
        # First install: enable (works offline too), then start if we can.
        # Upgrades keep whatever the admin chose.
        systemctl --no-reload enable nthd.service >/dev/null 2>&1 || :
        if [ "$running" = 1 ]; then
            systemctl start nthd.service >/dev/null 2>&1 || :
        fi
    fi
}

main() {
    # A foreign account named nthd gets the polkit grant: the one warning, shared by every form
    # (here, not in %pre: the file is laid down by now). A missing file (a path excluded from
    # the install) must not end %post before nthd is enabled: `.` of a missing file exits sh.
    if [ -r /usr/share/nthd/warn-uid.sh ]; then
        # shellcheck source=packaging/warn-uid.sh
        . /usr/share/nthd/warn-uid.sh && warn_uid
    fi
    check_systemd
    settings_file "$1"
    restart_on_upgrade "$1"
    enable_on_first_install "$1"
    exit 0
}

main "$@"
