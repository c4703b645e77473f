//! `nthd check`: will a graceful shutdown really work on this node?
//!
//! One screen of checks, each ✔ / ✘ / ! with the value found and, for every failure, the exact
//! fix. Exit code 0 only when every required check passes. Files are read below `root` (`/`
//! normally; a fixture directory in tests) so every check can be made to pass and fail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::config::Options;

use crate::logind::{Logind, LogindError};
use crate::notice::{Cloud, Lifecycle, Notice};
use crate::policy::{decide, PowerAction};
use crate::provider::detect::{self, Detection, Dmi};
use crate::sandbox::{Blocked, IpPolicy};
use crate::timefmt::format_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    Pass,
    Fail,
    Warn,
    Info,
    /// Not run, because what it needs is missing (the value says what).
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    pub name: &'static str,
    pub status: Status,
    pub required: bool,
    pub value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

fn check(
    name: &'static str,
    required: bool,
    status: Status,
    value: impl Into<String>,
    fix: Option<String>,
) -> Check {
    Check {
        name,
        status,
        required,
        value: value.into(),
        fix,
    }
}

/// The oldest systemd nthd.service runs on: it needs `StateDirectory=` and
/// `RuntimeDirectory=` with their environment variables (235), as the tarball's install.sh
/// does. Older ones fail apart: kubelet's Graceful Node Shutdown does not work with 219
/// (Amazon Linux 2 / CentOS 7, kubernetes#101553), and 220–234 cannot run the unit.
pub(crate) const MIN_SYSTEMD: u32 = 235;
/// The oldest systemd kubelet's Graceful Node Shutdown works with.
const MIN_SYSTEMD_GNS: u32 = 220;

/// Parses the major version from strings like `252.38-1~deb12u1` or `219`.
pub(crate) fn systemd_major(v: &str) -> Option<u32> {
    let digits: String = v.trim().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Where a logind.conf setting is set, in the order logind applies them (the last one wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfSetting {
    pub file: PathBuf,
    pub value: String,
}

/// Where `InhibitDelayMaxSec=` is set.
pub(crate) fn inhibit_delay_settings(root: &Path) -> Vec<ConfSetting> {
    logind_conf_settings(root, "InhibitDelayMaxSec")
}

/// Scans logind.conf and its drop-ins below `root` the way systemd does: the main file first,
/// then drop-ins from /usr/lib, /run and /etc sorted by file name (a name in /etc masks the same
/// name in /run and /usr/lib). Returns every file that sets `key` in `[Login]`, in order.
/// (Some settings, such as PowerKeyIgnoreInhibited, are not exported over D-Bus.)
pub(crate) fn logind_conf_settings(root: &Path, key: &str) -> Vec<ConfSetting> {
    let prefix = format!("{key}=");
    let mut files: Vec<PathBuf> = vec![root.join("etc/systemd/logind.conf")];
    let mut dropins: std::collections::BTreeMap<String, PathBuf> = Default::default();
    for dir in [
        "usr/lib/systemd/logind.conf.d",
        "run/systemd/logind.conf.d",
        "etc/systemd/logind.conf.d",
    ] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".conf") {
                    dropins.insert(name, e.path());
                }
            }
        }
    }
    files.extend(dropins.into_values());
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let mut in_login = false;
        let mut last = None;
        for line in text.lines() {
            let l = line.trim();
            if l.starts_with('[') {
                in_login = l == "[Login]";
            } else if in_login {
                if let Some(v) = l.strip_prefix(prefix.as_str()) {
                    last = Some(v.trim().to_string());
                }
            }
        }
        if let Some(value) = last {
            out.push(ConfSetting { file: f, value });
        }
    }
    out
}

/// The uid of `name` in `root`'s /etc/passwd (`Some(None)`: listed, uid unreadable).
fn passwd_uid(root: &Path, name: &str) -> Option<Option<u32>> {
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).ok()?;
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&name))
        .map(|f| f.get(2).and_then(|u| u.parse().ok()))
}

/// `SYS_UID_MAX` from `root`'s /etc/login.defs, else 999 (shadow's default).
fn sys_uid_max(root: &Path) -> u32 {
    std::fs::read_to_string(root.join("etc/login.defs"))
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("SYS_UID_MAX")).then(|| w.next()?.parse().ok())?
            })
        })
        .unwrap_or(999)
}

const POLKIT_FIX: &str = "install the polkit rule: /usr/share/polkit-1/rules.d/50-nthd.rules \
     (polkit >= 0.106) or /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla (polkit 0.105, \
     Ubuntu 20.04/22.04, Debian 11) from the nthd package, then run this check as the daemon's \
     user: sudo -u nthd nthd check";

/// What the checks share: the settings, the file root, one logind client, and what the earlier
/// checks found.
struct Ctx<'a> {
    opts: &'a Options,
    root: &'a Path,
    logind: Logind,
    cloud: Option<Cloud>,
    /// Spot, preemptible or on-demand, when the metadata service said.
    lifecycle: Option<Lifecycle>,
    /// logind's `InhibitDelayMaxUSec`, when logind answered.
    budget: Option<Duration>,
    sandbox: Sandboxes,
}

/// The IP access lists that decide what can be reached: those of the unit the check runs in,
/// and, when that is another unit (an ssh session's scope, say), those of `nthd.service`, which
/// the daemon runs under.
#[derive(Default)]
pub(crate) struct Sandboxes {
    own: Option<Arc<IpPolicy>>,
    daemon: Option<Arc<IpPolicy>>,
}

/// The daemon's unit.
const DAEMON_UNIT: &str = "nthd.service";

