//! The fault matrix: every fault we can think of, on the IMDS side and the D-Bus side, with the
//! real binary. For every cell: the daemon stays up, the log says what is wrong, the watchdog
//! keeps being fed while the loop runs, and the notice is acted on exactly once.
//!
//! IMDS cells run in two phases:
//! - `before`: the fault is on while there is no notice; then it clears and a notice appears.
//! - `during`: the notice is there but hidden behind the fault; the fault clears, the notice is
//!   acted on, then the fault comes back and clears again without a second action.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Notify, Nthd};
use nthd::testing::provider::aws;
use nthd_testkit::imds::{Fault, MockImds, Response, TokenMode};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

const NOTICE: &str = r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#;

fn notice() -> Response {
    Response::json(200, NOTICE)
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Before,
    During,
}

type Apply = fn(&MockImds);

fn start(bus: &str, imds: &str, state: &Path, notify: &Notify) -> Nthd {
    Nthd::start(
        bus,
        imds,
        state,
        &[
            ("NOTIFY_SOCKET", notify.path.to_str().unwrap()),
            ("WATCHDOG_USEC", "900000"),
            ("NTHD_REQUEST_TIMEOUT", "500ms"),
        ],
    )
}

async fn assert_once(logind: &FakeLogind, n: &mut Nthd) {
    assert_once_within(logind, n, Duration::from_secs(8)).await;
}

/// A PowerOff comes within `wait`, and 1.2 s later exactly one has succeeded, nthd still up.
async fn assert_once_within(logind: &FakeLogind, n: &mut Nthd, wait: Duration) {
    assert!(
        logind.wait_for_method("PowerOff", 1, wait).await,
        "no PowerOff:\n{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(common::successes(logind, "PowerOff"), 1, "{}", n.log());
    assert!(n.running(), "{}", n.log());
}

/// Runs one IMDS cell. `fault` turns the fault on (for the spot source unless it is a
/// server-wide knob); `clear` turns it off; `hint` must appear in the log while faulty.
async fn imds_cell(phase: Phase, fault: Apply, clear: Apply, hint: &str) {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut notify = Notify::new();
    if phase == Phase::During {
        imds.set(aws::SPOT_PATH, notice());
    }
    fault(&imds);
    let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
    let t0 = Instant::now();
    assert!(
        n.wait_log(hint, Duration::from_secs(6)).await,
        "no `{hint}` in the log:\n{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(n.running(), "{}", n.log());
    assert_eq!(
        logind.power_off_count(),
        0,
        "nothing acted on while the notice is unreadable"
    );
    assert!(
        !notify.last_status().is_empty(),
        "STATUS= is sent while faulty"
    );
    clear(&imds);
    imds.set(aws::SPOT_PATH, notice());
    assert_once(&logind, &mut n).await;
    if phase == Phase::During {
        // The fault comes back and clears again: still one PowerOff.
        fault(&imds);
        tokio::time::sleep(Duration::from_millis(800)).await;
        clear(&imds);
        imds.set(aws::SPOT_PATH, notice());
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(logind.power_off_count(), 1, "{}", n.log());
    }
    let gap = notify.longest_watchdog_gap(t0 + Duration::from_millis(300));
    assert!(
        gap < Duration::from_millis(2500),
        "watchdog starved for {gap:?}"
    );
    assert!(n.stop().await.success());
}

macro_rules! imds_cells {
    ($($name:ident: $fault:expr, $clear:expr, $hint:expr;)*) => {
        mod imds_before {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { imds_cell(Phase::Before, $fault, $clear, $hint).await } )*
        }
        mod imds_during {
            use super::*;
            $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
               async fn $name() { imds_cell(Phase::During, $fault, $clear, $hint).await } )*
        }
    };
}

fn clear_spot(m: &MockImds) {
    m.clear(aws::SPOT_PATH);
}

