//! The man page and completions shipped in the packages (packaging/assets/) must match what the
//! clap definition generates. Regenerate with:
//! `cargo run -- generate-assets --out packaging/assets`.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

#[test]
fn committed_assets_match_the_cli() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/assets");
    let mut stale = Vec::new();
    let rendered = nthd::testing::assets::render().unwrap();
    for (name, body) in &rendered {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        if committed != *body {
            stale.push(name.clone());
        }
    }
    // A page committed but no longer generated (a subcommand renamed or removed) is stale too:
    // the packages ship every packaging/assets/*.8.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !rendered.iter().any(|(n, _)| *n == name) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated assets {stale:?}; run: cargo run -- generate-assets --out packaging/assets"
    );
}

#[test]
fn man_page_documents_every_env_var() {
    let man = nthd::testing::assets::render()
        .unwrap()
        .into_iter()
        .find(|(n, _)| *n == "nthd.8")
        .unwrap()
        .1;
    let man = String::from_utf8(man)
        .unwrap()
        .replace("\\-", "-")
        .replace("\\_", "_");
    for v in [
        "NTHD_PROVIDER",
        "NTHD_IMDS_ENDPOINT",
        "NTHD_DRY_RUN",
        "NTHD_ACTION_SPOT_TERMINATE",
        "NTHD_ACTION_AZURE_FREEZE",
    ] {
        assert!(man.contains(v), "man page lacks {v}");
    }
}
