//! Completing an EC2 Auto Scaling termination lifecycle action from the node (opt-in,
//! `NTHD_ASG_COMPLETE`). When the group's termination hook holds the instance in
//! `Terminating:Wait`, the group waits for the hook's heartbeat timeout (1 h by default) unless
//! someone calls `CompleteLifecycleAction`. nthd does, after the drain, with the instance
//! role's credentials from IMDSv2, signed with SigV4 ([`sigv4`]), over the Query API ([`api`]).
//!
//! The drain watcher calls, in order: [`Lifecycle::prepare`] when an `asg-terminate` notice is
//! acted on (credentials, region, instance id, group, the hook's heartbeat timeout), then
//! [`Lifecycle::heartbeat`] every [`Lifecycle::heartbeat_every`] while the drain is longer than
//! the hook's heartbeat timeout, and [`Lifecycle::complete`] once the drain is over, with the
//! time it may take. No secret (key id, secret key, session token, signature) is ever logged or
//! put in an error.

pub(crate) mod api;
pub(crate) mod check;
pub(crate) mod credentials;
pub(crate) mod sigv4;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::provider::Request;
use api::Api;
use credentials::Metadata;
use sigv4::Credentials;

/// How long after the state turns `Terminated` Auto Scaling may still answer "No active
/// Lifecycle Action found": nthd asks again this often, until its deadline.
pub(crate) const RETRY_EVERY: Duration = Duration::from_millis(500);
/// The shortest heartbeat timeout a hook can have; assumed when the hook cannot be read.
pub(crate) const MIN_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(30);
/// The most one API call may take (less when the caller's deadline is nearer).
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Credentials this close to their expiry are read again first.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);
/// The error message Auto Scaling gives while the lifecycle action is not yet active.
const NOT_ACTIVE: &str = "No active Lifecycle Action found";

/// Why a lifecycle call failed. Every message names the URL, the action and what to do.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum AsgError {
    #[error("Auto Scaling: reading the instance metadata failed: {0}")]
    Imds(crate::imds::ImdsError),
    #[error(
        "Auto Scaling: {url} names no role: the instance has no instance profile. Attach one \
         whose role allows autoscaling:CompleteLifecycleAction (docs/clouds.md), or set \
         NTHD_ASG_COMPLETE=off"
    )]
    NoRole { url: String },
    #[error(
        "Auto Scaling: the instance role's credentials at {url} cannot be used: {reason}; check \
         the instance profile (aws ec2 describe-iam-instance-profile-associations)"
    )]
    Credentials { url: String, reason: String },
    #[error(
        "Auto Scaling: POST {url} {action} got no answer: {cause}; {drop_in} (docs/clouds.md, \
         \"Completing the lifecycle action\")"
    )]
    Blocked {
        url: String,
        action: &'static str,
        cause: String,
        drop_in: String,
    },
    #[error(
        "Auto Scaling: POST {url} {action} got no answer: {reason}. Check the node's route to \
         the endpoint (a VPC interface endpoint for a private subnet: NTHD_ASG_ENDPOINT), DNS, \
         and the unit's IPAddressAllow= drop-in (docs/clouds.md)"
    )]
    Connect {
        url: String,
        action: &'static str,
        reason: String,
    },
    #[error(
        "Auto Scaling: POST {url} {action} was refused (HTTP {status}) with {code}: {message}{}",
        fix_suffix(fix)
    )]
    Refused {
        url: String,
        action: &'static str,
        status: u16,
        code: String,
        message: String,
        fix: String,
        /// The wait the endpoint asked for (`Retry-After`), in seconds, if it did.
        retry_after: Option<u32>,
    },
    #[error(
        "Auto Scaling: POST {url} {action} answered HTTP {status} without an Auto Scaling \
         error: is NTHD_ASG_ENDPOINT an Auto Scaling endpoint?"
    )]
    Http {
        url: String,
        action: &'static str,
        status: u16,
        /// The wait the endpoint asked for (`Retry-After`), in seconds, if it did.
        retry_after: Option<u32>,
    },
    #[error("Auto Scaling: the answer of {url} to {action} is not what nthd expects: {reason}")]
    Malformed {
        url: String,
        action: &'static str,
        reason: String,
    },
    #[error(
        "Auto Scaling: POST {url} DescribeAutoScalingInstances: instance {instance} is in no \
         Auto Scaling group (set NTHD_ASG_GROUP, or NTHD_ASG_COMPLETE=off on instances outside \
         groups)"
    )]
    NotInGroup { url: String, instance: String },
    #[error(
        "Auto Scaling: {url} still answered \"{NOT_ACTIVE}\" for hook {hook} after {attempts} \
         attempt(s) when nthd's time ran out; the group goes on waiting for the hook's heartbeat \
         timeout. Check that {hook} is the group's termination hook"
    )]
    NotActive {
        url: String,
        hook: String,
        attempts: u32,
    },
    #[error("Auto Scaling: the time for {what} ran out (about {}); the group goes on waiting for the hook's heartbeat timeout", crate::timefmt::format_duration(*took))]
    Deadline { what: &'static str, took: Duration },
    #[error("Auto Scaling: {0}")]
    Client(String),
}

