//! One URL's delivery lane: its own bounded backlog, its own attempts in flight, its own
//! failure streak. Nothing is shared between lanes but the HTTP client, so a receiver that
//! hangs or refuses can never hold back the others.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use http::Method;
use hyper::body::Bytes;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::client::{Answer, Client, Failure};
use super::{WebhookOptions, WebhookUrl};
use crate::notice::NoticeId;
use crate::timefmt::format_duration;
use crate::timings::Backoff;

/// The longest delay between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// One rendered event, shared by every lane.
pub(super) struct Job {
    pub(super) id: String,
    pub(super) ty: &'static str,
    /// The notice's id, for the warning when the event is dropped.
    pub(super) notice: Option<NoticeId>,
    pub(super) ctype: &'static str,
    pub(super) body: Bytes,
    /// No retry starts after this.
    pub(super) until: SystemTime,
}

/// A lane's numbers, from [`WebhookOptions`].
#[derive(Clone, Copy, Debug)]
struct Limits {
    in_flight: usize,
    queue: usize,
    dead_after: Duration,
    dead_queue: usize,
    backoff: Duration,
    retry_limit: Duration,
}

/// One URL's deliveries.
pub(super) struct Lane {
    url: WebhookUrl,
    limits: Limits,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Events waiting for their first attempt or their next retry, oldest first.
    backlog: VecDeque<Pending>,
    in_flight: usize,
    next_seq: u64,
    closed: bool,
    /// Set when an event was dropped; cleared when nothing is pending or the URL recovers, so
    /// a full backlog costs one warning per episode.
    overflowing: bool,
    streak: Streak,
}

/// The URL's current run of failures, for one warning per streak.
#[derive(Default)]
struct Streak {
    /// When the first failure of the streak came; `None` while the URL delivers.
    since: Option<Instant>,
    attempts: u32,
    /// Events not delivered during the streak (refused, out of time or dropped).
    given_up: u32,
}

/// An event on its way to this URL.
struct Pending {
    /// Its place in arrival order: the backlog stays sorted by it, the oldest dropped first.
    seq: u64,
    job: Arc<Job>,
    backoff: Backoff,
    attempt: u32,
    not_before: Instant,
}

/// What one attempt came to.
enum Outcome {
    Delivered(u16),
    /// A 4xx other than 408 and 429: retrying will not help.
    Refused(u16),
    /// Worth another try: the cause, what nthd does, and the wait the receiver asked for.
    Retry(String, String, Option<Duration>),
}

