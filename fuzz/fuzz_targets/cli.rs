//! `Cli::try_parse_from` on arbitrary argument vectors and NTHD_* environment values, then
//! `Options::policy()` and the other derived settings.
//!
//! Input: segments separated by NUL. A segment starting with 0x01 sets an environment
//! variable: its second byte picks one of the NTHD_* variables the CLI declares, the rest is the
//! value. Every other segment is one argument (raw bytes, so not necessarily UTF-8). The
//! variables are removed again after each run; libFuzzer runs the target on one thread.
//!
//! `Cli::try_parse_from(args)` is `Cli::command().try_get_matches_from(args)` followed by
//! `Cli::from_arg_matches_mut`. Building the `clap::Command` (40-odd global arguments copied
//! into every subcommand) does not depend on the input and took nearly all of the time, so the
//! target builds it once and parses with `try_get_matches_from_mut`, the same parser on the
//! same definition; a start-up check confirms both paths agree.
#![no_main]

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use libfuzzer_sys::fuzz_target;
use nthd::testing::config::Cli;
use nthd::testing::notice::KINDS;

fn env_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        // Whatever the fuzzer was started with must not leak into the runs.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("NTHD_") {
                std::env::remove_var(k);
            }
        }
        let mut names: Vec<String> = Cli::command()
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.dedup();
        assert!(!names.is_empty());
        names
    })
}

thread_local! {
    static COMMAND: RefCell<clap::Command> = RefCell::new({
        let mut cmd = Cli::command();
        cmd.build();
        for args in [
            &["nthd"][..],
            &["nthd", "once", "--json", "--action-rebalance", "poweroff"],
            &["nthd", "--poll-interval", "1ms"],
        ] {
            let cached = cmd
                .try_get_matches_from_mut(args)
                .and_then(|mut m| Cli::from_arg_matches_mut(&mut m));
            let fresh = Cli::try_parse_from(args);
            assert_eq!(
                format!("{cached:?}"),
                format!("{fresh:?}"),
                "cached command differs on {args:?}"
            );
        }
        cmd
    });
}

fn parse(args: &[OsString]) -> Result<Cli, clap::Error> {
    COMMAND.with(|c| {
        let mut m = c.borrow_mut().try_get_matches_from_mut(args)?;
        Cli::from_arg_matches_mut(&mut m)
    })
}

fuzz_target!(|data: &[u8]| {
    let names = env_names();
    let mut args: Vec<OsString> = vec!["nthd".into()];
    let mut set: Vec<&str> = Vec::new();
    if !data.is_empty() {
        for seg in data.split(|b| *b == 0) {
            match seg {
                [1, pick, value @ ..] => {
                    let name = names[usize::from(*pick) % names.len()].as_str();
                    std::env::set_var(name, OsStr::from_bytes(value));
                    set.push(name);
                }
                _ => args.push(OsStr::from_bytes(seg).to_owned()),
            }
        }
    }
    let result = parse(&args);
    for name in set {
        std::env::remove_var(name);
    }
    let cli = match result {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.render().to_string();
            return;
        }
    };
    let o = &cli.opts;
    let min = Duration::from_millis(100);
    for (flag, d) in [
        (
            "poll-interval",
            o.poll_interval_for(nthd::testing::notice::Cloud::Aws),
        ),
        (
            "poll-interval",
            o.poll_interval_for(nthd::testing::notice::Cloud::Azure),
        ),
        ("slow-poll-interval", o.slow_poll_interval),
        ("gcp-wait", o.gcp_wait),
        ("request-timeout", o.request_timeout),
        ("retry-delay", o.retry_delay),
    ] {
        assert!(d >= min, "--{flag} accepted {d:?}");
    }
    let p = o.policy();
    for k in KINDS {
        let want = o
            .actions
            .overrides
            .iter()
            .rev()
            .find(|(kind, _)| *kind == k.kind)
            .map_or(nthd::testing::policy::default_action(k.kind), |(_, a)| *a);
        assert_eq!(p.action(k.kind), want, "{}", k.name);
        assert_eq!(
            p.at_deadline(k.kind),
            o.deadline_kinds.0.contains(&k.kind),
            "{}",
            k.name
        );
    }
    assert_eq!(p.margin, o.safety_margin);
    assert_eq!(p.fallback_budget, o.fallback_drain_budget);
    assert_eq!(p.retry_delay, o.retry_delay);
    let c = o.client_options();
    assert!(c.connect_timeout <= c.request_timeout && c.connect_timeout <= Duration::from_secs(1));
    let _ = (o.provider.cloud(), o.metrics_options(), p.wants_reboot());
    let _ = format!("{cli:?}");
});
