//! The plan of timings: every default interval, and every value derived from them, in one
//! place.
//!
//! The defaults table below is the only place a default poll interval is written; clap's
//! `default_value`s, every provider (each is built from the resolved [`Timings`]; AWS adds its
//! IMDSv2 settings in [`crate::provider::aws::AwsOptions`]), the status file's blind-after, the
//! systemd watchdog window and the poll-interval check all read it. After detection, [`Set::resolve`] turns the table and the settings into one value
//! per cloud, and every consumer takes its numbers from that value.
//!
//! It also holds [`Backoff`], the one rule for spacing retries after failures: metadata
//! reads, webhook deliveries, detection and the drain watcher's Auto Scaling calls.

use std::time::Duration;

use crate::notice::Cloud;

/// `--slow-poll-interval`'s default, as clap shows it.
pub(crate) const SLOW_POLL_TEXT: &str = "20s";
/// `--gcp-wait`'s default, as clap shows it.
pub(crate) const GCP_WAIT_TEXT: &str = "60s";
/// `--aws-rebalance-boost`'s default, as clap shows it.
pub(crate) const REBALANCE_BOOST_TEXT: &str = "200ms";
/// `--request-timeout`'s default, as clap shows it.
pub(crate) const REQUEST_TIMEOUT_TEXT: &str = "2s";

/// The fast poll interval on every cloud but Azure.
pub(crate) const POLL: Duration = Duration::from_secs(1);
/// Azure's fast poll interval. Azure Spot evictions are reported to come in under 10 s, against
/// a documented 30 s, and its IMDS allows about 5 requests a second per VM, shared with every
/// agent on it: 2 a second halves the detection time and leaves 3 for the others.
pub(crate) const AZURE_POLL: Duration = Duration::from_millis(500);
/// The slow poll interval (AWS scheduled events and rebalance; GCP upcoming maintenance).
pub(crate) const SLOW_POLL: Duration = text_duration(SLOW_POLL_TEXT);
/// How long one GCP long-poll waits.
pub(crate) const GCP_WAIT: Duration = text_duration(GCP_WAIT_TEXT);
/// How often spot is read on AWS while a rebalance recommendation is listed.
pub(crate) const REBALANCE_BOOST: Duration = text_duration(REBALANCE_BOOST_TEXT);
/// The timeout of one metadata request.
pub(crate) const REQUEST_TIMEOUT: Duration = text_duration(REQUEST_TIMEOUT_TEXT);
/// The longest time one connection to the metadata service may take to set up (shorter when
/// the request timeout is).
pub(crate) const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(1);
/// Azure: the timeout of Scheduled Events requests until the service has answered once (the
/// first call can take up to two minutes while the platform enables it for the VM).
pub(crate) const AZURE_FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// nthd counts as blind after no successful read for this long at least.
pub(crate) const BLIND_AFTER_MIN: Duration = Duration::from_secs(30);
/// AWS: how long spot is read faster after a rebalance recommendation appeared, at most.
pub(crate) const BOOST_MAX: Duration = Duration::from_secs(30 * 60);
/// AWS: how often the rebalance recommendation is read while the boost is on: the boost starts
/// at most this long (plus one read) after the recommendation appears, well within 5 s.
pub(crate) const REBALANCE_READ_INTERVAL: Duration = Duration::from_secs(4);
/// The AWS Auto Scaling state is read every this many fast polls.
pub(crate) const ASG_POLLS: u32 = 3;

/// The fast poll interval on `cloud` when none is set.
pub(crate) const fn default_poll(cloud: Cloud) -> Duration {
    match cloud {
        Cloud::Azure => AZURE_POLL,
        _ => POLL,
    }
}

/// Every timing of one cloud, resolved from the defaults table and the settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// The cloud these are for.
    pub cloud: Cloud,
    /// The fast poll interval (AWS spot, Azure, Alibaba, Tencent; GCP's retry interval).
    pub poll: Duration,
    /// The slow poll interval.
    pub slow_poll: Duration,
    /// How long one GCP long-poll waits.
    pub gcp_wait: Duration,
    /// The timeout of one metadata request.
    pub request_timeout: Duration,
    /// AWS: spot's interval while a rebalance recommendation is listed (`None`: off).
    pub rebalance_boost: Option<Duration>,
    /// GCP: how long before the ACPI soft-off `instance/preempted` turns TRUE (0: at it).
    pub gcp_notice: Duration,
}

