//! What nthd acted on, persisted in its state directory so it acts once across restarts.
//!
//! A record is written *before* the logind call (phase `started`) and again after it succeeds
//! (phase `done`), atomically (temporary file, fsync, rename, fsync of the directory). The
//! executor writes off the runtime thread: a reboot waits for its `started` record, a power-off
//! is called while it is being written.
//!
//! Notices without a platform event id (a spot notice, a GCP preemption) are scoped to the boot
//! they were seen in: after a reboot the same action name is a new notice. Notices with an event
//! id (AWS scheduled events, Azure events) are remembered across boots, so the reboot nthd itself
//! asked for does not make it reboot again when the event is still listed afterwards.
//!
//! A fire drill (`nthd simulate --yes`) writes the same file from its own process. Each write
//! takes an exclusive lock on the state directory, re-reads the file and keeps what the other
//! side wrote ([`Snapshot`], [`Writer`]).

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::files::{self, DirLock};
use crate::notice::NoticeId;
use crate::policy::PowerAction;

/// The state file's format version.
const VERSION: u32 = 1;

/// How long records are kept.
pub const RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// How far an action got.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Recorded before the logind call.
    Started,
    /// The logind call succeeded.
    Done,
}

/// One action nthd took or began, as stored in `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Record {
    /// The notice's fingerprint ([`Notice::id`](crate::notice::Notice::id)).
    pub id: NoticeId,
    /// The platform's event id, if the notice had one; such records outlive their boot.
    #[serde(default)]
    pub event_id: Option<String>,
    /// The power action's name: `poweroff` or `reboot`.
    pub action: String,
    /// How far it got.
    pub phase: Phase,
    /// The boot it was taken in.
    pub boot_id: String,
    /// When the record was written, in seconds since the Unix epoch.
    pub at_unix: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    records: Vec<Record>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error(
        "cannot write the state file {path}: {reason}. nthd keeps running, but may act again \
         on the same notice after a restart; check that the state directory exists and is \
         writable by user nthd (StateDirectory=nthd in the unit, or NTHD_STATE_DIR)"
    )]
    Write { path: String, reason: String },
    #[error(
        "not writing the state file {path}: {why}. nthd keeps what it acts on in memory only, \
         so it refuses to reboot (without a record it would reboot again on every boot) and \
         still powers off. Make the state directory writable, move the file away (mv {path} \
         {path}.bad), then restart nthd (systemctl restart nthd)"
    )]
    InMemoryOnly { path: String, why: String },
}

/// How long a state write waits for another nthd process (the daemon, a fire drill) to release
/// the state directory's lock; then it writes without it. Well below the executor's
/// [`WRITE_WAIT`](crate::executor::WRITE_WAIT), so a held lock never costs a reboot its record.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Who writes the state file, which decides the records its writes speak for: the others are
/// taken from the file as it is at the moment of writing, so neither side loses the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    /// The daemon speaks for every record but a fire drill's that it never saw (one a drill
    /// added while it ran).
    Daemon,
    /// A fire drill (`nthd simulate --yes`, its own process) speaks only for what it recorded
    /// itself; the rest may have changed since it loaded the file.
    Drill,
}

/// The state store.
#[derive(Debug)]
pub struct State {
    path: PathBuf,
    /// Why the file is never written: it could not be used, nor moved aside.
    in_memory_only: Option<String>,
    boot_id: String,
    records: Vec<Record>,
    /// Who writes through this store.
    writer: Writer,
    /// The ids the file held when loaded, kept or dropped.
    seen: BTreeSet<NoticeId>,
    /// The ids this process recorded or forgot.
    touched: BTreeSet<NoticeId>,
    /// How long a write waits for the state directory's lock: [`LOCK_WAIT`].
    lock_wait: Duration,
    /// The number of the last [`Snapshot`] taken.
    taken: u64,
    /// The number of the last [`Snapshot`] written.
    written: Arc<Mutex<u64>>,
}

/// The state file's content at one moment, to be written off the async runtime (the write
/// fsyncs, and a stalled disk must not hold up a logind call). Snapshots land in the order they
/// were taken: one that finds a newer one already written leaves it, as that holds all it holds.
///
/// Another process writes the file too (the daemon, or a fire drill beside it). Under an
/// exclusive lock on the state directory ([`DirLock`], waited for at most [`LOCK_WAIT`]) the
/// write reads the file as it is now and keeps the records this snapshot does not speak for
/// (see [`Writer`]).
#[derive(Debug)]
pub(crate) struct Snapshot {
    path: PathBuf,
    records: Vec<Record>,
    speaks_for: SpeaksFor,
    lock_wait: Duration,
    number: u64,
    written: Arc<Mutex<u64>>,
}

/// The records a snapshot speaks for.
#[derive(Debug, Clone)]
struct SpeaksFor {
    writer: Writer,
    seen: BTreeSet<NoticeId>,
    touched: BTreeSet<NoticeId>,
}

impl SpeaksFor {
    fn id(&self, id: &NoticeId) -> bool {
        self.touched.contains(id)
            || (self.writer == Writer::Daemon && (!id.is_drill() || self.seen.contains(id)))
    }
}

/// The records to write: those on disk, in their order, each one `speaks_for` replaced by
/// `mine`'s (or dropped when `mine` has none), then the rest of `mine` it speaks for. With
/// nothing usable on disk, `mine` as it is.
fn merge(mine: &[Record], on_disk: Option<Vec<Record>>, speaks_for: &SpeaksFor) -> Vec<Record> {
    let Some(on_disk) = on_disk else {
        return mine.to_vec();
    };
    let mut out: Vec<Record> = Vec::with_capacity(on_disk.len() + mine.len());
    for r in on_disk {
        if !speaks_for.id(&r.id) {
            out.push(r);
        } else if let Some(m) = mine.iter().find(|m| m.id == r.id) {
            out.push(m.clone());
        }
    }
    for m in mine {
        if speaks_for.id(&m.id) && !out.iter().any(|o| o.id == m.id) {
            out.push(m.clone());
        }
    }
    out
}

