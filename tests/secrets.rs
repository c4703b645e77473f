//! Extras degrade, secrets stay secret: a webhook setup error never stops nthd (it still powers
//! off for a spot notice), and a secret planted in every webhook setting appears nowhere nthd
//! writes: the log, the status file, `--help`, `nthd check`, and every error path.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::Nthd;
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

const PLANTED: &str = "pl4nted-s3cret";

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn spot_in(secs: u64) -> String {
    let t = std::time::SystemTime::now() + Duration::from_secs(secs);
    format!(
        r#"{{"action":"terminate","time":"{}"}}"#,
        nthd::testing::timefmt::format_rfc3339(t)
    )
}

fn assert_clean(what: &str, text: &str) {
    assert!(
        !text.contains(PLANTED),
        "the planted secret shows in {what}:\n{text}"
    );
}

async fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The daemon with a world-readable headers file (a secret rotation gone wrong): it runs on with
/// webhooks disabled, says so where it must, and powers off for the spot notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_headers_file_disables_webhooks_not_the_power_off() {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let headers = dir.path().join("webhook-headers");
    write(
        &headers,
        &format!("Authorization: Bearer {PLANTED}\n"),
        0o644,
    );
    let status = dir.path().join("status.json");
    let url = format!("http://127.0.0.1:{}/hooks/{PLANTED}", common::free_port());
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        dir.path(),
        &[
            ("NTHD_WEBHOOK", url.as_str()),
            ("NTHD_WEBHOOK_HEADERS_FILE", headers.to_str().unwrap()),
            ("NTHD_STATUS_FILE", status.to_str().unwrap()),
        ],
    );
    assert!(
        n.wait_log("extra webhooks disabled", Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    assert!(
        n.log().contains("readable by others (mode 0644)"),
        "{}",
        n.log()
    );
    assert!(
        n.running(),
        "nthd stopped over a webhook setting:\n{}",
        n.log()
    );
    wait_for(
        "the status file to list webhooks",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&status)
                .is_ok_and(|s| s.contains("\"extras_disabled\": [\n    {"))
        },
    )
    .await;
    let st: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&status).unwrap()).unwrap();
    assert_eq!(st["extras_disabled"][0]["name"], "webhooks");

    imds.set(aws::SPOT_PATH, Response::json(200, spot_in(120)));
    wait_for("PowerOff", Duration::from_secs(10), || {
        logind.power_off_count() == 1
    })
    .await;
    assert_clean("the daemon's log", &n.log());
    assert_clean(
        "the status file",
        &std::fs::read_to_string(&status).unwrap(),
    );
    assert!(n.stop().await.success());
}

/// Runs `nthd ARGS` with `env` and returns stdout and stderr together, and the exit code.
fn run(bus: &str, args: &[&str], env: &[(&str, &str)]) -> (String, Option<i32>) {
    let mut c = common::nthd_command(bus);
    c.args(args).env("NTHD_PROVIDER", "aws");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (text, out.status.code())
}

#[test]
fn help_never_shows_a_webhook_url() {
    let url = format!("https://hooks.example.com/services/T0/B0/{PLANTED}");
    let (help, code) = run(
        "unix:path=/nonexistent",
        &["--help"],
        &[("NTHD_WEBHOOK", &url)],
    );
    assert_eq!(code, Some(0));
    assert!(help.contains("NTHD_WEBHOOK"), "{help}");
    assert_clean("--help", &help);
}

/// One bad webhook setup: a name, the settings, and what the error must say.
type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);

/// The bad webhook settings, each holding the secret; `urls` and `headers` are the files the
/// last two name.
fn bad_webhook_cases(urls: &std::path::Path, headers: &std::path::Path) -> Vec<Case<'static>> {
    let ok_url = format!("http://127.0.0.1:{}/ok/{PLANTED}", common::free_port());
    vec![
        (
            "bad scheme",
            vec![("NTHD_WEBHOOK", format!("ftp://x/{PLANTED}"))],
            "http:// or https://",
        ),
        (
            "spaces",
            vec![("NTHD_WEBHOOK", format!("https://x/{PLANTED} y"))],
            "printable ASCII",
        ),
        (
            "credentials",
            vec![("NTHD_WEBHOOK", format!("https://u:{PLANTED}@x/y"))],
            "credentials",
        ),
        (
            "a password with a slash",
            vec![(
                "NTHD_WEBHOOK",
                format!("https://bot:s3/{PLANTED}@x:8443/y?token={PLANTED}#f"),
            )],
            "`https://…`: the webhook URL holds an `@`",
        ),
        (
            "a user and password with ? and #",
            vec![("NTHD_WEBHOOK", format!("https://u@{PLANTED}:p?s#w@x/"))],
            "`https://…`: the webhook URL holds an `@`",
        ),
        (
            "unparseable",
            vec![("NTHD_WEBHOOK", format!("https://[::1/{PLANTED}"))],
            "`https://…` is not a URL",
        ),
        (
            "bad format",
            vec![
                ("NTHD_WEBHOOK", ok_url.clone()),
                ("NTHD_WEBHOOK_FORMAT", format!("x{PLANTED}")),
            ],
            "not a webhook format",
        ),
        (
            "URL file line",
            vec![("NTHD_WEBHOOK_URL_FILE", urls.display().to_string())],
            "line 2",
        ),
        (
            "headers syntax",
            vec![
                ("NTHD_WEBHOOK", ok_url.clone()),
                ("NTHD_WEBHOOK_HEADERS_FILE", headers.display().to_string()),
            ],
            "line 1",
        ),
    ]
}