impl Sandboxes {
    /// Read from systemd; whatever cannot be read is left out.
    async fn load() -> Sandboxes {
        let own = crate::sandbox::own_policy().await;
        let daemon = match &own {
            Some(p) if p.unit == DAEMON_UNIT => None,
            _ => crate::sandbox::unit_policy(DAEMON_UNIT).await,
        };
        Sandboxes { own, daemon }
    }

    /// Whether the daemon's unit drops every address of `host` (which this check, outside
    /// that unit, may well reach).
    async fn daemon_blocks(&self, host: &str, port: u16) -> Option<Blocked> {
        self.daemon.as_ref()?.blocked_host(host, port).await
    }
}

/// The failed check for an address the daemon's unit drops.
fn daemon_cannot_reach(name: &'static str, what: &str, b: Blocked) -> Check {
    check(
        name,
        true,
        Status::Fail,
        format!(
            "{what}: {}, so the daemon cannot reach it (this check runs outside that unit, \
             where the address may well be reachable)",
            b.cause
        ),
        Some(b.drop_in),
    )
}

/// Runs every check, in the order of the screen: one function per check (or per pair of checks
/// that come from one answer). Checks that need logind are skipped, saying so, without it.
pub(crate) async fn run_checks(opts: &Options, root: &Path) -> Vec<Check> {
    let mut c = Ctx {
        opts,
        root,
        logind: Logind::new(),
        cloud: None,
        lifecycle: None,
        budget: None,
        sandbox: Sandboxes::load().await,
    };
    let mut out = vec![settings(opts)];
    match cloud(&c).await {
        Ok(d) => {
            out.push(check(
                "cloud",
                true,
                Status::Pass,
                format!("{} ({})", d.cloud, d.how),
                None,
            ));
            c.cloud = Some(d.cloud);
            out.extend(metadata_service(&mut c, d.cloud).await);
        }
        Err(fail) => out.push(fail),
    }
    out.push(bus_and_logind(&mut c).await);
    if c.budget.is_none() {
        out.extend(skipped_without_logind(opts));
    } else {
        for action in opts.policy().power_actions() {
            out.push(logind_permits(&mut c, action).await);
        }
    }
    out.push(systemd_version(&mut c).await);
    if let Some(budget) = c.budget {
        out.extend(inhibitors(&mut c).await);
        out.push(drain_budget(&c, budget));
        out.push(drain_report(&mut c).await);
        out.push(power_key(&mut c).await);
    }
    out.push(user_nthd(root));
    out.push(nthd_service(&mut c).await);
    out.extend(webhooks(opts, &c.sandbox).await);
    out.push(asg_completion(opts, &c.sandbox).await);
    out
}

/// `NTHD_ASG_COMPLETE`: can the daemon complete the lifecycle action (src/asg/check.rs)?
async fn asg_completion(opts: &Options, sandbox: &Sandboxes) -> Check {
    use crate::asg::check::{probe, Verdict};
    let p = probe(opts, sandbox.own.clone(), sandbox.daemon.clone()).await;
    let status = match p.verdict {
        Verdict::Off => Status::Info,
        Verdict::Pass => Status::Pass,
        Verdict::Fail => Status::Fail,
    };
    let required = p.verdict == Verdict::Fail;
    check("asg lifecycle completion", required, status, p.value, p.fix)
}

/// Each `--webhook`, probed with the CloudEvents abuse-protection handshake (an OPTIONS request
/// with `WebHook-Request-Origin`). Any HTTP answer means reachable. An unreachable receiver is a
/// warning (it may be down for a while; nthd still powers off without it); every setup error
/// (a URL, the URL file, the format, the headers file, the CA roots) is a failure: the daemon
/// would run with webhooks disabled.
async fn webhooks(opts: &Options, sandbox: &Sandboxes) -> Vec<Check> {
    if !opts.webhooks_wanted() {
        return vec![];
    }
    let setup = opts
        .webhook_options()
        .and_then(|w| crate::webhook::setup_check(&w).map(|()| w));
    let mut w = match setup {
        Ok(w) => w,
        Err(e) => {
            let fix = match &e {
                crate::webhook::WebhookError::HeadersPermissions { path, .. } => Some(format!(
                    "chown root:nthd {0}; chmod 0640 {0}",
                    path.display()
                )),
                _ => None,
            };
            let msg = format!("{e}; the daemon runs with webhooks disabled until this is fixed");
            return vec![check("webhook setup", true, Status::Fail, msg, fix)];
        }
    };
    w.sandbox = sandbox.own.clone();
    let mut out = vec![];
    for r in crate::webhook::probe(&w).await {
        out.push(webhook_result(&r, sandbox).await);
    }
    out
}

/// One receiver's probe, as a check. An address a unit's IP access lists drop is a failure:
/// the daemon would never deliver to it.
async fn webhook_result(r: &crate::webhook::ProbeResult, sandbox: &Sandboxes) -> Check {
    use crate::webhook::ProbeOutcome;
    const NAME: &str = "webhook";
    let host = r.url.uri().host().unwrap_or("");
    if let Some(b) = sandbox.daemon_blocks(host, r.url.port()).await {
        return daemon_cannot_reach(NAME, &r.url.to_string(), b);
    }
    match &r.outcome {
        ProbeOutcome::Reachable { .. } => check(NAME, false, Status::Pass, r.to_string(), None),
        ProbeOutcome::Blocked { cause, drop_in } => check(
            NAME,
            true,
            Status::Fail,
            format!("{}: no connection: {cause}", r.url),
            Some(drop_in.clone()),
        ),
        ProbeOutcome::Unreachable { cause, hint } => check(
            NAME,
            false,
            Status::Warn,
            format!("{}: {cause}", r.url),
            Some(hint.clone()),
        ),
    }
}

