//! Every `NTHD_*` variable with a bad value, one at a time, against the real binary, a spot
//! notice on the mock IMDS and the fake logind: nthd never stops. It keeps protecting the node
//! (the notice is powered off for), or, for a setting on docs/configuration.md's list of safe
//! choices ("When a setting is wrong", the list the code keeps: `nthd::SAFE_CHOICE`), takes the
//! choice that cannot power off and says so.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use clap::CommandFactory;
use common::Nthd;
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};

/// A value each setting cannot use: a path nobody can create for the path settings, a word
/// for the rest (not a duration, level, kind, URL, address or yes/no).
fn bad_value(arg: &clap::Arg) -> &'static str {
    let names: Vec<&str> = arg
        .get_value_names()
        .map(|v| v.iter().map(clap::builder::Str::as_str).collect())
        .unwrap_or_default();
    if names.iter().any(|n| *n == "PATH" || *n == "DIR") {
        "/proc/nthd-no-such-dir/x"
    } else if !arg.get_action().takes_values() {
        "maybe"
    } else {
        "bogus!"
    }
}

/// The variables docs/configuration.md lists with a safe choice, and the choice, from its
/// table.
fn documented_safe() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .unwrap();
    let table = doc
        .split("| setting | a bad value acts as | why not the default |")
        .nth(1)
        .expect("docs/configuration.md has the table of safe choices");
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('`').collect();
            (cells[1].to_string(), cells[5].to_string())
        })
        .collect()
}

/// The names on the code's list of safe choices.
fn safe_list() -> Vec<String> {
    nthd::SAFE_CHOICE
        .iter()
        .map(|(n, _, _)| n.to_string())
        .collect()
}

fn on_list(list: &[String], var: &str) -> bool {
    list.iter().any(|name| match name.strip_suffix('*') {
        Some(prefix) => var.starts_with(prefix),
        None => var == name,
    })
}

#[test]
fn the_documented_list_is_the_code_s() {
    let code: Vec<(String, String)> = nthd::SAFE_CHOICE
        .iter()
        .map(|(n, v, _)| (n.to_string(), v.to_string()))
        .collect();
    assert_eq!(documented_safe(), code);
}

/// What became of nthd with one bad variable.
enum Outcome {
    PoweredOff,
    Exited(Option<i32>),
    StillWatching,
}

async fn run_with(
    world: &(
        nthd_testkit::logind::PrivateBus,
        nthd_testkit::logind::FakeLogind,
        tempfile::TempDir,
    ),
    imds: &MockImds,
    var: &str,
    value: &str,
) -> (Outcome, String) {
    let (bus, logind, dir) = world;
    let state = tempfile::tempdir_in(dir.path()).unwrap();
    let before = common::successes(logind, "PowerOff");
    // As the unit starts it: systemd sets INVOCATION_ID.
    let env = [
        (var, value),
        ("INVOCATION_ID", "0123456789abcdef0123456789abcdef"),
    ];
    let mut n = Nthd::start(bus.address(), &imds.url(), state.path(), &env);
    let end = Instant::now() + Duration::from_secs(10);
    let outcome = loop {
        if common::successes(logind, "PowerOff") > before {
            break Outcome::PoweredOff;
        }
        if let Some(st) = n.child.try_wait().unwrap() {
            break Outcome::Exited(st.code());
        }
        if Instant::now() > end {
            break Outcome::StillWatching;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let log = n.log();
    drop(n);
    // The next run starts on a node that is not shutting down.
    logind.cancel_shutdown().await.unwrap();
    (outcome, log)
}

/// The fake logind on a private bus, and the mock IMDS listing a spot notice: every run of nthd
/// here should power off at once.
async fn spot_world() -> (
    (
        nthd_testkit::logind::PrivateBus,
        nthd_testkit::logind::FakeLogind,
        tempfile::TempDir,
    ),
    MockImds,
) {
    let world = common::logind_world().await;
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#.to_string(),
        ),
    );
    (world, imds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_variable_with_a_bad_value_keeps_protecting_or_takes_its_safe_choice() {
    let (world, imds) = spot_world().await;
    let cmd = nthd::testing::config::Cli::command();
    let mut checked = 0;
    for arg in cmd.get_arguments() {
        let Some(var) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        let value = bad_value(arg);
        let (outcome, log) = run_with(&world, &imds, var, value).await;
        let safe = on_list(&safe_list(), var);
        if safe {
            let said = format!("{var}=\"{value}\" cannot be used");
            assert!(log.contains(&said), "{var}: not named:\n{log}");
            assert!(log.contains("the choice that cannot power off"), "{log}");
        }
        match outcome {
            // The spot notice's own action, or the dry run, taken as their safe choice: nthd
            // watches on and says what it would do.
            Outcome::StillWatching
                if var == "NTHD_ACTION_SPOT_TERMINATE" || var == "NTHD_DRY_RUN" =>
            {
                assert!(safe, "{var}");
                assert!(log.contains("spot-terminate"), "{var}:\n{log}");
            }
            Outcome::PoweredOff => {}
            Outcome::Exited(code) => panic!("{var}={value}: exited {code:?}:\n{log}"),
            // The one setting that points nthd at another service: falling back reads the
            // cloud's own endpoint, which this test does not serve.
            Outcome::StillWatching if var == "NTHD_IMDS_ENDPOINT" => assert!(
                log.contains("nthd goes on with the cloud's own endpoint"),
                "{log}"
            ),
            Outcome::StillWatching => panic!("{var}={value}: no power-off within 10 s:\n{log}"),
        }
        // A dropped value is named, with what nthd uses instead.
        if log.contains(&format!("{var}=\"{value}\" cannot be used")) {
            assert!(log.contains("keeps protecting the node"), "{var}:\n{log}");
        }
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} variables");
}

/// The log level and target, mistyped, are named with what nthd uses instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_log_level_or_target_is_a_warning() {
    let (world, imds) = spot_world().await;
    for (var, value, instead) in [
        ("NTHD_LOG_LEVEL", "warning", "the default (info)"),
        ("NTHD_LOG_TARGET", "jornald", "the default (auto)"),
        ("NTHD_POLL_INTERVAL", "-1s", "the cloud's default"),
    ] {
        let (outcome, log) = run_with(&world, &imds, var, value).await;
        assert!(matches!(outcome, Outcome::PoweredOff), "{var}:\n{log}");
        let want = format!("{var}=\"{value}\" cannot be used");
        assert!(log.contains(&want), "{var}:\n{log}");
        assert!(
            log.contains(&format!("nthd goes on with {instead}")),
            "{log}"
        );
    }
}
