//! What an operator reads speaks of the product as it is, not of how it was made. README.md,
//! docs/*.md, packaging/'s Markdown and the comments of its scripts and configuration files, and
//! the polkit rules and examples, must not carry development history: a reference to one of this
//! project's issues (`#13`, `(issue #11)`, `issue 33`), "this change", "this issue", "this
//! stop", "before this change", "the old server", "tested here", "fetched here", or a commit a
//! statement was true "at" (`at 67e234e`). History belongs in CHANGELOG.md (and
//! packaging/debian/changelog), which are not read here.
//!
//! Allowed: another project's issue, named with its project (`kubernetes#101553`,
//! `eksctl#7697`, `aws/aws-node-termination-handler#186`), and a measured figure that names the
//! commit it was measured at, in one of two forms: `measured at `8b9378c`` or a date before it,
//! `on 2026-11-23 at `a4a9a5f``. [`MEASURED_TABLE_ROWS`] lists the rows of measured tables,
//! which only a new measurement rewrites, that name their commit otherwise.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Phrases that only tell a story of the project's making, matched case-insensitively on word
/// boundaries.
const PHRASES: &[&str] = &[
    "this change",
    "this issue",
    "this stop",
    "the old server",
    "tested here",
    "fetched here",
];

/// The way a commit may be named after "at": as what a figure was measured at.
const MEASURED_AT: &str = "measured at";

/// Rows of measured tables that name their commit without either form, as (file, the words in
/// the row, lower case). Only a new measurement rewrites such a row.
const MEASURED_TABLE_ROWS: &[(&str, &str)] =
    &[("docs/performance.md", "2.4 mib (aarch64) rss at `67e234e`")];

/// Whether `s` ends with a date, `2026-11-23`.
fn ends_with_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[b.len() - 10..].iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// One piece of history found: the 1-based column and the words that gave it away.
#[derive(Debug, PartialEq, Eq)]
struct Hit {
    column: usize,
    what: String,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `lower[at..]` starts `phrase` on word boundaries.
fn phrase_at(lower: &str, at: usize, phrase: &str) -> bool {
    if !lower[at..].starts_with(phrase) {
        return false;
    }
    let before = lower[..at].chars().next_back();
    let after = lower[at + phrase.len()..].chars().next();
    !before.is_some_and(is_word) && !after.is_some_and(is_word)
}

/// The digits at the start of `s`.
fn leading_digits(s: &str) -> &str {
    &s[..s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len())]
}

/// A bare issue number `#13`: `#` not glued to a project name (`kubernetes#1`), a variable
/// (`$#`, `${#x}`) or an entity (`&#123;`), followed by digits that do not go on into a word or
/// a heading anchor (`(#3-wire-kubelet)`).
fn bare_issue_refs(line: &str, out: &mut Vec<Hit>) {
    for (i, _) in line.match_indices('#') {
        let before = line[..i].chars().next_back();
        if before.is_some_and(|c| is_word(c) || "$&{/.-".contains(c)) {
            continue;
        }
        let digits = leading_digits(&line[i + 1..]);
        if digits.is_empty() {
            continue;
        }
        let after = line[i + 1 + digits.len()..].chars().next();
        if after.is_some_and(|c| is_word(c) || c == '-') {
            continue;
        }
        out.push(Hit {
            column: i + 1,
            what: format!("#{digits}"),
        });
    }
}

/// `issue 33`, `issue #11`, `issues 4`: this project's issue by number.
fn issue_words(lower: &str, out: &mut Vec<Hit>) {
    for word in ["issue", "issues"] {
        for (i, _) in lower.match_indices(word) {
            if !phrase_at(lower, i, word) {
                continue;
            }
            let rest = &lower[i + word.len()..];
            let Some(rest) = rest.strip_prefix(' ') else {
                continue;
            };
            let rest = rest.strip_prefix('#').unwrap_or(rest);
            let digits = leading_digits(rest);
            if !digits.is_empty() && !rest[digits.len()..].starts_with(|c: char| is_word(c)) {
                out.push(Hit {
                    column: i + 1,
                    what: format!("{word} {digits}"),
                });
            }
        }
    }
}

