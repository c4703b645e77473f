//! systemd-logind over the system D-Bus.
//!
//! nthd only ever asks logind to power off or reboot with `interactive=false`, so kubelet's
//! delay inhibitor lock is honoured and polkit decides from the rule installed for user `nthd`.
//! It never runs `shutdown` or `poweroff`, which bypass inhibitors on some systemd versions.

use std::time::Duration;

use zbus::DBusError;

use crate::policy::PowerAction;

/// `org.freedesktop.login1.Manager`, the part nthd uses.
#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1"
)]
pub trait Manager {
    /// `PowerOff`. Delay inhibitors (kubelet's lock) hold it back for up to `InhibitDelayMaxUSec`.
    fn power_off(&self, interactive: bool) -> zbus::Result<()>;
    /// `Reboot`, held back by delay inhibitors the same way.
    fn reboot(&self, interactive: bool) -> zbus::Result<()>;
    /// `CanPowerOff`: whether this caller may power off (`yes`, `no`, `challenge`, `na`, ...).
    fn can_power_off(&self) -> zbus::Result<String>;
    /// `CanReboot`: whether this caller may reboot, with the same answers.
    fn can_reboot(&self) -> zbus::Result<String>;
    /// (what, who, why, mode, uid, pid)
    fn list_inhibitors(&self) -> zbus::Result<Vec<(String, String, String, String, u32, u32)>>;
    /// `Inhibit(what, who, why, mode)`: a lock held for as long as the returned fd is open. The
    /// drain report's own `delay` lock on `shutdown` (src/drain/); any user may take one.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<zbus::OwnedFd>;
    /// `PrepareForShutdown(start)`: true when a shutdown begins (delay locks now hold it back),
    /// false when it was cancelled.
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;

    /// `InhibitDelayMaxUSec`: how long delay inhibitors may hold up a shutdown, in microseconds.
    #[zbus(property, name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> zbus::Result<u64>;
    /// `PreparingForShutdown`: true while a shutdown is pending, kubelet's drain included.
    #[zbus(property)]
    fn preparing_for_shutdown(&self) -> zbus::Result<bool>;
    /// `HandlePowerKey`: what logind does on a power-key press (`poweroff`, `ignore`, ...).
    #[zbus(property)]
    fn handle_power_key(&self) -> zbus::Result<String>;
}

/// `org.freedesktop.DBus.Peer`-free version query: systemd's manager exposes `Version`.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
pub trait Systemd {
    /// `Version`: systemd's version string, e.g. `252.38-1~deb12u1`.
    #[zbus(property)]
    fn version(&self) -> zbus::Result<String>;
    /// `running`, `degraded`, ... and `stopping` once a shutdown transaction is queued.
    #[zbus(property)]
    fn system_state(&self) -> zbus::Result<String>;
    /// `GetUnit`: the object path of a loaded unit (the error `NoSuchUnit` when it is not loaded).
    fn get_unit(&self, name: &str) -> zbus::Result<zbus::OwnedObjectPath>;
    /// `LoadUnit`: the object path of a unit, loading it from disk if needed.
    fn load_unit(&self, name: &str) -> zbus::Result<zbus::OwnedObjectPath>;
    /// `GetUnitByPID`: the object path of the unit a process runs in.
    #[zbus(name = "GetUnitByPID")]
    fn get_unit_by_pid(&self, pid: u32) -> zbus::Result<zbus::OwnedObjectPath>;
}

/// One unit's state.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1"
)]
pub trait Unit {
    /// `ActiveState`: `active`, `inactive`, `failed`, ...
    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;
}

