//! Parsing and formatting of the timestamp formats the metadata services use.
//!
//! Four formats appear in the wild:
//! - RFC 3339 (`2017-09-18T08:22:00Z`): AWS spot and rebalance, Alibaba.
//! - AWS scheduled events (`21 Jan 2019 09:00:43 GMT`).
//! - RFC 1123 (`Mon, 19 Sep 2016 18:29:47 GMT`): Azure Scheduled Events.
//! - A zoneless `2018-08-18 12:05:33` in a zone the platform documents: Tencent Cloud (UTC+8),
//!   through [`parse_local_datetime`].
//!
//! All parsers are total: they return `None` for anything they do not understand and never
//! panic, whatever the input (they are fuzzed). Times before the epoch are rejected.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// 9999-12-31T23:59:59Z, the last second every format here can express.
const MAX_SECS: u64 = 253_402_300_799;

/// Builds a `SystemTime` from calendar fields, validating every field.
fn from_fields(
    (y, mo, d): (i64, u32, u32),
    (h, mi, s): (u32, u32, u32),
    nanos: u32,
    offset_secs: i64,
) -> Option<SystemTime> {
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) {
        return None;
    }
    // A leap second (60) is folded into the next second rather than rejected.
    if d == 0 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400
        + i64::from(h) * 3600
        + i64::from(mi) * 60
        + i64::from(s)
        - offset_secs;
    let secs = u64::try_from(secs).ok()?;
    // An offset or a leap second must not carry 9999-12-31 into year 10000, which no format
    // here can print back.
    if secs > MAX_SECS {
        return None;
    }
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

fn num(s: &str, len: usize) -> Option<u32> {
    if s.len() != len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn month_from_abbrev(s: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let lower = s.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|m| *m == lower)
        .map(|i| i as u32 + 1)
}

/// Parses `HH:MM:SS`.
fn hms(s: &str) -> Option<(u32, u32, u32)> {
    let mut it = s.split(':');
    let h = num(it.next()?, 2)?;
    let m = num(it.next()?, 2)?;
    let sec = num(it.next()?, 2)?;
    if it.next().is_some() {
        return None;
    }
    Some((h, m, sec))
}

/// `YYYY-MM-DD`.
fn ymd(date: &str) -> Option<(u32, u32, u32)> {
    let mut dp = date.split('-');
    let y = num(dp.next()?, 4)?;
    let mo = num(dp.next()?, 2)?;
    let d = num(dp.next()?, 2)?;
    if dp.next().is_some() {
        return None;
    }
    Some((y, mo, d))
}

