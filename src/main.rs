//! The `nthd` binary: parse the command line, set up logging, run, print the error chain.

#![forbid(unsafe_code)]

use std::process::ExitCode;

/// On the static (musl) builds: musl's mallocng returns memory to the kernel around every few
/// metadata requests and takes it back (mmap, munmap, page faults); dlmalloc keeps it. See the
/// comment on the dependency in Cargo.toml for the measurement.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// `nthd status` (and the NPD plugin) when a setting it does not use is bad: it reads only
/// the status file, so it answers anyway.
fn status_anyway(args: &[String]) -> Option<ExitCode> {
    let (file, json, npd) = nthd::status_only(args)?;
    Some(nthd::status_command(&file, json, npd).unwrap_or(ExitCode::from(2)))
}

/// What was read and what was set aside at start: to the log for the daemon, on stderr for a
/// command run by hand.
fn report_settings(settings: &nthd::Loaded, fallbacks: &[nthd::Fallback], daemon: bool) {
    let warn = |line: &str| {
        if daemon {
            tracing::warn!("{line}");
        } else {
            eprintln!("nthd: warning: {line}");
        }
    };
    if let Some(line) = settings.describe() {
        if daemon {
            tracing::info!("{line}");
        } else {
            eprintln!("nthd: {line}");
        }
    }
    settings.skipped.iter().for_each(|s| warn(&s.to_string()));
    settings.unread.iter().for_each(|s| warn(s));
    settings.lost.iter().for_each(|(_, s)| warn(s));
    fallbacks.iter().for_each(|f| warn(&f.to_string()));
    for name in nthd::unknown_variables() {
        warn(&format!(
            "{name} is set but is no setting of nthd, so it does nothing; `nthd --help` lists \
             the NTHD_* variables"
        ));
    }
}

fn main() -> ExitCode {
    // Before clap reads the environment: the packaged settings files, as the unit reads them.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let command = nthd::command_name(&args);
    let unreadable = nthd::Unreadable::for_command(
        command.as_deref(),
        std::env::var_os("INVOCATION_ID").is_some(),
    );
    let settings = match nthd::load_into_env(&args, unreadable) {
        Ok(s) => s,
        Err(e) => {
            if let Some(code) = status_anyway(&args) {
                return code;
            }
            eprintln!("nthd: {e}");
            return ExitCode::from(nthd::BAD_SETTING_EXIT);
        }
    };
    // A bad value of a setting that may fall back is dropped here, with a warning below.
    let (mut cli, mut fallbacks) = match nthd::parse_lenient(&args) {
        Ok(c) => c,
        Err(e) => match status_anyway(&args) {
            Some(code) if e.use_stderr() => return code,
            _ => e.exit(),
        },
    };
    fallbacks.extend(cli.opts.validate());
    cli.opts.degraded = nthd::degraded(&settings, &fallbacks);
    if let Some(note) = nthd::init_logging(cli.opts.log_level, cli.opts.log_target) {
        tracing::warn!("{note}");
    }
    // `nthd status` reads only the status file: the settings are not its business.
    if !matches!(cli.command, Some(nthd::Command::Status { .. })) {
        report_settings(
            &settings,
            &fallbacks,
            matches!(cli.command, None | Some(nthd::Command::Run)),
        );
    }
    match nthd::run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Once: to the journal with its fields, or as one plain line on stderr.
            let chain: Vec<String> = e.chain().map(std::string::ToString::to_string).collect();
            if nthd::to_journald() {
                tracing::error!("{}", chain.join(": "));
            } else {
                eprintln!("nthd: {}", chain.join(": "));
            }
            ExitCode::FAILURE
        }
    }
}