/// Why a logind call failed, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogindError {
    /// The system D-Bus cannot be reached.
    #[error(
        "cannot connect to the system D-Bus ({address}): {reason}. Is dbus running \
         (systemctl status dbus)? Is /run/dbus/system_bus_socket reachable from nthd's sandbox?"
    )]
    NoBus {
        /// The bus address tried.
        address: String,
        /// Why the connection failed.
        reason: String,
    },
    /// logind is not on the bus, does not answer, or does not know the method.
    #[error(
        "org.freedesktop.login1 is not on the system bus ({method}): {reason}. Is \
         systemd-logind running (systemctl status systemd-logind)?"
    )]
    NoLogind {
        /// What was called, e.g. `PowerOff` or `Get InhibitDelayMaxUSec`.
        method: &'static str,
        /// The D-Bus error.
        reason: String,
    },
    /// The call was not authorised: polkit did not grant it.
    #[error(
        "logind refused {method} for {user}: polkit did not grant {action} ({reason}). Install \
         the rule /usr/share/polkit-1/rules.d/50-nthd.rules (polkit >= 0.106) or \
         /var/lib/polkit-1/localauthority/10-vendor.d/nthd.pkla (polkit 0.105), make sure nthd \
         runs as user nthd, and check with: sudo -u nthd nthd check"
    )]
    Denied {
        /// What was called, e.g. `PowerOff`.
        method: &'static str,
        /// The user nthd runs as, e.g. `user nthd (uid 998)`.
        user: String,
        /// The polkit action the call needs.
        action: &'static str,
        /// logind's error name, e.g. `org.freedesktop.DBus.Error.AccessDenied`.
        error: String,
        /// The D-Bus error.
        reason: String,
    },
    /// logind is already carrying out a shutdown or sleep operation (`OperationInProgress`).
    #[error(
        "logind refused {method}: a shutdown or sleep operation is already in progress \
         ({reason}). If the machine is not going down, a stuck suspend or hibernate job holds \
         logind: see systemctl list-jobs. nthd retries, and does not call again once logind is \
         preparing for shutdown"
    )]
    Busy {
        /// What was called, e.g. `PowerOff`.
        method: &'static str,
        /// logind's error name, `org.freedesktop.login1.OperationInProgress`.
        error: String,
        /// The D-Bus error.
        reason: String,
    },
    /// A block inhibitor on shutdown is held; nthd never overrides one.
    #[error(
        "logind refused {method}: {} holds a block inhibitor on shutdown ({reason}). The drain \
         cannot start until it is released; nthd never overrides it (it is not granted \
         power-off-ignore-inhibit) and retries until it is",
        describe_holders(holders)
    )]
    Blocked {
        /// What was called, e.g. `PowerOff`.
        method: &'static str,
        /// The holders of block locks on shutdown; empty if `ListInhibitors` named none or failed.
        holders: Vec<Inhibitor>,
        /// logind's error name: `org.freedesktop.login1.BlockedByInhibitorLock` (258 and
        /// later), `org.freedesktop.DBus.Error.AccessDenied` (257) or
        /// `org.freedesktop.DBus.Error.InteractiveAuthorizationRequired` (256 and older).
        error: String,
        /// The D-Bus error.
        reason: String,
    },
    /// Any other failure of the call.
    #[error("logind {method} failed: {reason}")]
    Call {
        /// What was called, e.g. `PowerOff` or `Get InhibitDelayMaxUSec`.
        method: &'static str,
        /// The error.
        reason: String,
    },
}

/// "kubelet-backup (why: nightly backup, pid 812, uid 0, mode block)", for each holder.
pub(crate) fn describe_holders(holders: &[Inhibitor]) -> String {
    let each: Vec<String> = holders
        .iter()
        .map(|i| {
            format!(
                "{} (why: {}, pid {}, uid {}, mode {})",
                crate::logging::clean(&i.who, 64),
                crate::logging::clean(&i.why, 120),
                i.pid,
                i.uid,
                i.mode
            )
        })
        .collect();
    each.join("; ")
}

impl LogindError {
    /// Why logind refused a power action, in its own words: its error name and, for a block
    /// inhibitor, the holders. `None` for anything but a refusal (no bus, a timeout, ...).
    pub(crate) fn refusal(&self) -> Option<Refusal<'_>> {
        match self {
            LogindError::Blocked { error, holders, .. } => Some(Refusal { error, holders }),
            LogindError::Denied { error, .. } | LogindError::Busy { error, .. } => Some(Refusal {
                error,
                holders: &[],
            }),
            _ => None,
        }
    }
}

/// logind's refusal of a power action, for the action record: the log's `NTHD_LOGIND_ERROR`
/// and `NTHD_BLOCKED_BY`, the status file's and the webhook's `logind_error` and `blocked_by`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal<'a> {
    /// logind's error name, e.g. `org.freedesktop.login1.BlockedByInhibitorLock`.
    pub(crate) error: &'a str,
    /// The holders of block locks on shutdown (who, why, pid, uid, mode), from `ListInhibitors`.
    pub(crate) holders: &'a [Inhibitor],
}

impl Refusal<'_> {
    /// The holders as the status file and the webhook carry them.
    pub(crate) fn blocked_by(&self) -> Vec<BlockHolder> {
        self.holders.iter().map(BlockHolder::from).collect()
    }
}

/// One holder of a block lock on shutdown, as the status file's and the webhook's
/// `blocked_by` list it. `who` and `why` are the holder's own text, cleaned as in the log.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BlockHolder {
    /// Who holds the lock, e.g. `backup-agent`.
    pub(crate) who: String,
    /// Why, in the holder's words.
    pub(crate) why: String,
    /// The holder's process id.
    pub(crate) pid: u32,
    /// The holder's user id.
    pub(crate) uid: u32,
    /// `block` or `block-weak`.
    pub(crate) mode: String,
}

