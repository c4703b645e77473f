//! `nthd-fake-kubelet`: behaves toward logind like kubelet's Graceful Node Shutdown.
//!
//! ```text
//! nthd-fake-kubelet --record FILE [--drain-secs N] [--progress-ms N] [--address ADDR]
//!                   [--pod NAMESPACE/NAME:QOS[:GROUP[:UID]]]... [--group GROUP:SECS]...
//!                   [--cgroup-root DIR] [--log-root DIR]
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
//!
//! With `--pod` it first lays the pods out as kubelet with the systemd cgroup driver does (a
//! `sleep infinity` in `fake-pod-<uid>.service` in slice `kubepods-<qos>-pod<uid_>.slice`,
//! through systemd's `StartTransientUnit`; `<log root>/<ns>_<name>_<uid>/app/0.log`) and
//! records `pods`; the drain then stops the groups in ascending order, each when its
//! `--group` period ends (`group_stopped`), and lasts the periods together. Without `--group`
//! the pods are one group of `--drain-secs`. See `nthd_testkit::kubelet::pods`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nthd_testkit::kubelet::pods::{Group, Pod};
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
    /// A pod to lay out (repeatable): QOS is guaranteed, burstable or besteffort; GROUP its
    /// priority group (default 0); UID (default: derived from the name).
    #[arg(long = "pod", value_name = "NAMESPACE/NAME:QOS[:GROUP[:UID]]")]
    pods: Vec<Pod>,
    /// A priority group and its drain period (repeatable); groups stop in ascending order.
    #[arg(long = "group", value_name = "GROUP:SECS")]
    groups: Vec<Group>,
    /// Where the pods' cgroups appear.
    #[arg(long, value_name = "DIR", default_value = "/sys/fs/cgroup")]
    cgroup_root: PathBuf,
    /// Where the pods' log directories go.
    #[arg(long, value_name = "DIR", default_value = "/var/log/pods")]
    log_root: PathBuf,
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
    if let Err(e) = nthd_testkit::kubelet::pods::plan(&a.pods, &a.groups, a.drain_secs) {
        eprintln!("nthd-fake-kubelet: {e}");
        return ExitCode::from(2);
    }
    let opts = KubeletOptions {
        record: a.record,
        drain: a.drain_secs,
        progress_every: Duration::from_millis(a.progress_ms),
        address: a.address,
        pods: a.pods,
        groups: a.groups,
        cgroup_root: a.cgroup_root,
        log_root: a.log_root,
        ..KubeletOptions::default()
    };
    nthd_testkit::run_main("nthd-fake-kubelet", run(opts))
}