imds_cells! {
    hang: |m| m.set(aws::SPOT_PATH, Response::fault(Fault::Hang)), clear_spot, "no answer from";
    connection_reset: |m| m.set(aws::SPOT_PATH, Response::fault(Fault::Reset)), clear_spot, "cannot reach";
    server_error_burst: |m| m.set(aws::SPOT_PATH, Response::status(503)), clear_spot, "HTTP 503";
    token_401_always: |m| m.config(|c| c.token_always_401 = true), |m| m.config(|c| c.token_always_401 = false), "HTTP 401";
    token_put_403: |m| m.config(|c| { c.aws_token = TokenMode::Refused; c.token_put_status = 403; }),
        |m| m.config(|c| c.aws_token = TokenMode::Required), "NTHD_AWS_IMDSV1";
    token_put_405: |m| m.config(|c| { c.aws_token = TokenMode::Refused; c.token_put_status = 405; }),
        |m| m.config(|c| c.aws_token = TokenMode::Required), "was refused with HTTP 405";
    slow_body: |m| m.set(aws::SPOT_PATH, Response::json(200, NOTICE).with_fault(Fault::Slow)), clear_spot, "no answer from";
    truncated_body: |m| m.set(aws::SPOT_PATH, Response::json(200, NOTICE).with_fault(Fault::Truncate)), clear_spot, "cannot reach";
    garbage_json: |m| m.set(aws::SPOT_PATH, Response::json(200, r#"{"action": ter"#)), clear_spot, "invalid spot instance-action JSON";
    not_http: |m| m.set(aws::SPOT_PATH, Response::fault(Fault::Garbage)), clear_spot, "cannot reach";
    oversized_body: |m| m.set(aws::SPOT_PATH, Response::huge(1 << 30)), clear_spot, "refuses to read it";
    html_error_page: |m| m.set(aws::SPOT_PATH, Response::text(200, "<html><body>Service Unavailable</body></html>").with_header("Content-Type", "text/html")), clear_spot, "is not what nthd expects";
}

/// Runs the burst of faults on the spot path: HTTP 500s, garbage bodies, then a stall of at
/// least 4 s that ends right after nthd's read went into it (its worst moment: that read hangs
/// until the request timeout), and then the notice. Returns how long the burst lasted and how
/// many spot reads came in it.
async fn fault_burst_then_notice(imds: &MockImds, n: &Nthd) -> (Duration, usize) {
    let (t0, reads_before) = (Instant::now(), imds.count(aws::SPOT_PATH));
    for (fault, hint) in [
        (Response::status(500), "HTTP 500"),
        (
            Response::json(200, r#"{"action": ter"#),
            "invalid spot instance-action JSON",
        ),
    ] {
        imds.set(aws::SPOT_PATH, fault);
        assert!(
            n.wait_log(hint, Duration::from_secs(8)).await,
            "{}",
            n.log()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    imds.set(aws::SPOT_PATH, Response::fault(Fault::Hang));
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reads = imds.count(aws::SPOT_PATH);
    let t = Instant::now();
    while imds.count(aws::SPOT_PATH) == reads {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no read:\n{}",
            n.log()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    imds.set(aws::SPOT_PATH, notice());
    (t0.elapsed(), imds.count(aws::SPOT_PATH) - reads_before)
}

/// The warnings about failed spot reads in `log`.
fn spot_read_warnings(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains(" WARN ") && l.contains(r#"nthd_source="aws/spot/instance-action""#))
        .filter(|l| !l.contains("notice spot-terminate"))
        .count()
}

/// A spot notice that appears just as a burst of faults ends is read at the next interval, not
/// after a backoff (issue 29, item 8). With the 1 s interval and the 500 ms request timeout
/// the notice is read about 1 s after the burst ([`fault_burst_then_notice`]); the bound is one
/// interval plus 1.5 s for a loaded 2-core machine. Before the fix the spot read had backed
/// off to 4-5 s, and the notice waited as long (4.7 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_notice_as_a_fault_burst_ends_is_read_within_one_interval() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let env = [
        ("NTHD_POLL_INTERVAL", "1s"),
        ("NTHD_REQUEST_TIMEOUT", "500ms"),
    ];
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &env);
    common::expect_started(&logind, &n).await;
    let (burst, reads) = fault_burst_then_notice(&imds, &n).await;
    let t_end = Instant::now();
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(10))
            .await,
        "no PowerOff:\n{}",
        n.log()
    );
    let latency = t_end.elapsed();
    eprintln!("burst {burst:?}, {reads} spot reads in it; PowerOff {latency:?} after it");
    assert!(
        latency <= Duration::from_millis(2500),
        "PowerOff {latency:?} after the burst ended; the interval is 1 s:\n{}",
        n.log()
    );
    // Not hammered either: at most one read per interval while the faults lasted; and one
    // warning per kind of fault, not one per read.
    assert!(
        reads as f64 <= burst.as_secs_f64() + 2.0,
        "{reads} spot reads in {burst:?}"
    );
    assert_eq!(spot_read_warnings(&n.log()), 3, "{}", n.log());
    assert_once_within(&logind, &mut n, Duration::from_secs(1)).await;
}

/// The metadata service is not there at all when nthd starts (connection refused), and comes
/// up minutes (here: seconds) later with a notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imds_unreachable_at_boot_then_appears() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let state = tempfile::tempdir().unwrap();
    let mut notify = Notify::new();
    let mut n = start(bus.address(), &url, state.path(), &notify);
    let t0 = Instant::now();
    assert!(
        n.wait_log("cannot reach", Duration::from_secs(5)).await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    notify.drain();
    assert!(
        notify.msgs.iter().any(|(_, m)| m.contains("READY=1")),
        "READY even though IMDS is down"
    );
    assert!(
        notify.last_status().contains("metadata error"),
        "{}",
        notify.last_status()
    );
    let imds = MockImds::builder()
        .listen(format!("127.0.0.1:{port}"))
        .route(aws::SPOT_PATH, notice())
        .start()
        .await
        .unwrap();
    assert_once(&logind, &mut n).await;
    assert!(imds.count(aws::SPOT_PATH) >= 1);
    assert!(
        notify.longest_watchdog_gap(t0 + Duration::from_millis(300)) < Duration::from_millis(2500)
    );
}

/// Clock skew: the notice time is far in the past or far in the future. A spot notice is acted
/// on at once either way, and exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew_notice_time_past_and_future() {
    for time in ["1999-01-01T00:00:00Z", "2099-01-01T00:00:00Z"] {
        let bus = PrivateBus::start().unwrap();
        let logind = FakeLogind::serve(bus.address()).await.unwrap();
        let imds = MockImds::start("127.0.0.1:0").await.unwrap();
        let state = tempfile::tempdir().unwrap();
        let notify = Notify::new();
        imds.set(
            aws::SPOT_PATH,
            Response::json(200, format!(r#"{{"action":"terminate","time":"{time}"}}"#)),
        );
        let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
        assert_once(&logind, &mut n).await;
    }
}

/// A notice that appears, disappears and appears again is acted on once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_notice() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let notify = Notify::new();
    imds.set(
        aws::SPOT_PATH,
        Response::sequence(vec![
            notice(),
            Response::status(404),
            Response::status(404),
            notice(),
        ]),
    );
    let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
    assert_once(&logind, &mut n).await;
    assert!(imds.count(aws::SPOT_PATH) >= 4, "read through the flap");
    assert!(n.log().contains("is no longer listed"), "{}", n.log());
}

// --- D-Bus side ------------------------------------------------------------------------------

fn link_to(link: &Path, bus: &PrivateBus) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(bus.socket_path(), link).unwrap();
}

/// No system bus when nthd starts; it appears later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbus_absent_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("system_bus_socket");
    let addr = format!("unix:path={}", link.display());
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set(aws::SPOT_PATH, notice());
    let mut notify = Notify::new();
    let mut n = start(&addr, &imds.url(), dir.path(), &notify);
    let t0 = Instant::now();
    assert!(
        n.wait_log("cannot connect to the system D-Bus", Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    assert!(
        n.log().contains("Is dbus running"),
        "the error says what to check"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        notify.last_status().contains("logind error"),
        "{}",
        notify.last_status()
    );
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    link_to(&link, &bus);
    assert_once(&logind, &mut n).await;
    assert!(
        notify.longest_watchdog_gap(t0 + Duration::from_millis(300)) < Duration::from_millis(2500)
    );
}

/// dbus-daemon is restarted (a new bus behind the same socket path) while nthd runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbus_restarted_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("system_bus_socket");
    let addr = format!("unix:path={}", link.display());
    let bus_a = PrivateBus::start().unwrap();
    let logind_a = FakeLogind::serve(bus_a.address()).await.unwrap();
    link_to(&link, &bus_a);
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let notify = Notify::new();
    let mut n = start(&addr, &imds.url(), dir.path(), &notify);
    assert!(
        n.wait_log("InhibitDelayMaxUSec is", Duration::from_secs(5))
            .await,
        "connected first:\n{}",
        n.log()
    );
    drop(logind_a);
    drop(bus_a);
    let bus_b = PrivateBus::start().unwrap();
    let logind_b = FakeLogind::serve(bus_b.address()).await.unwrap();
    link_to(&link, &bus_b);
    imds.set(aws::SPOT_PATH, notice());
    assert_once(&logind_b, &mut n).await;
}

/// logind is restarted (drops its bus name and takes it again) while nthd runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logind_restarted_while_running() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let notify = Notify::new();
    let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
    assert!(
        n.wait_log("InhibitDelayMaxUSec is", Duration::from_secs(5))
            .await
    );
    logind.stop().await.unwrap();
    imds.set(aws::SPOT_PATH, notice());
    assert!(
        n.wait_log("not on the system bus", Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    logind.start().await.unwrap();
    assert_once(&logind, &mut n).await;
}

/// A running nthd with a spot notice listed and logind answering PowerOff with `error`.
/// Bind it whole (`let c = ...`): destructuring with `..` would drop the bus at once. Fields
/// drop in order, so nthd is killed before its bus goes away.
struct ErrorCell {
    n: Nthd,
    notify: Notify,
    logind: FakeLogind,
    _imds: MockImds,
    _state: tempfile::TempDir,
    _bus: PrivateBus,
}

async fn notice_with_power_off_error(error: (&str, &str)) -> ErrorCell {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_power_off_error(Some(error));
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set(aws::SPOT_PATH, notice());
    let state = tempfile::tempdir().unwrap();
    let notify = Notify::new();
    let n = start(bus.address(), &imds.url(), state.path(), &notify);
    ErrorCell {
        n,
        notify,
        logind,
        _imds: imds,
        _state: state,
        _bus: bus,
    }
}

/// PowerOff fails (not a denial): logged, retried, then done once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poweroff_returns_an_error() {
    let mut c = notice_with_power_off_error((
        "org.freedesktop.DBus.Error.Failed",
        "Operation not supported",
    ))
    .await;
    assert!(
        c.logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(5))
            .await,
        "retried"
    );
    assert!(
        c.n.log().contains("logind PowerOff failed") && c.n.log().contains("retrying"),
        "{}",
        c.n.log()
    );
    assert!(
        c.notify.last_status().contains("logind error"),
        "{}",
        c.notify.last_status()
    );
    common::clear_error_then_one_poweroff(&c.logind, &mut c.n).await;
}

