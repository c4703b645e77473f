//! `nthd check`: every check made to pass and to fail, with the real binary against a fake
//! logind and a fake systemd1 on a private bus, the mock IMDS, and fixture files for DMI,
//! /etc/passwd and logind drop-ins.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::path::Path;
use std::time::Duration;

use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{login1_proxy, FakeLogind, PrivateBus};
use nthd_testkit::systemd::FakeSystemd;
use serde_json::Value;

struct Env {
    bus: PrivateBus,
    logind: FakeLogind,
    imds: MockImds,
    systemd: FakeSystemd,
    root: tempfile::TempDir,
}

async fn env() -> Env {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    logind.set_inhibit_delay_max(Duration::from_secs(90));
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let systemd = FakeSystemd::serve(bus.address()).await.unwrap();
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "etc/passwd", &format!(
        "root:x:0:0:root:/root:/bin/bash\nnthd:x:998:998:nthd:/var/lib/nthd:/usr/sbin/nologin\nme:x:{}:100::/:/bin/sh\n",
        current_uid()
    ));
    write(
        root.path(),
        "etc/systemd/logind.conf.d/99-kubelet.conf",
        "[Login]\nInhibitDelayMaxSec=90\n",
    );
    Env {
        bus,
        logind,
        imds,
        systemd,
        root,
    }
}

fn current_uid() -> u32 {
    nthd_testkit::effective_uid()
}