impl From<&Inhibitor> for BlockHolder {
    fn from(i: &Inhibitor) -> Self {
        BlockHolder {
            who: crate::logging::clean(&i.who, 64),
            why: crate::logging::clean(&i.why, 120),
            pid: i.pid,
            uid: i.uid,
            mode: i.mode.clone(),
        }
    }
}

/// The D-Bus error name of a zbus error, if it is a D-Bus error reply.
pub(crate) fn error_name(e: &zbus::Error) -> Option<String> {
    match e {
        zbus::Error::FDO(f) => Some(f.name().as_str().to_string()),
        zbus::Error::MethodError(name, _, _) => Some(name.as_str().to_string()),
        _ => None,
    }
}

/// A proxy that could not be made on the bus connection.
fn proxy_failed(e: zbus::Error) -> LogindError {
    LogindError::Call {
        method: "proxy",
        reason: e.to_string(),
    }
}

/// The polkit action a method needs in the usual case.
pub(crate) fn polkit_action(action: PowerAction) -> &'static str {
    match action {
        PowerAction::Reboot => "org.freedesktop.login1.reboot (or reboot-multiple-sessions)",
        PowerAction::PowerOff => {
            "org.freedesktop.login1.power-off (or power-off-multiple-sessions)"
        }
    }
}

/// The effective uid of this process.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The name of `uid` in `root`/etc/passwd.
pub(crate) fn passwd_name(root: &std::path::Path, uid: u32) -> Option<String> {
    std::fs::read_to_string(root.join("etc/passwd"))
        .ok()?
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid.to_string()).then(|| f[0].to_string())
        })
}

