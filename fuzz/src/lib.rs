//! Invariants shared by the fuzz targets. Every check panics with the offending value, so a
//! violation shows up in libFuzzer as a crash with a readable message.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nthd::testing::notice::{Notice, NoticeStatus, RAW_CAP};

/// The longest id any parser may produce. Ids are a fixed prefix plus at most two components
/// of `nthd::testing::logging::ID_PART_MAX` (128) characters each (`clean_id`); the longest is `aws/scheduled/<Code>/<NotBefore>` for an
/// event without an EventId: 14 + 128 + 1 + 128 = 271 (Azure's `azure/noid/<type>/<resources>`
/// reaches 268).
pub const ID_MAX: usize = 14 + 128 + 1 + 128;

/// `…` is three bytes in UTF-8: `cap_raw` keeps at most `RAW_CAP` bytes plus the ellipsis.
pub const RAW_MAX: usize = RAW_CAP + 3;

/// 9999-12-30T22:00:00Z, the last second the parsers accept (the end of jiff's range).
pub use nthd::testing::timefmt::MAX_UNIX_SECS;

/// Takes the fuzz input as the metadata client would hand it over: only valid UTF-8 reaches the
/// parsers (the client rejects anything else as malformed).
pub fn body(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Checks what every notice must satisfy, whatever the metadata service sent.
pub fn check_notice(n: &Notice, id_prefix: &str, source: &str, body: &str) {
    let id = n.id.as_str();
    assert!(
        id.starts_with(id_prefix),
        "id {id:?} lacks prefix {id_prefix:?}"
    );
    assert!(
        id.bytes().all(|b| b.is_ascii_graphic()),
        "id {id:?} is not printable ASCII"
    );
    assert!(id.len() <= ID_MAX, "id is {} bytes: {id:?}", id.len());
    assert_eq!(n.source, source);
    assert!(
        n.raw.len() <= RAW_MAX,
        "raw is {} bytes (cap {RAW_CAP})",
        n.raw.len()
    );
    if body.len() <= RAW_CAP && n.raw != body {
        // Only parsers that keep the body verbatim pass `body`; the others pass "".
        assert!(body.is_empty(), "raw {:?} is not the body {body:?}", n.raw);
    }
    if let Some(event_id) = &n.event_id {
        assert!(!event_id.is_empty(), "empty event id in {n:?}");
        assert_eq!(event_id.trim(), event_id, "event id not trimmed");
    }
    if let Some(t) = n.deadline {
        check_time(t);
    }
    assert!(!n.detail.is_empty());
    let _ = format!("{n:?}");
}

/// A time the parsers produced: not before the epoch, and not after [`MAX_UNIX_SECS`], which no
/// formatter can print back (also when an offset or a leap second pushes a time past it).
pub fn check_time(t: SystemTime) {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_else(|_| panic!("time {t:?} is before the epoch"))
        .as_secs();
    assert!(
        secs <= MAX_UNIX_SECS,
        "time {t:?} is after 9999-12-30T22:00:00Z"
    );
}

/// The status the AWS parsers can report.
pub fn is_status(s: NoticeStatus) -> bool {
    matches!(
        s,
        NoticeStatus::Active | NoticeStatus::Canceled | NoticeStatus::Completed
    )
}

/// `t` with the sub-second part dropped (the formatters print whole seconds).
pub fn whole_seconds(t: SystemTime) -> SystemTime {
    let d = t.duration_since(UNIX_EPOCH).expect("checked above");
    UNIX_EPOCH + Duration::from_secs(d.as_secs())
}

/// How the parsers turn metadata values into parts of a notice id (nthd's own function, so
/// the targets check the parsers against the contract they use, not a copy of it).
pub use nthd::testing::logging::clean_id;

// The targets are meant to run with debug assertions and overflow checks (fuzz/Cargo.toml's
// release profile; run.sh builds with `cargo fuzz build -O`).
const _: () = assert!(
    cfg!(debug_assertions),
    "build the fuzz targets with debug assertions (see fuzz/Cargo.toml)"
);
