//! `nthd check`: will a graceful shutdown really work on this node?
//!
//! One screen of checks, each ✔ / ✘ / ! with the value found and, for every failure, the exact
//! fix. Exit code 0 only when every required check passes. Files are read below `root` (`/`
//! normally; a fixture directory in tests) so every check can be made to pass and fail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::config::Options;
use crate::daemon::build_provider;
use crate::logind::{Logind, LogindError};
use crate::policy::{decide, Action};
use crate::provider::detect::{self, Detection, Dmi};
use crate::provider::{Cloud, Provider};
use crate::timefmt::format_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Warn,
    Info,
    /// Not run, because what it needs is missing (the value says what).
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
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

/// The oldest systemd whose logind delay inhibitors kubelet's Graceful Node Shutdown works with
/// (systemd 219 on Amazon Linux 2 / CentOS 7 does not: kubernetes#101553).
pub const MIN_SYSTEMD: u32 = 220;

/// Parses the major version from strings like `252.38-1~deb12u1` or `219`.
pub fn systemd_major(v: &str) -> Option<u32> {
    let digits: String = v
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// Where a logind.conf setting is set, in the order logind applies them (the last one wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfSetting {
    pub file: PathBuf,
    pub value: String,
}

/// Where `InhibitDelayMaxSec=` is set.
pub fn inhibit_delay_settings(root: &Path) -> Vec<ConfSetting> {
    logind_conf_settings(root, "InhibitDelayMaxSec")
}