fn fix_suffix(fix: &str) -> String {
    match fix.is_empty() {
        true => String::new(),
        false => format!("; {fix}"),
    }
}

impl AsgError {
    /// The credentials or the signature were not accepted (or the clock is off).
    fn bad_credentials(&self) -> bool {
        matches!(self, AsgError::Refused { code, .. } if matches!(code.as_str(),
            "SignatureDoesNotMatch" | "InvalidClientTokenId" | "ExpiredToken"
                | "IncompleteSignature" | "MissingAuthenticationToken"))
    }

    /// Throttled (`Throttling`, `RequestLimitExceeded`, HTTP 429 or 503): the wait before
    /// asking again, at least [`RETRY_EVERY`], longer when the endpoint asked for longer.
    fn throttled(&self) -> Option<Duration> {
        let asked = match self {
            AsgError::Refused {
                code, retry_after, ..
            } if matches!(code.as_str(), "Throttling" | "RequestLimitExceeded") => *retry_after,
            AsgError::Http {
                status: 429 | 503,
                retry_after,
                ..
            } => *retry_after,
            _ => return None,
        };
        let asked = asked.map(|s| Duration::from_secs(u64::from(s)));
        Some(asked.map_or(RETRY_EVERY, |a| a.max(RETRY_EVERY)))
    }

    /// "No active Lifecycle Action found": too early, ask again.
    fn not_active(&self) -> bool {
        matches!(self, AsgError::Refused { code, message, .. }
            if code == "ValidationError" && message.contains(NOT_ACTIVE))
    }
}

/// The domains AWS serves Auto Scaling from: commercial and GovCloud regions, China, and the
/// dual-stack endpoints (`autoscaling.<region>.api.aws`); VPC interface endpoints are names
/// under `vpce.amazonaws.com`.
const AWS_DOMAINS: [&str; 3] = ["amazonaws.com", "amazonaws.com.cn", "api.aws"];

/// A warning when `NTHD_ASG_ENDPOINT` names a host outside AWS's domains (a loopback test
/// server excepted): nthd signs its requests with the instance role's session token, and that
/// host receives it.
pub(crate) fn endpoint_warning(endpoint: &str) -> Option<String> {
    let uri: http::Uri = endpoint.parse().ok()?;
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    let lower = host.to_ascii_lowercase();
    let aws = AWS_DOMAINS
        .iter()
        .any(|d| lower == *d || lower.ends_with(&format!(".{d}")));
    let loopback = lower == "localhost"
        || lower
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!aws && !loopback).then(|| {
        format!(
            "NTHD_ASG_ENDPOINT={endpoint} is outside AWS's domains ({}): nthd signs its Auto \
             Scaling requests with the instance role's session token, and {host} receives them. \
             Unset it to use the region's endpoint, or check that this host is yours",
            AWS_DOMAINS.join(", ")
        )
    })
}

