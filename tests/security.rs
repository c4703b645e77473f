//! Security properties of the running daemon: no listening sockets unless metrics are asked
//! for, and metadata bodies stay out of the log at the default (info) level.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::Nthd;
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};
use nthd_testkit::logind::{FakeLogind, PrivateBus};

const MARKER: &str = "BODY-MARKER-5e1d7c";

/// The socket inodes a process holds.
fn socket_inodes(pid: u32) -> HashSet<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Listening (or, for UDP, bound) sockets among `inodes`, as "proto local-address" lines.
fn listening(inodes: &HashSet<u64>) -> Vec<String> {
    let mut out = Vec::new();
    for proto in ["tcp", "tcp6", "udp", "udp6"] {
        let Ok(table) = std::fs::read_to_string(format!("/proc/net/{proto}")) else {
            continue;
        };
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(st), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let inode: u64 = inode.parse().unwrap_or(0);
            // TCP state 0A is LISTEN; any UDP socket in the table is bound and can receive.
            let listens = proto.starts_with("udp") || *st == "0A";
            if listens && inodes.contains(&inode) {
                out.push(format!("{proto} {local}"));
            }
        }
    }
    // /proc/net/unix: Num RefCount Protocol Flags Type St Inode [Path]; Flags 00010000 is
    // __SO_ACCEPTCON, a listening stream socket.
    let unix = std::fs::read_to_string("/proc/net/unix").unwrap();
    for line in unix.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(flags), Some(inode)) = (f.get(3), f.get(6)) else {
            continue;
        };
        let inode: u64 = inode.parse().unwrap_or(0);
        if inodes.contains(&inode) && *flags == "00010000" {
            out.push(format!("unix {}", f.get(7).unwrap_or(&"(unnamed)")));
        }
    }
    out
}

/// A running nthd and what it talks to; bind the whole tuple so none of it is dropped early.
type Running = (Nthd, FakeLogind, MockImds, tempfile::TempDir, PrivateBus);

async fn running_nthd(env: &[(&str, &str)]) -> Running {
    let bus = PrivateBus::start().unwrap();
    let logind = FakeLogind::serve(bus.address()).await.unwrap();
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let state = tempfile::tempdir().unwrap();
    let n = Nthd::start(bus.address(), &imds.url(), state.path(), env);
    common::expect_started(&logind, &n).await;
    (n, logind, imds, state, bus)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_listening_socket_unless_metrics_are_asked_for() {
    let (n, _logind, _imds, _state, _bus) = running_nthd(&[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let inodes = socket_inodes(n.child.id());
    assert!(
        !inodes.is_empty(),
        "nthd holds no sockets at all? (it talks to D-Bus and IMDS)"
    );
    let l = listening(&inodes);
    assert!(l.is_empty(), "nthd listens by default: {l:?}");

    // The check does see a listener when there is one.
    let (n, _logind, _imds, _state, _bus) =
        running_nthd(&[("NTHD_METRICS_LISTEN", "127.0.0.1:0")]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let l = listening(&socket_inodes(n.child.id()));
    assert_eq!(l.len(), 1, "{l:?}");
    assert!(l[0].starts_with("tcp 0100007F:"), "{l:?}");
}

/// A notice body with something extra in it, and a malformed answer on another source: at the
/// default level neither body reaches the log, though the notice is acted on and the error is
/// reported. At debug level the body is there, so the marker really reached nthd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_bodies_stay_out_of_the_info_log() {
    for level in ["info", "debug"] {
        let (n, logind, imds, _state, _bus) = running_nthd(&[
            ("NTHD_LOG_LEVEL", level),
            ("NTHD_SLOW_POLL_INTERVAL", "200ms"),
        ])
        .await;
        imds.set(
            aws::REBALANCE_PATH,
            Response::json(
                200,
                format!("{{\"noticeTime\": 17, \"x\": \"{MARKER}-broken\""),
            ),
        );
        imds.set(
            aws::SPOT_PATH,
            Response::json(
                200,
                format!(
                    r#"{{"action":"terminate","time":"2030-01-01T00:02:00Z","note":"{MARKER}"}}"#
                ),
            ),
        );
        assert!(
            logind
                .wait_for_method("PowerOff", 1, Duration::from_secs(5))
                .await,
            "{}",
            n.log()
        );
        assert!(
            n.wait_log(aws::REBALANCE_PATH, Duration::from_secs(5))
                .await,
            "the malformed rebalance answer is reported: {}",
            n.log()
        );
        let log = n.log();
        if level == "info" {
            assert!(!log.contains(MARKER), "a body reached the info log:\n{log}");
        } else {
            assert!(log.contains(MARKER), "debug shows the body:\n{log}");
        }
    }
}

/// The keys polkit/50-nthd.rules grants `io.systemd.imds.get` for, as its JavaScript lists them.
fn rule_keys() -> Vec<String> {
    let rule =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/polkit/50-nthd.rules"))
            .unwrap();
    let list = rule
        .split_once("var nthdImdsKeys = [")
        .and_then(|(_, rest)| rest.split_once("];"))
        .expect("polkit/50-nthd.rules lists nthdImdsKeys")
        .0;
    list.split(',')
        .map(|k| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty())
        .collect()
}

/// The rule's own test, in Rust: a key ending in "/" admits what is below it, any other itself.
fn admitted(keys: &[String], key: &str) -> bool {
    keys.iter()
        .any(|k| key == k || (k.ends_with('/') && key.starts_with(k.as_str())))
}

/// imdsd passes the key to polkit, so user nthd's grant covers only what nthd reads: every path
/// docs/clouds.md lists as read (as imdsd's key, below its data URL) is admitted, and the
/// metadata that holds other secrets (user data, GCP's attributes and tokens, SSH keys) is not.
#[test]
fn the_imds_grant_covers_what_nthd_reads_and_nothing_secret() {
    let keys = rule_keys();
    assert!(keys.len() >= 10, "{keys:?}");
    let clouds =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/clouds.md")).unwrap();
    let mut checked = 0;
    for line in clouds.lines().filter(|l| l.starts_with("| `/")) {
        let path = line[3..].split('`').next().unwrap_or_default();
        let key = ["/latest", "/computeMetadata/v1", "/metadata"]
            .iter()
            .find_map(|p| path.strip_prefix(p))
            .unwrap_or_else(|| panic!("docs/clouds.md: {path} is under no data URL"));
        if key == "/api/token" {
            continue; // imdsd's own business
        }
        let key = key.replace("<role>", "node-role");
        assert!(
            admitted(&keys, &key),
            "polkit/50-nthd.rules does not admit {key} ({path})"
        );
        checked += 1;
    }
    assert!(checked >= 25, "only {checked} paths read");
    for secret in [
        "/user-data",
        "/meta-data/public-keys/0/openssh-key",
        "/meta-data/identity-credentials/ec2/security-credentials/ec2-instance",
        "/instance/attributes/kube-env",
        "/instance/service-accounts/default/token",
        "/instance/compute-secrets",
        "/instance/idx",
    ] {
        assert!(
            !admitted(&keys, secret),
            "polkit/50-nthd.rules admits {secret}"
        );
    }
}