fn current_user() -> String {
    let uid = effective_uid();
    match passwd_name(std::path::Path::new("/"), uid) {
        Some(n) => format!("user {n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

/// A zbus error as a [`LogindError`]: `action` is the power action called, `None` for a read.
fn classify(method: &'static str, action: Option<PowerAction>, e: zbus::Error) -> LogindError {
    let reason = e.to_string();
    let name = error_name(&e);
    let error = name.clone().unwrap_or_default();
    match name.as_deref() {
        Some(
            "org.freedesktop.DBus.Error.AccessDenied"
            | "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"
            | "org.freedesktop.DBus.Error.AuthFailed",
        ) => LogindError::Denied {
            method,
            user: current_user(),
            action: action.map_or(
                "none: reading logind needs no polkit action, so the bus policy denied it",
                polkit_action,
            ),
            error,
            reason,
        },
        Some(
            "org.freedesktop.DBus.Error.ServiceUnknown"
            | "org.freedesktop.DBus.Error.NameHasNoOwner"
            | "org.freedesktop.DBus.Error.NoReply"
            | "org.freedesktop.DBus.Error.UnknownObject"
            | "org.freedesktop.DBus.Error.UnknownMethod"
            | "org.freedesktop.DBus.Error.Timeout",
        ) => LogindError::NoLogind { method, reason },
        // logind allows one shutdown or sleep operation at a time.
        Some("org.freedesktop.login1.OperationInProgress") => LogindError::Busy {
            method,
            error,
            reason,
        },
        // systemd >= 258; the holders are filled in by `Logind::act`.
        Some("org.freedesktop.login1.BlockedByInhibitorLock") => LogindError::Blocked {
            method,
            holders: Vec::new(),
            error,
            reason,
        },
        _ => match e {
            zbus::Error::InputOutput(_) | zbus::Error::Handshake(_) | zbus::Error::Address(_) => {
                LogindError::NoBus {
                    address: bus_address(),
                    reason,
                }
            }
            _ => LogindError::Call { method, reason },
        },
    }
}

/// The system bus address in use.
pub(crate) fn bus_address() -> String {
    std::env::var("DBUS_SYSTEM_BUS_ADDRESS")
        .unwrap_or_else(|_| "unix:path=/run/dbus/system_bus_socket".into())
}

/// A lazily (re)connected logind client. Any transport error drops the connection, so the next
/// call reconnects: a restarted dbus or logind is picked up without restarting nthd.
#[derive(Default)]
pub struct Logind {
    conn: Option<zbus::Connection>,
    /// A test's private bus instead of the system bus.
    #[cfg(test)]
    address: Option<String>,
}

/// How long a `PowerOff` / `Reboot` call may take. logind answers at once when it accepts (the
/// drain happens after the answer); a hung logind must not stall nthd. The executor bounds the
/// call (connecting included) by this.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long any logind (or PID 1) property read may take, connecting included: a hung bus must
/// stall neither the daemon's loop nor `check`, `once` or `simulate`. The one bound on reads.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// A read that did not answer within [`READ_TIMEOUT`], naming what was read.
pub(crate) fn no_answer(method: &'static str) -> LogindError {
    LogindError::NoLogind {
        method,
        reason: format!(
            "no answer within {}",
            crate::timefmt::format_duration(READ_TIMEOUT)
        ),
    }
}

/// Runs one read within [`READ_TIMEOUT`]; a timeout is [`no_answer`], which drops the connection
/// (see `on_error`), so the read after a hung one reconnects.
async fn bounded<T>(
    what: &'static str,
    read: impl std::future::Future<Output = Result<T, LogindError>>,
) -> Result<T, LogindError> {
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .unwrap_or_else(|_| Err(no_answer(what)))
}

/// zbus's own bound on every method call on the connection: above [`CALL_TIMEOUT`], so that the
/// executor's bound, which also covers connecting, always speaks first.
const METHOD_TIMEOUT: Duration = Duration::from_secs(CALL_TIMEOUT.as_secs() + 5);

impl Logind {
    pub(crate) fn new() -> Logind {
        Logind::default()
    }

    /// A client of the bus at `address` (a test's private bus with a fake logind).
    #[cfg(test)]
    pub(crate) fn at(address: &str) -> Logind {
        Logind {
            conn: None,
            address: Some(address.to_string()),
        }
    }

    fn builder(&self) -> zbus::connection::Builder<'static> {
        #[cfg(test)]
        if let Some(a) = &self.address {
            return zbus::connection::Builder::address(a.as_str());
        }
        zbus::connection::Builder::system()
    }

    async fn manager(&mut self) -> Result<ManagerProxy<'static>, LogindError> {
        if let Some(c) = &self.conn {
            if !c.is_closed() {
                return ManagerProxy::new(c).await.map_err(proxy_failed);
            }
            self.conn = None;
        }
        let conn = tokio::time::timeout(
            Duration::from_secs(5),
            self.builder().method_timeout(METHOD_TIMEOUT).build(),
        )
        .await
        .map_err(|_| LogindError::NoBus {
            address: bus_address(),
            reason: "timed out connecting".into(),
        })?
        .map_err(|e| LogindError::NoBus {
            address: bus_address(),
            reason: e.to_string(),
        })?;
        let proxy = ManagerProxy::builder(&conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(proxy_failed)?;
        self.conn = Some(conn);
        Ok(proxy)
    }

    /// Drops the connection so the next call reconnects (after a call timed out).
    pub(crate) fn reset(&mut self) {
        self.conn = None;
    }

    fn on_error(&mut self, e: &LogindError) {
        if matches!(e, LogindError::NoBus { .. } | LogindError::NoLogind { .. }) {
            self.conn = None;
        }
    }

    /// Carries out a power action through logind, with `interactive=false`. Only a
    /// [`PowerAction`] gets here: a notice set to `log` or `ignore` has none.
    ///
    /// ```no_run
    /// # async fn drill(l: &mut nthd::testing::logind::Logind) {
    /// let _ = l.act(nthd::testing::policy::PowerAction::PowerOff).await;
    /// # }
    /// ```
    /// The setting "what the user chose" cannot be passed; this does not compile:
    /// ```compile_fail,E0308
    /// # async fn drill(l: &mut nthd::testing::logind::Logind) {
    /// let _ = l.act(nthd::testing::policy::Action::Log).await;
    /// # }
    /// ```
    pub async fn act(&mut self, action: PowerAction) -> Result<(), LogindError> {
        let m = self.manager().await?;
        let r = match action {
            PowerAction::Reboot => m.reboot(false).await,
            PowerAction::PowerOff => m.power_off(false).await,
        }
        .map_err(|e| classify(action.method(), Some(action), e));
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = self.name_the_blocker(e).await;
                self.on_error(&e);
                Err(e)
            }
        }
    }

    /// A refusal may be a block inhibitor, whatever it says: systemd <= 256 asks polkit for
    /// `power-off-ignore-inhibit` ("Interactive authentication required"), 257 answers
    /// AccessDenied "Access denied due to active block inhibitor", 258 and later
    /// `BlockedByInhibitorLock`. So on any refusal nthd reads `ListInhibitors`, and when
    /// someone holds a block lock on shutdown, that is the diagnosis, not the polkit rule.
    async fn name_the_blocker(&mut self, e: LogindError) -> LogindError {
        let (method, error, reason) = match &e {
            LogindError::Denied {
                method,
                error,
                reason,
                ..
            }
            | LogindError::Blocked {
                method,
                error,
                reason,
                ..
            } => (*method, error.clone(), reason.clone()),
            _ => return e,
        };
        match self.list_inhibitors().await {
            Ok(list) => {
                let holders: Vec<Inhibitor> = list
                    .into_iter()
                    .filter(Inhibitor::blocks_shutdown)
                    .collect();
                if holders.is_empty() {
                    e
                } else {
                    LogindError::Blocked {
                        method,
                        holders,
                        error,
                        reason,
                    }
                }
            }
            Err(_) => e,
        }
    }

    /// One read from logind's manager, bounded by [`READ_TIMEOUT`]; `what` names the method or
    /// property in errors. A failed or timed-out read drops the connection, so the next one
    /// reconnects.
    async fn read<T, Fut>(
        &mut self,
        what: &'static str,
        call: impl FnOnce(ManagerProxy<'static>) -> Fut,
    ) -> Result<T, LogindError>
    where
        Fut: std::future::Future<Output = zbus::Result<T>>,
    {
        let read = async {
            let m = self.manager().await?;
            call(m).await.map_err(|e| classify(what, None, e))
        };
        let r = bounded(what, read).await;
        if let Err(e) = &r {
            self.on_error(e);
        }
        r
    }

    /// logind's `InhibitDelayMaxUSec`: how long delay inhibitors (kubelet) may hold shutdown.
    pub(crate) async fn inhibit_delay_max(&mut self) -> Result<Duration, LogindError> {
        let us = self
            .read("Get InhibitDelayMaxUSec", |m| async move {
                m.inhibit_delay_max_usec().await
            })
            .await?;
        Ok(Duration::from_micros(us))
    }

    pub(crate) async fn preparing_for_shutdown(&mut self) -> Result<bool, LogindError> {
        self.read("Get PreparingForShutdown", |m| async move {
            m.preparing_for_shutdown().await
        })
        .await
    }

    /// logind's `CanPowerOff` / `CanReboot` answer for this user.
    pub(crate) async fn can(&mut self, action: PowerAction) -> Result<Grant, LogindError> {
        let method = action.can_method();
        let answer = match action {
            PowerAction::Reboot => {
                self.read(method, |m| async move { m.can_reboot().await })
                    .await
            }
            PowerAction::PowerOff => {
                self.read(method, |m| async move { m.can_power_off().await })
                    .await
            }
        };
        answer.map(|a| Grant::from(a.as_str()))
    }

    pub(crate) async fn list_inhibitors(&mut self) -> Result<Vec<Inhibitor>, LogindError> {
        let list = self
            .read(
                "ListInhibitors",
                |m| async move { m.list_inhibitors().await },
            )
            .await?;
        Ok(list.into_iter().map(Inhibitor::from).collect())
    }

    /// Takes a `delay` lock on `shutdown` as the drain report does, and releases it at once:
    /// whether logind (and polkit's `inhibit-delay-shutdown`) grants it to this user.
    pub(crate) async fn try_delay_lock(&mut self) -> Result<(), LogindError> {
        let _fd = self
            .read("Inhibit shutdown delay", |m| async move {
                m.inhibit(
                    "shutdown",
                    DRAIN_LOCK_WHO,
                    "nthd check: can the drain be reported?",
                    "delay",
                )
                .await
            })
            .await?;
        Ok(())
    }

    /// logind's `HandlePowerKey` (`poweroff`, `ignore`, ...).
    pub(crate) async fn handle_power_key(&mut self) -> Result<String, LogindError> {
        self.read("Get HandlePowerKey", |m| async move {
            m.handle_power_key().await
        })
        .await
    }

    /// PID 1's manager on the same connection, without a property cache (every read is live).
    async fn systemd(&mut self) -> Result<SystemdProxy<'static>, LogindError> {
        self.manager().await?;
        let conn = self.conn.as_ref().expect("connected above");
        SystemdProxy::builder(conn)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(proxy_failed)
    }

    /// systemd's version string (e.g. `252.38-1~deb12u1`), from PID 1 over the bus.
    pub(crate) async fn systemd_version(&mut self) -> Result<String, LogindError> {
        let p = self.systemd().await?;
        p.version().await.map_err(|e| LogindError::Call {
            method: "Get org.freedesktop.systemd1.Manager.Version",
            reason: e.to_string(),
        })
    }
}

