//! A local user's program that holds many delay inhibitor locks on `shutdown`, as any user may
//! (logind allows `inhibit-delay-shutdown` to anyone, up to its `InhibitorsMax`, 8192 by
//! default), until it is stopped:
//!
//! nthd-many-locks --count N [--who NAME] [--address ADDR]
//!
//! Each lock is `Inhibit("shutdown", "NAME-I", "held by nthd-many-locks", "delay")`, I from 0,
//! so logind lists N holders. Prints `holding N delay locks` once it has them all, then waits
//! for SIGTERM or SIGINT. The e2e's `many-locks` scenario runs it as user `nobody`.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool's own output

use std::process::ExitCode;

use clap::Parser;

/// Holds many delay locks on shutdown.
#[derive(Parser)]
#[command(name = "nthd-many-locks")]
struct Args {
    /// How many locks to take.
    #[arg(long, value_name = "N")]
    count: usize,
    /// The name each lock's `who` starts with.
    #[arg(long, value_name = "NAME", default_value = "neighbour")]
    who: String,
    /// The bus address (default: `$DBUS_SYSTEM_BUS_ADDRESS` or the system bus socket).
    #[arg(long, value_name = "ADDR")]
    address: Option<String>,
}

fn main() -> ExitCode {
    nthd_testkit::run_main("nthd-many-locks", hold(Args::parse()))
}

async fn hold(a: Args) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
    let (_conn, proxy) = nthd_testkit::kubelet::connect(a.address.as_deref()).await?;
    let mut held = Vec::with_capacity(a.count);
    for i in 0..a.count {
        let who = format!("{}-{i}", a.who);
        let fd = proxy
            .inhibit("shutdown", &who, "held by nthd-many-locks", "delay")
            .await
            .map_err(|e| {
                format!(
                    "Inhibit(shutdown, {who}, delay), lock {} of {}: {e}",
                    i + 1,
                    a.count
                )
            })?;
        held.push(fd);
    }
    println!("holding {} delay locks", held.len());
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
