//! Delivery: a bounded queue that `send` fills without waiting, and a background task that
//! POSTs every event to every URL at once, with retries, until the notice's deadline.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use http::Method;
use hyper::body::Bytes;
use tokio::sync::{Notify, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use super::client::Client;
use super::event::Queued;
use super::{
    Context, Event, SecretHeaders, WebhookError, WebhookFormat, WebhookOptions, WebhookUrl,
};
use crate::imds::Backoff;
use crate::timefmt::format_duration;

/// The longest delay between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Requests in flight to one URL at once: a receiver that hangs holds at most this many of
/// the shared permits, so the other URLs keep theirs.
const PER_URL: usize = 4;

/// The webhook sender the daemon holds. [`Webhooks::send`] never waits; delivery happens in a
/// background task on the current tokio runtime.
#[derive(Debug)]
pub struct Webhooks {
    shared: Arc<Shared>,
    task: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<VecDeque<Queued>>,
    wake: Notify,
    closed: AtomicBool,
    /// Set when an event was dropped for a full queue; cleared when the queue empties, so a
    /// full queue costs one warning per episode.
    overflowing: AtomicBool,
    context: Mutex<Arc<Context>>,
    capacity: usize,
    /// Deliveries (event × URL) started and not finished.
    pending: AtomicUsize,
}

/// What the background task needs.
struct Deliverer {
    client: Client,
    urls: Vec<WebhookUrl>,
    format: WebhookFormat,
    backoff: Duration,
    retry_cap: Duration,
    permits: Semaphore,
    per_url: Vec<Semaphore>,
    streaks: Vec<Mutex<Streak>>,
}

/// One URL's run of failures, for one warning per streak.
#[derive(Default)]
struct Streak {
    failing: bool,
    attempts: u32,
    given_up: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Webhooks {
    /// Starts delivery to `opts.urls`, reading the headers file (owned by root) if one is set.
    /// With no URL it starts nothing and `send` does nothing. Must run inside a tokio runtime.
    pub fn start(opts: &WebhookOptions, context: Context) -> Result<Webhooks, WebhookError> {
        let headers = match &opts.headers_file {
            Some(p) => SecretHeaders::load(p, 0)?,
            None => SecretHeaders::none(),
        };
        Webhooks::start_with_headers(opts, headers, context)
    }

    /// [`Webhooks::start`] with headers already loaded (`opts.headers_file` is not read). Warns
    /// once if the headers would go to a plain `http://` URL.
    pub fn start_with_headers(
        opts: &WebhookOptions,
        headers: SecretHeaders,
        context: Context,
    ) -> Result<Webhooks, WebhookError> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            overflowing: AtomicBool::new(false),
            context: Mutex::new(Arc::new(context)),
            capacity: opts.queue.max(1),
            pending: AtomicUsize::new(0),
        });
        if opts.urls.is_empty() {
            return Ok(Webhooks { shared, task: None });
        }
        if let Some(w) = super::plain_http_warning(opts, &headers) {
            tracing::warn!("{w}");
        }
        let d = Arc::new(Deliverer {
            client: Client::new(opts, headers)?,
            urls: opts.urls.clone(),
            format: opts.format,
            backoff: opts.backoff,
            retry_cap: opts.retry_cap,
            permits: Semaphore::new(opts.concurrency.max(1)),
            per_url: opts.urls.iter().map(|_| Semaphore::new(PER_URL)).collect(),
            streaks: opts.urls.iter().map(|_| Mutex::default()).collect(),
        });
        let task = tokio::spawn(dispatch(shared.clone(), d));
        Ok(Webhooks {
            shared,
            task: Some(task),
        })
    }

    /// Queues `event` for every URL and returns at once. When the queue is full the oldest
    /// queued event is dropped (with one warning per episode): the newest events (the action
    /// taken, its result) matter most as the machine goes down, and a full queue means the
    /// receivers have been failing for a long time.
    pub fn send(&self, event: Event) {
        if self.task.is_none() {
            return;
        }
        let s = &self.shared;
        let ctx = lock(&s.context).clone();
        {
            let mut q = lock(&s.queue);
            if q.len() >= s.capacity {
                if let Some((old, _)) = q.pop_front() {
                    if !s.overflowing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "webhooks: {} events are waiting for delivery; dropping the oldest \
                             ({} for notice {}) to queue the newest",
                            s.capacity,
                            old.event_type().name(),
                            old.notice_ref().id
                        );
                    }
                }
            }
            q.push_back((event, ctx));
        }
        s.wake.notify_one();
    }

    /// Sets the context that later events carry (cloud and identity, once known).
    pub fn set_context(&self, context: Context) {
        *lock(&self.shared.context) = Arc::new(context);
    }

    /// Stops taking events and waits up to `within` for the queued ones to be delivered (or
    /// given up); what is still under way then is abandoned with one warning.
    pub async fn drain(self, within: Duration) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.shared.wake.notify_one();
        let Some(mut task) = self.task else { return };
        if tokio::time::timeout(within, &mut task).await.is_err() {
            task.abort();
            let queued = lock(&self.shared.queue).len();
            let pending = self.shared.pending.load(Ordering::SeqCst);
            tracing::warn!(
                "webhooks: stopping with {pending} deliveries under way and {queued} events \
                 not started, after waiting {}",
                format_duration(within)
            );
        }
    }
}

