//! The world one subject runs in: its own mock IMDS, private bus, fake logind and scratch
//! directory, and the subject itself (nthd, or the bash + curl loop) started in it.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nthd_testkit::imds::MockImds;
use nthd_testkit::logind::FakeLogind;
use tokio::net::UnixDatagram;
use tokio::sync::watch;

pub(crate) use nthd::testing::notice::Cloud;

use crate::cleanup::{AbortOnDrop, Bus, Proc, TempDir};
use crate::routes::{self, quiet_routes};

/// The packaged unit's `WatchdogSec=30s`: nthd pings every 10 s, as it would in production.
const WATCHDOG_USEC: &str = "30000000";

/// The loop people run instead (bench/curl-loop.sh, also run by bench/real-idle.sh).
pub(crate) const CURL_LOOP: &str = include_str!("../../../../bench/curl-loop.sh");

#[derive(Clone, Copy, Debug)]
pub(crate) enum Subject {
    /// nthd with its defaults except the poll interval (`None` = nthd's default, 1 s).
    Nthd {
        cloud: Cloud,
        interval: Option<Duration>,
        /// Also write the metrics textfile (`NTHD_METRICS_TEXTFILE`), to price it.
        textfile: bool,
        /// A rebalance recommendation is listed from the start (AWS): spot is read at the
        /// boosted rate.
        rebalance: bool,
    },
    /// The bash + curl loop, sleeping this many seconds between reads.
    Curl { every: u32 },
}

impl Subject {
    /// nthd with every default for `cloud`.
    pub(crate) fn nthd(cloud: Cloud) -> Subject {
        Subject::Nthd {
            cloud,
            interval: None,
            textfile: false,
            rebalance: false,
        }
    }

    pub(crate) fn cloud(self) -> Cloud {
        match self {
            Subject::Nthd { cloud, .. } => cloud,
            Subject::Curl { .. } => Cloud::Aws,
        }
    }
}

/// A listener on a `NOTIFY_SOCKET` that drains every datagram (an undrained socket would block
/// nthd's `sd_notify` once the queue is full) and remembers when `READY=1` arrived.
pub(crate) struct Notify {
    path: PathBuf,
    ready: watch::Receiver<Option<Instant>>,
    _task: AbortOnDrop,
}

impl Notify {
    fn bind(path: PathBuf) -> io::Result<Notify> {
        let sock = UnixDatagram::bind(&path)?;
        let (tx, rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = sock.recv(&mut buf).await {
                let at = Instant::now();
                if tx.borrow().is_none()
                    && String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .any(|l| l == "READY=1")
                {
                    tx.send_replace(Some(at));
                }
            }
        });
        Ok(Notify {
            path,
            ready: rx,
            _task: AbortOnDrop(task),
        })
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Option<Instant> {
        match tokio::time::timeout(timeout, self.ready.wait_for(std::option::Option::is_some)).await
        {
            Ok(Ok(v)) => *v,
            _ => None,
        }
    }
}

/// A running subject: the process, the notify listener (kept alive so nthd is never blocked on
/// it) and how long the start took.
pub(crate) struct Started {
    pub proc: Proc,
    pub _notify: Option<Notify>,
    pub took: Duration,
}

/// One mock IMDS + private bus + fake logind + scratch directory.
pub(crate) struct World {
    // Field order is drop order: the subject's world goes away after the subject.
    pub logind: FakeLogind,
    pub imds: MockImds,
    bus: Bus,
    dir: TempDir,
}

