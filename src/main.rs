//! The `nthd` binary: parse the command line, set up logging, run, print the error chain.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = nthd::config::Cli::parse();
    let level = match nthd::logging::level(&cli.opts.log_level) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("nthd: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(note) = nthd::logging::init(level, cli.opts.log_target) {
        tracing::warn!("{note}");
    }
    match nthd::run(cli) {
        Ok(code) => code,
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            tracing::error!("{}", chain.join(": "));
            eprintln!("nthd: {}", chain.join(": "));
            ExitCode::FAILURE
        }
    }
}
