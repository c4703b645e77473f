//! `nthd simulate` and the Prometheus metrics, with the real binary.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

fn nthd(bus: &str, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = common::nthd_command(bus);
    c.args(args)
        // A drill writes the state record: never into the host's /var/lib/nthd.
        .env(
            "NTHD_STATE_DIR",
            std::env::temp_dir().join(format!("nthd-operability-{}", std::process::id())),
        );
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_narrates_without_yes_and_acts_with_it() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let addr = bus.address().to_string();

    let out = off_the_runtime(&addr, &["simulate", "spot-terminate"]).await;
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{s}");
    assert!(
        s.contains("decision: poweroff") && s.contains("dry run: nthd would call"),
        "{s}"
    );
    assert_eq!(logind.power_off_count(), 0, "never without --yes");

    let out = off_the_runtime(&addr, &["simulate", "spot-hibernate", "--yes"]).await;
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("nothing to carry out"), "{s}");
    assert_eq!(
        logind.power_off_count(),
        0,
        "hibernate is logged, never acted on"
    );

    let out = off_the_runtime(&addr, &["simulate", "spot-terminate", "--yes", "--dry-run"]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("dry run"));
    assert_eq!(logind.power_off_count(), 0, "--dry-run wins over --yes");

    let out = off_the_runtime(&addr, &["simulate", "spot-terminate", "--yes"]).await;
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{s}");
    assert!(s.contains("done: logind accepted PowerOff"), "{s}");
    assert_eq!(logind.power_off_count(), 1);
    assert_eq!(
        logind.calls_of("PowerOff")[0].args,
        serde_json::json!([false])
    );

    // A denial is reported, with a failing exit code. (The accepted PowerOff above left the
    // fake logind preparing for shutdown; a drill would stand down, so that is undone first.)
    logind.set_preparing(false);
    logind.set_power_off_error(Some(("org.freedesktop.DBus.Error.AccessDenied", "denied")));
    let out = off_the_runtime(&addr, &["simulate", "gcp-preempt", "--yes"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("org.freedesktop.login1.power-off"));

    let out = nthd(&addr, &["simulate", "volcano"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown notice kind `volcano`"));
}

/// `nthd ARGS` on the bus at `bus`, on a blocking thread: the fake logind answers on this
/// runtime meanwhile.
async fn off_the_runtime(bus: &str, args: &[&str]) -> std::process::Output {
    let bus = bus.to_string();
    let args: Vec<String> = args.iter().map(std::string::ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        nthd(&bus, &args, &[])
    })
    .await
    .unwrap()
}

/// A strict-enough parser of the Prometheus text exposition format: every sample belongs to a
/// metric with HELP and TYPE, names and labels are well formed, values are numbers.
fn parse_exposition(text: &str) -> BTreeMap<String, f64> {
    let mut typed = std::collections::HashSet::new();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().unwrap();
            let ty = it.next().unwrap();
            assert!(["gauge", "counter"].contains(&ty), "{line}");
            typed.insert(name.to_string());
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad line {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}"
        );
        assert!(typed.contains(name), "sample before TYPE: {line}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                for kv in labels[1..labels.len() - 1].split(',') {
                    let (k, v) = kv.split_once('=').unwrap();
                    assert!(
                        k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(v.starts_with('"') && v.ends_with('"'), "{line}");
                }
            }
        }
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line}"));
        assert!(
            out.insert(series.to_string(), v).is_none(),
            "duplicate series {series}"
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_textfile_and_endpoint_follow_the_notice() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nthd.prom");
    let listen = format!("127.0.0.1:{}", common::free_port());
    imds.set_identity("aws");
    let mut child = KillOnDrop(
        common::nthd_command(bus.address())
            .arg("run")
            .env("NTHD_PROVIDER", "aws")
            .env("NTHD_IMDS_ENDPOINT", imds.url())
            .env("NTHD_POLL_INTERVAL", "200ms")
            .env("NTHD_STATE_DIR", dir.path())
            .env("NTHD_METRICS_TEXTFILE", &file)
            .env("NTHD_METRICS_LISTEN", &listen)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let read = |f: &std::path::Path| std::fs::read_to_string(f).unwrap_or_default();
    let end = Instant::now() + Duration::from_secs(5);
    // The identity is read right after the first poll; wait for both.
    while !(read(&file).contains("nthd_last_successful_poll_timestamp_seconds")
        && read(&file).contains("instance_type=\"m5.large\""))
        && Instant::now() < end
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    check_idle_metrics(&parse_exposition(&read(&file)));

    assert!(common::provider::spot_notice_powers_off(&imds, &logind, "2099-01-01T00:00:00Z").await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    check_notice_metrics(&parse_exposition(&read(&file)));
    check_metrics_endpoint(&listen);

    // Stopped cleanly, nthd leaves no temporary file next to the textfile (it writes a
    // temporary and renames it; while running, one may exist for a moment).
    let pid = child.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(child.0.wait().unwrap().success());
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// The metrics before any notice: none, and the one nthd_info series with the identity.
fn check_idle_metrics(m: &BTreeMap<String, f64>) {
    assert_eq!(
        m["nthd_notice{kind=\"spot-terminate\",provider=\"aws\"}"],
        0.0
    );
    assert_eq!(m["nthd_termination_imminent{provider=\"aws\"}"], 0.0);
    // One nthd_info series: the cloud and version, and the capacity-pool labels.
    let info: Vec<_> = m
        .iter()
        .filter(|(k, _)| k.starts_with("nthd_info{"))
        .collect();
    assert_eq!(info.len(), 1, "{info:?}");
    let (labels, value) = info[0];
    assert_eq!(*value, 1.0);
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    for l in [
        "provider=\"aws\"",
        version.as_str(),
        "instance_type=\"m5.large\"",
        "zone=\"us-east-1a\"",
        "lifecycle=\"spot\"",
    ] {
        assert!(labels.contains(l), "{labels} lacks {l}");
    }
}

/// The metrics once the spot notice was acted on.
fn check_notice_metrics(m: &BTreeMap<String, f64>) {
    assert_eq!(
        m["nthd_notice{kind=\"spot-terminate\",provider=\"aws\"}"],
        1.0
    );
    assert_eq!(m["nthd_termination_imminent{provider=\"aws\"}"], 1.0);
    assert!(m["nthd_termination_in_seconds{provider=\"aws\"}"] > 3600.0);
    // 2099-01-01T00:00:00Z, absolute: it does not go stale between textfile writes.
    assert_eq!(
        m["nthd_termination_deadline_timestamp_seconds{provider=\"aws\"}"],
        4_070_908_800.0
    );
    assert!(
        m.contains_key("nthd_notice_deadline_seconds{kind=\"spot-terminate\",provider=\"aws\"}")
    );
    assert_eq!(
        m["nthd_actions_total{action=\"poweroff\",kind=\"spot-terminate\",result=\"ok\"}"],
        1.0
    );
    assert!(m["nthd_imds_reads_total{outcome=\"ok\",source=\"aws/spot/instance-action\"}"] >= 2.0);
    assert!(m["nthd_last_successful_poll_timestamp_seconds"] > 1.7e9);
}

/// The same text over HTTP at `listen`, and 404 for any other path.
fn check_metrics_endpoint(listen: &str) {
    let mut s = std::net::TcpStream::connect(listen).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
    let body = resp.split_once("\r\n\r\n").unwrap().1;
    let m2 = parse_exposition(body);
    assert_eq!(m2["nthd_termination_imminent{provider=\"aws\"}"], 1.0);
    let mut s = std::net::TcpStream::connect(listen).unwrap();
    s.write_all(b"GET /other HTTP/1.1\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 404"), "{resp}");
}

/// Kills the child if the test ends early, so a failed test leaves no daemon behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `nthd --version` names what a bug report needs: version, target triple and commit; `-V`
/// stays the plain version that the man page carries.
#[test]
fn version_names_the_target_and_the_commit() {
    let long = nthd("unix:path=/nonexistent", &["--version"], &[]);
    assert!(long.status.success());
    let long = String::from_utf8(long.stdout).unwrap();
    let want = format!("nthd {} (", env!("CARGO_PKG_VERSION"));
    assert!(long.starts_with(&want), "{long}");
    let inner = long.trim().trim_start_matches(&want).trim_end_matches(')');
    let (target, commit) = inner.split_once(", commit ").expect(&long);
    assert!(
        target.starts_with(std::env::consts::ARCH) && target.contains("-linux-"),
        "{long}"
    );
    assert!(!commit.is_empty(), "{long}");
    let short = nthd("unix:path=/nonexistent", &["-V"], &[]);
    let short = String::from_utf8(short.stdout).unwrap();
    assert_eq!(short.trim(), format!("nthd {}", env!("CARGO_PKG_VERSION")));
}

/// The state records `nthd simulate --yes` wrote: (id, action, phase).
fn drill_records(dir: &std::path::Path) -> Vec<(String, String, String)> {
    let body = std::fs::read_to_string(dir.join("state.json")).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["records"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("id"), s("action"), s("phase"))
        })
        .collect()
}

