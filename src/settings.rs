//! The packaged settings files, read by every command the way the unit reads them.
//!
//! The unit passes `/etc/default/nthd` and then `/etc/sysconfig/nthd` to nthd as
//! `EnvironmentFile=`s. `nthd check`, `simulate` and `once`, run by hand, must see the same
//! settings as the daemon, or a fire drill could power off a node whose daemon is set to `log`.
//! So before the command line is parsed, each `NTHD_*` variable of those files that is not
//! already in the environment is put there. Flags and real environment variables still win.
//! `--settings-file PATH` (or `NTHD_SETTINGS_FILE`) names another file, or `none`.

use std::path::{Path, PathBuf};

/// The files the packaged unit reads, in its order (a later file wins).
pub(crate) const PACKAGED: [&str; 2] = ["/etc/default/nthd", "/etc/sysconfig/nthd"];

/// The flag and variable that choose the files.
pub(crate) const FLAG: &str = "--settings-file";
pub(crate) const ENV: &str = "NTHD_SETTINGS_FILE";

/// A settings file that exists but cannot be used. Fatal: guessing defaults could do harm.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A settings file exists but cannot be read.
    #[error("cannot read the settings file {path}: {reason}; fix it, or pass {FLAG} none")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// A line is not `KEY=value`, or its key is not made of letters, digits and `_`. The line
    /// itself is never quoted: it can hold a secret (a webhook URL with a token in its path).
    #[error(
        "{path} line {line}: {problem} (systemd EnvironmentFile syntax: KEY=value, no `export`, \
         no shell expansion); fix that line"
    )]
    Syntax {
        /// The file.
        path: String,
        /// The line number, from 1.
        line: usize,
        /// What is wrong, in words that quote nothing from the file.
        problem: &'static str,
    },
}

/// What was read, for the log.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Files read, with how many of their values were taken (not already in the environment).
    pub files: Vec<(PathBuf, usize)>,
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

/// Parses systemd `EnvironmentFile=` syntax: `KEY=value` lines, `#` or `;` comments, optional
/// single or double quotes around the value.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        let syntax = |problem| SettingsError::Syntax {
            path: path.display().to_string(),
            line: i + 1,
            problem,
        };
        let Some((k, v)) = l.split_once('=') else {
            return Err(syntax("no `=`"));
        };
        let k = k.trim();
        if k.starts_with("export ") {
            return Err(syntax("`export` before the name"));
        }
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(syntax("the name is not letters, digits and `_`"));
        }
        out.push((k.to_string(), unquote(v.trim()).to_string()));
    }
    Ok(out)
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

/// Reads the chosen settings files and returns the `NTHD_*` values not already set in `env`.
/// Missing files are skipped; unreadable or malformed ones are errors.
pub(crate) fn read(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(Vec<(String, String)>, Loaded), SettingsError> {
    let files: Vec<PathBuf> = match chosen(args, env(ENV)) {
        Some(v) if v.is_empty() || v == "none" => Vec::new(),
        Some(v) => vec![PathBuf::from(v)],
        None => PACKAGED.iter().map(PathBuf::from).collect(),
    };
    let mut taken: Vec<(String, String)> = Vec::new();
    let mut loaded = Loaded::default();
    for path in files {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(SettingsError::Read {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        let mut n = 0;
        for (k, v) in parse(&path, &text)? {
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

/// Reads the settings files into this process's environment. Call before any thread starts.
pub fn load_into_env(args: &[String]) -> Result<Loaded, SettingsError> {
    let (vars, loaded) = read(args, |k| std::env::var(k).ok())?;
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
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_environment_file_syntax() {
        let p = Path::new("f");
        let v = parse(
            p,
            "# c\n; c\n\nNTHD_A=1\n NTHD_B = \"two words\" \nNTHD_C='x'\nNTHD_D=\nOTHER=y\n",
        )
        .unwrap();
        assert_eq!(
            v,
            vec![
                ("NTHD_A".into(), "1".into()),
                ("NTHD_B".into(), "two words".into()),
                ("NTHD_C".into(), "x".into()),
                ("NTHD_D".into(), "".into()),
                ("OTHER".into(), "y".into()),
            ]
        );
        let e = parse(p, "NTHD_A=1\nexport NTHD_B=2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f line 2") && e.contains("export"), "{e}");
        let e = parse(p, "just words\n").unwrap_err().to_string();
        assert!(e.contains("line 1: no `=`"), "{e}");
    }

    /// A bad line can carry a secret (a webhook URL with its token in the path): the error names
    /// the file, the line and the problem, and quotes nothing from the line.
    #[test]
    fn a_bad_line_is_never_quoted() {
        let secret = "T0KEN-s3cr3t";
        for text in [
            format!("export NTHD_WEBHOOK=https://hooks.example/{secret}\n"),
            format!("https://hooks.example/{secret}\n"),
            format!("NTHD_A=1\nhttps://hooks.example/{secret}?a=b\n"),
        ] {
            let e = parse(Path::new("/etc/default/nthd"), &text)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("/etc/default/nthd line "), "{e}");
            assert!(!e.contains(secret) && !e.contains("hooks"), "{e}");
        }
    }

    #[test]
    fn environment_wins_later_file_wins_and_only_nthd_vars() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("s");
        std::fs::write(&f, "NTHD_A=file\nNTHD_B=file\nPATH=/evil\nNTHD_B=again\n").unwrap();
        let env: HashMap<&str, &str> = [("NTHD_A", "env")].into();
        let (vars, loaded) = read(
            &args(&["nthd", "--settings-file", f.to_str().unwrap(), "check"]),
            |k| env.get(k).map(|v| v.to_string()),
        )
        .unwrap();
        assert_eq!(vars, vec![("NTHD_B".to_string(), "again".to_string())]);
        assert_eq!(loaded.files, vec![(f.clone(), 2)]);
        assert!(loaded.describe().unwrap().contains("(2 values)"));
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
        let (vars, loaded) = read(&args(&["nthd", "--settings-file", "none"]), env_none).unwrap();
        assert!(vars.is_empty() && loaded.describe().is_none());
        // A missing file is no error; an unreadable one is.
        let (_, loaded) =
            read(&args(&["nthd", "--settings-file=/nonexistent/x"]), env_none).unwrap();
        assert!(loaded.files.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let e = read(
            &args(&["nthd", "--settings-file", dir.path().to_str().unwrap()]),
            env_none,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot read the settings file"), "{e}");
    }
}
