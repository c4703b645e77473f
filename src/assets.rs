//! The man pages and shell completions, generated from the clap definition so they can never
//! describe flags that do not exist: nthd(8) and one page per subcommand (nthd-run(8),
//! nthd-status(8), ...). Packaging ships the copies committed in `packaging/assets/`; a test
//! fails when they drift from the code.

use std::path::Path;

use clap::CommandFactory;

use crate::config::Cli;

/// What clap cannot know about a command: its exit statuses and the files it uses (roff).
struct Page {
    /// The subcommand, or `None` for nthd(8) itself.
    sub: Option<&'static str>,
    exit: &'static str,
    /// Whether a bad setting stops it (every command but `status`, which reads only its file).
    fatal: bool,
    files: &'static [&'static str],
}

/// The settings files, as the packaged unit reads them (src/settings.rs, `PACKAGED`).
const SETTINGS: &str =
    ".TP\n/etc/default/nthd, /etc/sysconfig/nthd\nSettings read by the packaged unit \
     (and by nthd itself unless NTHD_SETTINGS_FILE says otherwise), as NTHD_* variables.\n";
/// The state file (src/state.rs; the directory from `Options::state_dir`).
const STATE: &str = ".TP\n/var/lib/nthd/state.json\nWhat nthd acted on, so it acts once across \
     restarts (the directory is NTHD_STATE_DIR, or systemd's StateDirectory=).\n";
/// The status file (src/status.rs, `DEFAULT_PATH`).
const STATUS: &str = ".TP\n/run/nthd/status.json\nWhat the daemon knows, rewritten as it runs; \
     read by \\fBnthd status\\fR (the path is NTHD_STATUS_FILE, or status.json in systemd's \
     RuntimeDirectory=).\n";
/// The polkit rule the packages install.
const POLKIT: &str = ".TP\n/usr/share/polkit\\-1/rules.d/50\\-nthd.rules\nThe polkit rule that \
     lets user nthd power off.\n";
/// Every command's exit 2 when a setting whose fallback could power off the wrong node is bad.
const BAD_SETTING: &str = "It exits 2 for a usage error, and for a bad value of a setting whose \
     fallback could power off a node that should not be (NTHD_ACTION_*, NTHD_DRY_RUN, \
     NTHD_DEADLINE_KINDS, NTHD_SETTINGS_FILE); any other bad value falls back to its default \
     with a warning.";

const PAGES: &[Page] = &[
    Page {
        sub: None,
        exit: "Without a subcommand nthd runs the daemon, as \\fBnthd run\\fR: 0 on SIGTERM; \
               never on a transient fault; 1 when it cannot go on (the reason is logged). Each \
               subcommand's page gives its own exit statuses.",
        fatal: true,
        files: &[SETTINGS, STATE, STATUS, POLKIT],
    },
    Page {
        sub: Some("run"),
        exit: "0 on SIGTERM; never on a transient fault. 1 when it cannot go on (the reason is \
               logged).",
        fatal: true,
        files: &[SETTINGS, STATE, STATUS, POLKIT],
    },
    Page {
        sub: Some("once"),
        exit: "0 when the metadata service answered, 1 when it did not.",
        fatal: true,
        files: &[SETTINGS],
    },
    Page {
        sub: Some("check"),
        exit: "0 when every required check passes; 1 when a required check failed or could not \
               be run.",
        fatal: true,
        files: &[SETTINGS, POLKIT],
    },
    Page {
        sub: Some("simulate"),
        exit: "0 when the drill was narrated (without \\fB\\-\\-yes\\fR), carried out, reported \
               as a dry run, or stood down because logind already prepares a shutdown, or when \
               the policy has nothing to carry out; 1 when it was not confirmed or logind \
               refused the call.",
        fatal: true,
        files: &[SETTINGS, STATE, POLKIT],
    },
    Page {
        sub: Some("status"),
        exit: "0 when the status file is fresh and nthd can see; 2 (unknown, the reason on \
               stderr) when the file is missing, unreadable or stale, when nthd cannot read the \
               metadata service, or when an extra is disabled. With \\fB\\-\\-npd\\fR: 0 no \
               interruption pending, 1 a notice nthd will act on is listed or an action is \
               under way, 2 unknown. It exits 2 for a usage error too; a bad value of a setting it \
               does not use does not stop it.",
        fatal: false,
        files: &[SETTINGS, STATUS],
    },
];

/// System pages every page cites; the packaging test allows exactly these outside the tree.
pub(crate) const SYSTEM_PAGES: &[&str] = &[
    "systemd\\-logind(8)",
    "logind.conf(5)",
    "polkit(8)",
    "kubelet(1)",
];

