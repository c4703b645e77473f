//! Alibaba Cloud ECS instance metadata (`http://100.100.100.200`).
//!
//! One source: `meta-data/instance/spot/termination-time`, polled every `poll_interval`. It
//! answers 404 until a spot instance is about to be reclaimed, then a UTC time about 5 minutes
//! ahead.
//!
//! Hardened mode (token required) is supported the way aws.rs does IMDSv2: a token from
//! `PUT /latest/api/token` (`X-aliyun-ecs-metadata-token-ttl-seconds`) is cached and refreshed
//! before it expires, sent as `X-aliyun-ecs-metadata-token`, and a 401/403 drops it and retries
//! the read once with a new one. Unlike AWS, an instance in normal mode (the token `PUT`
//! answered 403, 404 or 405) is read without a token: that is a supported configuration on
//! Alibaba, not a downgrade. It is logged once at info; a later 401/403 on a read tries the
//! token again, in case hardened mode was switched on.

use std::time::{Duration, Instant};

use super::identity;
use super::{
    cap_raw, Cloud, Identity, Notice, NoticeKind, NoticeStatus, Observation, Provider,
    TerminationTime, Timings,
};
use crate::imds::{
    get_with_token, status_error, ImdsClient, ImdsError, TokenAnswer, TokenCache, TokenSource,
};
use crate::notice::{NoticeId, SourceId};
use crate::timefmt;

/// Path of the hardened-mode token (`PUT`).
pub const TOKEN_PATH: &str = "/latest/api/token";
/// Path of the spot termination time.
pub const SPOT_PATH: &str = "/latest/meta-data/instance/spot/termination-time";
/// Path of the instance id (`i-bp1...`).
pub const INSTANCE_ID_PATH: &str = "/latest/meta-data/instance-id";
/// Path of the instance type (`ecs.g7.large`).
pub const INSTANCE_TYPE_PATH: &str = "/latest/meta-data/instance/instance-type";
/// Path of the zone (`cn-hangzhou-h`).
pub const ZONE_PATH: &str = "/latest/meta-data/zone-id";

const SRC_SPOT: SourceId = SourceId::new("alibaba/spot/termination-time");

/// Header names must be lowercase for `ImdsClient::send`.
const TTL_HEADER: &str = "x-aliyun-ecs-metadata-token-ttl-seconds";
const TOKEN_HEADER: &str = "x-aliyun-ecs-metadata-token";
/// Requested token lifetime (the longest Alibaba allows).
const TOKEN_TTL: Duration = Duration::from_secs(21600);

/// The Alibaba provider: its one source, read with the hardened-mode token when there is one.
pub struct Alibaba {
    hardened: Hardened,
    spot: TerminationTime,
}

/// Hardened mode's token, or normal mode without one.
struct Hardened {
    client: ImdsClient,
    token: TokenCache,
    /// The token PUT was refused: read without a token.
    plain_mode: bool,
    told_plain_mode: bool,
}

impl Alibaba {
    /// A provider that reads through `client`. Nothing is read before the first `observe()`.
    pub fn new(client: ImdsClient, timings: &Timings) -> Alibaba {
        let source = (SRC_SPOT, SPOT_PATH);
        Alibaba {
            spot: TerminationTime::new(client.clone(), source, parse_termination_time, timings),
            hardened: Hardened {
                client,
                token: TokenCache::new(TOKEN_PATH, TTL_HEADER, TOKEN_TTL),
                plain_mode: false,
                told_plain_mode: false,
            },
        }
    }

    /// How many hardened-mode tokens were fetched so far.
    pub fn tokens_fetched(&self) -> u64 {
        self.hardened.token.fetched()
    }
}

impl Hardened {
    /// A valid token, `None` in normal (tokenless) mode.
    fn fetch_token(&mut self) -> Result<Option<String>, ImdsError> {
        if self.plain_mode {
            return Ok(None);
        }
        match self.token.get(&self.client)? {
            TokenAnswer::Token(t) => Ok(Some(t)),
            // Forbidden, Not Found, Method Not Allowed: no hardened mode here.
            TokenAnswer::Refused { url, status } if (403..=405).contains(&status) => {
                if !self.told_plain_mode {
                    tracing::info!(
                        "metadata token PUT {url} answered HTTP {status}: the instance is in normal \
                         (not hardened) metadata mode; reading without a token"
                    );
                    self.told_plain_mode = true;
                }
                self.plain_mode = true;
                Ok(None)
            }
            TokenAnswer::Refused { url, status } => Err(status_error(url, status)),
        }
    }
}

