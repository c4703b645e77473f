//! `nthd-mock-imds`: the mock IMDS as a standalone server (for containers and manual tests).
//!
//! ```text
//! nthd-mock-imds --listen ADDR:PORT [--listen ADDR:PORT ...]
//!                [--routes FILE.json] [--config JSON|FILE.json] [--identity CLOUD ...] [--quiet]
//! ```
//!
//! `--routes` holds a JSON object `{ "/path": Response, ... }`; `--config` a (partial) Config
//! object, given inline (starting with `{`) or as a file. `--identity aws|gcp|azure|alibaba|
//! tencent` serves that cloud's instance id, type, zone and lifecycle with realistic values
//! (`nthd_testkit::imds::identity`); it is applied before `--routes`, which can override it. Prints
//! `nthd-mock-imds: listening on http://ADDR` per listener, then one line per request, to stderr.
//! Exits 0 on SIGTERM or SIGINT, 2 on bad usage, 1 if it cannot start.

use std::collections::BTreeMap;
use std::process::ExitCode;

use nthd_testkit::imds::{identity, Config, MockImds, Response};

const USAGE: &str = "usage: nthd-mock-imds --listen ADDR:PORT [--listen ADDR:PORT ...] \
[--routes FILE.json] [--config JSON|FILE.json] [--identity CLOUD ...] [--quiet]";

fn read_json_arg(v: &str) -> Result<serde_json::Value, String> {
    let text = if v.trim_start().starts_with('{') {
        v.to_string()
    } else {
        std::fs::read_to_string(v).map_err(|e| format!("cannot read {v}: {e}"))?
    };
    serde_json::from_str(&text).map_err(|e| format!("invalid JSON in {v}: {e}"))
}

fn main() -> ExitCode {
    let mut listen = Vec::new();
    let mut routes: BTreeMap<String, Response> = BTreeMap::new();
    let mut identity_routes: Vec<(String, Response)> = Vec::new();
    let mut config = Config::default();
    let mut quiet = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = || inline.clone().or_else(|| args.next());
        let result: Result<(), String> = match flag.as_str() {
            "--listen" => value()
                .map(|v| listen.push(v))
                .ok_or_else(|| "--listen needs a value".to_string()),
            "--routes" => match value() {
                None => Err("--routes needs a file".into()),
                Some(f) => read_json_arg(&f).and_then(|j| {
                    serde_json::from_value::<BTreeMap<String, Response>>(j)
                        .map(|m| routes.extend(m))
                        .map_err(|e| format!("invalid routes in {f}: {e}"))
                }),
            },
            "--config" => match value() {
                None => Err("--config needs a value".into()),
                Some(v) => read_json_arg(&v).and_then(|j| config.merge_json(&j)),
            },
            "--identity" => match value() {
                None => Err("--identity needs a cloud".into()),
                Some(c) => match identity::routes(&c) {
                    Some(r) => {
                        identity_routes.extend(r);
                        Ok(())
                    }
                    None => Err(format!(
                        "unknown --identity {c:?}; one of {}",
                        identity::CLOUDS.join(", ")
                    )),
                },
            },
            "--quiet" => {
                quiet = true;
                Ok(())
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => Err(format!("unknown argument {other:?}")),
        };
        if let Err(e) = result {
            eprintln!("nthd-mock-imds: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    if listen.is_empty() {
        eprintln!("nthd-mock-imds: at least one --listen is required\n{USAGE}");
        return ExitCode::from(2);
    }

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nthd-mock-imds: cannot start runtime: {e}");
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
                eprintln!("nthd-mock-imds: cannot install signal handlers: {e}");
                return ExitCode::from(1);
            }
        };
        let mut b = MockImds::builder()
            .config(config)
            .routes(identity_routes)
            .routes(routes)
            .log_to_stderr(!quiet);
        for l in listen {
            b = b.listen(l);
        }
        let mock = match b.start().await {
            Ok(m) => m,
            Err(e) => {
                eprintln!("nthd-mock-imds: {e}");
                return ExitCode::from(1);
            }
        };
        for a in mock.addrs() {
            eprintln!("nthd-mock-imds: listening on http://{a}");
        }
        tokio::select! {
            _ = term.recv() => eprintln!("nthd-mock-imds: SIGTERM, exiting"),
            _ = int.recv() => eprintln!("nthd-mock-imds: SIGINT, exiting"),
        }
        drop(mock);
        ExitCode::SUCCESS
    })
}
