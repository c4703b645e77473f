//! The machine the bench runs on: kernel, CPU, load, and other programs' answers.

use std::process::{Command, Stdio};

/// A file's contents, trimmed; empty when it cannot be read.
pub(crate) fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The 1-, 5- and 15-minute load averages.
pub(crate) fn loadavg() -> (f64, f64, f64) {
    let s = read_trim("/proc/loadavg");
    let mut v = s.split_whitespace().map(|x| x.parse().unwrap_or(f64::NAN));
    let mut next = || v.next().unwrap_or(f64::NAN);
    (next(), next(), next())
}

pub(crate) fn cpu_model() -> String {
    read_trim("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or_else(|| "unknown".into(), |(_, v)| v.trim().to_string())
}

pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
}

pub(crate) fn kernel() -> String {
    read_trim("/proc/sys/kernel/osrelease")
}

/// A program's trimmed stdout when it succeeds.
pub(crate) fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
