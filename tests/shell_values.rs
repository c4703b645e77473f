//! Values the shell scripts copy from the Rust code cannot drift: every `NAME=value` the e2e
//! toolkit keeps for a journal `MESSAGE_ID` or an AWS metadata path is compared with the Rust
//! constant it copies. The metadata paths are the compiled constants (`nthd::testing`); the
//! `MESSAGE_ID`s are `pub(crate)`, so they are read from their one definition in src/.
//! The system man pages nthd's pages may cite (`SYSTEM_PAGES`, src/assets.rs) are compared with
//! the e2e's copy (`DOCS_SYSTEM_PAGES`, tests/e2e/scen-docs.sh) the same way. A message names the
//! shell file to fix. The shell structure check runs in tests/architecture.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

use std::path::Path;

use nthd::testing::provider::aws;

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The value of the first top-level `NAME=value` in a shell file, without quotes and without
/// a trailing comment.
fn shell_value(text: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    let line = text.lines().find(|l| l.starts_with(&prefix))?;
    let v = line[prefix.len()..].split(" #").next()?.trim();
    Some(v.trim_matches('"').trim_matches('\'').to_string())
}

/// The string of `const NAME: &str = "...";` in a Rust file.
fn rust_str_const(text: &str, name: &str) -> Option<String> {
    let needle = format!("const {name}: &str = \"");
    let at = text.find(&needle)? + needle.len();
    Some(text[at..].split('"').next()?.to_string())
}

/// Every copy in `shell` agrees with its source; returns the disagreements, one line each.
fn drift(shell_file: &str, shell: &str, pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter_map(|(name, want)| match shell_value(shell, name) {
            Some(got) if got == *want => None,
            got => Some(format!(
                "{shell_file}: {name} is {got:?}, the Rust code says {want:?}"
            )),
        })
        .collect()
}

fn message_ids() -> Vec<(&'static str, String)> {
    let ids = [
        ("MSG_NOTICE", "src/daemon.rs"),
        ("MSG_ACTION", "src/executor.rs"),
        ("MSG_ACTION_FAILED", "src/executor.rs"),
        ("MSG_DRAINED", "src/drain/mod.rs"),
    ];
    ids.iter()
        .map(|(name, file)| {
            let v = rust_str_const(&read(file), name)
                .unwrap_or_else(|| panic!("{file}: no `const {name}: &str`"));
            (*name, v)
        })
        .collect()
}

#[test]
fn the_e2e_copies_match_the_rust_constants() {
    let mut bad = Vec::new();
    let scenario = "tests/e2e/scenario.sh";
    let mut pairs = message_ids();
    pairs.push(("AWS_SPOT", aws::SPOT_PATH.to_string()));
    pairs.push(("AWS_SCHEDULED", aws::SCHEDULED_PATH.to_string()));
    pairs.push(("AWS_REBALANCE", aws::REBALANCE_PATH.to_string()));
    bad.extend(drift(scenario, &read(scenario), &pairs));
    let imds = "tests/e2e/scen-imds.sh";
    let pairs = [("AWS_INSTANCE_ID_PATH", aws::INSTANCE_ID_PATH.to_string())];
    bad.extend(drift(imds, &read(imds), &pairs));
    assert!(bad.is_empty(), "shell copies drifted:\n{}", bad.join("\n"));
}

#[test]
fn a_drifted_copy_is_found() {
    let shell =
        "MSG_NOTICE=9d3f6a0c4b1e4f2a8c7d5e6f1a2b3c4e   # src/daemon.rs\nAWS_SPOT=/latest/x\n";
    let pairs = [
        ("MSG_NOTICE", "9d3f6a0c4b1e4f2a8c7d5e6f1a2b3c4d".to_string()),
        ("AWS_SPOT", aws::SPOT_PATH.to_string()),
        ("AWS_SCHEDULED", aws::SCHEDULED_PATH.to_string()),
    ];
    let found = drift("planted.sh", shell, &pairs);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(
        found[2].contains("None"),
        "a missing copy is drift too: {found:?}"
    );
    let same = format!("AWS_SPOT=\"{}\"  # copy\n", aws::SPOT_PATH);
    assert!(drift("ok.sh", &same, &pairs[1..2]).is_empty());
}

#[test]
fn the_message_ids_are_found_in_src() {
    for (name, v) in message_ids() {
        assert_eq!(
            v.len(),
            32,
            "{name} = {v:?} is not a 32-hex-digit MESSAGE_ID"
        );
        assert!(v.chars().all(|c| c.is_ascii_hexdigit()), "{name} = {v:?}");
    }
}

/// The pages of `SYSTEM_PAGES` in src/assets.rs as `name.section` (`systemd\\-logind(8)` is
/// `systemd-logind.8`), in order.
fn rust_system_pages(assets: &str) -> Option<Vec<String>> {
    let at = assets.find("SYSTEM_PAGES: &[&str] = &[")?;
    let list = &assets[at..];
    let list = &list[list.find("= &[")? + 4..list.find("];")?];
    let mut out = Vec::new();
    for lit in list.split('"').skip(1).step_by(2) {
        let (name, section) = lit.split_once('(')?;
        out.push(format!(
            "{}.{}",
            name.replace("\\\\", ""),
            section.strip_suffix(')')?
        ));
    }
    Some(out)
}

/// The words of the first top-level `NAME=(...)` array in a shell file.
fn shell_array(text: &str, name: &str) -> Option<Vec<String>> {
    let prefix = format!("{name}=(");
    let line = text.lines().find(|l| l.starts_with(&prefix))?;
    let words = line[prefix.len()..].split(')').next()?;
    Some(words.split_whitespace().map(str::to_string).collect())
}

#[test]
fn the_e2e_system_pages_match_the_man_pages_see_also() {
    let rust = rust_system_pages(&read("src/assets.rs"))
        .expect("src/assets.rs: no `SYSTEM_PAGES: &[&str] = &[ \"name(N)\", ... ];`");
    assert!(!rust.is_empty(), "src/assets.rs: SYSTEM_PAGES is empty");
    let docs = "tests/e2e/scen-docs.sh";
    let shell = shell_array(&read(docs), "DOCS_SYSTEM_PAGES");
    assert_eq!(
        shell.as_ref(),
        Some(&rust),
        "{docs}: DOCS_SYSTEM_PAGES drifted from src/assets.rs's SYSTEM_PAGES"
    );
}

#[test]
fn a_drifted_page_list_is_found() {
    let assets = "pub(crate) const SYSTEM_PAGES: &[&str] = &[\n    \"systemd\\\\-logind(8)\",\n    \"polkit(8)\",\n];\n";
    let want = vec!["systemd-logind.8".to_string(), "polkit.8".to_string()];
    assert_eq!(rust_system_pages(assets), Some(want.clone()));
    let same = "X=1\nDOCS_SYSTEM_PAGES=(systemd-logind.8 polkit.8)\n";
    assert_eq!(shell_array(same, "DOCS_SYSTEM_PAGES"), Some(want.clone()));
    let drifted = "DOCS_SYSTEM_PAGES=(systemd-logind.8 polkit.1)\n";
    assert_ne!(shell_array(drifted, "DOCS_SYSTEM_PAGES"), Some(want));
    assert_eq!(shell_array("Y=(a)\n", "DOCS_SYSTEM_PAGES"), None);
}
