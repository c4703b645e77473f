# %pre for nthd ($1: 1 = first install, 2 = upgrade).
# Create the static system user "nthd" before the files are laid down, so
# that /var/lib/nthd and the polkit rule can refer to it. The sysusers line
# below must stay identical to systemd/nthd.sysusers (packaging/build.sh
# checks this); the same file is installed as /usr/lib/sysusers.d/nthd.conf.
# useradd is the fallback for a systemd-sysusers without --replace (< 238).
create_user() {
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
}

# Upgrade: is the nthd being replaced 0.1.0? It owned /etc/sysconfig/nthd as
# %config(noreplace), and its erase later in this transaction takes the file away (or renames it
# to .rpmsave): only then must %post stop nthd until %posttrans has put the settings back.
# Every other upgrade keeps nthd running (%post restarts it once, on the new binary), so a long
# transaction never leaves the node unprotected. Asked here, before this package is in the rpm
# database, and remembered for %post under /var/lib/rpm-state/nthd (timeout: a query from
# inside a transaction must never hold it up). When rpm cannot say, 0.1.0 is told by its
# files: it is the only release without /usr/share/nthd/default.
# $1: as the scriptlet's.
remember_old_version() {
    state=/var/lib/rpm-state/nthd
    rm -f "$state/stop-until-posttrans" "$state/restarted"
    if [ "$1" -ge 2 ]; then
        old=$(timeout 30 rpm -q --qf '%{VERSION}\n' nthd 2>/dev/null) || old=""
        if [ -z "$old" ] && [ ! -e /usr/share/nthd/default ]; then
            old=0.1.0
            echo "nthd: rpm -q nthd did not name the installed version; without /usr/share/nthd/default it is 0.1.0" >&2
        fi
        if printf '%s\n' "$old" | grep -qx '0\.1\.0'; then
            mkdir -p "$state" && echo "$old" >"$state/stop-until-posttrans" ||
                echo "nthd: could not write $state/stop-until-posttrans (is /var/lib writable?): nthd keeps running through the upgrade; afterwards check /etc/sysconfig/nthd (0.1.0's erase may leave it as .rpmsave) and run: systemctl restart nthd" >&2
        fi
    fi
}

main() {
    create_user
    remember_old_version "$1"
    exit 0
}

main "$@"