/// Whether every setting is used as given: each one that fell back is named with its line or
/// variable, what nthd uses instead and the fix.
fn settings(opts: &Options) -> Check {
    if opts.degraded.is_empty() {
        return check(
            "settings",
            true,
            Status::Pass,
            "every setting used as given",
            None,
        );
    }
    let names: Vec<&str> = opts.degraded.iter().map(|d| d.setting.as_str()).collect();
    let each: Vec<&str> = opts.degraded.iter().map(|d| d.message.as_str()).collect();
    let value = format!("fell back: {}", names.join(", "));
    check("settings", true, Status::Fail, value, Some(each.join("\n")))
}

/// The cloud: `NTHD_PROVIDER`, else detection (DMI, then a probe).
async fn cloud(c: &Ctx<'_>) -> Result<Detection, Check> {
    if let Some(cloud) = c.opts.provider.cloud() {
        return Ok(Detection {
            cloud,
            how: "set by NTHD_PROVIDER".into(),
        });
    }
    let dmi = Dmi::read(
        &c.root.join("sys/class/dmi/id"),
        &c.root.join("sys/hypervisor/uuid"),
    );
    let endpoint = c.opts.imds_endpoint.clone();
    let sandbox = c.sandbox.own.clone();
    let client = c.opts.provider_settings().client;
    let imdsd = client.imdsd_route(c.root);
    // The probes block: on a thread of their own.
    let probe = move || {
        let t = Duration::from_secs(1);
        detect::detect(&dmi, imdsd.as_ref(), endpoint.as_deref(), t, sandbox)
    };
    let detected = tokio::task::spawn_blocking(probe)
        .await
        .map_err(|e| e.to_string());
    detected
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|e| check("cloud", true, Status::Fail, "unknown", Some(e)))
}

/// One read of every source: whether the metadata service answers, and what it lists now.
async fn metadata_service(c: &mut Ctx<'_>, cloud: Cloud) -> Vec<Check> {
    let mut settings = c.opts.provider_settings();
    settings.client.sandbox = c.sandbox.own.clone();
    let client =
        crate::imds::ImdsClient::new(&settings.endpoint_for(cloud), settings.client.clone());
    let p = match client
        .clone()
        .map(|cl| crate::provider::build_with(cloud, cl, &settings))
    {
        Ok(p) => p,
        Err(e) => {
            return vec![check(
                "metadata service",
                true,
                Status::Fail,
                e.to_string(),
                None,
            )]
        }
    };
    let describe = p.describe();
    let (obs, lifecycle) = read_once(p, c.opts.request_timeout).await;
    let answered = if obs.fresh.is_empty() {
        no_metadata_answer(obs.errors.first().map(|e| &e.error))
    } else {
        let v = format!("{describe} answered ({} sources read)", obs.fresh.len());
        match obs.errors.first() {
            Some(e) => check(
                "metadata service",
                true,
                Status::Warn,
                v,
                Some(e.error.to_string()),
            ),
            None => check("metadata service", true, Status::Pass, v, None),
        }
    };
    let endpoint = settings.endpoint_for(cloud);
    let answered = match daemon_blocks_endpoint(&c.sandbox, &endpoint).await {
        Some(b) => daemon_cannot_reach("metadata service", &endpoint, b),
        None => answered,
    };
    c.lifecycle = lifecycle;
    let access = client.map(|cl| metadata_access(&cl, &obs, c.root, cloud));
    let mut out = vec![answered];
    out.extend(access.ok());
    out.push(current_notices(c.opts, &obs.notices));
    out
}

/// How the reads reach the metadata service: directly, or through systemd-imdsd because IMDS
/// is locked, and then whether the daemon (user nthd, which polkit must allow) can too.
fn metadata_access(
    client: &crate::imds::ImdsClient,
    obs: &crate::provider::Observation,
    root: &Path,
    cloud: Cloud,
) -> Check {
    use crate::imds::{Access, ImdsError};
    const NAME: &str = "metadata access";
    let locked = obs.errors.iter().find_map(|e| match &e.error {
        err @ (ImdsError::Locked { .. }
        | ImdsError::Imdsd { .. }
        | ImdsError::ImdsdDenied { .. }) => Some(err.to_string()),
        _ => None,
    });
    if let Some(err) = locked {
        return check(
            NAME,
            true,
            Status::Fail,
            "IMDS is locked; nthd cannot read it",
            Some(err),
        );
    }
    if client.access() == Access::Direct {
        return check(NAME, true, Status::Pass, "direct", None);
    }
    let value = format!(
        "locked by systemd-imdsd (prohibit route); reading through its Varlink service {}{}",
        client.imdsd_socket().display(),
        imdsd_limits(cloud)
    );
    // Reads get through, but imdsd hides some answers: a warning with what and why.
    let hidden = obs.errors.iter().find_map(|e| match &e.error {
        err @ ImdsError::ImdsdLimit { .. } => Some(err.to_string()),
        _ => None,
    });
    if let Some(err) = hidden {
        return check(NAME, true, Status::Warn, value, Some(err));
    }
    // Root skips polkit; the daemon runs as nthd, which polkit must allow.
    let as_root = crate::logind::effective_uid() == 0;
    let refusal = crate::imds::Refusal::of(root);
    if as_root && refusal == crate::imds::Refusal::NoOwner {
        let fix = format!("as root this check reads through systemd-imdsd, but the daemon (user nthd) will be refused: {refusal}");
        return check(NAME, true, Status::Fail, value, Some(fix));
    }
    check(NAME, true, Status::Pass, value, None)
}

