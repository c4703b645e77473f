//! systemd's `EnvironmentFile=` syntax, as systemd itself reads it.
//!
//! The reference is systemd's parser, `parse_env_file_internal()` and `load_env_file()` in
//! `src/basic/env-file.c`, and what the service manager then does with its result
//! (`exec_context_load_environment()` in `src/core/execute.c`); this is a separate state machine
//! that follows the same rules, byte by byte:
//!
//! - **Lines.** A line ends at `\n` or `\r`, so CRLF files read like LF files, with one
//!   quirk kept: a backslash before a CRLF joins nothing (the `\r` is what it escapes, and the
//!   `\n` ends the line). Blank lines are skipped. A line whose first non-blank character is
//!   `#` or `;` is a comment, to its end; a backslash at the end of a comment does not continue
//!   it (systemd ≥ 254).
//! - **Names.** The name is everything from the first non-blank character to the next `=`
//!   (a leading `=` is part of the name); blanks (space, tab) around it are dropped. A line that
//!   ends before any `=` is ignored silently, as systemd ignores it.
//! - **Unquoted values.** Leading blanks are dropped, trailing unescaped blanks too. A backslash
//!   keeps the next character as it is (`\ ` is a kept space, `\n` is the letter `n`); a
//!   backslash at the end of the line joins the next line, whose leading blanks are kept. `#`
//!   after a value is part of the value, not a comment. Quotes inside a value are plain
//!   characters.
//! - **Single quotes.** Everything up to the next `'` is kept as is, newlines and backslashes
//!   included.
//! - **Double quotes.** Everything up to the next unescaped `"` is kept, newlines included;
//!   `\"`, `\\`, `` \` `` and `\$` give the character, a backslash before `\n` joins the
//!   lines, and any other backslash is kept with its character (`\n` written out stays
//!   backslash-n, and a backslash before a CRLF stays with the `\r`).
//! - **Pieces.** A quoted piece may be followed by more pieces, blanks between them dropped:
//!   `A="x" 'y' z` is `xyz`. An unterminated quote runs to the end of the file and is kept.
//! - **Repeats.** A later assignment of the same name wins.
//!
//! What systemd does with a bad assignment, and so what nthd does:
//!
//! - **A name that is not a variable name** (letters, digits and `_`, not starting with a digit;
//!   `export NTHD_X=1` is one): systemd logs "Ignoring invalid environment assignment" and starts
//!   the service without it. nthd skips it too and returns a [`Skipped`] warning naming the file
//!   and the line, so the command still runs with the same settings as the daemon.
//! - **A name or value that is not UTF-8** (systemd's check, which also refuses the noncharacters
//!   U+FDD0–U+FDEF and U+xFFFE/U+xFFFF), or **a NUL byte** in an assignment: systemd refuses
//!   the whole file (`load_env_file()` fails), and with the unit's `-` prefix passes none of
//!   it. nthd is then the only one that can still apply the good lines, so it does: it skips
//!   that assignment alone, with a [`Skipped`] warning naming the line and the setting (never
//!   the value), and applies the others. A skipped setting whose default could power off where
//!   the file chose otherwise takes its safe choice instead ([`super::SAFE_CHOICE`]:
//!   `log` for an action, `true` for the dry run). Invalid UTF-8 or a NUL in a comment or in a
//!   line without `=` is never checked by systemd, and is accepted here too.
//!
//! Not mirrored: systemd also drops an assignment longer than the system's `ARG_MAX` (typically
//! 2 MiB); nthd takes it.
//!
//! No warning or error quotes the file: a line can hold a secret (a webhook URL with its token),
//! and a name can be a pasted value. Each names the file, the line and what is wrong.

use std::path::Path;

/// An assignment nthd skips: printed as a warning, and reported as long as nthd runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file.
    pub path: String,
    /// The line the assignment starts on, from 1.
    pub line: usize,
    /// What is wrong with it.
    pub why: Why,
}