impl Timings {
    /// The defaults of `cloud`, with nothing set.
    pub const fn defaults(cloud: Cloud) -> Timings {
        Timings {
            cloud,
            poll: default_poll(cloud),
            slow_poll: SLOW_POLL,
            gcp_wait: GCP_WAIT,
            request_timeout: REQUEST_TIMEOUT,
            rebalance_boost: Some(REBALANCE_BOOST),
            gcp_notice: Duration::ZERO,
        }
    }

    /// The lead time of the notice that bounds the drain: the cloud's shortest, or on GCP the
    /// preemption notice the VM was created with (`NTHD_GCP_PREEMPTION_NOTICE`), when longer.
    pub fn notice_lead(&self) -> Duration {
        let lead = self.cloud.notice_lead_time();
        match self.cloud {
            Cloud::Gcp => lead.max(self.gcp_notice),
            _ => lead,
        }
    }

    /// The settings that give these timings.
    pub fn set(&self) -> Set {
        Set {
            poll: Some(self.poll),
            slow_poll: self.slow_poll,
            gcp_wait: self.gcp_wait,
            request_timeout: self.request_timeout,
            rebalance_boost: self.rebalance_boost,
            gcp_notice: self.gcp_notice,
        }
    }

    /// Whether the fast poll interval is well inside the cloud's shortest notice.
    pub fn fits(&self) -> bool {
        fits(self.cloud, self.poll)
    }

    /// How often the AWS Auto Scaling state is read.
    pub fn asg_poll(&self) -> Duration {
        self.poll * ASG_POLLS
    }

    /// How long nthd may go without a successful metadata read before it counts as blind:
    /// 3 poll intervals or [`BLIND_AFTER_MIN`], whichever is longer (on GCP at least one
    /// long-poll and its timeout, since an idle long-poll answers only every `--gcp-wait`);
    /// and, for one failing source, the same for the slow sources' interval.
    pub fn blind_after(&self) -> (Duration, Duration) {
        let mut all = (self.poll * 3).max(BLIND_AFTER_MIN);
        if self.cloud == Cloud::Gcp {
            all = all.max(self.gcp_wait + self.request_timeout + Duration::from_secs(10));
        }
        (all, all.max(self.slow_poll * 3))
    }
}

/// Whether `poll` is well inside `cloud`'s shortest notice (at most half of it). One that is
/// not falls back to the cloud's default.
pub(crate) fn fits(cloud: Cloud, poll: Duration) -> bool {
    poll * 2 <= cloud.notice_lead_time()
}

/// The timing settings as given (`--poll-interval` and the others), before a cloud is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Set {
    /// `--poll-interval`; `None` means the cloud's default.
    pub poll: Option<Duration>,
    /// `--slow-poll-interval`.
    pub slow_poll: Duration,
    /// `--gcp-wait`.
    pub gcp_wait: Duration,
    /// `--request-timeout`.
    pub request_timeout: Duration,
    /// `--aws-rebalance-boost`; `None` means off.
    pub rebalance_boost: Option<Duration>,
    /// `--gcp-preemption-notice`.
    pub gcp_notice: Duration,
}

impl Set {
    /// The timings on `cloud`. A poll interval set that does not fit the cloud (see [`fits`])
    /// is replaced by the cloud's default.
    pub fn resolve(&self, cloud: Cloud) -> Timings {
        let poll = self.poll.filter(|p| fits(cloud, *p));
        Timings {
            cloud,
            poll: poll.unwrap_or(default_poll(cloud)),
            slow_poll: self.slow_poll,
            gcp_wait: self.gcp_wait,
            request_timeout: self.request_timeout,
            rebalance_boost: self.rebalance_boost,
            gcp_notice: self.gcp_notice,
        }
    }

    /// The systemd watchdog's window: the main loop is healthy while observations keep
    /// arriving within this. It holds before detection, so it covers the slowest cloud: a GCP
    /// long-poll with its retries, or one slow poll, each with 10 s to spare.
    pub fn watchdog_window(&self) -> Duration {
        (self.gcp_wait + self.request_timeout * 4 + Duration::from_secs(10))
            .max(self.slow_poll + Duration::from_secs(10))
    }
}

/// A duration written as clap shows a default (`200ms`, `20s`, `1m`), at compile time: the
/// table's text is the one place each default is written.
const fn text_duration(s: &str) -> Duration {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        n = n * 10 + (b[i] - b'0') as u64;
        i += 1;
    }
    let unit = b.len() - i;
    match (unit, b[b.len() - 1]) {
        (2, b's') if b[i] == b'm' => Duration::from_millis(n),
        (1, b's') => Duration::from_secs(n),
        (1, b'm') => Duration::from_secs(n * 60),
        _ => panic!("a default duration is digits and ms, s or m"),
    }
}

