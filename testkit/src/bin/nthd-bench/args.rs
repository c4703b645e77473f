//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// The flags as given; [`Args`] fills in the defaults of a full or a smoke run.
#[derive(Parser)]
#[command(
    name = "nthd-bench",
    about = "nthd's benchmark: detection latency, idle cost, start-up"
)]
struct Flags {
    /// A short run (CI): fewer trials, a 10 s idle window, results under bench/results/smoke.
    #[arg(long)]
    smoke: bool,
    /// Exit 3 when something could not be measured.
    #[arg(long)]
    check: bool,
    /// Latency trials per case (default 200; smoke 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    trials: Option<u64>,
    /// Trials run at once (default 12; smoke 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: Option<u64>,
    /// The idle window in seconds (default 120; smoke 10).
    #[arg(long, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    idle_secs: Option<u64>,
    /// Start-up runs (default 50; smoke 20).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    starts: Option<u64>,
    /// Only these cases.
    #[arg(long, value_name = "ID,ID,...", value_delimiter = ',')]
    cases: Option<Vec<String>>,
    /// The random seed (default: the time).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// The nthd binary (default: `nthd` beside this one, else target/release/nthd).
    #[arg(long, value_name = "PATH")]
    nthd: Option<PathBuf>,
    /// Where the report goes (default bench/results; smoke bench/results/smoke).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The result of `bench/real-idle.sh` (the packaged unit on a booted Debian), to report
    /// next to the in-process idle cost.
    #[arg(long, value_name = "FILE.json")]
    real_idle: Option<PathBuf>,
}

#[derive(Clone, Debug)]
pub(crate) struct Args {
    pub smoke: bool,
    pub check: bool,
    pub trials: usize,
    pub concurrency: usize,
    pub idle: Duration,
    pub starts: usize,
    pub cases: Option<Vec<String>>,
    pub seed: u64,
    pub nthd: PathBuf,
    pub out: PathBuf,
    /// The result of `bench/real-idle.sh` (the packaged unit on a booted Debian), to report
    /// next to the in-process idle cost.
    pub real_idle: Option<PathBuf>,
}

/// `n`, or the full run's or the smoke run's default.
fn or(n: Option<u64>, smoke: bool, full: u64, short: u64) -> u64 {
    n.unwrap_or(if smoke { short } else { full })
}

/// Parses `std::env::args()`; clap prints the usage and exits 2 on a bad flag.
pub(crate) fn parse_args() -> Args {
    let f = Flags::parse();
    let s = f.smoke;
    let default_nthd = || {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("nthd")))
            .unwrap_or_else(|| PathBuf::from("target/release/nthd"))
    };
    let default_out = if s {
        "bench/results/smoke"
    } else {
        "bench/results"
    };
    Args {
        smoke: s,
        check: f.check,
        trials: or(f.trials, s, 200, 8) as usize,
        concurrency: or(f.concurrency, s, 12, 8) as usize,
        idle: Duration::from_secs(or(f.idle_secs, s, 120, 10)),
        starts: or(f.starts, s, 50, 20) as usize,
        cases: f.cases.map(|c| {
            c.into_iter()
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect()
        }),
        seed: f.seed.unwrap_or_else(|| nthd_testkit::now_ms().max(1)),
        nthd: f.nthd.unwrap_or_else(default_nthd),
        out: f.out.unwrap_or_else(|| PathBuf::from(default_out)),
        real_idle: f.real_idle,
    }
}