/// Parses a `spot/termination-time` answer. The endpoint exists only while a termination is
/// scheduled, so any answer is a notice: a time that does not parse is logged and taken as
/// "now". It never fails today; the `Result` keeps the parsers' signatures uniform.
pub fn parse_termination_time(url: &str, body: &str) -> Result<Notice, ImdsError> {
    let text = body.trim();
    let deadline = timefmt::parse_any(text);
    let detail = match deadline {
        Some(_) => format!("spot instance termination-time {text}"),
        None => {
            let t = crate::logging::clean(text, 64);
            crate::logging::warn_limited(&format!("alibaba-time {t}"), || {
                format!("spot termination-time \"{t}\" at {url} does not parse; acting as if it were now")
            });
            format!(
                "spot instance termination-time {:?} (unparseable, taken as now)",
                text.chars().take(64).collect::<String>()
            )
        }
    };
    Ok(Notice {
        kind: NoticeKind::AlibabaSpot,
        source: SRC_SPOT,
        id: NoticeId::new(Cloud::Alibaba, &["spot", "termination"]),
        event_id: None,
        deadline,
        status: NoticeStatus::Active,
        detail,
        raw: cap_raw(body),
    })
}

/// The identity keys, read one after the other. The lifecycle stays unknown: ECS instance
/// metadata has no documented key for the billing method or spot strategy that we know of (only
/// `instance/spot/termination-time`, which exists once a reclaim is scheduled, not for the
/// instance's whole life).
const IDENTITY: identity::Paths = identity::Paths {
    instance_id: INSTANCE_ID_PATH,
    instance_type: INSTANCE_TYPE_PATH,
    zone: ZONE_PATH,
    lifecycle: None,
};

impl Provider for Alibaba {
    const CLOUD: Cloud = Cloud::Alibaba;

    fn describe(&self) -> String {
        let h = &self.hardened;
        format!(
            "Alibaba Cloud ECS metadata at {} ({}): {}",
            h.client.base(),
            if h.plain_mode {
                "normal mode, no token"
            } else if h.token.is_cached() {
                "hardened-mode token"
            } else {
                "with a hardened-mode token unless the instance is in normal mode"
            },
            self.spot.every(),
        )
    }

    /// A 401/403 drops the token and the read is retried once ([`get_with_token`]).
    fn observe(&mut self) -> Observation {
        let hardened = &mut self.hardened;
        self.spot.observe(|_, path| get_with_token(hardened, path))
    }

    fn next_due(&self) -> Instant {
        self.spot.next_due()
    }

    fn identity(&mut self) -> Result<Identity, ImdsError> {
        let client = self.hardened.client.clone();
        IDENTITY.read(&client, |path| get_with_token(&mut self.hardened, path))
    }
}

impl TokenSource for Hardened {
    const HEADER: &'static str = TOKEN_HEADER;

    fn client(&self) -> &ImdsClient {
        &self.client
    }

    fn token(&mut self) -> Result<Option<String>, ImdsError> {
        self.fetch_token()
    }

    /// Hardened mode answers 401 or 403 to a missing, expired or unknown token.
    fn rejects(&self, status: u16) -> bool {
        matches!(status, 401 | 403)
    }

    /// Also leaves normal mode: a 401/403 may mean hardened mode was switched on.
    fn drop_token(&mut self) {
        self.token.clear();
        self.plain_mode = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    const U: &str = "http://100.100.100.200/latest/meta-data/instance/spot/termination-time";

    #[test]
    fn termination_times() {
        let n = parse_termination_time(U, "2015-01-05T18:02:00Z").unwrap();
        assert_eq!(n.kind, NoticeKind::AlibabaSpot);
        assert_eq!(n.id, "alibaba/spot/termination");
        assert_eq!(n.source, SRC_SPOT);
        assert_eq!(n.status, NoticeStatus::Active);
        assert_eq!(
            n.deadline,
            Some(UNIX_EPOCH + Duration::from_secs(1_420_480_920))
        );
        let n2 = parse_termination_time(U, "2015-01-05T18:03:00Z\n").unwrap();
        assert_eq!(n.id, n2.id, "the fingerprint must not depend on the time");
        assert!(n2.deadline.is_some());
    }

    #[test]
    fn unparseable_times_are_still_notices() {
        for body in [
            "",
            "soon",
            "2015-13-05T18:02:00Z",
            "<html>",
            "é",
            &"9".repeat(5000),
        ] {
            let n = parse_termination_time(U, body).unwrap();
            assert_eq!(n.kind, NoticeKind::AlibabaSpot, "{body:?}");
            assert!(n.deadline.is_none(), "{body:?}");
            assert!(n.detail.len() < 200);
        }
    }
}
