//! What nthd acted on, persisted in its state directory so it acts once across restarts.
//!
//! A record is written *before* the logind call (phase `started`) and again after it succeeds
//! (phase `done`), atomically (temporary file, fsync, rename, fsync of the directory).
//!
//! Notices without a platform event id (a spot notice, a GCP preemption) are scoped to the boot
//! they were seen in: after a reboot the same action name is a new notice. Notices with an event
//! id (AWS scheduled events, Azure events) are remembered across boots, so the reboot nthd itself
//! asked for does not make it reboot again when the event is still listed afterwards.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::policy::Action;

/// How long records are kept.
pub const RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Started,
    Done,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    pub id: String,
    #[serde(default)]
    pub event_id: Option<String>,
    pub action: String,
    pub phase: Phase,
    pub boot_id: String,
    pub at_unix: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    records: Vec<Record>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error(
        "cannot write the state file {path}: {reason}. nthd keeps running, but may act again \
         on the same notice after a restart; check that the state directory exists and is \
         writable by user nthd (StateDirectory=nthd in the unit, or NTHD_STATE_DIR)"
    )]
    Write { path: String, reason: String },
}

/// The state store.
#[derive(Debug)]
pub struct State {
    path: Option<PathBuf>,
    boot_id: String,
    records: Vec<Record>,
}

/// What loading found, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    pub loaded: usize,
    pub dropped_other_boot: usize,
    pub expired: usize,
    /// Where a corrupt file was moved.
    pub moved_aside: Option<PathBuf>,
    pub error: Option<String>,
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), or a fallback that changes per boot.
pub fn current_boot_id() -> String {
    if let Ok(s) = fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let s = s.trim();
        if !s.is_empty() {
            return s.to_string();
        }
    }
    // Fall back to the boot time from /proc/stat (btime): the same for the whole boot.
    fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("btime ")
                    .map(|v| format!("btime-{}", v.trim()))
            })
        })
        .unwrap_or_else(|| "unknown-boot".into())
}

fn unix_now(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl State {
    /// A state kept only in memory (no state directory).
    pub fn in_memory(boot_id: String) -> State {
        State {
            path: None,
            boot_id,
            records: Vec::new(),
        }
    }

    /// Loads `dir/state.json`. A missing file is an empty state; a corrupt one is moved aside
    /// and reported, never fatal.
    pub fn load(dir: &Path, boot_id: String, now: SystemTime) -> (State, LoadReport) {
        let path = dir.join("state.json");
        let mut report = LoadReport::default();
        let mut state = State {
            path: Some(path.clone()),
            boot_id,
            records: Vec::new(),
        };
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (state, report),
            Err(e) => {
                report.error = Some(format!("cannot read {}: {e}", path.display()));
                return (state, report);
            }
        };
        let file: File = match serde_json::from_slice(&bytes) {
            Ok(f) => f,
            Err(e) => {
                let aside = dir.join(format!("state.json.corrupt-{}", unix_now(now)));
                report.error = Some(format!("{} is corrupt ({e})", path.display()));
                if fs::rename(&path, &aside).is_ok() {
                    report.moved_aside = Some(aside);
                }
                return (state, report);
            }
        };
        let cutoff = unix_now(now).saturating_sub(RETENTION.as_secs());
        for r in file.records {
            if r.at_unix < cutoff {
                report.expired += 1;
            } else if r.event_id.is_none() && r.boot_id != state.boot_id {
                report.dropped_other_boot += 1;
            } else {
                state.records.push(r);
            }
        }
        report.loaded = state.records.len();
        (state, report)
    }

    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Fingerprints that must not be acted on again.
    ///
    /// A `done` record counts. A `started` record from an earlier boot counts too: the action
    /// went through (that boot ended). A `started` record from this boot does not: nthd may
    /// have died before the call reached logind, so the daemon retries, after checking that
    /// logind is not already shutting down.
    pub fn acted_ids(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.phase == Phase::Done || r.boot_id != self.boot_id)
            .map(|r| r.id.clone())
            .collect()
    }

    /// Event ids acted on in this boot (what Azure is told to go ahead with).
    pub fn event_ids_this_boot(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.boot_id == self.boot_id)
            .filter_map(|r| r.event_id.clone())
            .collect()
    }

    /// Records a phase of an action and writes the file.
    pub fn record(
        &mut self,
        id: &str,
        event_id: Option<&str>,
        action: Action,
        phase: Phase,
        now: SystemTime,
    ) -> Result<(), StateError> {
        self.records.retain(|r| r.id != id);
        self.records.push(Record {
            id: id.to_string(),
            event_id: event_id.map(str::to_string),
            action: action.name().to_string(),
            phase,
            boot_id: self.boot_id.clone(),
            at_unix: unix_now(now),
        });
        self.save()
    }

    fn save(&self) -> Result<(), StateError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let file = File {
            version: 1,
            records: self.records.clone(),
        };
        let err = |reason: String| StateError::Write {
            path: path.display().to_string(),
            reason,
        };
        let body = serde_json::to_vec_pretty(&file).map_err(|e| err(e.to_string()))?;
        write_atomic(path, &body).map_err(|e| err(e.to_string()))
    }
}

