//! Shared harness: the real `nthd` binary as a child process, with its stderr captured and an
//! optional sd_notify socket.
#![allow(dead_code)]

pub(crate) mod provider;

use std::io::Read;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The real `nthd` binary through [`nthd_testkit::nthd_command`] (clean environment, no settings
/// file, logs on stderr, the system bus at `bus`). Every integration test launches nthd so.
pub(crate) fn nthd_command(bus: &str) -> Command {
    nthd_testkit::nthd_command(env!("CARGO_BIN_EXE_nthd"), bus)
}

/// `nthd once --provider PROVIDER --imds-endpoint URL EXTRA…`, quiet, with no system bus.
pub(crate) fn nthd_once(provider: &str, url: &str, extra: &[&str]) -> std::process::Output {
    nthd_command("unix:path=/nonexistent/bus")
        .args(["once", "--provider", provider, "--imds-endpoint", url])
        .args(extra)
        .env("NTHD_LOG_LEVEL", "error")
        .output()
        .unwrap()
}

/// A local TCP port that was free a moment ago: nothing listens on it (a listener is bound to
/// port 0 and dropped).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub(crate) struct Nthd {
    pub child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Nthd {
    pub(crate) fn start(bus: &str, imds: &str, state_dir: &Path, env: &[(&str, &str)]) -> Nthd {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("stderr.log");
        let mut cmd = nthd_command(bus);
        cmd.arg("run")
            .env("NTHD_PROVIDER", "aws")
            .env("NTHD_IMDS_ENDPOINT", imds)
            .env("NTHD_POLL_INTERVAL", "200ms")
            .env("NTHD_RETRY_DELAY", "300ms")
            .env("NTHD_STATE_DIR", state_dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        Nthd {
            child: cmd.spawn().unwrap(),
            log,
            _dir: dir,
        }
    }

    pub(crate) fn log(&self) -> String {
        let mut s = String::new();
        std::fs::File::open(&self.log)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        s
    }

    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub(crate) async fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            if self.log().contains(needle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub(crate) async fn stop(&mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < end,
                "nthd did not stop on SIGTERM:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Nthd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Collects sd_notify messages sent to a socket in a temporary directory, time-stamped on
/// arrival by a reader thread.
pub(crate) struct Notify {
    pub path: PathBuf,
    _dir: tempfile::TempDir,
    received: std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>,
    pub msgs: Vec<(Instant, String)>,
}

impl Notify {
    pub(crate) fn new() -> Notify {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let weak = std::sync::Arc::downgrade(&received);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                let got = sock.recv(&mut buf);
                let Some(r) = weak.upgrade() else { return };
                if let Ok(n) = got {
                    r.lock().unwrap().push((
                        Instant::now(),
                        String::from_utf8_lossy(&buf[..n]).into_owned(),
                    ));
                }
            }
        });
        Notify {
            path,
            _dir: dir,
            received,
            msgs: Vec::new(),
        }
    }

    pub(crate) fn drain(&mut self) {
        self.msgs = self.received.lock().unwrap().clone();
    }

    /// The longest gap between watchdog pings from `since` to now.
    pub(crate) fn longest_watchdog_gap(&mut self, since: Instant) -> Duration {
        self.drain();
        let mut last = since;
        let mut gap = Duration::ZERO;
        for (t, m) in &self.msgs {
            if *t >= since && m.contains("WATCHDOG=1") {
                gap = gap.max(t.duration_since(last));
                last = *t;
            }
        }
        gap.max(Instant::now().duration_since(last))
    }

    pub(crate) fn last_status(&mut self) -> String {
        self.drain();
        self.msgs
            .iter()
            .rev()
            .find_map(|(_, m)| {
                m.lines()
                    .find_map(|l| l.strip_prefix("STATUS="))
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }
}

/// Waits until nthd is up and talking to logind (it asks CanPowerOff at start).
pub(crate) async fn expect_started(l: &nthd_testkit::logind::FakeLogind, n: &Nthd) {
    assert!(
        l.wait_for_method("CanPowerOff", 1, Duration::from_secs(5))
            .await,
        "nthd never asked logind CanPowerOff:\n{}",
        n.log()
    );
}

/// Successful calls of `method` the fake logind answered.
pub(crate) fn successes(l: &nthd_testkit::logind::FakeLogind, method: &str) -> usize {
    l.calls_of(method)
        .iter()
        .filter(|c| c.error.is_none())
        .count()
}

/// Lifts the PowerOff error knob and expects exactly one successful PowerOff to follow, with
/// the daemon still running.
pub(crate) async fn clear_error_then_one_poweroff(
    l: &nthd_testkit::logind::FakeLogind,
    n: &mut Nthd,
) {
    l.set_power_off_error(None);
    let end = Instant::now() + Duration::from_secs(5);
    while successes(l, "PowerOff") == 0 && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(successes(l, "PowerOff"), 1, "{}", n.log());
    assert!(n.running(), "{}", n.log());
}

/// A private system bus with the fake logind on it, and a scratch directory: where a test of the
/// daemon's power-off path starts.
pub(crate) async fn logind_world() -> (
    nthd_testkit::logind::PrivateBus,
    nthd_testkit::logind::FakeLogind,
    tempfile::TempDir,
) {
    let bus = nthd_testkit::logind::PrivateBus::start().unwrap();
    let logind = nthd_testkit::logind::FakeLogind::serve(bus.address())
        .await
        .unwrap();
    (bus, logind, tempfile::tempdir().unwrap())
}