/// What nthd cannot do on `cloud` through systemd-imdsd.
fn imdsd_limits(cloud: Cloud) -> &'static str {
    match cloud {
        Cloud::Azure => {
            " (it cannot acknowledge a Scheduled Event: the platform goes ahead at NotBefore)"
        }
        Cloud::Gcp => " (no wait_for_change long-poll: nthd polls instead)",
        _ => "",
    }
}

/// The failed check when no source answered: the first error, and what to do about it.
fn no_metadata_answer(e: Option<&crate::imds::ImdsError>) -> Check {
    const NAME: &str = "metadata service";
    if let Some(crate::imds::ImdsError::BlockedBySandbox {
        url,
        cause,
        drop_in,
        ..
    }) = e
    {
        let value = format!("no answer from {url}: {cause}");
        return check(NAME, true, Status::Fail, value, Some(drop_in.clone()));
    }
    check(
        NAME,
        true,
        Status::Fail,
        e.map_or_else(|| "no answer".into(), ToString::to_string),
        Some(
            "make sure the metadata service is enabled and reachable from this host; on AWS \
             IMDSv2 needs the token PUT to work (hop limit 1 is enough for a host daemon)"
                .into(),
        ),
    )
}

/// Whether the daemon's unit drops the metadata endpoint `base` (`http://HOST[:PORT]`).
async fn daemon_blocks_endpoint(sandbox: &Sandboxes, base: &str) -> Option<Blocked> {
    let (host, port) = crate::imds::host_port(base)?;
    sandbox.daemon_blocks(&host, port).await
}

/// One observation, on a thread of its own (the provider blocks), and, when a source answered,
/// spot, preemptible or on-demand from the instance identity (`None` when the cloud does not
/// say). Nothing when the reads overrun their timeouts.
async fn read_once(
    mut p: crate::provider::AnyProvider,
    request_timeout: Duration,
) -> (crate::provider::Observation, Option<Lifecycle>) {
    let read = tokio::task::spawn_blocking(move || {
        let obs = p.observe();
        let identity = (!obs.fresh.is_empty()).then(|| p.identity());
        (obs, identity.and_then(Result::ok).and_then(|i| i.lifecycle))
    });
    let limit = request_timeout * 8 + Duration::from_secs(4);
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(read)) => read,
        _ => Default::default(),
    }
}

/// The notices listed now, each with what nthd would do.
fn current_notices(opts: &Options, notices: &[Notice]) -> Check {
    if notices.is_empty() {
        return check("current notices", false, Status::Info, "none", None);
    }
    let policy = opts.policy();
    let now = std::time::SystemTime::now();
    let each: Vec<String> = notices
        .iter()
        .map(|n| format!("{} → {}", n.detail, decide(&policy, n, now, None).action))
        .collect();
    check(
        "current notices",
        false,
        Status::Warn,
        each.join("; "),
        None,
    )
}

/// The system bus and logind, read through `InhibitDelayMaxUSec` (kept as the drain budget).
async fn bus_and_logind(c: &mut Ctx<'_>) -> Check {
    const NAME: &str = "system bus and logind";
    match c.logind.inhibit_delay_max().await {
        Ok(b) => {
            c.budget = Some(b);
            check(NAME, true, Status::Pass, crate::logind::bus_address(), None)
        }
        Err(e) => {
            let fix = match &e {
                LogindError::NoBus { .. } => {
                    "start dbus (systemctl start dbus) and make sure \
                     /run/dbus/system_bus_socket exists"
                }
                _ => "start systemd-logind (systemctl start systemd-logind)",
            };
            check(NAME, true, Status::Fail, e.to_string(), Some(fix.into()))
        }
    }
}

/// The name of the check that asks logind whether this user may carry out `action`.
fn permits_check_name(action: PowerAction) -> &'static str {
    match action {
        PowerAction::Reboot => "logind permits reboot",
        PowerAction::PowerOff => "logind permits power-off",
    }
}

/// `CanPowerOff` / `CanReboot` for the user running the check.
async fn logind_permits(c: &mut Ctx<'_>, action: PowerAction) -> Check {
    let (name, label) = (permits_check_name(action), action.can_method());
    let uid = crate::logind::effective_uid();
    let user = crate::logind::passwd_name(c.root, uid);
    let is_nthd = user.as_deref() == Some("nthd");
    let who = user.unwrap_or_else(|| format!("uid {uid}"));
    let v = match c.logind.can(action).await {
        Ok(v) => v,
        Err(e) => {
            return check(
                name,
                true,
                Status::Fail,
                e.to_string(),
                Some(POLKIT_FIX.into()),
            )
        }
    };
    if v == crate::logind::Grant::Yes {
        let note = match is_nthd {
            true => String::new(),
            false => {
                format!(" (checked as {who}; the daemon runs as nthd: sudo -u nthd nthd check)")
            }
        };
        return check(
            name,
            true,
            Status::Pass,
            format!("{label} = yes for {who}{note}"),
            None,
        );
    }
    let fix = if !is_nthd {
        format!("you ran this as {who}; the grant is for user nthd only: sudo -u nthd nthd check")
    } else if action == PowerAction::Reboot {
        "a reboot policy is set: also grant org.freedesktop.login1.reboot and \
         reboot-multiple-sessions to user nthd (see \
         /usr/share/doc/nthd/examples/50-nthd-reboot.rules.example)"
            .into()
    } else {
        POLKIT_FIX.into()
    };
    check(
        name,
        true,
        Status::Fail,
        format!("{label} = {v} for {who}"),
        Some(fix),
    )
}

