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
//! systemd ignores is skipped with a warning; a file systemd refuses stops the command.

pub(crate) mod env_file;

use std::path::PathBuf;

pub(crate) use env_file::Skipped;

/// The files the packaged unit reads, in its order (a later file wins).
pub(crate) const PACKAGED: [&str; 2] = ["/etc/default/nthd", "/etc/sysconfig/nthd"];

/// The flag and variable that choose the files.
pub(crate) const FLAG: &str = "--settings-file";
pub(crate) const ENV: &str = "NTHD_SETTINGS_FILE";

/// A settings file that cannot be used. Fatal where guessing defaults could do harm (see
/// [`Unreadable`]).
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
    /// A settings file holds a NUL byte: systemd refuses the whole file.
    #[error(
        "{path} line {line}: a NUL byte; systemd refuses a settings file that holds one and \
         would pass none of its settings to the daemon: remove the byte, or pass {FLAG} none"
    )]
    Nul {
        /// The file.
        path: String,
        /// The line of the first NUL byte, from 1.
        line: usize,
    },
    /// An assignment's name or value is not UTF-8: systemd refuses the whole file. Nothing of
    /// the assignment is quoted: a value can be a secret (a webhook URL with its token).
    #[error(
        "{path} line {line}: the {part} is not valid UTF-8; systemd refuses the whole file then \
         and would pass none of its settings to the daemon: save the file as UTF-8, or pass \
         {FLAG} none"
    )]
    Encoding {
        /// The file.
        path: String,
        /// The line the assignment starts on, from 1.
        line: usize,
        /// `name` or `value`.
        part: &'static str,
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
    /// `--settings-file` still stops it: the unit does not pass that one.
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
        let parsed = env_file::parse(&path, &bytes)?;
        loaded.skipped.extend(parsed.skipped);
        let mut n = 0;
        for (k, v) in parsed.pairs {
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
    let e = match std::fs::read(path) {
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
    if unreadable == Unreadable::Stop || (unreadable == Unreadable::PassedBySystemd && named) {
        return Err(SettingsError::Read {
            path: shown,
            reason,
        });
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

        std::fs::write(&f, b"NTHD_A=1\nNTHD_WEBHOOK=caf\xe9\n").unwrap();
        let e = read(&file, |_| None, Unreadable::Stop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2: the value is not valid UTF-8"), "{e}");
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
    /// values); a named one still stops it, since the unit does not pass that one.
    #[test]
    fn under_systemd_only_the_packaged_files_are_passed() {
        let dir = tempfile::tempdir().unwrap();
        let named = args(&["nthd", "--settings-file", dir.path().to_str().unwrap()]);
        assert!(read(&named, |_| None, Unreadable::PassedBySystemd).is_err());
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
