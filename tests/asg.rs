//! Completing the Auto Scaling lifecycle action (src/asg/): nthd's SigV4 signer and Query API
//! client against tests/e2e/asg-mock.py, which checks every signature with botocore's own
//! signer (installed here with pip into target/ when python3 lacks it), and fast in-process
//! cases against a scripted endpoint: retries, refusals, hostile answers, nothing listening,
//! completion off. The instance's metadata comes from the testkit's mock IMDS.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use clap::Parser;
use nthd::testing::asg;
use nthd::testing::config::Cli;
use nthd_testkit::imds::{MockImds, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEY_ID: &str = "ASIAFAKEKEYID0000001";
const SECRET: &str = "fAkEsEcReT/0123456789abcdefghijklmnopqrs";
const TOKEN: &str = "FwoGZXIvYXdzEFAKESESSIONTOKEN//////////wEaDfakefakefake=";
const INSTANCE: &str = "i-0123456789abcdef0";
const GROUP: &str = "eks-nodes-a";
const HOOK: &str = "nthd-terminate";

/// The mock IMDS with the instance's id, region and role credentials.
async fn imds() -> MockImds {
    let m = MockImds::start("127.0.0.1:0").await.unwrap();
    let md = "/latest/meta-data";
    m.set(&format!("{md}/instance-id"), Response::text(200, INSTANCE));
    m.set(
        &format!("{md}/placement/region"),
        Response::text(200, "eu-west-1"),
    );
    m.set(
        &format!("{md}/iam/security-credentials/"),
        Response::text(200, "node-role"),
    );
    let creds = format!(
        r#"{{"Code":"Success","LastUpdated":"2026-11-28T05:00:00Z","Type":"AWS-HMAC",
        "AccessKeyId":"{KEY_ID}","SecretAccessKey":"{SECRET}","Token":"{TOKEN}",
        "Expiration":"2099-01-01T00:00:00Z"}}"#
    );
    m.set(
        &format!("{md}/iam/security-credentials/node-role"),
        Response::json(200, creds),
    );
    m
}

/// The options as the daemon would parse them, completion on against `endpoint`.
fn cli(imds: &MockImds, endpoint: &str, extra: &[&str]) -> Cli {
    let mut args = vec![
        "nthd".to_string(),
        "--provider=aws".into(),
        format!("--imds-endpoint={}", imds.url()),
        "--request-timeout=1s".into(),
        "--asg-complete=continue".into(),
        format!("--asg-lifecycle-hook={HOOK}"),
        format!("--asg-endpoint={endpoint}"),
        "--settings-file=none".into(),
    ];
    args.extend(extra.iter().map(ToString::to_string));
    Cli::try_parse_from(args).unwrap()
}

fn assert_no_secret(text: &str) {
    for s in [KEY_ID, SECRET, TOKEN] {
        assert!(!text.contains(s), "a secret leaked: {text}");
    }
}

// ------------------------------------------------------------------ botocore, the independent signer

/// A PYTHONPATH under which `import botocore` works: python3's own, else target/asg-python,
/// installed there with pip once. `None` without python3 (a prerequisite of tests/run-all.sh).
fn botocore() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/asg-python");
        let works = |d: &Path| {
            Command::new("python3")
                .args(["-c", "import botocore.auth"])
                .env("PYTHONPATH", d)
                .status()
                .is_ok_and(|s| s.success())
        };
        if Command::new("python3").arg("--version").output().is_err() {
            eprintln!("no python3: the botocore cross-check is skipped");
            return None;
        }
        if !works(&dir) {
            let st = Command::new("python3")
                .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .args(["--target", &dir.to_string_lossy(), "botocore>=1.31,<2"])
                .status()
                .expect("python3 -m pip runs");
            assert!(
                st.success() && works(&dir),
                "pip could not install botocore into {}: install python3-pip",
                dir.display()
            );
        }
        Some(dir)
    })
    .as_deref()
}

/// tests/e2e/asg-mock.py, running; killed on drop.
struct PyMock {
    child: Child,
    url: String,
    log: tempfile::NamedTempFile,
}

