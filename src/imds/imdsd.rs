//! Reading the metadata service through systemd-imdsd (systemd 261+).
//!
//! On a host booted with `systemd.imds.network=locked`, a `prohibit` route to the IMDS address
//! refuses every process's `connect()` with `EACCES`; only systemd-imdsd, whose sockets carry
//! the firewall mark `0x7FFF0815`, gets through. Everyone else reads through its Varlink
//! service, `io.systemd.InstanceMetadata.Get` on [`SOCKET`], guarded by the polkit action
//! `io.systemd.imds.get`.
//!
//! What this route maps: a GET of `path` becomes `Get` of the key `path` minus the path of
//! imdsd's data URL (`/latest` on AWS, `/computeMetadata/v1` on GCP, `/metadata` on Azure);
//! `data` (base64) is the body, `KeyNotFound` a 404, `NotAvailable` a 403. What it cannot do,
//! because the interface has no way to: any other method (Azure's acknowledgement is a POST),
//! response headers (GCP's ETag, so no `wait_for_change` long-poll), and nthd's own query
//! string where imdsd appends its own suffix (Azure's `api-version`). AWS's IMDSv2 token is
//! imdsd's business: nthd sends none.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use http::Method;
use serde_json::{Map, Value};

use super::{ImdsError, Reply};
use crate::varlink::{Answer, Connection, VarlinkError};

/// systemd-imdsd's Varlink socket.
pub(crate) const SOCKET: &str = "/run/systemd/io.systemd.InstanceMetadata";
/// The polkit action that guards `Get`, and the file that declares it.
pub(crate) const ACTION: &str = "io.systemd.imds.get";
pub(crate) const POLICY: &str = "/usr/share/polkit-1/actions/io.systemd.imds.policy";
/// nthd's polkit rule, which grants [`ACTION`] to user nthd.
pub(crate) const RULE: &str = "/usr/share/polkit-1/rules.d/50-nthd.rules";
const GET: &str = "io.systemd.InstanceMetadata.Get";
const VENDOR_INFO: &str = "io.systemd.InstanceMetadata.GetVendorInfo";
/// `refreshUSec`: with imdsd's cache off it only sets the TTL of the IMDSv2 token imdsd asks EC2
/// for (`X-aws-ec2-metadata-token-ttl-seconds`, the value in seconds), and EC2's longest is 6 h.
/// imdsd (261-262) keeps its token for the life of the connection and never renews it before it
/// expires, so a short value (imdsd's minimum, 1 s) leaves every read after the first second
/// answered 401: nthd asks for 6 h and opens a new connection every [`RECONNECT_EVERY`].
const TOKEN_TTL_USEC: u64 = 6 * 3600 * 1_000_000;
/// A connection, and so imdsd's token, is never used longer than this: well inside the TTL.
const RECONNECT_EVERY: Duration = Duration::from_secs(3600);
/// The bit systemd marks its own errno values with (`SYNTHETIC_ERRNO`), which imdsd 261-262
/// leaves in the `errno` of an `io.systemd.System` error.
const SYNTHETIC_ERRNO: i64 = 1 << 30;
/// `ENOTRECOVERABLE` (the same on every Linux architecture nthd builds for).
const ENOTRECOVERABLE: i64 = 131;
/// What imdsd 261-262 cannot pass on, and what that costs.
const HIDDEN_404: &str = "systemd-imdsd (systemd 261-262) fails every HTTP error answer that \
     has a body, and EC2 answers a path with nothing there (the spot instance-action while no \
     notice is pending) with a 404 page, so through imdsd nthd cannot tell \"no notice\" from \
     a failure. A notice itself (HTTP 200) still comes through";
/// The shortest wait for an answer: the first read of a connection asks polkit and fetches a
/// token.
const MIN_TIMEOUT: Duration = Duration::from_secs(3);

