//! The metrics textfile, written off the daemon's loop.
//!
//! The write is a `write_replace` (a temporary file, then a rename) into a directory of the
//! admin's choosing. A stalled or frozen filesystem blocks it, and on the loop's only thread
//! that would stop the watching, the power-off and the watchdog pings until systemd killed nthd
//! (`WatchdogSec=30s`) and started it again, into the same stall. So one thread of its own does
//! the writing: the loop hands it the newest text and never waits. At most one write is under
//! way; texts handed over meanwhile replace each other, so a stuck write costs one thread and
//! one text, never a queue. A write under way for longer than [`STALLED_AFTER`] is reported as
//! the extra's problem (the textfile is then stale); it clears once the write returns.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long one write may take before it counts as stalled.
pub(crate) const STALLED_AFTER: Duration = Duration::from_secs(10);

/// What the loop and the writer thread share.
#[derive(Default)]
struct Shared {
    /// The newest text not yet taken by the writer.
    pending: Option<String>,
    /// Since when the write under way has run.
    busy_since: Option<Instant>,
    /// The last write's error, `None` after a success.
    error: Option<String>,
    /// The loop is gone: the thread ends.
    closed: bool,
}

/// The loop's handle on the writer thread.
pub(crate) struct Textfile {
    path: PathBuf,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    started: bool,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Textfile {
    /// A writer for `path`; its thread starts with the first text.
    pub(crate) fn new(path: PathBuf) -> Textfile {
        Textfile {
            path,
            shared: Arc::default(),
            started: false,
        }
    }

    /// Hands `text` to the writer thread, replacing a text it has not taken yet. Never blocks
    /// on the filesystem.
    pub(crate) fn submit(&mut self, text: String) {
        if !self.started {
            self.started = self.spawn();
        }
        let (m, cv) = &*self.shared;
        lock(m).pending = Some(text);
        cv.notify_one();
    }

    fn spawn(&self) -> bool {
        let shared = Arc::clone(&self.shared);
        let path = self.path.clone();
        let spawned = std::thread::Builder::new()
            .name("nthd-textfile".into())
            .spawn(move || writer(&path, &shared));
        if let Err(e) = &spawned {
            lock(&self.shared.0).error = Some(format!(
                "cannot start the thread that writes the metrics file {}: {e}",
                self.path.display()
            ));
        }
        spawned.is_ok()
    }

    /// Why the textfile is not being kept: the last write's error, or a write stalled for
    /// longer than [`STALLED_AFTER`].
    pub(crate) fn problem(&self, now: Instant) -> Option<String> {
        let s = lock(&self.shared.0);
        if let Some(since) = s.busy_since {
            // One wording for the whole stall: the daemon logs a changed problem again.
            if now.saturating_duration_since(since) >= STALLED_AFTER {
                return Some(format!(
                    "writing the metrics file {} has not finished for over {}: is its \
                     filesystem stalled or frozen (dmesg, fsfreeze -u)? nthd keeps watching and \
                     acting; the file is written again once the write returns",
                    self.path.display(),
                    crate::timefmt::format_duration(STALLED_AFTER)
                ));
            }
        }
        s.error.clone()
    }

    /// Waits at most `limit` for the writer to finish what it was handed (at a clean stop).
    pub(crate) fn settle(&self, limit: Duration) {
        self.written().wait(limit);
    }

    /// A handle to wait for the writer with, on a thread that may block.
    pub(crate) fn written(&self) -> Written {
        Written(Arc::clone(&self.shared))
    }
}

/// Waits for the writer thread to have written what it was handed, from any thread that may
/// block (the blocking pool, never the daemon's loop).
pub(crate) struct Written(Arc<(Mutex<Shared>, Condvar)>);

impl Written {
    /// Waits at most `limit` for the writer to finish what it was handed.
    pub(crate) fn wait(&self, limit: Duration) {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let s = lock(&self.0 .0);
            if s.pending.is_none() && s.busy_since.is_none() {
                return;
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Textfile {
    fn drop(&mut self) {
        let (m, cv) = &*self.shared;
        lock(m).closed = true;
        cv.notify_one();
    }
}

/// The thread: takes the newest text, writes it, records the result; until the loop is gone.
fn writer(path: &Path, shared: &(Mutex<Shared>, Condvar)) {
    let (m, cv) = shared;
    loop {
        let text = {
            let mut s = lock(m);
            while s.pending.is_none() && !s.closed {
                s = cv
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            let Some(text) = s.pending.take() else {
                return;
            };
            s.busy_since = Some(Instant::now());
            text
        };
        let result = write(path, &text);
        let mut s = lock(m);
        s.busy_since = None;
        s.error = result.err();
    }
}

/// One write: 0644, as node_exporter runs as another user; no fsync, as a crash losing one
/// write of metrics is harmless.
fn write(path: &Path, text: &str) -> Result<(), String> {
    crate::state::write_replace(path, text.as_bytes(), 0o644, false).map_err(|e| {
        format!(
            "cannot write the metrics file {}: {e}; check the directory exists and is writable \
             by user nthd (add it to ReadWritePaths= in a drop-in)",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_for(t: &Textfile, path: &Path, want: &str) {
        t.settle(Duration::from_secs(5));
        assert_eq!(std::fs::read_to_string(path).unwrap(), want);
    }

    #[test]
    fn the_newest_text_is_written_and_errors_are_reported_then_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nthd.prom");
        let mut t = Textfile::new(path.clone());
        t.submit("a 1\n".into());
        wait_for(&t, &path, "a 1\n");
        assert_eq!(t.problem(Instant::now()), None);
        t.submit("a 2\n".into());
        t.submit("a 3\n".into());
        wait_for(&t, &path, "a 3\n");

        let missing = Textfile::new(dir.path().join("no/such/dir/nthd.prom"));
        let mut missing = missing;
        missing.submit("x\n".into());
        missing.settle(Duration::from_secs(5));
        let p = missing.problem(Instant::now()).expect("an error");
        assert!(p.contains("cannot write the metrics file") && p.contains("ReadWritePaths="));
    }

    #[test]
    fn a_write_under_way_too_long_is_a_problem() {
        let dir = tempfile::tempdir().unwrap();
        let t = Textfile::new(dir.path().join("nthd.prom"));
        let since = Instant::now();
        lock(&t.shared.0).busy_since = Some(since);
        assert_eq!(t.problem(since + Duration::from_secs(9)), None);
        let p = t.problem(since + STALLED_AFTER).expect("stalled");
        assert!(p.contains("has not finished for over 10s"), "{p}");
        assert_eq!(t.problem(since + STALLED_AFTER * 3).as_ref(), Some(&p));
    }
}
