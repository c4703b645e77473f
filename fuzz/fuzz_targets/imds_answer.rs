//! The metadata reader's answer reader (`imds/blocking.rs`): the head, a body framed by length,
//! by chunks (extensions, trailers) or by the end of the connection, under a body cap.
//!
//! Input: the first byte says how many bytes each read(2) hands over (1–256), the rest is what
//! the server sent. Never a panic; the buffer never grows past the answer's limit; an answer
//! has an HTTP status and a body within the cap; an error always says what is wrong.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nthd::testing::imds::read_answer;

const CAP: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, wire)) = data.split_first() else {
        return;
    };
    let pieces: Vec<&[u8]> = wire.chunks(usize::from(piece) + 1).collect();
    let (answer, grew_to, limit) = read_answer(&pieces, CAP);
    assert!(grew_to <= limit, "the buffer grew to {grew_to}, past {limit}");
    match answer {
        Ok(Some((status, _etag, body, _keep))) => {
            assert!((200..=599).contains(&status), "status {status}");
            assert!(body.len() <= CAP, "a body of {} bytes", body.len());
        }
        Ok(None) => assert!(wire.is_empty()),
        Err(why) => assert!(!why.is_empty()),
    }
});