/// Why an assignment is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The name is not a variable name (`export` before a valid one when `true`): systemd
    /// ignores this assignment alone.
    Name {
        /// A valid name behind a shell `export`.
        export: bool,
    },
    /// The name or value is not UTF-8, or holds a NUL byte: systemd refuses the whole file.
    Bytes {
        /// The setting, when its name can be read.
        setting: Option<String>,
        /// `name` or `value`.
        part: &'static str,
        /// `is not valid UTF-8` or `holds a NUL byte`.
        problem: &'static str,
    },
}

impl Why {
    fn is_nul(&self) -> bool {
        matches!(self, Why::Bytes { problem, .. } if *problem == NUL)
    }
}

impl Skipped {
    /// The setting it names, when it can be read.
    pub fn setting(&self) -> Option<&str> {
        match &self.why {
            Why::Bytes { setting, .. } => setting.as_deref(),
            Why::Name { .. } => None,
        }
    }
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (path, line) = (&self.path, self.line);
        match &self.why {
            Why::Name { export: true } => write!(
                f,
                "{path} line {line}: `export` before the name is shell syntax; systemd ignores                  this assignment, and so does nthd: remove `export `"
            ),
            Why::Name { export: false } => write!(
                f,
                "{path} line {line}: the name before `=` is not letters, digits and `_` (not                  starting with a digit); systemd ignores this assignment, and so does nthd: fix                  the name"
            ),
            Why::Bytes { part: "line", .. } => write!(
                f,
                "{path} line {line}: a NUL byte outside any assignment; systemd refuses the \
                 whole file then, so nthd reads it on its own and applies its assignments: \
                 remove the byte"
            ),
            Why::Bytes {
                setting,
                part,
                problem,
            } => write!(
                f,
                "{path} line {line}: the {part} of {} {problem}; systemd refuses the whole file                  then, so nthd skips this assignment alone and applies the file's other lines:                  save the file as UTF-8 without NUL bytes",
                setting.as_deref().unwrap_or("an assignment")
            ),
        }
    }
}

/// What a settings file holds: the assignments systemd passes on, and the ones it ignores.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// The assignments, in the file's order (a later one of the same name wins).
    pub(crate) pairs: Vec<(String, String)>,
    /// The assignments skipped, with why.
    pub(crate) skipped: Vec<Skipped>,
}

/// Reads `bytes`, the contents of the settings file `path`, as systemd's `EnvironmentFile=`
/// does. See the module documentation for the rules and for what is skipped or refused.
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Parsed {
    let mut out = Parsed::default();
    for raw in lex(bytes) {
        let skip = |why| Skipped {
            path: path.display().to_string(),
            line: raw.line,
            why,
        };
        let name = text(&raw.name);
        let value = text(&raw.value);
        let (name, value) = match (name, value) {
            (Ok(name), Ok(value)) => (name, value),
            (name, value) => {
                let setting = name.as_ref().ok().filter(|n| is_variable_name(n)).cloned();
                let (part, problem) = match (name, value) {
                    (Err(p), _) => ("name", p),
                    (_, Err(p)) => ("value", p),
                    _ => unreachable!("one of the two failed"),
                };
                out.skipped.push(skip(Why::Bytes {
                    setting,
                    part,
                    problem,
                }));
                continue;
            }
        };
        if is_variable_name(&name) {
            out.pairs.push((name, value));
        } else {
            let export = name
                .strip_prefix("export")
                .filter(|rest| rest.starts_with([' ', '\t']))
                .is_some_and(|rest| is_variable_name(rest.trim_start_matches([' ', '\t'])));
            out.skipped.push(skip(Why::Name { export }));
        }
    }
    // A NUL outside any assignment (in a comment) still makes systemd refuse the file.
    let nul_told = out.skipped.iter().any(|s| s.why.is_nul());
    if let Some(at) = bytes.iter().position(|&b| b == 0).filter(|_| !nul_told) {
        out.skipped.push(Skipped {
            path: path.display().to_string(),
            line: 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count(),
            why: Why::Bytes {
                setting: None,
                part: "line",
                problem: NUL,
            },
        });
    }
    out
}

