//! Delivery: `send` renders an event once and hands it to every URL's lane without waiting;
//! each lane (see `lane.rs`) delivers on its own, with its own backlog and its own attempts in
//! flight, retrying until the notice's deadline (at most `retry_limit`).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use hyper::body::Bytes;
use tokio::task::JoinHandle;

use super::client::Client;
use super::lane::{Job, Lane};
use super::{Context, Event, SecretHeaders, WebhookError, WebhookFormat, WebhookOptions};
use crate::timefmt::format_duration;

/// The webhook sender the daemon holds. [`Webhooks::send`] never waits; delivery happens in
/// background tasks (one per URL) on the current tokio runtime.
pub struct Webhooks {
    lanes: Vec<Arc<Lane>>,
    tasks: Vec<JoinHandle<()>>,
    context: Mutex<Arc<Context>>,
    format: WebhookFormat,
    retry_cap: Duration,
    retry_limit: Duration,
}

impl fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.lanes.iter().map(|l| l.url().to_string()).collect();
        f.debug_struct("Webhooks")
            .field("urls", &urls)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        let mut w = Webhooks {
            lanes: Vec::new(),
            tasks: Vec::new(),
            context: Mutex::new(Arc::new(context)),
            format: opts.format,
            retry_cap: opts.retry_cap,
            retry_limit: opts.retry_limit,
        };
        if opts.urls.is_empty() {
            return Ok(w);
        }
        if let Some(warning) = super::plain_http_warning(opts, &headers) {
            tracing::warn!("{warning}");
        }
        let client = Arc::new(Client::new(opts, headers)?);
        for url in &opts.urls {
            let lane = Arc::new(Lane::new(url.clone(), opts));
            w.tasks.push(tokio::spawn(lane.clone().run(client.clone())));
            w.lanes.push(lane);
        }
        Ok(w)
    }

    /// Renders `event` once and queues it for every URL, without waiting. When a URL's lane is
    /// full its oldest event is dropped (with one warning per episode): the newest events (the
    /// action taken, its result) matter most as the machine goes down, and a full lane means
    /// that receiver has been failing for a while.
    pub fn send(&self, event: Event) {
        if self.lanes.is_empty() {
            return;
        }
        let ctx = lock(&self.context).clone();
        let (ctype, body) = event.render(&ctx, self.format);
        let job = Arc::new(Job {
            id: event.id(&ctx),
            ty: event.event_type().name(),
            notice: event.notice_ref().map(|n| n.id.clone()),
            ctype,
            body: Bytes::from(body),
            until: retry_until(
                event.deadline(),
                SystemTime::now(),
                self.retry_cap,
                self.retry_limit,
            ),
        });
        for lane in &self.lanes {
            lane.push(job.clone());
        }
    }

    /// Events not delivered yet to each URL (waiting, or being attempted), in the order of
    /// [`WebhookOptions::urls`].
    pub fn pending(&self) -> Vec<usize> {
        self.lanes.iter().map(|l| l.pending()).collect()
    }

    /// Resolves once no event waits for delivery to any URL (delivered or given up); the
    /// caller bounds the wait. The drain report waits on it before nthd releases its lock.
    pub(crate) fn delivered(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let lanes = self.lanes.clone();
        async move {
            while lanes.iter().any(|l| l.pending() > 0) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    /// Sets the context that later events carry (cloud and identity, once known).
    pub fn set_context(&self, context: Context) {
        *lock(&self.context) = Arc::new(context);
    }

    /// Stops taking events and waits up to `within` for the pending ones to be delivered (or
    /// given up); what is still under way then is abandoned with one warning.
    pub async fn drain(mut self, within: Duration) {
        for lane in &self.lanes {
            lane.close();
        }
        let all = async {
            for task in &mut self.tasks {
                let _ = task.await;
            }
        };
        if tokio::time::timeout(within, all).await.is_ok() {
            return;
        }
        for task in &self.tasks {
            task.abort();
        }
        let left: Vec<String> = self
            .lanes
            .iter()
            .filter(|l| l.pending() > 0)
            .map(|l| format!("{} {}", l.url(), l.pending()))
            .collect();
        tracing::warn!(
            "webhooks: stopping after waiting {} with events not delivered ({})",
            format_duration(within),
            left.join(", ")
        );
    }
}

/// Retries go on until the notice's deadline, or `cap` from `now` when it has none; never
/// past `limit` from `now` (an AWS scheduled event's deadline can be weeks away).
fn retry_until(
    deadline: Option<SystemTime>,
    now: SystemTime,
    cap: Duration,
    limit: Duration,
) -> SystemTime {
    deadline.unwrap_or(now + cap).min(now + limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_end_at_the_deadline_or_the_limit_whichever_comes_first() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let (cap, limit) = (Duration::from_secs(900), Duration::from_secs(3600));
        let soon = now + Duration::from_secs(120);
        assert_eq!(retry_until(Some(soon), now, cap, limit), soon);
        let weeks = now + Duration::from_secs(21 * 86_400);
        assert_eq!(retry_until(Some(weeks), now, cap, limit), now + limit);
        assert_eq!(retry_until(None, now, cap, limit), now + cap);
        assert_eq!(
            retry_until(None, now, cap, Duration::from_secs(60)),
            now + Duration::from_secs(60)
        );
        let past = now - Duration::from_secs(60);
        assert_eq!(retry_until(Some(past), now, cap, limit), past);
    }
}