fn write(root: &Path, rel: &str, body: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

async fn run(e: &Env, extra: &[(&str, &str)]) -> (bool, Value) {
    let mut cmd = common::nthd_command(e.bus.address());
    cmd.args(["check", "--json", "--root"])
        .arg(e.root.path())
        .env("NTHD_PROVIDER", "aws")
        .env("NTHD_IMDS_ENDPOINT", e.imds.url())
        .env("NTHD_LOG_LEVEL", "error");
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(
        out.status.success(),
        v["ok"].as_bool().unwrap(),
        "exit code follows ok"
    );
    (out.status.success(), v)
}

fn get<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {v:#}"))
}

fn status(v: &Value, name: &str) -> String {
    get(v, name)["status"].as_str().unwrap().to_string()
}

async fn take_kubelet_lock(e: &Env) -> zbus::OwnedFd {
    let conn = e.bus.connect().await.unwrap();
    let p = login1_proxy(&conn).await.unwrap();
    let fd = p
        .inhibit(
            "shutdown",
            "kubelet",
            "Kubelet needs time to handle node shutdown",
            "delay",
        )
        .await
        .unwrap();
    // Keep the connection alive with the fd.
    std::mem::forget(conn);
    fd
}

/// A bad value of a setting with a safe choice, and a settings file line that is not UTF-8:
/// `nthd check` fails its `settings` row, naming each, what nthd uses instead and never the
/// bad bytes; every other row is checked as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_that_fell_back_fails_the_check_naming_it() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    let file = e.root.path().join("settings");
    std::fs::write(
        &file,
        b"# caf\xe9\nNTHD_ACTION_SPOT_TERMINATE=poweroff\nNTHD_WEBHOOK_FORMAT=sl\xfcck\n",
    )
    .unwrap();
    let (ok, v) = run(
        &e,
        &[
            ("NTHD_ACTION_SCHEDULED_REBOOT", "lgo"),
            ("NTHD_SETTINGS_FILE", file.to_str().unwrap()),
        ],
    )
    .await;
    assert!(!ok, "{v:#}");
    let row = get(&v, "settings");
    assert_eq!(row["status"], "fail", "{row:#}");
    let value = row["value"].as_str().unwrap();
    assert!(
        value.contains("NTHD_ACTION_SCHEDULED_REBOOT") && value.contains("NTHD_WEBHOOK_FORMAT"),
        "{value}"
    );
    let fix = row["fix"].as_str().unwrap();
    assert!(
        fix.contains("log, the choice that cannot power off"),
        "{fix}"
    );
    assert!(
        fix.contains("line 3: the value of NTHD_WEBHOOK_FORMAT is not valid UTF-8"),
        "{fix}"
    );
    assert!(!fix.contains("sl") || !fix.contains("ck"), "{fix}");
    assert_eq!(status(&v, "metadata service"), "pass", "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_in_place_passes() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    let (ok, v) = run(&e, &[]).await;
    assert!(ok, "{v:#}");
    for name in [
        "settings",
        "cloud",
        "metadata service",
        "system bus and logind",
        "logind permits power-off",
        "systemd version",
        "kubelet inhibitor lock",
        "drain budget",
        "power key honours inhibitors",
        "user nthd",
        "nthd.service",
    ] {
        assert_eq!(status(&v, name), "pass", "{name}: {:#}", get(&v, name));
    }
    assert!(get(&v, "kubelet inhibitor lock")["value"]
        .as_str()
        .unwrap()
        .contains("PID"));
    assert_eq!(status(&v, "current notices"), "info");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_is_reported_with_its_fix() {
    let e = env().await;
    // No kubelet lock, CanPowerOff challenge, old systemd, unit inactive, no nthd user,
    // short drain budget, power key ignoring inhibitors, a notice listed.
    e.logind.set_can_power_off("challenge");
    e.logind.set_inhibit_delay_max(Duration::from_secs(5));
    // PowerKeyIgnoreInhibited is not on D-Bus (systemd 252); it is read from logind.conf.
    write(
        e.root.path(),
        "etc/systemd/logind.conf",
        "[Login]\nPowerKeyIgnoreInhibited=yes\n",
    );
    e.systemd.set_version("219");
    e.systemd.set_nthd_state("inactive");
    write(e.root.path(), "etc/passwd", "root:x:0:0::/:/bin/sh\n");
    e.imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:00:00Z"}"#,
        ),
    );
    let (ok, v) = run(&e, &[]).await;
    assert!(!ok);
    for (name, st, fix) in [
        (
            "logind permits power-off",
            "fail",
            "sudo -u nthd nthd check",
        ),
        ("systemd version", "fail", "kubernetes#101553"),
        ("kubelet inhibitor lock", "fail", "shutdownGracePeriod"),
        ("nthd.service", "fail", "systemctl enable --now nthd"),
        ("user nthd", "fail", "systemd-sysusers"),
        ("drain budget", "warn", "shutdownGracePeriod"),
        (
            "power key honours inhibitors",
            "warn",
            "PowerKeyIgnoreInhibited=no",
        ),
    ] {
        let c = get(&v, name);
        assert_eq!(c["status"], st, "{name}: {c:#}");
        assert!(
            c["fix"].as_str().unwrap_or("").contains(fix),
            "{name}: {c:#}"
        );
    }
    assert_eq!(status(&v, "current notices"), "warn");
    assert!(get(&v, "current notices")["value"]
        .as_str()
        .unwrap()
        .contains("poweroff"));
}