/// The background task: takes events off the queue and starts one delivery per URL.
async fn dispatch(s: Arc<Shared>, d: Arc<Deliverer>) {
    let mut running = JoinSet::new();
    // Deliveries held back at once; past it the queue fills, and then drops its oldest.
    let max_running = s.capacity * d.urls.len();
    loop {
        while running.try_join_next().is_some() {}
        let next = lock(&s.queue).pop_front();
        let Some((event, ctx)) = next else {
            s.overflowing.store(false, Ordering::Relaxed);
            if s.closed.load(Ordering::SeqCst) {
                while running.join_next().await.is_some() {}
                return;
            }
            s.wake.notified().await;
            continue;
        };
        while running.len() >= max_running {
            running.join_next().await;
        }
        let (ctype, body) = event.render(&ctx, d.format);
        let job = Arc::new(Job {
            id: event.id(&ctx),
            ty: event.event_type().name(),
            ctype,
            body: Bytes::from(body),
            until: retry_until(event.deadline(), d.retry_cap),
        });
        for i in 0..d.urls.len() {
            s.pending.fetch_add(1, Ordering::SeqCst);
            let (s, d, job) = (s.clone(), d.clone(), job.clone());
            running.spawn(async move {
                d.deliver(i, &job).await;
                s.pending.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }
}

/// Retries go on until the notice's deadline, or `cap` from now when it has none.
fn retry_until(deadline: Option<SystemTime>, cap: Duration) -> SystemTime {
    deadline.unwrap_or_else(|| SystemTime::now() + cap)
}

/// One rendered event.
struct Job {
    id: String,
    ty: &'static str,
    ctype: &'static str,
    body: Bytes,
    until: SystemTime,
}

/// What one attempt came to.
enum Outcome {
    Delivered(u16),
    /// A 4xx other than 408 and 429: retrying will not help.
    Refused(u16),
    Retry(String, &'static str),
}

impl Deliverer {
    /// Delivers `job` to URL `i`: at least one attempt, then retries until `job.until`.
    async fn deliver(&self, i: usize, job: &Job) {
        let url = &self.urls[i];
        let mut backoff = Backoff::with_max(self.backoff, MAX_BACKOFF.max(self.backoff));
        for attempt in 1u32.. {
            let answer = {
                let _mine = self.per_url[i].acquire().await;
                let _permit = self.permits.acquire().await;
                self.client
                    .request(Method::POST, url, &[], Some((job.ctype, job.body.clone())))
                    .await
            };
            let outcome = match answer {
                Ok(a) if (200..300).contains(&a.status) => Outcome::Delivered(a.status),
                Ok(a) if (400..500).contains(&a.status) && a.status != 408 && a.status != 429 => {
                    Outcome::Refused(a.status)
                }
                Ok(a) => Outcome::Retry(format!("HTTP {}", a.status), "nthd retries"),
                Err(f) => Outcome::Retry(f.to_string(), f.hint()),
            };
            match outcome {
                Outcome::Delivered(status) => {
                    self.recovered(i);
                    tracing::debug!(
                        "webhook {url}: delivered {} {} (HTTP {status}, attempt {attempt})",
                        job.ty,
                        job.id
                    );
                    return;
                }
                Outcome::Refused(status) => {
                    self.failed(i, &format!("HTTP {status}"), status_hint(status), false);
                    self.gave_up(i);
                    return;
                }
                Outcome::Retry(cause, hint) => self.failed(i, &cause, hint, true),
            }
            let delay = backoff.next_delay();
            if SystemTime::now() + delay > job.until {
                tracing::debug!(
                    "webhook {url}: giving up on {} {} after {attempt} attempts (deadline)",
                    job.ty,
                    job.id
                );
                self.gave_up(i);
                return;
            }
            tokio::time::sleep(delay).await;
        }
    }

    /// Warns on the first failure of a streak only.
    fn failed(&self, i: usize, cause: &str, hint: &str, retrying: bool) {
        let mut st = lock(&self.streaks[i]);
        st.attempts += 1;
        if st.failing {
            return;
        }
        st.failing = true;
        let then = if retrying {
            "nthd retries each event until its notice's deadline"
        } else {
            "the event is not retried"
        };
        tracing::warn!(
            "webhook {}: {cause}; {hint}. {then}; no further warning until it recovers",
            self.urls[i]
        );
    }

    fn gave_up(&self, i: usize) {
        lock(&self.streaks[i]).given_up += 1;
    }

    fn recovered(&self, i: usize) {
        let mut st = lock(&self.streaks[i]);
        if st.failing {
            tracing::info!(
                "webhook {}: delivering again, after {} failed attempts ({} events not \
                 delivered meanwhile)",
                self.urls[i],
                st.attempts,
                st.given_up
            );
        }
        *st = Streak::default();
    }
}

/// What a refusal usually means.
fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => "the receiver refused the credentials; check --webhook-headers-file",
        404 | 405 | 410 => "check the webhook URL's path",
        _ => "the receiver refused the request; check --webhook-format and the URL",
    }
}