/// A completed lifecycle action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completed {
    /// Calls made, the successful one included.
    pub(crate) attempts: u32,
    pub(crate) group: String,
    pub(crate) hook: String,
    /// `CONTINUE` or `ABANDON`.
    pub(crate) result: &'static str,
}

/// What `prepare` learned.
#[derive(Debug, Clone)]
struct Prepared {
    role: String,
    creds: Credentials,
    expires: Option<jiff::Timestamp>,
    region: String,
    instance_id: String,
    group: String,
    /// The hook's heartbeat timeout, when DescribeLifecycleHooks answered.
    heartbeat_timeout: Option<Duration>,
    api: Api,
}

/// Completion of the termination lifecycle action for this instance.
#[derive(Debug)]
pub(crate) struct Lifecycle {
    result: &'static str,
    hook: String,
    group: Option<String>,
    endpoint: Option<String>,
    imds: Metadata,
    sandbox: Option<Arc<crate::sandbox::IpPolicy>>,
    prepared: Option<Prepared>,
}

impl Lifecycle {
    /// The completion the settings ask for; `None` (said in the log) when it cannot go ahead.
    /// Completion that is off has no settings ([`crate::config::Options::asg_settings`]), so
    /// nthd then makes no request at all.
    /// Its metadata reads are made with a client and token of its own (`nthd check`).
    pub(crate) fn new(s: crate::config::AsgSettings) -> Option<Lifecycle> {
        Lifecycle::build(s, |s| {
            match crate::imds::ImdsClient::new(&s.metadata, s.client.clone()) {
                Ok(client) => Some(Metadata::new(client, s.imdsv1)),
                Err(e) => {
                    tracing::warn!("completing the lifecycle action is off: {e}");
                    None
                }
            }
        })
    }

    /// The daemon's completion: its metadata reads are made on the daemon's metadata reader
    /// thread, with AWS's provider's own client and token, and it builds no client of its own.
    pub(crate) fn through_reader(
        s: crate::config::AsgSettings,
        reader: std::sync::mpsc::Sender<Request>,
    ) -> Option<Lifecycle> {
        Lifecycle::build(s, |_| Some(Metadata::Reader(reader)))
    }

    /// The completion from `s`, once the settings allow it, reading through what `imds` gives.
    fn build(
        s: crate::config::AsgSettings,
        imds: impl FnOnce(&crate::config::AsgSettings) -> Option<Metadata>,
    ) -> Option<Lifecycle> {
        let result = s.result;
        let Some(hook) = s.hook.clone() else {
            tracing::warn!(
                "NTHD_ASG_COMPLETE={result} but NTHD_ASG_LIFECYCLE_HOOK is not set: completing \
                 the lifecycle action is off; set it to the group's termination hook"
            );
            return None;
        };
        if let Some(w) = s.endpoint.as_deref().and_then(endpoint_warning) {
            tracing::warn!("{w}");
        }
        let imds = imds(&s)?;
        Some(Lifecycle {
            result,
            hook,
            group: s.group,
            endpoint: s.endpoint,
            imds,
            sandbox: None,
            prepared: None,
        })
    }

    /// Blames failed connections on these IP access lists (the daemon's unit's) when they
    /// drop the endpoint, with the drop-in that allows it.
    pub(crate) fn with_sandbox(mut self, policy: Option<Arc<crate::sandbox::IpPolicy>>) -> Self {
        self.sandbox = policy;
        self
    }

