//! The command line.

use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str =
    "usage: nthd-bench [--smoke] [--check] [--trials N] [--concurrency N] [--idle-secs S] \
[--starts N] [--cases ID,ID,...] [--seed N] [--nthd PATH] [--out DIR] [--real-idle FILE.json]";

#[derive(Clone, Debug)]
pub struct Args {
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

impl Args {
    /// The defaults of a full run, or of a smoke run.
    fn defaults(smoke: bool) -> Args {
        let default_nthd = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("nthd")))
            .unwrap_or_else(|| PathBuf::from("target/release/nthd"));
        Args {
            smoke,
            check: false,
            trials: if smoke { 8 } else { 200 },
            concurrency: if smoke { 8 } else { 12 },
            idle: Duration::from_secs(if smoke { 10 } else { 120 }),
            starts: if smoke { 20 } else { 50 },
            cases: None,
            seed: nthd_testkit::now_ms().max(1),
            nthd: default_nthd,
            out: PathBuf::from(if smoke {
                "bench/results/smoke"
            } else {
                "bench/results"
            }),
            real_idle: None,
        }
    }
}

fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{flag}: `{v}` is not a valid number"))
}

/// Parses `std::env::args()`. `Err("")` asks for the usage alone (`--help`).
pub fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args::defaults(argv.iter().any(|a| a == "--smoke"));
    let mut it = argv.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--smoke" => {}
            "--check" => a.check = true,
            "--trials" => a.trials = num(&flag, value()?)?,
            "--concurrency" => a.concurrency = num(&flag, value()?)?,
            "--idle-secs" => a.idle = Duration::from_secs(num(&flag, value()?)?),
            "--starts" => a.starts = num(&flag, value()?)?,
            "--seed" => a.seed = num(&flag, value()?)?,
            "--cases" => a.cases = Some(split_list(&value()?)),
            "--nthd" => a.nthd = PathBuf::from(value()?),
            "--out" => a.out = PathBuf::from(value()?),
            "--real-idle" => a.real_idle = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if a.trials == 0 || a.concurrency == 0 || a.starts == 0 || a.idle.is_zero() {
        return Err("--trials, --concurrency, --starts and --idle-secs must be positive".into());
    }
    Ok(a)
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}
