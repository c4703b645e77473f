//! The module graph the docs describe: dependencies run one way (no cycle between the
//! top-level modules of `src/`), and the shared vocabulary depends on nothing.
//!
//! A module's dependencies are the `crate::<module>` paths in its code (comments and its
//! `#[cfg(test)] mod tests` left out); `super::` stays inside a module.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src/ is readable").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `crate::X` names in `code`, outside comments and unit tests.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let code = code.split("#[cfg(test)]\nmod tests").next().unwrap_or(code);
    let mut refs = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for part in line.split("crate::").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                refs.insert(name);
            }
        }
    }
    refs
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut g = Graph::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "main" || module == "lib" {
            continue;
        }
        let refs = crate_refs(&std::fs::read_to_string(&f).unwrap());
        let deps = g.entry(module.clone()).or_default();
        deps.extend(refs.into_iter().filter(|r| *r != module));
    }
    g
}

/// A cycle through `from`, if there is one, as the modules on it.
fn cycle(g: &Graph, from: &str) -> Option<Vec<String>> {
    fn walk(g: &Graph, at: &str, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> bool {
        if let Some(i) = path.iter().position(|m| m == at) {
            path.drain(..i);
            path.push(at.to_string());
            return true;
        }
        if !done.insert(at.to_string()) {
            return false;
        }
        path.push(at.to_string());
        for next in g.get(at).into_iter().flatten() {
            if g.contains_key(next) && walk(g, next, path, done) {
                return true;
            }
        }
        path.pop();
        false
    }
    let mut path = Vec::new();
    walk(g, from, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn module_dependencies_run_one_way() {
    let g = graph();
    assert!(g.len() > 10, "found only {} modules in src/", g.len());
    for m in g.keys() {
        if let Some(c) = cycle(&g, m) {
            panic!("module cycle: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_vocabulary_depends_on_nothing() {
    let g = graph();
    for m in ["notice", "timefmt"] {
        assert_eq!(
            g.get(m),
            Some(&BTreeSet::new()),
            "{m} depends on {:?}",
            g[m]
        );
    }
    let policy: Vec<_> = g["policy"].iter().map(String::as_str).collect();
    assert_eq!(policy, ["notice", "timefmt"], "policy.rs must stay pure");
}

#[test]
fn a_planted_cycle_is_found() {
    let mut g = graph();
    g.get_mut("notice").unwrap().insert("policy".into());
    let c = cycle(&g, "notice").expect("notice -> policy -> notice is a cycle");
    assert_eq!(c.first(), c.last(), "{c:?}");
}

/// The lint table of a Cargo.toml: the lines from `[<prefix>lints.rust]` to the next table
/// that is not `[<prefix>lints.clippy]`, comments left out.
fn lint_table(manifest: &str, prefix: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest))
        .unwrap_or_else(|e| panic!("{manifest}: {e}"));
    let (rust, clippy) = (
        format!("[{prefix}lints.rust]"),
        format!("[{prefix}lints.clippy]"),
    );
    let mut inside = false;
    let mut rows = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == rust || line == clippy;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            rows.push(line.replace(&format!("[{prefix}"), "["));
        }
    }
    rows
}

/// The fuzz crate is a workspace of its own and cannot inherit `[workspace.lints]`: its copy
/// must say the same, or the fuzz targets drift out of the standard unnoticed.
/// Where each crate root forbids `unsafe`: the compiler then refuses it anywhere in the crate,
/// tests included.
#[test]
fn no_unsafe_in_nthd() {
    for root in ["src/lib.rs", "src/main.rs"] {
        let code =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(root)).unwrap();
        let head: Vec<&str> = code
            .lines()
            .take_while(|l| !l.starts_with("use ") && !l.starts_with("pub "))
            .collect();
        assert!(
            head.contains(&"#![forbid(unsafe_code)]"),
            "{root} must forbid unsafe code: rustix and std serve every system call nthd makes"
        );
    }
}

#[test]
fn the_fuzz_crate_has_the_workspace_lints() {
    let workspace = lint_table("Cargo.toml", "workspace.");
    assert!(
        workspace.iter().any(|l| l.starts_with("unwrap_used")),
        "no [workspace.lints] found in Cargo.toml: {workspace:?}"
    );
    assert_eq!(lint_table("fuzz/Cargo.toml", ""), workspace);
}

/// The brief's "no function over about 60 lines", held: a function's lines from its `fn` line to
/// its closing brace. 64 leaves room for a declarative table such as the metrics registry's.
const MAX_FN_LINES: usize = 64;

/// `code` with string, char and comment contents blanked, so braces in them do not count.
fn code_only(code: &str) -> String {
    let (mut out, mut chars) = (String::with_capacity(code.len()), code.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            'r' if matches!(chars.peek(), Some('#' | '"')) => {
                let mut hashes = 0;
                while chars.peek() == Some(&'#') {
                    chars.next();
                    hashes += 1;
                }
                if chars.next() != Some('"') {
                    continue;
                }
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut seen = String::new();
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    seen.push(c);
                    if seen.ends_with(&close) {
                        break;
                    }
                }
            }
            '"' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => out.push('\n'),
                        _ => {}
                    }
                }
            }
            '\'' if matches!(chars.clone().nth(1), Some('\'')) => {
                chars.next();
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The functions of `code` longer than `max` lines, as `NAME (LINES lines, from line N)`.
fn long_functions(code: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("fn ").filter(|&a| {
            let before = line[..a].trim();
            before.is_empty()
                || before.ends_with("pub")
                || before.ends_with(')')
                || before.ends_with("async")
                || before.ends_with("const")
                || before.ends_with("unsafe")
        }) else {
            continue;
        };
        let (mut depth, mut opened) = (0i32, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
            for c in l.chars() {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                opened |= c == '{';
            }
            if opened && depth <= 0 {
                let name: String = line[at + 3..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if j - i + 1 > max {
                    found.push(format!("{name} ({} lines, from line {})", j - i + 1, i + 1));
                }
                break;
            }
        }
    }
    found
}

/// src/, the testkit and tests/ (tests/*.rs and every module under it): a test is read as
/// often as the code it checks.
#[test]
fn no_function_in_src_the_testkit_or_the_tests_is_over_about_60_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("testkit/src"), &mut files);
    rust_files(&root.join("testkit/tests"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    for dir in ["src", "testkit/src", "tests", "tests/common"] {
        let here = root.join(dir);
        assert!(
            files.iter().any(|f| f.parent() == Some(here.as_path())),
            "no Rust file read in {dir}"
        );
    }
    let mut long = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for fun in long_functions(&code, MAX_FN_LINES) {
            long.push(format!(
                "{}: {fun}",
                f.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(files.len() > 80, "found only {} files", files.len());
    assert!(
        long.is_empty(),
        "over {MAX_FN_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn a_planted_long_function_is_found() {
    let body = "    let x = '{';\n    let s = \"}}\";\n    let r = r#\"\"}\"#;\n".repeat(27);
    let code = format!("fn short() {{\n}}\n\npub(crate) async fn planted() {{\n{body}}}\n");
    let long = long_functions(&code_only(&code), MAX_FN_LINES);
    assert_eq!(long, vec!["planted (83 lines, from line 4)".to_string()]);
}

/// logind's reads (on a `Logind`, its `Reads` or the executor's `reads()`) that must never be
/// bounded by hand: `src/logind.rs` bounds each by its one `READ_TIMEOUT`.
const LOGIND_READS: [&str; 5] = [
    ".can(",
    ".inhibit_delay_max(",
    ".preparing_for_shutdown(",
    ".system_state(",
    ".list_inhibitors(",
];

/// The `timeout(...)` calls of `code` (already [`code_only`]) whose arguments call a logind
/// read, as `LINE: ARGUMENTS`. The arguments run to the matching parenthesis, so a timeout on
/// anything else nearby (a zbus proxy of the drain watcher, an HTTP request) does not count.
fn timeouts_around_logind(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("timeout(") {
        let args = &code[at + "timeout(".len()..];
        let mut depth = 1;
        let end = args
            .char_indices()
            .find_map(|(i, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                (depth == 0).then_some(i)
            })
            .unwrap_or(args.len());
        let args = &args[..end];
        let on_logind = args.contains("logind") || args.contains(".reads()");
        if on_logind && LOGIND_READS.iter().any(|r| args.contains(r)) {
            let line = code[..at].matches('\n').count() + 1;
            found.push(format!(
                "{line}: {}",
                args.split_whitespace().collect::<String>()
            ));
        }
    }
    found
}

/// Issue 33, item 1: logind owns its reads. No file in src/ but logind.rs wraps a logind read
/// in a `timeout(` of its own (daemon.rs had six, once.rs a literal 3 s, simulate.rs another
/// constant): one bound, one error text, one reset of a hung connection.
#[test]
fn no_timeout_around_a_logind_read_outside_logind_rs() {
    let wrapped = hits_in_src(&["src/logind.rs"], timeouts_around_logind);
    assert!(
        wrapped.is_empty(),
        "bounded by hand:\n{}",
        wrapped.join("\n")
    );
}

/// The lines of `code` (unit tests cut off) that run a future to its end on the calling thread.
fn blocks_on(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]\nmod tests").next().unwrap_or(code);
    code.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("block_on("))
        .map(|(n, l)| format!("{}: {}", n + 1, l.trim()))
        .collect()
}

/// Only the entry point (`src/lib.rs`'s `run`) runs a future to its end with `block_on`:
/// anywhere else it would block a runtime's thread, or nest runtimes.
#[test]
fn block_on_only_in_the_entry_point() {
    let stray = hits_in_src(&["src/lib.rs"], blocks_on);
    assert!(
        stray.is_empty(),
        "block_on elsewhere:\n{}",
        stray.join("\n")
    );
    let planted = "fn f() {\n    rt.block_on(async { 1 });\n}\n";
    assert_eq!(blocks_on(&code_only(planted)).len(), 1);
}

/// What `find` reports in each file of src/ but `skip` (read through [`code_only`]), as
/// `FILE:HIT`.
fn hits_in_src(skip: &[&str], find: fn(&str) -> Vec<String>) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 40, "found only {} files", files.len());
    let mut hits = Vec::new();
    for f in &files {
        let name = f.strip_prefix(root).unwrap().display().to_string();
        if skip.contains(&name.as_str()) {
            continue;
        }
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        hits.extend(find(&code).into_iter().map(|hit| format!("{name}:{hit}")));
    }
    hits
}

/// The check finds what daemon.rs and once.rs did before issue 33, and lets the executor's
/// bound on the power action itself, and the drain watcher's own proxy reads, pass.
#[test]
fn a_hand_bounded_logind_read_is_found() {
    let before = "let answer = tokio::time::timeout(\n    LOGIND_READ_TIMEOUT,\n    \
                  self.keepalive().executor.logind().can(action),\n)\n.await;\n\
                  match tokio::time::timeout(Duration::from_secs(3), logind.inhibit_delay_max()).await {}\n";
    assert_eq!(
        timeouts_around_logind(&code_only(before)),
        vec![
            "1: LOGIND_READ_TIMEOUT,self.keepalive().executor.logind().can(action),".to_string(),
            "6: Duration::from_secs(3),logind.inhibit_delay_max()".to_string(),
        ]
    );
    let allowed = "tokio::time::timeout(CALL_TIMEOUT, self.logind.act(action)).await;\n\
                   tokio::time::timeout(READ, proxy.list_inhibitors()).await;\n";
    assert!(timeouts_around_logind(&code_only(allowed)).is_empty());
}

/// The lines of `code` (outside comments and its unit tests) that give a poll interval, wait
/// or boost a duration literal: a field or constant whose name says poll, interval, wait or
/// boost set to `Duration::from_secs(N)` / `from_millis(N)`, or a clap `default_value` written
/// as a literal duration for one of the timing settings.
fn poll_defaults(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]\nmod tests").next().unwrap_or(code);
    let timing_words = [
        "poll",
        "interval",
        "wait",
        "boost",
        "request_timeout",
        "connect_timeout",
    ];
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or(t.strip_prefix("pub "))
            .unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let name: String = t
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let assigned = t[name.len()..].trim_start().starts_with([':', '=']);
        let named = timing_words
            .iter()
            .any(|w| name.to_ascii_lowercase().contains(w));
        let literal = ["Duration::from_secs(", "Duration::from_millis("]
            .iter()
            .any(|f| {
                line.split(f)
                    .skip(1)
                    .any(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            });
        let clap_literal = line.contains("default_value = \"")
            && ["POLL", "WAIT", "BOOST", "TIMEOUT"]
                .iter()
                .any(|w| line.contains(w));
        if (named && assigned && literal) || clap_literal {
            out.push(line.trim().to_string());
        }
    }
    out
}

