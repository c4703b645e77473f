//! Cleanup: every child is registered so a panic (abort) or a signal still kills it, and every
//! scratch file lives under one directory removed on every exit path.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use nthd_testkit::lock;
use nthd_testkit::logind::PrivateBus;

/// Registered kill targets: negative = a process group, positive = one process.
static KILL_LIST: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// The scratch directory, removed on every exit path.
static SCRATCH: Mutex<Option<PathBuf>> = Mutex::new(None);

fn register(target: i32) {
    lock(&KILL_LIST).push(target);
}

fn unregister(target: i32) {
    let mut l = lock(&KILL_LIST);
    if let Some(i) = l.iter().position(|t| *t == target) {
        l.swap_remove(i);
    }
}

/// Creates the scratch directory and makes it the one every exit path removes. `TMPDIR` points
/// there too (PrivateBus uses it); call before any thread exists.
pub(crate) fn set_scratch(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    *lock(&SCRATCH) = Some(dir.to_path_buf());
    std::env::set_var("TMPDIR", dir);
    Ok(())
}

/// Kill everything still registered and remove the scratch directory. Safe to call from the
/// panic hook (it never blocks on a lock another thread could hold forever).
pub(crate) fn emergency_cleanup() {
    if let Ok(l) = KILL_LIST.try_lock() {
        for t in l.iter() {
            // SAFETY: kill(2) has no memory-safety preconditions.
            unsafe {
                libc::kill(*t, libc::SIGKILL);
            }
        }
    }
    if let Ok(s) = SCRATCH.try_lock() {
        if let Some(d) = s.as_ref() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A child process in its own process group; the whole group is SIGKILLed on drop.
pub(crate) struct Proc {
    child: Child,
    pid: i32,
}

impl Proc {
    pub(crate) fn spawn(mut cmd: Command) -> io::Result<Proc> {
        cmd.process_group(0);
        // SAFETY: prctl is async-signal-safe; the closure touches no shared state.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        let pid = child.id() as i32;
        register(-pid);
        Ok(Proc { child, pid })
    }

    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        unregister(-self.pid);
    }
}

/// A private dbus-daemon, registered for emergency cleanup.
pub(crate) struct Bus(pub PrivateBus);

impl Bus {
    pub(crate) async fn start() -> Result<Bus, String> {
        let bus = tokio::task::spawn_blocking(PrivateBus::start)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("private dbus-daemon: {e}"))?;
        register(bus.pid() as i32);
        Ok(Bus(bus))
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        unregister(self.0.pid() as i32);
    }
}

/// A directory under the scratch directory, removed on drop.
pub(crate) struct TempDir(PathBuf);

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TempDir {
    pub(crate) fn new(prefix: &str) -> io::Result<TempDir> {
        let root = lock(&SCRATCH)
            .clone()
            .ok_or_else(|| io::Error::other("no scratch directory"))?;
        let p = root.join(format!(
            "{prefix}{}",
            DIR_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&p)?;
        Ok(TempDir(p))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Aborts a tokio task on drop.
pub(crate) struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
