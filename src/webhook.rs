//! Webhooks (issue #13): every notice nthd announces, every power action it takes and every
//! action it cancels is POSTed to the `--webhook` URLs, as a CloudEvents 1.0 structured-mode
//! event (`application/cloudevents+json`) or as a Slack/Teams `{"text": …}` message.
//!
//! Delivery never delays the power-off: [`Webhooks::send`] only queues the event, and one
//! background task per URL delivers it, retrying with backoff until the notice's deadline
//! (15 minutes when it has none, 1 hour at most). Each URL has its own backlog and its own
//! attempts in flight, so a dead receiver never holds back a live one. Receivers deduplicate
//! on the event's stable `id` (at-least-once delivery). An unreachable receiver costs one
//! warning per failure streak.
//!
//! **TLS roots.** HTTPS uses rustls with the `ring` provider and the system's CA store, read
//! through rustls-native-certs (`/etc/ssl/certs`, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when
//! set): webhook receivers are often internal relays signed by a private CA that is already in
//! the system store, distribution CA updates then reach nthd without a rebuild, and the unit's
//! `ProtectSystem=strict` leaves `/etc/ssl` readable. The roots are read when the sender (or
//! the probe) is built with at least one `https` URL; plain-HTTP-only setups read none. The
//! webhook client as a whole (hyper's client, rustls, ring, webpki), measured with it
//! reachable from `main`, adds 1,114,344 bytes to the static x86_64 binary (3,179,328 →
//! 4,293,672) and 885,256 bytes to the aarch64 one (2,788,048 → 3,673,304); bundled
//! webpki-roots would add its ~150 roots on top and go stale between releases.
//!
//! ring compiles some C, so the aarch64 cross build needs an aarch64 C compiler (Debian's
//! `gcc-aarch64-linux-gnu` with `CC_aarch64_unknown_linux_musl=aarch64-linux-gnu-gcc`);
//! aws-lc-rs would need cmake on top. The metadata client (`crate::imds`) is hyper's plain
//! HTTP/1 client connection, without this client's TLS connector, so IMDS cannot speak TLS by
//! accident.
//!
//! **Why not the `cloudevents-sdk` crate.** Version 0.9 would add 7 crates (chrono, a second
//! date library beside jiff; snafu, a second error library beside thiserror; hostname,
//! iana-time-zone, delegate-attr, …), about 20 KB to a musl release binary (measured on a
//! scratch program), and its HTTP bindings target reqwest 0.12, which nthd does not use; all nthd
//! would use of it is a struct serialized with serde. Structured mode is one JSON object with
//! four required attributes, so it is written here by hand and checked against the spec in
//! the tests.
//!
//! No HTTP proxy is used for webhooks (`https_proxy` is ignored).

mod client;
mod event;
pub(crate) use event::hostname;
mod headers;
mod lane;
mod probe;
mod sender;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::redact;

pub use event::{ActionResult, Context, Event};
pub use headers::SecretHeaders;
pub(crate) use probe::ProbeResult;
pub use probe::{probe, probe_with_headers, ProbeOutcome};
pub use sender::Webhooks;

/// The body format of every webhook request (`--webhook-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum WebhookFormat {
    /// CloudEvents 1.0, structured mode (`Content-Type: application/cloudevents+json`).
    #[default]
    #[value(name = "cloudevents")]
    CloudEvents,
    /// `{"text": "…"}`, one readable line, as Slack and Microsoft Teams incoming webhooks take.
    Slack,
}

/// `--webhook-format` as given, parsed once when the settings are read. A name that is no
/// format is kept as such (only its length: the value sits beside the URLs), because webhooks
/// are optional: it disables them, loudly, and never stops nthd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatSetting {
    /// A format nthd knows.
    Known(WebhookFormat),
    /// Not a format; how many characters it had.
    Unknown(usize),
}

impl FormatSetting {
    /// Parses `--webhook-format` (case-insensitive, blanks around it ignored). Never fails: see
    /// [`FormatSetting::format`].
    pub fn parse(s: &str) -> Result<FormatSetting, std::convert::Infallible> {
        Ok(
            match <WebhookFormat as clap::ValueEnum>::from_str(s.trim(), true) {
                Ok(f) => FormatSetting::Known(f),
                Err(_) => FormatSetting::Unknown(s.chars().count()),
            },
        )
    }

    /// The format, or why there is none.
    pub fn format(self) -> Result<WebhookFormat, WebhookError> {
        match self {
            FormatSetting::Known(f) => Ok(f),
            FormatSetting::Unknown(n) => Err(WebhookError::BadFormat(n)),
        }
    }
}