    /// Credentials, region, instance id, group (and the hook's heartbeat timeout): called
    /// when an asg-terminate notice is acted on, long before the drain ends.
    pub(crate) async fn prepare(&mut self) -> Result<(), AsgError> {
        if let Some(p) = &mut self.prepared {
            if fresh(p.expires) {
                return Ok(());
            }
            let (role, creds, expires) = self.imds.credentials().await?;
            (p.role, p.creds, p.expires) = (role, creds, expires);
            return Ok(());
        }
        let (role, creds, expires) = self.imds.credentials().await?;
        let region = self.imds.region().await?;
        let instance_id = self.imds.instance_id().await?;
        let endpoint = self
            .endpoint
            .clone()
            .unwrap_or_else(|| api::default_endpoint(&region));
        let api = Api::new(&endpoint, &region, self.sandbox.clone())?;
        let group = match &self.group {
            Some(g) => g.clone(),
            None => describe_group(&api, &creds, &instance_id).await?,
        };
        let mut p = Prepared {
            role,
            creds,
            expires,
            region,
            instance_id,
            group,
            heartbeat_timeout: None,
            api,
        };
        p.heartbeat_timeout = hook_heartbeat(&p, &self.hook).await?;
        tracing::info!("Auto Scaling: {}", describe(&p, &self.hook, self.result));
        self.prepared = Some(p);
        Ok(())
    }

    /// One line on what `prepare` found, for `nthd check`; `None` before it.
    pub(crate) fn summary(&self) -> Option<String> {
        self.prepared
            .as_ref()
            .map(|p| describe(p, &self.hook, self.result))
    }

    /// The endpoint calls go to, once prepared.
    pub(crate) fn endpoint(&self) -> Option<&str> {
        self.prepared.as_ref().map(|p| p.api.endpoint.as_str())
    }

    /// How often to send a heartbeat while draining for `drain_budget`: `Some` when the hook's
    /// heartbeat timeout (30 s, the minimum, when it could not be read) is shorter than the
    /// budget, so the hook would time out before the drain ends; half the timeout, so one late
    /// heartbeat does no harm.
    pub(crate) fn heartbeat_every(&self, drain_budget: Duration) -> Option<Duration> {
        let timeout = self
            .prepared
            .as_ref()
            .and_then(|p| p.heartbeat_timeout)
            .unwrap_or(MIN_HEARTBEAT_TIMEOUT);
        (timeout < drain_budget).then_some(timeout / 2)
    }

    /// `RecordLifecycleActionHeartbeat` for this instance; prepares first if needed.
    pub(crate) async fn heartbeat(&mut self) -> Result<(), AsgError> {
        self.prepare().await?;
        let p = self.prepared.as_ref().ok_or_else(unprepared)?;
        let params = action_params(p, &self.hook);
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        p.api
            .call(
                &p.creds,
                "RecordLifecycleActionHeartbeat",
                &params,
                CALL_TIMEOUT,
            )
            .await?;
        tracing::debug!("Auto Scaling: heartbeat for hook {} recorded", self.hook);
        Ok(())
    }

    /// Retries "No active Lifecycle Action found" until `until`; prepares first if needed.
    pub(crate) async fn complete(&mut self, until: Instant) -> Result<Completed, AsgError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(until);
        let prepared = tokio::time::timeout_at(deadline, self.prepare()).await;
        let took = started.elapsed();
        prepared.map_err(|_| AsgError::Deadline {
            what: "reading the credentials and the group",
            took,
        })??;
        let p = self.prepared.as_ref().ok_or_else(unprepared)?;
        let mut params = action_params(p, &self.hook);
        params.push(("LifecycleActionResult", self.result.to_string()));
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut attempts = 0;
        let mut not_active = false;
        loop {
            let call = p
                .api
                .call(&p.creds, "CompleteLifecycleAction", &params, CALL_TIMEOUT);
            // The deadline cuts a call short: what the endpoint last answered is the cause.
            let Ok(answer) = tokio::time::timeout_at(deadline, call).await else {
                return Err(self.out_of_time(p, attempts, not_active, started));
            };
            attempts += 1;
            let wait = match answer {
                Ok(_) => return Ok(self.completed(p, attempts)),
                Err(e) if e.not_active() => {
                    not_active = true;
                    tracing::info!(
                        "Auto Scaling: {NOT_ACTIVE} yet (attempt {attempts}); asking again in {}",
                        crate::timefmt::format_duration(RETRY_EVERY)
                    );
                    if Instant::now() + RETRY_EVERY >= until {
                        return Err(self.out_of_time(p, attempts, true, started));
                    }
                    RETRY_EVERY
                }
                Err(e) => match e.throttled() {
                    // Asked to wait past the deadline: the throttling is the answer.
                    Some(wait) if Instant::now() + wait < until => {
                        not_active = false;
                        tracing::info!(
                            "{e} (attempt {attempts}); asking again in {}",
                            crate::timefmt::format_duration(wait)
                        );
                        wait
                    }
                    _ => return Err(e),
                },
            };
            tokio::time::sleep(wait).await;
        }
    }

    /// The error when the time for completing ran out after `answered` answers: still "not
    /// active" when that was the last answer, else the deadline itself.
    fn out_of_time(
        &self,
        p: &Prepared,
        answered: u32,
        not_active: bool,
        started: Instant,
    ) -> AsgError {
        match not_active {
            true => AsgError::NotActive {
                url: p.api.endpoint.clone(),
                hook: self.hook.clone(),
                attempts: answered,
            },
            false => AsgError::Deadline {
                what: "CompleteLifecycleAction",
                took: started.elapsed(),
            },
        }
    }

    fn completed(&self, p: &Prepared, attempts: u32) -> Completed {
        tracing::info!(
            "Auto Scaling: CompleteLifecycleAction {} for hook {} of group {} (instance {}) \
             accepted by {} after {attempts} attempt(s)",
            self.result,
            self.hook,
            p.group,
            p.instance_id,
            p.api.endpoint
        );
        Completed {
            attempts,
            group: p.group.clone(),
            hook: self.hook.clone(),
            result: self.result,
        }
    }
}

