//! The status file shared with a fire drill.
//!
//! `nthd simulate --yes` is its own process, and it adds its action (marked `drill`) to the
//! daemon's status file itself: there is no channel to the daemon, and the file is where
//! `nthd status` and the NPD plugin look. Both sides hold an exclusive `flock(2)` on the file's
//! directory while they read and replace the file, and the daemon keeps the drill actions it
//! finds there in every later write, so neither loses the other's. The daemon never waits for
//! the lock (it writes at its next update instead); a drill waits at most [`DRILL_WAIT`].
//!
//! The drill may run as root in a directory user nthd owns: it reads with
//! [`files::read_untrusted`] (no symbolic link, FIFO, directory or file over 1 MiB) and writes
//! through [`crate::state::write_replace`] (O_EXCL|O_NOFOLLOW temporary file, handed to the
//! directory's owner, renamed into place).

use std::path::Path;
use std::time::Duration;

use super::{ActionView, SCHEMA};
use crate::files::{self, DirLock};

/// How long a drill waits for the daemon to release the lock.
pub(crate) const DRILL_WAIT: Duration = Duration::from_secs(2);

/// Why the file could not be used.
#[derive(Debug)]
enum ValueError {
    /// It could not be read, or was refused (see [`files::read_untrusted`]).
    Read(files::ReadError),
    /// It is not JSON.
    Json(serde_json::Error),
}

/// The file's JSON as it is, unknown fields and all (a newer nthd may have written it).
fn read_value(path: &Path) -> Result<serde_json::Value, ValueError> {
    let bytes = files::read_untrusted(path).map_err(ValueError::Read)?;
    serde_json::from_slice(&bytes).map_err(ValueError::Json)
}

/// The drills' actions the file at `path` lists (none when it cannot be read).
pub(crate) fn drill_actions(path: &Path) -> Vec<ActionView> {
    let Ok(v) = read_value(path) else {
        return Vec::new();
    };
    let Some(actions) = v.get("actions").and_then(|a| a.as_array()) else {
        return Vec::new();
    };
    actions
        .iter()
        .filter_map(|a| serde_json::from_value::<ActionView>(a.clone()).ok())
        .filter(|a| a.drill)
        .collect()
}

/// Adds a drill's action to the daemon's status file at `path`: `Ok(false)` when there is no
/// such file (no daemon keeps one here), an error naming the file when it cannot be updated.
pub(crate) fn add_drill_action(path: &Path, view: ActionView) -> Result<bool, String> {
    let name = path.display();
    let lock = DirLock::take(path, DRILL_WAIT);
    let _lock = match lock {
        Ok(Some(l)) => l,
        Ok(None) => return Err(format!("{name} stayed locked by the daemon")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("cannot lock the directory of {name}: {e}")),
    };
    let mut v = match read_value(path) {
        Ok(v) => v,
        Err(ValueError::Read(e)) if e.is_missing() => return Ok(false),
        Err(ValueError::Read(e)) => return Err(e.with_fix()),
        Err(ValueError::Json(e)) => return Err(format!("{name} is not JSON ({e}); left as it is")),
    };
    if v.get("schema").and_then(serde_json::Value::as_u64) != Some(u64::from(SCHEMA)) {
        return Err(format!("{name} is not schema {SCHEMA}; left as it is"));
    }
    let mut actions: Vec<serde_json::Value> = v
        .get("actions")
        .and_then(|a| a.as_array().cloned())
        .unwrap_or_default();
    actions.push(serde_json::to_value(&view).map_err(|e| e.to_string())?);
    let excess = actions.len().saturating_sub(super::MAX_ACTIONS);
    actions.drain(..excess);
    v["actions"] = serde_json::Value::Array(actions);
    let mut body = serde_json::to_vec_pretty(&v).map_err(|e| e.to_string())?;
    body.push(b'\n');
    crate::state::write_replace(path, &body, 0o644, false)
        .map(|()| true)
        .map_err(|e| format!("cannot write {name}: {e}"))
}