const IN_PROGRESS: (&str, &str) = (
    "org.freedesktop.login1.OperationInProgress",
    "There's already a shutdown or sleep operation in progress",
);

/// logind is busy with another operation (a stuck suspend job) and not preparing for
/// shutdown: nthd names the cause and retries; once logind is free, PowerOff once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logind_busy_with_another_operation() {
    let mut c = notice_with_power_off_error(IN_PROGRESS).await;
    assert!(
        c.logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(5))
            .await,
        "retried:\n{}",
        c.n.log()
    );
    let log = c.n.log();
    assert!(
        log.contains("a shutdown or sleep operation is already in progress")
            && log.contains("systemctl list-jobs"),
        "{log}"
    );
    common::clear_error_then_one_poweroff(&c.logind, &mut c.n).await;
}

/// Someone else's shutdown gets in between nthd's PreparingForShutdown check and its PowerOff:
/// logind answers OperationInProgress. nthd's retry sees the shutdown under way and does not
/// call again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_started_elsewhere_first() {
    let mut c = notice_with_power_off_error(IN_PROGRESS).await;
    assert!(
        c.logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "{}",
        c.n.log()
    );
    // The other shutdown is now visible (logind's delay phase).
    c.logind.set_preparing(true);
    assert!(
        c.n.wait_log(
            "logind is already preparing for shutdown; not calling PowerOff again",
            Duration::from_secs(5)
        )
        .await,
        "{}",
        c.n.log()
    );
    // Several retry periods (300 ms) later: still the one refused call, and nthd is up.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(c.logind.power_off_count() <= 2, "{}", c.n.log());
    let n_calls = c.logind.power_off_count();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        c.logind.power_off_count(),
        n_calls,
        "called again:\n{}",
        c.n.log()
    );
    assert!(c.n.running(), "{}", c.n.log());
}