/// The webhook settings.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    /// Where to POST every event (`--webhook`, repeatable).
    pub urls: Vec<WebhookUrl>,
    /// The body format.
    pub format: WebhookFormat,
    /// `Name: value` headers added to every request (`--webhook-headers-file`), for tokens.
    pub headers_file: Option<PathBuf>,
    /// Time allowed to set up one connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Time allowed for one attempt, up to the answer's status line and headers. Its body is
    /// then read for at most a second: the status alone decides the outcome.
    pub attempt_timeout: Duration,
    /// How long an event is retried when its notice has no deadline.
    pub retry_cap: Duration,
    /// The longest an event is retried, whatever its notice's deadline (AWS schedules some
    /// events weeks ahead).
    pub retry_limit: Duration,
    /// The first delay between attempts; it doubles up to a minute.
    pub backoff: Duration,
    /// Events pending for one URL (waiting or being attempted); past it, that URL's oldest is
    /// dropped.
    pub queue: usize,
    /// Attempts in flight at once to one URL. Each URL has its own: a receiver that hangs
    /// holds only its own.
    pub per_url: usize,
    /// A URL that has failed this long without a single success is dead: it keeps at most
    /// `dead_queue` events pending.
    pub dead_after: Duration,
    /// Events pending for a dead URL; past it, its oldest is dropped.
    pub dead_queue: usize,
    /// The IP access lists of the unit nthd runs in: a receiver they block is named as such,
    /// with the drop-in that allows it. `None`: blame nothing on them.
    pub sandbox: Option<std::sync::Arc<crate::sandbox::IpPolicy>>,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            urls: Vec::new(),
            format: WebhookFormat::CloudEvents,
            headers_file: None,
            connect_timeout: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(10),
            retry_cap: Duration::from_secs(15 * 60),
            retry_limit: Duration::from_secs(60 * 60),
            backoff: Duration::from_secs(1),
            queue: 64,
            per_url: 4,
            dead_after: Duration::from_secs(5 * 60),
            dead_queue: 8,
            sandbox: None,
        }
    }
}

/// A checked webhook URL. Its `Display` and `Debug` show only `scheme://host[:port]`
/// ([`redact::shown`]): the path and query of a webhook URL often hold a secret (Slack's do).
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    uri: http::Uri,
    origin: String,
}

impl WebhookUrl {
    /// `scheme://host[:port]`, the only part of the URL nthd logs.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub(crate) fn uri(&self) -> &http::Uri {
        &self.uri
    }

    pub(crate) fn is_https(&self) -> bool {
        self.uri.scheme() == Some(&http::uri::Scheme::HTTPS)
    }

    /// The port connected to: the URL's, else the scheme's default.
    pub(crate) fn port(&self) -> u16 {
        self.uri
            .port_u16()
            .unwrap_or(if self.is_https() { 443 } else { 80 })
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)
    }
}

impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WebhookUrl({}/…)", self.origin)
    }
}

/// The longest URL accepted.
const MAX_URL: usize = 2048;

/// Parses a `--webhook` URL; usable as a clap `value_parser`. Only `http` and `https` with a
/// host; an `@` anywhere is refused: a user name and password in the URL would end up wherever
/// the URL is shown (the headers file is the place for credentials), and after the host an `@`
/// may end a password that holds a `/`, `?` or `#`. An error shows the URL only as
/// [`redact::shown`] does: `scheme://host[:port]`, or less.
pub fn parse_url(s: &str) -> Result<WebhookUrl, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("the webhook URL is empty; use e.g. https://hooks.example.com/nthd".into());
    }
    if s.len() > MAX_URL || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "the webhook URL must be at most {MAX_URL} printable ASCII characters without \
             spaces (percent-encode anything else)"
        ));
    }
    let shown = redact::shown(s);
    if s.contains('@') {
        return Err(format!(
            "`{shown}`: the webhook URL holds an `@`, so it may carry credentials (a user name \
             or password), which would be shown in logs and status; nthd refuses it. Put \
             credentials in a header in --webhook-headers-file (e.g. `Authorization: Basic …`), \
             and write an `@` in the path or query as %40"
        ));
    }
    let uri: http::Uri = s
        .parse()
        .map_err(|e| format!("`{shown}` is not a URL ({e})"))?;
    let scheme = uri.scheme_str().unwrap_or_default();
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "`{shown}`: a webhook URL must start with http:// or https://"
        ));
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("`{shown}`: the webhook URL has no host"));
    }
    Ok(WebhookUrl { uri, origin: shown })
}