impl World {
    pub(crate) async fn new(cloud: Cloud) -> Result<World, String> {
        let dir = TempDir::new("w").map_err(|e| format!("scratch dir: {e}"))?;
        std::fs::create_dir(dir.path().join("state")).map_err(|e| e.to_string())?;
        let bus = Bus::start().await?;
        let logind = FakeLogind::serve(bus.0.address())
            .await
            .map_err(|e| format!("fake logind: {e}"))?;
        let imds = MockImds::start("127.0.0.1:0")
            .await
            .map_err(|e| format!("mock IMDS: {e}"))?;
        quiet_routes(&imds, cloud);
        Ok(World {
            logind,
            imds,
            bus,
            dir,
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir().join("stderr.log")
    }

    fn log_file(&self) -> Result<std::fs::File, String> {
        std::fs::File::create(self.log_path()).map_err(|e| format!("log file: {e}"))
    }

    /// The last lines of the subject's stderr, for error messages.
    pub(crate) fn log_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(self.log_path()) {
            let len = f.metadata().map_or(0, |m| m.len());
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(1500)));
            let _ = f.read_to_string(&mut s);
        }
        let s = s.trim();
        if s.is_empty() {
            "(no output)".into()
        } else {
            s.replace('\n', "\n    ")
        }
    }

    /// nthd as the packaged unit runs it: Type=notify, WatchdogSec=30s, warn to a log file.
    fn spawn_nthd(&self, nthd: &Path, subject: Subject, notify: &Notify) -> Result<Proc, String> {
        let Subject::Nthd {
            cloud,
            interval,
            textfile,
            ..
        } = subject
        else {
            unreachable!("spawn_nthd is only called for nthd subjects");
        };
        let mut cmd = nthd_testkit::nthd_command(nthd, self.bus.0.address());
        cmd.arg("run")
            .env("NOTIFY_SOCKET", &notify.path)
            .env("WATCHDOG_USEC", WATCHDOG_USEC)
            .env("NTHD_PROVIDER", cloud.name())
            .env("NTHD_IMDS_ENDPOINT", self.imds.url())
            .env("NTHD_STATE_DIR", self.dir().join("state"))
            .env("NTHD_LOG_LEVEL", "warn")
            .stdout(Stdio::null())
            .stderr(self.log_file()?);
        if let Some(i) = interval {
            cmd.env("NTHD_POLL_INTERVAL", format!("{}ms", i.as_millis()));
        }
        if textfile {
            cmd.env("NTHD_METRICS_TEXTFILE", self.dir().join("nthd.prom"));
        }
        Proc::spawn(cmd).map_err(|e| format!("cannot run {}: {e}", nthd.display()))
    }

    fn spawn_curl_loop(&self, every: u32) -> Result<Proc, String> {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(CURL_LOOP)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.0.address())
            .env("URL", self.imds.url())
            .env("EVERY", every.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file()?);
        Proc::spawn(cmd).map_err(|e| format!("cannot run bash: {e}"))
    }

    /// Starts the subject and waits until it is running: nthd's `READY=1`, or the loop's first
    /// read of the spot path.
    pub(crate) async fn start(&self, nthd: &Path, subject: Subject) -> Result<Started, String> {
        match subject {
            Subject::Nthd { rebalance, .. } => {
                if rebalance {
                    routes::rebalance_on(&self.imds);
                }
                self.start_nthd(nthd, subject).await
            }
            Subject::Curl { every } => self.start_curl_loop(every).await,
        }
    }

    async fn start_nthd(&self, nthd: &Path, subject: Subject) -> Result<Started, String> {
        let t0 = Instant::now();
        let mut notify =
            Notify::bind(self.dir().join("notify")).map_err(|e| format!("notify socket: {e}"))?;
        let mut proc = self.spawn_nthd(nthd, subject, &notify)?;
        let Some(at) = notify.wait_ready(Duration::from_secs(10)).await else {
            let how = if proc.exited() {
                "exited"
            } else {
                "is running"
            };
            return Err(format!(
                "nthd sent no READY=1 within 10 s ({how}); its log:\n    {}",
                self.log_tail()
            ));
        };
        Ok(Started {
            proc,
            _notify: Some(notify),
            took: at.saturating_duration_since(t0),
        })
    }

    async fn start_curl_loop(&self, every: u32) -> Result<Started, String> {
        let t0 = Instant::now();
        let proc = self.spawn_curl_loop(every)?;
        let read = self
            .imds
            .wait_for_count(routes::SPOT_PATH, 1, Duration::from_secs(10))
            .await;
        if !read {
            return Err(format!(
                "the curl loop did not read the spot path within 10 s; its stderr:\n    {}",
                self.log_tail()
            ));
        }
        Ok(Started {
            proc,
            _notify: None,
            took: t0.elapsed(),
        })
    }
}
