//! The packaged settings files, read by every command the way the unit reads them.
//!
//! The unit passes `/etc/default/nthd` and then `/etc/sysconfig/nthd` to nthd as
//! `EnvironmentFile=`s. `nthd check`, `simulate` and `once`, run by hand, must see the same
//! settings as the daemon, or a fire drill could power off a node whose daemon is set to `log`.
//! So before the command line is parsed, each `NTHD_*` variable of those files that is not
//! already in the environment is put there. Flags and real environment variables still win.
//! `--settings-file PATH` (or `NTHD_SETTINGS_FILE`) names another file, or `none`.
//!
//! The files are read exactly as systemd reads them ([`env_file`] has the rules): a file the
//! unit starts with is a file every command accepts, with the same values. An assignment
//! systemd ignores is skipped with a warning; an assignment for which systemd refuses the whole
//! file is skipped alone, with a warning, and the file's other lines apply.

pub(crate) mod env_file;

use std::path::PathBuf;

pub(crate) use env_file::Skipped;

/// The files the packaged unit reads, in its order (a later file wins).
pub(crate) const PACKAGED: [&str; 2] = ["/etc/default/nthd", "/etc/sysconfig/nthd"];

/// The settings whose bad value takes the choice that cannot power off where the admin chose
/// otherwise, not the default, each with that choice and why: a bad value in the environment
/// (`config::parse_lenient`) or an assignment of a settings file skipped for its bytes.
/// docs/configuration.md lists the same (tests/docs.rs holds it to this list). A name ending
/// in `*` stands for every variable with that prefix.
pub const SAFE_CHOICE: &[(&str, &str, &str)] = &[
    (
        "NTHD_ACTION_*",
        "log",
        "the kind's default action may be poweroff or reboot where you chose log or ignore",
    ),
    (
        "NTHD_DRY_RUN",
        "true",
        "going on without the dry run would power off a node where you only try nthd out; a \
         dry run still watches, reports and runs the drain report",
    ),
];

/// The safe choice for a bad value of `var`, if it has one ([`SAFE_CHOICE`]).
pub(crate) fn safe_choice(var: &str) -> Option<(&'static str, &'static str)> {
    SAFE_CHOICE.iter().find_map(|(name, value, why)| {
        let hit = match name.strip_suffix('*') {
            Some(prefix) => var.starts_with(prefix),
            None => var == *name,
        };
        hit.then_some((*value, *why))
    })
}

/// The flag and variable that choose the files.
pub(crate) const FLAG: &str = "--settings-file";
pub(crate) const ENV: &str = "NTHD_SETTINGS_FILE";

/// A settings file that cannot be read. Fatal only for a command run by hand where guessing
/// defaults could do harm (see [`Unreadable`]).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A settings file cannot be read (or a named one does not exist).
    #[error(
        "cannot read the settings file {path}: {reason}; without its settings nthd could power \
         off for a notice the file sets to log. Fix it (as root, or let group nthd read it: \
         chown root:nthd {path}; chmod 0640 {path}), or pass {FLAG} none"
    )]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
}

/// What was read, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Files read, with how many of their values were taken (not already in the environment).
    pub files: Vec<(PathBuf, usize)>,
    /// Assignments skipped, as systemd skips them: one warning each.
    pub skipped: Vec<Skipped>,
    /// Files that could not be read, where the command goes on without them: one warning each.
    pub unread: Vec<String>,
    /// Files named for the daemon under systemd that could not be read: it goes on with the
    /// defaults, reported for as long as it runs.
    pub lost: Vec<(String, String)>,
}

impl Loaded {
    /// One line naming the files used, or `None` when none was read.
    pub fn describe(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .files
            .iter()
            .map(|(p, n)| {
                format!(
                    "{} ({n} value{})",
                    p.display(),
                    if *n == 1 { "" } else { "s" }
                )
            })
            .collect();
        Some(format!(
            "settings from {}; the environment and flags override them",
            list.join(", ")
        ))
    }
}

/// Which files to read, from the command line (`--settings-file X`, `--settings-file=X`) or
/// the environment. `None` means the packaged ones.
fn chosen(args: &[String], env: Option<String>) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == FLAG {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(FLAG).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
    }
    env
}