#[test]
fn no_default_poll_interval_outside_the_timings_plan() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let plan = root.join("src/timings.rs");
    let mut files = vec![
        root.join("src/config.rs"),
        root.join("src/settings.rs"),
        root.join("src/daemon.rs"),
        root.join("src/imds.rs"),
    ];
    for dir in ["src/provider", "src/config", "src/settings"] {
        rust_files(&root.join(dir), &mut files);
    }
    files.retain(|f| *f != plan);
    assert!(files.len() > 10, "found only {} files", files.len());
    for f in files {
        let hits = poll_defaults(&std::fs::read_to_string(&f).unwrap());
        assert!(
            hits.is_empty(),
            "{}: a default timing written outside src/timings.rs: {hits:?}",
            f.display()
        );
    }
    // The plan itself holds them, so the scan finds what it looks for.
    let planted = poll_defaults(&std::fs::read_to_string(plan).unwrap());
    assert!(
        planted.iter().any(|l| l.contains("AZURE_POLL")),
        "{planted:?}"
    );
    let planted = poll_defaults(
        "    poll_interval: Duration::from_secs(1),\n#[arg(long, env = \"NTHD_GCP_WAIT\", \
         default_value = \"60s\")]\n    let d = (Duration::from_secs(self.wait_secs()) / 2);\n",
    );
    assert_eq!(planted.len(), 2, "{planted:?}");
}

