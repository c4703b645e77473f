//! The Auto Scaling settings (`NTHD_ASG_*`): whether nthd completes the termination lifecycle
//! action from the node, for which hook and group, and through which endpoint. Completion is an
//! optional extra, so a bad value here never stops nthd: it falls back to `off` (or to the
//! regional endpoint) with a warning naming the variable (src/config/fallback.rs).

use std::net::IpAddr;

/// `NTHD_ASG_COMPLETE`: off, or the `LifecycleActionResult` to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AsgComplete {
    /// Never complete the lifecycle action; nthd makes no request to Auto Scaling at all.
    #[default]
    Off,
    /// Complete it with `CONTINUE`: the group terminates the instance now.
    Continue,
    /// Complete it with `ABANDON` (for a termination hook the instance is terminated too).
    Abandon,
}

impl AsgComplete {
    /// The `LifecycleActionResult` to send, `None` when off.
    pub fn result(self) -> Option<&'static str> {
        match self {
            AsgComplete::Off => None,
            AsgComplete::Continue => Some("CONTINUE"),
            AsgComplete::Abandon => Some("ABANDON"),
        }
    }
}

impl std::fmt::Display for AsgComplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.result().unwrap_or("off"))
    }
}

/// What completing the lifecycle action needs, resolved once from the settings
/// ([`super::Options::asg_settings`]); there is none when completion is off.
#[derive(Clone, Debug)]
pub struct AsgSettings {
    /// The `LifecycleActionResult` to send.
    pub result: &'static str,
    /// `NTHD_ASG_LIFECYCLE_HOOK` (completion cannot go ahead without it).
    pub hook: Option<String>,
    /// `NTHD_ASG_GROUP`; `None`: read from the instance's tags.
    pub group: Option<String>,
    /// `NTHD_ASG_ENDPOINT`; `None`: the region's endpoint.
    pub endpoint: Option<String>,
    /// AWS's metadata service, where the instance role's credentials are read, as the
    /// provider reads it.
    pub metadata: String,
    /// The metadata client's settings.
    pub client: crate::imds::ClientOptions,
    /// `NTHD_AWS_IMDSV1`.
    pub imdsv1: bool,
}

/// `off`, `CONTINUE` or `ABANDON`, in any case.
pub(super) fn asg_complete(s: &str) -> Result<AsgComplete, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "off" | "" => Ok(AsgComplete::Off),
        "continue" => Ok(AsgComplete::Continue),
        "abandon" => Ok(AsgComplete::Abandon),
        _ => Err("use off, CONTINUE or ABANDON".into()),
    }
}

/// A lifecycle hook's name as Auto Scaling allows it: 1-255 of `A-Za-z0-9-_/`.
pub(super) fn hook_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    let ok = (1..=255).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_/".contains(&b));
    match ok {
        true => Ok(s.to_string()),
        false => Err("a hook name is 1-255 letters, digits, `-`, `_` or `/`".into()),
    }
}

/// An Auto Scaling group's name: 1-255 printable characters, no control characters.
pub(super) fn group_name(s: &str) -> Result<String, String> {
    let s = s.trim();
    let ok = (1..=255).contains(&s.chars().count()) && !s.chars().any(char::is_control);
    match ok {
        true => Ok(s.to_string()),
        false => Err("a group name is 1-255 characters without control characters".into()),
    }
}

/// `NTHD_ASG_ENDPOINT`: `https://HOST[:PORT]`, or `http://` to a loopback address only (a test
/// server on the node: nothing signed travels in clear over a network). No path, query or user.
pub(super) fn asg_endpoint(s: &str) -> Result<String, String> {
    let t = s.trim().trim_end_matches('/');
    let (scheme, rest) = t
        .split_once("://")
        .ok_or("give https://HOST[:PORT], e.g. https://autoscaling.us-east-1.amazonaws.com")?;
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err("give only the scheme, host and port, without a path or user".into());
    }
    let uri: http::Uri = t.parse().map_err(|e| format!("not a URL: {e}"))?;
    let host = uri.host().ok_or("no host")?;
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(t.to_string()),
        "http" if is_loopback(host) => Ok(t.to_string()),
        "http" => Err(format!(
            "http:// is accepted only for loopback addresses (127.0.0.0/8, ::1, localhost), \
             not {host}: requests to Auto Scaling carry the instance role's session token; \
             use https://"
        )),
        _ => Err("use https://".into()),
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_any_case() {
        assert_eq!(asg_complete("off"), Ok(AsgComplete::Off));
        assert_eq!(asg_complete("CONTINUE"), Ok(AsgComplete::Continue));
        assert_eq!(asg_complete("continue"), Ok(AsgComplete::Continue));
        assert_eq!(asg_complete("Abandon"), Ok(AsgComplete::Abandon));
        assert!(asg_complete("yes").is_err());
        assert_eq!(AsgComplete::Continue.to_string(), "CONTINUE");
    }

    #[test]
    fn endpoints_https_anywhere_http_only_on_loopback() {
        for ok in [
            "https://autoscaling.eu-west-1.amazonaws.com",
            "https://vpce-1.autoscaling.us-east-1.vpce.amazonaws.com/",
            "http://127.0.0.1:8443",
            "http://127.3.4.5",
            "http://[::1]:9000",
            "http://localhost:9000",
        ] {
            assert!(asg_endpoint(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://10.0.0.5",
            "http://autoscaling.us-east-1.amazonaws.com",
            "https://user:pw@host",
            "https://host/path",
            "ftp://host",
            "autoscaling.us-east-1.amazonaws.com",
        ] {
            assert!(asg_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hook_and_group_names() {
        assert!(hook_name("nthd-terminate/x_1").is_ok());
        assert!(hook_name("bad name").is_err());
        assert!(hook_name("").is_err());
        assert!(group_name("eks-nodes-1 (prod)").is_ok());
        assert!(group_name("a\nb").is_err());
    }
}
