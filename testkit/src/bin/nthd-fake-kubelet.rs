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

use nthd_testkit::kubelet::{run, KubeletOptions};

const USAGE: &str =
    "usage: nthd-fake-kubelet --record FILE [--drain-secs N] [--progress-ms N] [--address ADDR]";

fn main() -> ExitCode {
    let mut opts = KubeletOptions::default();
    let mut record = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        let Some(v) = inline.or_else(|| args.next()) else {
            eprintln!("nthd-fake-kubelet: {flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        let ok = match flag.as_str() {
            "--record" => {
                record = Some(PathBuf::from(v));
                true
            }
            "--drain-secs" => match v.parse::<f64>() {
                Ok(s) if s >= 0.0 && s.is_finite() => {
                    opts.drain = Duration::from_secs_f64(s);
                    true
                }
                _ => false,
            },
            "--progress-ms" => match v.parse::<u64>() {
                Ok(ms) if ms > 0 => {
                    opts.progress_every = Duration::from_millis(ms);
                    true
                }
                _ => false,
            },
            "--address" => {
                opts.address = Some(v);
                true
            }
            _ => {
                eprintln!("nthd-fake-kubelet: unknown argument {flag:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        };
        if !ok {
            eprintln!("nthd-fake-kubelet: bad value for {flag}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let Some(record) = record else {
        eprintln!("nthd-fake-kubelet: --record is required\n{USAGE}");
        return ExitCode::from(2);
    };
    opts.record = record;

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