/// The first drill: PowerOff accepted, recorded done, logged by the executor, counted.
fn check_first_drill(
    out: &std::process::Output,
    logind: &FakeLogind,
    state_dir: &std::path::Path,
    textfile: &std::path::Path,
) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("done: logind accepted PowerOff"),
        "{stdout}"
    );
    assert_eq!(logind.power_off_count(), 1);
    let records = drill_records(state_dir);
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(
        records[0].0.starts_with("simulate/spot-terminate/"),
        "{records:?}"
    );
    assert_eq!(
        (records[0].1.as_str(), records[0].2.as_str()),
        ("poweroff", "done")
    );
    assert!(
        stderr.contains("called org.freedesktop.login1.Manager.PowerOff(false) for simulate/"),
        "the executor's action line: {stderr}"
    );
    let prom = std::fs::read_to_string(textfile).unwrap_or_default();
    assert!(
        prom.lines().any(|l| l.starts_with("nthd_actions_total{")
            && l.contains("result=\"ok\"")
            && l.ends_with(" 1")),
        "{prom}"
    );
}

/// A fire drill takes the path a real notice takes (`executor.rs`): it writes the state record,
/// counts the action in the metrics, and stands down when a shutdown is already under way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_yes_goes_through_the_executor() {
    let (bus, logind, dir) = common::logind_world().await;
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    let textfile = dir.path().join("nthd.prom");
    let env = [
        ("NTHD_STATE_DIR", state_dir.to_str().unwrap().to_string()),
        (
            "NTHD_METRICS_TEXTFILE",
            textfile.to_str().unwrap().to_string(),
        ),
    ];
    let drill = |addr: String, env: [(&'static str, String); 2]| async move {
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            nthd(&addr, &["simulate", "spot-terminate", "--yes"], &env)
        })
        .await
        .unwrap()
    };

    let out = drill(bus.address().to_string(), env.clone()).await;
    check_first_drill(&out, &logind, &state_dir, &textfile);

    // A shutdown is already under way (someone else's, or the drill's own): stand down.
    logind.set_preparing(true);
    let out = drill(bus.address().to_string(), env.clone()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("stood down: logind is already preparing for shutdown"),
        "{stdout}"
    );
    assert_eq!(logind.power_off_count(), 1, "no second PowerOff");
    let records = drill_records(&state_dir);
    assert_eq!(records.len(), 2, "{records:?}");
    assert_ne!(
        records[0].0, records[1].0,
        "two drills in one second, one id"
    );
    assert_eq!(
        (records[1].1.as_str(), records[1].2.as_str()),
        ("poweroff", "done")
    );
    let prom = std::fs::read_to_string(&textfile).unwrap_or_default();
    assert!(
        prom.contains("result=\"already_shutting_down\"} 1"),
        "{prom}"
    );
}