impl Drop for PyMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PyMock {
    fn start(pythonpath: &Path, secret: &str, extra: &[&str]) -> PyMock {
        let log = tempfile::NamedTempFile::new().unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e/asg-mock.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--listen", "127.0.0.1:0", "--region", "eu-west-1"])
            .args([
                "--access-key",
                KEY_ID,
                "--secret-key",
                secret,
                "--token",
                TOKEN,
            ])
            .args(["--instance-id", INSTANCE, "--group", GROUP, "--hook", HOOK])
            .arg("--log")
            .arg(log.path())
            .args(extra)
            .env("PYTHONPATH", pythonpath)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("asg-mock.py said {line:?}"));
        PyMock {
            child,
            url: format!("http://{addr}"),
            log,
        }
    }

    fn requests(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.log.path()).unwrap();
        assert_no_secret(&text);
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn botocore_accepts_every_signature_and_the_completion_comes_after_one_not_active() {
    let Some(py) = botocore() else { return };
    let mock = PyMock::start(py, SECRET, &["--not-active", "1"]);
    let m = imds().await;
    let c = cli(&m, &mock.url, &[]);
    let done = asg::complete(&c.opts, Duration::from_secs(10))
        .await
        .unwrap();
    let (attempts, group, hook, result) = done.unwrap();
    assert_eq!(
        (attempts, group.as_str(), hook.as_str(), result),
        (2, GROUP, HOOK, "CONTINUE")
    );
    let reqs = mock.requests();
    let actions: Vec<&str> = reqs.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "DescribeAutoScalingInstances",
            "DescribeLifecycleHooks",
            "CompleteLifecycleAction",
            "CompleteLifecycleAction"
        ]
    );
    for r in &reqs {
        assert_eq!(r["signature_ok"], true, "botocore disagrees: {r}");
    }
    let last = &reqs[3];
    assert_eq!(last["status"], 200);
    assert_eq!(last["params"]["AutoScalingGroupName"], GROUP);
    assert_eq!(last["params"]["LifecycleHookName"], HOOK);
    assert_eq!(last["params"]["InstanceId"], INSTANCE);
    assert_eq!(last["params"]["LifecycleActionResult"], "CONTINUE");
    let gap = last["t_ms"].as_u64().unwrap() - reqs[2]["t_ms"].as_u64().unwrap();
    assert!(
        (400..2000).contains(&gap),
        "retried after {gap} ms, not about 500"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn heartbeats_are_signed_and_due_when_the_hook_times_out_before_the_drain() {
    let Some(py) = botocore() else { return };
    let mock = PyMock::start(py, SECRET, &["--heartbeat-timeout", "60"]);
    let m = imds().await;
    let c = cli(&m, &mock.url, &[&format!("--asg-group={GROUP}")]);
    let every = asg::heartbeat(&c.opts, Duration::from_secs(300))
        .await
        .unwrap();
    assert_eq!(every, Some(Duration::from_secs(30)));
    let every = asg::heartbeat(&c.opts, Duration::from_secs(45))
        .await
        .unwrap();
    assert_eq!(every, None, "a 45 s drain fits in a 60 s heartbeat timeout");
    let reqs = mock.requests();
    assert!(reqs.iter().all(|r| r["signature_ok"] == true), "{reqs:?}");
    assert!(
        !reqs
            .iter()
            .any(|r| r["action"] == "DescribeAutoScalingInstances"),
        "NTHD_ASG_GROUP skips the lookup"
    );
    let hb: Vec<_> = reqs
        .iter()
        .filter(|r| r["action"] == "RecordLifecycleActionHeartbeat")
        .collect();
    assert_eq!(hb.len(), 2);
    assert_eq!(hb[0]["status"], 200);
    assert_eq!(hb[0]["params"]["InstanceId"], INSTANCE);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_signature_botocore_rejects_is_an_error_without_secrets() {
    let Some(py) = botocore() else { return };
    let mock = PyMock::start(py, "another-secret-key", &[]);
    let m = imds().await;
    let c = cli(&m, &mock.url, &[]);
    let err = asg::complete(&c.opts, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.contains("SignatureDoesNotMatch") && err.contains("DescribeAutoScalingInstances"),
        "{err}"
    );
    assert!(err.contains(&mock.url) && err.contains("clock"), "{err}");
    assert_no_secret(&err);
    assert_eq!(mock.requests()[0]["signature_ok"], false);
}

// ------------------------------------------------------------------ in-process, scripted endpoint

type Script = Arc<dyn Fn(&str, usize) -> (u16, String) + Send + Sync>;

/// An endpoint that answers each request with `script(action, n)` (n: how many requests came
/// before), or holds it unanswered for status 0; returns its URL and the request counter.
async fn scripted(script: Script) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let (script, n) = (script.clone(), n.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !String::from_utf8_lossy(&buf).contains("Version=2011-01-01") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                let action = text
                    .split("Action=")
                    .nth(1)
                    .unwrap_or("")
                    .split('&')
                    .next()
                    .unwrap_or("");
                let (status, body) = script(action, n.fetch_add(1, Ordering::SeqCst));
                if status == 0 {
                    // Holds the request unanswered.
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return;
                }
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
            });
        }
    });
    (url, count)
}

