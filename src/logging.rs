//! Logging: journald with structured fields under systemd, stderr otherwise.

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::config::LogTarget;

/// Parses a log level name.
pub fn level(s: &str) -> Result<LevelFilter, String> {
    s.trim().parse::<LevelFilter>().map_err(|_| {
        format!("`{s}` is not a log level; use error, warn, info, debug or trace (NTHD_LOG_LEVEL)")
    })
}

/// Whether stderr is connected to the journal (systemd sets JOURNAL_STREAM to its dev:inode).
pub fn stderr_is_journal() -> bool {
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