/// logind hangs: it owns its name, the bus queues calls for it, and nothing answers. nthd's
/// logind calls time out (3 s for a read, 10 s for PowerOff), it says logind looks hung, and
/// it keeps feeding the watchdog well inside the unit's WatchdogSec=30s: a wedged logind must
/// not get nthd killed. Once logind is back, PowerOff succeeds exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logind_hangs() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut notify = Notify::new();
    let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
    common::expect_started(&logind, &n).await;
    logind.stop().await.unwrap();
    let hung = nthd_testkit::logind::HungLogind::take_name(bus.address()).unwrap();
    let t0 = Instant::now();
    imds.set(aws::SPOT_PATH, notice());
    assert!(
        n.wait_log(
            "logind PowerOff did not answer within 10s; is systemd-logind hung?",
            Duration::from_secs(20)
        )
        .await,
        "{}",
        n.log()
    );
    assert!(n.running(), "{}", n.log());
    let gap = notify.longest_watchdog_gap(t0);
    eprintln!("longest watchdog gap while logind hung: {gap:?}");
    assert!(
        gap < Duration::from_secs(15),
        "watchdog gap {gap:?} while logind hung (WatchdogSec=30s)"
    );
    drop(hung);
    logind.start().await.unwrap();
    // A retry cycle against the hung logind takes up to 13 s before nthd tries again.
    assert_once_within(&logind, &mut n, Duration::from_secs(20)).await;
}

/// polkit denies: the error names the polkit action and the fix; after the grant, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polkit_denies() {
    let mut c = notice_with_power_off_error((
        "org.freedesktop.DBus.Error.AccessDenied",
        "Permission denied",
    ))
    .await;
    assert!(
        c.logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(5))
            .await
    );
    let log = c.n.log();
    assert!(
        log.contains("polkit did not grant org.freedesktop.login1.power-off")
            && log.contains("nthd.pkla"),
        "{log}"
    );
    common::clear_error_then_one_poweroff(&c.logind, &mut c.n).await;
}

/// CanPowerOff answers `challenge`: nthd warns at start with the fix, and still acts when a
/// notice comes (the grant may have been installed since).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_power_off_says_challenge() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_can_power_off("challenge");
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let notify = Notify::new();
    let mut n = start(bus.address(), &imds.url(), state.path(), &notify);
    assert!(
        n.wait_log("CanPowerOff answers \"challenge\"", Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    assert!(n.log().contains("50-nthd.rules"));
    imds.set(aws::SPOT_PATH, notice());
    assert_once(&logind, &mut n).await;
}