/// Scans logind.conf and its drop-ins below `root` the way systemd does: the main file first,
/// then drop-ins from /usr/lib, /run and /etc sorted by file name (a name in /etc masks the same
/// name in /run and /usr/lib). Returns every file that sets `key` in `[Login]`, in order.
/// (Some settings, such as PowerKeyIgnoreInhibited, are not exported over D-Bus.)
pub fn logind_conf_settings(root: &Path, key: &str) -> Vec<ConfSetting> {
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

fn passwd_has(root: &Path, name: &str) -> bool {
    std::fs::read_to_string(root.join("etc/passwd"))
        .map(|p| p.lines().any(|l| l.split(':').next() == Some(name)))
        .unwrap_or(false)
}

const POLKIT_FIX: &str = "install the polkit rule: /usr/share/polkit-1/rules.d/50-nthd.rules \
     (polkit >= 0.106) or /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla (polkit 0.105, \
     Ubuntu 20.04/22.04, Debian 11) from the nthd package, then run this check as the daemon's \
     user: sudo -u nthd nthd check";

/// Runs every check.
pub async fn run_checks(opts: &Options, root: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let dmi = Dmi::read(
        &root.join("sys/class/dmi/id"),
        &root.join("sys/hypervisor/uuid"),
    );

    // Cloud and metadata service.
    let detection: Option<Detection> = match opts.provider.cloud() {
        Some(c) => Some(Detection {
            cloud: c,
            how: "set by NTHD_PROVIDER".into(),
        }),
        None => match detect::detect(&dmi, opts.imds_endpoint.as_deref(), Duration::from_secs(1))
            .await
        {
            Ok(d) => Some(d),
            Err(e) => {
                out.push(check(
                    "cloud",
                    true,
                    Status::Fail,
                    "unknown",
                    Some(e.to_string()),
                ));
                None
            }
        },
    };
    let mut cloud = None;
    if let Some(d) = detection {
        cloud = Some(d.cloud);
        out.push(check(
            "cloud",
            true,
            Status::Pass,
            format!("{} ({})", d.cloud, d.how),
            None,
        ));
        match build_provider(d.cloud, opts) {
            Ok(mut p) => {
                let obs = tokio::time::timeout(
                    opts.request_timeout * 4 + Duration::from_secs(2),
                    p.observe(),
                )
                .await
                .unwrap_or_default();
                if obs.fresh.is_empty() {
                    let e = obs
                        .errors
                        .first()
                        .map(|e| e.error.to_string())
                        .unwrap_or_else(|| "no answer".into());
                    out.push(check("metadata service", true, Status::Fail, e, Some(
                        "make sure the metadata service is enabled and reachable from this host; \
                         on AWS IMDSv2 needs the token PUT to work (hop limit 1 is enough for a \
                         host daemon)".into())));
                } else {
                    let v = format!(
                        "{} answered ({} sources read)",
                        p.describe(),
                        obs.fresh.len()
                    );
                    let (st, fix) = match obs.errors.first() {
                        Some(e) => (Status::Warn, Some(e.error.to_string())),
                        None => (Status::Pass, None),
                    };
                    out.push(check("metadata service", true, st, v, fix));
                }
                let policy = opts.policy();
                let now = std::time::SystemTime::now();
                let notices: Vec<String> = obs
                    .notices
                    .iter()
                    .map(|n| format!("{} → {}", n.detail, decide(&policy, n, now, None).action))
                    .collect();
                out.push(check(
                    "current notices",
                    false,
                    if notices.is_empty() {
                        Status::Info
                    } else {
                        Status::Warn
                    },
                    if notices.is_empty() {
                        "none".into()
                    } else {
                        notices.join("; ")
                    },
                    None,
                ));
            }
            Err(e) => out.push(check(
                "metadata service",
                true,
                Status::Fail,
                e.to_string(),
                None,
            )),
        }
    }

    // Bus and logind.
    let mut logind = Logind::new();
    let budget = match logind.inhibit_delay_max().await {
        Ok(b) => {
            out.push(check(
                "system bus and logind",
                true,
                Status::Pass,
                crate::logind::bus_address(),
                None,
            ));
            Some(b)
        }
        Err(e) => {
            let fix = match &e {
                LogindError::NoBus { .. } => "start dbus (systemctl start dbus) and make sure /run/dbus/system_bus_socket exists",
                _ => "start systemd-logind (systemctl start systemd-logind)",
            };
            out.push(check(
                "system bus and logind",
                true,
                Status::Fail,
                e.to_string(),
                Some(fix.into()),
            ));
            None
        }
    };
    if budget.is_none() {
        out.extend(skipped_without_logind(opts));
    }
    let uid = crate::logind::effective_uid();
    let name = crate::logind::passwd_name(root, uid);
    let who = name.clone().unwrap_or_else(|| format!("uid {uid}"));
    if budget.is_some() {
        let policy = opts.policy();
        let mut actions = vec![Action::PowerOff];
        if policy.wants_reboot() {
            actions.push(Action::Reboot);
        }
        for action in actions {
            let label = if action == Action::Reboot {
                "CanReboot"
            } else {
                "CanPowerOff"
            };
            let name_ = if action == Action::Reboot {
                "logind permits reboot"
            } else {
                "logind permits power-off"
            };
            match logind.can(action).await {
                Ok(v) if v == "yes" => {
                    let note = if name.as_deref() == Some("nthd") {
                        String::new()
                    } else {
                        format!(
                            " (checked as {who}; the daemon runs as nthd: sudo -u nthd nthd check)"
                        )
                    };
                    out.push(check(
                        name_,
                        true,
                        Status::Pass,
                        format!("{label} = yes for {who}{note}"),
                        None,
                    ));
                }
                Ok(v) => {
                    let fix = if name.as_deref() != Some("nthd") {
                        format!("you ran this as {who}; the grant is for user nthd only: sudo -u nthd nthd check")
                    } else if action == Action::Reboot {
                        "a reboot policy is set: also grant org.freedesktop.login1.reboot and \
                         reboot-multiple-sessions to user nthd (see \
                         /usr/share/doc/nthd/examples/50-nthd-reboot.rules.example)"
                            .into()
                    } else {
                        POLKIT_FIX.into()
                    };
                    out.push(check(
                        name_,
                        true,
                        Status::Fail,
                        format!("{label} = {v} for {who}"),
                        Some(fix),
                    ));
                }
                Err(e) => out.push(check(
                    name_,
                    true,
                    Status::Fail,
                    e.to_string(),
                    Some(POLKIT_FIX.into()),
                )),
            }
        }
    }

    // systemd version.
    match logind.systemd_version().await {
        Ok(v) => match systemd_major(&v) {
            Some(m) if m >= MIN_SYSTEMD => out.push(check("systemd version", true, Status::Pass, v, None)),
            Some(_) => out.push(check("systemd version", true, Status::Fail, v, Some(format!(
                "kubelet Graceful Node Shutdown needs systemd >= {MIN_SYSTEMD} (systemd 219 on Amazon \
                 Linux 2 / CentOS 7 does not work, kubernetes#101553); move to Amazon Linux 2023 or \
                 another current distribution")))),
            None => out.push(check("systemd version", true, Status::Warn, v, None)),
        },
        Err(e) => out.push(check("systemd version", true, Status::Fail, e.to_string(), Some(
            "nthd asks PID 1 over the system bus; make sure systemd is the init system".into()))),
    }

    // kubelet's lock.
    if budget.is_some() {
        match logind.list_inhibitors().await {
            Ok(list) => {
                out.push(no_block_inhibitor(&list));
                let kubelet = list.iter().find(|i| {
                    i.delays_shutdown() && i.who.to_ascii_lowercase().contains("kubelet")
                });
                match kubelet {
                    Some(i) => out.push(check(
                        "kubelet inhibitor lock",
                        true,
                        Status::Pass,
                        format!(
                            "{} holds a delay lock on {} (PID {}): \"{}\"",
                            i.who, i.what, i.pid, i.why
                        ),
                        None,
                    )),
                    None => {
                        let others: Vec<String> = list
                            .iter()
                            .filter(|i| i.delays_shutdown())
                            .map(|i| format!("{} (PID {})", i.who, i.pid))
                            .collect();
                        out.push(check("kubelet inhibitor lock", true, Status::Fail,
                            if others.is_empty() { "no delay inhibitor on shutdown is held".into() } else { format!("only {}", others.join(", ")) },
                            Some("enable kubelet Graceful Node Shutdown: set shutdownGracePeriod (e.g. 90s) and \
                                  shutdownGracePeriodCriticalPods (e.g. 30s) in the KubeletConfiguration and restart \
                                  kubelet; it then takes the lock at start".into())));
                    }
                }
            }
            Err(e) => out.push(check(
                "kubelet inhibitor lock",
                true,
                Status::Fail,
                e.to_string(),
                None,
            )),
        }
    }

    // Drain budget vs the notice lead time.
    if let Some(b) = budget {
        let lead = cloud
            .map(Cloud::notice_lead_time)
            .unwrap_or(Duration::from_secs(120));
        let settings = inhibit_delay_settings(root);
        let origin = settings
            .last()
            .map(|s| format!(" (set last by {} = {})", s.file.display(), s.value))
            .unwrap_or_default();
        let kubelet_overridden = settings.iter().any(|s| s.file.ends_with("99-kubelet.conf"))
            && !settings
                .last()
                .is_some_and(|s| s.file.ends_with("99-kubelet.conf"));
        let value = format!(
            "InhibitDelayMaxUSec = {}, notice lead time on {} = {}{origin}",
            format_duration(b),
            cloud.map(|c| c.name()).unwrap_or("this cloud"),
            format_duration(lead)
        );
        let (st, fix) = if kubelet_overridden {
            (
                Status::Warn,
                Some(format!(
                    "another drop-in sorts after kubelet's 99-kubelet.conf and overrides it \
                 (kubernetes#102818): remove InhibitDelayMaxSec from {}",
                    settings
                        .last()
                        .map(|s| s.file.display().to_string())
                        .unwrap_or_default()
                )),
            )
        } else if b > lead {
            (Status::Fail, Some(drain_too_long_fix(lead)))
        } else if b < Duration::from_secs(15) {
            (Status::Warn, Some(
                "too short to drain anything useful (5s is logind's default, which means kubelet's \
                 shutdownGracePeriod is not set): set shutdownGracePeriod in the KubeletConfiguration".into()))
        } else {
            (Status::Pass, None)
        };
        // Required only when it fails: a drain longer than the notice is cut off mid-way.
        out.push(check("drain budget", st == Status::Fail, st, value, fix));
    }

    // Power key (ACPI shutdown from the platform).
    if budget.is_some() {
        match logind.handle_power_key().await {
            Ok(handle) => {
                // Not a D-Bus property on systemd 252: read logind.conf as logind does.
                let ignore = logind_conf_settings(root, "PowerKeyIgnoreInhibited");
                let ignore_inhibited = ignore.last().is_some_and(|s| {
                    matches!(
                        s.value.to_ascii_lowercase().as_str(),
                        "yes" | "true" | "1" | "on"
                    )
                });
                let origin = ignore
                    .last()
                    .map(|s| format!(" (set by {})", s.file.display()))
                    .unwrap_or_else(|| " (default)".into());
                let value = format!(
                    "HandlePowerKey={handle}, PowerKeyIgnoreInhibited={}{origin}",
                    if ignore_inhibited { "yes" } else { "no" }
                );
                let (st, fix) = if handle != "poweroff" {
                    (Status::Warn, Some("set HandlePowerKey=poweroff in logind.conf: platforms that \
                        send an ACPI shutdown (GCP, IBM Cloud VPC, OpenStack) otherwise hard-stop the VM \
                        without a drain".into()))
                } else if ignore_inhibited {
                    (
                        Status::Warn,
                        Some(
                            "set PowerKeyIgnoreInhibited=no in logind.conf: otherwise an \
                        ACPI shutdown ignores kubelet's lock"
                                .into(),
                        ),
                    )
                } else {
                    (Status::Pass, None)
                };
                out.push(check("power key honours inhibitors", false, st, value, fix));
            }
            Err(e) => out.push(check(
                "power key honours inhibitors",
                false,
                Status::Warn,
                e.to_string(),
                None,
            )),
        }
    }

    // nthd itself.
    if passwd_has(root, "nthd") {
        out.push(check("user nthd", true, Status::Pass, "exists", None));
    } else {
        out.push(check(
            "user nthd",
            true,
            Status::Fail,
            "missing",
            Some(
                "create it: systemd-sysusers /usr/lib/sysusers.d/nthd.conf (the package does this)"
                    .into(),
            ),
        ));
    }
    match logind.unit_state("nthd.service").await {
        Ok(s) if s == "active" => {
            out.push(check("nthd.service", true, Status::Pass, "active", None))
        }
        Ok(s) => out.push(check(
            "nthd.service",
            true,
            Status::Fail,
            s,
            Some("systemctl enable --now nthd".into()),
        )),
        Err(e) => out.push(check(
            "nthd.service",
            true,
            Status::Fail,
            e.to_string(),
            None,
        )),
    }
    out
}

/// What to set when kubelet's drain outlasts the notice. EKS's Amazon Linux 2023 AMIs (1.34
/// and later) ship `shutdownGracePeriod: 2m30s`, longer than the 2-minute spot notice.
fn drain_too_long_fix(lead: Duration) -> String {
    let fit = lead.saturating_sub(Duration::from_secs(10));
    format!(
        "the drain can take longer than the platform waits, so the instance is cut off \
         mid-drain: set shutdownGracePeriod to at most {} (and shutdownGracePeriodCriticalPods \
         to a part of it, e.g. 30s) in the KubeletConfiguration, then restart kubelet. EKS \
         Amazon Linux 2023 AMIs (1.34+) default to 2m30s, longer than the 2 min spot notice",
        format_duration(fit)
    )
}

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
    let mut names = vec![("logind permits power-off", true)];
    if opts.policy().wants_reboot() {
        names.push(("logind permits reboot", true));
    }
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

pub fn all_required_pass(checks: &[Check]) -> bool {
    checks
        .iter()
        .all(|c| !c.required || !matches!(c.status, Status::Fail | Status::Skip))
}

pub async fn check_command(opts: &Options, json: bool, root: &Path) -> anyhow::Result<ExitCode> {
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
                if c.status != Status::Pass {
                    println!("   {:<30} fix: {f}", "");
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
                println!("{failed} required check(s) failed, {skipped} could not be run")
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
}