/// systemd 220 to 234 have working delay inhibitors but cannot run nthd.service
/// (`StateDirectory=` came in 235, and the tarball's install.sh refuses them), so the check
/// fails there too, naming the unit rather than kubelet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_older_than_the_unit_needs_fails() {
    let e = env().await;
    for (v, st, fix) in [
        ("234", "fail", "nthd.service needs systemd >= 235"),
        ("235", "pass", ""),
    ] {
        e.systemd.set_version(v);
        let (_, out) = run(&e, &[]).await;
        let c = get(&out, "systemd version");
        assert_eq!(c["status"], st, "systemd {v}: {c:#}");
        assert!(c["fix"].as_str().unwrap_or("").contains(fix), "{c:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_key_not_handled_and_kubelet_dropin_overridden_warn() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    e.logind.set_handle_power_key("ignore");
    write(
        e.root.path(),
        "etc/systemd/logind.conf.d/99-zz-vendor.conf",
        "[Login]\nInhibitDelayMaxSec=10\n",
    );
    let (ok, v) = run(&e, &[]).await;
    assert!(ok, "warnings do not fail the check: {v:#}");
    let pk = get(&v, "power key honours inhibitors");
    assert_eq!(pk["status"], "warn");
    assert!(pk["fix"]
        .as_str()
        .unwrap()
        .contains("HandlePowerKey=poweroff"));
    let db = get(&v, "drain budget");
    assert_eq!(db["status"], "warn");
    assert!(
        db["fix"].as_str().unwrap().contains("kubernetes#102818"),
        "{db:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_budget_longer_than_the_notice_fails_with_what_to_set() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    // EKS Amazon Linux 2023 (1.34+): shutdownGracePeriod 2m30s, so InhibitDelayMaxUSec 150 s,
    // against AWS's 2-minute spot notice.
    e.logind.set_inhibit_delay_max(Duration::from_secs(150));
    let (ok, v) = run(&e, &[]).await;
    assert!(!ok, "a drain longer than the notice must fail the check");
    let db = get(&v, "drain budget");
    assert_eq!(db["status"], "fail");
    assert_eq!(db["required"], true);
    let fix = db["fix"].as_str().unwrap();
    assert!(
        fix.contains("set shutdownGracePeriod to at most 1m50s")
            && fix.contains("Amazon Linux 2023"),
        "{db:#}"
    );
    // 90 s fits: passes, and is not required then.
    e.logind.set_inhibit_delay_max(Duration::from_secs(90));
    let (ok, v) = run(&e, &[]).await;
    assert!(ok, "{v:#}");
    assert_eq!(get(&v, "drain budget")["status"], "pass");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_budget_longer_than_the_notice_is_only_a_note_on_on_demand() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    e.logind.set_inhibit_delay_max(Duration::from_secs(150));
    // A spot instance: the 2-minute notice cuts the drain off.
    e.imds.set_identity("aws");
    let (ok, v) = run(&e, &[]).await;
    assert!(!ok, "{v:#}");
    let db = get(&v, "drain budget");
    assert_eq!(
        (db["status"].as_str(), db["required"].as_bool()),
        (Some("fail"), Some(true))
    );
    assert!(
        db["value"].as_str().unwrap().contains("lifecycle spot"),
        "{db:#}"
    );
    // On-demand: no spot notice bounds the shutdown, so the check passes with a note.
    e.imds.set(
        "/latest/meta-data/instance-life-cycle",
        Response::text(200, "on-demand"),
    );
    let (ok, v) = run(&e, &[]).await;
    assert!(
        ok,
        "an on-demand node is not bound by the spot notice: {v:#}"
    );
    let db = get(&v, "drain budget");
    assert_eq!(
        (db["status"].as_str(), db["required"].as_bool()),
        (Some("info"), Some(false))
    );
    assert!(
        db["value"]
            .as_str()
            .unwrap()
            .contains("lifecycle on-demand"),
        "{db:#}"
    );
    let note = db["fix"].as_str().unwrap();
    assert!(
        note.contains("on-demand instance") && note.contains("at most 1m50s"),
        "{db:#}"
    );
    // Unknown again (the mock stops answering the lifecycle): conservative, a failure.
    e.imds.clear("/latest/meta-data/instance-life-cycle");
    let (ok, v) = run(&e, &[]).await;
    assert!(!ok, "{v:#}");
    let db = get(&v, "drain budget");
    assert_eq!(db["status"], "fail");
    assert!(
        db["fix"].as_str().unwrap().contains("taken as spot"),
        "{db:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_metadata_and_missing_logind_fail() {
    let e = env().await;
    e.logind.stop().await.unwrap();
    let (ok, v) = run(&e, &[("NTHD_IMDS_ENDPOINT", "http://127.0.0.1:9")]).await;
    assert!(!ok);
    assert_eq!(status(&v, "metadata service"), "fail");
    assert!(get(&v, "metadata service")["value"]
        .as_str()
        .unwrap()
        .contains("127.0.0.1:9"));
    assert_eq!(status(&v, "system bus and logind"), "fail");
    assert!(get(&v, "system bus and logind")["fix"]
        .as_str()
        .unwrap()
        .contains("systemd-logind"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_detection_from_dmi_and_unknown_cloud() {
    let e = env().await;
    write(e.root.path(), "sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
    let (_, v) = run(&e, &[("NTHD_PROVIDER", "auto")]).await;
    assert_eq!(status(&v, "cloud"), "pass");
    assert!(
        get(&v, "cloud")["value"].as_str().unwrap().contains("DMI"),
        "{v:#}"
    );
    std::fs::remove_file(e.root.path().join("sys/class/dmi/id/sys_vendor")).unwrap();
    let (ok, v) = run(
        &e,
        &[
            ("NTHD_PROVIDER", "auto"),
            ("NTHD_IMDS_ENDPOINT", "http://127.0.0.1:9"),
        ],
    )
    .await;
    assert!(!ok);
    assert_eq!(status(&v, "cloud"), "fail");
    assert!(get(&v, "cloud")["fix"]
        .as_str()
        .unwrap()
        .contains("NTHD_PROVIDER"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reboot_policy_also_needs_the_reboot_grant() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    e.logind.set_can_reboot("challenge");
    let (ok, v) = run(&e, &[("NTHD_ACTION_SCHEDULED_REBOOT", "reboot")]).await;
    assert!(!ok);
    let r = get(&v, "logind permits reboot");
    assert_eq!(r["status"], "fail");
    let (ok, _) = run(&e, &[]).await;
    assert!(ok, "without a reboot policy the reboot grant is not needed");
}

#[test]
fn text_output_uses_marks_and_prints_fixes() {
    let out = common::nthd_command("unix:path=/nonexistent/bus")
        .args(["check", "--root", "/nonexistent"])
        .env("NTHD_PROVIDER", "aws")
        .env("NTHD_IMDS_ENDPOINT", "http://127.0.0.1:9")
        .env("NTHD_LOG_LEVEL", "error")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        s.contains("✘ system bus and logind") && s.contains("fix:"),
        "{s}"
    );
    assert!(s.contains("required check(s) failed"), "{s}");
}

/// With no bus, the checks that need logind are listed as skipped, with the reason, instead of
/// silently missing from the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_bus_lists_the_logind_checks_as_skipped() {
    let e = env().await;
    let (ok, v) = run(
        &e,
        &[
            ("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus"),
            ("NTHD_ACTION_SCHEDULED_REBOOT", "reboot"),
        ],
    )
    .await;
    assert!(!ok);
    assert_eq!(status(&v, "system bus and logind"), "fail");
    for name in [
        "logind permits power-off",
        "logind permits reboot",
        "kubelet inhibitor lock",
        "drain budget",
        "power key honours inhibitors",
    ] {
        assert_eq!(status(&v, name), "skip", "{name}: {v:#}");
        assert!(
            get(&v, name)["value"]
                .as_str()
                .unwrap()
                .contains("system bus and logind"),
            "{v:#}"
        );
    }
}

/// A block inhibitor on shutdown fails the check, naming its holder: logind would refuse every
/// PowerOff while it is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_inhibitor_on_shutdown_fails_and_is_named() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    let (ok, v) = run(&e, &[]).await;
    assert!(ok, "{v:#}");
    assert_eq!(status(&v, "no block inhibitor on shutdown"), "pass");
    let id = e
        .logind
        .hold_inhibitor("shutdown", "apt", "dpkg is running", "block", 4321, 777);
    let (ok, v) = run(&e, &[]).await;
    assert!(!ok);
    let c = get(&v, "no block inhibitor on shutdown");
    assert_eq!(c["status"], "fail");
    assert_eq!(
        c["value"],
        "apt (why: dpkg is running, pid 777, uid 4321, mode block)"
    );
    assert!(
        c["fix"].as_str().unwrap().contains("never overrides"),
        "{c}"
    );
    e.logind.release_inhibitor(id);
}

/// Run outside the daemon's unit (an ssh session's scope), check reaches the metadata service
/// and the webhook receiver; `nthd.service` drops both addresses, so the daemon would not.
/// Both checks fail, naming the daemon's unit and the drop-in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_unit_what_the_daemons_unit_drops_fails() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    e.systemd.set_own_unit(Some("session-1.scope"));
    e.systemd
        .set_nthd_ip_policy(&["0.0.0.0/0", "::/0"], &["169.254.169.254"]);
    let hook = format!("http://127.0.0.1:{}/events", common::free_port());
    let (ok, v) = run(&e, &[("NTHD_WEBHOOK", hook.as_str())]).await;
    assert!(!ok, "{v:#}");
    for name in ["metadata service", "webhook"] {
        let c = get(&v, name);
        assert_eq!(c["status"], "fail", "{c}");
        assert_eq!(c["required"], true, "{c}");
        let value = c["value"].as_str().unwrap();
        assert!(
            value.contains(
                "the unit nthd.service's IP allow-list blocks 127.0.0.1 (IPAddressDeny=any, and \
                 no IPAddressAllow= entry matches), so the daemon cannot reach it"
            ),
            "{c}"
        );
        let fix = c["fix"].as_str().unwrap();
        assert!(
            fix.contains("systemctl edit nthd.service") && fix.contains("IPAddressAllow=127.0.0.1"),
            "{c}"
        );
    }
    assert!(get(&v, "metadata service")["value"]
        .as_str()
        .unwrap()
        .starts_with(&e.imds.url()));
    // Allowed in the daemon's unit: what check itself finds is what counts again.
    e.systemd
        .set_nthd_ip_policy(&["0.0.0.0/0", "::/0"], &["127.0.0.0/8"]);
    let (ok, v) = run(&e, &[("NTHD_WEBHOOK", hook.as_str())]).await;
    assert!(ok, "{v:#}");
    assert_eq!(status(&v, "metadata service"), "pass");
    assert_eq!(status(&v, "webhook"), "warn", "nothing listens there");
}

/// Run inside a unit that drops the metadata endpoint, check's own read times out: the
/// failure names that unit's allow-list and the drop-in, not a slow metadata service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_a_unit_that_drops_the_endpoint_the_sandbox_is_the_cause() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    e.systemd.set_own_unit(Some("nthd.service"));
    e.systemd
        .set_nthd_ip_policy(&["0.0.0.0/0", "::/0"], &["127.0.0.1"]);
    // Never answers: as a dropped SYN does, the request times out.
    let silent = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let (ok, v) = run(
        &e,
        &[
            ("NTHD_IMDS_ENDPOINT", endpoint.as_str()),
            ("NTHD_REQUEST_TIMEOUT", "300ms"),
        ],
    )
    .await;
    assert!(!ok);
    let c = get(&v, "metadata service");
    assert_eq!(c["status"], "fail", "{c}");
    let value = c["value"].as_str().unwrap();
    assert!(
        value.starts_with(&format!("no answer from {endpoint}/"))
            && value.contains("the unit nthd.service's IP allow-list blocks 127.0.0.2")
            && !value.contains("slow or throttling"),
        "{c}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("IPAddressAllow=127.0.0.2"),
        "{c}"
    );
}

/// An Auto Scaling endpoint that answers every call with a lifecycle hook (120 s heartbeat
/// timeout); the signature is tested against botocore in tests/asg.rs, not here.
async fn asg_endpoint() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !String::from_utf8_lossy(&buf).contains("Version=2011-01-01") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => buf.extend_from_slice(&chunk[..k]),
                    }
                }
                let body = "<DescribeLifecycleHooksResponse><DescribeLifecycleHooksResult>\
                    <LifecycleHooks><member><LifecycleHookName>nthd-terminate</LifecycleHookName>\
                    <HeartbeatTimeout>120</HeartbeatTimeout></member></LifecycleHooks>\
                    </DescribeLifecycleHooksResult></DescribeLifecycleHooksResponse>";
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
            });
        }
    });
    url
}

