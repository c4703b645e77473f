//! The unit's IP sandbox named as the cause (issue 21): under `IPAddressDeny=any` a TCP connect
//! to a denied address is not refused, the SYN is dropped and the connect times out. A request
//! to an address the unit's lists drop must name the unit's allow-list and the drop-in, never
//! "slow or throttling".
//!
//! No real BPF filter here: the addresses are made to time out by a listener that never
//! answers (the kernel completes the handshake into its backlog, nobody reads the request), and
//! the lists come either injected (`ClientOptions::sandbox`, `WebhookOptions::sandbox`) or from
//! a fake systemd on a private bus, read by the real binary.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use common::Nthd;
use nthd::testing::imds::{ClientOptions, ImdsClient, ImdsError};
use nthd::testing::provider::Provider;
use nthd::testing::sandbox::IpPolicy;
use nthd::testing::webhook::{parse_url, probe, ProbeOutcome, WebhookOptions};
use nthd_testkit::imds::MockImds;
use nthd_testkit::logind::{FakeLogind, PrivateBus};
use nthd_testkit::systemd::FakeSystemd;

/// The packaged unit's lists.
fn packaged() -> Arc<IpPolicy> {
    Arc::new(
        IpPolicy::parse(
            "nthd.service",
            "any",
            "169.254.169.254 fd00:ec2::254 100.100.100.200 169.254.0.23",
        )
        .unwrap(),
    )
}