impl Snapshot {
    /// Writes the file (atomically, durably), unless a newer snapshot is already written.
    pub(crate) fn write(self) -> Result<(), StateError> {
        let mut last = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *last > self.number {
            return Ok(());
        }
        let _lock = self.lock();
        let error = |reason: String| StateError::Write {
            path: self.path.display().to_string(),
            reason,
        };
        let on_disk = read_file(&self.path).ok().flatten().map(|f| f.records);
        let file = File {
            version: VERSION,
            records: merge(&self.records, on_disk, &self.speaks_for),
        };
        let body = serde_json::to_vec_pretty(&file).map_err(|e| error(e.to_string()))?;
        write_atomic(&self.path, &body).map_err(|e| error(e.to_string()))?;
        *last = self.number;
        Ok(())
    }

    /// The state directory's lock, when it could be had within the snapshot's wait. Without
    /// it the write still goes ahead (a lock held by a stuck process must not cost a record);
    /// a record the other side writes at that very moment may then be lost.
    fn lock(&self) -> Option<DirLock> {
        match DirLock::take(&self.path, self.lock_wait) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) if !self.lock_wait.is_zero() => {
                let dir = self.path.parent().unwrap_or(Path::new("."));
                tracing::warn!(
                    "the state directory {} stayed locked for {} by another process (a fire \
                     drill, or the daemon); writing {} without the lock, so a record that \
                     process writes at the same moment may be lost. Find it with: fuser -v {}",
                    dir.display(),
                    crate::timefmt::format_duration(self.lock_wait),
                    self.path.display(),
                    dir.display()
                );
                None
            }
            // Held, and no wait allowed; or no directory to lock (the write says so).
            Ok(None) | Err(_) => None,
        }
    }
}

/// What loading found, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Records kept.
    pub loaded: usize,
    /// Records from an earlier boot without an event id, dropped: they count only within their
    /// boot.
    pub dropped_other_boot: usize,
    /// Records older than [`RETENTION`], dropped.
    pub expired: usize,
    /// Where a corrupt file was moved.
    pub moved_aside: Option<PathBuf>,
    /// Why the file could not be used, when it could not.
    pub error: Option<String>,
}

/// The boot id used when neither `/proc/sys/kernel/random/boot_id` nor `/proc/stat` can be read
/// (for example `ProcSubset=pid` in a drop-in hides both).
pub(crate) const UNKNOWN_BOOT: &str = "unknown-boot";

/// This boot's id (`/proc/sys/kernel/random/boot_id`), or a fallback that changes per boot
/// (`btime` in `/proc/stat`), or [`UNKNOWN_BOOT`].
pub(crate) fn current_boot_id() -> String {
    boot_id_from(
        Path::new("/proc/sys/kernel/random/boot_id"),
        Path::new("/proc/stat"),
    )
}

fn boot_id_from(boot_id: &Path, stat: &Path) -> String {
    if let Ok(s) = fs::read_to_string(boot_id) {
        let s = s.trim();
        if !s.is_empty() {
            return s.to_string();
        }
    }
    // Fall back to the boot time from /proc/stat (btime): the same for the whole boot.
    fs::read_to_string(stat)
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("btime ")
                    .map(|v| format!("btime-{}", v.trim()))
            })
        })
        .unwrap_or_else(|| UNKNOWN_BOOT.into())
}

