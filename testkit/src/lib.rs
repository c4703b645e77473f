//! Test doubles for `nthd`.
//!
//! * [`imds`] — a scriptable, hand-written HTTP/1.1 server that emulates the instance-metadata
//!   services of AWS, GCP, Azure and Alibaba Cloud at once, with byte-level fault injection.
//!   Also shipped as the `nthd-mock-imds` binary.
//! * [`logind`] — a private `dbus-daemon` ([`logind::PrivateBus`]) and a fake
//!   `org.freedesktop.login1` ([`logind::FakeLogind`]). Also shipped as `nthd-fake-logind`.
//! * [`systemd`] — a fake `org.freedesktop.systemd1` (version, `SystemState`, one unit, and the
//!   unit calls it is asked to make).
//! * [`kubelet`] — a stand-in for kubelet's Graceful Node Shutdown manager (delay inhibitor +
//!   `PrepareForShutdown` handling, and optionally pods laid out as kubelet's systemd cgroup
//!   driver does, stopped by priority group), shipped as `nthd-fake-kubelet`.
//!
//! Everything here is test infrastructure: on misuse (an invalid scripted response, a poisoned
//! state) it prefers a loud panic with a clear message over silently doing something else.

pub mod imds;
pub mod kubelet;
pub mod logind;
pub mod systemd;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// The effective uid of this process (the one place the test code asks).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and always succeeds.
    unsafe { libc::geteuid() }
}

/// A testkit binary's `main` after its arguments: runs `work` on a current-thread runtime and
/// turns its outcome into the exit code; every error (the runtime's own included) is printed
/// after the binary's `name`, and exits 1.
pub fn run_main(
    name: &str,
    work: impl std::future::Future<Output = Result<(), String>>,
) -> std::process::ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"));
    match rt.and_then(|rt| rt.block_on(work)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// Milliseconds since the Unix epoch for `t` (0 for times before the epoch).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

/// Lock a mutex, ignoring poisoning: the state behind our mutexes stays consistent even if a
/// holder panicked (every critical section is a handful of plain assignments).
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The `nthd` binary at `bin` with a clean environment: no settings file, logs on stderr, stdin
/// closed, `PATH` kept, the system bus at `bus`. Every test and the benchmark launch nthd
/// through this, and add the settings of their case.
pub fn nthd_command(bin: impl AsRef<Path>, bus: &str) -> Command {
    let mut c = Command::new(bin.as_ref());
    c.env_clear()
        .env("NTHD_SETTINGS_FILE", "none")
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("DBUS_SYSTEM_BUS_ADDRESS", bus)
        .env("NTHD_LOG_TARGET", "stderr")
        .stdin(Stdio::null());
    c
}