impl Logind {
    /// PID 1's `SystemState`: `stopping` once the shutdown transaction is queued, that is, once
    /// logind's delay is over and the machine is really going down. `PreparingForShutdown` is
    /// already true during kubelet's drain, so it cannot tell a restart mid-drain from the end.
    pub(crate) async fn system_state(&mut self) -> Result<SystemState, LogindError> {
        const WHAT: &str = "Get org.freedesktop.systemd1.Manager.SystemState";
        let read = async {
            let p = self.systemd().await?;
            p.system_state().await.map_err(|e| LogindError::Call {
                method: WHAT,
                reason: e.to_string(),
            })
        };
        let r = bounded(WHAT, read).await;
        if let Err(e) = &r {
            self.on_error(e);
        }
        r.map(|s| SystemState::from(s.as_str()))
    }

    /// The `ActiveState` of a unit (`active`, `inactive`, ...), or `not-loaded`.
    pub(crate) async fn unit_state(&mut self, unit: &str) -> Result<String, LogindError> {
        self.manager().await?;
        let conn = self.conn.as_ref().expect("connected above");
        let call_err = |method: &'static str, e: zbus::Error| LogindError::Call {
            method,
            reason: e.to_string(),
        };
        let sd = SystemdProxy::new(conn)
            .await
            .map_err(|e| call_err("proxy", e))?;
        let path = match sd.get_unit(unit).await {
            Ok(p) => p,
            Err(e) if error_name(&e).as_deref() == Some("org.freedesktop.systemd1.NoSuchUnit") => {
                return Ok("not-loaded".into())
            }
            Err(e) => return Err(call_err("org.freedesktop.systemd1.Manager.GetUnit", e)),
        };
        let u = UnitProxy::builder(conn)
            .path(path)
            .cache_properties(zbus::proxy::CacheProperties::No)
            .build()
            .await
            .map_err(|e| call_err("proxy", e))?;
        u.active_state()
            .await
            .map_err(|e| call_err("Get org.freedesktop.systemd1.Unit.ActiveState", e))
    }
}