/// What imdsd's `GetVendorInfo` says about where it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vendor {
    /// e.g. `amazon-ec2`.
    pub name: String,
    /// The data URL, e.g. `http://169.254.169.254/latest`.
    pub data_url: String,
    /// Its path, which nthd's paths start with (`/latest`).
    pub prefix: String,
    /// imdsd appends a query of its own to every key (Azure's `?api-version=…`).
    pub has_suffix: bool,
}

impl Vendor {
    /// The cloud imdsd names, by the vendor strings of systemd's hwdb (`hwdb.d/40-imds.hwdb`);
    /// `None` for one nthd does not read (Hetzner, Scaleway, ...) or does not know.
    pub fn cloud(&self) -> Option<crate::notice::Cloud> {
        use crate::notice::Cloud;
        match self.name.as_str() {
            "amazon-ec2" => Some(Cloud::Aws),
            "microsoft-azure" => Some(Cloud::Azure),
            "google-gcp" => Some(Cloud::Gcp),
            _ => None,
        }
    }

    /// What `GetVendorInfo` answered, when it names a data URL.
    pub fn from_reply(p: &Map<String, Value>) -> Option<Vendor> {
        let s = |k: &str| p.get(k).and_then(Value::as_str);
        let data_url = s("dataUrl")?.trim_end_matches('/').to_string();
        let after_scheme = data_url
            .split_once("://")
            .map_or(data_url.as_str(), |x| x.1);
        let prefix = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
        Some(Vendor {
            name: s("vendor").unwrap_or("unknown").to_string(),
            prefix: prefix.to_string(),
            has_suffix: s("dataUrlSuffix").is_some_and(|x| !x.is_empty()),
            data_url,
        })
    }

    /// The key for nthd's `path`, or `None` when `path` is outside the data URL.
    pub fn key(&self, path: &str) -> Option<String> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        if !rest.starts_with('/') {
            return None;
        }
        let rest = if self.has_suffix {
            rest.split_once('?').map_or(rest, |x| x.0)
        } else {
            rest
        };
        Some(rest.to_string())
    }
}

/// The route through imdsd: one kept connection (imdsd starts one process per connection and
/// keeps its token there), and what `GetVendorInfo` said.
#[derive(Debug)]
pub(crate) struct Imdsd {
    socket: PathBuf,
    /// Where the polkit files are looked up (`/`; a directory in tests).
    root: PathBuf,
    state: std::sync::Mutex<State>,
    told_suffix: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// The connection and when it was opened.
    conn: Option<(Connection, std::time::Instant)>,
    vendor: Option<Vendor>,
    /// The network interface imdsd answered through, passed back so it asks there directly
    /// instead of starting a child per interface for every read (its cache is off); `None`
    /// until the first answer, or when imdsd refused the parameter.
    interface: Option<i64>,
}

impl Imdsd {
    pub(crate) fn new(socket: PathBuf, root: PathBuf) -> Imdsd {
        Imdsd {
            socket,
            root,
            state: std::sync::Mutex::new(State::default()),
            told_suffix: AtomicBool::new(false),
        }
    }

    pub(crate) fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the socket is there at all.
    pub(crate) fn present(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::metadata(&self.socket).is_ok_and(|m| m.file_type().is_socket())
    }

