//! Logging: journald with structured fields under systemd, stderr otherwise.

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Where logs go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogTarget {
    /// journald when started by systemd with a journal stream, stderr otherwise.
    Auto,
    /// journald, with structured fields (stderr if the journal cannot be opened).
    Journald,
    /// stderr, as plain text lines.
    Stderr,
}

/// Parses a log level name.
pub(crate) fn level(s: &str) -> Result<LevelFilter, String> {
    s.trim().parse::<LevelFilter>().map_err(|_| {
        format!("`{s}` is not a log level; use error, warn, info, debug or trace (NTHD_LOG_LEVEL)")
    })
}

/// Whether stderr is connected to the journal (systemd sets JOURNAL_STREAM to its dev:inode).
pub(crate) fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(v) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = v.split_once(':') else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    dev.parse::<u64>().ok() == Some(meta.dev()) && ino.parse::<u64>().ok() == Some(meta.ino())
}

static TO_JOURNALD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether [`init`] sent the logs to journald (otherwise they go to stderr).
pub fn to_journald() -> bool {
    TO_JOURNALD.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets up the global subscriber. Returns a note for the log when journald was wanted but
/// could not be used.
pub fn init(level: LevelFilter, target: LogTarget) -> Option<String> {
    let want_journal = match target {
        LogTarget::Journald => true,
        LogTarget::Stderr => false,
        LogTarget::Auto => stderr_is_journal(),
    };
    let mut note = None;
    if want_journal {
        match tracing_journald::layer() {
            Ok(layer) => {
                // No field prefix: `message_id` becomes MESSAGE_ID, `nthd_kind` NTHD_KIND.
                let layer = layer
                    .with_field_prefix(None)
                    .with_syslog_identifier("nthd".into())
                    .with_filter(level);
                tracing_subscriber::registry().with(layer).init();
                TO_JOURNALD.store(true, std::sync::atomic::Ordering::Relaxed);
                return None;
            }
            Err(e) => note = Some(format!("cannot log to journald ({e}); logging to stderr")),
        }
    }
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .with_filter(level);
    tracing_subscriber::registry().with(fmt).init();
    note
}

/// Makes metadata text safe for a log line or a terminal: control characters (newlines, escape
/// sequences, C1 codes) and bidirectional overrides become visible `\u{..}` escapes, and the
/// text is cut at `max` characters with a note of how much was left out. Metadata is untrusted:
/// a hostile or broken service must not forge log lines or rewrite the terminal.
pub(crate) fn clean(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max) + 16);
    for (n, c) in s.chars().enumerate() {
        if n == max {
            let rest = s.chars().count() - max;
            out.push_str(&format!("…(+{rest} chars)"));
            break;
        }
        let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Untrusted metadata text as part of a notice id: printable ASCII only (anything else is
/// dropped, so an id is one stable word whatever the service sends), at most [`ID_PART_MAX`]
/// characters. Ids are keys in the state file and journald fields; text shown to people goes
/// through [`clean`], which escapes instead of dropping.
pub fn clean_id(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_graphic)
        .take(ID_PART_MAX)
        .collect()
}

/// How much of one metadata value a notice id keeps.
pub const ID_PART_MAX: usize = 128;

/// How often one distinct metadata oddity is warned about again.
pub(crate) const REPEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(600);
/// How many distinct oddities are warned about per [`REPEAT_EVERY`] before the rest are only
/// counted (a hostile service could make up a new one on every poll).
pub(crate) const DISTINCT_PER_WINDOW: u32 = 20;
const MAX_KEYS: usize = 1024;

/// The bookkeeping behind [`warn_limited`].
#[derive(Debug, Default)]
pub(crate) struct Limiter {
    /// key -> (last warned, repeats since)
    seen: std::collections::HashMap<String, (std::time::Instant, u64)>,
    window_start: Option<std::time::Instant>,
    distinct_in_window: u32,
    suppressed_distinct: u64,
}

/// What [`Limiter::check`] allows.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Warn now; the number is how often it came since the last warning.
    Warn(u64),
    /// Stay quiet (counted).
    Quiet,
}

