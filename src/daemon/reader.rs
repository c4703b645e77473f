//! The metadata reader: the provider on a thread of its own, and the quiet reads it keeps.
//!
//! The thread detects the cloud, builds its provider and reads it on schedule, with no runtime:
//! every read is made on this thread (`imds/blocking.rs`, or systemd-imdsd's Varlink), which
//! waits between polls for the daemon's requests with a timeout, so a poll is one wakeup, its
//! reads and nothing else. Only waits of seconds to minutes (GCP's long-polls, Azure's first
//! call) run on threads of their own, which hand their answers back to the provider.
//!
//! Every observation with a notice or an error goes to the daemon at once. So does every
//! observation until the daemon says its picture has settled ([`Quiet::settle`]): the one
//! place that notion lives. Once it has, an empty observation changes nothing the daemon
//! would act on, and the reader keeps it here instead of waking the daemon: which sources
//! answered, how often and when last ([`Held`]). The daemon takes them on its health tick (at least every 10 s) and
//! before any message, so its metrics, status file and watchdog see every read, in order.
//! Measured in docs/performance.md ("Idle CPU against the floor in the same run").

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use std::sync::mpsc::RecvTimeoutError;
use tokio::sync::mpsc;

use crate::notice::{Identity, SourceId};
use crate::provider::detect::{DetectError, Detection};
use crate::provider::{self, Observation, ProviderSettings, Request};
use crate::status::Moment;

/// Messages from the metadata reader.
pub(super) enum FromProvider {
    Detected(Detection, String),
    DetectFailed(DetectError),
    Config(String),
    Observed(Observation),
    Identity(Identity),
}

/// How long to wait before asking the metadata service for the machine's identity again, after
/// a read that gave nothing.
const IDENTITY_RETRY: Duration = Duration::from_secs(300);

/// One source's quiet reads since the daemon last took them.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeldSource {
    pub(super) source: SourceId,
    /// Successful reads.
    pub(super) reads: u64,
    /// The last of them.
    pub(super) last: Moment,
}

/// The quiet reads kept since the daemon last took them.
#[derive(Debug, Default)]
pub(super) struct Held {
    pub(super) sources: Vec<HeldSource>,
    /// When the reader last finished an observation, quiet or not.
    pub(super) observed: Option<Instant>,
}

/// What the reader and the daemon share: whether the daemon's picture has settled (then a
/// quiet observation changes nothing it would act on), and the quiet ones kept meanwhile.
#[derive(Debug)]
pub(super) struct Quiet {
    settled: AtomicBool,
    held: Mutex<Held>,
    /// When the daemon's next deferred power action is due, for the provider to read its
    /// deadline again just before (GCP's maintenance start).
    deferred: Mutex<Option<SystemTime>>,
}

impl Quiet {
    /// Unsettled: every observation is sent until the daemon says otherwise.
    pub(super) fn new() -> Arc<Quiet> {
        Arc::new(Quiet {
            settled: AtomicBool::new(false),
            held: Mutex::new(Held::default()),
            deferred: Mutex::new(None),
        })
    }

    /// The daemon's next deferred power action is due at `at` (`None`: none is deferred).
    pub(super) fn defer(&self, at: Option<SystemTime>) {
        if let Ok(mut d) = self.deferred.lock() {
            *d = at;
        }
    }

    /// When the daemon's next deferred power action is due.
    fn deferred(&self) -> Option<SystemTime> {
        self.deferred.lock().ok().and_then(|d| *d)
    }

    /// The daemon's picture has settled, or not (then every observation is sent).
    pub(super) fn settle(&self, settled: bool) {
        self.settled.store(settled, Ordering::Relaxed);
    }

    /// Whether the daemon last said its picture has settled.
    pub(super) fn settled(&self) -> bool {
        self.settled.load(Ordering::Relaxed)
    }

    /// The quiet reads kept so far; none are kept after.
    pub(super) fn take(&self) -> Held {
        self.held
            .lock()
            .map(|mut h| std::mem::take(&mut *h))
            .unwrap_or_default()
    }