/// The instance's id, region and role credentials on the mock IMDS.
fn asg_identity(imds: &MockImds) {
    let md = "/latest/meta-data";
    imds.set(
        &format!("{md}/instance-id"),
        Response::text(200, "i-0123456789abcdef0"),
    );
    imds.set(
        &format!("{md}/placement/region"),
        Response::text(200, "eu-west-1"),
    );
    imds.set(
        &format!("{md}/iam/security-credentials/"),
        Response::text(200, "node"),
    );
    imds.set(
        &format!("{md}/iam/security-credentials/node"),
        Response::json(
            200,
            r#"{"Code":"Success","AccessKeyId":"ASIACHECKFAKE","SecretAccessKey":"chk-secret","Token":"chk-token"}"#,
        ),
    );
}

/// Completion on, with an instance profile: passes, naming the instance, the group, the hook
/// and the endpoint, and no credential.
fn check_completion_on(v: &serde_json::Value, url: &str) {
    let c = get(v, "asg lifecycle completion");
    assert_eq!(c["status"], "pass", "{c}");
    let value = c["value"].as_str().unwrap();
    for part in [
        "i-0123456789abcdef0",
        "group nodes",
        "hook nthd-terminate",
        "heartbeat timeout 2m",
        url,
    ] {
        assert!(value.contains(part), "{part}: {c}");
    }
    assert!(!v.to_string().contains("chk-secret") && !v.to_string().contains("chk-token"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asg_completion_off_on_and_dropped_by_the_daemons_unit() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    let (_, v) = run(&e, &[]).await;
    let c = get(&v, "asg lifecycle completion");
    assert_eq!(c["status"], "info", "{c}");
    assert!(c["value"].as_str().unwrap().starts_with("off"), "{c}");

    asg_identity(&e.imds);
    let url = asg_endpoint().await;
    let on = [
        ("NTHD_ASG_COMPLETE", "CONTINUE"),
        ("NTHD_ASG_LIFECYCLE_HOOK", "nthd-terminate"),
        ("NTHD_ASG_GROUP", "nodes"),
        ("NTHD_ASG_ENDPOINT", url.as_str()),
    ];
    let (ok, v) = run(&e, &on).await;
    assert!(ok, "{v:#}");
    check_completion_on(&v, &url);
    // Run outside nthd.service, whose allow-list drops the endpoint: a failure with the drop-in.
    e.systemd.set_own_unit(Some("session-1.scope"));
    e.systemd
        .set_nthd_ip_policy(&["0.0.0.0/0", "::/0"], &["169.254.169.254"]);
    let (_, v) = run(&e, &on).await;
    let c = get(&v, "asg lifecycle completion");
    assert_eq!(c["status"], "fail", "{c}");
    assert_eq!(c["required"], true, "{c}");
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("IPAddressAllow=127.0.0.1"),
        "{c}"
    );

    // No instance profile: the check says so.
    e.systemd.set_nthd_ip_policy(&[], &[]);
    e.imds.set(
        "/latest/meta-data/iam/security-credentials/",
        Response::status(404),
    );
    let (ok, v) = run(&e, &on).await;
    assert!(!ok);
    let c = get(&v, "asg lifecycle completion");
    assert!(
        c["value"].as_str().unwrap().contains("no instance profile"),
        "{c}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("autoscaling:CompleteLifecycleAction"),
        "{c}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_report_check_takes_the_lock_and_warns_when_logind_refuses_it() {
    let e = env().await;
    let _lock = take_kubelet_lock(&e).await;
    let (ok, v) = run(&e, &[]).await;
    assert!(ok, "{v:#}");
    let c = get(&v, "drain report");
    assert_eq!(c["status"], "pass", "{c}");
    assert_eq!(c["required"], false, "{c}");
    assert!(
        c["value"]
            .as_str()
            .unwrap()
            .contains("can hold a delay lock"),
        "{c}"
    );
    let took = e.logind.calls_of("Inhibit");
    assert!(
        took.iter()
            .any(|c| c.args[1] == "nthd" && c.args[3] == "delay"),
        "{took:?}"
    );
    assert!(
        e.logind.inhibitors().iter().all(|i| i.who != "nthd"),
        "the check's lock is released at once"
    );

    e.logind.set_inhibit_error(Some((
        "org.freedesktop.DBus.Error.AccessDenied",
        "Permission denied",
    )));
    let (ok, v) = run(&e, &[]).await;
    let c = get(&v, "drain report");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["value"].as_str().unwrap().contains("Permission denied"),
        "{c}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap()
            .contains("inhibit-delay-shutdown"),
        "{c}"
    );
    assert!(
        ok,
        "a refused drain-report lock never fails the check: {v:#}"
    );
}
