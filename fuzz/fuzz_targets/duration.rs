//! `parse_duration` (every duration flag and NTHD_* variable; jiff's friendly format behind
//! nthd's adapter) and `format_duration` (jiff's span printer).
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use nthd::testing::timefmt::{format_duration, parse_duration};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let d = match parse_duration(s) {
        Ok(d) => d,
        Err(e) => {
            assert!(!e.is_empty());
            return;
        }
    };
    // format_duration prints whole seconds (or whole milliseconds below one second); what it
    // prints parses back to exactly that.
    let shown = format_duration(d);
    let truncated = if d.as_secs() == 0 {
        Duration::from_millis(u64::from(d.subsec_millis()))
    } else {
        Duration::from_secs(d.as_secs())
    };
    assert_eq!(
        parse_duration(&shown),
        Ok(truncated),
        "{s:?} -> {d:?} -> {shown:?}"
    );
    assert_eq!(parse_duration(s.trim()), Ok(d));
});
