//! The documentation cannot drift silently from what it describes: settings and defaults,
//! counts, licences, artifact sizes, fuzz targets, `nthd check`'s names, links, metadata
//! paths, the status file's fields, the journal's `MESSAGE_ID`s and `nthd once`'s output are
//! read from the source of truth and compared with README.md and docs/*.md. The grace-period
//! table in docs/clouds.md is checked against `nthd check`'s verdict, and every grace-period
//! number elsewhere against the table. The `NTHD_*` names, nthd's flags and the nthd versions
//! shown are checked in README.md, docs/, packaging/README.md, packaging/ami/, the cloud-init
//! example, CHANGELOG.md, bench/README.md and every man page. The settings template
//! (packaging/default/nthd) lists every setting with the code's default. Each test's message
//! names the file (and line) to fix.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// README.md and every docs/*.md, as (path, text).
fn all_docs() -> Vec<(String, String)> {
    let mut v = vec![("README.md".to_string(), read("README.md"))];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for p in pages {
        let rel = format!("docs/{}", p.file_name().unwrap().to_string_lossy());
        v.push((rel.clone(), read(&rel)));
    }
    v
}

/// The text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn block<'a>(text: &'a str, name: &str, file: &str) -> &'a str {
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let b = text
        .find(&begin)
        .unwrap_or_else(|| panic!("{file} has no {begin} marker"));
    let e = text[b..]
        .find(&end)
        .unwrap_or_else(|| panic!("{file} has no {end} marker"));
    &text[b + begin.len()..b + e]
}

/// The cells of a markdown table row, trimmed; `None` for a line that is not a row or is the
/// header separator.
fn cells(line: &str) -> Option<Vec<String>> {
    let l = line.trim();
    if !l.starts_with('|') || l.starts_with("|---") || l.starts_with("| ---") {
        return None;
    }
    // `\|` inside a cell is an escaped bar, not a separator.
    let l = l.replace("\\|", "\u{1}");
    Some(
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().replace('\u{1}', "|"))
            .collect(),
    )
}

/// The first column of every table row in `text` (the header row included), backticks removed.
fn first_column(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(cells)
        .map(|c| c[0].replace('`', ""))
        .collect()
}

/// The first column of the marked table `name` in `file`, without its header `header`.
fn table_rows(file: &str, name: &str, header: &str) -> BTreeSet<String> {
    let text = read(file);
    first_column(block(&text, name, file))
        .into_iter()
        .filter(|c| c != header)
        .collect()
}

/// The text of `src` before its `#[cfg(test)]` module.
fn non_test(src: &str) -> &str {
    src.split("#[cfg(test)]").next().unwrap()
}

/// Every string literal that follows `prefix` (after optional whitespace), e.g. every
/// `"…"` after `const NAME: &str =`.
fn literals_after(src: &str, prefix: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = src;
    while let Some(i) = rest.find(prefix) {
        rest = &rest[i + prefix.len()..];
        let t = rest.trim_start();
        if let Some(s) = t.strip_prefix('"') {
            if let Some(end) = s.find('"') {
                out.push(s[..end].to_string());
            }
        }
    }
    out
}

/// Every whole number written right before ` word` in `text` (`29 scenarios` → 29).
fn numbers_before(text: &str, word: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    let pat = format!(" {word}");
    for line in text.lines() {
        let mut from = 0;
        while let Some(i) = line[from..].find(&pat) {
            let at = from + i;
            let digits: String = line[..at]
                .chars()
                .rev()
                .take_while(char::is_ascii_digit)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if !digits.is_empty() {
                out.push((digits.parse().unwrap(), line.to_string()));
            }
            from = at + pat.len();
        }
    }
    out
}

// ------------------------------------------------------------------------ settings and ports

#[test]
fn readme_documents_every_env_var_and_default() {
    let doc = read("docs/configuration.md");
    let cmd = nthd::testing::config::Cli::command();
    let row = |env: &str| {
        doc.lines()
            .find(|l| l.starts_with(&format!("| `{env}` |")))
            .map(str::to_string)
    };
    for a in cmd.get_arguments() {
        let Some(env) = a.get_env() else { continue };
        let env = env.to_string_lossy();
        assert!(
            doc.contains(&format!("`{env}`")),
            "docs/configuration.md does not document {env}"
        );
        if env.starts_with("NTHD_ACTION_") {
            continue; // checked below, against the policy's defaults
        }
        let r = row(&env).unwrap_or_else(|| panic!("no docs/configuration.md row for {env}"));
        let c = cells(&r).unwrap();
        let long = a.get_long().expect("every setting has a long flag");
        assert!(
            c[1].contains(&format!("`--{long}`")),
            "docs/configuration.md row for {env} does not name --{long}: {r}"
        );
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            let want = format!("`{}`", defaults.join(","));
            assert!(
                c[2].starts_with(&want),
                "docs/configuration.md gives {env}'s default as {:?}; clap says {want}",
                c[2]
            );
        }
    }
    for k in nthd::testing::notice::KINDS {
        let r = row(k.env).unwrap_or_else(|| panic!("no docs/configuration.md row for {}", k.env));
        assert!(
            r.contains(&format!(
                "| {}",
                nthd::testing::policy::default_action(k.kind).name()
            )),
            "docs/configuration.md row for {} does not give its default {}: {r}",
            k.env,
            nthd::testing::policy::default_action(k.kind)
        );
    }
}

/// The settings template's commented assignments (`#NTHD_X=value`), as (name, value, line).
fn template_assignments(template: &str) -> Vec<(String, String, usize)> {
    template
        .lines()
        .enumerate()
        .filter_map(|(n, l)| {
            let (name, value) = l.strip_prefix("#NTHD_")?.split_once('=')?;
            Some((format!("NTHD_{name}"), value.to_string(), n + 1))
        })
        .collect()
}

/// Each assignment of the template by name, with its value and line; a name listed twice fails.
fn template_once(lines: &[(String, String, usize)]) -> BTreeMap<String, (String, usize)> {
    let mut seen = BTreeMap::new();
    for (name, value, n) in lines {
        if let Some(first) = seen.insert(name.clone(), (value.clone(), *n)) {
            panic!(
                "packaging/default/nthd:{n}: {name} is listed twice (first on line {})",
                first.1
            );
        }
    }
    seen
}

/// packaging/default/nthd, installed as the settings file, lists every setting once as a
/// commented assignment with its default, and stays a file systemd reads as an
/// `EnvironmentFile=` that sets nothing: every line is a comment or blank.
#[test]
fn the_settings_template_lists_every_setting_with_its_default() {
    let template = read("packaging/default/nthd");
    for (n, l) in template.lines().enumerate() {
        assert!(
            l.is_empty() || l.starts_with('#'),
            "packaging/default/nthd:{}: not a comment, so it would set a value: {l}",
            n + 1
        );
    }
    let lines = template_assignments(&template);
    let seen = template_once(&lines);
    // Every setting, with the default clap gives it (when it has a literal one).
    let cmd = nthd::testing::config::Cli::command();
    let mut settings = BTreeSet::new();
    for a in cmd.get_arguments() {
        let Some(env) = a.get_env() else { continue };
        let env = env.to_string_lossy().into_owned();
        settings.insert(env.clone());
        let (value, n) = seen.get(&env).unwrap_or_else(|| {
            panic!("packaging/default/nthd has no line #{env}=… for the setting {env}")
        });
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            assert_eq!(
                *value,
                defaults.join(","),
                "packaging/default/nthd:{n}: {env}'s default is {:?} in the code",
                defaults.join(",")
            );
        }
    }
    for k in nthd::testing::notice::KINDS {
        settings.insert(k.env.to_string());
        let (value, n) = seen.get(k.env).unwrap_or_else(|| {
            panic!(
                "packaging/default/nthd has no line #{}=… for that kind",
                k.env
            )
        });
        let want = nthd::testing::policy::default_action(k.kind).name();
        assert_eq!(
            value, want,
            "packaging/default/nthd:{n}: {}'s default is {want} in the code",
            k.env
        );
    }
    // No line for a setting the code does not have.
    for (name, _, n) in &lines {
        assert!(
            settings.contains(name),
            "packaging/default/nthd:{n}: {name} is no setting of nthd"
        );
    }
}

