//! Bad values in the environment: each costs its own setting, never nthd.
//!
//! The rule (docs/configuration.md, "When a setting is wrong"): a bad `NTHD_*` value is dropped,
//! with a warning naming it and what nthd uses instead, and nthd goes on protecting the node. It
//! never stops for one: a typo must never make it miss a spot notice. Where the default could
//! power off a node whose admin chose otherwise, the setting takes the choice that cannot
//! ([`crate::settings::SAFE_CHOICE`]: `log` for an action, `true` for the dry run) instead of
//! the default. Every fallback is reported for as long as nthd runs: the log, the status file
//! (`degraded`), `nthd status --npd`, `nthd check` and a metric. A flag typed on the command
//! line is a usage error as ever: whoever typed it is there to read the error.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, CommandFactory};

use super::Cli;
use crate::settings::safe_choice;

/// Every setting that could not be used as given: the bad values, the skipped lines of the
/// settings files and a named file that cannot be read. One entry each, in that order.
pub fn degraded(
    settings: &crate::settings::Loaded,
    fallbacks: &[Fallback],
) -> Vec<super::Degraded> {
    let entry = |setting: String, message: String| super::Degraded { setting, message };
    let bad = fallbacks
        .iter()
        .map(|f| entry(f.setting.clone(), f.to_string()));
    let skipped = settings.skipped.iter().map(|s| {
        let at = format!("{} line {}", s.path, s.line);
        entry(s.setting().map_or(at, str::to_string), s.to_string())
    });
    let lost = settings
        .lost
        .iter()
        .map(|(s, m)| entry(s.clone(), m.clone()));
    bad.chain(skipped).chain(lost).collect()
}

/// A bad value nthd does not use, and what it uses instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    /// The environment variable, e.g. `NTHD_LOG_LEVEL`.
    pub setting: String,
    /// The value as given, made safe for a log line (no setting that can hold a secret is ever
    /// a fallback: their parsers accept anything).
    pub value: String,
    /// Why it cannot be used.
    pub reason: String,
    /// What nthd uses instead.
    pub instead: String,
}

impl std::fmt::Display for Fallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}={:?} cannot be used ({}); nthd goes on with {} and keeps protecting the node. \
             Fix the value where it is set (/etc/default/nthd, /etc/sysconfig/nthd or a unit \
             drop-in) and restart nthd",
            self.setting, self.value, self.reason, self.instead
        )
    }
}

/// Parses the command line like [`clap::Parser::try_parse_from`], but a bad value that came
/// from an `NTHD_*` variable is replaced in the environment (by its safe choice, or its
/// default) and reported as a [`Fallback`] instead of failing the parse. Call before any
/// thread starts (it changes the environment).
pub fn parse_lenient(args: &[String]) -> Result<(Cli, Vec<Fallback>), clap::Error> {
    let mut fallbacks = Vec::new();
    loop {
        match <Cli as clap::Parser>::try_parse_from(args) {
            Ok(cli) => return Ok((cli, fallbacks)),
            Err(e) => match from_env(&e, args) {
                Some(fb) if !fallbacks.iter().any(|f: &Fallback| f.setting == fb.setting) => {
                    match safe_choice(&fb.setting) {
                        Some((value, _)) => std::env::set_var(&fb.setting, value),
                        None => std::env::remove_var(&fb.setting),
                    }
                    fallbacks.push(fb);
                }
                _ => return Err(e),
            },
        }
    }
}

/// The fallback for a parse error, when the bad value came from an `NTHD_*` variable.
fn from_env(e: &clap::Error, args: &[String]) -> Option<Fallback> {
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return None;
    }
    let Some(ContextValue::String(arg_shown)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg_shown.split([' ', '=']).next()?;
    let cmd = Cli::command();
    let arg = find_arg(&cmd, flag)?;
    let var = arg.get_env()?.to_str()?.to_string();
    if given_on_command_line(args, flag) {
        return None;
    }
    let value: OsString = std::env::var_os(&var)?;
    let instead = match safe_choice(&var) {
        Some((safe, why)) => {
            format!("{safe}, the choice that cannot power off (the default: {why})")
        }
        None => instead(arg, &var),
    };
    Some(Fallback {
        reason: reason(e),
        instead,
        value: shown(&value.to_string_lossy()),
        setting: var,
    })
}

/// A bad value as a log line may show it: a URL (which may carry a user name and password) as
/// its scheme, host and port only, anything else cleaned and cut.
fn shown(value: &str) -> String {
    if value.contains("://") {
        crate::redact::shown(value)
    } else {
        crate::logging::clean(value, 80)
    }
}

/// The argument shown as `--name` (global arguments live on the top-level command).
fn find_arg<'a>(cmd: &'a clap::Command, flag: &str) -> Option<&'a Arg> {
    let long = flag.strip_prefix("--")?;
    cmd.get_arguments().find(|a| a.get_long() == Some(long))
}

fn given_on_command_line(args: &[String], flag: &str) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == flag || a.strip_prefix(flag).is_some_and(|r| r.starts_with('=')))
}

/// Why clap refused the value, without its usage text.
fn reason(e: &clap::Error) -> String {
    if let Some(src) = std::error::Error::source(e) {
        return src.to_string();
    }
    match e.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => format!("use one of: {}", valid.join(", ")),
        _ => "not a valid value".to_string(),
    }
}

/// What nthd goes on with: the argument's default.
fn instead(arg: &Arg, var: &str) -> String {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    match (defaults.as_slice(), var) {
        ([], "NTHD_IMDS_ENDPOINT") => "the cloud's own endpoint".to_string(),
        ([], "NTHD_POLL_INTERVAL") => "the cloud's default (1s; 500ms on Azure)".to_string(),
        ([], "NTHD_ASG_ENDPOINT") => {
            "the regional endpoint (https://autoscaling.REGION.amazonaws.com)".to_string()
        }
        ([], "NTHD_ASG_GROUP") => "the group DescribeAutoScalingInstances names".to_string(),
        ([], "NTHD_ASG_LIFECYCLE_HOOK") => {
            "no hook, so NTHD_ASG_COMPLETE is off (no request to Auto Scaling)".to_string()
        }
        ([], _) => "its default (see nthd --help)".to_string(),
        (d, _) => format!("the default ({})", d.join(",")),
    }
}

/// `NTHD_*` variables in the environment that no setting reads: a misspelt name is as silent
/// as a missing one, so each is named once at start.
pub fn unknown_variables() -> Vec<String> {
    let cmd = Cli::command();
    let known: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_env()?.to_str().map(str::to_string))
        .collect();
    let mut unknown: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .filter(|k| k.starts_with("NTHD_") && !known.contains(k) && !INTERNAL.contains(&k.as_str()))
        .collect();
    unknown.sort();
    unknown
}

/// Variables of nthd's own build, packaging and test tools, not settings: a shell that builds
/// or tests nthd may have them set (`cargo run` sets the first two).
const INTERNAL: &[&str] = &[
    "NTHD_BUILD_TARGET",
    "NTHD_GIT_COMMIT",
    "NTHD_TESTKIT_DBUS_DAEMON",
    "NTHD_SIGNING_KEY",
    "NTHD_SIGNING_PASSPHRASE_FILE",
    "NTHD_SUITE_MIN_FREE_GB",
    "NTHD_APT_LOCK_WAIT",
    "NTHD_PACKAGE_PREBUILT",
    "NTHD_ADVISORY_DB",
    "NTHD_REQUIRE_ADVISORIES",
];