/// (file name, contents) of every generated asset.
pub fn render() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    // The plain version: the man pages and completions must not change with each commit.
    let cmd = Cli::command().long_version(None::<&str>);
    let mut out = man_pages(&cmd)?;
    for (name, shell) in [
        ("nthd.bash", clap_complete::Shell::Bash),
        ("_nthd", clap_complete::Shell::Zsh),
        ("nthd.fish", clap_complete::Shell::Fish),
    ] {
        let mut buf = Vec::new();
        let mut c = cmd.clone();
        clap_complete::generate(shell, &mut c, "nthd", &mut buf);
        out.push((name.to_string(), buf));
    }
    Ok(out)
}

/// nthd.8 and a page per subcommand (no help subcommand: `nthd help X` is `nthd X --help`).
fn man_pages(cmd: &clap::Command) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut top = cmd.clone().disable_help_subcommand(true);
    top.build();
    let shipped: Vec<String> = PAGES.iter().map(|p| page_name(p.sub)).collect();
    anyhow::ensure!(
        top.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .all(|s| shipped.contains(&page_name(Some(s.get_name())))),
        "a subcommand has no entry in assets::PAGES"
    );
    let mut out = Vec::new();
    for page in PAGES {
        let c = match page.sub {
            None => top.clone(),
            Some(name) => top
                .find_subcommand(name)
                .ok_or_else(|| anyhow::anyhow!("no subcommand {name}"))?
                .clone(),
        };
        let mut man = Vec::new();
        clap_mangen::Man::new(c.clone())
            .title(page_name(page.sub).to_uppercase())
            .section("8")
            .manual("System Administration")
            .source(concat!("nthd ", env!("CARGO_PKG_VERSION")))
            .render(&mut man)?;
        man.extend_from_slice(extra_sections(&c, page, &shipped).as_bytes());
        out.push((format!("{}.8", page_name(page.sub)), man));
    }
    Ok(out)
}

/// `nthd` or `nthd-SUB`.
fn page_name(sub: Option<&str>) -> String {
    sub.map_or_else(|| "nthd".to_string(), |s| format!("nthd-{s}"))
}

fn roff_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('-', "\\-")
}

/// ENVIRONMENT (every flag's NTHD_* variable), FILES, EXIT STATUS and SEE ALSO.
fn extra_sections(cmd: &clap::Command, page: &Page, shipped: &[String]) -> String {
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
    o.push_str(".SH FILES\n");
    page.files.iter().for_each(|f| o.push_str(f));
    let fatal = if page.fatal { BAD_SETTING } else { "" };
    o.push_str(&format!(".SH EXIT STATUS\n{} {fatal}\n", page.exit).replace(" \n", "\n"));
    let own = page_name(page.sub);
    let mut see: Vec<String> = shipped
        .iter()
        .filter(|n| **n != own)
        .map(|n| format!("\\fB{}\\fR(8)", roff_escape(n)))
        .collect();
    see.extend(SYSTEM_PAGES.iter().map(|p| {
        let (name, section) = p.split_once('(').unwrap_or((p, ""));
        format!("\\fB{name}\\fR({section}")
    }));
    o.push_str(&format!(".SH SEE ALSO\n{}\n", see.join(", ")));
    o
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pages() -> Vec<(String, String)> {
        render()
            .unwrap()
            .into_iter()
            .filter(|(n, _)| n.ends_with(".8"))
            .map(|(n, b)| (n, String::from_utf8(b).unwrap()))
            .collect()
    }

    #[test]
    fn every_cited_nthd_page_is_generated() {
        let pages = pages();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for (page, body) in &pages {
            let plain = body.replace("\\-", "-");
            for (i, _) in plain.match_indices("nthd-") {
                let rest = &plain[i..];
                let end = rest.find(|c: char| !c.is_ascii_alphanumeric() && c != '-');
                let cited = &rest[..end.unwrap_or(rest.len())];
                let after = &rest[cited.len()..];
                let after = after.strip_prefix("\\fR").unwrap_or(after);
                if after.starts_with("(8)") {
                    assert!(
                        names.contains(&format!("{cited}.8").as_str()),
                        "{page} cites {cited}(8), which is not generated"
                    );
                }
            }
        }
        assert!(!names.contains(&"nthd-help.8"), "{names:?}");
    }

    #[test]
    fn every_page_has_exit_status_and_files() {
        for (page, body) in pages() {
            assert!(body.contains(".SH EXIT STATUS\n"), "{page}");
            assert!(body.contains(".SH FILES\n"), "{page}");
            assert!(body.contains("It exits 2 for a usage error"), "{page}");
            assert!(body.contains("/etc/default/nthd"), "{page}");
        }
    }
}