fn error(code: &str, message: &str) -> String {
    format!("<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error></ErrorResponse>")
}

#[tokio::test]
async fn not_active_is_retried_every_half_second_until_the_deadline() {
    let (url, count) = scripted(Arc::new(|_, _| {
        (
            400,
            error(
                "ValidationError",
                "No active Lifecycle Action found with instance ID i-0123456789abcdef0",
            ),
        )
    }))
    .await;
    let (err, took) = complete_in_group(&url, Duration::from_millis(2000)).await;
    assert!(
        took <= Duration::from_millis(2300),
        "the deadline was not kept: {took:?}"
    );
    assert!(
        err.contains("No active Lifecycle Action found")
            && err.contains(HOOK)
            && err.contains(&url),
        "{err}"
    );
    // One DescribeLifecycleHooks, then CompleteLifecycleAction about every 500 ms.
    let n = count.load(Ordering::SeqCst);
    assert!((3..=6).contains(&n), "{n} requests in {took:?}");
}

/// The deadline falls while a call is in flight, after an earlier attempt was answered "not
/// active": the error is that answer, within the deadline, and not the cut call's timeout.
#[tokio::test]
async fn a_call_cut_by_the_deadline_reports_what_the_endpoint_last_answered() {
    let (url, count) = scripted(Arc::new(|action, n| match (action, n) {
        ("CompleteLifecycleAction", 1) => (
            400,
            error("ValidationError", "No active Lifecycle Action found"),
        ),
        ("CompleteLifecycleAction", _) => (0, String::new()),
        _ => (400, error("ValidationError", "no such hook")),
    }))
    .await;
    let (err, took) = complete_in_group(&url, Duration::from_secs(3)).await;
    assert_eq!(count.load(Ordering::SeqCst), 3, "{err}");
    assert!(
        err.contains("still answered \"No active Lifecycle Action found\"")
            && err.contains("after 1 attempt(s)")
            && err.contains(&url),
        "{err}"
    );
    assert!(!err.contains("no answer"), "{err}");
    assert!(
        took < Duration::from_secs(6),
        "the deadline was not kept: {took:?}"
    );
}

/// The error of a completion within `within` against the API at `url`, `args` given, and how
/// long it took.
async fn completion_failing(url: &str, args: &[&str], within: Duration) -> (String, Duration) {
    let m = imds().await;
    let c = cli(&m, url, args);
    let t0 = Instant::now();
    let err = asg::complete(&c.opts, within).await.unwrap().unwrap_err();
    (err, t0.elapsed())
}

/// [`completion_failing`] with the group named (no DescribeAutoScalingInstances).
async fn complete_in_group(url: &str, within: Duration) -> (String, Duration) {
    completion_failing(url, &[&format!("--asg-group={GROUP}")], within).await
}

/// The error of a completion against the API `script` answers for, and the API's URL.
async fn completion_error(script: Script) -> (String, String) {
    let (url, _) = scripted(script).await;
    let (err, _) = completion_failing(&url, &[], Duration::from_secs(3)).await;
    (url, err)
}