    /// `obs` when it is to be sent; `None` when it was quiet and is kept here instead.
    fn pass(&self, obs: Observation) -> Option<Observation> {
        let Ok(mut held) = self.held.lock() else {
            return Some(obs);
        };
        held.observed = Some(Instant::now());
        let quiet = obs.notices.is_empty() && obs.errors.is_empty();
        if !quiet || !self.settled() {
            return Some(obs);
        }
        let now = Moment::now();
        for &source in &obs.fresh {
            match held.sources.iter_mut().find(|h| h.source == source) {
                Some(h) => {
                    h.reads += 1;
                    h.last = now;
                }
                None => held.sources.push(HeldSource {
                    source,
                    reads: 1,
                    last: now,
                }),
            }
        }
        None
    }
}

/// Starts the reader thread. It ends when the daemon drops its end of either channel.
pub(super) fn start(
    settings: ProviderSettings,
    tx: mpsc::Sender<FromProvider>,
    requests: std::sync::mpsc::Receiver<Request>,
    quiet: Arc<Quiet>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("nthd-metadata".into())
        .spawn(move || {
            let reader = Reader {
                tx,
                requests,
                quiet,
            };
            if let Some(provider) = reader.start_provider(&settings) {
                reader.read(provider);
            }
        })
}

/// The reader thread's ends of what it shares with the daemon.
struct Reader {
    tx: mpsc::Sender<FromProvider>,
    requests: std::sync::mpsc::Receiver<Request>,
    quiet: Arc<Quiet>,
}

impl Reader {
    /// Detects the cloud (retrying with backoff, each failure sent on) and builds its provider;
    /// `None` when the daemon has gone or the settings cannot make one (sent on as `Config`).
    fn start_provider(&self, settings: &ProviderSettings) -> Option<provider::AnyProvider> {
        let mut backoff =
            crate::timings::Backoff::with_max(Duration::from_secs(2), Duration::from_secs(30));
        let detection = loop {
            match provider::resolve_cloud(settings) {
                Ok(d) => break d,
                Err(e) => {
                    self.tx.blocking_send(FromProvider::DetectFailed(e)).ok()?;
                    self.wait(backoff.next_delay(), None)?;
                }
            }
        };
        // The plan resolves the timings: a poll interval too long for this cloud falls back to
        // its default there (the daemon warns).
        let provider = match provider::build(detection.cloud, settings) {
            Ok(p) => p,
            Err(e) => {
                let _ = self.tx.blocking_send(FromProvider::Config(e.to_string()));
                return None;
            }
        };
        let describe = provider.describe();
        let detected = FromProvider::Detected(detection, describe);
        self.tx.blocking_send(detected).ok()?;
        Some(provider)
    }

