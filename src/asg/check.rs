//! `nthd check`'s Auto Scaling line: with completion on, it reads the credentials, the region
//! and the instance id, and calls the API as the daemon would before its drain (the group's
//! lookup, the hook's heartbeat timeout), so the HTTPS path, the signature and the permissions
//! are all tested; an endpoint the daemon's unit drops is named with the drop-in. src/check.rs
//! turns the [`Probe`] into its line (this module does not depend on it).

use std::sync::Arc;

use super::{AsgError, Lifecycle};
use crate::sandbox::IpPolicy;

/// How the check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Completion is off: nothing to test.
    Off,
    Pass,
    /// The daemon could not complete the action.
    Fail,
}

/// The check's result: the verdict, what was found, and the fix.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) verdict: Verdict,
    pub(crate) value: String,
    pub(crate) fix: Option<String>,
}

/// Tests completion as configured. `own`: the IP access lists of the unit this check runs in;
/// `daemon`: those of nthd.service when that is another unit.
pub(crate) async fn probe(
    opts: &crate::config::Options,
    own: Option<Arc<IpPolicy>>,
    daemon: Option<Arc<IpPolicy>>,
) -> Probe {
    let Some(lc) = opts.asg_settings().and_then(Lifecycle::new) else {
        return Probe {
            verdict: Verdict::Off,
            value: "off (NTHD_ASG_COMPLETE); nthd makes no request to Auto Scaling".into(),
            fix: None,
        };
    };
    let mut lc = lc.with_sandbox(own);
    let fail = |value: String, fix: Option<String>| Probe {
        verdict: Verdict::Fail,
        value,
        fix,
    };
    if let Err(e) = lc.prepare().await {
        let fix = fix_for(&e);
        return fail(e.to_string(), fix);
    }
    let mut summary = lc.summary().unwrap_or_default();
    if let Some(w) = lc.endpoint().and_then(super::endpoint_warning) {
        summary = format!("{summary}; warning: {w}");
    }
    if let (Some(policy), Some((host, port))) = (daemon, lc.endpoint().and_then(host_port)) {
        if let Some(b) = policy.blocked_host(&host, port).await {
            let value = format!(
                "{summary}; but {}, so the daemon cannot reach it (this check runs outside that \
                 unit)",
                b.cause
            );
            return fail(value, Some(b.drop_in));
        }
    }
    Probe {
        verdict: Verdict::Pass,
        value: summary,
        fix: None,
    }
}

/// The fix line for a failure (the message already says most of it).
fn fix_for(e: &AsgError) -> Option<String> {
    Some(match e {
        AsgError::Blocked { drop_in, .. } => drop_in.clone(),
        AsgError::Refused { fix, .. } if !fix.is_empty() => fix.clone(),
        AsgError::NoRole { .. } | AsgError::Credentials { .. } => {
            "attach an instance profile whose role allows autoscaling:CompleteLifecycleAction \
             and autoscaling:DescribeAutoScalingInstances on the group (docs/clouds.md)"
                .into()
        }
        _ => return None,
    })
}

/// The host (without brackets) and port of `scheme://host[:port]`.
fn host_port(url: &str) -> Option<(String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let https = uri.scheme_str() == Some("https");
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    Some((
        host.to_string(),
        uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
    ))
}