/// One entry of `ListInhibitors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inhibitor {
    /// What is inhibited, colon-separated, e.g. `shutdown:sleep`.
    pub what: String,
    /// Who holds the lock, e.g. `kubelet`.
    pub who: String,
    /// Why, in the holder's words.
    pub why: String,
    /// `delay`, `block` or (systemd 257 and later) `block-weak`.
    pub mode: String,
    /// The holder's user id.
    pub uid: u32,
    /// The holder's process id.
    pub pid: u32,
}

impl From<(String, String, String, String, u32, u32)> for Inhibitor {
    /// One `ListInhibitors` row: (what, who, why, mode, uid, pid).
    fn from((what, who, why, mode, uid, pid): (String, String, String, String, u32, u32)) -> Self {
        Inhibitor {
            what,
            who,
            why,
            mode,
            uid,
            pid,
        }
    }
}

impl Inhibitor {
    /// Whether this is a delay lock on shutdown, as kubelet takes.
    pub(crate) fn delays_shutdown(&self) -> bool {
        self.mode == "delay" && self.on_shutdown()
    }

    /// Whether this is a block lock on shutdown (`block`, or 257's `block-weak`), which makes
    /// logind refuse PowerOff to anyone not allowed to ignore inhibitors.
    pub(crate) fn blocks_shutdown(&self) -> bool {
        matches!(self.mode.as_str(), "block" | "block-weak") && self.on_shutdown()
    }

    fn on_shutdown(&self) -> bool {
        self.what.split(':').any(|w| w == "shutdown")
    }

    /// Whether this is the delay lock nthd itself holds to write the drain report; it is not
    /// kubelet's and never one of the drain's holders.
    pub(crate) fn is_nthds(&self) -> bool {
        self.who == DRAIN_LOCK_WHO && self.uid == effective_uid()
    }
}

/// The `who` of nthd's own delay lock on `shutdown`, as `systemd-inhibit --list` shows it.
pub(crate) const DRAIN_LOCK_WHO: &str = "nthd";

/// The `why` of nthd's own delay lock.
pub(crate) const DRAIN_LOCK_WHY: &str =
    "nthd reports how the drain went (held at most 2 s after the last other delay lock)";

/// logind's answer to `CanPowerOff` / `CanReboot` for this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grant {
    /// `yes`: logind would carry it out.
    Yes,
    /// `no`: polkit denies it outright.
    No,
    /// `challenge`: polkit would ask for authentication.
    Challenge,
    /// `na`: not available on this system.
    Na,
    /// systemd 260's `inhibited`, `inhibitor-blocked` or `challenge-inhibitor-blocked`.
    Inhibited(String),
    /// An answer this nthd does not know, kept for the message.
    Unknown(String),
}