/// systemd's version, from PID 1: nthd.service and kubelet's Graceful Node Shutdown need [`MIN_SYSTEMD`].
async fn systemd_version(c: &mut Ctx<'_>) -> Check {
    const NAME: &str = "systemd version";
    let v = match c.logind.systemd_version().await {
        Ok(v) => v,
        Err(e) => {
            let fix = "nthd asks PID 1 over the system bus; make sure systemd is the init system";
            return check(NAME, true, Status::Fail, e.to_string(), Some(fix.into()));
        }
    };
    match systemd_major(&v) {
        Some(m) if m >= MIN_SYSTEMD => check(NAME, true, Status::Pass, v, None),
        Some(m) => check(NAME, true, Status::Fail, v, Some(old_systemd_fix(m))),
        None => check(NAME, true, Status::Warn, v, None),
    }
}

/// What to do about a systemd older than [`MIN_SYSTEMD`], by what it breaks.
fn old_systemd_fix(major: u32) -> String {
    if major < MIN_SYSTEMD_GNS {
        format!(
            "kubelet Graceful Node Shutdown needs systemd >= {MIN_SYSTEMD_GNS} (systemd 219 on \
             Amazon Linux 2 / CentOS 7 does not work, kubernetes#101553), and nthd.service \
             needs >= {MIN_SYSTEMD}; move to Amazon Linux 2023 or another current distribution"
        )
    } else {
        format!(
            "nthd.service needs systemd >= {MIN_SYSTEMD} (StateDirectory=, RuntimeDirectory=); \
             upgrade systemd or move to a current distribution"
        )
    }
}

/// From one `ListInhibitors`: no block lock on shutdown, and kubelet's delay lock.
async fn inhibitors(c: &mut Ctx<'_>) -> Vec<Check> {
    match c.logind.list_inhibitors().await {
        Ok(list) => vec![no_block_inhibitor(&list), kubelet_lock(&list)],
        Err(e) => vec![check(
            "kubelet inhibitor lock",
            true,
            Status::Fail,
            e.to_string(),
            None,
        )],
    }
}

/// Whether every shutdown's drain can be reported: logind grants nthd's own delay lock (taken
/// and released at once here), and the pods still running can be named.
async fn drain_report(c: &mut Ctx<'_>) -> Check {
    const NAME: &str = "drain report";
    if let Err(e) = c.logind.try_delay_lock().await {
        let fix = "logind's default polkit policy allows org.freedesktop.login1.\
                   inhibit-delay-shutdown to any user: look for a rule that denies it to user \
                   nthd (pkaction --verbose --action-id org.freedesktop.login1.\
                   inhibit-delay-shutdown). Everything else works without it";
        return check(NAME, false, Status::Warn, e.to_string(), Some(fix.into()));
    }
    let pods = match crate::drain::pods::pods_left_now() {
        crate::drain::PodsLeft::Known(p) => format!(
            "pods still running at the end are named from the kubepods cgroups ({} running now)",
            p.len()
        ),
        crate::drain::PodsLeft::Unknown(why) => {
            format!("the report cannot name the pods still running: {why}")
        }
    };
    let v = format!("nthd can hold a delay lock on shutdown to report each drain; {pods}");
    check(NAME, false, Status::Pass, v, None)
}

fn kubelet_lock(list: &[crate::logind::Inhibitor]) -> Check {
    const NAME: &str = "kubelet inhibitor lock";
    let kubelet = list
        .iter()
        .find(|i| i.delays_shutdown() && i.who.to_ascii_lowercase().contains("kubelet"));
    // nthd's own lock (the drain report) is not kubelet's, and not worth naming here.
    let list: Vec<&crate::logind::Inhibitor> = list.iter().filter(|i| !i.is_nthds()).collect();
    if let Some(i) = kubelet {
        let v = format!(
            "{} holds a delay lock on {} (PID {}): \"{}\"",
            i.who, i.what, i.pid, i.why
        );
        return check(NAME, true, Status::Pass, v, None);
    }
    let others: Vec<String> = list
        .iter()
        .filter(|i| i.delays_shutdown())
        .map(|i| format!("{} (PID {})", i.who, i.pid))
        .collect();
    let v = match others.is_empty() {
        true => "no delay inhibitor on shutdown is held".into(),
        false => format!("only {}", others.join(", ")),
    };
    let fix = "enable kubelet Graceful Node Shutdown: set shutdownGracePeriod (e.g. 90s) and \
               shutdownGracePeriodCriticalPods (e.g. 30s) in the KubeletConfiguration and \
               restart kubelet; it then takes the lock at start";
    check(NAME, true, Status::Fail, v, Some(fix.into()))
}

/// logind's drain budget against the cloud's notice lead time, and where it is set.
fn drain_budget(c: &Ctx<'_>, budget: Duration) -> Check {
    let lead = notice_lead(c.cloud, c.opts);
    let settings = inhibit_delay_settings(c.root);
    let last = settings.last();
    let origin = last
        .map(|s| format!(" (set last by {} = {})", s.file.display(), s.value))
        .unwrap_or_default();
    let kubelet_overridden = settings.iter().any(|s| s.file.ends_with("99-kubelet.conf"))
        && !last.is_some_and(|s| s.file.ends_with("99-kubelet.conf"));
    // The metadata server does not say a Spot VM's preemption notice: say what is assumed.
    let assumed = match c.cloud {
        Some(Cloud::Gcp) if c.opts.gcp_preemption_notice.is_zero() => {
            " (assumed: no preemption notice before the soft-off; NTHD_GCP_PREEMPTION_NOTICE=120s \
             for VMs created with --preemption-notice-duration=120s)"
        }
        _ => "",
    };
    let value = format!(
        "InhibitDelayMaxUSec = {}, notice lead time on {} = {}{assumed}, lifecycle {}{origin}",
        format_duration(budget),
        c.cloud.map_or("this cloud", crate::notice::Cloud::name),
        format_duration(lead),
        c.lifecycle.map_or("unknown", Lifecycle::name),
    );
    let (st, fix) = if kubelet_overridden {
        let file = last
            .map(|s| s.file.display().to_string())
            .unwrap_or_default();
        let fix = format!(
            "another drop-in sorts after kubelet's 99-kubelet.conf and overrides it \
             (kubernetes#102818): remove InhibitDelayMaxSec from {file}"
        );
        (Status::Warn, Some(fix))
    } else {
        drain_verdict(c.cloud, c.lifecycle, lead, budget)
    };
    // Required only when it fails: a drain longer than the notice is cut off mid-way.
    check("drain budget", st == Status::Fail, st, value, fix)
}

