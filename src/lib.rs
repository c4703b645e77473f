#![warn(missing_docs, unreachable_pub)]
//! nthd, the node termination handler daemon.
//!
//! It watches the cloud's instance metadata service for interruption notices and asks
//! systemd-logind over D-Bus to power off (or reboot), so kubelet's Graceful Node Shutdown, which
//! holds a logind delay inhibitor lock, drains the node before the machine goes down.

pub mod assets;
pub(crate) mod check;
pub mod config;
pub(crate) mod daemon;
pub(crate) mod executor;
pub(crate) mod extras;
pub mod imds;
pub mod logging;
pub mod logind;
pub(crate) mod metrics;
pub mod notice;
pub(crate) mod once;
pub mod policy;
pub mod provider;
pub(crate) mod report;
pub mod sandbox;
pub mod settings;
pub(crate) mod simulate;
pub mod state;
pub mod status;
pub mod timefmt;
pub(crate) mod timer;
pub mod webhook;

use std::process::ExitCode;

use config::{Cli, Command};

/// `nthd status [--json | --npd]` on `path` (see [`status`]).
pub fn status_command(path: &std::path::Path, json: bool, npd: bool) -> anyhow::Result<ExitCode> {
    status::command::status_command(path, json, npd)
}

/// Runs the command the CLI asked for.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let command = cli.command.clone().unwrap_or(Command::Run);
    // `status` only reads a file: a bad NTHD_* value elsewhere must not hide it.
    if !matches!(
        command,
        Command::GenerateAssets { .. } | Command::Status { .. }
    ) {
        cli.opts.validate()?;
    }
    match command {
        Command::Run => {
            rt.block_on(daemon::run(cli.opts))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Once { json } => rt.block_on(once::once(&cli.opts, json)),
        Command::Check { json, root } => rt.block_on(check::check_command(&cli.opts, json, &root)),
        Command::Simulate {
            kind,
            yes,
            deadline_in,
        } => rt.block_on(simulate::simulate(&cli.opts, kind, yes, deadline_in)),
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