const NUL: &str = "holds a NUL byte";

/// The text of a name or value, or what is wrong with its bytes.
fn text(bytes: &[u8]) -> Result<String, &'static str> {
    if bytes.contains(&0) {
        return Err(NUL);
    }
    systemd_utf8(bytes).ok_or("is not valid UTF-8")
}

/// systemd's `env_name_is_valid()`: letters, digits and `_`, not empty, not starting with a
/// digit.
fn is_variable_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The text, if systemd's `utf8_is_valid()` accepts it: valid UTF-8 (as Rust's), and no
/// noncharacter U+FDD0–U+FDEF or U+xFFFE/U+xFFFF.
fn systemd_utf8(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let allowed = |c: char| {
        let u = u32::from(c);
        !(0xFDD0..=0xFDEF).contains(&u) && u & 0xFFFE != 0xFFFE
    };
    text.chars().all(allowed).then(|| text.to_string())
}

/// One assignment as the state machine reads it, before any check.
#[derive(Debug)]
struct Raw {
    /// The line its name starts on, from 1.
    line: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

/// Where the state machine is. systemd's `COMMENT_ESCAPE` state is folded into `Comment`: both
/// end the comment at the next newline, whatever precedes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before a name: blanks and newlines are skipped.
    PreKey,
    Key,
    /// After `=`, or after a closing quote.
    PreValue,
    Value,
    /// After a backslash in an unquoted value.
    ValueEscape,
    SingleQuoted,
    DoubleQuoted,
    /// After a backslash inside double quotes.
    DoubleQuotedEscape,
    Comment,
}

/// systemd's `WHITESPACE`, `NEWLINE` and `SHELL_NEED_ESCAPE`.
const BLANK_OR_NEWLINE: &[u8] = b" \t\n\r";
const NEWLINE: &[u8] = b"\n\r";
const ESCAPABLE_IN_DOUBLE_QUOTES: &[u8] = b"\"\\`$";

/// The state machine over a whole file.
#[derive(Debug)]
struct Lexer {
    state: State,
    /// The line of the byte being read, from 1.
    line: usize,
    /// The line the current name started on.
    start: usize,
    name: Vec<u8>,
    /// Where the name's trailing blanks start, if it ends in blanks.
    name_blanks: Option<usize>,
    value: Vec<u8>,
    /// Where an unquoted value's trailing unescaped blanks start, if it ends in them.
    value_blanks: Option<usize>,
    out: Vec<Raw>,
}

/// The assignments of a file, in order.
fn lex(bytes: &[u8]) -> Vec<Raw> {
    let mut lexer = Lexer {
        state: State::PreKey,
        line: 1,
        start: 1,
        name: Vec::new(),
        name_blanks: None,
        value: Vec::new(),
        value_blanks: None,
        out: Vec::new(),
    };
    for &c in bytes {
        lexer.step(c);
        if c == b'\n' {
            lexer.line += 1;
        }
    }
    lexer.finish()
}

/// `blanks` after adding a character at `len`: where the run of trailing blanks starts.
fn trailing_blanks(blanks: Option<usize>, c: u8, len: usize) -> Option<usize> {
    if !BLANK_OR_NEWLINE.contains(&c) {
        None
    } else {
        blanks.or(Some(len))
    }
}

