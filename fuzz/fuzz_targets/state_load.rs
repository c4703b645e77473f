//! `State::load` on arbitrary file content: it never panics, moves a corrupt file (or one of an
//! unknown format version) aside with its content intact, and keeps exactly the records it
//! should.
#![no_main]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use nthd::testing::state::{State, RETENTION};
use serde_json::Value;

const NOW: u64 = 1_800_000_000;
const BOOT: &str = "boot-a";

/// One directory for the whole run, on tmpfs when there is one.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("nthd-fuzz-state-{}", std::process::id()));
        fs::create_dir_all(&d).expect("create the scratch directory");
        d
    })
}

fn clear(d: &Path) {
    for e in fs::read_dir(d)
        .expect("read the scratch directory")
        .flatten()
    {
        let _ = fs::remove_file(e.path());
    }
}

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fuzz_target!(|data: &[u8]| {
    let d = dir();
    clear(d);
    let path = d.join("state.json");
    fs::write(&path, data).expect("write state.json");

    let (state, report) = State::load(d, BOOT.into(), at(NOW));
    let parsed: Option<Value> = serde_json::from_slice(data).ok();
    match &report.error {
        Some(err) => {
            assert!(
                err.contains("corrupt") || err.contains("format version"),
                "{err}"
            );
            let aside = report
                .moved_aside
                .as_ref()
                .expect("a corrupt or unknown-version file is moved aside");
            assert!(!path.exists(), "the corrupt file is still there");
            assert_eq!(fs::read(aside).expect("read the moved file"), data);
            assert!(aside.starts_with(d));
            assert!(state.records().is_empty());
            assert!(state.acted_ids().is_empty());
        }
        None => {
            assert_eq!(report.moved_aside, None);
            assert!(path.exists());
            let records = parsed
                .as_ref()
                .and_then(|v| v.get("records"))
                .and_then(Value::as_array)
                .map(Vec::len);
            if let Some(total) = records {
                assert_eq!(
                    report.loaded + report.dropped_other_boot + report.expired,
                    total,
                    "{report:?}"
                );
            }
            assert_eq!(report.loaded, state.records().len());
            let cutoff = NOW - RETENTION.as_secs();
            for r in state.records() {
                // A record of this very boot never expires (the wall clock may have jumped).
                assert!(r.at_unix >= cutoff || r.boot_id == BOOT, "{r:?} expired");
                assert!(r.at_unix <= NOW, "{r:?} from the future was not clamped");
                assert!(
                    r.event_id.is_some() || r.boot_id == BOOT,
                    "{r:?} from another boot"
                );
            }
            let acted = state.acted_ids();
            assert!(acted.len() <= state.records().len());
            let _ = state.event_ids_this_boot();
            // The same file at the extremes of time: everything expired, or nothing.
            for now in [UNIX_EPOCH, at(i64::MAX as u64 / 2)] {
                let (s, r) = State::load(d, "other-boot".into(), now);
                assert_eq!(r.error, None);
                assert!(
                    s.records().len() <= report.loaded + report.dropped_other_boot + report.expired
                );
            }
        }
    }
});