/// What a settings file that exists but cannot be read (or a named one that is missing) means
/// for the command at hand (docs/configuration.md, "When a setting is wrong").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// Stop (exit 2): going on without the file's settings could power off a node that should
    /// not be. The daemon run by hand, and a fire drill.
    Stop,
    /// The daemon under systemd: systemd read the packaged files itself, as root, and passed
    /// their values in; a packaged file nthd cannot read again is no loss. A file named with
    /// `--settings-file` that cannot be read leaves the defaults, loudly: under systemd nthd
    /// never stops for a setting.
    PassedBySystemd,
    /// A command that only looks (`check`, `once`, `status`): go on, warning.
    Warn,
}

impl Unreadable {
    /// The policy for `command` (`None`: the daemon); `under_systemd` when systemd started this
    /// process as a service (it sets `$INVOCATION_ID`).
    pub fn for_command(command: Option<&str>, under_systemd: bool) -> Unreadable {
        match command {
            None | Some("run") if under_systemd => Unreadable::PassedBySystemd,
            None | Some("run" | "simulate") => Unreadable::Stop,
            Some(_) => Unreadable::Warn,
        }
    }
}

/// Reads the chosen settings files and returns the `NTHD_*` values not already set in `env`.
/// Missing packaged files are skipped; an unreadable file, or a named one that is missing, is
/// an error or a warning as `unreadable` says; files systemd refuses are errors.
pub(crate) fn read(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
    unreadable: Unreadable,
) -> Result<(Vec<(String, String)>, Loaded), SettingsError> {
    let (files, named) = match chosen(args, env(ENV)) {
        Some(v) if v.is_empty() || v == "none" => (Vec::new(), true),
        Some(v) => (vec![PathBuf::from(v)], true),
        None => (PACKAGED.iter().map(PathBuf::from).collect(), false),
    };
    let mut taken: Vec<(String, String)> = Vec::new();
    let mut loaded = Loaded::default();
    for path in files {
        let Some(bytes) = read_one(&path, named, unreadable, &mut loaded)? else {
            continue;
        };
        let parsed = env_file::parse(&path, &bytes);
        // A setting skipped for its bytes that has a safe choice takes it (a later good line
        // of the same setting still wins).
        let safe = parsed.skipped.iter().filter_map(|s| {
            let name = s.setting()?;
            Some((name.to_string(), safe_choice(name)?.0.to_string()))
        });
        let pairs: Vec<(String, String)> = safe.collect();
        loaded.skipped.extend(parsed.skipped);
        let mut n = 0;
        for (k, v) in pairs.into_iter().chain(parsed.pairs) {
            if !k.starts_with("NTHD_") || env(&k).is_some() {
                continue;
            }
            // A later file overrides an earlier one, as with the unit's EnvironmentFile=s.
            taken.retain(|(tk, _)| *tk != k);
            taken.push((k, v));
            n += 1;
        }
        loaded.files.push((path, n));
    }
    Ok((taken, loaded))
}

/// One file's bytes; `None` when it is missing and that is fine, or unreadable and the policy
/// says go on (the warning is added to `loaded`).
fn read_one(
    path: &std::path::Path,
    named: bool,
    unreadable: Unreadable,
    loaded: &mut Loaded,
) -> Result<Option<Vec<u8>>, SettingsError> {
    let e = match read_regular(path) {
        Ok(b) => return Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(e) => e,
    };
    let shown = path.display().to_string();
    let reason = if e.kind() == std::io::ErrorKind::NotFound {
        format!("{e} (named by {FLAG} or {ENV})")
    } else {
        e.to_string()
    };
    let passed = unreadable == Unreadable::PassedBySystemd && !named;
    if unreadable == Unreadable::Stop {
        return Err(SettingsError::Read {
            path: shown,
            reason,
        });
    }
    if unreadable == Unreadable::PassedBySystemd && named {
        let message = format!(
            "cannot read the settings file {shown} ({reason}); nthd goes on with the \
             environment's settings and the defaults, and keeps protecting the node: fix the \
             file or {ENV}, then systemctl restart nthd"
        );
        loaded.lost.push((ENV.to_string(), message));
        return Ok(None);
    }
    loaded.unread.push(if passed {
        format!(
            "cannot read the settings file {shown} ({reason}); systemd read it when it started \
             nthd and passed its values in (EnvironmentFile=), so they are in force. `nthd \
             check`, `once` and `simulate` read it themselves: run them as root, or let group \
             nthd read it: chown root:nthd {shown}; chmod 0640 {shown}"
        )
    } else {
        format!(
            "cannot read the settings file {shown} ({reason}); this command goes on without \
             its settings, so what it shows may differ from what the daemon does: run it as \
             root, or let group nthd read the file: chown root:nthd {shown}; chmod 0640 {shown}"
        )
    });
    Ok(None)
}

