//! A frozen filesystem under the metrics textfile (`fsfreeze` on a loop-mounted ext4) never
//! holds up the daemon: a spot notice is still powered off for, the watchdog pings keep coming
//! (no restart by systemd's `WatchdogSec=`), the stall is reported as the extra's problem, and
//! the file is written again once the filesystem thaws. Needs root (a loop mount), as the suite
//! runs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Notify, Nthd};
use nthd::testing::provider::aws;
use nthd_testkit::imds::{MockImds, Response};

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A 16 MiB ext4 image mounted on a loop device; thawed and unmounted when dropped, whatever
/// the test did (a frozen mount left behind would hang everything that touches it).
struct Mount {
    dir: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Mount {
    fn new() -> Mount {
        let root = rustix::process::geteuid().is_root();
        assert!(
            root,
            "needs root for a loop mount and fsfreeze (the suite runs as root)"
        );
        let tmp = tempfile::tempdir().unwrap();
        let img = tmp.path().join("fs.img");
        let dir = tmp.path().join("mnt");
        std::fs::create_dir(&dir).unwrap();
        std::fs::File::create(&img)
            .unwrap()
            .set_len(16 << 20)
            .unwrap();
        run("mkfs.ext4", &["-q", "-F", img.to_str().unwrap()]);
        run(
            "mount",
            &["-o", "loop", img.to_str().unwrap(), dir.to_str().unwrap()],
        );
        Mount { dir, _tmp: tmp }
    }

    fn freeze(&self) {
        run("fsfreeze", &["-f", self.dir.to_str().unwrap()]);
    }
}

/// Thaws the mount when dropped: made after the daemon's handle, it is dropped before it, so a
/// failing test never kills a daemon blocked in the frozen filesystem (it could not die).
struct Thaw<'a>(&'a Mount);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze")
            .args(["-u", self.0.dir.to_str().unwrap()])
            .output();
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let d = self.dir.to_str().unwrap();
        let _ = Command::new("fsfreeze").args(["-u", d]).output();
        let _ = Command::new("umount").args(["-l", d]).output();
    }
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn file_has(path: &Path, needle: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle))
}

/// A rebalance recommendation (logged, new series: a textfile write at once, which blocks), then
/// a second later the spot notice.
async fn rebalance_then_spot(imds: &MockImds) {
    imds.set(
        aws::REBALANCE_PATH,
        Response::json(200, r#"{"noticeTime":"2030-01-01T00:00:00Z"}"#.to_string()),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    imds.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#.to_string(),
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_textfile_filesystem_never_holds_up_the_daemon() {
    let mount = Mount::new();
    let file = mount.dir.join("nthd.prom");
    let (bus, logind, state) = common::logind_world().await;
    let imds = MockImds::start("127.0.0.1:0").await.unwrap();
    let mut notify = Notify::new();
    let mut n = Nthd::start(
        bus.address(),
        &imds.url(),
        state.path(),
        &[
            ("NTHD_METRICS_TEXTFILE", file.to_str().unwrap()),
            ("NOTIFY_SOCKET", notify.path.to_str().unwrap()),
            ("WATCHDOG_USEC", "900000"),
        ],
    );
    assert!(
        wait_until(Duration::from_secs(10), || file_has(
            &file,
            "nthd_imds_reads_total"
        )),
        "no textfile:\n{}",
        n.log()
    );

    mount.freeze();
    let thaw = Thaw(&mount);
    let frozen = Instant::now();
    rebalance_then_spot(&imds).await;
    assert!(
        logind
            .wait_for_method("PowerOff", 1, Duration::from_secs(5))
            .await,
        "no PowerOff while the textfile's filesystem is frozen:\n{}",
        n.log()
    );
    // Past the stall bound: the loop still pings, and says the textfile is stuck.
    assert!(
        n.wait_log("has not finished for over 10s", Duration::from_secs(15))
            .await,
        "the stalled write is not reported:\n{}",
        n.log()
    );
    let gap = notify.longest_watchdog_gap(frozen);
    assert!(
        gap < Duration::from_secs(2),
        "a watchdog gap of {gap:?}:\n{}",
        n.log()
    );
    assert!(n.running(), "{}", n.log());

    drop(thaw);
    assert!(
        wait_until(Duration::from_secs(10), || file_has(
            &file,
            "nthd_actions_total{action=\"poweroff\""
        )),
        "the textfile was not written after the thaw:\n{}",
        n.log()
    );
    drop(n);
}