/// The lead time of the notice that bounds the drain: the cloud's shortest (on GCP the
/// preemption notice set, `NTHD_GCP_PREEMPTION_NOTICE`), 2 minutes when the cloud is unknown.
fn notice_lead(cloud: Option<Cloud>, opts: &Options) -> Duration {
    cloud.map_or(Duration::from_secs(120), |c| opts.timings(c).notice_lead())
}

/// The drain-budget check's verdict on a budget (logind's `InhibitDelayMaxUSec`, which kubelet
/// sets to `shutdownGracePeriod`) when no other drop-in overrides kubelet's: it fails above the
/// notice's lead time (see [`longer_than_the_notice`]) and recommends the lead time minus
/// [`POWER_OFF_MARGIN`]. docs/clouds.md's grace-period table states this rule per cloud, and
/// tests/docs.rs checks the table against this function.
pub(crate) fn drain_verdict(
    cloud: Option<Cloud>,
    lifecycle: Option<Lifecycle>,
    lead: Duration,
    budget: Duration,
) -> (Status, Option<String>) {
    if budget > lead {
        longer_than_the_notice(cloud, lifecycle, lead, budget)
    } else if budget < Duration::from_secs(15) {
        let fix = "too short to drain anything useful (5s is logind's default, which means \
                   kubelet's shutdownGracePeriod is not set): set shutdownGracePeriod in the \
                   KubeletConfiguration";
        (Status::Warn, Some(fix.into()))
    } else {
        (Status::Pass, None)
    }
}

/// An ACPI shutdown from the platform must go through logind and honour kubelet's lock.
async fn power_key(c: &mut Ctx<'_>) -> Check {
    const NAME: &str = "power key honours inhibitors";
    let handle = match c.logind.handle_power_key().await {
        Ok(h) => h,
        Err(e) => return check(NAME, false, Status::Warn, e.to_string(), None),
    };
    // Not a D-Bus property on systemd 252: read logind.conf as logind does.
    let ignore = logind_conf_settings(c.root, "PowerKeyIgnoreInhibited");
    let ignore_inhibited = ignore.last().is_some_and(|s| {
        matches!(
            s.value.to_ascii_lowercase().as_str(),
            "yes" | "true" | "1" | "on"
        )
    });
    let origin = ignore.last().map_or_else(
        || " (default)".into(),
        |s| format!(" (set by {})", s.file.display()),
    );
    let value = format!(
        "HandlePowerKey={handle}, PowerKeyIgnoreInhibited={}{origin}",
        if ignore_inhibited { "yes" } else { "no" }
    );
    let fix = if handle != "poweroff" {
        "set HandlePowerKey=poweroff in logind.conf: platforms that send an ACPI shutdown (GCP, \
         IBM Cloud VPC, OpenStack) otherwise hard-stop the VM without a drain"
    } else if ignore_inhibited {
        "set PowerKeyIgnoreInhibited=no in logind.conf: otherwise an ACPI shutdown ignores \
         kubelet's lock"
    } else {
        return check(NAME, false, Status::Pass, value, None);
    };
    check(NAME, false, Status::Warn, value, Some(fix.into()))
}

/// User nthd exists and is a system user: the polkit rule grants power-off to whoever has the
/// name, so an older account of a person called nthd would receive it.
fn user_nthd(root: &Path) -> Check {
    const NAME: &str = "user nthd";
    let max = sys_uid_max(root);
    match passwd_uid(root, "nthd") {
        Some(Some(uid)) if uid > max => check(
            NAME,
            true,
            Status::Fail,
            format!("uid {uid} is not a system user (SYS_UID_MAX {max}): the polkit rule grants it power-off"),
            Some(
                "if this account is not nthd's own, remove it or rename it, then run \
                 systemd-sysusers /usr/lib/sysusers.d/nthd.conf"
                    .into(),
            ),
        ),
        Some(_) => check(NAME, true, Status::Pass, "exists, a system user", None),
        None => check(
            NAME,
            true,
            Status::Fail,
            "missing",
            Some("create it: systemd-sysusers /usr/lib/sysusers.d/nthd.conf (the package does this)".into()),
        ),
    }
}

async fn nthd_service(c: &mut Ctx<'_>) -> Check {
    const NAME: &str = "nthd.service";
    match c.logind.unit_state("nthd.service").await {
        Ok(s) if s == "active" => check(NAME, true, Status::Pass, "active", None),
        Ok(s) => check(
            NAME,
            true,
            Status::Fail,
            s,
            Some("systemctl enable --now nthd".into()),
        ),
        Err(e) => check(NAME, true, Status::Fail, e.to_string(), None),
    }
}

