//! docs/configuration.md documents every setting the binary accepts, with the right default action.

use clap::CommandFactory;

#[test]
fn readme_documents_every_env_var_and_default() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .unwrap();
    let cmd = nthd::config::Cli::command();
    for a in cmd.get_arguments() {
        if let Some(env) = a.get_env() {
            let env = env.to_string_lossy();
            assert!(
                readme.contains(&format!("`{env}`")),
                "docs/configuration.md does not document {env}"
            );
        }
    }
    for k in nthd::notice::KINDS {
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", k.env)))
            .unwrap_or_else(|| panic!("no docs/configuration.md row for {}", k.env));
        assert!(
            row.contains(&format!(
                "| {}",
                nthd::policy::default_action(k.kind).name()
            )),
            "docs/configuration.md row for {} does not give its default {}: {row}",
            k.env,
            nthd::policy::default_action(k.kind)
        );
    }
}

/// The unit's `IPAddressAllow=` values, in order.
fn unit_allow_list() -> Vec<String> {
    let unit =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/nthd.service"))
            .unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("IPAddressAllow="))
        .expect("systemd/nthd.service has an IPAddressAllow= line");
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_unit_admits_every_default_endpoint_and_the_docs_list_what_it_admits() {
    use nthd::notice::Cloud;
    let allowed = unit_allow_list();
    for cloud in [
        Cloud::Aws,
        Cloud::Gcp,
        Cloud::Azure,
        Cloud::Alibaba,
        Cloud::Tencent,
    ] {
        // An address, not a name: IPAddressDeny=any also blocks DNS.
        let host = cloud.default_endpoint().trim_start_matches("http://");
        assert!(
            allowed.iter().any(|a| a == host),
            "{cloud}'s default endpoint {host} is not in the unit's IPAddressAllow= {allowed:?}"
        );
    }
    let security =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md")).unwrap();
    let packaging =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/README.md"))
            .unwrap();
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