fn unix_now(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The state file's content: `None` when there is none; when it cannot be used, why, with the
/// tag of the name it is set aside under. It is read as [`files::read_untrusted`] reads: a
/// drill reads it as root from a directory user nthd owns.
fn read_file(path: &Path) -> Result<Option<File>, (&'static str, String)> {
    let bytes = match files::read_untrusted(path) {
        Ok(b) => b,
        Err(e) if e.is_missing() => return Ok(None),
        Err(e) => return Err(("unreadable", e.to_string())),
    };
    match serde_json::from_slice::<File>(&bytes) {
        Ok(f) if f.version == VERSION => Ok(Some(f)),
        Ok(f) => Err((
            "unknown-version",
            format!(
                "{} has format version {}, which this nthd (version {VERSION}) does not know",
                path.display(),
                f.version
            ),
        )),
        Err(e) => Err(("corrupt", format!("{} is corrupt ({e})", path.display()))),
    }
}

/// The fire drills' records of boot `boot_id` in `dir/state.json`, read without touching the
/// file (none when it cannot be read): the daemon names the drill a shutdown followed.
pub(crate) fn drill_records(dir: &Path, boot_id: &str) -> Vec<Record> {
    let Ok(Some(file)) = read_file(&dir.join("state.json")) else {
        return Vec::new();
    };
    file.records
        .into_iter()
        .filter(|r| r.id.is_drill() && r.boot_id == boot_id)
        .collect()
}

impl State {
    /// Loads `dir/state.json`. A missing file is an empty state; a corrupt one is moved aside
    /// and reported, never fatal.
    pub fn load(dir: &Path, boot_id: String, now: SystemTime) -> (State, LoadReport) {
        let mut report = LoadReport::default();
        let mut state = State {
            path: dir.join("state.json"),
            in_memory_only: None,
            boot_id,
            records: Vec::new(),
            writer: Writer::Daemon,
            seen: BTreeSet::new(),
            touched: BTreeSet::new(),
            lock_wait: LOCK_WAIT,
            taken: 0,
            written: Arc::new(Mutex::new(0)),
        };
        match read_file(&state.path) {
            Ok(Some(file)) => {
                state.seen = file.records.iter().map(|r| r.id.clone()).collect();
                state.keep(file.records, now, &mut report);
            }
            Ok(None) => {}
            Err((tag, why)) => state.set_aside(&mut report, tag, why, now),
        }
        (state, report)
    }

    /// Keeps the records loaded that still count.
    fn keep(&mut self, records: Vec<Record>, now: SystemTime, report: &mut LoadReport) {
        let now_unix = unix_now(now);
        let cutoff = now_unix.saturating_sub(RETENTION.as_secs());
        let mut clamped = false;
        for mut r in records {
            // A record "from the future" was written before the wall clock was set back: keep it
            // as of now (and write that back), or it would never expire.
            if r.at_unix > now_unix {
                r.at_unix = now_unix;
                clamped = true;
            }
            // The wall clock may also have jumped forward: a record of this very boot is never
            // expired by it.
            if r.at_unix < cutoff && r.boot_id != self.boot_id {
                report.expired += 1;
            } else if r.event_id.is_none() && r.boot_id != self.boot_id {
                report.dropped_other_boot += 1;
            } else {
                self.records.push(r);
            }
        }
        report.loaded = self.records.len();
        if clamped {
            // Best effort: if it fails, the next record written saves it. Loading may run on the
            // daemon's runtime thread: no waiting for the lock.
            if let Ok(mut snapshot) = self.snapshot() {
                snapshot.lock_wait = Duration::ZERO;
                let _ = snapshot.write();
            }
        }
    }

    /// Moves a file that cannot be used out of the way, so it is kept for inspection and never
    /// overwritten; a symbolic link is moved itself (rename(2) never follows one). If even that
    /// fails, the state stays in memory only: every save is then an error, and nthd refuses to
    /// reboot (it cannot persist the record first) rather than overwrite what it could not read.
    fn set_aside(&mut self, report: &mut LoadReport, tag: &str, why: String, now: SystemTime) {
        let aside = self
            .path
            .with_file_name(format!("state.json.{tag}-{}", unix_now(now)));
        match fs::rename(&self.path, &aside) {
            Ok(()) => {
                report.moved_aside = Some(aside);
                report.error = Some(why);
            }
            Err(e) => {
                let why = format!("{why}; it could not be moved aside either ({e})");
                report.error = Some(format!(
                    "{why}, so nthd keeps its state in memory only and leaves the file as it is; \
                     it will not reboot until the state directory is writable and the file is \
                     moved away (then restart nthd)"
                ));
                self.in_memory_only = Some(why);
            }
        }
    }

    /// This store as a fire drill's: its writes speak only for the records it makes, and keep
    /// every other record as the file has it when they land (the daemon may have written since).
    pub(crate) fn for_drill(mut self) -> State {
        self.writer = Writer::Drill;
        self
    }

    /// Sets how long a write waits for the state directory's lock.
    #[cfg(test)]
    pub(crate) fn set_lock_wait(&mut self, wait: Duration) {
        self.lock_wait = wait;
    }

    /// The state file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Every record kept.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Fingerprints that must not be acted on again.
    ///
    /// A `done` record counts. A `started` record from an earlier boot counts too: the action
    /// went through (that boot ended). A `started` record from this boot does not: nthd may
    /// have died before the call reached logind, so the daemon retries, after checking that
    /// logind is not already shutting down.
    ///
    /// When the boot id is unknown, this boot cannot be told from another one, so nothing may be
    /// skipped because of it: a record without an event id never counts (a spot notice is acted
    /// on, at worst once more after a restart, where logind's shutdown-under-way guard stops a
    /// second call), and a `started` record with one counts only for a reboot, which must not
    /// loop.
    pub fn acted_ids(&self) -> Vec<NoticeId> {
        let unknown = self.boot_id == UNKNOWN_BOOT;
        self.records
            .iter()
            .filter(|r| {
                if unknown {
                    r.event_id.is_some()
                        && (r.phase == Phase::Done || r.action == PowerAction::Reboot.name())
                } else {
                    r.phase == Phase::Done || r.boot_id != self.boot_id
                }
            })
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

    /// Records a phase of an action and writes the file, in one go (the executor notes and
    /// writes apart, to write off the runtime thread).
    #[cfg(test)]
    pub(crate) fn record(
        &mut self,
        id: &NoticeId,
        event_id: Option<&str>,
        action: PowerAction,
        phase: Phase,
        now: SystemTime,
    ) -> Result<(), StateError> {
        self.note(id, event_id, action, phase, now);
        self.save()
    }

    /// Records a phase of an action in memory only; [`State::snapshot`] then gives what to write.
    pub(crate) fn note(
        &mut self,
        id: &NoticeId,
        event_id: Option<&str>,
        action: PowerAction,
        phase: Phase,
        now: SystemTime,
    ) {
        self.touched.insert(id.clone());
        self.records.retain(|r| r.id != *id);
        self.records.push(Record {
            id: id.clone(),
            event_id: event_id.map(str::to_string),
            action: action.name().to_string(),
            phase,
            boot_id: self.boot_id.clone(),
            at_unix: unix_now(now),
        });
    }

    /// Drops the record of `id` in memory (a reboot refused because its record did not land).
    pub(crate) fn forget(&mut self, id: &NoticeId) {
        self.touched.insert(id.clone());
        self.records.retain(|r| r.id != *id);
    }

    /// The file's content as of now, to [`Snapshot::write`]; an error when the state is in memory
    /// only (a file that could not be used nor moved aside).
    pub(crate) fn snapshot(&mut self) -> Result<Snapshot, StateError> {
        let path = self.path.display().to_string();
        if let Some(why) = &self.in_memory_only {
            let why = why.clone();
            return Err(StateError::InMemoryOnly { path, why });
        }
        self.taken += 1;
        Ok(Snapshot {
            path: self.path.clone(),
            records: self.records.clone(),
            speaks_for: SpeaksFor {
                writer: self.writer,
                seen: self.seen.clone(),
                touched: self.touched.clone(),
            },
            lock_wait: self.lock_wait,
            number: self.taken,
            written: Arc::clone(&self.written),
        })
    }

    #[cfg(test)]
    fn save(&mut self) -> Result<(), StateError> {
        self.snapshot()?.write()
    }
}

/// Writes `path` atomically and durably, mode 0600: a temporary file beside it, fsync, rename,
/// fsync of the directory.
pub(crate) fn write_atomic(path: &Path, body: &[u8]) -> std::io::Result<()> {
    write_replace(path, body, 0o600, true)
}

/// Replaces `path` atomically (readers see the old or the new file, never a partial one) with
/// exactly `mode`, whatever the umask. `durable` adds the fsyncs that make it survive a crash.
///
/// Root (a drill, `sudo nthd simulate --yes`) may write into a directory another user owns, who
/// can swap any name in it for a symbolic link at any moment. So the new file is created with
/// O_EXCL and O_NOFOLLOW, handed to the directory's owner through its descriptor before the
/// rename, and nothing touches `path` after the rename.
pub(crate) fn write_replace(
    path: &Path,
    body: &[u8],
    mode: u32,
    durable: bool,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // Opened once: its owner is read from this descriptor, and it is fsynced after the rename.
    // Its owner cannot swap the directory itself: that takes write access to its parent.
    let dir_fd = fs::File::open(dir).ok();
    let owner = owner_to_hand_to(dir_fd.as_ref());
    let result = write_new(&tmp, path, body, mode, durable, owner).and_then(|()| {
        at_step(Step::BeforeRename, &tmp, path);
        fs::rename(&tmp, path)
    });
    if let Err(e) = result {
        // Removing a symbolic link removes only the link.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    at_step(Step::Renamed, &tmp, path);
    if let (true, Some(d)) = (durable, dir_fd) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `body` to a new file at `tmp`, mode `mode`, owned by `owner` when given.
fn write_new(
    tmp: &Path,
    path: &Path,
    body: &[u8],
    mode: u32,
    durable: bool,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    // A leftover of a process that had this pid before; removing a symlink removes only the
    // link. Then O_EXCL and O_NOFOLLOW: never write through a link someone planted.
    let _ = fs::remove_file(tmp);
    at_step(Step::BeforeOpen, tmp, path);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(tmp)?;
    // fchmod is not subject to the umask (the unit's UMask=0077 would make 0644 into 0600).
    f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    f.write_all(body)?;
    at_step(Step::Written, tmp, path);
    if let Some((uid, gid)) = owner {
        at_step(Step::BeforeChown, tmp, path);
        hand_over(&f, path, uid, gid);
    }
    if durable {
        f.sync_all()?;
    }
    Ok(())
}

/// The owner to hand a new file to: the directory's, when root writes into a directory another
/// user owns (the daemon, user nthd, must still read its 0600 state file after a drill).
fn owner_to_hand_to(dir: Option<&fs::File>) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    if crate::logind::effective_uid() != 0 {
        return None;
    }
    let d = dir?.metadata().ok()?;
    (d.uid() != 0).then_some((d.uid(), d.gid()))
}

/// fchown(2) of the file being written: through its descriptor, so a name swapped for a link
/// cannot make root chown something else.
fn hand_over(f: &fs::File, path: &Path, uid: u32, gid: u32) {
    if let Err(e) = std::os::unix::fs::fchown(f, Some(uid), Some(gid)) {
        tracing::warn!(
            "cannot hand {} to uid {uid} (the owner of its directory): {e}; the daemon may not \
             read it. Fix with: chown -h {uid}:{gid} {}",
            path.display(),
            path.display()
        );
    }
}

/// The steps of [`write_replace`] a test can interpose at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The temporary file is about to be created.
    BeforeOpen,
    /// Its content is written.
    Written,
    /// It is about to be handed to the directory's owner.
    BeforeChown,
    /// It is about to be renamed over the file.
    BeforeRename,
    /// It has been.
    Renamed,
}

/// A test's hook: called with the step, the temporary file and the file.
#[cfg(test)]
pub(crate) type Hook = Box<dyn FnMut(Step, &Path, &Path)>;

#[cfg(test)]
thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Sets (or with `None` clears) this thread's hook.
#[cfg(test)]
pub(crate) fn set_hook(hook: Option<Hook>) {
    HOOK.with(|h| *h.borrow_mut() = hook);
}

#[cfg(test)]
fn at_step(step: Step, tmp: &Path, path: &Path) {
    HOOK.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(step, tmp, path);
        }
    });
}