/// Makes a FIFO at `path`, as user nthd can in the directories it owns.
fn mkfifo(path: &std::path::Path) {
    nthd::testing::mkfifo(path);
}

/// Runs `cmd` to its end, or kills it and fails after `limit`: a test that would otherwise
/// hang on a blocked child fails instead, saying so.
fn output_within(mut cmd: Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: it blocks\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// User nthd owns the state and status directories, and a drill runs as root: a FIFO planted
/// at `state.json` and at `status.json` must not hold the drill. It finishes promptly, says
/// what it found, sets the state FIFO aside and records the drill in a fresh state file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_planted_for_a_drill_does_not_hold_it() {
    let (bus, logind, dir) = common::logind_world().await;
    let (state_dir, run_dir) = (dir.path().join("state"), dir.path().join("run"));
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::create_dir(&run_dir).unwrap();
    mkfifo(&state_dir.join("state.json"));
    let status = run_dir.join("status.json");
    mkfifo(&status);
    let mut cmd = common::nthd_command(bus.address());
    cmd.args(["simulate", "spot-terminate", "--yes"])
        .env("NTHD_STATE_DIR", &state_dir)
        .env("NTHD_STATUS_FILE", &status);
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || output_within(cmd, Duration::from_secs(20)))
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        stdout.contains("done: logind accepted PowerOff"),
        "{stdout}"
    );
    assert_eq!(logind.power_off_count(), 1);
    let state = state_dir.join("state.json").display().to_string();
    for want in [
        format!("{state} is a FIFO (named pipe), not a regular file"),
        "moved it to".to_string(),
        format!("{} is a FIFO (named pipe)", status.display()),
    ] {
        assert!(stderr.contains(&want), "{want:?} not in:\n{stderr}");
    }
    let records = drill_records(&state_dir);
    assert_eq!(records.len(), 1, "{records:?}");
    assert!(records[0].0.starts_with("simulate/"), "{records:?}");
    let aside: Vec<_> = std::fs::read_dir(&state_dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("state.json.unreadable-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "the FIFO is not set aside");
}

/// A drill waiting for its moment (`--deadline-in`) and the daemon acting meanwhile, as two
/// real processes on one state directory: the record the daemon writes while the drill waits
/// is still there after the drill writes its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_drill_keeps_what_the_daemon_wrote_meanwhile() {
    let (bus, logind, dir) = common::logind_world().await;
    logind.set_inhibit_delay_max(Duration::from_secs(1));
    let state_dir = dir.path().join("state");
    std::fs::create_dir(&state_dir).unwrap();
    // Due at the deadline minus the drain budget (1 s) and the margin (1 s): 4 s from now.
    let mut drill = common::nthd_command(bus.address())
        .args(["simulate", "scheduled-stop", "--deadline-in", "6s", "--yes"])
        .env("NTHD_STATE_DIR", &state_dir)
        .env("NTHD_SAFETY_MARGIN", "1s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let mut daemon = common::Nthd::start(bus.address(), &imds.url(), &state_dir, &[]);
    imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#,
        ),
    );
    let end = Instant::now() + Duration::from_secs(10);
    while !drill_records(&state_dir)
        .iter()
        .any(|r| r.0 == "aws/spot/terminate" && r.2 == "done")
    {
        assert!(Instant::now() < end, "no daemon record:\n{}", daemon.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        drill.try_wait().unwrap().is_none(),
        "the drill finished before the daemon wrote: nothing was interleaved"
    );
    let out = tokio::task::spawn_blocking(move || drill.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("waiting"),
        "the drill did not wait: {stdout}"
    );
    let records = drill_records(&state_dir);
    assert!(
        records
            .iter()
            .any(|r| r.0 == "aws/spot/terminate" && r.2 == "done"),
        "the drill's write lost the daemon's record: {records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r.0.starts_with("simulate/scheduled-stop/") && r.2 == "done"),
        "{records:?}"
    );
    assert!(daemon.stop().await.success(), "{}", daemon.log());
}
