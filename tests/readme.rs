//! The README documents every setting the binary accepts, with the right default action.

use clap::CommandFactory;

#[test]
fn readme_documents_every_env_var_and_default() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let cmd = nthd::config::Cli::command();
    for a in cmd.get_arguments() {
        if let Some(env) = a.get_env() {
            let env = env.to_string_lossy();
            assert!(
                readme.contains(&format!("`{env}`")),
                "README does not document {env}"
            );
        }
    }
    for k in nthd::notice::KINDS {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", k.env)))
            .unwrap_or_else(|| panic!("no README row for {}", k.env));
        assert!(
            row.contains(&format!(
                "| {}",
                nthd::policy::default_action(k.kind).name()
            )),
            "README row for {} does not give its default {}: {row}",
            k.env,
            nthd::policy::default_action(k.kind)
        );
    }
}
