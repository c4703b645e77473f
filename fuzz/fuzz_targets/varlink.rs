//! `varlink::decode` (one message from systemd-imdsd, without its NUL) and what the imdsd route
//! makes of a reply: the vendor's data URL and the key for a path under it.
//!
//! Input: the message's bytes. Never a panic; an error always says what is wrong; a reply
//! that names a data URL gives keys that start with '/' and lie under it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::imds::Vendor;
use nthd::testing::varlink::{decode, Answer};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Err(why) => assert!(!why.is_empty()),
        Ok(Answer::Error { name, .. }) => assert!(!name.is_empty()),
        Ok(Answer::Reply(p)) => {
            let Some(v) = Vendor::from_reply(&p) else {
                return;
            };
            for path in [
                "/latest/meta-data/spot/instance-action",
                "/metadata/scheduledevents?api-version=2020-07-01",
                "/",
            ] {
                if let Some(k) = v.key(path) {
                    assert!(k.starts_with('/'), "{k:?} from {path:?} under {v:?}");
                    assert!(path.starts_with(&v.prefix), "{path:?} is not under {v:?}");
                }
            }
        }
    }
});
