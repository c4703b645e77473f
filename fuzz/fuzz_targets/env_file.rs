//! `settings/env_file.rs`: a settings file read as systemd's `EnvironmentFile=` reads it.
//!
//! Input: the file's bytes. Never a panic; every assignment kept has a variable name and a
//! value without NUL; every assignment skipped is a warning that names the file and line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::settings::parse_env_file;

fuzz_target!(|data: &[u8]| {
    let (pairs, skipped) = parse_env_file(data);
    for (name, value) in pairs {
        let mut chars = name.chars();
        let first = chars.next().expect("an empty name was kept");
        assert!(first == '_' || first.is_ascii_alphabetic(), "{name:?}");
        assert!(chars.all(|c| c == '_' || c.is_ascii_alphanumeric()), "{name:?}");
        assert!(!value.contains('\0'), "{name}={value:?}");
    }
    for warning in skipped {
        assert!(warning.starts_with("/etc/default/nthd line "), "{warning}");
    }
});