impl From<&str> for Grant {
    fn from(answer: &str) -> Grant {
        match answer {
            "yes" => Grant::Yes,
            "no" => Grant::No,
            "challenge" => Grant::Challenge,
            "na" => Grant::Na,
            "inhibited" | "inhibitor-blocked" | "challenge-inhibitor-blocked" => {
                Grant::Inhibited(answer.to_string())
            }
            other => Grant::Unknown(other.to_string()),
        }
    }
}

impl Grant {
    /// logind's own word, as messages quote it.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Grant::Yes => "yes",
            Grant::No => "no",
            Grant::Challenge => "challenge",
            Grant::Na => "na",
            Grant::Inhibited(s) | Grant::Unknown(s) => s,
        }
    }

    /// What the answer means for nthd, with what to do about it; `None` for `yes`.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        match self {
            Grant::Yes => None,
            Grant::Challenge => Some(
                "polkit would ask for authentication: the rule granting user nthd is missing, or \
                 a block inhibitor on shutdown is held (polkit then asks for \
                 power-off-ignore-inhibit)",
            ),
            Grant::Inhibited(_) => Some(
                "a block inhibitor on shutdown is held: logind refuses until its holder releases \
                 it (systemd-inhibit --list names it); nthd never overrides it",
            ),
            Grant::No => Some("logind says no for this user: polkit denies it outright"),
            Grant::Na => Some("logind says power-off is not available on this system"),
            Grant::Unknown(_) => Some("an answer this nthd does not know"),
        }
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// PID 1's `SystemState`, as far as nthd cares: stopping, or anything else (kept for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SystemState {
    /// `stopping`: the shutdown transaction is queued; the machine is really going down.
    Stopping,
    /// `running`, `degraded`, `starting`, ...
    Other(String),
}

impl From<&str> for SystemState {
    fn from(s: &str) -> SystemState {
        match s {
            "stopping" => SystemState::Stopping,
            other => SystemState::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for SystemState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SystemState::Stopping => f.write_str("stopping"),
            SystemState::Other(s) => f.write_str(s),
        }
    }
}

/// The bounded reads of a [`Logind`] and nothing else: what the daemon's watch of logind may
/// do. A power action goes through the executor, with a [`PowerAction`], never through this.
pub(crate) struct Reads<'a>(&'a mut Logind);

impl Logind {
    /// The reads alone (see [`Reads`]).
    pub(crate) fn reads(&mut self) -> Reads<'_> {
        Reads(self)
    }
}