/// The warning for secret headers that would travel unencrypted: `None` unless there are
/// headers and at least one URL is plain `http://`. It names those URLs' origins and the
/// headers' names, never their values.
pub fn plain_http_warning(opts: &WebhookOptions, headers: &SecretHeaders) -> Option<String> {
    if headers.is_empty() {
        return None;
    }
    let plain: Vec<&str> = opts
        .urls
        .iter()
        .filter(|u| !u.is_https())
        .map(WebhookUrl::origin)
        .collect();
    if plain.is_empty() {
        return None;
    }
    let file = opts
        .headers_file
        .as_ref()
        .map(|p| format!(" {}", p.display()))
        .unwrap_or_default();
    let (s, these) = if plain.len() == 1 {
        ("", "this webhook")
    } else {
        ("s", "these webhooks")
    };
    Some(format!(
        "webhook{s} {}: the secret headers from --webhook-headers-file{file} ({}) are sent \
         over plain http, unencrypted: anyone on the network path can read them. Use an \
         https:// URL for {these}",
        plain.join(", "),
        headers.names().join(", ")
    ))
}

/// Why webhooks cannot be set up. Every message names the file or URL and the fix.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The headers file (or the URL file: `what`) cannot be read.
    #[error("cannot read the {what} {path}: {reason}")]
    HeadersRead {
        /// Which file: "webhook headers file" or "webhook URL file".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// The headers or URL file could be changed by someone other than its owner, or read by
    /// anyone.
    #[error(
        "the {what} {path} {problem}; it holds secrets, so nthd refuses it. \
         Fix: chown root:nthd {path}; chmod 0640 {path}"
    )]
    HeadersPermissions {
        /// Which file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong, e.g. "is owned by uid 1000, not root".
        problem: String,
    },
    /// A line of the headers file is not a valid `Name: value` header. The value is never
    /// shown.
    #[error("{path}, line {line}: {reason}; each line must be `Name: value` (# starts a comment)")]
    HeadersSyntax {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A webhook URL is not usable. `reason` comes from [`parse_url`], which never shows a
    /// URL's path or query.
    #[error("{source_of}: {reason}")]
    BadUrl {
        /// Where the URL came from, e.g. `NTHD_WEBHOOK (URL 2)` or `/etc/nthd/webhook-urls line 3`.
        source_of: String,
        /// What is wrong.
        reason: String,
    },
    /// `--webhook-format` names no format (the value is not repeated: it sits beside the URLs).
    #[error(
        "NTHD_WEBHOOK_FORMAT is not a webhook format ({0} characters); use cloudevents or slack"
    )]
    BadFormat(usize),
    /// The HTTPS client cannot be set up.
    #[error("cannot set up HTTPS for webhooks: {0}")]
    Tls(String),
}

impl WebhookError {
    /// The same error about another secret file (`what`).
    pub(crate) fn for_file(self, what: &'static str) -> WebhookError {
        match self {
            WebhookError::HeadersPermissions { path, problem, .. } => {
                WebhookError::HeadersPermissions {
                    what,
                    path,
                    problem,
                }
            }
            other => other,
        }
    }
}

/// Reads `--webhook-url-file`: one URL per line, blank lines and `#` comments skipped. The file
/// must be owned by root and not readable by others (it holds secrets); an error names the line,
/// never its text.
pub(crate) fn read_url_file(path: &std::path::Path) -> Result<Vec<WebhookUrl>, WebhookError> {
    let text = headers::read_secret_file(path, 0, "webhook URL file")?;
    let mut urls = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        urls.push(parse_url(line).map_err(|reason| WebhookError::BadUrl {
            source_of: format!("{}, line {}", path.display(), i + 1),
            reason,
        })?);
    }
    Ok(urls)
}

