#![warn(missing_docs, unreachable_pub)]
// Every system call nthd makes itself goes through rustix or std (docs/architecture.md).
#![forbid(unsafe_code)]
//! nthd, the node termination handler daemon.
//!
//! It watches the cloud's instance metadata service for interruption notices and asks
//! systemd-logind over D-Bus to power off (or reboot), so kubelet's Graceful Node Shutdown, which
//! holds a logind delay inhibitor lock, drains the node before the machine goes down.

pub(crate) mod asg;
pub(crate) mod assets;
pub(crate) mod check;
pub(crate) mod config;
pub(crate) mod daemon;
pub(crate) mod drain;
pub(crate) mod executor;
pub(crate) mod extras;
pub(crate) mod files;
pub(crate) mod https;
pub(crate) mod imds;
pub(crate) mod logging;
pub(crate) mod logind;
pub(crate) mod metrics;
pub(crate) mod notice;
pub(crate) mod once;
pub(crate) mod policy;
pub(crate) mod provider;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod sandbox;
pub(crate) mod settings;
pub(crate) mod simulate;
pub(crate) mod state;
pub(crate) mod status;
pub(crate) mod timefmt;
pub(crate) mod timer;
pub(crate) mod timings;
pub(crate) mod varlink;
pub(crate) mod webhook;

#[doc(hidden)]
pub mod testing;

/// What `src/main.rs` needs: the command line, the settings file and the logger.
pub use config::{
    command_name, degraded, parse_lenient, status_only, unknown_variables, Cli, Command, Degraded,
    Fallback, BAD_SETTING_EXIT,
};
pub use logging::{init as init_logging, to_journald};
pub use settings::{load_into_env, Loaded, Unreadable, SAFE_CHOICE};
pub use status::command::NpdCondition;

use std::process::ExitCode;

/// `nthd status [--json | --npd]` on `path` (see [`status`]).
pub fn status_command(
    path: &std::path::Path,
    json: bool,
    npd: Option<NpdCondition>,
) -> anyhow::Result<ExitCode> {
    status::command::status_command(path, json, npd)
}

/// Runs a command on `rt`, then leaves the runtime without waiting long for what the command
/// left running: a metadata read on the blocking pool that the command no longer needs (a GCP
/// long-poll waits up to a minute) ends at its own deadline, after nthd has gone. A state write
/// still under way gets two seconds.
fn finish<F: std::future::Future>(rt: tokio::runtime::Runtime, command: F) -> F::Output {
    let out = rt.block_on(command);
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    out
}

/// Runs the command the CLI asked for.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let command = cli.command.clone().unwrap_or(Command::Run);
    match command {
        Command::Run => {
            // A task, not block_on's own future: on the current-thread runtime, a task that
            // wakes block_on's future (the metadata watcher, with every observation) makes the
            // runtime poll epoll once more before it runs it; a task woken by a task is only
            // queued (docs/performance.md, "CPU per metadata request").
            rt.block_on(async { tokio::spawn(daemon::run(cli.opts)).await })??;
            Ok(ExitCode::SUCCESS)
        }
        Command::Once { json } => finish(rt, once::once(&cli.opts, json)),
        Command::Check { json, root } => finish(rt, check::check_command(&cli.opts, json, &root)),
        Command::Simulate {
            kind,
            yes,
            deadline_in,
        } => finish(rt, simulate::simulate(&cli.opts, kind, yes, deadline_in)),
        Command::Status { json, npd } => {
            status::command::status_command(&cli.opts.status_path(), json, npd)
        }
        Command::GenerateAssets { out } => {
            for p in assets::write_all(&out)? {
                println!("{p}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
