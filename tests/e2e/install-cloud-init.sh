# shellcheck shell=bash
# shellcheck disable=SC2016,SC2015  # single-quoted scripts run inside the container; A && B || fail is meant
# The shipped cloud-init user-data under real cloud-init, sourced by tests/e2e/install.sh, whose
# helpers (boot, dist_artifact, pkg_version) and driver run cloud-init-12 and cloud-init-13.

# cloud-init: NoCloud seed directory, the shipped user-data with only the repository URL
# and the key substituted; target/dist/apt (the signed repository) served by python3 -m
# http.server on 127.0.0.1:8080 inside the container (a unit started before
# cloud-final.service). kubelet: a stand-in unit started as kubeadm's packages start kubelet
# (EnvironmentFile=-/etc/default/kubelet, $KUBELET_EXTRA_ARGS), running before cloud-final, that
# reads the KubeletConfiguration drop-ins only when given --config-dir= (ci_kubelet_files): the
# user-data must enable the directory, restart kubelet and see the lock, or cloud-init fails.
CI_PORT=8080
# The shipped user-data as the user makes it, on stdout: the repo= URL replaced by $1, and
# the key's lines (install.sh's dist_key: target/dist/nthd-TEST-key.asc) in place of the placeholder between
# BEGIN and END; nothing else changed (checked against $SDIR/user-data.diff).
ci_user_data() {
  local ud="$REPO/packaging/cloud-init/user-data.yaml" key
  key="$(dist_key asc)" || fail "no public key in $DIST"
  sed "s|^\\([[:space:]]*\\)repo=REPLACE-WITH-YOUR-REPOSITORY-URL\$|\\1repo=$1|" "$ud" |
    awk -v key="$key" '
      /^ *-----BEGIN PGP PUBLIC KEY BLOCK-----$/ { ind = substr($0, 1, index($0, "-") - 1)
        while ((getline l < key) > 0) print (l == "" ? "" : ind l); skip = 1; next }
      skip { if ($0 ~ /^ *-----END PGP PUBLIC KEY BLOCK-----$/) skip = 0; next }
      { print }' >"$SDIR/user-data"
  diff "$ud" "$SDIR/user-data" >"$SDIR/user-data.diff"
  [[ "$(grep -c '^<' "$SDIR/user-data.diff")" == 2 ]] && grep -q '^< *repo=REPLACE-WITH-YOUR-REPOSITORY-URL$' "$SDIR/user-data.diff" &&
    grep -q '^< *REPLACE THIS LINE' "$SDIR/user-data.diff" ||
    fail "substituting the URL and the key did not change exactly those 2 lines: $(cat "$SDIR/user-data.diff")"
  cat "$SDIR/user-data"
}

# What the user-data did with apt: fetched InRelease and the .deb from the repository
# (the server's log), Signed-By: the key file, which is the release's key byte for byte.
ci_expect_repo_install() {
  local base="$1" v="$2" http key
  key="$(dist_key asc)" || fail "no public key in $DIST"
  http="$(ct_journal -u e2e-http)"
  grep -q 'GET /nthd/apt/dists/stable/InRelease' <<<"$http" || fail "the user-data's apt-get update never fetched $base/apt/dists/stable/InRelease"
  grep -q "GET /nthd/apt/pool/main/n/nthd/nthd_${v}-1_amd64.deb" <<<"$http" || fail "the user-data never downloaded the .deb from $base/apt"
  ct_exec grep -qx "Signed-By: /usr/share/keyrings/nthd-archive-keyring.asc" /etc/apt/sources.list.d/nthd.sources ||
    fail "no Signed-By in /etc/apt/sources.list.d/nthd.sources: $(ct_exec cat /etc/apt/sources.list.d/nthd.sources 2>&1)"
  ct_put "$key" release-key.asc >/dev/null
  ct_exec cmp /usr/share/keyrings/nthd-archive-keyring.asc /e2e/bin/release-key.asc ||
    fail "the user-data's /usr/share/keyrings/nthd-archive-keyring.asc is not $key"
  log "apt: $(ct_exec apt-cache policy nthd | tr -s ' ' | tr '\n' ' ')"
}