fn unprepared() -> AsgError {
    AsgError::Client("not prepared".into())
}

/// Whether credentials that expire at `expires` are good for a while yet.
fn fresh(expires: Option<jiff::Timestamp>) -> bool {
    let Some(at) = expires else {
        return true;
    };
    let soon = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(
            REFRESH_BEFORE.as_secs() as i64
        ))
        .unwrap_or(at);
    soon < at
}

/// The parameters naming this instance's lifecycle action.
fn action_params(p: &Prepared, hook: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AutoScalingGroupName", p.group.clone()),
        ("LifecycleHookName", hook.to_string()),
        ("InstanceId", p.instance_id.clone()),
    ]
}

fn describe(p: &Prepared, hook: &str, result: &str) -> String {
    let hb = p.heartbeat_timeout.map_or_else(
        || "heartbeat timeout not read, 30s assumed".to_string(),
        |d| format!("heartbeat timeout {}", crate::timefmt::format_duration(d)),
    );
    format!(
        "instance {} of group {} in {}, hook {hook} ({hb}); completes with {result} at {} \
         with role {}'s credentials",
        p.instance_id, p.group, p.region, p.api.endpoint, p.role
    )
}

/// The instance's group, from `DescribeAutoScalingInstances`.
async fn describe_group(
    api: &Api,
    creds: &Credentials,
    instance: &str,
) -> Result<String, AsgError> {
    const ACTION: &str = "DescribeAutoScalingInstances";
    let body = api
        .call(
            creds,
            ACTION,
            &[("InstanceIds.member.1", instance)],
            CALL_TIMEOUT,
        )
        .await?;
    let Some(member) = api::members(&body).into_iter().next() else {
        return Err(AsgError::NotInGroup {
            url: api.endpoint.clone(),
            instance: instance.to_string(),
        });
    };
    api::element(member, "AutoScalingGroupName")
        .filter(|g| !g.is_empty())
        .ok_or_else(|| AsgError::Malformed {
            url: api.endpoint.clone(),
            action: ACTION,
            reason: "a member without AutoScalingGroupName".into(),
        })
}

