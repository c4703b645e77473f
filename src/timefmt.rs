//! Parsing and formatting of the timestamp formats the metadata services use, and of the
//! durations in nthd's settings: a thin adapter over [`jiff`].
//!
//! Four timestamp formats appear in the wild:
//! - RFC 3339 (`2017-09-18T08:22:00Z`): AWS spot and rebalance, Alibaba, GCP. Read by jiff's
//!   RFC 3339 / ISO 8601 parser (which also takes the ISO 8601 forms RFC 3339 leaves out, such
//!   as `+0200` offsets or a time without seconds).
//! - AWS scheduled events (`21 Jan 2019 09:00:43 GMT`) and RFC 1123 / RFC 9110
//!   (`Mon, 19 Sep 2016 18:29:47 GMT`, Azure Scheduled Events): both are RFC 2822 dates, read by
//!   jiff's RFC 2822 parser once the zone has been checked to be UTC (see [`parse_http_like`]).
//! - A zoneless `2018-08-18 12:05:33` in a zone the platform documents: Tencent Cloud (UTC+8),
//!   through [`parse_local_datetime`].
//!
//! All parsers are total: they return `None` for anything they do not understand and never
//! panic, whatever the input (they are fuzzed). Times before the epoch are rejected, and so are
//! times after [`MAX_UNIX_SECS`] (9999-12-30T22:00:00Z), the end of jiff's range.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::fmt::friendly::{Spacing, SpanParser, SpanPrinter};
use jiff::fmt::{rfc2822, temporal};
use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};

/// The last second a parser here returns and a formatter prints faithfully:
/// 9999-12-30T22:00:00Z, jiff's `Timestamp::MAX` (its range leaves room for any UTC offset).
pub const MAX_UNIX_SECS: u64 = 253_402_207_200;

static RFC3339: temporal::DateTimeParser = temporal::DateTimeParser::new();
static RFC2822: rfc2822::DateTimeParser = rfc2822::DateTimeParser::new();
static RFC9110: rfc2822::DateTimePrinter = rfc2822::DateTimePrinter::new();
static FRIENDLY: SpanParser = SpanParser::new();
static COMPACT: SpanPrinter = SpanPrinter::new().spacing(Spacing::None);

/// A parsed instant, if it is one nthd accepts: not before the epoch.
fn accept(ts: Timestamp) -> Option<SystemTime> {
    if ts < Timestamp::UNIX_EPOCH {
        return None;
    }
    SystemTime::try_from(ts).ok()
}

/// `t` to the second, saturating at the ends of jiff's range (years -9999 and 9999), so that the
/// formatters print something for any `SystemTime`.
fn to_timestamp(t: SystemTime) -> Timestamp {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_secs()).map_or(i64::MIN, |s| -s),
    };
    let secs = secs.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// RFC 3339 / ISO 8601 with a `T` or space separator, optional fraction, `Z` or an offset.
pub fn parse_rfc3339(input: &str) -> Option<SystemTime> {
    accept(RFC3339.parse_timestamp(input.trim()).ok()?)
}

/// `DD Mon YYYY HH:MM:SS GMT` (AWS scheduled events), optionally preceded by `Day, ` (which
/// makes it RFC 1123, as Azure uses); any RFC 2822 date in fact. The weekday, when given, must
/// match the date.
///
/// Only the zones `GMT`, `UTC`, `Z` and `+0000` are accepted: jiff follows RFC 2822 in reading
/// any unknown alphabetic zone as UTC, which for a deadline would be a guess.
pub fn parse_http_like(input: &str) -> Option<SystemTime> {
    let s = input.trim();
    let (_, zone) = s.rsplit_once(|c: char| c.is_ascii_whitespace())?;
    if !matches!(zone, "GMT" | "UTC" | "Z" | "+0000") {
        return None;
    }
    accept(RFC2822.parse_timestamp(s).ok()?)
}

