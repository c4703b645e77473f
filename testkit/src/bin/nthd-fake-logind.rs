//! `nthd-fake-logind`: the fake logind as a standalone service.
//!
//! ```text
//! nthd-fake-logind [--address ADDR] [--can-power-off yes|no|challenge|na]
//!                  [--power-off-error NAME[:MESSAGE]] [--inhibit-delay-max-secs N]
//! ```
//!
//! The bus is `--address`, else `$DBUS_SYSTEM_BUS_ADDRESS`, else the system bus socket.
//! Prints JSON lines to stdout: `{"event":"ready",...}`, then one `{"event":"call",...}` per
//! method call, `inhibitor_added`/`inhibitor_removed`, and `{"event":"shutdown",...}` when a
//! requested shutdown gets past its delay. Every line has `t_ms` (Unix milliseconds).
//! Exits 0 on SIGTERM/SIGINT, 2 on bad usage, 1 if it cannot get on the bus.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use nthd_testkit::logind::{FakeLogind, Inhibitor};
use nthd_testkit::{now_ms, unix_ms};
use serde_json::json;
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The fake logind as a standalone service.
#[derive(Parser)]
#[command(name = "nthd-fake-logind")]
struct Args {
    /// The bus (default: `$DBUS_SYSTEM_BUS_ADDRESS`, else the system bus socket).
    #[arg(
        long,
        value_name = "ADDR",
        env = "DBUS_SYSTEM_BUS_ADDRESS",
        default_value = "unix:path=/run/dbus/system_bus_socket"
    )]
    address: String,
    /// What `CanPowerOff` answers.
    #[arg(long, value_name = "yes|no|challenge|na")]
    can_power_off: Option<String>,
    /// Make `PowerOff` fail with this D-Bus error.
    #[arg(long, value_name = "NAME[:MESSAGE]", value_parser = error_arg)]
    power_off_error: Option<(String, String)>,
    /// `InhibitDelayMaxUSec`, in seconds (fractions allowed).
    #[arg(long, value_name = "N", value_parser = secs)]
    inhibit_delay_max_secs: Option<Duration>,
}

/// `NAME[:MESSAGE]`, NAME a valid D-Bus error name.
fn error_arg(v: &str) -> Result<(String, String), String> {
    let (n, m) = v
        .split_once(':')
        .unwrap_or((v, "denied by nthd-fake-logind"));
    zbus::names::ErrorName::try_from(n).map_err(|_| format!("invalid D-Bus error name {n:?}"))?;
    Ok((n.to_string(), m.to_string()))
}

/// A non-negative, finite number of seconds.
fn secs(v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(s) if s >= 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{v:?} is not a non-negative number of seconds")),
    }
}

fn emit(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn main() -> ExitCode {
    nthd_testkit::run_main("nthd-fake-logind", serve(Args::parse()))
}

/// Serves logind on the bus and reports what happens until SIGTERM or SIGINT.
async fn serve(args: Args) -> Result<(), String> {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    let (term, int) = term
        .and_then(|t| int.map(|i| (t, i)))
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let fake = FakeLogind::serve(&args.address).await.map_err(|e| {
        format!(
            "cannot serve org.freedesktop.login1 on {}: {e} (is a real systemd-logind running \
             on that bus?)",
            args.address
        )
    })?;
    if let Some(v) = &args.can_power_off {
        fake.set_can_power_off(v);
    }
    if let Some((n, m)) = &args.power_off_error {
        fake.set_power_off_error(Some((n, m)));
    }
    if let Some(d) = args.inhibit_delay_max_secs {
        fake.set_inhibit_delay_max(d);
    }
    emit(
        json!({ "event": "ready", "t_ms": now_ms(), "address": args.address, "pid": std::process::id() }),
    );
    report(&fake, term, int).await;
    let _ = fake.stop().await;
    emit(json!({ "event": "exit", "t_ms": now_ms() }));
    Ok(())
}

/// What has been emitted so far.
#[derive(Default)]
struct Seen {
    calls: usize,
    shutdowns: usize,
    inhibitors: BTreeMap<u64, Inhibitor>,
}

/// One JSON line per call, inhibitor change and shutdown, as they happen.
async fn report(fake: &FakeLogind, mut term: Signal, mut int: Signal) {
    let mut changes = fake.subscribe();
    let mut seen = Seen::default();
    loop {
        emit_new(fake, &mut seen);
        tokio::select! {
            r = changes.changed() => if r.is_err() { break },
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
}

fn emit_new(fake: &FakeLogind, seen: &mut Seen) {
    let calls = fake.calls();
    for c in &calls[seen.calls.min(calls.len())..] {
        emit(c.to_json());
    }
    seen.calls = calls.len();
    let now: BTreeMap<u64, _> = fake.inhibitors().into_iter().map(|i| (i.id, i)).collect();
    for (id, i) in now
        .iter()
        .filter(|(id, _)| !seen.inhibitors.contains_key(id))
    {
        emit(json!({
            "event": "inhibitor_added", "t_ms": unix_ms(i.taken_at), "id": id,
            "what": i.what, "who": i.who, "why": i.why, "mode": i.mode,
            "uid": i.uid, "pid": i.pid,
        }));
    }
    for (id, i) in seen
        .inhibitors
        .iter()
        .filter(|(id, _)| !now.contains_key(id))
    {
        emit(json!({ "event": "inhibitor_removed", "t_ms": now_ms(), "id": id, "who": i.who }));
    }
    seen.inhibitors = now;
    let shutdowns = fake.shutdowns();
    for s in &shutdowns[seen.shutdowns.min(shutdowns.len())..] {
        emit(s.to_json());
    }
    seen.shutdowns = shutdowns.len();
}