/// Checks everything webhook delivery needs before it starts: the headers file, and the CA
/// roots when a URL is https. `nthd check` fails on any error here; the daemon disables
/// webhooks (and only webhooks) on it.
pub(crate) fn setup_check(opts: &WebhookOptions) -> Result<(), WebhookError> {
    let headers = match &opts.headers_file {
        Some(p) => SecretHeaders::load(p, 0)?,
        None => SecretHeaders::none(),
    };
    if !opts.urls.is_empty() {
        client::Client::new(opts, headers)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_format_is_parsed_once_and_a_wrong_one_keeps_only_its_length() {
        let f = |s: &str| FormatSetting::parse(s).unwrap();
        assert_eq!(f(" Slack "), FormatSetting::Known(WebhookFormat::Slack));
        assert_eq!(
            f("cloudevents").format().unwrap(),
            WebhookFormat::CloudEvents
        );
        let wrong = f("hunter2-secret");
        assert_eq!(wrong, FormatSetting::Unknown(14));
        let e = wrong.format().unwrap_err().to_string();
        assert!(e.contains("14 characters") && !e.contains("hunter2"), "{e}");
    }
    use super::*;

    #[test]
    fn plain_http_warning_names_the_plain_urls_and_the_header_names() {
        let path = std::path::Path::new("/etc/nthd/webhook-headers");
        let secret = headers::parse(path, "Authorization: Bearer s3cr3t\nX-Team: a\n").unwrap();
        let with = |urls: &[&str]| WebhookOptions {
            urls: urls.iter().map(|u| parse_url(u).unwrap()).collect(),
            headers_file: Some(path.to_path_buf()),
            ..WebhookOptions::default()
        };
        let mixed = with(&[
            "https://a.example/x",
            "http://b.example:8080/T0/SECRET",
            "http://c.example/",
        ]);
        let w = plain_http_warning(&mixed, &secret).unwrap();
        assert!(
            w.starts_with("webhooks http://b.example:8080, http://c.example: ")
                && w.contains("--webhook-headers-file /etc/nthd/webhook-headers")
                && w.contains("(authorization, x-team)")
                && w.contains("unencrypted")
                && w.ends_with("Use an https:// URL for these webhooks"),
            "{w}"
        );
        for never in ["s3cr3t", "SECRET", "a.example"] {
            assert!(!w.contains(never), "{never:?} in {w}");
        }
        let one = plain_http_warning(&with(&["http://b.example/"]), &secret).unwrap();
        assert!(
            one.starts_with("webhook http://b.example: ") && one.ends_with("this webhook"),
            "{one}"
        );
        assert_eq!(
            plain_http_warning(&with(&["https://a.example/"]), &secret),
            None
        );
        assert_eq!(
            plain_http_warning(&mixed, &SecretHeaders::none()),
            None,
            "no header, nothing secret in the clear"
        );
    }

    #[test]
    fn urls_are_checked() {
        let u = parse_url("https://Hooks.Example.com:8443/services/T0/B0/SECRET?x=1").unwrap();
        assert_eq!(u.origin(), "https://hooks.example.com:8443");
        assert_eq!(u.to_string(), "https://hooks.example.com:8443");
        assert!(!format!("{u:?}").contains("SECRET"));
        assert!(u.is_https());
        let u = parse_url("http://[fd00::1]/x").unwrap();
        assert_eq!(u.origin(), "http://[fd00::1]");
        assert!(!u.is_https());
        for bad in [
            "",
            "ftp://x/y",
            "hooks.example.com/x",
            "http:///x",
            "http://a b/",
            "http://x/\u{7}",
            "https://x/é",
        ] {
            assert!(parse_url(bad).is_err(), "{bad:?} accepted");
        }
        let e = parse_url("https://user:hunter2@hooks.example.com/x").unwrap_err();
        assert!(
            !e.contains("hunter2") && e.contains("--webhook-headers-file"),
            "{e}"
        );
        let e = parse_url("ftp://x/SECRET").unwrap_err();
        assert!(!e.contains("SECRET"), "{e}");
    }

    /// Every URL that parse_url refuses is shown as `scheme://host[:port]` or less, whatever
    /// `/`, `?`, `#` and `@` its user name, password, path and query hold; accepted ones too.
    #[test]
    fn a_url_shows_only_its_scheme_host_and_port() {
        let refused: &[(&str, &str, &[&str])] = &[
            (
                "https://bot:s3/cr3t@host:8443/x?token=a#frag",
                "`https://…`",
                &["bot:s3", "s3/cr3t", "cr3t", "token=a", "frag"],
            ),
            (
                "https://u@ser:p?ss#w@host/",
                "`https://…`",
                &["u@ser", "p?ss#w", "ser:p"],
            ),
            (
                "http://a:b@[::1]:9/p",
                "`http://[::1]:9`",
                &["a:", ":b", "/p"],
            ),
            (
                "https://zq:yv@hooks.example/T0?tok=k",
                "`https://hooks.example`",
                &["zq", "yv", "T0", "tok"],
            ),
            (
                "https://hooks.example/T0/q@r",
                "`https://…`",
                &["hooks", "T0", "q@r"],
            ),
            (
                "ftp://hooks.example/SECRET",
                "`ftp://hooks.example`",
                &["SECRET"],
            ),
            ("https://[::1/SECRET", "`https://…`", &["SECRET", "::1"]),
            (
                "nonsense/SECRET",
                "`<unparseable URL>`",
                &["nonsense", "SECRET"],
            ),
        ];
        for (url, shown, secrets) in refused {
            let e = parse_url(url).unwrap_err();
            assert!(e.starts_with(shown), "{url}: {e}");
            for secret in *secrets {
                assert!(!e.contains(secret), "{secret:?} of {url} in: {e}");
            }
        }
        let u = parse_url("https://Hooks.Example:8443/services/T0?token=QQ#WW").unwrap();
        assert_eq!(
            (u.to_string(), format!("{u:?}")),
            (
                "https://hooks.example:8443".to_string(),
                "WebhookUrl(https://hooks.example:8443/…)".to_string()
            )
        );
    }
}