#[cfg(not(test))]
fn at_step(_: Step, _: &Path, _: &Path) {}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn nid(s: &str) -> NoticeId {
        NoticeId::from_parts(&[s])
    }

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
            &nid("aws/spot/terminate"),
            None,
            PowerAction::PowerOff,
            Phase::Started,
            t(NOW),
        )
        .unwrap();
        s.record(
            &nid("aws/scheduled/e1"),
            Some("e1"),
            PowerAction::Reboot,
            Phase::Done,
            t(NOW),
        )
        .unwrap();
        s.record(
            &nid("aws/scheduled/e2"),
            Some("e2"),
            PowerAction::Reboot,
            Phase::Started,
            t(NOW),
        )
        .unwrap();

        // Same boot: `started` without an event id is not acted (retry after checking logind).
        let (s2, r) = State::load(dir.path(), "boot-a".into(), t(NOW + 5));
        assert_eq!(r.loaded, 3);
        let mut ids = s2.acted_ids();
        ids.sort();
        assert_eq!(ids, vec![nid("aws/scheduled/e1")]);
        assert_eq!(s2.event_ids_this_boot().len(), 2);

        // Next boot: the spot record is dropped, the event records count as acted on.
        let (s3, r) = State::load(dir.path(), "boot-b".into(), t(NOW + 60));
        assert_eq!(r.dropped_other_boot, 1);
        let mut ids = s3.acted_ids();
        ids.sort();
        assert_eq!(ids, vec![nid("aws/scheduled/e1"), nid("aws/scheduled/e2")]);
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
        s.record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        let (s2, _) = State::load(dir.path(), "b".into(), t(NOW));
        assert_eq!(s2.acted_ids(), vec![nid("x")]);
    }

    #[test]
    fn unwritable_directory_is_an_error_with_the_fix() {
        let (mut s, _) = State::load(Path::new("/nonexistent/nthd-state"), "b".into(), t(NOW));
        let e = s
            .record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/nonexistent/nthd-state/state.json") && e.contains("NTHD_STATE_DIR"),
            "{e}"
        );
        // The record is still held in memory.
        assert_eq!(s.acted_ids(), vec![nid("x")]);
    }

    #[test]
    fn unreadable_and_unknown_version_files_are_set_aside_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: reading fails with something other than
        // "not found".
        fs::create_dir(dir.path().join("state.json")).unwrap();
        let (mut s, r) = State::load(dir.path(), "b".into(), t(NOW));
        assert!(
            r.error.as_deref().unwrap().contains("is a directory"),
            "{r:?}"
        );
        let aside = r.moved_aside.unwrap();
        assert!(
            aside.ends_with(format!("state.json.unreadable-{NOW}")),
            "{aside:?}"
        );
        s.record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        assert!(aside.is_dir(), "the unreadable original is kept");

        let dir = tempfile::tempdir().unwrap();
        let body = br#"{"version":2,"records":[]}"#;
        fs::write(dir.path().join("state.json"), body).unwrap();
        let (_, r) = State::load(dir.path(), "b".into(), t(NOW));
        assert!(
            r.error.as_deref().unwrap().contains("format version 2"),
            "{r:?}"
        );
        assert_eq!(fs::read(r.moved_aside.unwrap()).unwrap(), body);
    }

    #[test]
    fn retention_survives_wall_clock_jumps() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = State::load(dir.path(), "boot-a".into(), t(NOW));
        // Written while the clock was a year ahead, then set right.
        s.record(
            &nid("e1"),
            Some("e1"),
            PowerAction::Reboot,
            Phase::Done,
            t(NOW + 365 * 86400),
        )
        .unwrap();
        let (s2, r) = State::load(dir.path(), "boot-b".into(), t(NOW));
        assert_eq!(r.loaded, 1);
        assert_eq!(
            s2.records()[0].at_unix,
            NOW,
            "clamped to now, so it can expire"
        );
        let (_, r) = State::load(
            dir.path(),
            "boot-b".into(),
            t(NOW + RETENTION.as_secs() + 1),
        );
        assert_eq!(r.expired, 1);

        // The clock jumps forward past the retention within one boot: this boot's records stay.
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = State::load(dir.path(), "boot-a".into(), t(NOW));
        s.record(
            &nid("spot"),
            None,
            PowerAction::PowerOff,
            Phase::Done,
            t(NOW),
        )
        .unwrap();
        let later = t(NOW + RETENTION.as_secs() * 2);
        let (s2, r) = State::load(dir.path(), "boot-a".into(), later);
        assert_eq!((r.expired, s2.acted_ids()), (0, vec![nid("spot")]));
    }

    #[test]
    fn temporary_files_never_follow_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        fs::write(&target, b"keep").unwrap();
        let p = dir.path().join("f");
        let tmp = dir.path().join(format!(".f.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&target, &tmp).unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(fs::read(&p).unwrap(), b"new");
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
    fn an_unknown_boot_id_never_makes_a_notice_be_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let none = dir.path().join("none");
        assert_eq!(boot_id_from(&none, &none), UNKNOWN_BOOT);
        let stat = dir.path().join("stat");
        fs::write(&stat, "cpu 1 2 3\nbtime 1700000000\n").unwrap();
        assert_eq!(boot_id_from(&none, &stat), "btime-1700000000");

        // Written in one boot whose id could not be read...
        let (mut s, _) = State::load(dir.path(), UNKNOWN_BOOT.into(), t(NOW));
        let rec = |s: &mut State, id: &str, ev: Option<&str>, a: PowerAction, p: Phase| {
            s.record(&nid(id), ev, a, p, t(NOW)).unwrap();
        };
        rec(
            &mut s,
            "aws/spot/terminate",
            None,
            PowerAction::PowerOff,
            Phase::Done,
        );
        rec(
            &mut s,
            "azure/E1",
            Some("E1"),
            PowerAction::PowerOff,
            Phase::Started,
        );
        rec(
            &mut s,
            "aws/scheduled/e2",
            Some("e2"),
            PowerAction::Reboot,
            Phase::Started,
        );
        rec(
            &mut s,
            "aws/scheduled/e3",
            Some("e3"),
            PowerAction::PowerOff,
            Phase::Done,
        );
        // ...and read in a later one, also unknown: the spot notice of an earlier boot and the
        // power-off that may never have reached logind are acted on; a reboot is not repeated.
        let (s2, _) = State::load(dir.path(), UNKNOWN_BOOT.into(), t(NOW + 60));
        let mut ids = s2.acted_ids();
        ids.sort();
        assert_eq!(ids, vec!["aws/scheduled/e2", "aws/scheduled/e3"]);
    }

    #[test]
    fn boot_id_is_read() {
        let b = current_boot_id();
        assert!(!b.is_empty());
        assert_eq!(b, current_boot_id());
    }

    #[test]
    fn root_hands_the_file_to_the_owner_of_the_state_directory() {
        use std::os::unix::fs::MetadataExt;
        if crate::logind::effective_uid() != 0 {
            eprintln!("not root: chown cannot be exercised here (CI runs as root)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(4242), Some(4343)).unwrap();
        let (mut s, _) = State::load(dir.path(), "boot-a".into(), t(NOW));
        s.record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        let m = fs::metadata(dir.path().join("state.json")).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (4242, 4343, 0o600));
        // The status file and the metrics textfile go the same way (fchown before the rename).
        let status = dir.path().join("status.json");
        write_replace(&status, b"{}", 0o644, false).unwrap();
        let m = fs::metadata(&status).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (4242, 4343, 0o644));
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary file left"
        );

        // In a directory root owns, root's file stays root's.
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(0), Some(4343)).unwrap();
        write_atomic(&dir.path().join("state.json"), b"{}").unwrap();
        let m = fs::metadata(dir.path().join("state.json")).unwrap();
        assert_eq!((m.uid(), m.gid()), (0, 0));
    }

    /// Replaces `link` (whatever is there) with a symbolic link to `target`, as user nthd could
    /// in a directory it owns.
    fn plant(link: &Path, target: &Path) {
        let _ = fs::remove_file(link);
        std::os::unix::fs::symlink(target, link).unwrap();
    }

    /// One save as root into a directory owned by 4242:4343, with user nthd's symbolic link to
    /// a root-owned 0600 file planted at `step` (over state.json, and over the temporary file
    /// too when `swap_tmp`); what went wrong, if anything.
    fn save_with_link_planted(step: Step, swap_tmp: bool) -> Vec<String> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(4242), Some(4343)).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("shadow");
        fs::write(&target, b"root:secret\n").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
        let (mut s, _) = State::load(dir.path(), "boot-a".into(), t(NOW));
        let link_to = target.clone();
        set_hook(Some(Box::new(move |at, tmp, path| {
            if at == step {
                plant(path, &link_to);
                if swap_tmp {
                    plant(tmp, &link_to);
                }
            }
        })));
        let saved = s.record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW));
        set_hook(None);
        let case = format!("link planted at {step:?} (over the temporary file too: {swap_tmp})");
        let mut wrong = Vec::new();
        let m = fs::symlink_metadata(&target).unwrap();
        if (m.uid(), m.gid(), m.mode() & 0o7777) != (0, 0, 0o600) {
            wrong.push(format!(
                "{case}: the target is now {}:{} {:o}",
                m.uid(),
                m.gid(),
                m.mode()
            ));
        }
        if fs::read(&target).unwrap() != b"root:secret\n" {
            wrong.push(format!("{case}: the target was written"));
        }
        if !swap_tmp && step != Step::Renamed {
            // Only state.json was swapped, before the rename: the rename replaces the link itself
            // with nthd's file, already handed to the directory's owner.
            let f = fs::symlink_metadata(dir.path().join("state.json")).unwrap();
            let got = (saved.is_ok(), f.file_type().is_file(), f.uid(), f.gid());
            if got != (true, true, 4242, 4343) {
                wrong.push(format!("{case}: (saved, regular file, uid, gid) = {got:?}"));
            }
        }
        wrong
    }

    /// `sudo nthd simulate --yes` writes state.json as root in a directory user nthd owns: user
    /// nthd swapping in a symbolic link at any moment must not make root write, chown or chmod
    /// what the link points to.
    #[test]
    fn root_never_chowns_or_writes_through_a_planted_link() {
        if crate::logind::effective_uid() != 0 {
            eprintln!("not root: the chown to the directory's owner cannot happen here");
            return;
        }
        let steps = [
            Step::BeforeOpen,
            Step::Written,
            Step::BeforeChown,
            Step::BeforeRename,
            Step::Renamed,
        ];
        let mut wrong = Vec::new();
        for step in steps {
            for swap_tmp in [false, true] {
                wrong.extend(save_with_link_planted(step, swap_tmp));
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// A symbolic link planted as state.json is never read through (root would read any file
    /// with it): it is set aside as unreadable, and the rename moves the link, not its target.
    #[test]
    fn a_linked_state_file_is_set_aside_not_read_through() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("elsewhere.json");
        let body = format!(
            r#"{{"version":1,"records":[{{"id":"x","action":"reboot","phase":"done","boot_id":"b","at_unix":{NOW}}}]}}"#
        );
        fs::write(&target, &body).unwrap();
        plant(&dir.path().join("state.json"), &target);
        let (s, r) = State::load(dir.path(), "b".into(), t(NOW));
        assert!(
            s.records().is_empty(),
            "read through the link: {:?}",
            s.records()
        );
        let why = r.error.as_deref().unwrap_or_default();
        assert!(why.contains("symbolic link"), "{r:?}");
        let aside = r.moved_aside.expect("the link is set aside");
        assert!(
            aside.ends_with(format!("state.json.unreadable-{NOW}")),
            "{aside:?}"
        );
        assert_eq!(
            fs::read_link(&aside).unwrap(),
            target,
            "the link itself was moved"
        );
        assert_eq!(
            fs::read_to_string(&target).unwrap(),
            body,
            "its target is untouched"
        );
        assert!(fs::symlink_metadata(dir.path().join("state.json")).is_err());
    }

    /// User nthd owns the state directory and root's drill reads the file in it: whatever is
    /// planted there instead of a state file (a FIFO, a link to a valid file, a directory, a
    /// valid file over 1 MiB, a socket) is refused at once, not read, set aside with a message
    /// naming it, and a fresh file is written in its place.
    #[test]
    fn a_trap_at_the_state_path_is_set_aside_at_once() {
        use crate::files::tests::{within_5s, TRAPS};
        let valid = format!(
            r#"{{"version":1,"records":[{{"id":"x","action":"reboot","phase":"done","boot_id":"b","at_unix":{NOW}}}]}}"#
        );
        for trap in TRAPS {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.json");
            let (want, _listener) = trap.plant(&path, valid.as_bytes());
            let d = dir.path().to_path_buf();
            let (mut s, r) = within_5s(&format!("loading a {trap:?}"), move || {
                State::load(&d, "b".into(), t(NOW))
            });
            assert!(s.records().is_empty(), "{trap:?} read: {:?}", s.records());
            let why = r.error.clone().unwrap_or_default();
            // nthd moves it away itself: the message does not ask for that.
            assert!(
                why.contains(want)
                    && why.contains(&path.display().to_string())
                    && !why.contains("mv "),
                "{trap:?}: {why}"
            );
            let aside = r.moved_aside.expect("set aside");
            assert!(
                aside.ends_with(format!("state.json.unreadable-{NOW}")),
                "{aside:?}"
            );
            assert!(fs::symlink_metadata(&aside).is_ok(), "{trap:?} was lost");
            s.record(&nid("y"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
                .unwrap();
            assert!(fs::symlink_metadata(&path).unwrap().is_file(), "{trap:?}");
        }
    }

    const POWER_OFF: PowerAction = PowerAction::PowerOff;

    /// The daemon's state in `dir` with a spot record started for `action`, then a drill's
    /// state loaded after it.
    fn daemon_then_drill(dir: &Path, action: PowerAction) -> (NoticeId, State, State) {
        let (mut daemon, _) = State::load(dir, "b".into(), t(NOW));
        let spot = nid("aws/spot/terminate");
        daemon
            .record(&spot, None, action, Phase::Started, t(NOW))
            .unwrap();
        let (drill, _) = State::load(dir, "b".into(), t(NOW));
        (spot, daemon, drill.for_drill())
    }

    fn drill_id(n: u32) -> NoticeId {
        NoticeId::drill(
            crate::notice::NoticeKind::SpotTerminate,
            &format!("1.2-3-{n}"),
        )
    }

    /// The records in `dir`'s state file, as (id, phase).
    fn on_disk(dir: &Path) -> Vec<(String, Phase)> {
        let f = read_file(&dir.join("state.json"))
            .unwrap()
            .unwrap_or_default();
        f.records
            .into_iter()
            .map(|r| (r.id.to_string(), r.phase))
            .collect()
    }

    /// A drill loads the state, waits for its moment (minutes with `--deadline-in`), then
    /// writes: what the daemon wrote meanwhile (a new record, a record gone from started to
    /// done) is still there after the drill's write, and the drill's record is added.
    #[test]
    fn what_the_daemon_writes_while_a_drill_waits_survives_the_drills_write() {
        let dir = tempfile::tempdir().unwrap();
        let (spot, mut daemon, mut drill) = daemon_then_drill(dir.path(), PowerAction::PowerOff);
        daemon
            .record(&spot, None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        let e1 = nid("aws/scheduled/e1");
        daemon
            .record(&e1, Some("e1"), PowerAction::Reboot, Phase::Done, t(NOW))
            .unwrap();
        drill
            .record(&drill_id(1), None, POWER_OFF, Phase::Done, t(NOW))
            .unwrap();
        assert_eq!(
            on_disk(dir.path()),
            vec![
                (spot.to_string(), Phase::Done),
                (e1.to_string(), Phase::Done),
                (drill_id(1).to_string(), Phase::Done),
            ]
        );
    }

    /// The other way round: a drill's record written after the daemon loaded the state is kept
    /// in the daemon's every later write, the daemon's own changes included (a record forgotten
    /// stays gone). At the next boot the daemon drops it, as any record without an event id.
    #[test]
    fn a_record_a_drill_wrote_survives_the_daemons_next_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (spot, mut daemon, mut drill) = daemon_then_drill(dir.path(), PowerAction::Reboot);
        drill
            .record(&drill_id(1), None, POWER_OFF, Phase::Done, t(NOW))
            .unwrap();
        let e1 = nid("aws/scheduled/e1");
        daemon
            .record(&e1, Some("e1"), PowerAction::Reboot, Phase::Done, t(NOW))
            .unwrap();
        daemon.forget(&spot);
        daemon.save().unwrap();
        let want = vec![
            (drill_id(1).to_string(), Phase::Done),
            (e1.to_string(), Phase::Done),
        ];
        assert_eq!(on_disk(dir.path()), want);

        let (mut next_boot, r) = State::load(dir.path(), "c".into(), t(NOW + 60));
        assert_eq!(r.dropped_other_boot, 1);
        next_boot
            .record(
                &nid("x"),
                None,
                PowerAction::PowerOff,
                Phase::Done,
                t(NOW + 60),
            )
            .unwrap();
        let want = vec![
            (e1.to_string(), Phase::Done),
            ("x".to_string(), Phase::Done),
        ];
        assert_eq!(on_disk(dir.path()), want, "the old drill record is dropped");
    }

    /// The two sides take turns on the state directory's lock: a daemon write that comes while
    /// a drill is between its read and its rename waits for it, then keeps the drill's record.
    #[test]
    fn a_daemon_write_waits_for_a_drill_write_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let (daemon, _) = State::load(dir.path(), "b".into(), t(NOW));
        let (drill, _) = State::load(dir.path(), "b".into(), t(NOW));
        let mut drill = drill.for_drill();
        let daemon = Arc::new(Mutex::new(Some(daemon)));
        let blocked = Arc::new(Mutex::new(None));
        let (d, b) = (daemon.clone(), blocked.clone());
        set_hook(Some(Box::new(move |step, _, _| {
            if step != Step::Written {
                return;
            }
            let Some(mut daemon) = d.lock().unwrap().take() else {
                return;
            };
            let write = std::thread::spawn(move || {
                let spot = nid("aws/spot/terminate");
                daemon.record(&spot, None, PowerAction::PowerOff, Phase::Done, t(NOW))
            });
            std::thread::sleep(Duration::from_millis(300));
            *b.lock().unwrap() = Some((!write.is_finished(), write));
        })));
        let drilled = drill.record(
            &drill_id(1),
            None,
            PowerAction::PowerOff,
            Phase::Done,
            t(NOW),
        );
        set_hook(None);
        drilled.unwrap();
        let (waited, write) = blocked.lock().unwrap().take().expect("the hook ran");
        write.join().unwrap().unwrap();
        assert!(waited, "the daemon wrote while the drill held the lock");
        assert_eq!(
            on_disk(dir.path()),
            vec![
                (drill_id(1).to_string(), Phase::Done),
                ("aws/spot/terminate".to_string(), Phase::Done),
            ]
        );
    }

    /// A lock held past the wait (a stuck drill, or user nthd holding it on purpose against a
    /// root drill) costs a wait, never the record.
    #[test]
    fn a_lock_held_past_the_wait_does_not_stop_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = State::load(dir.path(), "b".into(), t(NOW));
        s.set_lock_wait(Duration::from_millis(200));
        let held = DirLock::take(&dir.path().join("state.json"), Duration::ZERO)
            .unwrap()
            .expect("free");
        let started = std::time::Instant::now();
        s.record(&nid("x"), None, PowerAction::PowerOff, Phase::Done, t(NOW))
            .unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "did not wait"
        );
        assert_eq!(on_disk(dir.path()), vec![("x".to_string(), Phase::Done)]);
        drop(held);
    }

    /// Set, in the child [`in_read_only_dir`] starts, to the read-only directory.
    const READ_ONLY_DIR: &str = "NTHD_TEST_READ_ONLY_DIR";

    /// Runs the test `name` of this test binary again in a private mount namespace where a new
    /// directory, filled by `fill`, is a read-only bind mount: root ignores permission bits, a
    /// read-only file system it does not. In that child, returns the directory; in the parent
    /// (after checking that the child passed) and where this cannot be done (not root, no
    /// unshare(1), no mount namespaces), `None`.
    pub(crate) fn in_read_only_dir(name: &str, fill: impl FnOnce(&Path)) -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os(READ_ONLY_DIR) {
            return Some(PathBuf::from(dir));
        }
        if crate::logind::effective_uid() != 0 {
            eprintln!("not root: cannot make a read-only bind mount here (CI runs as root)");
            return None;
        }
        let probe = std::process::Command::new("unshare")
            .args(["-m", "true"])
            .status();
        if !matches!(probe, Ok(s) if s.success()) {
            eprintln!("unshare -m does not work here ({probe:?}): install util-linux");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        fill(dir.path());
        let script = r#"mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" &&
            exec "$0" --exact "$2" --nocapture --test-threads=1"#;
        let out = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script])
            .arg(std::env::current_exe().unwrap())
            .arg(dir.path())
            .arg(name)
            .env(READ_ONLY_DIR, dir.path())
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{name} in a read-only {}: {stdout}{stderr}",
            dir.path().display()
        );
        None
    }

    /// A corrupt state file in a read-only state directory (a read-only /var) cannot be moved
    /// aside: every record is then an error naming the file and the fix, so a reboot, which
    /// must be recorded first, is refused.
    #[test]
    fn a_file_that_cannot_be_set_aside_makes_every_record_an_error() {
        let garbage = b"{\"version\":1,\"records\":[{garbage";
        let name = "state::tests::a_file_that_cannot_be_set_aside_makes_every_record_an_error";
        let Some(dir) =
            in_read_only_dir(name, |d| fs::write(d.join("state.json"), garbage).unwrap())
        else {
            return;
        };
        let (mut s, r) = State::load(&dir, "b".into(), t(NOW));
        assert_eq!(r.moved_aside, None);
        let why = r.error.unwrap_or_default();
        assert!(
            why.contains("could not be moved aside") && why.contains("will not reboot"),
            "{why}"
        );
        let e = s
            .record(
                &nid("e"),
                Some("e"),
                PowerAction::Reboot,
                Phase::Started,
                t(NOW),
            )
            .unwrap_err()
            .to_string();
        let file = dir.join("state.json").display().to_string();
        for want in [
            file.as_str(),
            "is corrupt",
            "Read-only file system",
            "refuses to reboot",
            "restart nthd",
        ] {
            assert!(e.contains(want), "{want:?} not in: {e}");
        }
        assert_eq!(
            s.acted_ids(),
            Vec::<NoticeId>::new(),
            "a started record does not count"
        );
        assert_eq!(
            fs::read(dir.join("state.json")).unwrap(),
            garbage,
            "left as it is"
        );
    }

    /// The file a record is written to, byte for byte: the notice id is a plain JSON string,
    /// as it was before it had a type of its own, so old and new versions read each other's.
    #[test]
    fn the_file_format_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = State::load(dir.path(), "b".into(), t(NOW));
        let id = NoticeId::new(crate::notice::Cloud::Aws, &["scheduled", "e1"]);
        s.record(&id, Some("e1"), PowerAction::Reboot, Phase::Done, t(NOW))
            .unwrap();
        let want = format!(
            "{{\n  \"version\": 1,\n  \"records\": [\n    {{\n      \"id\": \"aws/scheduled/e1\",\n      \
             \"event_id\": \"e1\",\n      \"action\": \"reboot\",\n      \"phase\": \"done\",\n      \
             \"boot_id\": \"b\",\n      \"at_unix\": {NOW}\n    }}\n  ]\n}}"
        );
        let body = fs::read_to_string(dir.path().join("state.json")).unwrap();
        assert_eq!(body, want);
        let (s2, r) = State::load(dir.path(), "b".into(), t(NOW + 1));
        assert_eq!((r.loaded, s2.records()[0].id.clone()), (1, id));
    }

    /// Writes run off the async runtime and may land out of order: a Started snapshot whose
    /// write comes last must not undo the Done written before it.
    #[test]
    fn an_older_snapshot_never_overwrites_a_newer_one() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = State::load(dir.path(), "b".into(), t(NOW));
        s.note(&nid("x"), None, PowerAction::Reboot, Phase::Started, t(NOW));
        let started = s.snapshot().unwrap();
        s.note(&nid("x"), None, PowerAction::Reboot, Phase::Done, t(NOW));
        let done = s.snapshot().unwrap();
        done.write().unwrap();
        started.write().unwrap();
        let (s2, _) = State::load(dir.path(), "b".into(), t(NOW));
        assert_eq!(s2.records().len(), 1);
        assert_eq!(s2.records()[0].phase, Phase::Done);
    }
}
