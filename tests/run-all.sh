#!/usr/bin/env bash
# The full test suite, as the README gives it and CI runs it (as root, on a fresh Debian 12
# machine of this kind). It installs what it needs, keeps every build and debootstrapped tree
# under target/, and runs:
#   1. cargo fmt --check, shellcheck over every script, clippy -D warnings, the tests (unit, mock
#      IMDS, fake logind) through cargo-nextest, several at once, then the doc tests; and that
#      every host install waits for a held apt/dpkg lock
#   2. every artifact for both architectures (packaging/build.sh --all-arches --test-key: static
#      musl binaries, deb, rpm, tarball, sysext image, lintian, rpmlint, SHA256SUMS, signed with
#      a TEST key; tests/signing-key.sh), the testkit's static binaries (the e2e's mock IMDS and
#      kubelet stand-in, the benchmark's tools), the Packer example through Debian's Packer;
#      the metrics through Debian's promtool and node_exporter
#   3. at once, each in its lane: the previous release's packages; the real-system e2e suite, nthd installed from those
#      artifacts into booted Debian trees with real systemd, dbus, polkit and logind, on cgroup
#      v2 with the unit's IP firewall enforced: every scenario on Debian 12 (but those that need
#      systemd-imdsd); the core set on Debian 11, 13 and sid (with the fault scenarios on 13 and
#      sid, and the drain report, the Auto Scaling completion and IMDS locked by systemd-imdsd
#      on sid); the arm64 package under Debian 12's own systemd (firewall enforced);
#      spot-terminate on an arm64 Debian 12 booted through qemu-user; the installers (tarball,
#      rpm, cloud-init, sysext). Their containers share the machine's scenario slots
#      (tests/e2e/lib.sh). From the suite's start, beside every stage at the lowest CPU
#      priority, the builds that stage 4 needs: the fuzz targets, cargo-deny, the aarch64 tests
#   4. the aarch64 test suite under qemu-user; smoke runs of the benchmark and the fuzzers;
#      cargo-deny
#   5. the 10-minute log budget against a hostile metadata service (in the background from 2.)
# It ends with a table of every stage's time, the whole time, and the margins to the suite's
# budget and to CI's limit (tests/suite-lib.sh): a run over the budget fails.
# Usage: tests/run-all.sh [--quick]   (--quick: stage 1 only)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# shellcheck source=packaging/host-tools.sh
. packaging/host-tools.sh
# shellcheck source=tests/suite-lib.sh
. tests/suite-lib.sh
export CARGO_TERM_COLOR=never
# Disk: the suite's debug builds (x86_64 and aarch64) were 9 and 6 GB with cargo's defaults,
# most of it incremental caches and full debug info nothing here reads. Without incremental
# and with line tables only (backtraces keep file:line), one `cargo test --no-run` is 2.0 GB
# instead of 6.1 GB (docs/testing.md, "Disk").
export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
quick=0