impl Outcome {
    fn of(answer: Result<Answer, Failure>) -> Outcome {
        match answer {
            Ok(a) if (200..300).contains(&a.status) => Outcome::Delivered(a.status),
            Ok(a) if (400..500).contains(&a.status) && a.status != 408 && a.status != 429 => {
                Outcome::Refused(a.status)
            }
            Ok(a) => Outcome::Retry(
                format!("HTTP {}", a.status),
                "nthd retries".into(),
                a.retry_after,
            ),
            Err(f) => Outcome::Retry(f.to_string(), f.hint(), None),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Lane {
    pub(super) fn new(url: WebhookUrl, opts: &WebhookOptions) -> Lane {
        Lane {
            url,
            limits: Limits {
                in_flight: opts.per_url.max(1),
                queue: opts.queue.max(1),
                dead_after: opts.dead_after,
                dead_queue: opts.dead_queue.max(1),
                backoff: opts.backoff,
                retry_limit: opts.retry_limit,
            },
            state: Mutex::new(State::default()),
            wake: Notify::new(),
        }
    }

    pub(super) fn url(&self) -> &WebhookUrl {
        &self.url
    }

    /// Queues `job` for this URL, dropping the oldest pending event if the lane is full.
    pub(super) fn push(&self, job: Arc<Job>) {
        let mut st = lock(&self.state);
        let seq = st.next_seq;
        st.next_seq += 1;
        st.backlog.push_back(Pending {
            seq,
            job,
            backoff: Backoff::with_max(self.limits.backoff, MAX_BACKOFF.max(self.limits.backoff)),
            attempt: 0,
            not_before: Instant::now(),
        });
        self.trim(&mut st);
        drop(st);
        self.wake.notify_one();
    }

    /// Takes no more events; the lane's task ends once nothing is pending.
    pub(super) fn close(&self) {
        lock(&self.state).closed = true;
        self.wake.notify_one();
    }

    /// Events not delivered yet: waiting, or being attempted.
    pub(super) fn pending(&self) -> usize {
        let st = lock(&self.state);
        st.backlog.len() + st.in_flight
    }

    /// The lane's task: starts attempts as slots free up and retries come due, until closed
    /// and empty.
    pub(super) async fn run(self: Arc<Self>, client: Arc<Client>) {
        let mut running: JoinSet<(Pending, Result<Answer, Failure>)> = JoinSet::new();
        loop {
            let Some(next) = self.start_due(&client, &mut running) else {
                return;
            };
            let wait = async {
                match next {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                Some(done) = running.join_next(), if !running.is_empty() => match done {
                    Ok((p, answer)) => self.finish(p, Outcome::of(answer)),
                    // Only a panic gets here; the event is lost, the slot is not.
                    Err(_) => lock(&self.state).in_flight -= 1,
                },
                _ = self.wake.notified() => {}
                _ = wait => {}
            }
        }
    }

    /// Starts every due event a free slot allows, oldest first. `None` when closed and
    /// done; else when the next retry comes due, if a slot is free for it.
    fn start_due(
        &self,
        client: &Arc<Client>,
        running: &mut JoinSet<(Pending, Result<Answer, Failure>)>,
    ) -> Option<Option<Instant>> {
        let now = Instant::now();
        let mut st = lock(&self.state);
        while st.in_flight < self.limits.in_flight {
            let Some(i) = st.backlog.iter().position(|p| p.not_before <= now) else {
                break;
            };
            let mut p = st.backlog.remove(i).expect("a position in the backlog");
            p.attempt += 1;
            st.in_flight += 1;
            let (client, url) = (client.clone(), self.url.clone());
            running.spawn(async move {
                let body = Some((p.job.ctype, p.job.body.clone()));
                let answer = client.request(Method::POST, &url, &[], body).await;
                (p, answer)
            });
        }
        if st.closed && st.backlog.is_empty() && st.in_flight == 0 {
            return None;
        }
        if st.in_flight >= self.limits.in_flight {
            return Some(None);
        }
        Some(st.backlog.iter().map(|p| p.not_before).min())
    }

    /// Records what an attempt came to, and queues its retry if there is time for one.
    fn finish(&self, p: Pending, outcome: Outcome) {
        let url = &self.url;
        let (ty, id, attempt) = (p.job.ty, &p.job.id, p.attempt);
        let mut st = lock(&self.state);
        st.in_flight -= 1;
        match outcome {
            Outcome::Delivered(status) => {
                self.recovered(&mut st);
                tracing::debug!(
                    "webhook {url}: delivered {ty} {id} (HTTP {status}, attempt {attempt})"
                );
            }
            Outcome::Refused(status) => {
                self.failed(
                    &mut st,
                    &format!("HTTP {status}"),
                    status_hint(status),
                    false,
                );
                st.streak.given_up += 1;
            }
            Outcome::Retry(cause, hint, asked) => {
                self.failed(&mut st, &cause, &hint, true);
                self.retry(&mut st, p, asked);
            }
        }
        self.trim(&mut st);
        if st.backlog.is_empty() && st.in_flight == 0 {
            st.overflowing = false;
        }
    }

    /// Puts `p` back in its place in the backlog for its next attempt (no sooner than the
    /// receiver `asked`, within the backoff's ceiling), unless that would come after its retry
    /// deadline.
    fn retry(&self, st: &mut State, mut p: Pending, asked: Option<Duration>) {
        let delay = p.backoff.next_delay_asked(asked);
        if SystemTime::now() + delay > p.job.until {
            tracing::debug!(
                "webhook {}: giving up on {} {} after {} attempts (deadline)",
                self.url,
                p.job.ty,
                p.job.id,
                p.attempt
            );
            st.streak.given_up += 1;
            return;
        }
        p.not_before = Instant::now() + delay;
        let at = st.backlog.partition_point(|q| q.seq < p.seq);
        st.backlog.insert(at, p);
    }

    /// Drops the oldest waiting events past the lane's bound: `queue` pending events, or
    /// `dead_queue` once the URL has failed for `dead_after` without a success.
    fn trim(&self, st: &mut State) {
        let dead = st
            .streak
            .since
            .is_some_and(|s| s.elapsed() >= self.limits.dead_after);
        let cap = if dead {
            self.limits.dead_queue
        } else {
            self.limits.queue
        };
        while st.backlog.len() + st.in_flight > cap {
            let Some(old) = st.backlog.pop_front() else {
                return;
            };
            st.streak.given_up += 1;
            if !std::mem::replace(&mut st.overflowing, true) {
                self.warn_dropped(&old.job, cap, dead);
            }
        }
    }

    fn warn_dropped(&self, old: &Job, cap: usize, dead: bool) {
        let why = if dead {
            format!(
                "it has failed for over {} without a success, so nthd keeps only its newest \
                 {cap} events",
                format_duration(self.limits.dead_after)
            )
        } else {
            format!("{cap} events are waiting for it")
        };
        tracing::warn!(
            "webhook {}: {why}; dropping the oldest ({} for {}) and more as newer events \
             come, with no further warning until it catches up",
            self.url,
            old.ty,
            old.notice
                .as_ref()
                .map_or_else(|| "a shutdown".to_string(), |n| format!("notice {n}"))
        );
    }

    /// Warns on the first failure of a streak only.
    fn failed(&self, st: &mut State, cause: &str, hint: &str, retrying: bool) {
        st.streak.attempts += 1;
        if st.streak.since.is_some() {
            return;
        }
        st.streak.since = Some(Instant::now());
        let then = if retrying {
            format!(
                "nthd retries each event until its notice's deadline, for at most {}",
                format_duration(self.limits.retry_limit)
            )
        } else {
            "the event is not retried".to_string()
        };
        tracing::warn!(
            "webhook {}: {cause}; {hint}. {then}; no further warning until it recovers",
            self.url
        );
    }

    fn recovered(&self, st: &mut State) {
        if st.streak.since.is_some() {
            tracing::info!(
                "webhook {}: delivering again, after {} failed attempts ({} events not \
                 delivered meanwhile)",
                self.url,
                st.streak.attempts,
                st.streak.given_up
            );
        }
        st.streak = Streak::default();
        st.overflowing = false;
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
