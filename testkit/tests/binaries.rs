//! The standalone binaries, run as child processes.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nthd_testkit::logind::{login1_proxy, FakeLogind, PrivateBus, ShutdownReason};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

const MOCK: &str = env!("CARGO_BIN_EXE_nthd-mock-imds");
const LOGIND: &str = env!("CARGO_BIN_EXE_nthd-fake-logind");
const KUBELET: &str = env!("CARGO_BIN_EXE_nthd-fake-kubelet");

async fn sigterm(child: &Child) {
    let pid = child.id().expect("child still running").to_string();
    let st = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(st.success());
}

async fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("child did not exit")
        .unwrap()
}

async fn next_line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>) -> String {
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("no output within 10s")
        .unwrap()
        .expect("output ended")
}

async fn http_get(addr: &str, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn mock_imds_binary_serves_routes_and_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let routes = dir.path().join("routes.json");
    std::fs::write(
        &routes,
        r#"{"/latest/meta-data/spot/instance-action":{"status":200,"body":"{\"action\":\"stop\"}","headers":{"Content-Type":"application/json"}}}"#,
    )
    .unwrap();
    let mut child = Command::new(MOCK)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--listen=127.0.0.1:0",
            "--routes",
        ])
        .arg(&routes)
        .args(["--config", r#"{"aws_token":"optional"}"#])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut err = lines_of(child.stderr.take());
    let mut addrs = Vec::new();
    while addrs.len() < 2 {
        let l = next_line(&mut err).await;
        if let Some(a) = l.strip_prefix("nthd-mock-imds: listening on http://") {
            addrs.push(a.to_string());
        }
    }
    let out = http_get(&addrs[1], "/latest/meta-data/spot/instance-action").await;
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.ends_with("{\"action\":\"stop\"}"), "{out}");
    let log_line = next_line(&mut err).await;
    assert!(
        log_line.contains("GET /latest/meta-data/spot/instance-action -> 200"),
        "{log_line}"
    );
    let cfg = http_get(&addrs[0], "/_mock/config").await;
    assert!(cfg.contains(r#""aws_token":"optional""#), "{cfg}");

    sigterm(&child).await;
    let st = wait_exit(&mut child).await;
    assert!(st.success(), "{st:?}");
}

#[tokio::test]
async fn mock_imds_binary_rejects_bad_usage() {
    for args in [
        vec![],
        vec!["--listen"],
        vec!["--listen", "127.0.0.1:0", "--bogus"],
        vec!["--listen", "127.0.0.1:0", "--config", r#"{"nope":1}"#],
        vec!["--listen", "127.0.0.1:0", "--routes", "/nonexistent.json"],
    ] {
        let out = Command::new(MOCK).args(&args).output().await.unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
    // Unbindable address: runtime failure, exit 1.
    let out = Command::new(MOCK)
        .args(["--listen", "203.0.113.1:1"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

fn read_record(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record line {l:?}: {e}")))
        .collect()
}

fn events(rec: &[Value]) -> Vec<String> {
    rec.iter()
        .map(|v| v["event"].as_str().unwrap().to_string())
        .filter(|e| e != "draining")
        .collect()
}

async fn wait_record(path: &Path, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = read_record(path);
        if pred(&r) {
            return r;
        }
        assert!(Instant::now() < deadline, "record never matched: {r:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn fake_kubelet_holds_delay_lock_and_drains() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.set_inhibit_delay_max(Duration::from_secs(30));
    // A bus monitor, to check the order of the kubelet's calls on the wire.
    let (_mon, mut wire) = method_call_monitor(&bus).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("kubelet.jsonl");
    let mut child = Command::new(KUBELET)
        .arg("--record")
        .arg(&rec)
        .args(["--drain-secs", "0.6", "--progress-ms", "200"])
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();

    let r = wait_record(&rec, |r| !r.is_empty()).await;
    assert_eq!(r[0]["event"], "locked");
    assert_eq!(r[0]["pid"], pid);
    assert_eq!(r[0]["inhibit_delay_max_usec"], 30_000_000);
    let inhibit_sender = assert_kubelet_inhibitor(&fake, pid);
    // The PrepareForShutdown match rule went out before the Inhibit call.
    let order = calls_until_inhibit(&mut wire, &inhibit_sender).await;
    let add = order
        .iter()
        .position(|m| m == "AddMatch(PrepareForShutdown)");
    let inhibit = order.iter().position(|m| m == "Inhibit");
    assert!(
        add.is_some() && add < inhibit,
        "call order on the bus: {order:?}"
    );

    let conn = bus.connect().await.unwrap();
    let p = login1_proxy(&conn).await.unwrap();
    p.power_off(false).await.unwrap();
    let sd = fake
        .wait_for_shutdown(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(sd.reason, ShutdownReason::InhibitorsReleased);

    let r = wait_record(&rec, |r| r.iter().any(|v| v["event"] == "released")).await;
    assert_drained_then_released(&r, &sd);

    // A cancelled shutdown makes it take the lock again.
    fake.cancel_shutdown().await.unwrap();
    let r = wait_record(&rec, |r| events(r).len() >= 6).await;
    assert_eq!(&events(&r)[4..], ["prepare_cancelled", "locked"]);
    assert!(fake.wait_for_inhibitors(1, Duration::from_secs(5)).await);

    child.kill().await.unwrap();
    // Killed: its lock goes away with it.
    assert!(fake.wait_for_inhibitors(0, Duration::from_secs(5)).await);
}

/// A connection to `bus` that monitors its method calls, and the stream of what it sees.
async fn method_call_monitor(bus: &PrivateBus) -> (zbus::Connection, zbus::MessageStream) {
    let mon = bus.connect().await.unwrap();
    let wire = zbus::MessageStream::from(&mon);
    zbus::fdo::MonitoringProxy::new(&mon)
        .await
        .unwrap()
        // Method calls only: a reply carrying the inhibitor fd would reach a monitor without
        // its fd, which zbus treats as a broken message.
        .become_monitor(
            &[zbus::MatchRule::builder()
                .msg_type(zbus::message::Type::MethodCall)
                .build()
                .unwrap()],
            0,
        )
        .await
        .unwrap();
    (mon, wire)
}

/// The fake holds one inhibitor, kubelet's delay lock on shutdown, taken by `pid`; returns the
/// bus name that took it.
fn assert_kubelet_inhibitor(fake: &FakeLogind, pid: u32) -> String {
    let inh = fake.inhibitors();
    assert_eq!(inh.len(), 1);
    assert_eq!(
        (
            inh[0].what.as_str(),
            inh[0].who.as_str(),
            inh[0].why.as_str(),
            inh[0].mode.as_str()
        ),
        (
            "shutdown",
            "kubelet",
            "Kubelet needs time to handle node shutdown",
            "delay"
        )
    );
    assert_eq!(inh[0].pid, pid);
    inh[0].sender.clone()
}

/// The method calls `sender` makes, as `wire` sees them, up to its `Inhibit`; an `AddMatch` for
/// `PrepareForShutdown` as `"AddMatch(PrepareForShutdown)"`, other `AddMatch`es left out.
async fn calls_until_inhibit(wire: &mut zbus::MessageStream, sender: &str) -> Vec<String> {
    let mut order = Vec::new();
    while !order.iter().any(|m| m == "Inhibit") {
        let msg = tokio::time::timeout(Duration::from_secs(5), futures_util::StreamExt::next(wire))
            .await
            .expect("monitor saw no Inhibit")
            .unwrap()
            .unwrap();
        let h = msg.header();
        if h.message_type() != zbus::message::Type::MethodCall
            || h.sender().map(zbus::names::UniqueName::as_str) != Some(sender)
        {
            continue;
        }
        let member = h.member().unwrap().to_string();
        if member == "AddMatch" {
            let rule: String = msg.body().deserialize().unwrap();
            if rule.contains("PrepareForShutdown") {
                order.push("AddMatch(PrepareForShutdown)".to_string());
            }
        } else {
            order.push(member);
        }
    }
    order
}

/// The records `r` of a 0.6 s drain with 0.2 s progress: in order, a full drain, then the
/// release, and the shutdown `sd` held through it all.
fn assert_drained_then_released(r: &[Value], sd: &nthd_testkit::logind::Shutdown) {
    assert_eq!(events(r), ["locked", "prepare", "drained", "released"]);
    let t = |name: &str| {
        r.iter().find(|v| v["event"] == name).unwrap()["t_ms"]
            .as_u64()
            .unwrap()
    };
    assert!(t("drained") - t("prepare") >= 600);
    assert!(t("released") >= t("drained"));
    let progress = r.iter().filter(|v| v["event"] == "draining").count();
    assert!((1..=4).contains(&progress), "{progress} progress records");
    // logind held the shutdown through the whole drain.
    assert!(nthd_testkit::unix_ms(sd.proceeded_at) >= t("drained"));
    assert!(r
        .windows(2)
        .all(|w| w[0]["t_ms"].as_u64() <= w[1]["t_ms"].as_u64()));
}

#[tokio::test]
async fn fake_kubelet_fails_loudly_when_inhibit_fails() {
    let bus = PrivateBus::start().unwrap();
    let fake = FakeLogind::serve(bus.address()).await.unwrap();
    fake.set_inhibit_error(Some((
        "org.freedesktop.DBus.Error.AccessDenied",
        "no locks for you",
    )));
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("k.jsonl");
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        Command::new(KUBELET)
            .arg("--record")
            .arg(&rec)
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("Inhibit") && msg.contains("no locks for you"),
        "{msg}"
    );
    assert!(read_record(&rec).is_empty());

    // No bus at all.
    let out = Command::new(KUBELET)
        .arg("--record")
        .arg(&rec)
        .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("system bus"));

    let out = Command::new(KUBELET).output().await.unwrap();
    assert_eq!(out.status.code(), Some(2), "--record is required");
}

#[tokio::test]
async fn fake_kubelet_refuses_pods_without_their_group_before_touching_anything() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("kubelet.jsonl");
    for (args, says) in [
        (
            &["--pod", "a/b:burstable:2", "--group", "1:5"][..],
            "group 2",
        ),
        (
            &["--pod", "a/b:gold"][..],
            "guaranteed, burstable or besteffort",
        ),
        (
            &["--pod", "a/b:burstable", "--group", "0:x"][..],
            "GROUP:SECS",
        ),
    ] {
        let out = Command::new(KUBELET)
            .arg("--record")
            .arg(&rec)
            .args(args)
            .env("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!rec.exists(), "{args:?}");
    }
}

#[tokio::test]
async fn fake_logind_binary_prints_calls_as_json_lines() {
    let bus = PrivateBus::start().unwrap();
    let (mut child, mut out) = spawn_ready_fake_logind(&bus).await;

    let conn = bus.connect().await.unwrap();
    let p = login1_proxy(&conn).await.unwrap();
    assert_eq!(p.can_power_off().await.unwrap(), "challenge");
    let fd = p
        .inhibit("shutdown", "kubelet", "why", "delay")
        .await
        .unwrap();
    let before = nthd_testkit::now_ms();
    p.power_off(true).await.unwrap();

    let mut seen = Vec::new();
    while !seen.iter().any(|v: &Value| v["event"] == "shutdown") {
        seen.push(serde_json::from_str(&next_line(&mut out).await).unwrap());
    }
    let kinds = event_kinds(&seen);
    // The Inhibit call and the inhibitor_added line may come in either order.
    assert_eq!(kinds[0], "call:CanPowerOff");
    let mut mid = kinds[1..3].to_vec();
    mid.sort();
    assert_eq!(mid, ["call:Inhibit", "inhibitor_added"]);
    assert_eq!(kinds[3..], ["call:PowerOff", "shutdown"]);
    let po = &seen[3];
    assert_eq!(po["args"], serde_json::json!([true]));
    assert!(po["t_ms"].as_u64().unwrap() >= before);
    let sd = &seen[4];
    assert_eq!(sd["reason"], "delay-timeout");
    assert!(sd["t_ms"].as_u64().unwrap() - sd["requested_t_ms"].as_u64().unwrap() >= 300);
    drop(fd);
    let removed: Value = serde_json::from_str(&next_line(&mut out).await).unwrap();
    assert_eq!(removed["event"], "inhibitor_removed");

    sigterm(&child).await;
    let last: Value = serde_json::from_str(&next_line(&mut out).await).unwrap();
    assert_eq!(last["event"], "exit");
    assert!(wait_exit(&mut child).await.success());

    // With the name taken, a second instance fails with a clear message.
    let _first = FakeLogind::serve(bus.address()).await.unwrap();
    let o = Command::new(LOGIND)
        .args(["--address", bus.address()])
        .output()
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot serve org.freedesktop.login1"));
}

/// A child's piped stdout or stderr, by lines.
fn lines_of<R: tokio::io::AsyncRead + Unpin>(pipe: Option<R>) -> Lines<BufReader<R>> {
    BufReader::new(pipe.expect("the pipe was asked for")).lines()
}

/// `nthd-fake-logind` on `bus` (delay max 0.3 s, `CanPowerOff` "challenge"), and its stdout
/// past the `ready` line.
async fn spawn_ready_fake_logind(bus: &PrivateBus) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(LOGIND)
        .args([
            "--inhibit-delay-max-secs",
            "0.3",
            "--can-power-off",
            "challenge",
        ])
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = lines_of(child.stdout.take());
    let ready: Value = serde_json::from_str(&next_line(&mut out).await).unwrap();
    assert_eq!(ready["event"], "ready");
    assert_eq!(ready["address"], bus.address());
    (child, out)
}

/// The `event` of each line, with a call's method: `"call:PowerOff"`, `"shutdown"`, ...
fn event_kinds(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .map(|v| match v["event"].as_str().unwrap() {
            "call" => format!("call:{}", v["method"].as_str().unwrap()),
            e => e.to_string(),
        })
        .collect()
}