    /// `method path` through imdsd, as [`super::ImdsClient::send`] answers it; `url` is the URL
    /// nthd would have read directly, for messages.
    pub(crate) fn send(
        &self,
        method: &Method,
        path: &str,
        url: &str,
        timeout: Duration,
    ) -> Result<Reply, ImdsError> {
        if method != Method::GET {
            let why = format!(
                "nthd cannot acknowledge or {method} through systemd-imdsd: its interface only \
                 reads (GET)"
            );
            let fix = "the platform goes ahead at the event's NotBefore instead of at once \
                       (docs/clouds.md, \"IMDS locked by systemd-imdsd\")";
            return Err(self.error(url, why, fix.into()));
        }
        let timeout = timeout.max(MIN_TIMEOUT);
        // One call at a time on the one connection; a panic elsewhere leaves nothing half-done
        // here that a fresh start would not mend.
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let vendor = self.vendor(&mut st, url, timeout)?;
        let key = vendor.key(path).ok_or_else(|| {
            let why = format!(
                "{path} is outside systemd-imdsd's data URL {}",
                vendor.data_url
            );
            let fix = format!(
                "imdsd is set up for {}; check NTHD_PROVIDER and imdsd's vendor",
                vendor.name
            );
            self.error(url, why, fix)
        })?;
        if vendor.has_suffix
            && path.contains('?')
            && !self.told_suffix.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                "systemd-imdsd appends its own query to every key on {} ({}); nthd's own \
                 (api-version) is left out of {path}",
                vendor.name,
                vendor.data_url
            );
        }
        let params = get_params(&key, st.interface);
        let answer = self.call(&mut st, GET, &params, url, timeout)?;
        match &answer {
            Answer::Reply(p) => {
                st.interface = p
                    .get("interface")
                    .and_then(Value::as_i64)
                    .filter(|i| *i > 0);
            }
            // An imdsd that does not know the parameter: ask without it from now on.
            Answer::Error { name, parameters }
                if name.ends_with("InvalidParameter")
                    && parameters.get("parameter").and_then(Value::as_str) == Some("interface") =>
            {
                st.interface = None;
            }
            Answer::Error { .. } => {}
        }
        self.reply(answer, url)
    }

    /// What `GetVendorInfo` says (no polkit needed): which cloud imdsd is set up for, and
    /// where it reads. For detection, before any read.
    pub(crate) fn vendor_info(&self, timeout: Duration) -> Result<Vendor, ImdsError> {
        let mut st = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let url = format!("varlink:{}", self.socket.display());
        self.vendor(&mut st, &url, timeout.max(MIN_TIMEOUT))
    }

    /// `GetVendorInfo`, once per route (it needs no polkit).
    fn vendor(&self, st: &mut State, url: &str, timeout: Duration) -> Result<Vendor, ImdsError> {
        if let Some(v) = &st.vendor {
            return Ok(v.clone());
        }
        match self.call(st, VENDOR_INFO, &Map::new(), url, timeout)? {
            Answer::Reply(p) => {
                let v = Vendor::from_reply(&p).ok_or_else(|| {
                    self.error(
                        url,
                        "GetVendorInfo names no data URL".into(),
                        not_configured(),
                    )
                })?;
                st.vendor = Some(v.clone());
                Ok(v)
            }
            Answer::Error { name, .. } => Err(self.error(
                url,
                format!("{VENDOR_INFO} answered {name}"),
                not_configured(),
            )),
        }
    }

    /// One call on the kept connection (connecting first when there is none); any failure
    /// drops the connection so the next call starts afresh.
    fn call(
        &self,
        st: &mut State,
        method: &str,
        params: &Map<String, Value>,
        url: &str,
        timeout: Duration,
    ) -> Result<Answer, ImdsError> {
        // A kept connection with anything unread on it (bytes after the last answer's NUL, or
        // its end) would hand them to this call as its answer: a new one instead.
        // An old one carries an old token: a new one, well before the token expires.
        if st
            .conn
            .as_ref()
            .is_some_and(|(c, at)| !c.is_idle() || at.elapsed() >= RECONNECT_EVERY)
        {
            st.conn = None;
        }
        if st.conn.is_none() {
            let c = Connection::connect(&self.socket).map_err(|e| self.transport(url, e))?;
            st.conn = Some((c, std::time::Instant::now()));
        }
        let (conn, _) = st
            .conn
            .as_mut()
            .ok_or_else(|| ImdsError::Client("no connection".into()))?;
        match conn.call(method, params, timeout) {
            Ok(a) => Ok(a),
            Err(e) => {
                st.conn = None;
                Err(self.transport(url, e))
            }
        }
    }

    /// An answer to `Get`, as an HTTP-like reply or an error that says what to do.
    fn reply(&self, answer: Answer, url: &str) -> Result<Reply, ImdsError> {
        let (name, parameters) = match answer {
            Answer::Reply(p) => return self.data(&p, url),
            Answer::Error { name, parameters } => (name, parameters),
        };
        let short = name.rsplit('.').next().unwrap_or(&name);
        let status = |status| {
            Ok(Reply {
                status,
                body: String::new(),
                etag: None,
                retry_after: None,
            })
        };
        match short {
            "KeyNotFound" => status(404),
            "NotAvailable" => status(403),
            "PermissionDenied" | "InteractiveAuthenticationRequired" => {
                Err(ImdsError::ImdsdDenied {
                    url: url.to_string(),
                    answer: name,
                    diagnosis: Refusal::of(&self.root).to_string(),
                })
            }
            "NotSupported" => {
                Err(self.error(url, format!("{GET} answered {name}"), not_configured()))
            }
            "Timeout" | "CommunicationFailure" => Err(self.error(
                url,
                format!("{GET} answered {name}: systemd-imdsd could not read the metadata service"),
                "nthd keeps retrying; `journalctl -u 'systemd-imdsd@*'` says why".into(),
            )),
            "System" => Err(self.system_error(url, &name, &parameters)),
            _ => Err(self.error(
                url,
                format!("{GET} answered {name}"),
                "nthd keeps retrying".into(),
            )),
        }
    }

    /// `io.systemd.System`: an errno, told by name. `ENOTRECOVERABLE` is imdsd's answer to any
    /// HTTP error that has a body, which EC2 gives a path with nothing there (the spot notice's,
    /// while none is pending) and an expired token: imdsd cannot pass it on.
    fn system_error(&self, url: &str, name: &str, p: &Map<String, Value>) -> ImdsError {
        let Some(raw) = p.get("errno").and_then(Value::as_i64) else {
            // imdsd's parent answers so when its per-interface child failed: the first read of a
            // connection, before nthd knows which interface to name.
            let why = format!(
                "{GET} answered {name} without an errno: systemd-imdsd's child for the network \
                 interface failed, most likely on what it cannot pass on: {HIDDEN_404}"
            );
            return self.limit(url, why);
        };
        let errno = raw & !SYNTHETIC_ERRNO;
        let told = p.get("errnoName").and_then(Value::as_str);
        let what = match i32::try_from(errno) {
            Ok(n) => std::io::Error::from_raw_os_error(n).to_string(),
            Err(_) => format!("errno {errno}"),
        };
        let shown = told.map_or(what.clone(), |n| format!("{n}, {what}"));
        if errno != ENOTRECOVERABLE {
            let why = format!("{GET} answered {name} (errno {raw}: {shown})");
            let fix = "`journalctl -u 'systemd-imdsd@*'` says why";
            return self.error(url, why, fix.into());
        }
        let why =
            format!("{GET} answered {name} (errno {raw}: ENOTRECOVERABLE, {what}): {HIDDEN_404}");
        self.limit(url, why)
    }

    /// What imdsd reached but cannot pass on.
    fn limit(&self, url: &str, reason: String) -> ImdsError {
        let fix = "let nthd read the metadata service directly: boot with \
                   systemd.imds.network=unlocked (systemd's default), or use a systemd whose \
                   imdsd passes a 404 with a body on as KeyNotFound (docs/clouds.md, \"IMDS \
                   locked by systemd-imdsd\")";
        ImdsError::ImdsdLimit {
            url: url.to_string(),
            socket: self.socket.display().to_string(),
            reason,
            fix: fix.into(),
        }
    }

    fn data(&self, p: &Map<String, Value>, url: &str) -> Result<Reply, ImdsError> {
        let b64 = p.get("data").and_then(Value::as_str).unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|e| {
                ImdsError::malformed(
                    url,
                    format!("systemd-imdsd's data is not base64 ({e})"),
                    b64,
                )
            })?;
        let body = String::from_utf8(bytes).map_err(|e| {
            let lossy = String::from_utf8_lossy(e.as_bytes()).into_owned();
            ImdsError::malformed(url, "the body is not UTF-8", &lossy)
        })?;
        Ok(Reply {
            status: 200,
            body,
            etag: None,
            retry_after: None,
        })
    }

    fn transport(&self, url: &str, e: VarlinkError) -> ImdsError {
        let fix = match &e {
            VarlinkError::Connect { .. } if !self.present() => format!(
                "{} is missing: install the systemd-imds package (systemd 261+) and start \
                 systemd-imdsd.socket",
                self.socket.display()
            ),
            _ => "nthd reconnects and keeps retrying".to_string(),
        };
        self.error(url, e.to_string(), fix)
    }

    fn error(&self, url: &str, reason: String, fix: String) -> ImdsError {
        ImdsError::Imdsd {
            url: url.to_string(),
            socket: self.socket.display().to_string(),
            reason,
            fix,
        }
    }
}