impl Reads<'_> {
    /// See [`Logind::can`].
    pub(crate) async fn can(&mut self, action: PowerAction) -> Result<Grant, LogindError> {
        self.0.can(action).await
    }

    /// See [`Logind::inhibit_delay_max`].
    pub(crate) async fn inhibit_delay_max(&mut self) -> Result<Duration, LogindError> {
        self.0.inhibit_delay_max().await
    }

    /// See [`Logind::preparing_for_shutdown`].
    pub(crate) async fn preparing_for_shutdown(&mut self) -> Result<bool, LogindError> {
        self.0.preparing_for_shutdown().await
    }

    /// See [`Logind::system_state`].
    pub(crate) async fn system_state(&mut self) -> Result<SystemState, LogindError> {
        self.0.system_state().await
    }

    /// See [`Logind::list_inhibitors`].
    pub(crate) async fn list_inhibitors(&mut self) -> Result<Vec<Inhibitor>, LogindError> {
        self.0.list_inhibitors().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denial_message_names_the_polkit_action_and_the_fix() {
        let e = LogindError::Denied {
            method: "PowerOff",
            user: "user nthd (uid 999)".into(),
            action: polkit_action(PowerAction::PowerOff),
            error: "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired".into(),
            reason: "Interactive authentication required.".into(),
        };
        let s = e.to_string();
        assert!(s.contains("org.freedesktop.login1.power-off"), "{s}");
        assert!(
            s.contains("50-nthd.rules") && s.contains("nthd.pkla"),
            "{s}"
        );
        assert!(polkit_action(PowerAction::Reboot).contains("login1.reboot"));
    }

    /// What PowerOff fails with when logind answers the error `name` with `text`.
    fn power_off_refused(name: &str, text: &str) -> LogindError {
        let e = zbus::Error::MethodError(
            zbus::names::OwnedErrorName::try_from(name).unwrap(),
            Some(text.into()),
            zbus::message::Message::method_call("/", "Ping")
                .build(&())
                .unwrap(),
        );
        classify("PowerOff", Some(PowerAction::PowerOff), e)
    }

    #[test]
    fn operation_in_progress_is_told_apart() {
        let e = power_off_refused(
            "org.freedesktop.login1.OperationInProgress",
            "There's already a shutdown or sleep operation in progress",
        );
        assert!(matches!(e, LogindError::Busy { .. }), "{e:?}");
        let s = e.to_string();
        assert!(
            s.contains("already in progress") && s.contains("systemctl list-jobs"),
            "{s}"
        );
        let other = zbus::Error::Failure("boom".into());
        let e = classify("PowerOff", Some(PowerAction::PowerOff), other);
        assert!(matches!(e, LogindError::Call { .. }), "{e:?}");
    }

    #[test]
    fn inhibitor_kinds() {
        let i = Inhibitor {
            what: "sleep:shutdown".into(),
            who: "kubelet".into(),
            why: "".into(),
            mode: "delay".into(),
            uid: 0,
            pid: 1,
        };
        assert!(i.delays_shutdown());
        let b = Inhibitor {
            mode: "block".into(),
            ..i.clone()
        };
        assert!(!b.delays_shutdown());
        let s = Inhibitor {
            what: "sleep".into(),
            ..i
        };
        assert!(!s.delays_shutdown());
    }

    /// logind's error name is kept as a field of every refusal, apart from the message.
    #[test]
    fn a_refusal_keeps_loginds_error_name() {
        let e = power_off_refused(
            "org.freedesktop.login1.BlockedByInhibitorLock",
            "Operation denied due to active block inhibitor",
        );
        let r = e.refusal().expect("a refusal");
        assert_eq!(r.error, "org.freedesktop.login1.BlockedByInhibitorLock");
        assert!(r.holders.is_empty() && r.blocked_by().is_empty());
        let gone = LogindError::NoBus {
            address: "unix:path=/x".into(),
            reason: "gone".into(),
        };
        assert_eq!(gone.refusal(), None);
        let hostile = Inhibitor {
            what: "shutdown".into(),
            who: "evil\nline".into(),
            why: "x".repeat(300),
            mode: "block".into(),
            uid: 0,
            pid: 9,
        };
        let h = BlockHolder::from(&hostile);
        assert!(
            !h.who.contains('\n') && h.why.chars().count() < 200,
            "{h:?}"
        );
    }

    /// logind's answers come typed; its own word is kept for the messages.
    #[test]
    fn answers_are_typed_and_keep_their_word() {
        assert_eq!(Grant::from("yes"), Grant::Yes);
        assert_eq!(Grant::from("yes").problem(), None);
        for (word, grant) in [
            ("no", Grant::No),
            ("challenge", Grant::Challenge),
            ("na", Grant::Na),
            (
                "inhibitor-blocked",
                Grant::Inhibited("inhibitor-blocked".into()),
            ),
            ("maybe", Grant::Unknown("maybe".into())),
        ] {
            assert_eq!(Grant::from(word), grant);
            assert_eq!(grant.to_string(), word);
            assert!(grant.problem().is_some(), "{word}");
        }
        assert!(Grant::from("maybe")
            .problem()
            .unwrap()
            .contains("does not know"));
        assert_eq!(SystemState::from("stopping"), SystemState::Stopping);
        assert_eq!(
            SystemState::from("running"),
            SystemState::Other("running".into())
        );
        assert_eq!(SystemState::from("degraded").to_string(), "degraded");
    }

    /// A hung logind: every read comes back within the one bound, naming what was read, and the
    /// connection is dropped so that the next read reconnects.
    #[tokio::test]
    async fn a_hung_read_is_bounded_named_and_reconnects() {
        let bus = nthd_testkit::logind::PrivateBus::start().unwrap();
        let hung = nthd_testkit::logind::HungLogind::take_name(bus.address()).unwrap();
        let mut l = Logind::at(bus.address());
        let started = std::time::Instant::now();
        let e = l.can(PowerAction::PowerOff).await.unwrap_err();
        assert!(started.elapsed() < READ_TIMEOUT + Duration::from_secs(2));
        assert_eq!(e, no_answer("CanPowerOff"));
        assert!(
            e.to_string().contains("(CanPowerOff): no answer within 3s"),
            "{e}"
        );
        assert!(l.conn.is_none(), "the hung connection is kept");
        drop(hung);
        let fake = nthd_testkit::logind::FakeLogind::serve(bus.address())
            .await
            .unwrap();
        fake.set_inhibit_delay_max(Duration::from_secs(7));
        assert_eq!(l.inhibit_delay_max().await, Ok(Duration::from_secs(7)));
    }
}