/// A drain longer than the notice: a failure on spot/preemptible capacity, whose notice cuts it
/// off, and when the lifecycle is unknown (it may be spot); only a note on on-demand capacity,
/// where no spot notice bounds the shutdown. GCP is the exception: an on-demand VM whose
/// `onHostMaintenance` is `TERMINATE` gets about 60 s of `maintenance-event` notice, so a drain
/// longer than that still fails there.
fn longer_than_the_notice(
    cloud: Option<Cloud>,
    lifecycle: Option<Lifecycle>,
    lead: Duration,
    budget: Duration,
) -> (Status, Option<String>) {
    match lifecycle {
        Some(Lifecycle::OnDemand) if cloud == Some(Cloud::Gcp) && budget > GCP_MAINTENANCE_LEAD => {
            let fix = format!(
                "on-demand GCP instance: a host maintenance that terminates the VM \
                 (onHostMaintenance=TERMINATE) is announced about {} ahead, so {}",
                format_duration(GCP_MAINTENANCE_LEAD),
                drain_too_long_fix(GCP_MAINTENANCE_LEAD)
            );
            (Status::Fail, Some(fix))
        }
        Some(Lifecycle::OnDemand) => {
            let note = format!(
                "on-demand instance: the {} limit is the spot/preemption notice's, which does not \
                 apply here. If this node group may also run spot instances, {}",
                format_duration(lead),
                drain_too_long_fix(lead)
            );
            (Status::Info, Some(note))
        }
        Some(Lifecycle::Spot | Lifecycle::Preemptible) => {
            (Status::Fail, Some(drain_too_long_fix(lead)))
        }
        None => {
            let fix = format!(
                "{}. (The instance's lifecycle could not be read, so it is taken as spot; on an \
                 on-demand instance this is only a note)",
                drain_too_long_fix(lead)
            );
            (Status::Fail, Some(fix))
        }
    }
}

/// GCP's `maintenance-event` lead before a terminating host maintenance (about 60 s).
const GCP_MAINTENANCE_LEAD: Duration = Duration::from_secs(60);

/// What to set when kubelet's drain outlasts the notice. EKS's Amazon Linux 2023 AMIs (1.34
/// and later) ship `shutdownGracePeriod: 2m30s`, longer than the 2-minute spot notice.
/// The check fails above the lead time and names the lead time minus this as the value to set:
/// the one rule docs/clouds.md's table states.
fn drain_too_long_fix(lead: Duration) -> String {
    let fit = lead.saturating_sub(POWER_OFF_MARGIN);
    format!(
        "the drain can take longer than the platform waits ({}), so the instance is cut off \
         mid-drain: set shutdownGracePeriod to at most {} (the notice minus {} for the power-off \
         itself; and shutdownGracePeriodCriticalPods to a part of it, e.g. 30s) in the \
         KubeletConfiguration, then restart kubelet (the table in \
         /usr/share/doc/nthd/docs/clouds.md, \"Grace periods\"). EKS Amazon Linux 2023 AMIs \
         (1.34+) default to 2m30s, longer than the 2 min spot notice",
        format_duration(lead),
        format_duration(fit),
        format_duration(POWER_OFF_MARGIN)
    )
}

/// What the recommended `shutdownGracePeriod` leaves of the notice for the power-off itself.
const POWER_OFF_MARGIN: Duration = Duration::from_secs(10);

/// A block inhibitor on shutdown makes logind refuse nthd's PowerOff until it is released.
fn no_block_inhibitor(list: &[crate::logind::Inhibitor]) -> Check {
    let holders: Vec<crate::logind::Inhibitor> = list
        .iter()
        .filter(|i| i.blocks_shutdown())
        .cloned()
        .collect();
    if holders.is_empty() {
        return check(
            "no block inhibitor on shutdown",
            true,
            Status::Pass,
            "none held",
            None,
        );
    }
    check(
        "no block inhibitor on shutdown",
        true,
        Status::Fail,
        crate::logind::describe_holders(&holders),
        Some(
            "while it is held logind refuses every PowerOff nthd asks for, so a notice cannot \
             start the drain; nthd never overrides it (it is not granted \
             power-off-ignore-inhibit). Have its holder release it, or take delay locks instead \
             (systemd-inhibit --list shows them)"
                .into(),
        ),
    )
}

/// The checks that need logind, listed as skipped when it cannot be reached, so the report
/// never looks shorter and cleaner than it is.
fn skipped_without_logind(opts: &Options) -> Vec<Check> {
    let mut names: Vec<(&str, bool)> = opts
        .policy()
        .power_actions()
        .into_iter()
        .map(|a| (permits_check_name(a), true))
        .collect();
    names.extend([
        ("no block inhibitor on shutdown", true),
        ("kubelet inhibitor lock", true),
        ("drain budget", false),
        ("power key honours inhibitors", false),
    ]);
    names
        .into_iter()
        .map(|(name, required)| {
            check(
                name,
                required,
                Status::Skip,
                "skipped: needs logind, which cannot be reached (see \"system bus and logind\")",
                None,
            )
        })
        .collect()
}

fn mark(s: Status) -> &'static str {
    match s {
        Status::Pass => "✔",
        Status::Fail => "✘",
        Status::Warn => "!",
        Status::Info => "·",
        Status::Skip => "-",
    }
}

pub(crate) fn all_required_pass(checks: &[Check]) -> bool {
    checks
        .iter()
        .all(|c| !c.required || !matches!(c.status, Status::Fail | Status::Skip))
}

