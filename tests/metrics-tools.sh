#!/usr/bin/env bash
# nthd's metrics, read by the real Prometheus tools from Debian (packages `prometheus` for
# promtool and `prometheus-node-exporter`):
#   1. nthd runs against the mock IMDS with a spot notice listed (dry run: no logind needed),
#      writing the textfile and serving /metrics;
#   2. `promtool check metrics` passes on the textfile and on /metrics;
#   3. node_exporter's textfile collector reads the file: node_textfile_scrape_error is 0, and
#      nthd's series appear in node_exporter's /metrics with their types;
#   4. the alert rules in docs/observability.md pass `promtool check rules` and `promtool test rules`
#      (tests/prometheus/nthd-alerts.test.yml).
# Usage: tests/metrics-tools.sh   (as root on Debian, or with both packages installed)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh
install_tools() {
    local need=()
    need=()
    command -v promtool >/dev/null || need+=(prometheus)
    command -v prometheus-node-exporter >/dev/null || need+=(prometheus-node-exporter)
    if [ ${#need[@]} -gt 0 ]; then
        echo "metrics-tools.sh: installing ${need[*]}"
        # No recommends, and the services are not started: only the binaries are used.
        apt_install --no-install-recommends "${need[@]}" >/dev/null
    fi
    echo "promtool: $(promtool --version 2>&1 | head -n 1)"
    echo "node_exporter: $(prometheus-node-exporter --version 2>&1 | head -n 1)"
}

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fail() { echo "metrics-tools.sh: FAIL: $*" >&2; exit 1; }
wait_for() { # wait_for SECONDS COMMAND...
    local end=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || return 1
        sleep 0.2
    done
}
# 1. nthd with a notice listed; sets listen_port.
start_nthd() {
    local imds_port
    imds_port=$(free_port)
    cat >"$work/routes.json" <<'EOF'
{"/latest/meta-data/spot/instance-action":
  {"status": 200, "body": "{\"action\":\"terminate\",\"time\":\"2099-01-01T00:00:00Z\"}"}}
EOF
    "$target/debug/nthd-mock-imds" --listen "127.0.0.1:$imds_port" --routes "$work/routes.json" --quiet \
        2>"$work/imds.log" &
    pids+=($!)
    mkdir -p "$work/textfile" "$work/state"
    listen_port=$(free_port)
    env -i PATH="$PATH" NTHD_SETTINGS_FILE=none NTHD_LOG_TARGET=stderr NTHD_PROVIDER=aws \
        NTHD_IMDS_ENDPOINT="http://127.0.0.1:$imds_port" NTHD_POLL_INTERVAL=200ms NTHD_DRY_RUN=true \
        NTHD_STATE_DIR="$work/state" NTHD_METRICS_TEXTFILE="$work/textfile/nthd.prom" \
        NTHD_METRICS_LISTEN="127.0.0.1:$listen_port" DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent \
        "$target/debug/nthd" run 2>"$work/nthd.log" &
    pids+=($!)
    # The dry-run action is counted once the notice is seen: the file then has every series.
    wait_for 20 grep -q '^nthd_actions_total{.*result="dry_run"} 1' "$work/textfile/nthd.prom" \
        || { cat "$work/nthd.log" >&2; fail "nthd never wrote the dry-run action to the textfile"; }
    cp "$work/textfile/nthd.prom" "$work/textfile.copy"
}

# 2. promtool on the textfile and on /metrics.
check_promtool() {
    promtool check metrics <"$work/textfile.copy" || fail "promtool check metrics rejects the textfile"
    curl -fsS "http://127.0.0.1:$listen_port/metrics" >"$work/endpoint.txt"
    promtool check metrics <"$work/endpoint.txt" || fail "promtool check metrics rejects /metrics"
    echo "promtool check metrics: textfile ($(grep -vc '^#' "$work/textfile.copy") samples) and /metrics pass"
}

# 3. node_exporter's textfile collector.
check_node_exporter() {
    local ne_port want
    ne_port=$(free_port)
    prometheus-node-exporter --collector.disable-defaults --collector.textfile \
        --collector.textfile.directory="$work/textfile" --web.listen-address="127.0.0.1:$ne_port" \
        2>"$work/node_exporter.log" &
    pids+=($!)
    wait_for 10 curl -fsS "http://127.0.0.1:$ne_port/metrics" || fail "node_exporter did not start"
    curl -fsS "http://127.0.0.1:$ne_port/metrics" >"$work/ne.txt"
    grep -qx 'node_textfile_scrape_error 0' "$work/ne.txt" \
        || { grep textfile "$work/ne.txt" "$work/node_exporter.log" >&2; fail "node_textfile_scrape_error is not 0"; }
    for want in '# TYPE nthd_actions_total counter' '# TYPE nthd_imds_reads_total counter' \
                '# TYPE nthd_termination_imminent gauge' 'nthd_termination_imminent{provider="aws"} 1' \
                'nthd_termination_deadline_timestamp_seconds{provider="aws"} 4.0709088e+09'; do
        grep -qF "$want" "$work/ne.txt" || { grep nthd "$work/ne.txt" >&2; fail "node_exporter's /metrics lacks: $want"; }
    done
    echo "node_exporter: node_textfile_scrape_error 0, $(grep -c '^nthd_' "$work/ne.txt") nthd samples, typed"
}

# 4. The alert rules in docs/observability.md.
check_alert_rules() {
    awk '/<!-- alert-rules:begin -->/{on=1; next} /<!-- alert-rules:end -->/{on=0} on' docs/observability.md \
        | sed '/^```/d' >"$work/nthd-alerts.yml"
    [ -s "$work/nthd-alerts.yml" ] || fail "no alert rules between the alert-rules markers in docs/observability.md"
    cp tests/prometheus/nthd-alerts.test.yml "$work/"
    promtool check rules "$work/nthd-alerts.yml" || fail "promtool check rules rejects the rules in docs/observability.md"
    (cd "$work" && promtool test rules nthd-alerts.test.yml) || fail "promtool test rules"
    echo "metrics-tools.sh: all checks pass"
}

main() {
    install_tools
    cargo build -q --bin nthd
    cargo build -q -p nthd-testkit --bin nthd-mock-imds
    target=${CARGO_TARGET_DIR:-target}
    work=$(mktemp -d)
    pids=()
    trap cleanup EXIT
    start_nthd
    check_promtool
    check_node_exporter
    check_alert_rules
}

main "$@"