/// The shell side of the length rules (tests/shell-functions.sh: no function over 60 lines,
/// top-level code within 20), so `cargo test` holds the scripts to them as CI's shellcheck stage
/// does.
#[test]
fn shell_structure_holds_and_its_check_finds_a_planted_script() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for args in [&["--self-test"][..], &[][..]] {
        let out = std::process::Command::new("bash")
            .arg(root.join("tests/shell-functions.sh"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "bash tests/shell-functions.sh {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The lines of `code` (already [`code_only`], unit tests cut off) that open a TCP connection,
/// std's or tokio's: `TcpStream::connect`, or `std::net`'s `TcpStream` named or imported.
fn sockets(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]\nmod tests").next().unwrap_or(code);
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        if line.contains("std::net::TcpStream")
            || (line.contains("use std::net::") && line.contains("TcpStream"))
            || line.contains("TcpStream::connect")
        {
            found.push(format!("{}: {}", n + 1, line.trim()));
        }
    }
    found
}

/// Only `src/imds/blocking.rs` opens a socket to the metadata service: one transport, one
/// retry rule, one set of limits.
#[test]
fn only_the_metadata_transport_opens_tcp_connections() {
    let stray = hits_in_src(&["src/imds/blocking.rs"], sockets);
    assert!(
        stray.is_empty(),
        "TCP connections opened outside src/imds/blocking.rs:\n{}",
        stray.join("\n")
    );
}

/// The check finds std's and tokio's connections, and lets listeners pass.
#[test]
fn a_stray_connection_is_found() {
    let stray =
        "let s = std::net::TcpStream::connect(a)?;\nuse std::net::{SocketAddr, TcpStream};\n\
                 let s = tokio::net::TcpStream::connect((ip, port)).await?;\n";
    assert_eq!(sockets(&code_only(stray)).len(), 3);
    let fine = "let l = tokio::net::TcpListener::bind(addr).await?;\n\
                use tokio::net::{TcpListener, TcpStream};\n";
    assert!(
        sockets(&code_only(fine)).is_empty(),
        "{:?}",
        sockets(&code_only(fine))
    );
}

/// The lines of `code` (unit tests cut off) that declare an `async fn` or await.
fn asynchronous(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]\nmod tests").next().unwrap_or(code);
    code.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("async fn") || l.contains(".await"))
        .map(|(n, l)| format!("{}: {}", n + 1, l.trim()))
        .collect()
}

/// The providers and the metadata client are synchronous: plain functions that block their
/// thread, so no signature hides whether a call blocks. The reader thread calls them with no
/// runtime; the commands on a thread of their own.
#[test]
fn the_providers_and_the_metadata_client_are_synchronous() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![
        root.join("src/imds.rs"),
        root.join("src/varlink.rs"),
        root.join("src/daemon/reader.rs"),
    ];
    rust_files(&root.join("src/provider"), &mut files);
    rust_files(&root.join("src/imds"), &mut files);
    let mut hits = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        let name = f.strip_prefix(root).unwrap().display();
        hits.extend(
            asynchronous(&code)
                .into_iter()
                .map(|h| format!("{name}:{h}")),
        );
    }
    assert!(files.len() >= 11, "{files:?}");
    assert!(hits.is_empty(), "asynchronous code:\n{}", hits.join("\n"));
    let planted = "async fn observe(&mut self) -> Observation {\n    self.read().await\n}\n";
    assert_eq!(asynchronous(&code_only(planted)).len(), 2);
}
