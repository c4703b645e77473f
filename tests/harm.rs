//! Never harm at the edges (issue #15): the real `nthd` binary against the mock IMDS, a fake
//! logind and a fake systemd1 on a private bus. Signals, restarts in the middle of a drain, and
//! the Azure acknowledgement that must wait for the real shutdown.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::Duration;

use common::{expect_started, successes, Nthd};

use nthd::testing::provider::{aws, azure};
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};
use nthd_testkit::systemd::FakeSystemd;

struct Env {
    bus: PrivateBus,
    logind: FakeLogind,
    systemd: FakeSystemd,
    imds: MockImds,
    state: tempfile::TempDir,
}

async fn env() -> Env {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let systemd = FakeSystemd::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    Env {
        bus,
        logind,
        systemd,
        imds,
        state: tempfile::tempdir().unwrap(),
    }
}

fn signal(n: &Nthd, sig: &str) {
    let pid = n.child.id().to_string();
    let ok = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid} failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_is_logged_and_ignored_and_the_next_notice_still_powers_off() {
    let e = env().await;
    let mut n = Nthd::start(e.bus.address(), &e.imds.url(), e.state.path(), &[]);
    expect_started(&e.logind, &n).await;
    signal(&n, "HUP");
    assert!(
        n.wait_log("SIGHUP: ignored", Duration::from_secs(5)).await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(n.running(), "a SIGHUP ended nthd:\n{}", n.log());
    e.imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
        ),
    );
    assert!(
        e.logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "no PowerOff after the SIGHUP:\n{}",
        n.log()
    );
}

fn azure_preempt(id: &str) -> Response {
    let event = serde_json::json!({
        "EventId": id,
        "EventType": "Preempt",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm1"],
        "EventStatus": "Scheduled",
        "NotBefore": "Mon, 19 Sep 2050 18:29:47 GMT",
        "Description": "spot eviction",
        "EventSource": "Platform",
        "DurationInSeconds": -1,
    });
    Response::json(
        200,
        serde_json::json!({"DocumentIncarnation": 1, "Events": [event]}).to_string(),
    )
}

fn acks(imds: &MockImds) -> Vec<String> {
    imds.requests_for(azure::EVENTS_PATH)
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.body)
        .collect()
}

fn start_azure(e: &Env) -> Nthd {
    Nthd::start(
        e.bus.address(),
        &e.imds.url(),
        e.state.path(),
        &[("NTHD_PROVIDER", "azure")],
    )
}

/// A `systemctl restart nthd` (or a package upgrade) while kubelet drains must not tell Azure
/// to go ahead; the stop at the end of the real shutdown must, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_drain_does_not_acknowledge_but_the_real_shutdown_does() {
    let e = env().await;
    e.imds.set(azure::NAME_PATH, Response::text(200, "vm1"));
    e.imds.set(azure::EVENTS_PATH, azure_preempt("E1"));
    let mut first = start_azure(&e);
    assert!(
        e.logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(10))
            .await,
        "{}",
        first.log()
    );
    assert!(e.logind.preparing(), "the fake logind holds the shutdown");

    // Restarted mid-drain: systemd is still running.
    first.stop().await;
    assert!(
        first.log().contains("not acknowledging E1"),
        "{}",
        first.log()
    );
    assert_eq!(acks(&e.imds), Vec::<String>::new(), "{}", first.log());

    // The new instance neither calls again nor acknowledges on its own.
    let mut second = start_azure(&e);
    assert!(
        second
            .wait_log("already acted on; not repeated", Duration::from_secs(10))
            .await,
        "{}",
        second.log()
    );
    assert_eq!(successes(&e.logind, "PowerOff"), 1, "{}", second.log());

    // The drain is over and systemd queues poweroff.target: now the stop acknowledges.
    e.systemd.set_system_state("stopping");
    second.stop().await;
    assert_eq!(
        acks(&e.imds),
        vec![r#"{"StartRequests":[{"EventId":"E1"}]}"#.to_string()],
        "{}",
        second.log()
    );
    assert!(
        second
            .log()
            .contains("acknowledged 1 event(s) to the platform: E1"),
        "{}",
        second.log()
    );
}

/// Without an answer from PID 1 nthd does not acknowledge: Azure goes ahead at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_answer_from_systemd_means_no_acknowledgement() {
    let e = env().await;
    drop(e.systemd);
    e.imds.set(azure::NAME_PATH, Response::text(200, "vm1"));
    e.imds.set(azure::EVENTS_PATH, azure_preempt("E2"));
    let mut n = Nthd::start(
        e.bus.address(),
        &e.imds.url(),
        e.state.path(),
        &[("NTHD_PROVIDER", "azure")],
    );
    assert!(
        e.logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    n.stop().await;
    assert!(acks(&e.imds).is_empty(), "{}", n.log());
    assert!(
        n.log().contains("SystemState") && n.log().contains("not acknowledging E2"),
        "{}",
        n.log()
    );
}