/// Exponential backoff with jitter between failed reads of one source. The first retry comes
/// after the source's normal interval; the delay doubles up to `max`. Sources with a short lead
/// time use it only when the service throttles (`provider::Pace`).
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
    seed: u64,
}

impl Backoff {
    pub(crate) fn new(base: Duration) -> Backoff {
        let max = (base * 5).clamp(Duration::from_secs(5), Duration::from_secs(60));
        Backoff::with_max(base, max)
    }

    pub(crate) fn with_max(base: Duration, max: Duration) -> Backoff {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::from(d.subsec_nanos()))
            | 1;
        Backoff {
            base,
            max: max.max(base),
            attempt: 0,
            seed,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The delay before the next try when the service asked for `asked` (`Retry-After`): the
    /// backoff's own delay, or the wait asked for if longer, but never past the backoff's
    /// ceiling, so a service asking for an hour cannot blind nthd for an hour.
    pub(crate) fn next_delay_asked(&mut self, asked: Option<Duration>) -> Duration {
        let own = self.next_delay();
        asked.map_or(own, |a| own.max(a.min(self.max)))
    }

    /// The longest delay this backoff gives.
    pub(crate) fn ceiling(&self) -> Duration {
        self.max
    }

    /// The delay before the next try, with up to 20% jitter so a fleet does not retry in step.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(16)).unwrap_or(u32::MAX);
        self.attempt = self.attempt.saturating_add(1);
        let raw = self.base.saturating_mul(factor).min(self.max);
        // xorshift64
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let jitter = (self.seed % 1000) as f64 / 1000.0 * 0.2;
        raw.mul_f64(1.0 - jitter).max(Duration::from_millis(50))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_text_is_read_as_written() {
        assert_eq!(SLOW_POLL, Duration::from_secs(20));
        assert_eq!(GCP_WAIT, Duration::from_secs(60));
        assert_eq!(REBALANCE_BOOST, Duration::from_millis(200));
        assert_eq!(REQUEST_TIMEOUT, Duration::from_secs(2));
        assert_eq!(text_duration("2m"), Duration::from_secs(120));
    }

    #[test]
    fn azure_polls_twice_a_second_and_the_others_once() {
        assert_eq!(
            Timings::defaults(Cloud::Azure).poll,
            Duration::from_millis(500)
        );
        for c in [Cloud::Aws, Cloud::Gcp, Cloud::Alibaba, Cloud::Tencent] {
            assert_eq!(Timings::defaults(c).poll, Duration::from_secs(1), "{c}");
            assert!(Timings::defaults(c).fits(), "{c}");
        }
    }

    #[test]
    fn a_poll_interval_that_does_not_fit_falls_back_to_the_default() {
        let set = Set {
            poll: Some(Duration::from_secs(20)),
            ..Timings::defaults(Cloud::Aws).set()
        };
        assert_eq!(set.resolve(Cloud::Alibaba).poll, Duration::from_secs(20));
        assert_eq!(set.resolve(Cloud::Azure).poll, AZURE_POLL);
        assert_eq!(set.resolve(Cloud::Gcp).poll, POLL);
        assert_eq!(set.watchdog_window(), Duration::from_secs(78));
    }

    #[test]
    fn blind_after_covers_three_polls_and_a_gcp_long_poll() {
        let aws = Timings::defaults(Cloud::Aws);
        assert_eq!(
            aws.blind_after(),
            (BLIND_AFTER_MIN, Duration::from_secs(60))
        );
        let gcp = Timings::defaults(Cloud::Gcp);
        assert_eq!(gcp.blind_after().0, Duration::from_secs(72));
        let slow = Timings {
            poll: Duration::from_secs(20),
            ..Timings::defaults(Cloud::Alibaba)
        };
        assert_eq!(slow.blind_after().0, Duration::from_secs(60));
    }

    #[test]
    fn backoff_grows_caps_and_resets() {
        let mut b = Backoff::with_max(Duration::from_secs(1), Duration::from_secs(5));
        let d: Vec<_> = (0..6).map(|_| b.next_delay()).collect();
        for (i, want) in [1u64, 2, 4, 5, 5, 5].iter().enumerate() {
            let lo = Duration::from_secs(*want).mul_f64(0.8);
            assert!(
                d[i] >= lo && d[i] <= Duration::from_secs(*want),
                "{i}: {:?}",
                d[i]
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_secs(1));
        // Never overflows, however many failures.
        for _ in 0..10_000 {
            assert!(b.next_delay() <= Duration::from_secs(5));
        }
    }
}
