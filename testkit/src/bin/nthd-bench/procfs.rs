//! What `/proc` says about one process: CPU (ticks and per-thread schedstat), threads, peak RSS.

#[derive(Clone, Debug, Default)]
pub(crate) struct ProcSample {
    /// utime + stime, clock ticks.
    pub own_ticks: u64,
    /// cutime + cstime (waited-for children), clock ticks.
    pub child_ticks: u64,
    /// Sum of every live thread's schedstat run time, ns.
    pub sched_ns: u64,
    pub tids: Vec<u64>,
}

impl ProcSample {
    /// utime + stime + cutime + cstime, clock ticks.
    pub(crate) fn ticks(&self) -> u64 {
        self.own_ticks + self.child_ticks
    }
}

/// Clock ticks per second (`_SC_CLK_TCK`), the unit of `/proc/PID/stat`'s times.
pub(crate) fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// `/proc/PID/stat` and every thread's `schedstat`, now.
pub(crate) fn sample(pid: i32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // After the comm field: state is index 0, utime 11, stime 12, cutime 13, cstime 14.
    let mut s = ProcSample {
        own_ticks: f.get(11)? + f.get(12)?,
        child_ticks: f.get(13)? + f.get(14)?,
        ..ProcSample::default()
    };
    for e in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        s.sched_ns += std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|ss| ss.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        s.tids.push(tid);
    }
    s.tids.sort_unstable();
    Some(s)
}

/// `VmHWM` in KiB.
pub(crate) fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}