/// `Get`'s parameters for `key`: imdsd's cache off (every read reaches the metadata service,
/// and no token is kept in a file that outlives its validity), a token good for
/// [`TOKEN_TTL_USEC`], the `interface` of the last answer when there was one, and no interactive
/// authentication (nobody is there to answer it).
pub(crate) fn get_params(key: &str, interface: Option<i64>) -> Map<String, Value> {
    let mut p = Map::new();
    p.insert("key".into(), key.into());
    p.insert("cache".into(), false.into());
    p.insert("refreshUSec".into(), TOKEN_TTL_USEC.into());
    if let Some(i) = interface {
        p.insert("interface".into(), i.into());
    }
    p.insert("allowInteractiveAuthentication".into(), false.into());
    p
}

fn not_configured() -> String {
    "systemd-imdsd is not set up for this cloud: its hwdb knows AWS, Azure and GCP; for \
     Alibaba and Tencent give it systemd.imds.* settings (docs/clouds.md, \"IMDS locked by \
     systemd-imdsd\")"
        .to_string()
}

/// Why systemd-imdsd refuses user nthd, read from the files that decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The action names no owner: polkit refuses imdsd's question for anyone but root,
    /// whatever the rules say (systemd 261 and 262).
    NoOwner,
    /// nthd's rule does not grant the action.
    NoRule,
    /// The rule grants it, and polkit still refused.
    Refused,
}