/// A reboot whose record cannot be written first would loop: the event is still listed after
/// the reboot and looks new. nthd refuses until the record can be written, then reboots once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reboot_without_first_writing_its_record() {
    let e = env().await;
    let missing = e.state.path().join("not-yet");
    e.imds.set(
        aws::SCHEDULED_PATH,
        Response::json(
            200,
            r#"[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","EventId":"instance-event-7","State":"active"}]"#,
        ),
    );
    let n = Nthd::start(
        e.bus.address(),
        &e.imds.url(),
        &missing,
        &[
            ("NTHD_ACTION_SCHEDULED_REBOOT", "reboot"),
            ("NTHD_SLOW_POLL_INTERVAL", "300ms"),
        ],
    );
    assert!(
        n.wait_log(
            "not rebooting for aws/scheduled/instance-event-7",
            Duration::from_secs(5)
        )
        .await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(e.logind.reboot_count(), 0, "{}", n.log());

    std::fs::create_dir(&missing).unwrap();
    assert!(
        e.logind
            .wait_for_method("Reboot", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    let saved = std::fs::read_to_string(missing.join("state.json")).unwrap();
    assert!(saved.contains("instance-event-7"), "{saved}");
}

/// `reboot` for a kind without an event id is a bad setting: that kind falls back to `log`,
/// named at once, and `nthd check` fails its `settings` row.
#[test]
fn reboot_for_a_kind_without_an_event_id_is_refused_at_start() {
    // `check`, which ends by itself, parses the settings as the daemon does.
    let out = common::nthd_command("unix:path=/nonexistent/bus")
        .args(["check", "--root", "/nonexistent"])
        .env("NTHD_ACTION_REBALANCE", "reboot")
        .env("NTHD_SETTINGS_FILE", "none")
        .env("NTHD_PROVIDER", "aws")
        .env("NTHD_IMDS_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        err.contains("NTHD_ACTION_REBALANCE") && err.contains("reboot on every boot"),
        "{err}"
    );
    assert!(
        err.contains("goes on with log, the choice that cannot power off"),
        "{err}"
    );
    assert!(
        stdout.contains("fell back: NTHD_ACTION_REBALANCE"),
        "{stdout}"
    );
}

fn nthd_cmd(bus: &str, settings: &std::path::Path) -> std::process::Command {
    let mut c = common::nthd_command(bus);
    c.env("NTHD_SETTINGS_FILE", settings);
    c
}

/// `nthd simulate spot-terminate --yes` with this settings file; stdout and stderr.
async fn fire_drill(
    e: &Env,
    settings: &std::path::Path,
    state: &std::path::Path,
    env: &[(&str, &str)],
) -> String {
    let mut cmd = nthd_cmd(e.bus.address(), settings);
    cmd.env("NTHD_STATE_DIR", state)
        .args(["simulate", "spot-terminate", "--yes"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// A fire drill run by hand reads the daemon's settings file: with the daemon set to `log`,
/// `simulate spot-terminate --yes` must not power off. A real variable still wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_read_the_settings_file_and_the_environment_wins() {
    let e = env().await;
    let file = e.state.path().join("nthd.default");
    std::fs::write(
        &file,
        "# as /etc/default/nthd\nNTHD_ACTION_SPOT_TERMINATE=log\nNTHD_PROVIDER=aws\n",
    )
    .unwrap();
    let state = e.state.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let text = fire_drill(&e, &file, &state, &[]).await;
    assert!(
        text.contains(&format!("settings from {} (2 values)", file.display())),
        "{text}"
    );
    assert!(text.contains("decision: log"), "{text}");
    assert_eq!(e.logind.power_off_count(), 0, "{text}");

    // The environment overrides the file.
    let text = fire_drill(
        &e,
        &file,
        &state,
        &[("NTHD_ACTION_SPOT_TERMINATE", "poweroff")],
    )
    .await;
    assert!(text.contains("(1 value)"), "{text}");
    assert_eq!(e.logind.power_off_count(), 1, "{text}");
}

/// A settings file systemd refuses (here a value that is not UTF-8): that line alone is
/// skipped, the others apply (the provider here), the warning names the line and the setting,
/// never the value, and `nthd check` fails its `settings` row.
#[test]
fn an_unusable_line_of_a_settings_file_costs_that_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nthd");
    std::fs::write(
        &file,
        b"NTHD_PROVIDER=tencent\nNTHD_WEBHOOK=https://hooks.example/T0KEN-caf\xe9\n",
    )
    .unwrap();
    let out = nthd_cmd("unix:path=/nonexistent", &file)
        .args(["check", "--json", "--root", "/nonexistent"])
        .env("NTHD_IMDS_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{err}{stdout}");
    assert!(
        err.contains("line 2: the value of NTHD_WEBHOOK is not valid UTF-8"),
        "{err}"
    );
    assert!(
        stdout.contains("tencent (set by NTHD_PROVIDER)"),
        "{stdout}"
    );
    assert!(stdout.contains("fell back: NTHD_WEBHOOK"), "{stdout}");
    assert!(
        !err.contains("T0KEN") && !stdout.contains("T0KEN"),
        "{err}{stdout}"
    );
}

/// A settings file systemd accepts is one every command accepts: a continuation line and a
/// quoted value are read as systemd reads them, and a line systemd ignores (`export`) is a
/// warning naming its line, not exit 2.
#[test]
fn a_file_systemd_accepts_is_read_as_systemd_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nthd");
    std::fs::write(
        &file,
        "NTHD_PROVIDER=a\\\nws\r\nNTHD_IMDS_ENDPOINT=\"http://127.0.0.1:9\"\n\
         export NTHD_WEBHOOK=https://hooks.example/T0KEN\n",
    )
    .unwrap();
    let out = nthd_cmd("unix:path=/nonexistent", &file)
        .args(["check", "--root", "/nonexistent"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("settings from {} (2 values)", file.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("warning: {} line 4: `export`", file.display())),
        "{err}"
    );
    assert!(!err.contains("T0KEN"), "{err}");
}

/// A spot notice, and nthd's PowerOff accepted by the fake logind (which then holds the
/// shutdown, `PreparingForShutdown` true).
async fn powered_off_for_spot() -> (Env, Nthd) {
    let e = env().await;
    e.imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
        ),
    );
    let n = Nthd::start(e.bus.address(), &e.imds.url(), e.state.path(), &[]);
    assert!(
        e.logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "{}",
        n.log()
    );
    (e, n)
}

/// logind accepted the PowerOff, then the shutdown was cancelled (PrepareForShutdown(false))
/// while the notice is still listed: nthd sees it and acts again, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_shutdown_is_requested_again_once() {
    let (e, n) = powered_off_for_spot().await;
    e.logind.cancel_shutdown().await.unwrap();
    assert!(
        e.logind
            .wait_for_method("PowerOff", 2, Duration::from_secs(10))
            .await,
        "the cancelled shutdown was not requested again:\n{}",
        n.log()
    );
    assert!(n.log().contains("acting again, once"), "{}", n.log());
    assert_eq!(successes(&e.logind, "PowerOff"), 2, "{}", n.log());

    // A second cancellation is left alone.
    e.logind.cancel_shutdown().await.unwrap();
    assert!(
        n.wait_log("cancelled a second time", Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(e.logind.calls_of("PowerOff").len(), 2, "{}", n.log());
}

/// While PID 1 is stopping, logind's flag going false is the end of the shutdown, not a
/// cancellation: no second call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_second_call_while_the_system_is_stopping() {
    let (e, n) = powered_off_for_spot().await;
    e.systemd.set_system_state("stopping");
    e.logind.set_preparing(false);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(e.logind.calls_of("PowerOff").len(), 1, "{}", n.log());
}

/// The watchdog with the unit's own interval (WatchdogSec=30s, so a ping every 10 s) while
/// logind hangs through several retry cycles: every logind call is bounded and preceded by a
/// ping, so the longest gap stays at one call's timeout (10 s), leaving >= 10 s of margin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_margin_with_the_units_own_interval_while_logind_hangs() {
    let e = env().await;
    let mut notify = common::Notify::new();
    let n = Nthd::start(
        e.bus.address(),
        &e.imds.url(),
        e.state.path(),
        &[
            ("NOTIFY_SOCKET", notify.path.to_str().unwrap()),
            ("WATCHDOG_USEC", "30000000"),
            ("NTHD_RETRY_DELAY", "100ms"),
        ],
    );
    expect_started(&e.logind, &n).await;
    e.logind.stop().await.unwrap();
    let _hung = nthd_testkit::logind::HungLogind::take_name(e.bus.address()).unwrap();
    let t0 = std::time::Instant::now();
    e.imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
        ),
    );
    // Long enough for the 60 s budget re-read to join a retry cycle (3 s + 3 s + 10 s).
    tokio::time::sleep(Duration::from_secs(75)).await;
    let gap = notify.longest_watchdog_gap(t0);
    eprintln!("longest watchdog gap over 75 s of a hung logind, WatchdogSec=30s: {gap:?}");
    assert!(
        n.log().matches("is systemd-logind hung?").count() >= 3,
        "{}",
        n.log()
    );
    // One call's timeout, plus slack for a loaded machine; before the pings ahead of each
    // call, a retry cycle alone held the loop for 13-16 s, and the worst chain for 22 s.
    assert!(
        gap <= Duration::from_secs(12),
        "watchdog gap {gap:?}, more than one logind call's 10 s (WatchdogSec=30s)\n{}",
        n.log()
    );
}
