//! `nthd-fake-kubelet`: behaves toward logind like kubelet's Graceful Node Shutdown.
//!
//! ```text
//! nthd-fake-kubelet --record FILE [--drain-secs N] [--progress-ms N] [--address ADDR]
//! ```
//!
//! Uses the system bus (`$DBUS_SYSTEM_BUS_ADDRESS` or the default socket) unless `--address`
//! is given. Takes `Inhibit("shutdown", "kubelet", "Kubelet needs time to handle node
//! shutdown", "delay")` after subscribing to `PrepareForShutdown`, and appends fsynced JSON lines
//! to FILE: `locked`, `prepare`, `draining` (every `--progress-ms`, default 1000), `drained`,
//! `released`, and `prepare_cancelled` (then re-locks). `--drain-secs` (default 5) may be
//! fractional. Runs until SIGTERM/SIGINT, which it handles so that a drain under way finishes
//! its records (`drained` or `drain_aborted`, then `released`, `stopped`) within 3 s; exits 1
//! with a message if the lock cannot be taken or the bus is lost, 2 on bad usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nthd_testkit::kubelet::{run, KubeletOptions};

/// Behaves toward logind like kubelet's Graceful Node Shutdown.
#[derive(Parser)]
#[command(name = "nthd-fake-kubelet")]
struct Args {
    /// Where the JSON lines go (appended, fsynced).
    #[arg(long, value_name = "FILE")]
    record: PathBuf,
    /// How long the drain takes, in seconds (fractions allowed).
    #[arg(long, value_name = "N", default_value = "5", value_parser = secs)]
    drain_secs: Duration,
    /// How often a `draining` line is written while draining.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    progress_ms: u64,
    /// The bus address (default: `$DBUS_SYSTEM_BUS_ADDRESS` or the system bus socket).
    #[arg(long, value_name = "ADDR")]
    address: Option<String>,
}

/// A non-negative, finite number of seconds.
fn secs(v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(s) if s >= 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{v:?} is not a non-negative number of seconds")),
    }
}

fn main() -> ExitCode {
    let a = Args::parse();
    let opts = KubeletOptions {
        record: a.record,
        drain: a.drain_secs,
        progress_every: Duration::from_millis(a.progress_ms),
        address: a.address,
        ..KubeletOptions::default()
    };

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nthd-fake-kubelet: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nthd-fake-kubelet: {e}");
            ExitCode::from(1)
        }
    }
}
