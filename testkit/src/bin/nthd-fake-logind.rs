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

use nthd_testkit::logind::FakeLogind;
use nthd_testkit::{now_ms, unix_ms};
use serde_json::json;

const USAGE: &str =
    "usage: nthd-fake-logind [--address ADDR] [--can-power-off yes|no|challenge|na] \
[--power-off-error NAME[:MESSAGE]] [--inhibit-delay-max-secs N]";

fn emit(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn main() -> ExitCode {
    let mut address = None;
    let mut can_power_off = None;
    let mut power_off_error: Option<(String, String)> = None;
    let mut delay_max = None;
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
            eprintln!("nthd-fake-logind: {flag} needs a value\n{USAGE}");
            return ExitCode::from(2);
        };
        match flag.as_str() {
            "--address" => address = Some(v),
            "--can-power-off" => can_power_off = Some(v),
            "--power-off-error" => {
                let (n, m) = v
                    .split_once(':')
                    .unwrap_or((v.as_str(), "denied by nthd-fake-logind"));
                if zbus::names::ErrorName::try_from(n).is_err() {
                    eprintln!("nthd-fake-logind: invalid D-Bus error name {n:?}");
                    return ExitCode::from(2);
                }
                power_off_error = Some((n.to_string(), m.to_string()));
            }
            "--inhibit-delay-max-secs" => match v.parse::<f64>() {
                Ok(s) if s >= 0.0 && s.is_finite() => delay_max = Some(Duration::from_secs_f64(s)),
                _ => {
                    eprintln!("nthd-fake-logind: bad --inhibit-delay-max-secs {v:?}");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("nthd-fake-logind: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let address = address
        .or_else(|| std::env::var("DBUS_SYSTEM_BUS_ADDRESS").ok())
        .unwrap_or_else(|| "unix:path=/run/dbus/system_bus_socket".to_string());

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nthd-fake-logind: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (mut term, mut int) = match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(t), Ok(i)) => (t, i),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("nthd-fake-logind: cannot install signal handlers: {e}");
                return ExitCode::from(1);
            }
        };
        let fake = match FakeLogind::serve(&address).await {
            Ok(f) => f,
            Err(e) => {
                eprintln!(
                    "nthd-fake-logind: cannot serve org.freedesktop.login1 on {address}: {e} \
                     (is a real systemd-logind running on that bus?)"
                );
                return ExitCode::from(1);
            }
        };
        if let Some(v) = &can_power_off {
            fake.set_can_power_off(v);
        }
        if let Some((n, m)) = &power_off_error {
            fake.set_power_off_error(Some((n, m)));
        }
        if let Some(d) = delay_max {
            fake.set_inhibit_delay_max(d);
        }
        emit(json!({ "event": "ready", "t_ms": now_ms(), "address": address, "pid": std::process::id() }));

        let mut changes = fake.subscribe();
        let mut calls_done = 0;
        let mut shutdowns_done = 0;
        let mut known: BTreeMap<u64, nthd_testkit::logind::Inhibitor> = BTreeMap::new();
        loop {
            let calls = fake.calls();
            for c in &calls[calls_done.min(calls.len())..] {
                emit(c.to_json());
            }
            calls_done = calls.len();
            let now: BTreeMap<u64, _> = fake.inhibitors().into_iter().map(|i| (i.id, i)).collect();
            for (id, i) in &now {
                if !known.contains_key(id) {
                    emit(json!({
                        "event": "inhibitor_added", "t_ms": unix_ms(i.taken_at), "id": id,
                        "what": i.what, "who": i.who, "why": i.why, "mode": i.mode,
                        "uid": i.uid, "pid": i.pid,
                    }));
                }
            }
            for (id, i) in &known {
                if !now.contains_key(id) {
                    emit(json!({ "event": "inhibitor_removed", "t_ms": now_ms(), "id": id, "who": i.who }));
                }
            }
            known = now;
            let shutdowns = fake.shutdowns();
            for s in &shutdowns[shutdowns_done.min(shutdowns.len())..] {
                emit(s.to_json());
            }
            shutdowns_done = shutdowns.len();

            tokio::select! {
                r = changes.changed() => if r.is_err() { break },
                _ = term.recv() => break,
                _ = int.recv() => break,
            }
        }
        let _ = fake.stop().await;
        emit(json!({ "event": "exit", "t_ms": now_ms() }));
        ExitCode::SUCCESS
    })
}