impl Lexer {
    fn step(&mut self, c: u8) {
        let newline = NEWLINE.contains(&c);
        let blank = BLANK_OR_NEWLINE.contains(&c);
        match self.state {
            State::PreKey if c == b'#' || c == b';' => self.state = State::Comment,
            State::PreKey if !blank => {
                self.state = State::Key;
                self.start = self.line;
                self.name_blanks = None;
                self.name.push(c);
            }
            State::PreKey => {}
            State::Key if newline => {
                // A line without `=`: ignored.
                self.state = State::PreKey;
                self.name.clear();
            }
            State::Key if c == b'=' => {
                self.state = State::PreValue;
                self.value_blanks = None;
            }
            State::Key => {
                self.name_blanks = trailing_blanks(self.name_blanks, c, self.name.len());
                self.name.push(c);
            }
            State::PreValue | State::Value if newline => self.push(),
            State::PreValue => self.pre_value(c, blank),
            State::Value => self.value(c),
            State::ValueEscape => {
                // An escaped newline joins the lines; anything else is kept as it is.
                self.state = State::Value;
                if !newline {
                    self.value.push(c);
                }
            }
            State::SingleQuoted if c == b'\'' => self.state = State::PreValue,
            State::SingleQuoted => self.value.push(c),
            State::DoubleQuoted if c == b'"' => self.state = State::PreValue,
            State::DoubleQuoted if c == b'\\' => self.state = State::DoubleQuotedEscape,
            State::DoubleQuoted => self.value.push(c),
            State::DoubleQuotedEscape => self.double_quoted_escape(c),
            State::Comment if newline => self.state = State::PreKey,
            State::Comment => {}
        }
    }

    /// After `=` or a closing quote: a quote opens, a backslash escapes, blanks are skipped.
    fn pre_value(&mut self, c: u8, blank: bool) {
        match c {
            b'\'' => self.state = State::SingleQuoted,
            b'"' => self.state = State::DoubleQuoted,
            b'\\' => self.state = State::ValueEscape,
            _ if blank => {}
            _ => {
                self.state = State::Value;
                self.value.push(c);
            }
        }
    }

    /// In an unquoted value: a backslash escapes (and so protects a trailing blank).
    fn value(&mut self, c: u8) {
        if c == b'\\' {
            self.state = State::ValueEscape;
            self.value_blanks = None;
        } else {
            self.value_blanks = trailing_blanks(self.value_blanks, c, self.value.len());
            self.value.push(c);
        }
    }

    /// After a backslash inside double quotes: systemd follows the shell.
    fn double_quoted_escape(&mut self, c: u8) {
        self.state = State::DoubleQuoted;
        if ESCAPABLE_IN_DOUBLE_QUOTES.contains(&c) {
            self.value.push(c);
        } else if c != b'\n' {
            self.value.extend_from_slice(&[b'\\', c]);
        }
    }

    /// Ends the current assignment: trailing blanks of the name and of an unquoted value go.
    /// (`value_blanks` is only ever set in the unquoted state, which a value never leaves
    /// except at its end, so trimming here is systemd's "only in `VALUE`" rule.)
    fn push(&mut self) {
        if let Some(at) = self.name_blanks.take() {
            self.name.truncate(at);
        }
        if let Some(at) = self.value_blanks.take() {
            self.value.truncate(at);
        }
        self.out.push(Raw {
            line: self.start,
            name: std::mem::take(&mut self.name),
            value: std::mem::take(&mut self.value),
        });
        self.state = State::PreKey;
    }