/// Every `NTHD_METRICS_LISTEN=ADDR:PORT` and "port N" in the docs, the settings template, the
/// packaging notes and the code's own example names the same port.
#[test]
fn the_metrics_port_is_the_same_everywhere() {
    let template = read("packaging/default/nthd");
    let port_of = |text: &str| -> Vec<(String, String)> {
        let mut v = vec![];
        for line in text.lines() {
            for (i, _) in line.match_indices("NTHD_METRICS_LISTEN=") {
                let addr: String = line[i + "NTHD_METRICS_LISTEN=".len()..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && !"`\"',)".contains(*c))
                    .collect();
                if let Some((_, p)) = addr.rsplit_once(':') {
                    if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) {
                        v.push((p.to_string(), line.to_string()));
                    }
                }
            }
            for (n, _) in numbers_before_word_after(line, "port ") {
                v.push((n, line.to_string()));
            }
        }
        v
    };
    let want = port_of(&template)
        .first()
        .map(|(p, _)| p.clone())
        .expect("packaging/default/nthd shows NTHD_METRICS_LISTEN=ADDR:PORT");
    let mut files = all_docs();
    files.push(("packaging/default/nthd".into(), template.clone()));
    files.push(("packaging/README.md".into(), read("packaging/README.md")));
    files.push(("src/metrics.rs".into(), read("src/metrics.rs")));
    let mut seen = 0;
    for (f, text) in &files {
        for (p, line) in port_of(text) {
            seen += 1;
            assert_eq!(
                p, want,
                "{f} names metrics port {p}, packaging/default/nthd {want}: {line}"
            );
        }
    }
    assert!(
        seen >= 4,
        "the metrics port is quoted in only {seen} places"
    );
    assert!(
        read("src/metrics.rs").contains(&format!(":{want}")),
        "src/metrics.rs's example address does not use port {want}"
    );
}