/// A listener that never answers: connections complete into its backlog, requests get no
/// answer and time out, as they do (at connect) in a unit that drops the address.
fn silent(ip: &str) -> (TcpListener, String) {
    let l = TcpListener::bind((ip, 0)).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

fn read_once(base: &str, sandbox: Option<Arc<IpPolicy>>) -> ImdsError {
    let client = ImdsClient::new(
        base,
        ClientOptions {
            request_timeout: Duration::from_millis(300),
            connect_timeout: Duration::from_millis(300),
            sandbox,
            ..ClientOptions::default()
        },
    )
    .unwrap();
    let mut p = common::provider::tencent(client, Duration::from_millis(50));
    let mut obs = p.observe();
    assert!(obs.fresh.is_empty(), "the silent listener answered");
    obs.errors.remove(0).error
}

#[test]
fn a_timeout_to_a_blocked_address_names_the_allow_list_and_the_drop_in() {
    let (_l, base) = silent("127.0.0.1");
    let e = read_once(&base, Some(packaged()));
    assert!(matches!(e, ImdsError::BlockedBySandbox { .. }), "{e:?}");
    let s = e.to_string();
    for want in [
        base.as_str(),
        "the unit nthd.service's IP allow-list blocks 127.0.0.1",
        "IPAddressDeny=any",
        "systemctl edit nthd.service",
        "IPAddressAllow=127.0.0.1",
        "/etc/systemd/system/nthd.service.d/allow.conf",
        "systemctl restart nthd.service",
    ] {
        assert!(s.contains(want), "{want:?} not in {s}");
    }
    assert!(!s.contains("slow or throttling"), "{s}");
}

#[test]
fn a_refused_connection_to_a_blocked_address_is_blamed_on_the_allow_list_too() {
    let base = format!("http://127.0.0.1:{}", common::free_port());
    let e = read_once(&base, Some(packaged()));
    assert!(matches!(e, ImdsError::BlockedBySandbox { .. }), "{e:?}");
    assert!(e.to_string().contains("IPAddressAllow=127.0.0.1"), "{e}");
}

#[test]
fn an_allowed_address_keeps_the_timeout_message() {
    let (_l, base) = silent("127.0.0.1");
    let allowed = IpPolicy::parse("nthd.service", "any", "localhost").unwrap();
    for sandbox in [Some(Arc::new(allowed)), None] {
        let e = read_once(&base, sandbox.clone());
        assert!(matches!(e, ImdsError::Timeout { .. }), "{sandbox:?}: {e:?}");
        let s = e.to_string();
        assert!(
            s.contains("slow or throttling") && !s.contains("IPAddressAllow="),
            "{s}"
        );
    }
}

#[tokio::test]
async fn a_blocked_webhook_receiver_is_named_with_its_address_and_the_drop_in() {
    let (_l, url) = silent("127.0.0.1");
    let opts = |sandbox| WebhookOptions {
        urls: vec![parse_url(&format!("{url}/events")).unwrap()],
        connect_timeout: Duration::from_millis(300),
        attempt_timeout: Duration::from_millis(500),
        sandbox,
        ..WebhookOptions::default()
    };
    let r = probe(&opts(Some(packaged()))).await;
    let ProbeOutcome::Blocked { cause, drop_in } = &r[0].outcome else {
        panic!("{}", r[0]);
    };
    assert!(
        cause.contains("the unit nthd.service's IP allow-list blocks 127.0.0.1"),
        "{cause}"
    );
    assert!(drop_in.contains("IPAddressAllow=127.0.0.1"), "{drop_in}");
    assert!(
        r[0].to_string().contains("no connection: the unit"),
        "{}",
        r[0]
    );
    // Without lists that block it: the old, generic outcome.
    let r = probe(&opts(None)).await;
    assert!(
        matches!(r[0].outcome, ProbeOutcome::Unreachable { .. }),
        "{}",
        r[0]
    );
}

/// A private bus with a fake logind and a fake systemd whose `GetUnitByPID` says the process
/// runs in `nthd.service`, which denies everything but 127.0.0.1 (where the mock IMDS is).
async fn in_the_unit() -> (PrivateBus, FakeLogind, FakeSystemd) {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let systemd = FakeSystemd::serve(bus.address()).await.unwrap();
    systemd.set_own_unit(Some("nthd.service"));
    systemd.set_nthd_ip_policy(&["0.0.0.0/0", "::/0"], &["127.0.0.1"]);
    (bus, logind, systemd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_logs_the_sandbox_as_the_cause() {
    let (bus, _logind, _systemd) = in_the_unit().await;
    // 127.0.0.2 is loopback too, but not in the allow-list.
    let (_l, imds) = silent("127.0.0.2");
    let state = tempfile::tempdir().unwrap();
    let n = Nthd::start(
        bus.address(),
        &imds,
        state.path(),
        &[("NTHD_REQUEST_TIMEOUT", "300ms")],
    );
    let want = "IPAddressAllow=127.0.0.2";
    assert!(
        n.wait_log(want, Duration::from_secs(10)).await,
        "{}",
        n.log()
    );
    let log = n.log();
    assert!(
        log.contains("the unit nthd.service's IP allow-list blocks 127.0.0.2"),
        "{log}"
    );
    assert!(!log.contains("slow or throttling"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_names_the_sandbox_for_a_blocked_webhook_receiver() {
    let (bus, logind, _systemd) = in_the_unit().await;
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    // Nothing listens there (a silent listener would cost the 10 s attempt timeout): the
    // refusal is blamed on the allow-list just the same.
    let (l, receiver) = silent("127.0.0.2");
    drop(l);
    let hook = format!("{receiver}/events");
    let state = tempfile::tempdir().unwrap();
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_WEBHOOK", hook.as_str())],
    );
    assert!(
        common::provider::spot_notice_powers_off(&imds, &logind, "2030-01-01T00:02:00Z").await,
        "{}",
        n.log()
    );
    let want = format!(
        "webhook {receiver}: no connection: the unit nthd.service's IP allow-list blocks \
         127.0.0.2 (IPAddressDeny=any, and no IPAddressAllow= entry matches); allow it with a \
         drop-in: systemctl edit nthd.service"
    );
    assert!(
        n.wait_log(&want, Duration::from_secs(10)).await,
        "{}",
        n.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_says_what_the_daemon_says() {
    let (bus, _logind, _systemd) = in_the_unit().await;
    let (_l, imds) = silent("127.0.0.2");
    let mut cmd = common::nthd_command(bus.address());
    cmd.args(["once", "--provider", "aws", "--imds-endpoint", &imds])
        .env("NTHD_REQUEST_TIMEOUT", "300ms")
        .env("NTHD_LOG_LEVEL", "error");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{s}");
    assert!(
        s.contains("the unit nthd.service's IP allow-list blocks 127.0.0.2")
            && s.contains("IPAddressAllow=127.0.0.2")
            && !s.contains("slow or throttling"),
        "{s}"
    );
}