/// Every way a webhook setting can be wrong, each with the secret in it: `nthd check` fails on
/// it without echoing the secret.
#[test]
fn no_error_path_echoes_a_webhook_secret() {
    let dir = tempfile::tempdir().unwrap();
    let urls = dir.path().join("urls");
    let headers = dir.path().join("headers");
    let cases = bad_webhook_cases(&urls, &headers);
    write(&urls, &format!("# comment\nhttps://x/{PLANTED} z\n"), 0o640);
    write(&headers, &format!("no colon {PLANTED}\n"), 0o640);
    for (name, env, want) in cases {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (out, code) = run("unix:path=/nonexistent", &["check"], &env);
        assert_ne!(code, Some(0), "{name}: check passed:\n{out}");
        assert!(
            out.contains("webhook setup"),
            "{name}: no failing webhook setup check:\n{out}"
        );
        assert!(
            out.contains(want),
            "{name}: the error does not say `{want}`:\n{out}"
        );
        assert_clean(name, &out);
    }
}

/// A settings file line systemd skips, or a file it refuses, is reported by file and line only.
#[test]
fn settings_file_errors_never_quote_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nthd");
    let skipped = format!("NTHD_PROVIDER=aws\nexport NTHD_WEBHOOK=https://x/{PLANTED}\n");
    let refused = format!("NTHD_PROVIDER=aws\nNTHD_WEBHOOK=https://x/{PLANTED}\u{0}\n");
    for (name, text) in [("skipped", skipped), ("refused", refused)] {
        std::fs::write(&f, text).unwrap();
        let (out, got) = run(
            "unix:path=/nonexistent",
            &["once"],
            &[("NTHD_SETTINGS_FILE", f.to_str().unwrap())],
        );
        assert!(
            out.contains("line 2"),
            "{name}: the line is not named:\n{out}"
        );
        assert_ne!(
            got,
            Some(2),
            "{name}: a bad line costs that line, not the command: {out}"
        );
        assert_clean(name, &out);
    }
}

/// `nthd status` reads one file: a bad unrelated setting does not break it, nor the NPD plugin.
#[test]
fn status_ignores_a_bad_unrelated_setting() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("status.json");
    let f = file.to_str().unwrap();
    for args in [&["status", "--npd"][..], &["status"][..]] {
        let (out, code) = run(
            "unix:path=/nonexistent",
            args,
            &[("NTHD_DEADLINE_KINDS", "bogus"), ("NTHD_STATUS_FILE", f)],
        );
        assert_eq!(code, Some(2), "{args:?}: {out}");
        assert!(
            out.contains("not running") || out.contains("does not exist"),
            "{out}"
        );
        assert!(
            !out.contains("NTHD_DEADLINE_KINDS"),
            "{args:?} tripped over the bad setting: {out}"
        );
    }
    // Every other command names it, and goes on with the built-in list.
    let (out, code) = run(
        "unix:path=/nonexistent",
        &["once"],
        &[("NTHD_DEADLINE_KINDS", "bogus")],
    );
    assert_ne!(code, Some(2), "{out}");
    assert!(
        out.contains("NTHD_DEADLINE_KINDS=\"bogus\" cannot be used"),
        "{out}"
    );
}

/// `nthd status --npd` on the status file at `status`.
fn npd_line(status: &std::path::Path) -> String {
    let npd = common::nthd_command("unix:path=/nonexistent")
        .args(["status", "--npd"])
        .env("NTHD_STATUS_FILE", status)
        .output()
        .unwrap();
    String::from_utf8_lossy(&npd.stdout).to_string()
}

/// A webhook URL whose password holds a `/` (a cut at the first `/` would show part of it): the
/// daemon disables webhooks, and its log line, the status file (0644) and the NPD line show the
/// URL as `https://…` and nothing of its user name, password, path or query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_webhook_url_shows_only_its_scheme_in_the_log_the_status_and_npd() {
    let bus = PrivateBus::start().unwrap();
    let _logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().join("status.json");
    let url = format!("https://bot:s3/{PLANTED}@hooks.example:8443/x?token={PLANTED}#frag");
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        dir.path(),
        &[
            ("NTHD_WEBHOOK", url.as_str()),
            ("NTHD_STATUS_FILE", status.to_str().unwrap()),
        ],
    );
    assert!(
        n.wait_log("extra webhooks disabled", Duration::from_secs(10))
            .await,
        "{}",
        n.log()
    );
    wait_for(
        "the status file to list webhooks",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&status)
                .is_ok_and(|s| s.contains("\"extras_disabled\": [\n    {"))
        },
    )
    .await;
    let body = std::fs::read_to_string(&status).unwrap();
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    let want = "NTHD_WEBHOOK (URL 1): `https://…`: the webhook URL holds an `@`";
    let reason = st["extras_disabled"][0]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.starts_with(want), "{reason}");
    let log = n.log();
    assert!(
        log.contains(&format!("extra webhooks disabled: {want}")),
        "{log}"
    );
    let npd = npd_line(&status);
    assert!(
        npd.starts_with("unknown: webhooks disabled: NTHD_WEBHOOK"),
        "{npd}"
    );
    for (what, text) in [
        ("the log", &log),
        ("the status file", &body),
        ("the NPD line", &npd),
    ] {
        assert_clean(what, text);
        for part in ["bot:s3", "s3/", "token", "frag", "hooks.example"] {
            assert!(!text.contains(part), "{part:?} shows in {what}:\n{text}");
        }
    }
    assert!(n.stop().await.success());
}