    /// Waits `wait` for the daemon, answering its requests (with `provider`) meanwhile; `None`
    /// when the daemon has gone.
    fn wait(&self, wait: Duration, mut provider: Option<&mut provider::AnyProvider>) -> Option<()> {
        let until = Instant::now() + wait;
        loop {
            match self
                .requests
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(request) => request.answer(provider.as_deref_mut()),
                Err(RecvTimeoutError::Timeout) => return Some(()),
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Waits until the next source is due, reads, sends or keeps; answers a request the moment
    /// it is made. Ends when the daemon has gone.
    fn read(&self, mut provider: provider::AnyProvider) {
        let mut identity_due = Some(Instant::now());
        loop {
            let due = provider
                .next_due()
                .saturating_duration_since(Instant::now());
            if self.wait(due, Some(&mut provider)).is_none() {
                return;
            }
            provider.action_due(self.quiet.deferred());
            let obs = provider.observe();
            if let Some(obs) = self.quiet.pass(obs) {
                if self.tx.blocking_send(FromProvider::Observed(obs)).is_err() {
                    return;
                }
            }
            if identity_due.is_some_and(|t| t <= Instant::now()) {
                identity_due = read_identity(&mut provider, &self.tx);
            }
        }
    }
}

/// Reads the instance's identity and sends it on; the time of the next try when nothing could
/// be read.
fn read_identity(
    provider: &mut provider::AnyProvider,
    tx: &mpsc::Sender<FromProvider>,
) -> Option<Instant> {
    match provider.identity() {
        Ok(id) => {
            // A closed channel means the daemon is stopping: nothing left to retry for.
            let _ = tx.blocking_send(FromProvider::Identity(id));
            None
        }
        Err(e) => {
            tracing::debug!("instance identity not read: {e}; retrying later");
            Some(Instant::now() + IDENTITY_RETRY)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imds::ImdsError;
    use crate::notice::Cloud;
    use crate::notice::NoticeKind;

    const SPOT: SourceId = SourceId::new("spot");
    const REBALANCE: SourceId = SourceId::new("rebalance");

    fn obs(fresh: &[SourceId], notice: bool) -> Observation {
        let mut o = Observation {
            fresh: fresh.to_vec(),
            ..Observation::default()
        };
        if notice {
            o.notices.push(crate::simulate::synthetic(
                NoticeKind::SpotTerminate,
                Duration::from_secs(120),
                std::time::SystemTime::now(),
            ));
        }
        o
    }

    #[test]
    fn every_observation_goes_while_the_daemon_wants_them() {
        let q = Quiet::new();
        assert!(q.pass(obs(&[SPOT], false)).is_some());
        let held = q.take();
        assert!(held.sources.is_empty() && held.observed.is_some());
    }

    #[test]
    fn quiet_reads_are_kept_counted_and_taken_once_when_settled() {
        let q = Quiet::new();
        q.settle(true);
        for _ in 0..3 {
            assert!(q.pass(obs(&[SPOT], false)).is_none());
        }
        let before = Instant::now();
        assert!(q.pass(obs(&[SPOT, REBALANCE], false)).is_none());
        let held = q.take();
        let counts: Vec<(SourceId, u64)> =
            held.sources.iter().map(|h| (h.source, h.reads)).collect();
        assert_eq!(counts, [(SPOT, 4), (REBALANCE, 1)]);
        assert!(held.sources.iter().all(|h| h.last.mono >= before));
        assert!(q.take().sources.is_empty(), "taken once");
    }

    #[test]
    fn a_notice_or_an_error_always_goes_at_once() {
        let q = Quiet::new();
        q.settle(true);
        assert!(q.pass(obs(&[SPOT], true)).is_some());
        let mut failed = obs(&[], false);
        failed.errors.push(crate::provider::SourceError {
            source: SPOT,
            error: ImdsError::Client("x".into()),
        });
        assert!(q.pass(failed).is_some());
        assert!(q.take().sources.is_empty());
    }

    /// The next message, within 5 s.
    async fn next(rx: &mut mpsc::Receiver<FromProvider>) -> FromProvider {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("a message within 5 s")
            .expect("the reader is running")
    }

    /// AWS on the mock at `url`, spot every 100 ms, 500 ms timeouts.
    fn aws_settings(url: String) -> ProviderSettings {
        let fast = Duration::from_millis(500);
        ProviderSettings {
            cloud: Some(Cloud::Aws),
            endpoint: Some(url),
            client: crate::imds::ClientOptions {
                request_timeout: fast,
                connect_timeout: fast,
                ..crate::imds::ClientOptions::default()
            },
            timings: crate::timings::Set {
                poll: Some(Duration::from_millis(100)),
                slow_poll: crate::timings::SLOW_POLL,
                gcp_wait: crate::timings::GCP_WAIT,
                request_timeout: fast,
                rebalance_boost: None,
                gcp_notice: Duration::ZERO,
            },
            aws_ipv6: false,
            aws_imdsv1: false,
        }
    }

    /// A request is answered at once, not at the next poll: an acknowledgement (nothing to
    /// acknowledge on AWS), and a read made with the provider's own token (the Auto Scaling
    /// credentials), with no second token fetched.
    async fn answers_requests_between_polls(
        m: &nthd_testkit::imds::MockImds,
        requests: &std::sync::mpsc::Sender<Request>,
    ) {
        use nthd_testkit::imds::Response;
        // Answered at once, not at the next poll: the reader waits on its requests.
        let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
        let asked = Instant::now();
        let ack = Request::Acknowledge(vec!["e1".into()], reply_tx);
        requests.send(ack).unwrap();
        let acked = tokio::time::timeout(Duration::from_secs(2), reply_rx).await;
        assert!(matches!(acked, Ok(Ok(Ok(0)))), "{acked:?}");
        assert!(
            asked.elapsed() < Duration::from_millis(500),
            "{:?}",
            asked.elapsed()
        );

        // A read for the daemon (the Auto Scaling credentials) is made here, with the provider's
        // own token: no second token is fetched.
        let tokens = m.count("/latest/api/token");
        m.set(
            "/latest/meta-data/iam/security-credentials/",
            Response::text(200, "node-role"),
        );
        let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
        let read: crate::provider::TokenRead = Box::new(|imds| {
            let imds = imds.expect("AWS's token source");
            let r =
                crate::imds::get_with_token(imds, "/latest/meta-data/iam/security-credentials/");
            let _ = reply_tx.send(r.map(|r| r.body));
        });
        requests.send(Request::WithToken(read)).unwrap();
        let read = tokio::time::timeout(Duration::from_secs(2), reply_rx).await;
        assert!(
            matches!(&read, Ok(Ok(Ok(b))) if b == "node-role"),
            "{read:?}"
        );
        assert_eq!(m.count("/latest/api/token"), tokens, "one token for both");
    }

    /// The reader thread on AWS, against the mock: the observations go while the daemon wants
    /// them; once it is settled, a quiet second sends nothing and its reads are kept and
    /// counted; a notice goes at once; an acknowledgement is answered between polls; and the
    /// thread ends when the daemon has gone. The reads are blocking, on the reader's thread;
    /// the mock answers from this runtime's workers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_sends_what_matters_and_keeps_the_quiet_reads() {
        use nthd_testkit::imds::{MockImds, Response};
        let m = MockImds::builder()
            .listen("127.0.0.1:0")
            .start()
            .await
            .unwrap();
        let settings = aws_settings(m.url());
        let (tx, mut rx) = mpsc::channel(8);
        let (requests, requests_rx) = std::sync::mpsc::channel();
        let quiet = Quiet::new();
        let reader = start(settings, tx, requests_rx, quiet.clone()).unwrap();
        assert!(matches!(next(&mut rx).await, FromProvider::Detected(..)));
        while !matches!(next(&mut rx).await, FromProvider::Observed(_)) {}

        quiet.settle(true);
        tokio::time::sleep(Duration::from_millis(300)).await;
        while rx.try_recv().is_ok() {}
        quiet.take();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(rx.try_recv().is_err(), "a quiet second sent something");
        let held = quiet.take();
        let spot_id = crate::provider::aws::AwsSource::Spot.id();
        let spot = held.sources.iter().find(|h| h.source == spot_id);
        let spot = spot.expect("spot reads kept");
        assert!((5..=12).contains(&spot.reads), "{held:?}");
        assert!(held
            .observed
            .is_some_and(|t| t.elapsed() < Duration::from_millis(300)));

        let notice = r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#;
        m.set(
            crate::provider::aws::AwsSource::Spot.path(),
            Response::text(200, notice),
        );
        let FromProvider::Observed(obs) = next(&mut rx).await else {
            panic!("not an observation");
        };
        assert_eq!(obs.notices.len(), 1, "{obs:?}");

        answers_requests_between_polls(&m, &requests).await;

        drop((rx, requests));
        let ended = tokio::task::spawn_blocking(move || reader.join());
        let ended = tokio::time::timeout(Duration::from_secs(3), ended).await;
        assert!(matches!(ended, Ok(Ok(Ok(())))), "the reader did not end");
    }
}