impl Limiter {
    /// Whether the oddity `key` may be warned about at `now`. The second value is the number
    /// of further distinct oddities that were only counted in the window that just ended.
    pub(crate) fn check(&mut self, key: &str, now: std::time::Instant) -> (Verdict, u64) {
        let mut ended = 0;
        if self
            .window_start
            .is_none_or(|w| now.duration_since(w) >= REPEAT_EVERY)
        {
            ended = std::mem::take(&mut self.suppressed_distinct);
            self.window_start = Some(now);
            self.distinct_in_window = 0;
        }
        if let Some((last, repeats)) = self.seen.get_mut(key) {
            if now.duration_since(*last) >= REPEAT_EVERY {
                let n = std::mem::take(repeats);
                *last = now;
                return (Verdict::Warn(n), ended);
            }
            *repeats += 1;
            return (Verdict::Quiet, ended);
        }
        if self.distinct_in_window >= DISTINCT_PER_WINDOW {
            self.suppressed_distinct += 1;
            return (Verdict::Quiet, ended);
        }
        if self.seen.len() >= MAX_KEYS {
            let oldest = self
                .seen
                .iter()
                .min_by_key(|(_, (t, _))| *t)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.seen.remove(&k);
            }
        }
        self.distinct_in_window += 1;
        self.seen.insert(key.to_string(), (now, 0));
        (Verdict::Warn(0), ended)
    }
}

static LIMITER: std::sync::Mutex<Option<Limiter>> = std::sync::Mutex::new(None);

/// Warns about something odd in the metadata service's answers, once per distinct `key` and
/// then at most every [`REPEAT_EVERY`] with a count, so an odd answer repeated on every poll
/// (once a second on AWS and Azure) costs a few lines a day, not gigabytes.
pub(crate) fn warn_limited(key: &str, msg: impl FnOnce() -> String) {
    let (verdict, ended) = {
        let mut g = LIMITER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.get_or_insert_with(Limiter::default)
            .check(key, std::time::Instant::now())
    };
    if ended > 0 {
        tracing::warn!(
            "{ended} further distinct metadata oddities in the last {} were not logged",
            crate::timefmt::format_duration(REPEAT_EVERY)
        );
    }
    match verdict {
        Verdict::Warn(0) => tracing::warn!("{}", msg()),
        Verdict::Warn(n) => tracing::warn!(
            "{} (seen {n} more times in the last {})",
            msg(),
            crate::timefmt::format_duration(REPEAT_EVERY)
        ),
        Verdict::Quiet => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn clean_escapes_controls_and_bidi_and_bounds_length() {
        assert_eq!(clean("plain text", 100), "plain text");
        assert_eq!(
            clean("a\nFAKE: line\r\x1b[31m\u{202e}x\u{85}", 100),
            "a\\u{a}FAKE: line\\u{d}\\u{1b}[31m\\u{202e}x\\u{85}"
        );
        assert_eq!(clean("ééééé", 3), "ééé…(+2 chars)");
    }

    #[test]
    fn limiter_warns_once_then_every_window_with_a_count() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        assert_eq!(l.check("a", t0), (Verdict::Warn(0), 0));
        for i in 1..600 {
            assert_eq!(l.check("a", t0 + Duration::from_secs(i)).0, Verdict::Quiet);
        }
        assert_eq!(l.check("a", t0 + REPEAT_EVERY).0, Verdict::Warn(599));
        assert_eq!(l.check("b", t0 + REPEAT_EVERY).0, Verdict::Warn(0));
    }

    #[test]
    fn limiter_caps_distinct_items_per_window() {
        let mut l = Limiter::default();
        let t0 = Instant::now();
        let mut warned = 0;
        for i in 0..600u64 {
            if l.check(&format!("new-{i}"), t0 + Duration::from_secs(i / 2))
                .0
                != Verdict::Quiet
            {
                warned += 1;
            }
        }
        assert_eq!(warned, DISTINCT_PER_WINDOW);
        // The next window reports how many were only counted.
        let (_, ended) = l.check("x", t0 + REPEAT_EVERY);
        assert_eq!(ended, 600 - u64::from(DISTINCT_PER_WINDOW));
    }
}