/// `Retry-After` (RFC 9110, 10.2.3): delay-seconds, or an HTTP-date taken relative to `now`
/// (a date already past is no wait). Anything else is ignored, as if the header were absent.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Longer than any interval rule allows anyway: the caller caps it.
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = parse_http_like(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// `YYYY-MM-DD HH:MM:SS` (one space, no fraction, no zone) taken as local time at
/// `utc_offset_secs` east of UTC, e.g. `8 * 3600` for Tencent Cloud's UTC+8. Surrounding
/// whitespace is ignored. A time that would fall before the epoch once the offset is taken off
/// is rejected, like every other time here; so is an offset beyond jiff's ±25:59:59.
pub fn parse_local_datetime(input: &str, utc_offset_secs: i64) -> Option<SystemTime> {
    let s = input.trim();
    let dt = RFC3339.parse_datetime(s).ok()?;
    // jiff's civil parser also takes `T`, a fraction, a time without seconds, and an offset or
    // a `[zone]`, which it would ignore here. Only the exact form is 19 bytes long and prints
    // back to the input.
    if s.len() != 19 || dt.to_string().replacen('T', " ", 1) != s {
        return None;
    }
    let offset = Offset::from_seconds(i32::try_from(utc_offset_secs).ok()?).ok()?;
    accept(offset.to_timestamp(dt).ok()?)
}

/// Tries every format the metadata services are known to use.
pub fn parse_any(input: &str) -> Option<SystemTime> {
    parse_rfc3339(input).or_else(|| parse_http_like(input))
}

/// Formats as RFC 3339 in UTC with second precision, e.g. `2026-11-22T04:55:10Z`.
pub fn format_rfc3339(t: SystemTime) -> String {
    to_timestamp(t).to_string()
}

/// Formats as RFC 1123 / RFC 9110 (`Mon, 19 Sep 2016 18:29:47 GMT`), the Azure format. Times
/// before the epoch print as the epoch.
pub fn format_rfc1123(t: SystemTime) -> String {
    let ts = to_timestamp(t).max(Timestamp::UNIX_EPOCH);
    // It fails only for years before 0 or after 9999, which `ts` cannot be.
    RFC9110
        .timestamp_to_rfc9110_string(&ts)
        .unwrap_or_else(|_| ts.to_string())
}

/// Formats as the AWS scheduled-event format (`21 Jan 2019 09:00:43 GMT`).
pub fn format_aws(t: SystemTime) -> String {
    let s = format_rfc1123(t);
    s.split_once(", ").map(|(_, r)| r.to_string()).unwrap_or(s)
}

/// A signed, human-friendly distance between `t` and `now` ("in 1m30s" / "45s ago").
pub fn relative(t: SystemTime, now: SystemTime) -> String {
    match t.duration_since(now) {
        Ok(d) => format!("in {}", format_duration(d)),
        Err(e) => format!("{} ago", format_duration(e.duration())),
    }
}

/// `1h2m3s`, `45s`, `250ms`: whole seconds, or whole milliseconds below one second.
pub fn format_duration(d: Duration) -> String {
    let d = match d.as_secs() {
        0 => SignedDuration::from_millis(i64::from(d.subsec_millis())),
        s => SignedDuration::from_secs(i64::try_from(s).unwrap_or(i64::MAX)),
    };
    COMPACT.duration_to_string(&d)
}

/// The longest duration a setting may have (about 31,700 years): anything longer is a typo, and
/// the callers may add it to an `Instant` or a `SystemTime` without overflow.
const MAX_DURATION_SECS: u64 = 1_000_000_000_000;

/// What every duration error ends with.
const ACCEPTED: &str = "use a number and a unit (ms, s, m, h), e.g. 500ms, 1s, 1.5s, 2m or 1m30s";

/// Parses jiff's "friendly" duration format (`1s`, `500ms`, `2m`, `1h`, `1.5s`, `1m30s`,
/// `1m 30s`, `2 minutes`; units up to hours) or a bare number of seconds (`1.5`).
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err(format!("empty duration; {ACCEPTED}"));
    }
    let parsed = if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        FRIENDLY.parse_duration(format!("{s}s"))
    } else {
        FRIENDLY.parse_duration(s)
    };
    let d = parsed.map_err(|_| format!("`{input}` is not a duration; {ACCEPTED}"))?;
    if d.is_negative() {
        return Err(format!("`{input}` is negative; {ACCEPTED}"));
    }
    match Duration::try_from(d) {
        Ok(d) if d.as_secs() <= MAX_DURATION_SECS => Ok(d),
        _ => Err(format!("`{input}` is not a sensible duration; {ACCEPTED}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let now = UNIX_EPOCH + Duration::from_secs(1_445_412_480); // Wed, 21 Oct 2015 07:28:00 GMT
        let secs = |v| parse_retry_after(v, now).map(|d| d.as_secs());
        assert_eq!(secs("3"), Some(3));
        assert_eq!(secs("0"), Some(0));
        assert_eq!(secs("Wed, 21 Oct 2015 07:28:30 GMT"), Some(30));
        // A date already past asks for no wait.
        assert_eq!(secs("Wed, 21 Oct 2015 07:27:00 GMT"), Some(0));
        // Too large to count is still a wait (the caller caps it).
        assert_eq!(secs("99999999999999999999999"), Some(u64::MAX));
        for bad in [
            "",
            "-1",
            "3.5",
            "soon",
            "3 s",
            "Wed, 21 Oct 2015 07:28:30 PST",
        ] {
            assert_eq!(secs(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_forms() {
        assert_eq!(
            unix(parse_rfc3339("2017-09-18T08:22:00Z").unwrap()),
            1_505_722_920
        );
        assert_eq!(
            unix(parse_rfc3339("2017-09-18T10:22:00+02:00").unwrap()),
            1_505_722_920
        );
        assert_eq!(
            unix(parse_rfc3339("2017-09-18 08:22:00.123456789Z").unwrap()),
            1_505_722_920
        );
        let t = parse_rfc3339("2017-09-18T08:22:00.5Z").unwrap();
        assert_eq!(t.duration_since(UNIX_EPOCH).unwrap().subsec_millis(), 500);
        for bad in [
            "",
            "2017-09-18",
            "2017-13-18T08:22:00Z",
            "2017-02-29T08:22:00Z",
            "2017-09-18T24:00:00Z",
            "2017-09-18T08:22:00",
            "2017-09-18T08:22:00.Z",
            "1969-12-31T23:59:59Z",
            "２017-09-18T08:22:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad:?} should not parse");
        }
        assert!(parse_rfc3339("2016-02-29T00:00:00Z").is_some());
        // ISO 8601's offset without a colon is unambiguous; jiff reads it.
        assert_eq!(
            unix(parse_rfc3339("2017-09-18T10:22:00+0200").unwrap()),
            1_505_722_920
        );
        // jiff's range ends at 9999-12-30T22:00:00Z; an offset or a leap second must not carry
        // a time past it (found by fuzzing when the end was year 10000).
        assert_eq!(
            parse_rfc3339("9999-12-30T22:00:00Z").map(unix),
            Some(MAX_UNIX_SECS)
        );
        for past_the_end in [
            "9999-12-30T22:00:01Z",
            "9999-12-31T23:59:59Z",
            "9999-12-31T23:59:60Z",
            "9999-12-30T21:30:00-01:00",
        ] {
            assert!(parse_rfc3339(past_the_end).is_none(), "{past_the_end:?}");
        }
        assert_eq!(MAX_UNIX_SECS, Timestamp::MAX.as_second() as u64);
    }

    #[test]
    fn local_datetime_at_an_offset() {
        const UTC8: i64 = 8 * 3600;
        let at = |s: &str| parse_local_datetime(s, UTC8).map(unix);
        assert_eq!(at("2018-08-18 12:05:33"), Some(1_534_565_133));
        // Before 08:00 local time it is still the previous day in UTC.
        assert_eq!(at("2018-08-18 04:05:33"), Some(1_534_536_333));
        // New Year in Beijing is 16:00 UTC on 31 December; a leap day crosses back to the 28th.
        assert_eq!(at("2020-01-01 00:00:00"), Some(1_577_808_000));
        assert_eq!(at("2024-02-29 00:30:00"), Some(1_709_137_800));
        assert_eq!(at(" \t2018-08-18 12:05:33\r\n"), Some(1_534_565_133));
        assert_eq!(at("1970-01-01 08:00:00"), Some(0));
        assert_eq!(
            parse_local_datetime("2018-08-18 12:05:33", 0).map(unix),
            Some(1_534_565_133 + 8 * 3600)
        );
        for bad in [
            "",
            "2018-08-18",
            "2018-08-18T12:05:33",
            "2018-08-18  12:05:33",
            "2018-08-18 12:05:33Z",
            "2018-08-18 12:05:33+08:00",
            "2018-08-18 12:05:33.5",
            "2018-08-18 12:05:60",
            "2018-08-18 12:05:33[Asia/Shanghai]",
            "2018-08-18 12:05",
            "2018-8-18 12:05:33",
            "2018-08-18 24:00:00",
            "2018-02-30 12:05:33",
            "2018-13-18 12:05:33",
            "+018-08-18 12:05:33",
            "2018-08-18 12:05:3é",
            "1970-01-01 07:59:59",
            "18/08/2018 12:05:33",
        ] {
            assert!(at(bad).is_none(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn aws_and_rfc1123_forms() {
        assert_eq!(
            unix(parse_http_like("21 Jan 2019 09:00:43 GMT").unwrap()),
            1_548_061_243
        );
        assert_eq!(
            unix(parse_http_like("Mon, 19 Sep 2016 18:29:47 GMT").unwrap()),
            1_474_309_787
        );
        assert_eq!(
            unix(parse_http_like("1 Feb 2019 09:00:43 GMT").unwrap()),
            1_549_011_643
        );
        // RFC 1123 and RFC 2822 make the seconds optional.
        assert_eq!(
            unix(parse_http_like("21 Jan 2019 09:00 GMT").unwrap()),
            1_548_061_200
        );
        for bad in [
            "21 Foo 2019 09:00:43 GMT",
            "21 Jan 2019 09:00:43 PST",
            // jiff would read an unknown zone as UTC.
            "21 Jan 2019 09:00:43 XYZ",
            "21 Jan 2019 09:00:43 GMT (comment)",
            // The weekday must match the date (19 Sep 2016 was a Monday).
            "Tue, 19 Sep 2016 18:29:47 GMT",
            "Monday, 19 Sep 2016 18:29:47 GMT",
            "32 Jan 2019 09:00:43 GMT",
            "21 Jan 2019 09:00:43 GMT extra",
        ] {
            assert!(parse_http_like(bad).is_none(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for secs in [
            0u64,
            1_505_722_920,
            1_548_061_243,
            4_102_444_800,
            951_782_400,
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t));
            assert_eq!(parse_http_like(&format_rfc1123(t)), Some(t));
            assert_eq!(parse_http_like(&format_aws(t)), Some(t));
        }
        assert_eq!(
            format_rfc1123(UNIX_EPOCH + Duration::from_secs(1_474_309_787)),
            "Mon, 19 Sep 2016 18:29:47 GMT"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0.25s").unwrap(), Duration::from_millis(250));
        // jiff's friendly format also takes spaces and long unit names.
        assert_eq!(parse_duration("1 s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("1m 30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_duration("2 minutes").unwrap(),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration("1000000000000s").unwrap(),
            Duration::from_secs(1_000_000_000_000)
        );
        for bad in [
            "",
            "s",
            "1x",
            "-1s",
            "1s ago",
            "1e99",
            "abc",
            "1d",
            "1.2.3",
            "1000000000001s",
            "9999999999999999999h",
        ] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.contains("500ms, 1s"), "{bad:?}: {e}");
        }
        assert_eq!(format_duration(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(Duration::from_millis(1_999)), "1s");
    }
}
