//! The real `nthd` binary against the mock IMDS and a fake logind on a private dbus-daemon
//! (`DBUS_SYSTEM_BUS_ADDRESS`): what it calls, how often, when, and what it tells systemd.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant, SystemTime};

use common::Nthd;

use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

const DENIED: (&str, &str) = (
    "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
    "Interactive authentication required.",
);

async fn setup() -> (PrivateBus, FakeLogind, MockImds, tempfile::TempDir) {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    (bus, logind, imds, tempfile::tempdir().unwrap())
}

fn spot(action: &str) -> Response {
    Response::json(
        200,
        format!(r#"{{"action":"{action}","time":"2030-01-01T00:02:00Z"}}"#),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_terminate_powers_off_exactly_once_non_interactively() {
    let (bus, logind, imds, state) = setup().await;
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        n.wait_log("cloud: aws", Duration::from_secs(5)).await,
        "{}",
        n.log()
    );
    assert!(
        imds.wait_for_count(aws::SPOT_PATH, 2, Duration::from_secs(5))
            .await
    );
    assert_eq!(logind.power_off_count(), 0, "no notice yet");
    imds.set(aws::SPOT_PATH, spot("terminate"));
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    let call = &logind.calls_of("PowerOff")[0];
    assert_eq!(
        call.args,
        serde_json::json!([false]),
        "interactive must be false"
    );
    // The notice stays listed on every poll; PowerOff is not called again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logind.power_off_count(), 1);
    assert_eq!(logind.reboot_count(), 0);
    assert!(n.running());
    let log = n.log();
    // The stable text prefixes NPD's journald monitor matches (README, "Node Problem
    // Detector"): `notice <kind>: ... decision: <action>` and `action <action> for <kind>: `.
    assert!(
        log.contains(
            " action poweroff for spot-terminate: called \
             org.freedesktop.login1.Manager.PowerOff(false) for aws/spot/terminate"
        ),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains(" notice spot-terminate: ")
                && l.contains("; decision: poweroff now")),
        "{log}"
    );
    assert_eq!(
        log.matches("notice spot-terminate").count(),
        1,
        "announced once:\n{log}"
    );
    assert!(n.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hibernate_and_rebalance_never_power_off_by_default() {
    let (bus, logind, imds, state) = setup().await;
    imds.set(aws::SPOT_PATH, spot("hibernate"));
    imds.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#),
    );
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        n.wait_log("notice rebalance", Duration::from_secs(5)).await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logind.power_off_count(), 0);
    assert_eq!(logind.reboot_count(), 0);
    let log = n.log();
    assert!(
        log.contains("notice spot-hibernate") && log.contains("decision: log"),
        "{log}"
    );
    assert!(n.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_stop_fires_at_the_last_safe_moment() {
    let (bus, logind, imds, state) = setup().await;
    logind.set_inhibit_delay_max(Duration::from_secs(2));
    // Whole seconds: the AWS date format has no fraction.
    let now = SystemTime::now();
    let deadline = now + Duration::from_secs(8);
    let body = format!(
        r#"[{{"NotBefore":"{}","Code":"instance-stop","EventId":"instance-event-7","State":"active"}}]"#,
        nthd::testing::timefmt::format_aws(deadline)
    );
    imds.set(aws::SCHEDULED_PATH, Response::json(200, body));
    let started = Instant::now();
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_SAFETY_MARGIN", "1s")],
    );
    // Fires at NotBefore - 2 s (InhibitDelayMaxUSec) - 1 s (margin): about 5 s (4 to 5 with
    // the sub-second truncation of NotBefore).
    assert!(
        n.wait_log("scheduled at", Duration::from_secs(5)).await,
        "{}",
        n.log()
    );
    assert_eq!(logind.power_off_count(), 0, "not before the computed time");
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(8))
            .await,
        "{}",
        n.log()
    );
    let fired = started.elapsed();
    assert!(
        fired >= Duration::from_millis(3800) && fired <= Duration::from_millis(6500),
        "fired after {fired:?}:\n{}",
        n.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polkit_denial_is_explained_retried_and_then_succeeds_once() {
    let (bus, logind, imds, state) = setup().await;
    logind.set_power_off_error(Some(DENIED));
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(5))
            .await,
        "retried:\n{}",
        n.log()
    );
    let log = n.log();
    assert!(
        log.contains("org.freedesktop.login1.power-off"),
        "names the polkit action:\n{log}"
    );
    assert!(log.contains("50-nthd.rules"), "says how to fix it:\n{log}");
    assert!(n.running());
    common::clear_error_then_one_poweroff(&logind, &mut n).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logind_appearing_late_still_gets_the_call() {
    let bus = PrivateBus::start().unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        n.wait_log(
            "org.freedesktop.login1 is not on the system bus",
            Duration::from_secs(5)
        )
        .await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(n.running());
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_bus_is_reported_and_the_daemon_keeps_watching() {
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let mut n = Nthd::start("unix:path=/nonexistent/bus", &imds.url(), state.path(), &[]);
    assert!(
        n.wait_log("cannot connect to the system D-Bus", Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    let reads = imds.count(aws::SPOT_PATH);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(n.running(), "{}", n.log());
    assert!(imds.count(aws::SPOT_PATH) > reads, "still polling");
    assert!(n.stop().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_narrates_and_never_calls_logind() {
    let (bus, logind, imds, state) = setup().await;
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_DRY_RUN", "true")],
    );
    assert!(
        n.wait_log(
            "dry run: would call org.freedesktop.login1.Manager.PowerOff(false)",
            Duration::from_secs(5)
        )
        .await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(logind.power_off_count(), 0);
    assert_eq!(n.log().matches("dry run: would call").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_does_not_power_off_twice() {
    let (bus, logind, imds, state) = setup().await;
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await
    );
    assert!(n.stop().await.success());
    // A crash-restart during the same boot, with logind (as a fake) no longer preparing.
    logind.set_preparing(false);
    let n2 = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        n2.wait_log("already acted on", Duration::from_secs(5))
            .await,
        "{}",
        n2.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(logind.power_off_count(), 1, "{}", n2.log());
    let saved = std::fs::read_to_string(state.path().join("state.json")).unwrap();
    assert!(
        saved.contains("aws/spot/terminate") && saved.contains("\"done\""),
        "{saved}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_policy_calls_reboot_not_poweroff() {
    let (bus, logind, imds, state) = setup().await;
    imds.set(
        aws::SCHEDULED_PATH,
        Response::json(200, r#"[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","EventId":"instance-event-9","State":"active"}]"#),
    );
    let n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[("NTHD_ACTION_SCHEDULED_REBOOT", "reboot")],
    );
    assert!(
        logind
            .wait_for_method("Reboot", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(logind.reboot_count(), 1);
    assert_eq!(logind.power_off_count(), 0);
}

/// The messages on the notify socket, each with its arrival time, until `after` past READY=1
/// (at most 30 s for READY=1 itself: start-up takes what it takes, seconds for a debug build
/// under qemu-user), and when READY=1 came.
fn notifications_until_ready_and(
    sock: &UnixDatagram,
    after: Duration,
) -> (Vec<(Instant, String)>, Option<Instant>) {
    let mut msgs = Vec::new();
    let mut buf = [0u8; 4096];
    let mut end = Instant::now() + Duration::from_secs(30);
    let mut ready_at = None;
    while Instant::now() < end {
        if let Ok(len) = sock.recv(&mut buf) {
            let m = String::from_utf8_lossy(&buf[..len]).into_owned();
            if ready_at.is_none() && m.contains("READY=1") {
                ready_at = Some(Instant::now());
                end = Instant::now() + after;
            }
            msgs.push((Instant::now(), m));
        }
    }
    (msgs, ready_at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tells_systemd_ready_status_watchdog_and_stopping() {
    let (bus, logind, imds, state) = setup().await;
    let sockdir = tempfile::tempdir().unwrap();
    let sock_path = sockdir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[
            ("NOTIFY_SOCKET", sock_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "1200000"),
        ],
    );
    let (msgs, ready_at) = notifications_until_ready_and(&sock, Duration::from_secs(3));
    let joined: Vec<&str> = msgs.iter().map(|(_, m)| m.as_str()).collect();
    let joined = joined.join("\n");
    let ready_at = ready_at.unwrap_or_else(|| panic!("no READY=1 in 30 s: {joined}\n{}", n.log()));
    assert!(joined.contains("STATUS=AWS IMDSv2 at"), "{joined}");
    assert!(joined.contains("no notices"), "{joined}");
    let pings: Vec<Instant> = msgs
        .iter()
        .filter(|(at, m)| *at >= ready_at && m.contains("WATCHDOG=1"))
        .map(|(at, _)| *at)
        .collect();
    // Every 400 ms (WATCHDOG_USEC / 3): 7 in 3 s; no gap reaches WATCHDOG_USEC, when systemd
    // would kill the daemon.
    let gaps: Vec<Duration> = pings.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        pings.len() >= 5 && gaps.iter().all(|g| *g < Duration::from_millis(1200)),
        "watchdog every 400 ms for 3 s after READY=1, got {} with gaps {gaps:?}: {joined}",
        pings.len()
    );
    imds.set(aws::SPOT_PATH, spot("terminate"));
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await
    );
    let status = n.stop().await;
    assert!(status.success());
    let mut rest = String::new();
    let mut buf = [0u8; 4096];
    while let Ok(len) = sock.recv(&mut buf) {
        rest.push_str(&String::from_utf8_lossy(&buf[..len]));
        rest.push('\n');
    }
    assert!(
        rest.contains("STATUS=poweroff requested for aws/spot/terminate"),
        "{rest}"
    );
    assert!(rest.contains("STOPPING=1"), "{rest}");
}

fn scheduled_reboot(event_id: &str) -> Response {
    Response::json(
        200,
        format!(
            r#"[{{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","EventId":"{event_id}","State":"active"}}]"#
        ),
    )
}

fn this_boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string()
}

/// After the reboot nthd itself asked for, AWS may still list the event: nthd must not reboot
/// the node again for it. A new event id is still acted on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_its_own_reboot_a_still_listed_event_does_not_reboot_again() {
    let (bus, logind, imds, state) = setup().await;
    let env = [
        ("NTHD_ACTION_SCHEDULED_REBOOT", "reboot"),
        ("NTHD_SLOW_POLL_INTERVAL", "300ms"),
    ];
    imds.set(aws::SCHEDULED_PATH, scheduled_reboot("instance-event-9"));
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &env);
    assert!(
        logind
            .wait_for_method("Reboot", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    assert!(n.stop().await.success());

    // The node reboots: logind starts afresh and the boot id changes.
    logind.restart().await.unwrap();
    let file = state.path().join("state.json");
    let saved = std::fs::read_to_string(&file).unwrap();
    let boot = this_boot_id();
    assert!(
        saved.contains(&boot) && saved.contains("instance-event-9") && saved.contains("\"done\""),
        "{saved}"
    );
    std::fs::write(
        &file,
        saved.replace(&boot, "11111111-2222-3333-4444-555555555555"),
    )
    .unwrap();

    let mut n2 = Nthd::start(bus.address(), &imds.url(), state.path(), &env);
    assert!(
        n2.wait_log("already acted on", Duration::from_secs(5))
            .await,
        "{}",
        n2.log()
    );
    // Scheduled events are polled every 300 ms here: many chances to reboot again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logind.reboot_count(), 1, "{}", n2.log());
    assert!(n2.running(), "{}", n2.log());

    // The record is per event: a new maintenance event is acted on.
    imds.set(aws::SCHEDULED_PATH, scheduled_reboot("instance-event-10"));
    assert!(
        logind
            .wait_for_method("Reboot", 2, Duration::from_secs(5))
            .await,
        "{}",
        n2.log()
    );
}

/// nthd died after writing its "started" record but before logind got the call (same boot,
/// logind not shutting down): the restarted nthd calls once, and not again after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_call_reached_logind_is_retried_once() {
    let (bus, logind, imds, state) = setup().await;
    imds.set(aws::SPOT_PATH, spot("terminate"));
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await
    );
    assert!(n.stop().await.success());
    // Rewind: the record says "started" and logind never saw a call.
    logind.restart().await.unwrap();
    let file = state.path().join("state.json");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.contains("\"done\""), "{saved}");
    std::fs::write(&file, saved.replace("\"done\"", "\"started\"")).unwrap();
    let calls_before = logind.power_off_count();

    let mut n2 = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        logind
            .wait_for_method("PowerOff", calls_before + 1, Duration::from_secs(5))
            .await,
        "{}",
        n2.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(logind.power_off_count(), calls_before + 1, "{}", n2.log());
    assert!(n2.stop().await.success());

    // Now done: a third start (logind fresh again) does not call.
    logind.restart().await.unwrap();
    let n3 = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    assert!(
        n3.wait_log("already acted on", Duration::from_secs(5))
            .await,
        "{}",
        n3.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(logind.power_off_count(), calls_before + 1, "{}", n3.log());
}

/// amazon-ec2-metadata-mock recomputes a spot notice's `time` (now + 2 min) on every request.
/// That is one notice: announced once, its drifting deadline only logged at debug.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifting_spot_time_is_announced_once() {
    let (bus, _logind, imds, state) = setup().await;
    let n = Nthd::start(bus.address(), &imds.url(), state.path(), &[]);
    // Until nthd has read the notice 20 times, however long that takes on a loaded or emulated
    // machine; a minute is only the bound for a daemon that stopped reading.
    let end = Instant::now() + Duration::from_secs(60);
    while imds.count(aws::SPOT_PATH) < 20 && Instant::now() < end {
        let t = SystemTime::now() + Duration::from_secs(120);
        imds.set(
            aws::SPOT_PATH,
            Response::json(
                200,
                format!(
                    "{{\n\t\"action\": \"hibernate\",\n\t\"time\": \"{}\"\n}}",
                    nthd::testing::timefmt::format_rfc3339(t)
                ),
            ),
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = n.log();
    assert!(imds.count(aws::SPOT_PATH) >= 20, "{log}");
    assert_eq!(log.matches("notice spot-hibernate").count(), 1, "{log}");
}

fn gcp_window(start: SystemTime) -> Response {
    let start = nthd::testing::timefmt::format_rfc3339(start);
    Response::json(
        200,
        format!(
            r#"{{"maintenance_status": "PENDING", "type": "SCHEDULED", "window_start_time": "{start}"}}"#
        ),
    )
}

/// Google moves a maintenance window 6 s before the power-off planned for it, long before the
/// window's regular re-read (every minute here): nthd reads it once more right before the
/// action, and the action moves with the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_window_moved_just_before_the_action_moves_it() {
    use nthd::testing::provider::gcp::{MAINTENANCE_PATH, PREEMPTED_PATH, UPCOMING_PATH};
    let (bus, logind, imds, state) = setup().await;
    imds.set(PREEMPTED_PATH, Response::text(200, "FALSE"));
    imds.set(
        MAINTENANCE_PATH,
        Response::text(200, "TERMINATE_ON_HOST_MAINTENANCE"),
    );
    // logind's budget is 5 s and the margin 1 s: the power-off is planned 20 s from now.
    let t0 = Instant::now();
    let start = SystemTime::now() + Duration::from_secs(26);
    imds.set(UPCOMING_PATH, gcp_window(start));
    let env = [
        ("NTHD_PROVIDER", "gcp"),
        ("NTHD_SAFETY_MARGIN", "1s"),
        ("NTHD_SLOW_POLL_INTERVAL", "1m"),
    ];
    let n = Nthd::start(bus.address(), &imds.url(), state.path(), &env);
    assert!(
        n.wait_log("at the last safe moment", Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    tokio::time::sleep_until((t0 + Duration::from_secs(14)).into()).await;
    imds.set(UPCOMING_PATH, gcp_window(start + Duration::from_secs(60)));
    // Past the time first planned, with room to spare.
    tokio::time::sleep_until((t0 + Duration::from_secs(23)).into()).await;
    assert_eq!(logind.power_off_count(), 0, "{}", n.log());
    assert!(
        n.log().contains("the maintenance now starts"),
        "{}",
        n.log()
    );
    assert_eq!(imds.count(UPCOMING_PATH), 2, "{}", n.log());
}
