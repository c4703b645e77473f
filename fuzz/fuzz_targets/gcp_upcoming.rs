//! `parse_upcoming_maintenance`: GCP's `instance/upcoming-maintenance` answer. The first byte
//! picks the HTTP status (200 most often, then 404, then others), the rest is the body. The
//! result must agree with a plain `serde_json::Value` reading: 404 or an `error` key or an
//! `ONGOING` maintenance or no start time is `None`; a start time is the time `parse_any`
//! reads from `window_start_time` (else `latest_window_start_time`); every error names the URL.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::imds::ImdsError;
use nthd::testing::provider::gcp::parse_upcoming_maintenance;
use nthd::testing::timefmt;
use nthd_fuzz::{body, check_time};

const URL: &str = "http://169.254.169.254/computeMetadata/v1/instance/upcoming-maintenance";

/// What the answer means, read independently: `Ok(None)` nothing announced, `Ok(Some(t))` a
/// start time, `Err(())` an answer nthd must refuse.
fn expected(status: u16, body: &str) -> Result<Option<std::time::SystemTime>, ()> {
    match status {
        200 => {}
        404 => return Ok(None),
        _ => return Err(()),
    }
    let v: serde_json::Value = serde_json::from_str(body).map_err(|_| ())?;
    let o = v.as_object().ok_or(())?;
    if o.contains_key("error") {
        return Ok(None);
    }
    let s = |k: &str| o.get(k).and_then(|v| v.as_str());
    if s("maintenance_status").is_some_and(|m| m.eq_ignore_ascii_case("ONGOING")) {
        return Ok(None);
    }
    match s("window_start_time").or_else(|| s("latest_window_start_time")) {
        None => Ok(None),
        Some(t) => timefmt::parse_any(t).map(Some).ok_or(()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let status = match first {
        0..=191 => 200,
        192..=223 => 404,
        b => 300 + u16::from(b),
    };
    let Some(body) = body(rest) else { return };
    let want = expected(status, body);
    match parse_upcoming_maintenance(URL, status, body) {
        Ok(got) => {
            assert_eq!(Ok(got), want, "status {status}, body {body:?}");
            if let Some(t) = got {
                check_time(t);
            }
        }
        Err(e) => {
            assert_eq!(want, Err(()), "status {status}, body {body:?} refused: {e}");
            assert!(e.to_string().contains(URL), "{e}");
            match (status, &e) {
                (200, ImdsError::Malformed { .. }) => {}
                (200, _) => panic!("a 200 answer refused as {e:?}"),
                (_, ImdsError::Status { status: s, .. }) => assert_eq!(*s, status),
                _ => panic!("HTTP {status} refused as {e:?}"),
            }
        }
    }
});
