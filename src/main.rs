//! The `nthd` binary: parse the command line, set up logging, run, print the error chain.

use std::process::ExitCode;

use clap::Parser;

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

/// The settings files read and the assignments skipped in them: to the log for the daemon, on
/// stderr for a command run by hand.
fn report_settings(settings: &nthd::Loaded, daemon: bool) {
    if let Some(line) = settings.describe() {
        if daemon {
            tracing::info!("{line}");
        } else {
            eprintln!("nthd: {line}");
        }
    }
    for skipped in &settings.skipped {
        if daemon {
            tracing::warn!("{skipped}");
        } else {
            eprintln!("nthd: warning: {skipped}");
        }
    }
}

fn main() -> ExitCode {
    // Before clap reads the environment: the packaged settings files, as the unit reads them.
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let settings = match nthd::load_into_env(&args) {
        Ok(s) => s,
        Err(e) => {
            if let Some(code) = status_anyway(&args) {
                return code;
            }
            eprintln!("nthd: {e}");
            return ExitCode::from(2);
        }
    };
    let cli = match nthd::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => match status_anyway(&args) {
            Some(code) if e.use_stderr() => return code,
            _ => e.exit(),
        },
    };
    let level = match nthd::log_level(&cli.opts.log_level) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("nthd: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(note) = nthd::init_logging(level, cli.opts.log_target) {
        tracing::warn!("{note}");
    }
    report_settings(
        &settings,
        matches!(cli.command, None | Some(nthd::Command::Run)),
    );
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
            // A bad setting gets its own status, which the unit does not restart on.
            match e.downcast_ref::<nthd::BadSetting>() {
                Some(_) => ExitCode::from(nthd::BAD_SETTING_EXIT),
                None => ExitCode::FAILURE,
            }
        }
    }
}