# The files the boot binds in: the NoCloud meta-data, ds-identify's and cloud-init's
# settings, and the unit that serves $1/www. Usage: ci_boot_files CIDIR
ci_boot_files() {
  printf 'instance-id: iid-nthd-e2e-%s\nlocal-hostname: nthd-e2e\n' "$$" >"$1/seed/meta-data"
  # ds-identify: find NoCloud (the seed directory) and enable cloud-init; no network
  # configuration (the container has only lo).
  printf 'policy: enabled\ndatasource: NoCloud\n' >"$1/ds-identify.cfg"
  # The minbase tree lacks what a cloud image has, and cloud-init would report errors
  # that have nothing to do with nthd: no OpenSSH (ssh_genkeytypes: [] skips cc_ssh's
  # key generation, a "recoverable error" on 13) and no locales package (locale: false
  # skips cc_locale, whose update-locale fails on 12).
  printf 'datasource_list: [ NoCloud, None ]\nnetwork: {config: disabled}\nssh_genkeytypes: []\nlocale: false\n' >"$1/99-e2e.cfg"
  cat >"$1/e2e-http.service" <<EOF
[Unit]
Description=e2e: serve the nthd packages (the user's release location)
DefaultDependencies=no
[Service]
ExecStart=/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory /e2e/ci/www $CI_PORT
EOF
  printf '[Unit]\nWants=e2e-http.service kubelet.service\nAfter=e2e-http.service kubelet.service\n' >"$1/final.d/50-e2e-http.conf"
}

# kubelet as kubeadm's packages run it, for the user-data to wire: $1/kubelet.service (bound at
# /etc/systemd/system/kubelet.service, started before cloud-final) runs $1/kubelet-standin.sh
# with $KUBELET_EXTRA_ARGS from /etc/default/kubelet. Like kubelet, the stand-in reads
# KubeletConfiguration drop-ins only from --config-dir=DIR; with a shutdownGracePeriod there
# it does what kubelet's GNS does at start (logind drop-in 99-kubelet.conf, SIGHUP to logind)
# and holds the delay lock through nthd-fake-kubelet; without one it runs and holds nothing,
# which is what a kubelet with an unread drop-in does. Usage: ci_kubelet_files CIDIR
ci_kubelet_files() {
  mkdir -p "$SDIR/bin"
  ln -f "$E2E_FAKE_KUBELET" "$SDIR/bin/nthd-fake-kubelet" 2>/dev/null || cp -f "$E2E_FAKE_KUBELET" "$SDIR/bin/nthd-fake-kubelet"
  cat >"$1/kubelet-standin.sh" <<'EOF'
#!/bin/sh
dir=""
for a in "$@"; do case "$a" in --config-dir=*) dir=${a#--config-dir=};; esac; done
g=""
[ -z "$dir" ] || g=$(cat "$dir"/*.conf 2>/dev/null | sed -n 's/^shutdownGracePeriod: *\([0-9]*\)s$/\1/p' | tail -n 1)
echo "kubelet stand-in: args: $*; config-dir: ${dir:-none}; shutdownGracePeriod: ${g:-unset}"
[ -n "$g" ] || exec sleep infinity
mkdir -p /etc/systemd/logind.conf.d
printf '[Login]\nInhibitDelayMaxSec=%s\n' "$g" >/etc/systemd/logind.conf.d/99-kubelet.conf
kill -HUP "$(systemctl show -p MainPID --value systemd-logind)"
exec /e2e/bin/nthd-fake-kubelet --record /e2e/ci/kubelet-standin.jsonl --drain-secs 1
EOF
  chmod 0755 "$1/kubelet-standin.sh"
  printf '[Unit]\nDescription=e2e: kubelet stand-in, started as kubeadm starts kubelet\n[Service]\nEnvironmentFile=-/etc/default/kubelet\nExecStart=/bin/sh /e2e/ci/kubelet-standin.sh $KUBELET_EXTRA_ARGS\n' >"$1/kubelet.service"
}

# What the user-data did with kubelet: --config-dir in /etc/default/kubelet, kubelet restarted
# with it (the stand-in then read the drop-in's 90s), and its own check of the lock passed in
# cloud-init's output. Then the stand-in stops: from here kubelet_start's is kubelet (one lock).
ci_expect_kubelet_wired() {
  step "kubelet wired by the user-data (--config-dir enabled, restarted, checked)"
  ct_exec grep -q -- '^KUBELET_EXTRA_ARGS=.*--config-dir=/etc/kubernetes/kubelet.conf.d' /etc/default/kubelet ||
    fail "the user-data did not enable --config-dir in /etc/default/kubelet: $(ct_exec cat /etc/default/kubelet 2>&1)"
  ct_journal -u kubelet | grep -q 'kubelet stand-in: args: --config-dir=/etc/kubernetes/kubelet.conf.d;.*shutdownGracePeriod: 90$' ||
    fail "kubelet was not restarted with --config-dir and the drop-in's 90s: $(ct_journal -u kubelet | tail -n 3)"
  grep -q 'nthd-verify-kubelet-gns: kubelet holds its delay lock on shutdown; logind InhibitDelayMaxUSec = 90s >= shutdownGracePeriod 90s' \
    "$SDIR/cloud-init-output.log" || fail "the user-data's check of kubelet's lock did not pass (see cloud-init-output.log)"
  log "kubelet: $(ct_exec cat /etc/default/kubelet); $(grep -m1 'nthd-verify-kubelet-gns' "$SDIR/cloud-init-output.log")"
  # From here the harness' own stand-in (kubelet_start) is kubelet: one lock, its drain.
  ct_exec systemctl stop kubelet.service
}

scen_cloud_init() {
  local v base ci seed st rc long
  v="$(pkg_version)"; base="http://127.0.0.1:$CI_PORT/nthd"
  ci="$SDIR/ci"; seed="$ci/seed"; mkdir -p "$seed" "$ci/www/nthd" "$ci/final.d"
  [[ -r "$DIST/apt/dists/stable/InRelease" ]] && dist_key asc >/dev/null ||
    fail "no signed apt repository or key in $DIST: run packaging/build.sh --all-arches --test-key first"
  cp -al "$DIST/apt" "$ci/www/nthd/apt"
  ci_user_data "$base" >"$seed/user-data"
  # The container has no route to Debian's mirror, which the tree's sources.list names, and
  # nthd's dependencies are installed: the user-data's apt-get update sees nthd's repository only.
  : >"$ci/sources.list.empty"
  ci_boot_files "$ci"
  ci_kubelet_files "$ci"
  # cloud-init runs inside the boot (cloud-final is part of multi-user.target).
  E2E_BOOT_TIMEOUT=300 boot --bind-ro="$seed:/var/lib/cloud/seed/nocloud" \
       --bind-ro="$ci/sources.list.empty:/etc/apt/sources.list" \
       --bind-ro="$ci/ds-identify.cfg:/etc/cloud/ds-identify.cfg" \
       --bind-ro="$ci/99-e2e.cfg:/etc/cloud/cloud.cfg.d/99-e2e.cfg" \
       --bind-ro="$ci/e2e-http.service:/etc/systemd/system/e2e-http.service" \
       --bind-ro="$ci/kubelet.service:/etc/systemd/system/kubelet.service" \
       --bind-ro="$ci/final.d:/etc/systemd/system/cloud-final.service.d"
  step "cloud-init status --wait"
  local t0; t0="$(now_ms)"
  st="$(ct_exec timeout 240 cloud-init status --wait --long 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$st" >"$SDIR/cloud-init-status.txt"
  ct_exec cat /var/log/cloud-init-output.log >"$SDIR/cloud-init-output.log" 2>&1 || true
  ct_exec cat /var/log/cloud-init.log >"$SDIR/cloud-init.log" 2>&1 || true
  timing "cloud-init done +$(fmt_ms $(( $(now_ms) - t0 ))) after boot"
  ((rc == 0)) || fail "cloud-init status --wait exited $rc: $(tr '\n' ' ' <<<"$st" | head -c 600); output: $(tail -n 15 "$SDIR/cloud-init-output.log" | tr '\n' ' ')"
  [[ "$st" == *"status: done"* ]] || fail "cloud-init status: $st"
  grep -q 'logind permits power-off .*CanPowerOff = yes for nthd' "$SDIR/cloud-init-output.log" \
    || fail "the user-data's nthd check did not run as nthd with the grant in place (see cloud-init-output.log)"
  long="$(ct_exec cloud-init query v1.platform 2>/dev/null)" || true
  log "cloud-init datasource: ${long:-?}; $(grep -m1 -i 'detail' <<<"$st")"
  step "what the user-data promises"
  ci_expect_repo_install "$base" "$v"
  [[ "$(ct_exec dpkg-query -W -f '${db:Status-Status} ${Version}' nthd)" == "installed $v-1" ]] || fail "nthd .deb not installed by the user-data"
  nthd_active || fail "nthd not active after cloud-init"
  [[ "$(ct_exec systemctl is-enabled nthd)" == enabled ]] || fail "nthd not enabled after cloud-init"
  ct_exec grep -qx 'NTHD_PROVIDER=auto' /etc/default/nthd || fail "the user-data's /etc/default/nthd was not kept (--force-confold)"
  ! ct_exec grep -q '^# Settings for nthd' /etc/default/nthd || fail "/etc/default/nthd is the package's, not the user-data's"
  local gns=/etc/kubernetes/kubelet.conf.d/50-graceful-node-shutdown.conf
  ct_exec grep -qx 'shutdownGracePeriod: 90s' "$gns" && ct_exec grep -qx 'shutdownGracePeriodCriticalPods: 30s' "$gns" \
    && ct_exec grep -qx 'kind: KubeletConfiguration' "$gns" || fail "kubelet GNS drop-in $gns missing or wrong: $(ct_exec cat "$gns" 2>&1)"
  ci_expect_kubelet_wired
  kubelet_start || fail "kubelet stand-in did not take its delay lock"
  mock_start || fail "mock IMDS did not start"
  nthd_configure "NTHD_PROVIDER=aws" "NTHD_IMDS_ENDPOINT=$IMDS" || fail "nthd did not come back after reconfiguration"
  step "nthd check, as the user runs it (sudo -u nthd nthd check)"
  local out; out="$(ct_exec sudo -u nthd nthd check </dev/null 2>&1)" && rc=0 || rc=$?
  printf '%s\n' "$out" >"$SDIR/nthd-check.txt"
  ((rc == 0)) || fail "nthd check exited $rc: $out"
  log "nthd check passed ($(grep -c '✔' <<<"$out") checks ✔)"
  # spot_terminate would start the stand-in and mock again: do the rest here.
  set_notice "$AWS_SPOT" "{\"action\":\"terminate\",\"time\":\"$(iso_in 120)\"}"
  expect_poweroff_through_lock 10 2000
  expect_journal_notice_and_action spot-terminate "$(kubelet_event_ms prepare)"
  expect_one_poweroff_action
}
scen_cloud_init_12() { scen_cloud_init; }
scen_cloud_init_13() { scen_cloud_init; }
