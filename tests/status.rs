//! `nthd status` and its node-problem-detector plugin mode, against the real daemon: the
//! plugin is run exactly as NPD's custom plugin monitor runs it (exec with a timeout, stdout
//! cut at `max_output_length`, exit code 0/1/other), before, during and after a notice, and the
//! shipped monitor config is checked against NPD's documented fields.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::Nthd;
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

/// The shipped NPD monitor config.
const MONITOR: &str = include_str!("../packaging/node-problem-detector/nthd-monitor.json");
/// The shipped configs for the conditions Karpenter's Azure and GCP providers read.
const KARPENTER: [&str; 2] = [
    include_str!("../packaging/node-problem-detector/nthd-karpenter-azure.json"),
    include_str!("../packaging/node-problem-detector/nthd-karpenter-gcp.json"),
];

/// What NPD makes of one plugin run: its status and message.
#[derive(Debug, PartialEq)]
enum Npd {
    Ok(String),
    NonOk(String),
    Unknown(String),
}

/// Runs the shipped monitor's first rule (`TerminationNotice`) as NPD does.
fn run_like_npd(status_file: &Path) -> Npd {
    run_rule(MONITOR, |_| true, status_file)
}

/// Runs the first rule of `config` that `pick` takes as NPD does
/// (pkg/custompluginmonitor/plugin): exec the rule's path with its args, kill it at the timeout
/// (Unknown), keep at most `max_output_length` bytes of stdout.
fn run_rule(config: &str, pick: impl Fn(&serde_json::Value) -> bool, status_file: &Path) -> Npd {
    let cfg: serde_json::Value = serde_json::from_str(config).unwrap();
    let rule = cfg["rules"].as_array().unwrap().iter().find(|r| pick(r));
    let rule = rule.expect("a rule");
    let args: Vec<String> = rule["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let timeout =
        nthd::testing::timefmt::parse_duration(rule["timeout"].as_str().unwrap()).unwrap();
    let max = cfg["pluginConfig"]["max_output_length"].as_u64().unwrap() as usize;
    assert_eq!(
        rule["path"], "/usr/libexec/nthd/nthd",
        "the packaged binary's path in the directory the NPD DaemonSet mounts"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_nthd"))
        .args(&args)
        .env_clear()
        .env("NTHD_STATUS_FILE", status_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + timeout;
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if Instant::now() > end {
            let _ = child.kill();
            return Npd::Unknown("timeout".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(
        out.trim_end().len() <= 80 && out.lines().count() == 1,
        "one line of at most 80 bytes: {out:?}"
    );
    let msg: String = out.trim_end().chars().take(max).collect();
    match code {
        Some(0) => Npd::Ok(msg),
        Some(1) => Npd::NonOk(msg),
        _ => Npd::Unknown(msg),
    }
}

async fn npd(file: &Path) -> Npd {
    let f = file.to_path_buf();
    tokio::task::spawn_blocking(move || run_like_npd(&f))
        .await
        .unwrap()
}

/// Waits until the plugin says what `want` accepts.
async fn npd_until(file: &Path, want: impl Fn(&Npd) -> bool, n: &Nthd) -> Npd {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let got = npd(file).await;
        if want(&got) {
            return got;
        }
        assert!(Instant::now() < end, "last: {got:?}\n{}", n.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn scheduled_stop(in_secs: u64) -> String {
    let at = SystemTime::now() + Duration::from_secs(in_secs);
    format!(
        r#"[{{"NotBefore":"{}","Code":"instance-stop","EventId":"instance-event-41","State":"active"}}]"#,
        nthd::testing::timefmt::format_aws(at)
    )
}

/// The human screen and the JSON, as another process reads them.
fn check_status_screen_and_json(bus: &str, file: &std::path::Path) {
    let out = common::nthd_command(bus)
        .args(["status"])
        .env("NTHD_STATUS_FILE", file)
        .output()
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{screen}");
    assert!(screen.contains("cloud:      aws"), "{screen}");
    assert!(screen.contains("aws/spot/instance-action"), "{screen}");
    let out = common::nthd_command(bus)
        .args(["status", "--json"])
        .env("NTHD_STATUS_FILE", file)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["cloud"], "aws");
    assert_eq!(v["notices"].as_array().unwrap().len(), 0);
    // The identity the mock gives, as the metadata service would.
    use nthd_testkit::imds::identity as id;
    assert_eq!(v["instance"]["id"], id::AWS_INSTANCE_ID);
    assert_eq!(v["instance"]["type"], id::AWS_INSTANCE_TYPE);
    assert_eq!(v["instance"]["zone"], id::AWS_ZONE);
    assert_eq!(v["instance"]["lifecycle"], "spot");
    assert!(
        screen.contains("instance:   i-0123456789abcdef0, m5.large, us-east-1a, spot"),
        "{screen}"
    );
}

/// The status file, made old by hand on the boot's clock the daemon wrote and on the wall
/// clock for a file without it, reads as stale.
async fn made_old_it_reads_as_stale(file: &std::path::Path) {
    let mut s: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let boot_ms = s["written_boottime_ms"]
        .as_u64()
        .expect("the boot clock's time");
    if boot_ms > 600_000 {
        let mut on_boot_clock = s.clone();
        on_boot_clock["written_boottime_ms"] = (boot_ms - 600_000).into();
        std::fs::write(file, serde_json::to_vec(&on_boot_clock).unwrap()).unwrap();
        assert!(matches!(npd(file).await, Npd::Unknown(m) if m.contains("stale")));
    }
    let old = SystemTime::now() - Duration::from_secs(600);
    s["written_at"] = nthd::testing::timefmt::format_rfc3339(old).into();
    s["written_boottime_ms"] = serde_json::Value::Null;
    std::fs::write(file, serde_json::to_vec(&s).unwrap()).unwrap();
    assert!(matches!(npd(file).await, Npd::Unknown(m) if m.contains("stale")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_npd_plugin_follows_a_notice_through_its_life() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_inhibit_delay_max(Duration::from_secs(5));
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set_identity("aws");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("status.json");

    // Before the daemon ever ran: unknown, and NPD's condition goes Unknown.
    assert!(matches!(npd(&file).await, Npd::Unknown(m) if m.contains("not running")));

    let file_s = file.to_str().unwrap().to_string();
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        dir.path(),
        &[
            ("NTHD_STATUS_FILE", &file_s),
            ("NTHD_SLOW_POLL_INTERVAL", "300ms"),
        ],
    );
    let ok = npd_until(&file, |r| matches!(r, Npd::Ok(_)), &n).await;
    assert_eq!(ok, Npd::Ok("no interruption pending".into()));

    // A scheduled stop an hour away: nthd will power off at the last safe moment.
    imds.set(
        aws::SCHEDULED_PATH,
        Response::json(200, scheduled_stop(3600)),
    );
    let during = npd_until(&file, |r| matches!(r, Npd::NonOk(_)), &n).await;
    let Npd::NonOk(line) = &during else {
        unreachable!()
    };
    assert!(line.starts_with("scheduled-stop: poweroff at "), "{line}");
    assert!(line.contains("deadline"), "{line}");
    assert_eq!(logind.power_off_count(), 0);
    // The same facts in Kubernetes' words, the cloud named; no shutdown asked for yet.
    let planned = run_rule(MONITOR, |r| r["condition"] == "MaintenancePlanned", &file);
    assert!(
        matches!(&planned, Npd::NonOk(l) if l.starts_with("aws scheduled-stop: poweroff at ")),
        "{planned:?}"
    );
    let gns = |r: &serde_json::Value| r["condition"] == "GracefulNodeShutdownInProgress";
    assert!(matches!(run_rule(MONITOR, gns, &file), Npd::Ok(_)));
    // On AWS, the conditions Karpenter reads on Azure and GCP stay False.
    for config in KARPENTER {
        assert!(matches!(run_rule(config, |_| true, &file), Npd::Ok(_)));
    }

    // The platform withdraws it: the condition clears.
    imds.set(aws::SCHEDULED_PATH, Response::json(200, "[]"));
    npd_until(&file, |r| matches!(r, Npd::Ok(_)), &n).await;

    check_status_screen_and_json(bus.address(), &file);
    // Stopped: the file stays, and reads as stale once it is old (made old here by hand, on the
    // boot's clock the daemon wrote, and on the wall clock for a file without it).
    assert!(n.stop().await.success());
    made_old_it_reads_as_stale(&file).await;
}

/// The fields of a shipped config that NPD does not know, and its checks that fail.
fn config_faults(text: &str) -> Vec<String> {
    let cfg: serde_json::Value = serde_json::from_str(text).unwrap();
    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    // pkg/custompluginmonitor/types/config.go (CustomPluginConfig, pluginGlobalConfig,
    // CustomRule) and pkg/types (Condition).
    let top = "plugin pluginConfig source metricsReporting conditions rules";
    let plugin = "invoke_interval timeout max_output_length concurrency \
                  enable_message_change_based_condition_update skip_initial_status";
    let rule = "type condition reason path args timeout";
    let mut faults = Vec::new();
    let mut unknown = |v: &serde_json::Value, known: &str, what: &str| {
        for k in keys(v) {
            if !known.split_whitespace().any(|n| n == k) {
                faults.push(format!("unknown {what} field {k}"));
            }
        }
    };
    unknown(&cfg, top, "top-level");
    unknown(&cfg["pluginConfig"], plugin, "pluginConfig");
    for r in cfg["rules"].as_array().unwrap() {
        unknown(r, rule, "rule");
    }
    for c in cfg["conditions"].as_array().unwrap() {
        unknown(c, "type reason message", "condition");
    }
    faults.extend(rule_faults(&cfg));
    faults
}

/// What is wrong with `cfg`'s rules: a permanent rule per declared condition, each running
/// `nthd status` with an `--npd` the command takes, and timeouts that fit the interval.
fn rule_faults(cfg: &serde_json::Value) -> Vec<String> {
    let d = |v: &serde_json::Value| {
        nthd::testing::timefmt::parse_duration(v.as_str().unwrap()).unwrap()
    };
    let plugin = &cfg["pluginConfig"];
    let mut faults = Vec::new();
    if d(&plugin["timeout"]) >= d(&plugin["invoke_interval"]) {
        faults.push("the plugin's timeout does not fit its interval".into());
    }
    let rules = cfg["rules"].as_array().unwrap();
    for c in cfg["conditions"].as_array().unwrap() {
        let ruled = rules
            .iter()
            .any(|r| r["type"] == "permanent" && r["condition"] == c["type"]);
        if !ruled {
            faults.push(format!("no permanent rule sets {}", c["type"]));
        }
    }
    for r in rules {
        let args: Vec<&str> = r["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let parsed = nthd::status_only(["nthd"].iter().copied().chain(args.iter().copied()));
        if args.len() != 2 || !parsed.is_some_and(|(_, json, npd)| !json && npd.is_some()) {
            faults.push(format!("{args:?} is not a status --npd command"));
        }
        if d(&r["timeout"]) > d(&plugin["timeout"]) {
            faults.push(format!("{} outlasts the plugin's timeout", r["reason"]));
        }
    }
    if plugin["max_output_length"] != 80 {
        faults.push("max_output_length is not the plugin's 80 bytes".into());
    }
    faults
}

/// Every shipped monitor config uses only fields NPD knows, and each condition it declares has
/// a rule that `nthd status --npd` can run.
#[test]
fn the_shipped_monitor_configs_use_only_npd_fields() {
    for config in [MONITOR].iter().chain(&KARPENTER) {
        assert_eq!(config_faults(config), Vec::<String>::new(), "{config}");
    }
    let cfg: serde_json::Value = serde_json::from_str(MONITOR).unwrap();
    let types: Vec<&str> = cfg["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "TerminationNotice",
            "MaintenancePlanned",
            "GracefulNodeShutdownInProgress"
        ]
    );
    let temporary = &cfg["rules"][1];
    assert_eq!(
        (&temporary["type"], &temporary["reason"]),
        (&"temporary".into(), &"TerminationNotice".into())
    );
    // What Karpenter's providers read: Azure's type and reason, GCP's type.
    let azure: serde_json::Value = serde_json::from_str(KARPENTER[0]).unwrap();
    assert_eq!(azure["rules"][0]["condition"], "PreemptionScheduled");
    assert_eq!(azure["rules"][0]["reason"], "SpotEvictionIncoming");
    let gcp: serde_json::Value = serde_json::from_str(KARPENTER[1]).unwrap();
    assert_eq!(gcp["rules"][0]["condition"], "GCESpotPreempting");
}

/// The config check finds what it is there to find.
#[test]
fn a_planted_config_fault_is_found() {
    let bad = MONITOR
        .replace("\"--npd=maintenance-planned\"", "\"--npd=maintenance\"")
        .replace("\"concurrency\"", "\"parallelism\"");
    let faults = config_faults(&bad);
    assert_eq!(faults.len(), 2, "{faults:?}");
    let no_rule = MONITOR.replace(
        "\"condition\": \"MaintenancePlanned\"",
        "\"condition\": \"Other\"",
    );
    assert_eq!(
        config_faults(&no_rule),
        ["no permanent rule sets \"MaintenancePlanned\""]
    );
}

/// NPD runs the plugin as root with a 5 s timeout, and user nthd owns the status directory: a
/// FIFO planted at the status file must not make the plugin time out. It says "unknown" and
/// why, at once; so does `nthd status`.
#[test]
fn a_fifo_at_the_status_file_is_unknown_not_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("status.json");
    nthd::testing::mkfifo(&file);
    let started = Instant::now();
    let got = run_like_npd(&file);
    assert!(
        matches!(&got, Npd::Unknown(m) if m.starts_with("unknown: ") && m.contains("is a FIFO")),
        "{got:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_nthd"))
        .arg("status")
        .env_clear()
        .env("NTHD_STATUS_FILE", &file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let want = format!(
        "nthd status: unknown: {} is a FIFO (named pipe), not a regular file",
        file.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
}