/// Writes `path` atomically: a temporary file beside it, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(body)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn round_trip_and_boot_scoping() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, r) = State::load(dir.path(), "boot-a".into(), t(NOW));
        assert_eq!(r, LoadReport::default());
        s.record(
            "aws/spot/terminate",
            None,
            Action::PowerOff,
            Phase::Started,
            t(NOW),
        )
        .unwrap();
        s.record(
            "aws/scheduled/e1",
            Some("e1"),
            Action::Reboot,
            Phase::Done,
            t(NOW),
        )
        .unwrap();
        s.record(
            "aws/scheduled/e2",
            Some("e2"),
            Action::Reboot,
            Phase::Started,
            t(NOW),
        )
        .unwrap();

        // Same boot: `started` without an event id is not acted (retry after checking logind).
        let (s2, r) = State::load(dir.path(), "boot-a".into(), t(NOW + 5));
        assert_eq!(r.loaded, 3);
        let mut ids = s2.acted_ids();
        ids.sort();
        assert_eq!(ids, vec!["aws/scheduled/e1".to_string()]);
        assert_eq!(s2.event_ids_this_boot().len(), 2);

        // Next boot: the spot record is dropped, the event records count as acted on.
        let (s3, r) = State::load(dir.path(), "boot-b".into(), t(NOW + 60));
        assert_eq!(r.dropped_other_boot, 1);
        let mut ids = s3.acted_ids();
        ids.sort();
        assert_eq!(
            ids,
            vec![
                "aws/scheduled/e1".to_string(),
                "aws/scheduled/e2".to_string()
            ]
        );
        assert!(s3.event_ids_this_boot().is_empty());

        // After the retention period everything expires.
        let (s4, r) = State::load(
            dir.path(),
            "boot-b".into(),
            t(NOW + RETENTION.as_secs() + 10),
        );
        assert_eq!(r.expired, 3);
        assert!(s4.acted_ids().is_empty());
    }

    #[test]
    fn corrupt_file_is_moved_aside_and_state_continues() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("state.json"),
            b"{\"version\":1,\"records\":[{garbage",
        )
        .unwrap();
        let (mut s, r) = State::load(dir.path(), "b".into(), t(NOW));
        assert!(r.error.as_deref().unwrap().contains("corrupt"));
        let aside = r.moved_aside.unwrap();
        assert!(aside.exists());
        assert!(!dir.path().join("state.json").exists());
        s.record("x", None, Action::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        let (s2, _) = State::load(dir.path(), "b".into(), t(NOW));
        assert_eq!(s2.acted_ids(), vec!["x".to_string()]);
    }

    #[test]
    fn unwritable_directory_is_an_error_with_the_fix() {
        let (mut s, _) = State::load(Path::new("/nonexistent/nthd-state"), "b".into(), t(NOW));
        let e = s
            .record("x", None, Action::PowerOff, Phase::Done, t(NOW))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/nthd-state/state.json") && e.contains("NTHD_STATE_DIR"),
            "{e}"
        );
        // The record is still held in memory.
        assert_eq!(s.acted_ids(), vec!["x".to_string()]);
    }

    #[test]
    fn atomic_write_leaves_no_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn boot_id_is_read() {
        let b = current_boot_id();
        assert!(!b.is_empty());
        assert_eq!(b, current_boot_id());
    }
}