/// RFC 3339 / ISO 8601 with a `T` or space separator, optional fraction, `Z` or `±HH:MM`.
pub fn parse_rfc3339(input: &str) -> Option<SystemTime> {
    let s = input.trim();
    if !s.is_ascii() || s.len() < 20 {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let (y, mo, d) = ymd(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    if rest.len() < 9 {
        return None;
    }
    let (clock, mut tail) = rest.split_at(8);
    let (h, mi, sec) = hms(clock)?;
    let mut nanos = 0u32;
    if let Some(frac) = tail.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let mut n: u64 = 0;
        for (i, b) in frac.bytes().take(digits).enumerate() {
            if i < 9 {
                n = n * 10 + u64::from(b - b'0');
            }
        }
        for _ in digits.min(9)..9 {
            n *= 10;
        }
        nanos = n as u32;
        tail = &frac[digits..];
    }
    let offset = match tail {
        "Z" | "z" => 0,
        t if t.len() == 6 && (t.starts_with('+') || t.starts_with('-')) => {
            let oh = i64::from(num(&t[1..3], 2)?);
            if &t[3..4] != ":" {
                return None;
            }
            let om = i64::from(num(&t[4..6], 2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if t.starts_with('-') {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    from_fields((i64::from(y), mo, d), (h, mi, sec), nanos, offset)
}

/// `DD Mon YYYY HH:MM:SS GMT` (AWS scheduled events), optionally preceded by `Day, `
/// (which makes it RFC 1123, as Azure uses). Only GMT/UTC/+0000 zones are accepted.
pub fn parse_http_like(input: &str) -> Option<SystemTime> {
    let s = input.trim();
    if !s.is_ascii() {
        return None;
    }
    let s = match s.split_once(", ") {
        Some((day, rest)) if day.len() == 3 && day.bytes().all(|b| b.is_ascii_alphabetic()) => rest,
        Some(_) => return None,
        None => s,
    };
    let mut parts = s.split_ascii_whitespace();
    let d_str = parts.next()?;
    if d_str.is_empty() || d_str.len() > 2 || !d_str.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let d: u32 = d_str.parse().ok()?;
    let mo = month_from_abbrev(parts.next()?)?;
    let y = num(parts.next()?, 4)?;
    let (h, mi, sec) = hms(parts.next()?)?;
    match parts.next()? {
        "GMT" | "UTC" | "Z" | "+0000" => {}
        _ => return None,
    }
    if parts.next().is_some() {
        return None;
    }
    from_fields((i64::from(y), mo, d), (h, mi, sec), 0, 0)
}

/// `YYYY-MM-DD HH:MM:SS` (one space, no fraction, no zone) taken as local time at
/// `utc_offset_secs` east of UTC, e.g. `8 * 3600` for Tencent Cloud's UTC+8. Surrounding
/// whitespace is ignored. A time that would fall before the epoch once the offset is taken off
/// is rejected, like every other time here.
pub fn parse_local_datetime(input: &str, utc_offset_secs: i64) -> Option<SystemTime> {
    let s = input.trim();
    if !s.is_ascii() || s.len() != 19 {
        return None;
    }
    let (date, rest) = s.split_at(10);
    let (y, mo, d) = ymd(date)?;
    let clock = rest.strip_prefix(' ')?;
    let (h, mi, sec) = hms(clock)?;
    from_fields((i64::from(y), mo, d), (h, mi, sec), 0, utc_offset_secs)
}

/// Tries every format the metadata services are known to use.
pub fn parse_any(input: &str) -> Option<SystemTime> {
    parse_rfc3339(input).or_else(|| parse_http_like(input))
}

/// Formats as RFC 3339 in UTC with second precision, e.g. `2026-11-22T04:55:10Z`.
pub fn format_rfc3339(t: SystemTime) -> String {
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Formats as RFC 1123 (`Mon, 19 Sep 2016 18:29:47 GMT`), the Azure format.
pub fn format_rfc1123(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(m - 1) as usize],
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
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

/// `1h2m3s`, `45s`, `250ms`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.subsec_millis());
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Parses `1s`, `500ms`, `2m`, `1h`, `1.5s`, `1m30s` or a bare number of seconds.
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s.is_empty() {
        return Err("empty duration; use e.g. 1s, 500ms, 2m".into());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return secs_to_duration(secs, input);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("`{input}`: missing unit (ms, s, m, h)"))?;
        if n == 0 {
            return Err(format!("`{input}`: expected a number, e.g. 1s, 500ms, 2m"));
        }
        let value: f64 = rest[..n]
            .parse()
            .map_err(|_| format!("`{input}`: `{}` is not a number", &rest[..n]))?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let factor = match &rest[..u] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(format!(
                    "`{input}`: unknown unit `{other}`; use ms, s, m or h"
                ))
            }
        };
        rest = &rest[u..];
        total = total
            .checked_add(secs_to_duration(value * factor, input)?)
            .ok_or_else(|| format!("`{input}` is too long"))?;
    }
    Ok(total)
}

fn secs_to_duration(secs: f64, input: &str) -> Result<Duration, String> {
    if !secs.is_finite() || !(0.0..=1e12).contains(&secs) {
        return Err(format!("`{input}` is not a sensible duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix(t: SystemTime) -> u64 {
        t.duration_since(UNIX_EPOCH).unwrap().as_secs()
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
            "2017-09-18T08:22:00+0200",
            "2017-09-18T08:22:00.Z",
            "1969-12-31T23:59:59Z",
            "２017-09-18T08:22:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad:?} should not parse");
        }
        assert!(parse_rfc3339("2016-02-29T00:00:00Z").is_some());
        // Found by fuzzing: an offset or leap second must not roll 9999 into year 10000.
        assert!(parse_rfc3339("9999-12-31T23:59:59Z").is_some());
        assert!(parse_rfc3339("9999-12-31T23:59:60Z").is_none());
        assert!(parse_rfc3339("9999-12-31T23:30:00-01:00").is_none());
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
        for bad in [
            "21 Foo 2019 09:00:43 GMT",
            "21 Jan 2019 09:00:43 PST",
            "21 Jan 2019 09:00 GMT",
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
        for bad in ["", "s", "1x", "-1s", "1e99", "abc", "1 s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should not parse");
        }
        assert_eq!(format_duration(Duration::from_secs(3723)), "1h2m3s");
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }
}
