//! The man page and shell completions, generated from the clap definition so they can never
//! describe flags that do not exist. Packaging ships the copies committed in
//! `packaging/assets/`; a test fails when they drift from the code.

use std::path::Path;

use clap::CommandFactory;

use crate::config::Cli;

/// (file name, contents) of every generated asset.
pub fn render() -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
    let mut out = Vec::new();
    // The plain version: the man page and completions must not change with each commit.
    let cmd = Cli::command().long_version(None::<&str>);
    let mut man = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .section("8")
        .manual("System Administration")
        .source(concat!("nthd ", env!("CARGO_PKG_VERSION")))
        .render(&mut man)?;
    man.extend_from_slice(extra_sections(&cmd).as_bytes());
    out.push(("nthd.8", man));
    for (name, shell) in [
        ("nthd.bash", clap_complete::Shell::Bash),
        ("_nthd", clap_complete::Shell::Zsh),
        ("nthd.fish", clap_complete::Shell::Fish),
    ] {
        let mut buf = Vec::new();
        let mut c = cmd.clone();
        clap_complete::generate(shell, &mut c, "nthd", &mut buf);
        out.push((name, buf));
    }
    Ok(out)
}

/// Writes every asset into `dir`.
pub(crate) fn write_all(dir: &Path) -> anyhow::Result<Vec<String>> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, body) in render()? {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
        written.push(p.display().to_string());
    }
    Ok(written)
}

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}

/// ENVIRONMENT (every flag's NTHD_* variable), FILES and EXIT STATUS.
fn extra_sections(cmd: &clap::Command) -> String {
    let mut o = String::from(".SH ENVIRONMENT\n");
    for a in cmd.get_arguments() {
        let (Some(env), Some(long)) = (a.get_env(), a.get_long()) else {
            continue;
        };
        o.push_str(&format!(
            ".TP\n\\fB{}\\fR\nSame as \\fB\\-\\-{}\\fR.\n",
            roff_escape(&env.to_string_lossy()),
            roff_escape(long)
        ));
    }
    o.push_str(
        ".SH FILES\n.TP\n/etc/default/nthd, /etc/sysconfig/nthd\nSettings read by the packaged unit, as NTHD_* variables.\n\
         .TP\n/var/lib/nthd/state.json\nWhat nthd acted on, so it acts once across restarts.\n\
         .TP\n/usr/share/polkit\\-1/rules.d/50\\-nthd.rules\nThe polkit rule that lets user nthd power off.\n\
         .SH EXIT STATUS\n\\fBnthd run\\fR exits 0 on SIGTERM and never on a transient fault. It exits 2 \
         only for a bad value of a setting whose fallback could power off a node that should not \
         be (NTHD_ACTION_*, NTHD_DRY_RUN, NTHD_DEADLINE_KINDS, NTHD_SETTINGS_FILE); any other bad \
         value falls back to its default with a warning. \\fBnthd once\\fR \
         exits 0 when the metadata service answered and 1 when it did not.\n\
         .SH SEE ALSO\n\\fBsystemd\\-logind\\fR(8), \\fBlogind.conf\\fR(5), \\fBpolkit\\fR(8), \\fBkubelet\\fR(1)\n",
    );
    o
}
