//! The timestamp parsers and formatters in src/timefmt.rs (jiff's RFC 3339 and RFC 2822
//! parsers and printers behind nthd's adapter).
//!
//! - `parse_rfc3339`, `parse_http_like` and `parse_any` are total and agree with each other;
//! - a parsed time lies in [1970-01-01, 9999-12-30T22:00:00Z], the end of jiff's range (an
//!   offset or a leap second carrying 9999-12-31 past midnight used to parse as year 10000,
//!   found by this target), and formats (RFC 3339, RFC 1123, AWS) to text that parses back to
//!   the same instant, to the second;
//! - the first 8 bytes, read as a number of seconds, also round-trip through every formatter,
//!   and the formatters and `relative` never panic, even far outside the parsers' range.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use nthd::testing::timefmt::{
    format_aws, format_rfc1123, format_rfc3339, parse_any, parse_http_like, parse_rfc3339, relative,
};
use nthd_fuzz::{check_time, whole_seconds, MAX_UNIX_SECS};

fn round_trip(t: SystemTime, input: &str) {
    let w = whole_seconds(t);
    let s = format_rfc3339(t);
    assert_eq!(parse_rfc3339(&s), Some(w), "{input:?} -> {s:?}");
    let s = format_rfc1123(t);
    assert_eq!(parse_http_like(&s), Some(w), "{input:?} -> {s:?}");
    let s = format_aws(t);
    assert_eq!(parse_http_like(&s), Some(w), "{input:?} -> {s:?}");
}

fuzz_target!(|data: &[u8]| {
    // Formatters on an arbitrary instant, including ones before the epoch and far beyond 9999.
    let mut raw = [0u8; 8];
    let n = data.len().min(8);
    raw[..n].copy_from_slice(&data[..n]);
    let x = u64::from_le_bytes(raw);
    round_trip(
        UNIX_EPOCH + Duration::from_secs(x % (MAX_UNIX_SECS + 1)),
        "(seconds)",
    );
    let far = Duration::from_secs(x >> 2);
    for t in [UNIX_EPOCH.checked_add(far), UNIX_EPOCH.checked_sub(far)]
        .into_iter()
        .flatten()
    {
        let _ = (format_rfc3339(t), format_rfc1123(t), format_aws(t));
        let _ = relative(t, UNIX_EPOCH);
    }

    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let a = parse_rfc3339(s);
    let b = parse_http_like(s);
    assert_eq!(parse_any(s), a.or(b));
    assert_eq!(parse_rfc3339(s.trim()), a, "leading/trailing space matters");
    for t in [a, b].into_iter().flatten() {
        check_time(t);
        round_trip(t, s);
    }
});