/// The hook's heartbeat timeout, from `DescribeLifecycleHooks` (an optional permission):
/// `None`, with a warning, when Auto Scaling refuses to say. Any other failure (no connection,
/// a bad signature) is returned: `CompleteLifecycleAction` would fail the same way, and it is
/// better known now, before the drain.
async fn hook_heartbeat(p: &Prepared, hook: &str) -> Result<Option<Duration>, AsgError> {
    let params = [
        ("AutoScalingGroupName", p.group.as_str()),
        ("LifecycleHookNames.member.1", hook),
    ];
    let call = p
        .api
        .call(&p.creds, "DescribeLifecycleHooks", &params, CALL_TIMEOUT);
    let body = match call.await {
        Ok(body) => body,
        Err(e @ AsgError::Refused { .. }) if !e.bad_credentials() => {
            tracing::warn!("{e}; assuming the shortest heartbeat timeout (30s)");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let found = api::members(&body)
        .into_iter()
        .find(|m| api::element(m, "LifecycleHookName").as_deref() == Some(hook))
        .map(|m| api::element(m, "HeartbeatTimeout").and_then(|t| t.parse::<u64>().ok()));
    if found.is_none() {
        tracing::warn!(
            "Auto Scaling: group {} has no lifecycle hook {hook} ({}); check \
             NTHD_ASG_LIFECYCLE_HOOK",
            p.group,
            p.api.endpoint
        );
    }
    Ok(found
        .flatten()
        .map(|s| Duration::from_secs(s.clamp(30, 7200))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_outside_aws_is_warned_about() {
        for ok in [
            "https://autoscaling.us-east-1.amazonaws.com",
            "https://autoscaling-fips.us-gov-west-1.amazonaws.com:443",
            "https://autoscaling.cn-north-1.amazonaws.com.cn",
            "https://autoscaling.eu-west-1.api.aws",
            "https://vpce-0a1b-x.autoscaling.us-east-1.vpce.amazonaws.com",
            "http://127.0.0.1:8443",
            "http://[::1]:8443",
            "http://localhost:1",
        ] {
            assert_eq!(endpoint_warning(ok), None, "{ok}");
        }
        for odd in [
            "https://autoscaling.example.com",
            "https://amazonaws.com.evil.example",
            "https://notamazonaws.com",
            "https://10.0.0.5",
        ] {
            let w = endpoint_warning(odd).unwrap_or_default();
            assert!(
                w.contains("outside AWS's domains") && w.contains(odd),
                "{odd}: {w}"
            );
        }
    }

    fn lifecycle(heartbeat_timeout: Option<Duration>, prepared: bool) -> Lifecycle {
        let client = crate::imds::ImdsClient::new("http://127.0.0.1:9", Default::default());
        let p = Prepared {
            role: "r".into(),
            creds: Credentials {
                access_key_id: "ASIAFAKE".into(),
                secret_access_key: "s".into(),
                token: None,
            },
            expires: None,
            region: "us-east-1".into(),
            instance_id: "i-1".into(),
            group: "g".into(),
            heartbeat_timeout,
            api: Api::new(
                "https://autoscaling.us-east-1.amazonaws.com",
                "us-east-1",
                None,
            )
            .unwrap(),
        };
        Lifecycle {
            result: "CONTINUE",
            hook: "h".into(),
            group: None,
            endpoint: None,
            imds: Metadata::new(client.unwrap(), false),
            sandbox: None,
            prepared: prepared.then_some(p),
        }
    }

    #[test]
    fn heartbeats_only_when_the_hook_would_time_out_before_the_drain() {
        let min = Duration::from_secs(60);
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(lifecycle(hour, true).heartbeat_every(5 * min), None);
        assert_eq!(
            lifecycle(hour, true).heartbeat_every(2 * 60 * min),
            Some(30 * min)
        );
        // Not read (no permission, or not prepared yet): the 30 s minimum is assumed.
        assert_eq!(
            lifecycle(None, true).heartbeat_every(min),
            Some(Duration::from_secs(15))
        );
        assert_eq!(
            lifecycle(None, false).heartbeat_every(Duration::from_secs(20)),
            None
        );
    }

    #[test]
    fn credentials_are_read_again_five_minutes_before_they_expire() {
        let now = jiff::Timestamp::now();
        assert!(fresh(None));
        assert!(fresh(Some(now + jiff::SignedDuration::from_secs(3600))));
        assert!(!fresh(Some(now + jiff::SignedDuration::from_secs(200))));
        assert!(!fresh(Some(now - jiff::SignedDuration::from_secs(1))));
    }
}