# Prerequisites you install yourself (README "Prerequisites"): fail at once, naming them.
check_prerequisites() {
    local missing=() rust_version rust_major rust_minor
    missing=()
    if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
        if [ -x "$HOME/.cargo/bin/cargo" ]; then
            missing+=("cargo is not on PATH; add rustup's: . \"\$HOME/.cargo/env\"")
        else
            missing+=("Rust >= 1.85 (cargo, rustc) through rustup: curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$HOME/.cargo/env\"")
        fi
    else
        rust_version=$(rustc --version | awk '{print $2}')
        IFS=. read -r rust_major rust_minor _ <<<"$rust_version"
        if [ "$rust_major" -lt 1 ] || { [ "$rust_major" = 1 ] && [ "$rust_minor" -lt 85 ]; }; then
            missing+=("Rust >= 1.85; $(command -v rustc) is $rust_version (Debian 12's own is 1.63): install rustup (https://rustup.rs) or run: rustup update stable")
        fi
    fi
    command -v gcc >/dev/null 2>&1 || missing+=("gcc (the linker cargo uses): apt-get install gcc")
    command -v python3 >/dev/null 2>&1 || missing+=("python3 (packaging/build.sh): apt-get install python3")
    if [ ${#missing[@]} -gt 0 ]; then
        echo "run-all.sh: missing prerequisites:" >&2
        printf '  - %s\n' "${missing[@]}" >&2
        exit 1
    fi
}

# System packages the tests use (dbus-daemon for the fake logind, pip for botocore (tests/asg.rs
# installs it into target/asg-python to check nthd's SigV4 signatures), debootstrap and
# systemd-nspawn for the real-system suite, the linters for the packages).
install_packages() {
    local need=() pair
    need=()
    for pair in dbus-daemon:dbus debootstrap:debootstrap systemd-nspawn:systemd-container \
                ip:iproute2 curl:curl lintian:lintian rpmlint:rpmlint rpm:rpm busctl:systemd \
                dpkg-parsechangelog:dpkg-dev readelf:binutils mksquashfs:squashfs-tools \
                qemu-aarch64-static:qemu-user-static packer:packer musl-gcc:musl-tools pip3:python3-pip \
                aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu shellcheck:shellcheck; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
    done
    if [ ${#need[@]} -gt 0 ]; then
        echo "==> installing ${need[*]}"
        if ! apt_install "${need[@]}" >/dev/null; then
            echo "run-all.sh: could not install ${need[*]}; install them (apt-get install ${need[*]}) and rerun" >&2
            exit 1
        fi
    fi
}

# A fresh clone's run uses about 12.6 GB (12 GB of target/ and fuzz/target/, 0.6 GB of CARGO_HOME;
# a rerun reuses them): stop now, naming the need, rather than in stage 5 of 20.
check_disk() {
    local min_free_gb
    min_free_gb=${NTHD_SUITE_MIN_FREE_GB:-13}
    if [ "$quick" = 0 ] && [ "$(disk_free_gb)" -lt "$min_free_gb" ]; then
        echo "run-all.sh: $(disk_free_gb) GB free on $(df -P . | awk 'NR == 2 { print $6 }'), the suite needs about $min_free_gb GB:" \
            "free some (an old target/ of another checkout: cargo clean; rm -rf target/e2e/runs*)" \
            "or set NTHD_SUITE_MIN_FREE_GB to go on anyway" >&2
        exit 1
    fi
}

# Every shell script in the tree, held to shellcheck like the Rust to clippy: the tracked *.sh,
# .ci/run and the Debian maintainer scripts; the rpm scriptlets are sh fragments without a
# shebang. (The bash completion is generated by clap and not ours to lint.)
shellcheck_all() {
    git ls-files -z '*.sh' ':!packaging/rpm/*.sh' .ci/run packaging/debian/postinst \
        packaging/debian/postrm packaging/debian/prerm | xargs -0 shellcheck -x &&
        shellcheck -x -s sh packaging/rpm/*.sh &&
        bash tests/shell-functions.sh --self-test && bash tests/shell-functions.sh &&
        bash tests/suite-lib.sh --self-test
}
# The workspace lints (Cargo.toml [workspace.lints]) for nthd and the testkit, and their copy in
# the fuzz crate, a workspace of its own.
clippy_all() {
    cargo clippy --workspace --all-targets -- -D warnings &&
        cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
}
# The 10-minute log budget (tests/log_budget.rs: a hostile metadata service at 1 poll/s) needs
# wall time, not CPU: it runs in the background while the stages below use the machine.
log_budget_start() {
    local bin
    bin=$(cargo test --test log_budget --no-run 2>&1 | grep -o 'target/debug/deps/log_budget-[0-9a-f]*' | tail -n 1)
    [ -x "$bin" ] || { echo "run-all.sh: cannot find the log_budget test binary" >&2; return 1; }
    "$bin" --ignored --nocapture >target/log-budget.log 2>&1 &
    log_budget_pid=$!
}
log_budget_wait() {
    wait "$log_budget_pid"
    local rc=$?
    grep -E '^(aws|azure): [0-9]+ lines|test result' target/log-budget.log
    [ $rc = 0 ] || tail -n 40 target/log-budget.log
    return $rc
}
# Signed with a TEST key (nthd-TEST-key.asc, expires within a day): the suite is no release.
# tests/signing-key.sh holds build.sh to that: the refusal without a key, a killed build
# leaving no secret, the TEST key's name and expiry after the build.
artifacts_all() {
    bash tests/signing-key.sh --refusal && bash tests/signing-key.sh --killed &&
        bash packaging/build.sh --all-arches --test-key && bash tests/signing-key.sh --artifacts
}

# The tests through cargo-nextest, each in a process of its own, several at once
# (.config/nextest.toml, profile ci: no retries), then the doc tests, which nextest does not run.
tests_all() {
    nextest_tool || return 1
    cargo nextest run --workspace --profile ci && cargo test --workspace --doc
}

# The testkit's binaries, static, built once: the e2e's mock IMDS and kubelet stand-in (inside
# every tree, whatever its glibc) and the benchmark's tools. Every later stage is given these
# paths, so none of them runs cargo on target/ while the builds of stage 4 go on beside them.
TESTKIT_DIR=target/$(uname -m)-unknown-linux-musl/release
testkit_static() {
    cargo build --locked --release --target "$(uname -m)-unknown-linux-musl" -p nthd-testkit --bins &&
        export E2E_MOCK_IMDS=$PWD/$TESTKIT_DIR/nthd-mock-imds E2E_FAKE_KUBELET=$PWD/$TESTKIT_DIR/nthd-fake-kubelet
}

# Stage 1, all that --quick runs.
stages_quick() {
    stage "cargo fmt --check" cargo fmt --all -- --check
    stage "shellcheck, no shell function over 60 lines, top-level code within 20, the budget check's self-test" shellcheck_all
    stage "cargo clippy, the workspace lints (nthd, testkit, fuzz)" clippy_all
    stage "cargo test: cargo nextest run, then the doc tests" tests_all
}

# Stage 2 (the log budget starts in the background first).
stages_artifacts() {
    log_budget_pid=""
    log_budget_start
    stage "host installs wait for a held apt/dpkg lock (packaging/host-tools.sh)" bash tests/host-tools.sh
    stage "artifacts, x86_64 and aarch64 (deb, rpm, tarball, sysext, lint), signed with a TEST key" \
        artifacts_all
    stage "the testkit's static binaries (e2e, installers, benchmark)" testkit_static
    stage "packer validate (Debian's Packer 1.6.6)" bash packaging/ami/validate.sh
    stage "metrics through promtool and node_exporter, the documented alert rules" bash tests/metrics-tools.sh
    stage "the pictures in docs/, rendered by headless Chromium" bash tests/pictures.sh
}

# What stage 4 builds, from the suite's start at the lowest CPU priority: it takes the CPU that
# the tests, the signing and the e2e lanes leave idle while they wait. None of it shares a cargo
# build directory with the stages in front (the fuzz targets have fuzz/target, cargo-deny a
# directory of its own, the aarch64 tests target/arm64-build), so no stage waits for its lock.
ARM64_TARGET_DIR=target/arm64-build
later_builds() {
    nice -n 19 bash fuzz/run.sh --build-only && nice -n 19 bash tests/deny.sh --install-only &&
        CARGO_TARGET_DIR=$ARM64_TARGET_DIR nice -n 19 bash tests/arm64.sh build
}

start_later_builds() {
    background "builds for stage 4, from the start at the lowest CPU priority: fuzz targets, cargo-deny, aarch64 tests" \
        later_builds
}

# Stage 3: every lane at once; each scenario takes one of the machine's slots (tests/e2e/lib.sh).
stages_e2e() {
    local core=(spot-terminate no-action-defaults polkit-denied-then-restored scoped-grant check)
    local faults=(logind-restart polkitd-restart upgrade-while-deferred neighbour block-inhibitor
                  sighup-and-restart bad-setting azure-restart-mid-drain shutdown-cancelled)
    # The upgrade scenarios start from the previous release, built once from its own commit
    # while the trees are debootstrapped; the scenarios that need it wait for it, no others.
    lane "previous release's packages (tests/e2e/previous-release)" bash tests/e2e/previous-release.sh
    lane "real-system e2e, Debian 12 (systemd 252), every scenario but the systemd-imdsd ones" \
        bash tests/e2e/run.sh
    # Debian sid: the newest systemd (262 when written), which boots only on cgroup v2.
    lane "real-system e2e, Debian sid (newest systemd), core set, block inhibitor, faults, drain report, IMDS locked by systemd-imdsd" \
        env E2E_SUITE=sid bash tests/e2e/run.sh "${core[@]}" "${faults[@]}" typo-and-locked-settings \
        drain-report drain-budget drain-lock-cost asg-complete imds-locked imds-locked-azure imds-locked-no-grant
    lane "installers: tarball, rpm, cloud-init, sysext, signed apt and dnf repositories on booted Debian 11, 12, 13" \
        bash tests/e2e/install.sh
    # Debian 13: the core set, the faults, and what systemd 257 says in its own words.
    lane "real-system e2e, Debian 13 (systemd 257), core set and faults" \
        env E2E_SUITE=trixie bash tests/e2e/run.sh "${core[@]}" "${faults[@]}"
    lane "real-system e2e, Debian 11 (systemd 247, polkit 0.105), core set" \
        env E2E_SUITE=bullseye bash tests/e2e/run.sh "${core[@]}"
    # The arm64 .deb under Debian 12's native systemd, which enforces the unit's firewall (the
    # arm64 tree's emulated systemd cannot: qemu-user has no bpf()).
    lane "real-system e2e, arm64 nthd under Debian 12's systemd, firewall enforced" \
        env E2E_NTHD_ARCH=arm64 bash tests/e2e/run.sh spot-terminate tencent-auto sandbox-imds
    lane "real-system e2e, arm64 Debian 12 under qemu-user, spot-terminate" \
        env E2E_ARCH=arm64 bash tests/e2e/run.sh spot-terminate
    lanes_wait "stage 3: the e2e lanes, at once"
}

# Stages 4 and 5.
stages_rest() {
    background_wait
    stage "aarch64 test suite under qemu-user" env CARGO_TARGET_DIR=$ARM64_TARGET_DIR bash tests/arm64.sh run
    stage "benchmark smoke (the static nthd, as packaged)" bash bench/run.sh --smoke --bin-dir "$TESTKIT_DIR"
    stage "fuzz smoke" bash fuzz/run.sh --smoke --jobs 2
    stage "cargo deny" bash tests/deny.sh
    if [ -n "$log_budget_pid" ]; then
        stage "log budget, 10 min of a hostile IMDS (ran in the background)" log_budget_wait
    else
        stage "log budget, 10 min of a hostile IMDS (ran in the background)" false  # it never started
    fi
}

main() {
    [ "${1:-}" = "--quick" ] && quick=1
    check_prerequisites
    install_packages
    check_disk
    [ $quick = 1 ] || start_later_builds
    stages_quick
    if [ $quick = 0 ]; then
        stages_artifacts
        stages_e2e
        stages_rest
    fi
    suite_summary
}

main "$@"
