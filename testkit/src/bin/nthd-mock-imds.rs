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
//! Exits 0 on SIGTERM or SIGINT, 2 on bad usage, 1 if it cannot start. `--help` lists the flags.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Parser;
use nthd_testkit::imds::{identity, Config, MockImds, Response};

/// The mock IMDS as a standalone server.
#[derive(Parser)]
#[command(name = "nthd-mock-imds")]
struct Args {
    /// Address to listen on (repeatable).
    #[arg(long, value_name = "ADDR:PORT", required = true)]
    listen: Vec<String>,
    /// A JSON object `{ "/path": Response, ... }` in a file (repeatable).
    #[arg(long, value_name = "FILE.json")]
    routes: Vec<String>,
    /// A (partial) Config object, inline (starting with `{`) or in a file (repeatable).
    #[arg(long, value_name = "JSON|FILE.json")]
    config: Vec<String>,
    /// Serve this cloud's instance id, type, zone and lifecycle (repeatable).
    #[arg(long, value_name = "CLOUD", value_parser = clap::builder::PossibleValuesParser::new(identity::CLOUDS.iter().copied()))]
    identity: Vec<String>,
    /// Do not log each request to stderr.
    #[arg(long)]
    quiet: bool,
}

fn read_json_arg(v: &str) -> Result<serde_json::Value, String> {
    let text = if v.trim_start().starts_with('{') {
        v.to_string()
    } else {
        std::fs::read_to_string(v).map_err(|e| format!("cannot read {v}: {e}"))?
    };
    serde_json::from_str(&text).map_err(|e| format!("invalid JSON in {v}: {e}"))
}

/// The routes and config the flags name, in the order the mock applies them.
type Setup = (Vec<(String, Response)>, BTreeMap<String, Response>, Config);

fn setup(a: &Args) -> Result<Setup, String> {
    let mut identity_routes = Vec::new();
    for c in &a.identity {
        identity_routes
            .extend(identity::routes(c).ok_or_else(|| format!("unknown --identity {c:?}"))?);
    }
    let mut routes = BTreeMap::new();
    for f in &a.routes {
        let m: BTreeMap<String, Response> = serde_json::from_value(read_json_arg(f)?)
            .map_err(|e| format!("invalid routes in {f}: {e}"))?;
        routes.extend(m);
    }
    let mut config = Config::default();
    for c in &a.config {
        config.merge_json(&read_json_arg(c)?)?;
    }
    Ok((identity_routes, routes, config))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let setup = match setup(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nthd-mock-imds: {e}");
            return ExitCode::from(2);
        }
    };
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
    rt.block_on(serve(args.listen, args.quiet, setup))
}

/// Serve on `listen` until SIGTERM or SIGINT.
async fn serve(listen: Vec<String>, quiet: bool, setup: Setup) -> ExitCode {
    use tokio::signal::unix::{signal, SignalKind};
    let (identity_routes, routes, config) = setup;
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
}