#[tokio::test]
async fn access_denied_names_the_endpoint_the_action_and_the_permission() {
    let (url, err) = completion_error(Arc::new(|action, _| {
        (403, error("AccessDenied", &format!("User: arn:aws:sts::1:assumed-role/node/i-1 is not authorized to perform: autoscaling:{action}")))
    }))
    .await;
    assert!(
        err.contains(&url) && err.contains("DescribeAutoScalingInstances"),
        "{err}"
    );
    assert!(
        err.contains("allow autoscaling:DescribeAutoScalingInstances on the group's ARN"),
        "{err}"
    );
    assert_no_secret(&err);
}

/// A refusal whose message quotes a secret where the message is cut (at 300 characters): no
/// piece of it gets out, since the answer is scrubbed whole before anything is cut.
#[tokio::test]
async fn a_secret_cut_in_half_by_the_message_length_is_still_scrubbed() {
    let (_, err) = completion_error(Arc::new(|_, _| {
        (
            400,
            error("ValidationError", &format!("{}{SECRET}", "x".repeat(290))),
        )
    }))
    .await;
    assert!(err.contains("ValidationError"), "{err}");
    assert!(
        !err.contains(&SECRET[..8]),
        "a piece of the secret leaked: {err}"
    );
}

#[tokio::test]
async fn hostile_answers_are_errors_not_panics() {
    let big = "<x>".repeat(40_000);
    for body in [
        "",
        "<<<<",
        "\u{0}\u{1b}[2J",
        big.as_str(),
        "<member><AutoScalingGroupName></AutoScalingGroupName></member>",
    ] {
        let body = body.to_string();
        let (url, _) = scripted(Arc::new(move |_, _| (200, body.clone()))).await;
        let m = imds().await;
        let c = cli(&m, &url, &[]);
        let err = asg::complete(&c.opts, Duration::from_secs(3))
            .await
            .unwrap()
            .unwrap_err();
        assert!(err.contains(&url), "{err}");
    }
    // A signature mismatch that quotes the canonical request, token and all.
    let (url, _) = scripted(Arc::new(|_, _| {
        (403, error("SignatureDoesNotMatch", &format!("The request signature we calculated does not match. x-amz-security-token:{TOKEN}")))
    }))
    .await;
    let m = imds().await;
    let err = asg::complete(&cli(&m, &url, &[]).opts, Duration::from_secs(3))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.contains("SignatureDoesNotMatch"), "{err}");
    assert_no_secret(&err);
}

#[tokio::test]
async fn nothing_listening_names_the_url_and_the_drop_in_within_the_deadline() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let m = imds().await;
    let c = cli(&m, &url, &[&format!("--asg-group={GROUP}")]);
    let t0 = Instant::now();
    let err = asg::complete(&c.opts, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_millis(2300));
    // With the group set, prepare's one call (DescribeLifecycleHooks) finds the path broken.
    assert!(
        err.contains(&url)
            && err.contains("DescribeLifecycleHooks")
            && err.contains("IPAddressAllow="),
        "{err}"
    );
}

#[tokio::test]
async fn off_or_without_a_hook_makes_no_request_at_all() {
    let m = imds().await;
    let c = Cli::try_parse_from([
        "nthd",
        "--provider=aws",
        &format!("--imds-endpoint={}", m.url()),
        "--settings-file=none",
    ])
    .unwrap();
    assert!(asg::complete(&c.opts, Duration::from_secs(1))
        .await
        .is_none());
    let c =
        Cli::try_parse_from(["nthd", "--asg-complete=ABANDON", "--settings-file=none"]).unwrap();
    assert!(asg::complete(&c.opts, Duration::from_secs(1))
        .await
        .is_none());
    assert_eq!(
        m.stats().aws_tokens_issued,
        0,
        "nothing was asked of the metadata service"
    );
}

#[tokio::test]
async fn no_instance_profile_says_so() {
    let m = imds().await;
    m.set(
        "/latest/meta-data/iam/security-credentials/",
        Response::status(404),
    );
    let (url, count) = scripted(Arc::new(|_, _| (200, String::new()))).await;
    let err = asg::complete(&cli(&m, &url, &[]).opts, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        err.contains("no instance profile") && err.contains("iam/security-credentials/"),
        "{err}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 0);
}