    /// At the end of the file: an assignment under way counts, even inside an open quote.
    fn finish(mut self) -> Vec<Raw> {
        if !matches!(self.state, State::PreKey | State::Key | State::Comment) {
            self.push();
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What systemd's `load_env_file()` hands the service: one entry per name, the later value
    /// winning, in the order of first appearance; plus the skipped lines as (line, export).
    type Env = (Vec<(String, String)>, Vec<(usize, bool)>);

    /// A table row: what the case shows, the file, and the values systemd hands on.
    type Case = (
        &'static str,
        &'static [u8],
        &'static [(&'static str, &'static str)],
    );

    fn load(text: &[u8]) -> Result<Env, String> {
        let parsed = parse(Path::new("/etc/default/nthd"), text);
        let mut merged: Vec<(String, String)> = Vec::new();
        for (k, v) in parsed.pairs {
            match merged.iter_mut().find(|(mk, _)| *mk == k) {
                Some(slot) => slot.1 = v,
                None => merged.push((k, v)),
            }
        }
        let skipped = parsed
            .skipped
            .iter()
            .map(|s| (s.line, s.why == Why::Name { export: true }))
            .collect();
        Ok((merged, skipped))
    }

    fn check(name: &str, text: &[u8], pairs: &[(&str, &str)], skipped: &[(usize, bool)]) {
        let want: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let got = load(text).unwrap_or_else(|e| panic!("{name}: refused: {e}"));
        assert_eq!(got, (want, skipped.to_vec()), "{name}");
    }

    /// The example files of systemd's own test suite (src/test/test-env-file.c), with the
    /// values systemd's tests expect.
    const SYSTEMD_SUITE: &[Case] = &[
        (
            "env_file_1: repeats, continuations, escaped blank, UTF-8",
            "a=a\na=b\na=b\na=a\nb=b\\\nc\nd= d\\\ne  \\\nf  \ng=g\\ \nh= ąęół\\ śćńźżμ \ni=i\\"
                .as_bytes(),
            &[
                ("a", "a"),
                ("b", "bc"),
                ("d", "de  f"),
                ("g", "g "),
                ("h", "ąęół śćńźżμ"),
                ("i", "i"),
            ],
        ),
        (
            "env_file_2: continuation at the end",
            b"a=a\\\n",
            &[("a", "a")],
        ),
        (
            "env_file_3: a backslash does not continue a comment",
            b"#SPAMD_ARGS=\"-d --socketpath=/var/lib/bulwark/spamd \\\n\
              #--nouser-config                                     \\\n\
              normal1=line\\\n111\n\
              ;normal=ignored                                      \\\n\
              normal2=line222\n\
              normal ignored                                       \\\n",
            &[("normal1", "line111"), ("normal2", "line222")],
        ),
        (
            "env_file_4: comments, blank lines, double quotes",
            b"# Generated\n\nHWMON_MODULES=\"coretemp f71882fg\"\n\n\
              # For compatibility reasons\n\nMODULE_0=coretemp\nMODULE_1=f71882fg",
            &[
                ("HWMON_MODULES", "coretemp f71882fg"),
                ("MODULE_0", "coretemp"),
                ("MODULE_1", "f71882fg"),
            ],
        ),
        (
            "env_file_5: empty values",
            b"a=\nb=",
            &[("a", ""), ("b", "")],
        ),
        (
            "env_file_6: escapes unquoted, in single and in double quotes",
            b"a=\\ \\n \\t \\x \\y \\' \n\
              b= \\$'                  \n\
              c= ' \\n\\t\\$\\`\\\\\n'   \n\
              d= \" \\n\\t\\$\\`\\\\\n\"   \n",
            &[
                ("a", " n t x y '"),
                ("b", "$'"),
                ("c", " \\n\\t\\$\\`\\\\\n"),
                ("d", " \\n\\t$`\\\n"),
            ],
        ),
        (
            "parse_multiline_env_file: continuations in and out of double quotes",
            b"one=BAR\\\n\\ \\ \\ \\ VAR\\\n\\\tGAR\n#comment\n\
              two=\"bar\\\n    var\\\n\tgar\"\n#comment\n\
              tri=\"bar \\\n    var \\\n\tgar \"\n",
            &[
                ("one", "BAR    VAR\tGAR"),
                ("two", "bar    var\tgar"),
                ("tri", "bar     var \tgar "),
            ],
        ),
    ];

    #[test]
    fn systemd_test_suite_files() {
        for (name, text, pairs) in SYSTEMD_SUITE {
            check(name, text, pairs, &[]);
        }
    }

    /// systemd's `parse_env_file` test file: blanks around `=`, lines without `=`, multi-line
    /// and concatenated quotes, `#` after a value, `export`, repeats and backslashes.
    #[test]
    fn systemd_parse_env_file_example() {
        let text = b"one=BAR   \n# comment\n # comment \n ; comment \n  two   =   bar    \n\
            invalid line\ninvalid line #comment\nthree = \"333\nxxxx\"\nfour = '44\\\"44'\n\
            five = \"55\\\"55\" \"FIVE\" cinco   \nsix = seis sechs\\\n sis\n\
            seven=\"sevenval\" #nocomment\neight=eightval #nocomment\nexport nine=nineval\n\
            ten=ignored\nten=ignored\nten=\neleven=\\value\ntwelve=\"\\value\"\n\
            thirteen='\\value'";
        let pairs = [
            ("one", "BAR"),
            ("two", "bar"),
            ("three", "333\nxxxx"),
            ("four", "44\\\"44"),
            ("five", "55\"55FIVEcinco"),
            ("six", "seis sechs sis"),
            ("seven", "sevenval#nocomment"),
            ("eight", "eightval #nocomment"),
            ("ten", ""),
            ("eleven", "value"),
            ("twelve", "\\value"),
            ("thirteen", "\\value"),
        ];
        // `export nine` is handed to the service manager, which ignores it as an invalid name.
        check("parse_env_file", text, &pairs, &[(16, true)]);
    }

    /// The rules of systemd.exec(5) and of systemd's parser, one case each.
    const RULES: &[Case] = &[
        (
            "CRLF",
            b"A=1\r\nB=\"two words\"\r\n# c\r\nC='x'\r\n",
            &[("A", "1"), ("B", "two words"), ("C", "x")],
        ),
        // systemd eats the `\r` after the backslash; the `\n` then ends the line.
        (
            "CRLF continuation",
            b"D=a\\\r\nE=b\r\n",
            &[("D", "a"), ("E", "b")],
        ),
        // In double quotes only `\n` is a continuation: the backslash stays with the `\r`.
        (
            "CRLF continuation in double quotes",
            b"A=\"x\\\r\ny\"\r\n",
            &[("A", "x\\\r\ny")],
        ),
        ("blanks around =", b" \tA \t= \t1 \t\n", &[("A", "1")]),
        ("continuation", b"A=one \\\n  two\n", &[("A", "one   two")]),
        (
            "\\n in double quotes",
            b"A=\"multi\\nline\"\n",
            &[("A", "multi\\nline")],
        ),
        (
            "newline in double quotes",
            b"A=\"multi\nline\"\n",
            &[("A", "multi\nline")],
        ),
        (
            "single quotes are literal",
            b"A='$x \\\" \\\\'\n",
            &[("A", "$x \\\" \\\\")],
        ),
        ("pieces", b"A='x' y\n", &[("A", "xy")]),
        (
            "quotes inside a value",
            b"A=a 'b c' \n",
            &[("A", "a 'b c'")],
        ),
        (
            "# after a value",
            b"A=1 # no comment\n",
            &[("A", "1 # no comment")],
        ),
        ("; after a value", b"A=1;x\n", &[("A", "1;x")]),
        ("no expansion", b"A=$HOME ${B}\n", &[("A", "$HOME ${B}")]),
        ("= in a value", b"A=b=c\n", &[("A", "b=c")]),
        (
            "unterminated quote",
            b"A=\"open\nB=2\n",
            &[("A", "open\nB=2\n")],
        ),
        ("a line without =", b"just words\nA=1\n=x\n", &[("A", "1")]),
        ("exportA is a name", b"exportA=1\n", &[("exportA", "1")]),
        (
            "Latin-1 in a comment",
            b"# caf\xe9\nno equals \xe9\nA=1\n",
            &[("A", "1")],
        ),
        ("no newline at the end", b"A=1", &[("A", "1")]),
    ];

    #[test]
    fn rules_one_by_one() {
        for (name, text, pairs) in RULES {
            check(name, text, pairs, &[]);
        }
    }

    /// Names systemd hands on and the service manager then ignores: skipped, with the line the
    /// assignment starts on, and the others still read.
    #[test]
    fn invalid_names_are_skipped_with_their_line() {
        let text = b"A=\"x\ny\"\nexport B=1\nexport\tC=2\nD E=3\n1F=4\n==5\nG=ok\n";
        let skipped = [(3, true), (4, true), (5, false), (6, false), (7, false)];
        check(
            "invalid names",
            text,
            &[("A", "x\ny"), ("G", "ok")],
            &skipped,
        );
        let e = parse(Path::new("f"), b"A=1\nexport NTHD_B=2\n");
        let warning = e.skipped[0].to_string();
        assert!(warning.starts_with("f line 2: `export`"), "{warning}");
        assert!(warning.contains("remove `export `"), "{warning}");
    }

    /// Assignments for which systemd refuses the whole file: a NUL byte; a name or value that
    /// is not UTF-8 (the noncharacters are systemd's own test cases), whatever the name. nthd
    /// skips each alone, names its line and setting, and keeps the file's other lines.
    #[test]
    fn assignments_systemd_refuses_are_skipped_alone() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"A=1\n# a\0b\n",
                "line 2: a NUL byte outside any assignment",
            ),
            (
                b"A=1\nNTHD_X=a\0b\n",
                "line 2: the value of NTHD_X holds a NUL byte",
            ),
            (
                "A=1\nfo\u{fffe}o=bar".as_bytes(),
                "line 2: the name of an assignment is not valid UTF-8",
            ),
            (
                "A=1\nfoo=b\u{ffff}ar".as_bytes(),
                "line 2: the value of foo is not valid UTF-8",
            ),
            (
                "A=1\nbaz=hello world\u{fffe}".as_bytes(),
                "line 2: the value of baz",
            ),
            ("A=1\nB=\u{fdd0}".as_bytes(), "line 2: the value of B"),
            (
                b"A=1\nOTHER=caf\xe9\n",
                "line 2: the value of OTHER is not valid UTF-8",
            ),
            (
                b"A=1\n\nexport B\xe9=1\n",
                "line 3: the name of an assignment is not valid UTF-8",
            ),
        ];
        for (text, want) in cases {
            let p = parse(Path::new("/etc/default/nthd"), text);
            assert_eq!(p.pairs, [("A".to_string(), "1".to_string())], "{want}");
            assert_eq!(p.skipped.len(), 1, "{want}");
            let e = p.skipped[0].to_string();
            assert!(
                e.starts_with("/etc/default/nthd ") && e.contains(want),
                "{e}"
            );
            assert!(e.contains("systemd refuses the whole file"), "{e}");
        }
        // Other noncharacter-free text outside the BMP is fine.
        check("emoji", "A=🙂\n".as_bytes(), &[("A", "🙂")], &[]);
    }

    /// A bad line can carry a secret (a webhook URL with its token in the path, or a pasted
    /// value where the name should be): errors and warnings name the file, the line and the
    /// problem, and quote nothing from the file.
    #[test]
    fn nothing_from_the_file_is_quoted() {
        let secret = "T0KEN-s3cr3t";
        let bad: [Vec<u8>; 4] = [
            format!("export NTHD_WEBHOOK=https://hooks.example/{secret}\n").into_bytes(),
            format!("NTHD_A=1\nhttps://hooks.example/{secret}?a=b\n").into_bytes(),
            format!("NTHD_WEBHOOK=https://hooks.example/{secret}\u{ffff}\n").into_bytes(),
            format!("NTHD_WEBHOOK=https://hooks.example/{secret}\0\n").into_bytes(),
        ];
        for text in bad {
            let messages: Vec<String> = parse(Path::new("/etc/default/nthd"), &text)
                .skipped
                .iter()
                .map(std::string::ToString::to_string)
                .collect();
            assert_eq!(messages.len(), 1, "{messages:?}");
            for m in messages {
                assert!(m.starts_with("/etc/default/nthd line "), "{m}");
                assert!(!m.contains(secret) && !m.contains("hooks"), "{m}");
            }
        }
    }
}