/// "port 9877" → 9877 (only where the word before the number is `port`).
fn numbers_before_word_after(line: &str, word: &str) -> Vec<(String, usize)> {
    line.match_indices(word)
        .filter_map(|(i, _)| {
            let n: String = line[i + word.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (n.len() >= 2).then_some((n, i))
        })
        .collect()
}

/// The unit's `IPAddressAllow=` values, in order.
fn unit_allow_list() -> Vec<String> {
    let unit = read("systemd/nthd.service");
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("IPAddressAllow="))
        .expect("systemd/nthd.service has an IPAddressAllow= line");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_unit_admits_every_default_endpoint_and_the_docs_list_what_it_admits() {
    use nthd::testing::notice::Cloud;
    let allowed = unit_allow_list();
    for cloud in Cloud::ALL {
        // An address, not a name: IPAddressDeny=any also blocks DNS.
        let host = cloud.default_endpoint().trim_start_matches("http://");
        assert!(
            allowed.iter().any(|a| a == host),
            "{cloud}'s default endpoint {host} is not in the unit's IPAddressAllow= {allowed:?}"
        );
    }
    let security = read("docs/security.md");
    let packaging = read("packaging/README.md");
    let line = format!("IPAddressAllow={}", allowed.join(" "));
    assert!(
        packaging.contains(&line),
        "packaging/README.md does not quote {line}"
    );
    for a in &allowed {
        assert!(
            security.contains(a.as_str()),
            "docs/security.md does not list {a}"
        );
    }
}

// ---------------------------------------------------------------------------------- counts

/// tests/e2e/run.sh's `SCENARIOS=( … )`.
fn e2e_scenarios() -> Vec<String> {
    let run = read("tests/e2e/run.sh");
    let start = run
        .find("SCENARIOS=(")
        .expect("tests/e2e/run.sh has SCENARIOS=(");
    let rest = &run[start + "SCENARIOS=(".len()..];
    let list = &rest[..rest.find(')').unwrap()];
    list.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_scenario_list_the_scenario_table_and_every_scenario_count_agree() {
    let list = e2e_scenarios();
    let listed: BTreeSet<&str> = list.iter().map(String::as_str).collect();
    assert_eq!(listed.len(), list.len(), "a scenario is listed twice");
    // Every scen_* function is listed, and every listed name has one.
    let mut defined = BTreeSet::new();
    for f in std::fs::read_dir(root().join("tests/e2e")).unwrap() {
        let p = f.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name == "run.sh" || name.starts_with("scen-") && name.ends_with(".sh")) {
            continue;
        }
        for l in std::fs::read_to_string(&p).unwrap().lines() {
            if let Some(f) = l.strip_prefix("scen_") {
                if let Some(n) = f.strip_suffix("() {") {
                    defined.insert(n.replace('_', "-"));
                }
            }
        }
    }
    let listed_owned: BTreeSet<String> = list.iter().cloned().collect();
    assert_eq!(
        defined, listed_owned,
        "tests/e2e's scen_* functions and run.sh's SCENARIOS differ"
    );
    // docs/testing.md's table: one row per scenario.
    let rows = table_rows("docs/testing.md", "scenarios", "scenario");
    assert_eq!(
        rows, listed_owned,
        "docs/testing.md's scenario table and tests/e2e/run.sh's SCENARIOS differ"
    );
    // Every "N scenarios" in README.md and docs/.
    for (f, text) in &all_docs() {
        for (n, line) in numbers_before(text, "scenarios") {
            assert_eq!(
                n,
                list.len(),
                "{f} says {n} scenarios; tests/e2e/run.sh --list has {}: {line}",
                list.len()
            );
        }
    }
}

/// fuzz/fuzz_targets/*.rs, by name.
fn fuzz_targets() -> BTreeSet<String> {
    std::fs::read_dir(root().join("fuzz/fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Every provider function that parses a metadata body is called by a fuzz target, or named
/// in the fuzz table's block as not fuzzed.
fn every_body_parser_is_fuzzed_or_declared(targets: &BTreeSet<String>) {
    let testing = read("docs/testing.md");
    let table = block(&testing, "fuzz-targets", "docs/testing.md");
    let not_fuzzed = table.split_once("Not fuzzed:").map_or("", |(_, rest)| rest);
    let sources: Vec<String> = targets
        .iter()
        .map(|t| read(&format!("fuzz/fuzz_targets/{t}.rs")))
        .collect();
    for f in std::fs::read_dir(root().join("src/provider")).unwrap() {
        let p = f.unwrap().path();
        let module = p.file_stem().unwrap().to_string_lossy().into_owned();
        let src = std::fs::read_to_string(&p).unwrap();
        let src = non_test(&src);
        for (i, _) in src.match_indices("fn parse_") {
            let sig = &src[i..i + src[i..].find('{').unwrap_or(src.len() - i)];
            if !sig.contains("body: &str") {
                continue;
            }
            let name = &sig[3..sig.find('(').unwrap()];
            let fuzzed = sources
                .iter()
                .any(|s| s.contains(&format!("provider::{module}")) && s.contains(name));
            let declared = not_fuzzed.contains(&format!("`{module}::{name}`"));
            assert!(
                fuzzed || declared,
                "src/provider/{module}.rs's {name} parses a metadata body but no fuzz target \
                 calls it: add one, or name `{module}::{name}` as not fuzzed in \
                 docs/testing.md's fuzz-targets block"
            );
            assert!(
                !(fuzzed && declared),
                "docs/testing.md says `{module}::{name}` is not fuzzed, but a target calls it"
            );
        }
    }
}

#[test]
fn the_fuzz_table_lists_every_target_and_every_notice_parser_is_fuzzed() {
    let targets = fuzz_targets();
    // fuzz/Cargo.toml builds each one.
    let cargo = read("fuzz/Cargo.toml");
    let bins: BTreeSet<String> = literals_after(&cargo, "[[bin]]\nname =")
        .into_iter()
        .collect();
    assert_eq!(
        bins, targets,
        "fuzz/Cargo.toml's [[bin]]s and fuzz/fuzz_targets/ differ"
    );

    let rows = table_rows("docs/testing.md", "fuzz-targets", "target");
    assert_eq!(
        rows, targets,
        "docs/testing.md's fuzz target table and fuzz/fuzz_targets/ differ"
    );
    for (f, text) in all_docs() {
        for word in ["cargo-fuzz targets", "fuzz targets"] {
            for (n, line) in numbers_before(&text, word) {
                assert_eq!(
                    n,
                    targets.len(),
                    "{f} says {n} {word}; fuzz/fuzz_targets has {}: {line}",
                    targets.len()
                );
            }
        }
    }

    every_body_parser_is_fuzzed_or_declared(&targets);
}

// --------------------------------------------------------------------------------- licences

#[test]
fn the_licence_list_is_deny_tomls() {
    let deny = read("deny.toml");
    let lic = &deny[deny.find("[licenses]").unwrap()..];
    let allow = &lic[lic.find("allow = [").unwrap() + "allow = [".len()..];
    let allow = &allow[..allow.find(']').unwrap()];
    let allowed: BTreeSet<String> = allow
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter_map(|l| l.strip_prefix('"'))
        .map(|l| l[..l.find('"').unwrap()].to_string())
        .collect();
    let security = read("docs/security.md");
    let listed: BTreeSet<String> = block(&security, "licences", "docs/security.md")
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert_eq!(
        listed, allowed,
        "docs/security.md's licence list and deny.toml's [licenses] allow differ"
    );
}

// ------------------------------------------------------------------------------------ sizes

/// docs/performance.md's sizes block: artifact (with `VERSION`) → bytes.
fn quoted_sizes() -> BTreeMap<String, u64> {
    let perf = read("docs/performance.md");
    block(&perf, "sizes", "docs/performance.md")
        .lines()
        .filter_map(cells)
        .filter(|c| c.len() >= 2 && c[0].starts_with('`'))
        .map(|c| {
            let n: String = c[1].chars().filter(char::is_ascii_digit).collect();
            (
                c[0].trim_matches('`').to_string(),
                n.parse()
                    .unwrap_or_else(|_| panic!("no byte count for {}", c[0])),
            )
        })
        .collect()
}

/// The sizes of what packaging/build.sh builds are quoted once, in docs/performance.md's
/// sizes block (packaging/build.sh checks them against the build), and nowhere else.
#[test]
fn artifact_sizes_are_quoted_in_one_place() {
    let sizes = quoted_sizes();
    let mut want = vec![];
    for (deb, rpm, uname) in [
        ("amd64", "x86_64", "x86_64"),
        ("arm64", "aarch64", "aarch64"),
    ] {
        want.push(format!("nthd_VERSION-1_{deb}.deb"));
        want.push(format!("nthd-VERSION-1.{rpm}.rpm"));
        want.push(format!("nthd-VERSION-{uname}.tar.gz"));
        want.push(format!("nthd-VERSION-{uname}.raw"));
        want.push(format!("target/{uname}-unknown-linux-musl/release/nthd"));
    }
    for w in &want {
        assert!(
            sizes.contains_key(w),
            "docs/performance.md's sizes block has no row for `{w}`"
        );
    }
    let build = read("packaging/build.sh");
    let max: u64 = build
        .lines()
        .find_map(|l| l.strip_prefix("MAX_BINARY_BYTES=$(("))
        .map(|l| {
            l.trim_end_matches("))")
                .split('*')
                .map(|n| n.trim().parse::<u64>().unwrap())
                .product()
        })
        .expect("packaging/build.sh sets MAX_BINARY_BYTES");
    for (k, v) in &sizes {
        assert!(*v > 0, "{k}: 0 bytes");
        if k.ends_with("/nthd") {
            assert!(*v <= max, "{k}: {v} bytes, over the {max}-byte budget");
        }
    }
    // Nowhere else: no line outside the block puts a shipped artifact next to a size.
    let artifact = [
        ".deb",
        ".rpm",
        ".tar.gz",
        ".raw",
        "shipped",
        "static build",
        "static binary",
    ];
    for (f, text) in all_docs() {
        let outside = match f.as_str() {
            "docs/performance.md" => {
                let b = text.find("<!-- sizes:begin -->").unwrap();
                let e = text.find("<!-- sizes:end -->").unwrap();
                format!("{}{}", &text[..b], &text[e..])
            }
            _ => text.clone(),
        };
        for line in outside.lines() {
            if artifact.iter().any(|a| line.contains(a)) && has_size(line) {
                panic!(
                    "{f} quotes an artifact size outside docs/performance.md's sizes block \
                     (quote it there, or say which commit it was measured at): {line}"
                );
            }
        }
    }
}

/// Whether `line` has a number followed by a size unit, such as `990 KB` or `2,867,136 B`.
/// A size measured at a named commit (`at 67e234e`) is history, not a claim about the build.
fn has_size(line: &str) -> bool {
    if line.contains(" at `") || line.contains("measured at") {
        return false;
    }
    let b = line.as_bytes();
    for unit in [
        " KB", " MB", " MiB", " KiB", " B ", " B|", " B)", " B,", " bytes",
    ] {
        for (i, _) in line.match_indices(unit) {
            if i > 0 && b[i - 1].is_ascii_digit() {
                return true;
            }
        }
    }
    false
}

// ------------------------------------------------------------------------ nthd check's names

/// The names `nthd check` prints, read from src/check.rs.
fn check_names() -> BTreeSet<String> {
    let src = read("src/check.rs");
    let src = non_test(&src);
    let mut names: BTreeSet<String> = BTreeSet::new();
    names.extend(literals_after(src, "const NAME: &str ="));
    names.extend(literals_after(src, "check("));
    names.extend(literals_after(src, "vec![check("));
    for (i, _) in src.match_indices("\"logind permits ") {
        let s = &src[i + 1..];
        names.insert(s[..s.find('"').unwrap()].to_string());
    }
    for (i, _) in src.match_indices("\"no block inhibitor") {
        let s = &src[i + 1..];
        names.insert(s[..s.find('"').unwrap()].to_string());
    }
    names
}

#[test]
fn the_readme_troubleshooting_table_names_every_check() {
    let names = check_names();
    assert!(names.len() >= 10, "found only {names:?} in src/check.rs");
    let readme = read("README.md");
    let section = &readme[readme
        .find("## Troubleshooting")
        .expect("README.md has ## Troubleshooting")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let rows: BTreeSet<String> = first_column(section)
        .into_iter()
        .filter(|c| c != "check")
        .flat_map(|c| c.split(", ").map(str::to_string).collect::<Vec<_>>())
        .collect();
    let missing: Vec<_> = names.difference(&rows).collect();
    let unknown: Vec<_> = rows.difference(&names).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "README.md's troubleshooting table and src/check.rs differ: checks without a row \
         {missing:?}; rows naming no check {unknown:?}"
    );
}

// ------------------------------------------------------------------------------------ links

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a markdown file's headings make (GitHub numbers repeats: `x`, `x-1`).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fence = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence || !l.starts_with('#') {
            continue;
        }
        let h = l.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every `[text](target)` outside code, as (line, target).
fn links(text: &str) -> Vec<(String, String)> {
    let mut out = vec![];
    let mut fence = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop inline code spans: `[x](y)` inside backticks is not a link.
        let plain: String = l.split('`').step_by(2).collect::<Vec<_>>().join("");
        for (i, _) in plain.match_indices("](") {
            let rest = &plain[i + 2..];
            if let Some(end) = rest.find(')') {
                out.push((l.to_string(), rest[..end].to_string()));
            }
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut files: Vec<String> = all_docs().into_iter().map(|(f, _)| f).collect();
    files.push("tests/e2e/README.md".into());
    files.extend(extra_files().into_iter().filter(|f| f.ends_with(".md")));
    let mut checked = 0;
    for f in &files {
        let text = read(f);
        let dir = Path::new(f).parent().unwrap();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let rel = if path.is_empty() {
                PathBuf::from(f)
            } else {
                dir.join(path)
            };
            let full = root().join(&rel);
            assert!(
                full.exists(),
                "{f} links to {target}, but {} does not exist: {line}",
                rel.display()
            );
            if let Some(a) = anchor {
                let t = std::fs::read_to_string(&full).unwrap();
                assert!(
                    anchors(&t).contains(a),
                    "{f} links to {target}, but {} has no heading with anchor #{a}: {line}",
                    rel.display()
                );
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found");
}

// --------------------------------------------------------------------------- metadata paths

#[test]
fn every_metadata_path_is_in_docs_clouds() {
    let clouds = read("docs/clouds.md");
    let mut n = 0;
    for f in std::fs::read_dir(root().join("src/provider")).unwrap() {
        let p = f.unwrap().path();
        let src = std::fs::read_to_string(&p).unwrap();
        for path in literals_after(non_test(&src), "_PATH: &str =") {
            n += 1;
            assert!(
                clouds.contains(&format!("`{path}`")),
                "{} reads {path}, which docs/clouds.md's paths tables do not list",
                p.display()
            );
        }
    }
    assert!(n >= 20, "found only {n} *_PATH constants");
}

// ------------------------------------------------------------------------------ MESSAGE_IDs

/// The journald `MESSAGE_ID`s the code logs with: every `const MSG_…: &str = "…"` in src/.
fn message_ids() -> BTreeMap<String, String> {
    let out = std::process::Command::new("git")
        .args(["ls-files", "src"])
        .current_dir(root())
        .output()
        .unwrap();
    let mut ids = BTreeMap::new();
    for f in String::from_utf8(out.stdout).unwrap().lines() {
        if !f.ends_with(".rs") {
            continue;
        }
        let Ok(src) = std::fs::read_to_string(root().join(f)) else {
            continue;
        };
        for l in src.lines() {
            let Some(rest) = l.split("const MSG_").nth(1) else {
                continue;
            };
            let name = format!("MSG_{}", &rest[..rest.find(':').unwrap()]);
            if let Some(id) = literals_after(l, "=").into_iter().next() {
                ids.insert(id, name);
            }
        }
    }
    ids
}

/// Every run of exactly 32 lower-case hex digits in `text`.
fn hex32(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || ('a'..='f').contains(&c) {
            run.push(c);
            continue;
        }
        if run.len() == 32 && !c.is_ascii_alphanumeric() {
            out.push(run.clone());
        }
        run.clear();
    }
    out
}

/// Every `MESSAGE_ID` the docs give is one the code logs with, and docs/operations.md's table
/// lists them all.
#[test]
fn every_message_id_in_the_docs_is_the_codes() {
    let ids = message_ids();
    assert!(ids.len() >= 6, "too few MESSAGE_IDs found in src/: {ids:?}");
    for (f, text) in &all_docs() {
        for id in hex32(text) {
            assert!(
                ids.contains_key(&id),
                "{f} gives the MESSAGE_ID {id}, which no const MSG_… in src/ has"
            );
        }
    }
    let ops = read("docs/operations.md");
    for (id, name) in &ids {
        assert!(
            ops.contains(&format!("| `{id}` |")),
            "docs/operations.md's MESSAGE_ID table has no row for {name} ({id})"
        );
    }
}

// ------------------------------------------------------------------------------ status file

/// The fields of the status file's top-level struct (`pub(crate) struct Status` in
/// src/status.rs), as serde writes them (none is renamed).
fn status_fields() -> Vec<String> {
    let src = read("src/status.rs");
    let start = src
        .find("pub(crate) struct Status {")
        .expect("src/status.rs has pub(crate) struct Status");
    let body = &src[start..];
    let body = &body[..body.find("\n}").unwrap()];
    assert!(
        !body.contains("serde(rename"),
        "a Status field is renamed: read its name from the attribute"
    );
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_string)
        .collect()
}

/// docs/observability.md's status-file table names every field the daemon writes.
#[test]
fn the_status_file_table_names_every_field() {
    let fields = status_fields();
    assert!(fields.len() > 20, "too few Status fields found: {fields:?}");
    let doc = read("docs/observability.md");
    let table = block(&doc, "status-fields", "docs/observability.md");
    let named: BTreeSet<String> = table
        .lines()
        .filter_map(cells)
        .flat_map(|c| {
            c[0].split('`')
                .skip(1)
                .step_by(2)
                .map(|n| {
                    n.split('.')
                        .next()
                        .unwrap()
                        .trim_end_matches("[]")
                        .to_string()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for f in &fields {
        assert!(
            named.contains(f),
            "docs/observability.md's status-file table has no row naming `{f}`, which \
             src/status.rs writes"
        );
    }
}

// ------------------------------------------------------------------------------- nthd once

/// docs/commands.md's `nthd once` example is what `nthd once` prints: each line matches, with
/// times and the port made constant ([`normalize`]) and `…` standing for any text.
#[test]
fn the_once_example_is_what_once_prints() {
    use nthd::testing::provider::aws;
    use nthd_testkit::imds::{MockImds, Response};

    let commands = read("docs/commands.md");
    let example = block(&commands, "once-example", "docs/commands.md");
    let mut lines = example
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with("```"));
    let cmdline = lines.next().unwrap();
    assert!(
        cmdline.starts_with("$ nthd once --provider aws --imds-endpoint http://127.0.0.1:"),
        "docs/commands.md's example does not start with the command: {cmdline}"
    );
    let want: Vec<&str> = lines.collect();

    let m = MockImds::start_blocking("127.0.0.1:0").unwrap();
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(133);
    m.set(
        aws::SPOT_PATH,
        Response::json(
            200,
            format!(
                r#"{{"action":"terminate","time":"{}"}}"#,
                nthd::testing::timefmt::format_rfc3339(at)
            ),
        ),
    );
    let out = common::nthd_once("aws", &m.url(), &[]);
    let got = String::from_utf8_lossy(&out.stdout);
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(
        got.len(),
        want.len(),
        "docs/commands.md's once example has {} lines, nthd once printed {}:\n{}",
        want.len(),
        got.len(),
        got.join("\n")
    );
    for (w, g) in want.iter().zip(&got) {
        assert!(
            matches_example(w, g),
            "docs/commands.md's once example says\n  {w}\nnthd once printed\n  {g}"
        );
    }
}

/// What changes from run to run made constant: RFC 3339 times read `TIME`, `(in 2m13s)` reads
/// `(in D)`, the mock's port reads `PORT`. Every other number must match.
fn normalize(s: &str) -> String {
    let is_time = |t: &[u8]| {
        t.len() >= 20
            && t.iter().enumerate().take(20).all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    };
    let mut out = String::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if is_time(rest.as_bytes()) {
            out.push_str("TIME");
            rest = &rest[20..];
        } else if let Some(r) = rest.strip_prefix("(in ") {
            out.push_str("(in D)");
            rest = &r[r.find(')').map_or(r.len(), |i| i + 1)..];
        } else if let Some(r) = rest.strip_prefix("127.0.0.1:") {
            out.push_str("127.0.0.1:PORT");
            rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// `want`'s pieces between `…` appear in `got` in order, the first at the start and the last
/// at the end.
fn matches_example(want: &str, got: &str) -> bool {
    let want = normalize(want);
    let got = normalize(got);
    let pieces: Vec<&str> = want.split('…').collect();
    if pieces.len() == 1 {
        return want == got;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !got.starts_with(first) || !got.ends_with(last) || got.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &got[first.len()..got.len() - last.len()];
    for p in &pieces[1..pieces.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------- grace periods (#32)

/// One row of docs/clouds.md's grace-period table.
struct GraceRow {
    line: usize,
    cloud: Option<nthd::testing::notice::Cloud>,
    lifecycle: Option<nthd::testing::notice::Lifecycle>,
    /// `NTHD_GCP_PREEMPTION_NOTICE` as the capacity cell sets it (`spot, NTHD_…=2m`).
    gcp_notice: std::time::Duration,
    lead: Option<std::time::Duration>,
    fits: std::time::Duration,
    fails_above: Option<std::time::Duration>,
    text: String,
}

/// A duration cell (`1m50s`), or `None` for `—` and `never …`.
fn duration_cell(cell: &str, file: &str, line: usize) -> Option<std::time::Duration> {
    let c = cell.trim_matches('`');
    if c == "—" || c.starts_with("never") {
        return None;
    }
    Some(
        nthd::testing::timefmt::parse_duration(c)
            .unwrap_or_else(|e| panic!("{file}:{line}: `{c}` is not a duration: {e}")),
    )
}

/// docs/clouds.md's grace-period table, the one place the grace-period numbers are stated.
fn grace_rows() -> Vec<GraceRow> {
    use nthd::testing::notice::{Cloud, Lifecycle};
    const FILE: &str = "docs/clouds.md";
    let text = read(FILE);
    let body = block(&text, "grace-periods", FILE);
    let first = text[..text.find(body).unwrap()].lines().count();
    let mut rows = vec![];
    for (i, l) in body.lines().enumerate() {
        let Some(c) = cells(l) else { continue };
        if c[0] == "cloud" {
            continue;
        }
        let line = first + i;
        assert_eq!(
            c.len(),
            6,
            "{FILE}:{line}: a grace-period row has 6 cells: {l}"
        );
        let cloud = match c[0].as_str() {
            "not detected" => None,
            name => Some(
                *Cloud::ALL
                    .iter()
                    .find(|k| k.name().eq_ignore_ascii_case(name))
                    .unwrap_or_else(|| panic!("{FILE}:{line}: no cloud {name}")),
            ),
        };
        let (capacity, gcp_notice) = match c[1].split_once(", `NTHD_GCP_PREEMPTION_NOTICE=") {
            Some((cap, d)) => (cap, duration_cell(d.trim_end_matches('`'), FILE, line)),
            None => (c[1].as_str(), None),
        };
        let lifecycle = match capacity {
            "unknown" => None,
            "spot" => Some(Lifecycle::Spot),
            "preemptible" => Some(Lifecycle::Preemptible),
            "on-demand" => Some(Lifecycle::OnDemand),
            other => panic!(
                "{FILE}:{line}: capacity {other} is none of spot, preemptible, on-demand, unknown"
            ),
        };
        rows.push(GraceRow {
            line,
            cloud,
            lifecycle,
            gcp_notice: gcp_notice.unwrap_or_default(),
            lead: duration_cell(&c[3], FILE, line),
            fits: duration_cell(&c[4], FILE, line)
                .unwrap_or_else(|| panic!("{FILE}:{line}: the fits column needs a duration")),
            fails_above: duration_cell(&c[5], FILE, line),
            text: l.to_string(),
        });
    }
    rows
}

/// One row of the grace-period table against what `nthd check` says around its values.
fn check_grace_row(r: &GraceRow) {
    use nthd::testing::{check::drain_verdict, timefmt::format_duration};
    use std::time::Duration;
    let sec = Duration::from_secs(1);
    let at = |budget| drain_verdict(r.cloud, r.lifecycle, r.gcp_notice, budget);
    let cell = |d| format_duration(d);
    let f = format!("docs/clouds.md:{}", r.line);
    // What check names as the value to set, from the fix it gives for a too-long drain.
    let over = r.fails_above.map_or(Duration::from_secs(3600), |d| d + sec);
    let (st, fix) = at(over);
    let fix = fix.unwrap_or_default();
    let named = fix
        .split("at most ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("nothing");
    assert_eq!(
        named,
        cell(r.fits),
        "{f}: nthd check names `at most {named}` for a {} drain, the table {}: {}",
        cell(over),
        cell(r.fits),
        r.text
    );
    // The value that fits does not fail (on GCP on-demand it gets the spot note).
    assert_ne!(
        at(r.fits).0,
        "fail",
        "{f}: nthd check fails {}",
        cell(r.fits)
    );
    match r.fails_above {
        Some(limit) => {
            assert_eq!(
                st,
                "fail",
                "{f}: nthd check does not fail {} : {}",
                cell(over),
                r.text
            );
            let (st, _) = at(limit);
            assert_ne!(
                st,
                "fail",
                "{f}: nthd check already fails at {}, the table says above it: {}",
                cell(limit),
                r.text
            );
            assert_eq!(
                r.lead,
                Some(limit),
                "{f}: check fails above the notice's lead time, so both columns say {}",
                cell(limit)
            );
        }
        None => assert_ne!(
            st,
            "fail",
            "{f}: the table says never, but nthd check fails a {} drain: {}",
            cell(over),
            r.text
        ),
    }
}

#[test]
fn the_grace_period_table_is_what_nthd_check_computes() {
    use nthd::testing::notice::Cloud;
    let rows = grace_rows();
    // Every cloud, on spot and on-demand, and the undetected cloud have a row.
    for cloud in Cloud::ALL {
        for lc in ["spot", "on-demand"] {
            assert!(
                rows.iter().any(|r| r.cloud == Some(cloud)
                    && r.lifecycle.map(nthd::testing::notice::Lifecycle::name) == Some(lc)),
                "docs/clouds.md's grace-period table has no row for {cloud} {lc}"
            );
        }
    }
    assert!(rows
        .iter()
        .any(|r| r.cloud.is_none() && r.lifecycle.is_none()));
    for r in &rows {
        check_grace_row(r);
    }
}

/// The files outside docs/clouds.md that state a grace-period number, and the cloud a line is
/// about when it names none (the AMI files are for EKS, so AWS).
const GRACE_FILES: &[(&str, Option<&str>)] = &[
    ("README.md", None),
    ("docs/install.md", None),
    ("packaging/README.md", None),
    ("packaging/cloud-init/user-data.yaml", None),
    ("packaging/ami/README.md", Some("aws")),
    ("packaging/ami/nthd.pkr.hcl", Some("aws")),
    ("packaging/ami/validate.sh", Some("aws")),
    ("packaging/ami/nodeconfig-user-data.mime", Some("aws")),
    (
        "packaging/ami/nodeadm.d/50-nthd-graceful-shutdown.yaml",
        Some("aws"),
    ),
];

/// The clouds a line names (EKS is AWS, GKE GCP, AKS Azure).
fn clouds_named(line: &str) -> Vec<&'static str> {
    let l = line.to_lowercase();
    let names: &[(&str, &[&str])] = &[
        ("aws", &["aws", "eks", "ec2"]),
        ("gcp", &["gcp", "gke", "google"]),
        ("azure", &["azure", "aks"]),
        ("alibaba", &["alibaba"]),
        ("tencent", &["tencent"]),
    ];
    names
        .iter()
        .filter(|(_, w)| w.iter().any(|w| l.contains(w)))
        .map(|(c, _)| *c)
        .collect()
}

/// Every grace-period number in a line: (`fits` or `fails above`, the duration, as written).
/// `at most 110 s`, `at or below `20s``, `SPOT_BUDGET = 110` state what fits; `above 120s`
/// and `over 60 s` what fails.
fn grace_numbers(line: &str) -> Vec<(&'static str, std::time::Duration, String)> {
    let phrases: &[(&str, &str)] = &[
        ("at most ", "fits"),
        ("at or below ", "fits"),
        ("≤ ", "fits"),
        ("SPOT_BUDGET = ", "fits"),
        ("above ", "fails above"),
        ("over ", "fails above"),
        ("about ", "lead time"),
        ("~", "lead time"),
    ];
    let mut out = vec![];
    for (p, kind) in phrases {
        for (i, _) in line.match_indices(p) {
            let rest = line[i + p.len()..].replace('`', "");
            let mut w = rest.split_whitespace();
            let Some(first) = w.next() else { continue };
            let first = first.trim_end_matches([',', ')', ';', '.']);
            let written = match w.next().map(|u| u.trim_end_matches([',', ')', ';', '.'])) {
                Some(u @ ("s" | "min")) if first.chars().all(|c| c.is_ascii_digit()) => {
                    format!("{first}{u}")
                }
                _ if *p == "SPOT_BUDGET = " => format!("{first}s"),
                _ => first.to_string(),
            };
            if written.chars().all(|c| c.is_ascii_digit()) {
                continue; // `above 0`: a count, not a duration
            }
            if let Ok(d) = nthd::testing::timefmt::parse_duration(&written) {
                out.push((*kind, d, written));
            }
        }
    }
    out
}

#[test]
fn every_grace_period_number_is_the_tables() {
    use nthd::testing::timefmt::format_duration;
    let rows = grace_rows();
    let mut checked = 0;
    let docs: Vec<String> = all_docs()
        .into_iter()
        .map(|(f, _)| f)
        .filter(|f| !["README.md", "docs/install.md"].contains(&f.as_str()))
        .collect();
    let files = GRACE_FILES
        .iter()
        .map(|(f, c)| (f.to_string(), *c))
        .chain(docs.into_iter().map(|f| (f, Some("any"))));
    for (file, default_cloud) in files {
        // docs/ besides install.md: only lines that name the grace period itself.
        let words: &[&str] = match default_cloud {
            Some("any") => &["shutdowngraceperiod", "grace period"],
            _ => &["grace", "drain", "notice", "budget", "inhibitdelay"],
        };
        let default_cloud = default_cloud.filter(|c| *c != "any");
        let text = read(&file);
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in text.lines().enumerate() {
            // About a grace period: the line, or the one before it, says so.
            let about = format!("{} {line}", lines[n.saturating_sub(1)]).to_lowercase();
            if !words.iter().any(|w| about.contains(w)) {
                continue;
            }
            let named = clouds_named(line);
            let clouds: Vec<&str> = match (named.is_empty(), default_cloud) {
                (false, _) => named,
                (true, Some(c)) => vec![c],
                (true, None) => vec!["aws", "gcp", "azure", "alibaba", "tencent"],
            };
            for (kind, d, written) in grace_numbers(line) {
                let right: BTreeSet<String> = rows
                    .iter()
                    .filter(|r| r.cloud.is_some_and(|c| clouds.contains(&c.name())))
                    .filter_map(|r| match kind {
                        "fits" => Some(r.fits),
                        "lead time" => r.lead,
                        _ => r.fails_above,
                    })
                    .map(format_duration)
                    .collect();
                checked += 1;
                assert!(
                    right.contains(&format_duration(d)),
                    "{file}:{}: `{written}` ({kind}) is not docs/clouds.md's grace-period table: \
                     for {} it says {kind} {right:?}: {line}",
                    n + 1,
                    clouds.join("/"),
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} grace-period numbers found");
}

// ------------------------------------------- packaging, CHANGELOG, bench, man pages (#32)

/// Everything an operator reads besides README.md and docs/: packaging's README, the AMI and
/// cloud-init examples, CHANGELOG, bench/README and every man page (packaging/assets/*.8).
fn extra_files() -> Vec<String> {
    let mut v: Vec<String> = [
        "packaging/README.md",
        "packaging/ami/README.md",
        "packaging/ami/nthd.pkr.hcl",
        "packaging/ami/validate.sh",
        "packaging/ami/nodeconfig-user-data.mime",
        "packaging/cloud-init/user-data.yaml",
        "CHANGELOG.md",
        "bench/README.md",
    ]
    .map(String::from)
    .to_vec();
    for (dir, ext) in [
        ("packaging/ami/nodeadm.d", "yaml"),
        ("packaging/assets", "8"),
    ] {
        let mut more: Vec<String> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .map(|p| format!("{dir}/{}", p.file_name().unwrap().to_string_lossy()))
            .collect();
        more.sort();
        v.extend(more);
    }
    v
}

/// README.md, docs/*.md and [`extra_files`], as (path, text).
fn every_read_file() -> Vec<(String, String)> {
    let mut v = all_docs();
    v.extend(extra_files().into_iter().map(|f| {
        let t = read(&f);
        (f, t)
    }));
    v
}

/// Every `NTHD_*` name the code uses: the Rust sources, the scripts and the packaging files
/// that are not documentation (what the daemon, the suite, the bench and the build read).
fn nthd_variables_in_code() -> BTreeSet<String> {
    let out = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(root())
        .output()
        .unwrap();
    let mut known = BTreeSet::new();
    for f in String::from_utf8(out.stdout).unwrap().lines() {
        if f.ends_with(".md") || f.ends_with(".8") || f.starts_with("docs/") {
            continue;
        }
        let Ok(t) = std::fs::read_to_string(root().join(f)) else {
            continue;
        };
        known.extend(nthd_names(&t).into_iter().map(|(_, n)| n));
        if f.ends_with(".rs") {
            // A tracing field `nthd_event_id = …` is the journal field NTHD_EVENT_ID.
            known.extend(
                nthd_names(&t.to_uppercase())
                    .into_iter()
                    .filter_map(|(_, n)| {
                        t.to_uppercase().contains(&format!("{n} = ")).then_some(n)
                    }),
            );
        }
    }
    known
}

/// Every `NTHD_*` name in a text, with its line number (1-based). A prefix (`NTHD_ACTION_`
/// before `<KIND>`) is not a name.
fn nthd_names(text: &str) -> Vec<(usize, String)> {
    let mut out = vec![];
    for (n, l) in text.lines().enumerate() {
        for (i, _) in l.match_indices("NTHD_") {
            let name: String = l[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.ends_with('_') {
                out.push((n + 1, name));
            }
        }
    }
    out
}

#[test]
fn every_nthd_variable_named_exists() {
    let known = nthd_variables_in_code();
    assert!(known.contains("NTHD_POLL_INTERVAL") && known.len() > 40);
    // Placeholders in usage lines.
    let placeholders = ["NTHD_X"];
    let mut checked = 0;
    for (f, text) in every_read_file() {
        for (line, name) in nthd_names(&text) {
            checked += 1;
            assert!(
                known.contains(&name) || placeholders.contains(&name.as_str()),
                "{f}:{line}: names {name}, which no code, script or unit reads"
            );
        }
    }
    assert!(checked > 100, "only {checked} NTHD_* names found");
}

/// Every long option of nthd and its subcommands (`--json`), `--help` and `--version`.
fn nthd_flags() -> BTreeSet<String> {
    fn walk(c: &clap::Command, out: &mut BTreeSet<String>) {
        for a in c.get_arguments() {
            out.extend(a.get_long().map(|l| format!("--{l}")));
            out.extend(
                a.get_all_aliases()
                    .into_iter()
                    .flatten()
                    .map(|l| format!("--{l}")),
            );
        }
        for s in c.get_subcommands() {
            walk(s, out);
        }
    }
    let mut out: BTreeSet<String> = ["--help", "--version"].map(String::from).into();
    walk(&nthd::testing::config::Cli::command(), &mut out);
    out
}

/// The `--flags` given to nthd on a line: the words after `nthd ` (or `nthd\-` in a man page)
/// up to the end of the code span or a shell operator.
fn flags_after_nthd(line: &str) -> Vec<String> {
    let mut out = vec![];
    let l = line
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "");
    for (i, _) in l.match_indices("nthd ") {
        // `nthd check`, `/usr/bin/nthd once`, not `nthd.service` or `the nthd package`.
        if i > 0 && !matches!(l.as_bytes()[i - 1], b' ' | b'`' | b'/' | b'$' | b'(' | b'"') {
            continue;
        }
        for w in l[i + 5..].split_whitespace() {
            if w.starts_with('`') || w.contains('`') && !w.starts_with("--") {
                break;
            }
            if ["|", "&&", ";", "||", ">", "2>&1", "#"].contains(&w) {
                break;
            }
            if let Some(f) = w.strip_prefix("--") {
                let f: String = f
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !f.is_empty() {
                    out.push(format!("--{f}"));
                }
            }
        }
    }
    out
}

#[test]
fn every_nthd_flag_named_exists() {
    let known = nthd_flags();
    assert!(
        known.contains("--json") && known.contains("--deadline-in"),
        "{known:?}"
    );
    let mut checked = 0;
    for (f, text) in every_read_file() {
        for (n, line) in text.lines().enumerate() {
            for flag in flags_after_nthd(line) {
                checked += 1;
                assert!(
                    known.contains(&flag),
                    "{f}:{}: gives nthd {flag}, which none of its commands takes: {line}",
                    n + 1
                );
            }
        }
    }
    assert!(checked > 10, "only {checked} nthd flags found");
}

/// Cargo.toml's version.
fn cargo_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Every nthd version a line shows: `nthd 0.2.0`, `nthd_0.2.0_amd64.deb`,
/// `nthd-0.2.0-1.x86_64.rpm`, `nthd v0.2.0`.
fn versions_shown(line: &str) -> Vec<String> {
    let mut out = vec![];
    for (i, _) in line.match_indices("nthd") {
        let rest = &line[i + 4..];
        let Some(rest) = rest
            .strip_prefix(' ')
            .or_else(|| rest.strip_prefix('_'))
            .or_else(|| rest.strip_prefix('-'))
        else {
            continue;
        };
        let rest = rest.strip_prefix('v').unwrap_or(rest);
        let v: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let v = v.trim_end_matches('.');
        if v.split('.').count() == 3 && v.split('.').all(|p| !p.is_empty()) {
            out.push(v.to_string());
        }
    }
    out
}

#[test]
fn every_nthd_version_shown_is_cargo_tomls() {
    let want = cargo_version();
    // CHANGELOG: the newest heading is this version; older headings and entries are history.
    let changelog = read("CHANGELOG.md");
    let newest = changelog.lines().find(|l| l.starts_with("## ")).unwrap();
    assert!(
        newest.starts_with(&format!("## {want} ")),
        "CHANGELOG.md's newest heading is `{newest}`, Cargo.toml's version is {want}"
    );
    let mut checked = 0;
    for (f, text) in every_read_file() {
        if f == "CHANGELOG.md" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            // A line explicitly about an older release says so.
            let l = line.to_lowercase();
            if [
                "previous release",
                "older release",
                "upgrade from",
                "upgrading from",
            ]
            .iter()
            .any(|w| l.contains(w))
            {
                continue;
            }
            for v in versions_shown(line) {
                checked += 1;
                assert_eq!(
                    v,
                    want,
                    "{f}:{}: shows nthd {v}, Cargo.toml's version is {want}: {line}",
                    n + 1
                );
            }
        }
    }
    assert!(checked >= 3, "only {checked} versions found");
}

/// The stage names tests/run-all.sh gives `stage`, `lane`, `lanes_wait` and `background`
/// (tests/suite-lib.sh),
/// in order: the names its closing table prints.
fn suite_stage_names() -> Vec<String> {
    read("tests/run-all.sh")
        .lines()
        .filter_map(|l| {
            let t = l.trim_start();
            let rest = ["stage \"", "lane \"", "lanes_wait \"", "background \""]
                .iter()
                .find_map(|p| t.strip_prefix(p))?;
            Some(rest[..rest.find('"')?].to_string())
        })
        .collect()
}

/// docs/testing.md's "Measured times" is the suite's own closing table (target/suite/times.md
/// of the run it names), so it has a row for every stage the suite runs, by the name it prints:
/// a stage added, split or renamed without a measured run fails here.
#[test]
fn measured_times_name_every_stage_of_the_suite() {
    let names = suite_stage_names();
    assert!(names.len() >= 20, "too few stages found: {names:?}");
    let testing = read("docs/testing.md");
    let table = block(&testing, "suite-times", "docs/testing.md");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    for n in &names {
        assert!(
            rows.iter().any(|r| r.contains(&format!(" {n} |"))),
            "docs/testing.md's measured times have no row for the stage \"{n}\" of \
             tests/run-all.sh: paste target/suite/times.md of a run of this suite"
        );
    }
}

/// One spot row of the grace-period table, drawn: the notice's window, nthd's read and
/// `PowerOff`, kubelet's drain while its delay lock holds the shutdown, the drain report and
/// the halt, against the cloud's deadline.
fn timeline_row(
    y: u32,
    label: &str,
    lead: std::time::Duration,
    fits: std::time::Duration,
) -> String {
    const X0: f64 = 260.0;
    let px = |d: std::time::Duration| X0 + d.as_secs_f64() * 680.0 / 300.0;
    let (end, drain, deadline) = (
        px(lead),
        px(fits + std::time::Duration::from_secs(1)),
        px(lead),
    );
    format!(
        r##"  <g font-family="sans-serif" font-size="13">
    <text x="10" y="{ty}">{label}</text>
    <line x1="{X0}" y1="{y}" x2="{end:.1}" y2="{y}" stroke="#999" stroke-width="2"/>
    <rect x="{r0:.1}" y="{ry}" width="{rw:.1}" height="14" fill="#4a90d9"/>
    <circle cx="{X0}" cy="{y}" r="5" fill="#e8a33c"/>
    <line x1="{drain:.1}" y1="{t0}" x2="{drain:.1}" y2="{t1}" stroke="#2e7d32" stroke-width="3"/>
    <line x1="{deadline:.1}" y1="{t0}" x2="{deadline:.1}" y2="{t1}" stroke="#c62828" stroke-width="3"/>
  </g>
"##,
        ty = y + 5,
        r0 = px(std::time::Duration::from_secs(1)),
        ry = y - 7,
        rw = drain - px(std::time::Duration::from_secs(1)),
        t0 = y - 12,
        t1 = y + 12,
    )
}

/// docs/timeline.svg, drawn from docs/clouds.md's grace-period table: one row per spot notice.
fn timeline_svg() -> String {
    use nthd::testing::notice::Lifecycle;
    use nthd::testing::timefmt::format_duration;
    let rows: Vec<GraceRow> = grace_rows()
        .into_iter()
        .filter(|r| r.cloud.is_some() && r.lifecycle == Some(Lifecycle::Spot) && r.lead.is_some())
        .collect();
    let height = 170 + 40 * rows.len() as u32;
    let mut svg = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="980" height="{height}" viewBox="0 0 980 {height}">
  <!-- Drawn from docs/clouds.md's grace-period table by tests/docs.rs; do not edit by hand. -->
  <rect width="980" height="{height}" fill="#ffffff"/>
  <g font-family="sans-serif" font-size="13">
    <text x="10" y="24" font-size="16" font-weight="bold">From the notice to the halt, per cloud (spot; minutes from the notice)</text>
    <circle cx="20" cy="48" r="5" fill="#e8a33c"/><text x="32" y="52">notice; nthd reads it within a poll and calls PowerOff</text>
    <rect x="14" y="62" width="14" height="12" fill="#4a90d9"/><text x="32" y="73">kubelet's delay lock holds the shutdown while it stops pods by priority (the longest drain that fits)</text>
    <line x1="20" y1="82" x2="20" y2="98" stroke="#2e7d32" stroke-width="3"/><text x="32" y="94">drain report, then the halt</text>
    <line x1="520" y1="82" x2="520" y2="98" stroke="#c62828" stroke-width="3"/><text x="532" y="94">the cloud's deadline</text>
  </g>
"##
    );
    // The minutes, across the rows.
    let bottom = 150 + 40 * rows.len() as u32 - 20;
    for m in 0..=5u32 {
        let x = 260.0 + f64::from(m) * 60.0 * 680.0 / 300.0;
        svg.push_str(&format!(
            "  <g font-family=\"sans-serif\" font-size=\"11\" fill=\"#777\">\n    <line x1=\"{x:.1}\" y1=\"108\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"#ddd\"/>\n    <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{m} min</text>\n  </g>\n",
            bottom + 14
        ));
    }
    for (i, r) in rows.iter().enumerate() {
        let cloud = match r.cloud.map_or("", |c| c.name()) {
            "aws" => "AWS",
            "gcp" => "GCP",
            "azure" => "Azure",
            "alibaba" => "Alibaba",
            "tencent" => "Tencent",
            other => other,
        };
        let lead = r.lead.unwrap_or_default();
        let extra = if r.gcp_notice.is_zero() {
            ""
        } else {
            ", 120 s notice"
        };
        let label = format!(
            "{cloud}{extra}: {}, drain {}",
            format_duration(lead),
            format_duration(r.fits)
        );
        svg.push_str(&timeline_row(130 + 40 * i as u32, &label, lead, r.fits));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The timeline picture is the grace-period table's: drawn from it, and compared with the
/// committed file (`NTHD_WRITE_PICTURES=1 cargo test --test docs pictures` redraws it). The
/// parts picture names every part on a node. tests/pictures.sh renders both in headless
/// Chromium.
#[test]
fn the_pictures_are_the_tables() {
    let want = timeline_svg();
    if std::env::var_os("NTHD_WRITE_PICTURES").is_some() {
        std::fs::write(root().join("docs/timeline.svg"), &want).unwrap();
    }
    assert_eq!(
        read("docs/timeline.svg"),
        want,
        "docs/timeline.svg is not drawn from the grace-period table: NTHD_WRITE_PICTURES=1 \
         cargo test --test docs pictures"
    );
    for c in ["AWS", "GCP", "Azure", "Alibaba", "Tencent"] {
        assert!(
            want.contains(&format!(">{c}")),
            "the timeline has no row for {c}"
        );
    }
    let parts = read("docs/parts.svg");
    for part in [
        "IMDS",
        "systemd-imdsd",
        "nthd",
        "systemd-logind",
        "polkit",
        "kubelet",
        "node-problem-detector",
        "webhook receiver",
    ] {
        assert!(parts.contains(part), "docs/parts.svg does not show {part}");
    }
    for (pic, text) in [("timeline", &want), ("parts", &parts)] {
        assert_eq!(
            text.matches("<g").count(),
            text.matches("</g>").count(),
            "docs/{pic}.svg: unbalanced groups"
        );
        assert!(
            text.starts_with("<svg ") && text.trim_end().ends_with("</svg>"),
            "docs/{pic}.svg"
        );
    }
}

/// The lines of `text` that give a placeholder address (`https://example.invalid/...`) as if it
/// were nthd's, as (1-based line, line).
fn placeholder_addresses(text: &str) -> Vec<(usize, &str)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            l.match_indices("://")
                .any(|(i, _)| l[i + 3..].starts_with("example.invalid"))
        })
        .map(|(i, l)| (i + 1, l))
        .collect()
}

/// nthd's source has no published address, so nothing that ships or documents it gives a
/// placeholder one: Cargo.toml has no `repository`, the docs link to paths, and templates say
/// what to put where.
#[test]
fn no_placeholder_address_is_given_as_nthds() {
    assert_eq!(
        placeholder_addresses("repository = \"https://example.invalid/nthd\"\nok\n"),
        vec![(1, "repository = \"https://example.invalid/nthd\"")]
    );
    assert!(placeholder_addresses("<nthd@example.invalid>, http://nthd-test.invalid").is_empty());
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "--",
            ":!src",
            ":!tests",
            ":!testkit",
            ":!CHANGELOG.md",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    let mut found = Vec::new();
    for f in String::from_utf8(out.stdout).unwrap().lines() {
        let Ok(t) = std::fs::read_to_string(root().join(f)) else {
            continue;
        };
        for (n, l) in placeholder_addresses(&t) {
            found.push(format!("{f}:{n}: {l}"));
        }
    }
    assert!(
        found.is_empty(),
        "placeholder addresses:\n{}",
        found.join("\n")
    );
}