/// `at 67e234e` or ``at `67e234e` ``: a commit something was true at, unless it is what a figure
/// was measured at. A hash is 7 to 40 hex digits with at least one letter and one digit in it
/// (so `at 1000000 requests` is no commit).
fn at_commit(lower: &str, out: &mut Vec<Hit>) {
    for (i, _) in lower.match_indices("at ") {
        if !phrase_at(lower, i, "at") {
            continue;
        }
        let rest = &lower[i + 3..];
        let rest = rest.strip_prefix('`').unwrap_or(rest);
        let hex: &str = &rest[..rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len())];
        let ends_word = !rest[hex.len()..].starts_with(|c: char| is_word(c));
        let looks_like_commit = (7..=40).contains(&hex.len())
            && hex.chars().any(|c| c.is_ascii_digit())
            && hex.chars().any(|c| c.is_ascii_alphabetic());
        if !looks_like_commit || !ends_word {
            continue;
        }
        let measured =
            lower[..i + 2].ends_with(MEASURED_AT) || ends_with_date(lower[..i].trim_end());
        if !measured {
            out.push(Hit {
                column: i + 1,
                what: format!("at {hex}"),
            });
        }
    }
}

/// Every piece of development history in one line of text.
fn history_in_line(line: &str) -> Vec<Hit> {
    let lower = line.to_ascii_lowercase();
    let mut out = vec![];
    bare_issue_refs(line, &mut out);
    issue_words(&lower, &mut out);
    for p in PHRASES {
        for (i, _) in lower.match_indices(p) {
            if phrase_at(&lower, i, p) {
                out.push(Hit {
                    column: i + 1,
                    what: (*p).to_string(),
                });
            }
        }
    }
    at_commit(&lower, &mut out);
    out.sort_by_key(|h| h.column);
    out
}

/// How a file is read: all of it (Markdown), or only its comments, and which comment marker.
#[derive(Clone, Copy)]
enum Read {
    Whole,
    Comments(&'static str),
}

/// The text of a line that is read: all of it, or its comment (a line starting with the marker,
/// or the part after ` MARKER ` in a line of code). `#!` is a shebang, not a comment.
fn read_part(line: &str, how: Read) -> Option<(usize, &str)> {
    match how {
        Read::Whole => Some((0, line)),
        Read::Comments(marker) => {
            let trimmed = line.trim_start();
            if trimmed.starts_with(marker) && !trimmed.starts_with("#!") {
                return Some((line.len() - trimmed.len(), trimmed));
            }
            let spaced = format!(" {marker} ");
            line.find(&spaced).map(|i| (i + 1, &line[i + 1..]))
        }
    }
}

/// Every file the test reads, with how: tracked files only.
fn files() -> Vec<(String, Read)> {
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "README.md",
            "docs",
            "packaging",
            "polkit",
            "examples",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success(), "git ls-files failed");
    let mut v = vec![];
    for f in String::from_utf8(out.stdout).unwrap().lines() {
        let name = f.rsplit('/').next().unwrap();
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        let how = if ext == "md" {
            Read::Whole
        } else if f.starts_with("packaging/assets/")
            || f == "packaging/debian/changelog"
            || f == "packaging/debian/copyright"
            || ext == "json"
        {
            // Generated from the code (man pages, completions), a changelog, or no comments.
            continue;
        } else if f.starts_with("polkit/") && (ext == "rules" || ext == "example") {
            Read::Comments("//")
        } else {
            Read::Comments("#")
        };
        v.push((f.to_string(), how));
    }
    v
}

