//! A one-shot timer on a timerfd, for the poll loop's sleep between metadata reads.
//!
//! tokio's timer wheel keeps a deadline between 64 ms and 4 s away in a 64 ms-slot level: the
//! runtime wakes at the start of the deadline's slot only to move it down a level, and sleeps
//! again until the deadline. At one poll a second that is one wasted wakeup (a context switch
//! and an `epoll_pwait`) per poll, about a quarter of nthd's wakeups
//! (`bench/results/request-cost.md`). A timerfd armed for the deadline wakes the runtime once,
//! at the deadline, through the epoll set the runtime already waits on.

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// A reusable one-shot timer; tokio's own sleep where no timerfd can be had.
pub(crate) struct Deadline {
    fd: Option<AsyncFd<OwnedFd>>,
}

impl Deadline {
    /// Must be called inside the runtime.
    pub(crate) fn new() -> Deadline {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let flags = TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC;
        let Ok(owned) = timerfd_create(TimerfdClockId::Monotonic, flags) else {
            return Deadline { fd: None };
        };
        // `new` is deprecated for descriptors that can be closed while registered; this one is
        // owned by the AsyncFd and closed only after it is deregistered (`register`, the
        // replacement, needs tokio 1.53).
        #[allow(deprecated)]
        let fd = AsyncFd::new(owned).ok();
        Deadline { fd }
    }

    /// Sleeps until `when` (at once if it has passed). Cancel-safe: dropping the future leaves
    /// the timer to be re-armed by the next call.
    pub(crate) async fn sleep_until(&mut self, when: Instant) {
        let Some(fd) = &self.fd else {
            return tokio::time::sleep_until(when).await;
        };
        let left = when.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let spec = rustix::time::Itimerspec {
            it_interval: rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: rustix::time::Timespec {
                // A poll deadline is seconds away; 2^30 s (34 years) fits every time_t.
                tv_sec: left.as_secs().min(1 << 30) as _,
                // Below 1e9, so it fits every c_long.
                tv_nsec: left.subsec_nanos().into(),
            },
        };
        // Arming also clears an expiry a cancelled sleep did not read.
        let flags = rustix::time::TimerfdTimerFlags::empty();
        if rustix::time::timerfd_settime(fd.get_ref(), flags, &spec).is_err() {
            return tokio::time::sleep_until(when).await;
        }
        loop {
            let Ok(mut guard) = fd.readable().await else {
                return tokio::time::sleep_until(when).await;
            };
            let read = guard.try_io(|fd| {
                let mut expirations = [0u8; 8];
                rustix::io::read(fd.get_ref(), &mut expirations)
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
            match read {
                Ok(Ok(())) => {
                    // The one expiry is read and the timer is disarmed until the next call:
                    // forget the readiness now rather than find it stale with a read that
                    // fails (one syscall a poll).
                    guard.clear_ready();
                    return;
                }
                // Not a would-block: the timer cannot be read; fall back rather than spin.
                Ok(Err(_)) => return tokio::time::sleep_until(when).await,
                // Not expired yet (readiness left over from an earlier expiry): wait on.
                Err(_would_block) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sleeps_until_the_deadline_and_can_be_rearmed() {
        let mut d = Deadline::new();
        assert!(d.fd.is_some(), "no timerfd");
        for ms in [30u64, 10, 50] {
            let t0 = Instant::now();
            d.sleep_until(t0 + Duration::from_millis(ms)).await;
            let took = t0.elapsed();
            assert!(
                took >= Duration::from_millis(ms),
                "{ms} ms: woke after {took:?}"
            );
            assert!(took < Duration::from_millis(ms + 500), "{ms} ms: {took:?}");
        }
        // A cancelled sleep whose timer then fires does not end the next one early.
        let t0 = Instant::now();
        let _ = tokio::time::timeout(
            Duration::from_millis(5),
            d.sleep_until(t0 + Duration::from_millis(10)),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t1 = Instant::now();
        d.sleep_until(t1 + Duration::from_millis(40)).await;
        assert!(
            t1.elapsed() >= Duration::from_millis(40),
            "{:?}",
            t1.elapsed()
        );
        // A deadline in the past returns at once.
        d.sleep_until(t0).await;
    }
}
