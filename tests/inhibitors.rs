//! Block inhibitors on shutdown (a backup agent, a package manager, a desktop session): logind
//! refuses nthd's PowerOff while one is held, in words that change with the systemd version.
//! nthd must name the holder (not blame the polkit rule), never override it, and power off
//! within one retry interval of its release. The real binary against the fake logind, which
//! refuses as each version does.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::{successes, Nthd};

use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

fn spot() -> Response {
    Response::json(
        200,
        r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
    )
}

/// The refusal names the holder of the block inhibitor, and does not blame polkit.
fn check_refusal_is_explained(systemd: u32, log: &str) {
    assert!(
        log.contains(
            "logind refused PowerOff: backup-agent (why: nightly backup, pid 4242, uid 4321, mode \
             block) holds a block inhibitor on shutdown"
        ) && log.contains("nthd never overrides it"),
        "systemd {systemd}: {log}"
    );
    assert!(
        !log.contains("Install the rule") && !log.contains("Install /usr/share/polkit-1"),
        "systemd {systemd}: the polkit rule is blamed for a block inhibitor: {log}"
    );
}

async fn holder_named_then_poweroff_after_release(systemd: u32) {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_systemd_version(systemd);
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    // Another user's lock (logind ignores the caller's own user's block locks).
    let lock = logind.hold_inhibitor(
        "shutdown",
        "backup-agent",
        "nightly backup",
        "block",
        4321,
        4242,
    );
    let n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    // At start: the CanPowerOff answer is explained by the holder, not by polkit.
    assert!(
        n.wait_log(
            "holds a block inhibitor on shutdown",
            Duration::from_secs(5)
        )
        .await,
        "systemd {systemd}: {}",
        n.log()
    );
    imds.set(aws::SPOT_PATH, spot());
    assert!(
        logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(10))
            .await,
        "systemd {systemd}: {}",
        n.log()
    );
    check_refusal_is_explained(systemd, &n.log());
    assert_eq!(successes(&logind, "PowerOff"), 0);

    // Released: the next retry (NTHD_RETRY_DELAY=300ms here) powers off, once.
    let released = Instant::now();
    logind.release_inhibitor(lock);
    assert!(
        logind
            .wait_for_shutdown(Duration::from_secs(5))
            .await
            .is_some(),
        "systemd {systemd}: no power-off after the release: {}",
        n.log()
    );
    let took = released.elapsed();
    assert!(
        took < Duration::from_millis(300 + 1000),
        "systemd {systemd}: power-off {took:?} after the release, more than one retry interval"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(successes(&logind, "PowerOff"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_252_interactive_authentication_required() {
    holder_named_then_poweroff_after_release(252).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_257_access_denied_due_to_active_block_inhibitor() {
    holder_named_then_poweroff_after_release(257).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_258_blocked_by_inhibitor_lock() {
    holder_named_then_poweroff_after_release(258).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_260_can_power_off_inhibitor_blocked() {
    holder_named_then_poweroff_after_release(260).await;
}

/// Without a block inhibitor, a polkit denial is still a polkit denial: the rule is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_polkit_denial_still_names_the_rule() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_power_off_error(Some((
        "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
        "Interactive authentication required.",
    )));
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set(aws::SPOT_PATH, spot());
    let state = tempfile::tempdir().unwrap();
    let n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await
    );
    assert!(
        n.wait_log("50-nthd.rules", Duration::from_secs(3)).await,
        "{}",
        n.log()
    );
    assert!(!n.log().contains("block inhibitor"), "{}", n.log());
}