pub(crate) async fn check_command(
    opts: &Options,
    json: bool,
    root: &Path,
) -> anyhow::Result<ExitCode> {
    let checks = run_checks(opts, root).await;
    let ok = all_required_pass(&checks);
    if json {
        let v = serde_json::json!({ "ok": ok, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("nthd check: will a graceful shutdown work on this node?");
        for c in &checks {
            println!(" {} {:<30} {}", mark(c.status), c.name, c.value);
            if let Some(f) = &c.fix {
                // An info check's text is a note, not something to fix.
                match c.status {
                    Status::Pass => {}
                    Status::Info => println!("   {:<30} note: {f}", ""),
                    _ => println!("   {:<30} fix: {f}", ""),
                }
            }
        }
        let count = |st| {
            checks
                .iter()
                .filter(|c| c.required && c.status == st)
                .count()
        };
        match (count(Status::Fail), count(Status::Skip)) {
            (0, 0) => println!("all required checks pass"),
            (failed, 0) => println!("{failed} required check(s) failed"),
            (failed, skipped) => {
                println!("{failed} required check(s) failed, {skipped} could not be run");
            }
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_nthd_must_be_a_system_user() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        let passwd = |uid: u32| {
            let line = format!(
                "root:x:0:0::/root:/bin/sh\nnthd:x:{uid}:{uid}::/var/lib/nthd:/usr/sbin/nologin\n"
            );
            std::fs::write(root.path().join("etc/passwd"), line).unwrap();
        };
        passwd(998);
        assert_eq!(user_nthd(root.path()).status, Status::Pass);
        passwd(1001);
        let c = user_nthd(root.path());
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.value
                .contains("uid 1001 is not a system user (SYS_UID_MAX 999)"),
            "{}",
            c.value
        );
        std::fs::write(
            root.path().join("etc/login.defs"),
            "# x\nSYS_UID_MAX\t\t499\n",
        )
        .unwrap();
        passwd(998);
        assert_eq!(user_nthd(root.path()).status, Status::Fail);
        std::fs::write(
            root.path().join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\n",
        )
        .unwrap();
        assert_eq!(user_nthd(root.path()).value, "missing");
    }

    #[test]
    fn systemd_versions() {
        assert_eq!(systemd_major("252.38-1~deb12u1"), Some(252));
        assert_eq!(systemd_major("219"), Some(219));
        assert_eq!(systemd_major("v255"), None);
    }

    #[test]
    fn delay_setting_precedence_follows_systemd() {
        let d = tempfile::tempdir().unwrap();
        let w = |p: &str, body: &str| {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        };
        w(
            "etc/systemd/logind.conf",
            "[Login]\n#InhibitDelayMaxSec=5\n",
        );
        assert!(inhibit_delay_settings(d.path()).is_empty());
        w(
            "etc/systemd/logind.conf.d/99-kubelet.conf",
            "[Login]\nInhibitDelayMaxSec=90\n",
        );
        w(
            "usr/lib/systemd/logind.conf.d/10-nthd.conf",
            "[Login]\nInhibitDelayMaxSec=60\n",
        );
        let s = inhibit_delay_settings(d.path());
        assert_eq!(s.len(), 2);
        assert!(s[0].file.ends_with("10-nthd.conf"));
        assert!(s[1].file.ends_with("99-kubelet.conf") && s[1].value == "90");
        // A later name overrides kubelet's drop-in (kubernetes#102818).
        w(
            "etc/systemd/logind.conf.d/99-zz-vendor.conf",
            "[Login]\nInhibitDelayMaxSec=10\n",
        );
        assert!(inhibit_delay_settings(d.path())
            .last()
            .unwrap()
            .file
            .ends_with("99-zz-vendor.conf"));
        // /etc masks the same name in /usr/lib.
        w("etc/systemd/logind.conf.d/10-nthd.conf", "[Login]\n");
        let s = inhibit_delay_settings(d.path());
        assert!(!s.iter().any(|x| x
            .file
            .ends_with("usr/lib/systemd/logind.conf.d/10-nthd.conf")));
        // Only the [Login] section counts.
        w(
            "etc/systemd/logind.conf.d/50-other.conf",
            "[Other]\nInhibitDelayMaxSec=1\n",
        );
        assert!(!inhibit_delay_settings(d.path())
            .iter()
            .any(|x| x.file.ends_with("50-other.conf")));
    }

    #[test]
    fn required_failures_decide_the_exit_code() {
        let p = check("a", true, Status::Pass, "", None);
        let w = check("b", false, Status::Warn, "", None);
        let f = check("c", true, Status::Fail, "", None);
        let nf = check("d", false, Status::Fail, "", None);
        assert!(all_required_pass(&[p.clone(), w.clone(), nf]));
        assert!(!all_required_pass(&[p, w, f]));
    }

    #[test]
    fn on_demand_gcp_is_still_bound_by_the_maintenance_notice() {
        let od = Some(Lifecycle::OnDemand);
        let lead = Cloud::Gcp.notice_lead_time();
        let (st, fix) = longer_than_the_notice(Some(Cloud::Gcp), od, lead, Duration::from_secs(90));
        assert_eq!(st, Status::Fail);
        let fix = fix.unwrap();
        assert!(
            fix.contains("onHostMaintenance=TERMINATE") && fix.contains("at most 50s"),
            "{fix}"
        );
        // Within the 60 s maintenance notice: only the note about spot.
        let (st, _) = longer_than_the_notice(Some(Cloud::Gcp), od, lead, Duration::from_secs(45));
        assert_eq!(st, Status::Info);
        // AWS on-demand: no notice bounds a stop or terminate.
        let lead = Cloud::Aws.notice_lead_time();
        let (st, _) = longer_than_the_notice(Some(Cloud::Aws), od, lead, Duration::from_secs(150));
        assert_eq!(st, Status::Info);
    }
}