impl Refusal {
    /// The action's owner annotation first, then nthd's rule.
    pub(crate) fn of(root: &Path) -> Refusal {
        let read = |p: &str| std::fs::read_to_string(root.join(p.trim_start_matches('/'))).ok();
        let policy = read(POLICY);
        if policy
            .as_deref()
            .is_some_and(|p| !p.contains("org.freedesktop.policykit.owner"))
        {
            return Refusal::NoOwner;
        }
        match read(RULE) {
            Some(r) if r.contains(ACTION) => Refusal::Refused,
            _ => Refusal::NoRule,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoOwner => write!(
                f,
                "the polkit action {ACTION} in {POLICY} names no owner, and systemd-imdsd runs \
                 as user systemd-imds, so polkit refuses its question for every caller but root \
                 (\"Only trusted callers … can pass details\"), whatever the rules grant \
                 (systemd 261 and 262 ship it so). Add <annotate \
                 key=\"org.freedesktop.policykit.owner\">unix-user:systemd-imds</annotate> to \
                 that action (docs/security.md, \"Reading through systemd-imdsd\"), or unlock \
                 IMDS for nthd (systemd.imds.network=unlocked)"
            ),
            Refusal::Refused => write!(
                f,
                "{RULE} grants {ACTION} to user nthd, yet polkit refused: another rule may deny \
                 it first, polkit older than 124 cannot identify a caller by its pidfd, and \
                 polkit 0.105 reads only the .pkla; see `journalctl -u polkit`"
            ),
            Refusal::NoRule => write!(
                f,
                "polkit does not grant {ACTION} to user nthd: {RULE} from nthd's package grants \
                 it (reinstall the package), or add a rule for it (docs/security.md)"
            ),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