/// A settings file's bytes ([`crate::files::open_regular`]): a FIFO named as the file never
/// holds up the start, only a regular file of at most 1 MiB is read, and a symbolic link is
/// followed, as systemd follows it for `EnvironmentFile=`.
fn read_regular(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use crate::files::{open_regular, read_at_most, ReadError, MAX_READ};
    let read = open_regular(path, true).and_then(|f| read_at_most(f, path, MAX_READ));
    read.map_err(|e| match e {
        ReadError::Missing { .. } => std::io::Error::from(std::io::ErrorKind::NotFound),
        ReadError::Io { reason, .. } => reason,
        other => std::io::Error::other(other.to_string()),
    })
}

/// Reads the settings files into this process's environment. Call before any thread starts.
pub fn load_into_env(args: &[String], unreadable: Unreadable) -> Result<Loaded, SettingsError> {
    let (vars, loaded) = read(args, |k| std::env::var(k).ok(), unreadable)?;
    for (k, v) in vars {
        std::env::set_var(k, v);
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(std::string::ToString::to_string).collect()
    }

    #[test]
    fn environment_wins_later_file_wins_and_only_nthd_vars() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        std::fs::write(&f, "NTHD_A=file\nNTHD_B=file\nPATH=/evil\nNTHD_B=again\n").unwrap();
        let env: HashMap<&str, &str> = [("NTHD_A", "env")].into();
        let (vars, loaded) = read(
            &args(&["nthd", "--settings-file", f.to_str().unwrap(), "check"]),
            |k| env.get(k).map(std::string::ToString::to_string),
            Unreadable::Stop,
        )
        .unwrap();
        assert_eq!(vars, vec![("NTHD_B".to_string(), "again".to_string())]);
        assert_eq!(loaded.files, vec![(f.clone(), 2)]);
        assert!(loaded.describe().unwrap().contains("(2 values)"));
    }

    /// A file the unit starts with is one every command reads: an assignment systemd ignores is
    /// a warning, not an error, and the file's other values are still taken. A file systemd
    /// refuses stops the command.
    #[test]
    fn skipped_lines_warn_and_refused_files_stop() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        let file = args(&["nthd", "--settings-file", f.to_str().unwrap()]);
        std::fs::write(
            &f,
            "NTHD_A=\"multi\\\nline\"\r\nexport NTHD_B=x\nNTHD_C='c' # no comment\n",
        )
        .unwrap();
        let (vars, loaded) = read(&file, |_| None, Unreadable::Stop).unwrap();
        let want = [("NTHD_A", "multiline"), ("NTHD_C", "c# no comment")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(vars, want);
        assert_eq!(loaded.files, vec![(f.clone(), 2)]);
        let warnings: Vec<String> = loaded
            .skipped
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        // Line 3: the continuation makes the first assignment two lines.
        let want = format!("{} line 3: `export`", f.display());
        assert!(warnings[0].starts_with(&want), "{warnings:?}");

        // A line systemd would refuse the file for costs that line: the others apply, and a
        // skipped action or dry run takes its safe choice.
        let text = b"NTHD_A=1\nNTHD_WEBHOOK=caf\xe9\nNTHD_ACTION_SCHEDULED_REBOOT=r\xe9boot\n\
                     NTHD_DRY_RUN=n\0\n";
        std::fs::write(&f, text).unwrap();
        let (vars, loaded) = read(&file, |_| None, Unreadable::Stop).unwrap();
        let want = [
            ("NTHD_ACTION_SCHEDULED_REBOOT", "log"),
            ("NTHD_DRY_RUN", "true"),
            ("NTHD_A", "1"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(vars, want);
        let e: Vec<String> = loaded.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(
            e[0].contains("line 2: the value of NTHD_WEBHOOK is not valid UTF-8"),
            "{e:?}"
        );
        assert!(
            e[2].contains("line 4: the value of NTHD_DRY_RUN holds a NUL byte"),
            "{e:?}"
        );
        // A good line of the same setting later in the file still wins.
        std::fs::write(&f, b"NTHD_DRY_RUN=n\xe9\nNTHD_DRY_RUN=false\n").unwrap();
        let (vars, _) = read(&file, |_| None, Unreadable::Stop).unwrap();
        assert_eq!(vars, [("NTHD_DRY_RUN".to_string(), "false".to_string())]);
    }

    /// A FIFO named as the settings file never holds up the start: it is refused at once as
    /// not a regular file, by a command that stops and by one that only warns.
    #[test]
    fn a_fifo_as_the_settings_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("settings");
        crate::files::mkfifo(&fifo);
        let named = args(&["nthd", "--settings-file", fifo.to_str().unwrap()]);
        let start = std::time::Instant::now();
        let e = read(&named, |_| None, Unreadable::Stop).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let (_, loaded) = read(&named, |_| None, Unreadable::Warn).unwrap();
        assert!(
            loaded.unread[0].contains("not a regular file"),
            "{loaded:?}"
        );
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn choosing_the_files() {
        let env_none = |_: &str| None;
        assert_eq!(
            chosen(&args(&["nthd", "--settings-file=x"]), None).as_deref(),
            Some("x")
        );
        assert_eq!(
            chosen(&args(&["nthd", "--", "--settings-file=x"]), None),
            None
        );
        assert_eq!(
            chosen(&args(&["nthd"]), Some("y".into())).as_deref(),
            Some("y")
        );
        let (vars, loaded) = read(
            &args(&["nthd", "--settings-file", "none"]),
            env_none,
            Unreadable::Stop,
        )
        .unwrap();
        assert!(vars.is_empty() && loaded.describe().is_none());
        // A named file that is missing stops a daemon or a drill (its settings are not in
        // force); a command that only looks goes on, warning.
        let missing = args(&["nthd", "--settings-file=/nonexistent/x"]);
        let e = read(&missing, env_none, Unreadable::Stop).unwrap_err();
        assert!(e.to_string().contains("named by --settings-file"), "{e}");
        let (_, loaded) = read(&missing, env_none, Unreadable::Warn).unwrap();
        assert!(loaded.files.is_empty() && loaded.unread.len() == 1);
        let dir = tempfile::tempdir().unwrap();
        let e = read(
            &args(&["nthd", "--settings-file", dir.path().to_str().unwrap()]),
            env_none,
            Unreadable::Stop,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot read the settings file"), "{e}");
    }

    /// Which commands stop on a settings file they cannot read.
    #[test]
    fn unreadable_policy_per_command() {
        use Unreadable::{PassedBySystemd, Stop, Warn};
        assert_eq!(Unreadable::for_command(None, true), PassedBySystemd);
        assert_eq!(Unreadable::for_command(Some("run"), true), PassedBySystemd);
        assert_eq!(Unreadable::for_command(None, false), Stop);
        assert_eq!(Unreadable::for_command(Some("simulate"), true), Stop);
        assert_eq!(Unreadable::for_command(Some("simulate"), false), Stop);
        for c in ["check", "once", "status"] {
            assert_eq!(Unreadable::for_command(Some(c), false), Warn);
        }
    }

    /// A packaged file the daemon cannot read under systemd is a warning (systemd passed its
    /// values); a named one is lost, and reported as long as nthd runs (`Loaded::lost`), but
    /// never stops it.
    #[test]
    fn under_systemd_only_the_packaged_files_are_passed() {
        let dir = tempfile::tempdir().unwrap();
        let named = args(&["nthd", "--settings-file", dir.path().to_str().unwrap()]);
        let (vars, lost) = read(&named, |_| None, Unreadable::PassedBySystemd).unwrap();
        assert!(vars.is_empty());
        assert_eq!(lost.lost.len(), 1, "{lost:?}");
        assert_eq!(lost.lost[0].0, ENV);
        assert!(
            lost.lost[0].1.contains("keeps protecting the node"),
            "{lost:?}"
        );
        let mut loaded = Loaded::default();
        let got = read_one(dir.path(), false, Unreadable::PassedBySystemd, &mut loaded).unwrap();
        assert!(got.is_none());
        assert!(
            loaded.unread[0].contains("passed its values in (EnvironmentFile=)"),
            "{:?}",
            loaded.unread
        );
    }
}