#[test]
fn a_planted_history_is_found() {
    let found =
        |s: &str| -> Vec<String> { history_in_line(s).into_iter().map(|h| h.what).collect() };
    assert_eq!(found("Fixed in #13, see there."), ["#13"]);
    assert_eq!(found("the unit (issue #11) allows it"), ["issue 11", "#11"]);
    assert_eq!(found("as asked in issue 33."), ["issue 33"]);
    assert_eq!(found("Before this change nthd exited."), ["this change"]);
    assert_eq!(found("This issue made it fail"), ["this issue"]);
    assert_eq!(found("since this stop was added"), ["this stop"]);
    assert_eq!(found("unlike the old server"), ["the old server"]);
    assert_eq!(found("Tested here on Debian 12"), ["tested here"]);
    assert_eq!(found("the key fetched here"), ["fetched here"]);
    assert_eq!(found("the sizes at `67e234e` were"), ["at 67e234e"]);
    assert_eq!(found("true at 8b9378cd and later"), ["at 8b9378cd"]);
    // The checker itself fails on a planted file line.
    let planted = "- Fixed the drain (#42), tested here at `abc1234`.";
    assert_eq!(
        history_in_line(planted).len(),
        3,
        "{:?}",
        history_in_line(planted)
    );
}

#[test]
fn upstream_references_and_measured_figures_are_allowed() {
    for ok in [
        "GNS needs systemd > 219 (kubernetes#101553).",
        "misnamed, instances were terminated (eksctl#7697)",
        "a maintainer, aws/aws-node-termination-handler#186",
        "Azure/AKS#3528 reports Spot nodes not drained",
        "see [Wire kubelet](#3-wire-kubelet)",
        "2.0 GB instead of 6.1 GB (measured at `8b9378c`)",
        "the size measured at 67e234e4 was",
        "`bash bench/run.sh` on 2026-11-23 at `a4a9a5f`, load average 0.2",
        "at 1000000 requests a second",
        "look at deadbeef",
        "shell: echo $# ${#args[@]} &#123;",
        "the issue is a block inhibitor",
        "issues a heartbeat every 30 s",
        "this changes nothing",
        "look at deadbeef (no digit: a word, not a commit)",
    ] {
        let hits = history_in_line(ok);
        assert!(hits.is_empty(), "{ok:?} flagged: {hits:?}");
    }
}

#[test]
fn comments_are_read_and_code_is_not() {
    let how = Read::Comments("#");
    assert_eq!(
        read_part("# fixed in #13", how),
        Some((0, "# fixed in #13"))
    );
    assert_eq!(
        read_part("  x=1  # tested here", how),
        Some((7, "# tested here"))
    );
    assert_eq!(read_part("#!/bin/sh", how), None);
    assert_eq!(read_part("n=${#list[@]}", how), None);
    assert_eq!(
        read_part("// a rule", Read::Comments("//")),
        Some((0, "// a rule"))
    );
}

#[test]
fn operator_text_carries_no_development_history() {
    let files = files();
    assert!(
        files.iter().any(|(f, _)| f == "README.md") && files.len() > 20,
        "too few files read: {}",
        files.len()
    );
    let mut found = vec![];
    for (f, how) in &files {
        let Ok(text) = std::fs::read_to_string(root().join(f)) else {
            continue; // not text
        };
        for (n, line) in text.lines().enumerate() {
            let Some((offset, part)) = read_part(line, *how) else {
                continue;
            };
            let lower = line.to_ascii_lowercase();
            let table_row = MEASURED_TABLE_ROWS
                .iter()
                .any(|(file, words)| f == file && lower.contains(words));
            for h in history_in_line(part).into_iter().filter(|_| !table_row) {
                found.push(format!(
                    "{f}:{}:{}: {:?} in: {}",
                    n + 1,
                    offset + h.column,
                    h.what,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "development history in operator text (remove it; history goes in CHANGELOG.md):\n{}",
        found.join("\n")
    );
}
