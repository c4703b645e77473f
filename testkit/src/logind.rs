//! A private D-Bus bus and a fake `org.freedesktop.login1`.
//!
//! [`PrivateBus`] runs a throw-away `dbus-daemon` with a permissive, system-bus-like policy;
//! point a client at it with `DBUS_SYSTEM_BUS_ADDRESS=<address>`.
//!
//! [`FakeLogind`] owns `org.freedesktop.login1` on a bus and serves
//! `/org/freedesktop/login1` with the subset of `org.freedesktop.login1.Manager` that matters for
//! a node-termination handler and for kubelet's graceful node shutdown: `PowerOff`, `Reboot`,
//! `CanPowerOff`, `CanReboot`, `ListInhibitors`, `Inhibit`, a few properties and the
//! `PrepareForShutdown` signal. It records every method call and models logind's delay-inhibitor
//! handling: after a successful `PowerOff`/`Reboot` it emits `PrepareForShutdown(true)` and
//! "proceeds" (records a [`Shutdown`]) once every `delay` inhibitor on `shutdown` is released or
//! `InhibitDelayMaxUSec` has passed — the machine does not actually go down.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use zbus::message::Header;
use zbus::names::{ErrorName, OwnedErrorName};
use zbus::{Connection, DBusError, Message};

use crate::{lock, unix_ms};

/// Well-known name of logind.
pub const LOGIN1_NAME: &str = "org.freedesktop.login1";
/// Object path of the logind manager.
pub const LOGIN1_PATH: &str = "/org/freedesktop/login1";
/// Interface of the logind manager.
pub const LOGIN1_MANAGER: &str = "org.freedesktop.login1.Manager";

/// Error polkit denial produces on newer systemd.
pub const ERR_INTERACTIVE_AUTH_REQUIRED: &str =
    "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired";
/// Error polkit denial produces on older systemd.
pub const ERR_ACCESS_DENIED: &str = "org.freedesktop.DBus.Error.AccessDenied";
/// logind's "already shutting down" error.
pub const ERR_OPERATION_IN_PROGRESS: &str = "org.freedesktop.login1.OperationInProgress";
/// Invalid arguments.
pub const ERR_INVALID_ARGS: &str = "org.freedesktop.DBus.Error.InvalidArgs";
/// systemd >= 258's refusal while a block inhibitor on shutdown is held.
pub const ERR_BLOCKED_BY_INHIBITOR: &str = "org.freedesktop.login1.BlockedByInhibitorLock";

/// How logind refuses `PowerOff`/`Reboot` while someone holds a block inhibitor on shutdown,
/// and what `CanPowerOff` answers then, by systemd version (read at the release tags):
/// <= 256 asks polkit for `power-off-ignore-inhibit` (so: "Interactive authentication
/// required."), 257 denies at once, 258 has its own error, 260 adds `CanPowerOff` answers.
pub fn block_refusal(systemd: u32) -> (&'static str, &'static str, &'static str) {
    match systemd {
        0..=256 => (
            ERR_INTERACTIVE_AUTH_REQUIRED,
            "Interactive authentication required.",
            "challenge",
        ),
        257 => (
            ERR_ACCESS_DENIED,
            "Access denied due to active block inhibitor",
            "challenge",
        ),
        258..=259 => (
            ERR_BLOCKED_BY_INHIBITOR,
            "Operation denied due to active block inhibitor",
            "challenge",
        ),
        _ => (
            ERR_BLOCKED_BY_INHIBITOR,
            "Operation denied due to active block inhibitor",
            "inhibitor-blocked",
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// PrivateBus

/// A private `dbus-daemon` with a system-bus-like config that allows everything. Killed (and
/// its temp dir removed) on drop.
#[derive(Debug)]
pub struct PrivateBus {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
    address: String,
}

static BUS_COUNTER: AtomicU64 = AtomicU64::new(0);

impl PrivateBus {
    /// Start `dbus-daemon` (from `$NTHD_TESTKIT_DBUS_DAEMON`, else `dbus-daemon` on `PATH`).
    /// Blocks until the daemon has printed its address (at most 10 s).
    pub fn start() -> io::Result<PrivateBus> {
        let n = BUS_COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "nthd-testkit-bus-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir(&dir)?;
        let socket = dir.join("system_bus_socket");
        let config = dir.join("bus.conf");
        std::fs::write(&config, bus_config(&socket))?;
        let child = spawn_daemon(&config, &dir)?;
        let (child, address) = wait_for_address(child, &dir)?;
        Ok(PrivateBus {
            child,
            dir,
            socket,
            address,
        })
    }

    /// The bus address (`unix:path=...,guid=...`), for `DBUS_SYSTEM_BUS_ADDRESS`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The bus socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// PID of the `dbus-daemon`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Connect a client to this bus on the current tokio runtime.
    pub async fn connect(&self) -> zbus::Result<Connection> {
        zbus::connection::Builder::address(self.address.as_str())
            .build()
            .await
    }
}

impl Drop for PrivateBus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Spawn `dbus-daemon` with `config`, its stdout and stderr piped. On failure removes `dir`.
fn spawn_daemon(config: &Path, dir: &Path) -> io::Result<Child> {
    let program =
        std::env::var_os("NTHD_TESTKIT_DBUS_DAEMON").unwrap_or_else(|| "dbus-daemon".into());
    let spawned = Command::new(&program)
        .arg("--nofork")
        .arg("--print-address")
        .arg(format!("--config-file={}", config.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    spawned.map_err(|e| {
        let _ = std::fs::remove_dir_all(dir);
        io::Error::new(
            e.kind(),
            format!(
                "cannot run {} (install the dbus-daemon package): {e}",
                program.to_string_lossy()
            ),
        )
    })
}

/// Forward the daemon's stderr and wait (at most 10 s) for the address it prints on stdout. On
/// failure kills the daemon and removes `dir`.
fn wait_for_address(mut child: Child, dir: &Path) -> io::Result<(Child, String)> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    std::thread::spawn(move || {
        // Forward the daemon's complaints, minus the one every unprivileged-container run
        // prints (it cannot raise its fd limit; irrelevant for a test bus).
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if !line.contains("Failed to set fd limit") {
                eprintln!("{line}");
            }
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = BufReader::new(stdout).read_line(&mut line).map(|_| line);
        let _ = tx.send(r);
        // Keep the pipe open (and drained) for the daemon's lifetime.
    });
    let msg = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(l)) if !l.trim().is_empty() => return Ok((child, l.trim().to_string())),
        Ok(Ok(_)) => "dbus-daemon exited without printing its address".into(),
        Ok(Err(e)) => format!("reading dbus-daemon address: {e}"),
        Err(_) => "dbus-daemon did not print its address within 10 s".into(),
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(dir);
    Err(io::Error::other(msg))
}

fn bus_config(socket: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"#,
        socket.display()
    )
}

// ---------------------------------------------------------------------------------------------
// Data recorded by the fake

/// A D-Bus error the fake returns: any error name and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogindError {
    name: OwnedErrorName,
    message: String,
}

impl LogindError {
    /// Build an error. Panics if `name` is not a valid D-Bus error name.
    pub fn new(name: &str, message: &str) -> LogindError {
        let name = OwnedErrorName::try_from(name.to_string())
            .unwrap_or_else(|e| panic!("invalid D-Bus error name {name:?}: {e}"));
        LogindError {
            name,
            message: message.to_string(),
        }
    }

    /// The error name.
    pub fn error_name(&self) -> &str {
        self.name.as_str()
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl DBusError for LogindError {
    fn create_reply(&self, call: &Header<'_>) -> zbus::Result<Message> {
        Message::error(call, self.name.as_ref()).build(&(self.message.as_str(),))
    }

    fn name(&self) -> ErrorName<'_> {
        self.name.as_ref()
    }

    fn description(&self) -> Option<&str> {
        Some(&self.message)
    }
}

/// One method call on the fake `Manager` (property reads are not recorded).
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Method name, e.g. `"PowerOff"`.
    pub method: String,
    /// Arguments as JSON, e.g. `[true]`.
    pub args: serde_json::Value,
    /// When the call arrived.
    pub at: SystemTime,
    /// Unique bus name of the caller.
    pub sender: Option<String>,
    /// Name of the error the fake answered with, if it did.
    pub error: Option<String>,
}

impl Call {
    /// `at` in Unix milliseconds.
    pub fn t_ms(&self) -> u64 {
        unix_ms(self.at)
    }

    /// JSON form (as printed by `nthd-fake-logind`).
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "event": "call",
            "t_ms": self.t_ms(),
            "method": self.method,
            "args": self.args,
            "sender": self.sender,
            "error": self.error,
        })
    }
}

/// A held inhibitor lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inhibitor {
    /// Id local to this fake.
    pub id: u64,
    /// Colon-separated list, e.g. `"shutdown"`.
    pub what: String,
    /// Who holds it, e.g. `"kubelet"`.
    pub who: String,
    /// Why.
    pub why: String,
    /// `"block"` or `"delay"` (or `"block-weak"`).
    pub mode: String,
    /// Holder's UID as reported by the bus.
    pub uid: u32,
    /// Holder's PID as reported by the bus.
    pub pid: u32,
    /// Unique bus name of the holder.
    pub sender: String,
    /// When it was taken.
    pub taken_at: SystemTime,
}

impl Inhibitor {
    fn delays_shutdown(&self) -> bool {
        self.mode == "delay" && self.what.split(':').any(|w| w == "shutdown")
    }

    fn blocks_shutdown(&self) -> bool {
        matches!(self.mode.as_str(), "block" | "block-weak")
            && self.what.split(':').any(|w| w == "shutdown")
    }
}

/// Why a requested shutdown "proceeded".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownReason {
    /// No delay inhibitor was held when it was requested.
    NoDelayInhibitors,
    /// Every delay inhibitor was released.
    InhibitorsReleased,
    /// `InhibitDelayMaxUSec` passed with delay inhibitors still held.
    DelayTimeout,
}

impl ShutdownReason {
    /// kebab-case name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ShutdownReason::NoDelayInhibitors => "no-delay-inhibitors",
            ShutdownReason::InhibitorsReleased => "inhibitors-released",
            ShutdownReason::DelayTimeout => "delay-timeout",
        }
    }
}

/// The point where real logind would have started the power-off/reboot job.
#[derive(Clone, Debug, PartialEq)]
pub struct Shutdown {
    /// `"PowerOff"` or `"Reboot"`.
    pub method: String,
    /// When the (first successful) request arrived.
    pub requested_at: SystemTime,
    /// When the delay ended.
    pub proceeded_at: SystemTime,
    /// Why it ended.
    pub reason: ShutdownReason,
    /// Delay inhibitors held when the request arrived.
    pub delayed_by: Vec<Inhibitor>,
}

impl Shutdown {
    /// JSON form (as printed by `nthd-fake-logind`).
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "event": "shutdown",
            "method": self.method,
            "requested_t_ms": unix_ms(self.requested_at),
            "t_ms": unix_ms(self.proceeded_at),
            "reason": self.reason.as_str(),
            "delayed_by": self.delayed_by.iter().map(|i| i.who.clone()).collect::<Vec<_>>(),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// State

struct State {
    can_power_off: String,
    can_reboot: String,
    power_off_error: Option<LogindError>,
    reboot_error: Option<LogindError>,
    inhibit_error: Option<LogindError>,
    inhibit_delay_max: Duration,
    preparing: bool,
    handle_power_key: String,
    power_key_ignore_inhibited: bool,
    scheduled_shutdown: (String, u64),
    /// The systemd version whose block-inhibitor behaviour is emulated ([`block_refusal`]).
    systemd: u32,
    calls: Vec<Call>,
    inhibitors: Vec<Inhibitor>,
    next_inhibitor_id: u64,
    /// A shutdown requested and not cancelled (the delay may be over).
    pending: Option<String>,
    shutdowns: Vec<Shutdown>,
    /// Inhibitor fd watchers and the delay tracker, aborted on stop.
    tasks: HashMap<u64, AbortHandle>,
    next_task: u64,
}

impl State {
    /// Adds `i` under the next id, which it returns.
    fn add_inhibitor(&mut self, mut i: Inhibitor) -> u64 {
        self.next_inhibitor_id += 1;
        i.id = self.next_inhibitor_id;
        self.inhibitors.push(i);
        self.next_inhibitor_id
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            can_power_off: "yes".into(),
            can_reboot: "yes".into(),
            power_off_error: None,
            reboot_error: None,
            inhibit_error: None,
            inhibit_delay_max: Duration::from_secs(5),
            preparing: false,
            handle_power_key: "poweroff".into(),
            power_key_ignore_inhibited: false,
            scheduled_shutdown: (String::new(), 0),
            systemd: 252,
            calls: Vec::new(),
            inhibitors: Vec::new(),
            next_inhibitor_id: 0,
            pending: None,
            shutdowns: Vec::new(),
            tasks: HashMap::new(),
            next_task: 0,
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Bumped whenever calls, inhibitors or shutdowns change.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn bump(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    fn record(
        &self,
        method: &str,
        args: serde_json::Value,
        hdr: &Header<'_>,
        error: Option<&LogindError>,
    ) {
        lock(&self.state).calls.push(Call {
            method: method.into(),
            args,
            at: SystemTime::now(),
            sender: hdr.sender().map(std::string::ToString::to_string),
            error: error.map(|e| e.error_name().to_string()),
        });
        self.bump();
    }

    fn add_task(&self, h: AbortHandle) -> u64 {
        let mut st = lock(&self.state);
        st.next_task += 1;
        let id = st.next_task;
        st.tasks.insert(id, h);
        id
    }

    /// Wait for `cond` on the state, with a timeout.
    async fn wait_until<T>(
        &self,
        timeout: Duration,
        mut cond: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        let mut rx = self.changed.subscribe();
        tokio::time::timeout(timeout, async {
            loop {
                if let Some(v) = cond(&lock(&self.state)) {
                    return v;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await
        .ok()
    }
}

// ---------------------------------------------------------------------------------------------
// The D-Bus interface

struct Manager {
    shared: Arc<Shared>,
}

const KNOWN_WHAT: &[&str] = &[
    "shutdown",
    "sleep",
    "idle",
    "handle-power-key",
    "handle-suspend-key",
    "handle-hibernate-key",
    "handle-lid-switch",
    "handle-reboot-key",
];

impl Manager {
    async fn shutdown_request(
        &self,
        method: &str,
        interactive: bool,
        hdr: &Header<'_>,
        conn: &Connection,
    ) -> Result<(), LogindError> {
        let shared = &self.shared;
        let requested_at = SystemTime::now();
        let sender = hdr
            .sender()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        let (caller_uid, _) = caller_creds(conn, &sender).await;
        let call = Call {
            method: method.into(),
            args: json!([interactive]),
            at: requested_at,
            sender: hdr.sender().map(std::string::ToString::to_string),
            error: None,
        };
        let begun = begin_shutdown(&mut lock(&shared.state), call, caller_uid);
        shared.bump();
        let (delayed_by, max) = begun?;
        // Like logind: the signal goes out before the method reply.
        if let Err(e) = conn
            .emit_signal(
                None::<&str>,
                LOGIN1_PATH,
                LOGIN1_MANAGER,
                "PrepareForShutdown",
                &(true,),
            )
            .await
        {
            eprintln!("fake-logind: emitting PrepareForShutdown: {e}");
        }
        let task = tokio::spawn(proceed_after_delay(
            shared.clone(),
            method.to_string(),
            requested_at,
            delayed_by,
            max,
        ));
        shared.add_task(task.abort_handle());
        Ok(())
    }
}

/// Why a shutdown request (`method`) from `caller_uid` is refused, if it is: the scripted error,
/// another user's block inhibitor, or an operation already in progress.
fn shutdown_refusal(st: &State, method: &str, caller_uid: u32) -> Option<LogindError> {
    let err = match method {
        "PowerOff" => st.power_off_error.clone(),
        _ => st.reboot_error.clone(),
    };
    // Like logind: another user's block inhibitor on shutdown refuses everyone not
    // allowed to ignore inhibitors (nthd never is), in the emulated version's words.
    let err = err.or_else(|| {
        blocked_for(st, caller_uid).then(|| {
            let (name, msg, _) = block_refusal(st.systemd);
            LogindError::new(name, msg)
        })
    });
    // Like logind: one shutdown or sleep operation at a time.
    err.or_else(|| {
        st.pending.as_ref().map(|_| {
            LogindError::new(
                ERR_OPERATION_IN_PROGRESS,
                "There's already a shutdown or sleep operation in progress",
            )
        })
    })
}

/// Record the shutdown request `call` and, unless it is refused, mark the shutdown pending.
/// Returns the delay inhibitors held now and the longest delay.
fn begin_shutdown(
    st: &mut State,
    mut call: Call,
    caller_uid: u32,
) -> Result<(Vec<Inhibitor>, Duration), LogindError> {
    let err = shutdown_refusal(st, &call.method, caller_uid);
    call.error = err.as_ref().map(|e| e.error_name().to_string());
    let method = call.method.clone();
    st.calls.push(call);
    if let Some(e) = err {
        return Err(e);
    }
    st.pending = Some(method);
    st.preparing = true;
    let delayed_by: Vec<Inhibitor> = st
        .inhibitors
        .iter()
        .filter(|i| i.delays_shutdown())
        .cloned()
        .collect();
    Ok((delayed_by, st.inhibit_delay_max))
}

/// Wait until no delay inhibitor is held or `max` has passed (at once if `delayed_by` was
/// empty), then record the shutdown as proceeded unless it was cancelled meanwhile.
async fn proceed_after_delay(
    shared: Arc<Shared>,
    method: String,
    requested_at: SystemTime,
    delayed_by: Vec<Inhibitor>,
    max: Duration,
) {
    let reason = if delayed_by.is_empty() {
        ShutdownReason::NoDelayInhibitors
    } else {
        wait_for_delay_inhibitors(&shared, max).await
    };
    {
        let mut st = lock(&shared.state);
        if st.pending.is_some() {
            st.shutdowns.push(Shutdown {
                method,
                requested_at,
                proceeded_at: SystemTime::now(),
                reason,
                delayed_by,
            });
        }
    }
    shared.bump();
}

/// Wait until every delay inhibitor is released or `max` has passed.
async fn wait_for_delay_inhibitors(shared: &Shared, max: Duration) -> ShutdownReason {
    let mut rx = shared.changed.subscribe();
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let held = lock(&shared.state)
            .inhibitors
            .iter()
            .any(Inhibitor::delays_shutdown);
        if !held {
            break ShutdownReason::InhibitorsReleased;
        }
        tokio::select! {
            r = rx.changed() => if r.is_err() { std::future::pending::<()>().await },
            _ = tokio::time::sleep_until(deadline) => break ShutdownReason::DelayTimeout,
        }
    }
}

type InhibitorRow = (String, String, String, String, u32, u32);

#[zbus::interface(name = "org.freedesktop.login1.Manager")]
impl Manager {
    async fn power_off(
        &self,
        interactive: bool,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
    ) -> Result<(), LogindError> {
        self.shutdown_request("PowerOff", interactive, &hdr, conn)
            .await
    }

    async fn reboot(
        &self,
        interactive: bool,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
    ) -> Result<(), LogindError> {
        self.shutdown_request("Reboot", interactive, &hdr, conn)
            .await
    }

    async fn can_power_off(
        &self,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
    ) -> String {
        let sender = hdr
            .sender()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        let (caller_uid, _) = caller_creds(conn, &sender).await;
        let v = {
            let st = lock(&self.shared.state);
            if blocked_for(&st, caller_uid) {
                block_refusal(st.systemd).2.to_string()
            } else {
                st.can_power_off.clone()
            }
        };
        self.shared.record("CanPowerOff", json!([]), &hdr, None);
        v
    }

    fn can_reboot(&self, #[zbus(header)] hdr: Header<'_>) -> String {
        let v = lock(&self.shared.state).can_reboot.clone();
        self.shared.record("CanReboot", json!([]), &hdr, None);
        v
    }

    fn list_inhibitors(&self, #[zbus(header)] hdr: Header<'_>) -> Vec<InhibitorRow> {
        let rows = lock(&self.shared.state)
            .inhibitors
            .iter()
            .map(|i| {
                (
                    i.what.clone(),
                    i.who.clone(),
                    i.why.clone(),
                    i.mode.clone(),
                    i.uid,
                    i.pid,
                )
            })
            .collect();
        self.shared.record("ListInhibitors", json!([]), &hdr, None);
        rows
    }

    async fn inhibit(
        &self,
        what: String,
        who: String,
        why: String,
        mode: String,
        #[zbus(header)] hdr: Header<'_>,
        #[zbus(connection)] conn: &Connection,
    ) -> Result<zbus::OwnedFd, LogindError> {
        let args = json!([what, who, why, mode]);
        let result = self
            .inhibit_inner(&what, &who, &why, &mode, &hdr, conn)
            .await;
        self.shared
            .record("Inhibit", args, &hdr, result.as_ref().err());
        result
    }

    /// `PrepareForShutdown(b start)`. Declared for introspection; emitted with
    /// `Connection::emit_signal`.
    #[zbus(signal)]
    async fn prepare_for_shutdown(
        emitter: &zbus::object_server::SignalEmitter<'_>,
        start: bool,
    ) -> zbus::Result<()>;

    #[zbus(property(emits_changed_signal = "false"), name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> u64 {
        lock(&self.shared.state).inhibit_delay_max.as_micros() as u64
    }

    #[zbus(property(emits_changed_signal = "false"))]
    fn preparing_for_shutdown(&self) -> bool {
        lock(&self.shared.state).preparing
    }

    #[zbus(property(emits_changed_signal = "false"))]
    fn handle_power_key(&self) -> String {
        lock(&self.shared.state).handle_power_key.clone()
    }

    #[zbus(property(emits_changed_signal = "false"))]
    fn power_key_ignore_inhibited(&self) -> bool {
        lock(&self.shared.state).power_key_ignore_inhibited
    }

    #[zbus(property(emits_changed_signal = "false"))]
    fn scheduled_shutdown(&self) -> (String, u64) {
        lock(&self.shared.state).scheduled_shutdown.clone()
    }
}

impl Manager {
    async fn inhibit_inner(
        &self,
        what: &str,
        who: &str,
        why: &str,
        mode: &str,
        hdr: &Header<'_>,
        conn: &Connection,
    ) -> Result<zbus::OwnedFd, LogindError> {
        let whats = check_inhibit_args(what, mode)?;
        {
            let st = lock(&self.shared.state);
            if let Some(e) = &st.inhibit_error {
                return Err(e.clone());
            }
            if st.pending.is_some() && whats.contains(&"shutdown") {
                return Err(LogindError::new(
                    ERR_OPERATION_IN_PROGRESS,
                    "The operation inhibition has been requested for is already running",
                ));
            }
        }
        let sender = hdr
            .sender()
            .map(std::string::ToString::to_string)
            .unwrap_or_default();
        let (uid, pid) = caller_creds(conn, &sender).await;

        let (tx, rx) = tokio::net::unix::pipe::pipe().map_err(|e| failed(&e))?;
        let client_end = tx.into_blocking_fd().map_err(|e| failed(&e))?;

        let id = lock(&self.shared.state).add_inhibitor(Inhibitor {
            id: 0,
            what: what.into(),
            who: who.into(),
            why: why.into(),
            mode: mode.into(),
            uid,
            pid,
            sender,
            taken_at: SystemTime::now(),
        });
        self.shared.bump();
        let task = tokio::spawn(release_on_close(self.shared.clone(), rx, id));
        self.shared.add_task(task.abort_handle());
        Ok(zbus::OwnedFd::from(client_end))
    }
}

/// `org.freedesktop.DBus.Error.Failed` with `e`'s text.
fn failed(e: &io::Error) -> LogindError {
    LogindError::new("org.freedesktop.DBus.Error.Failed", &e.to_string())
}

/// Check `Inhibit`'s `what` and `mode` as logind does; returns the parts of `what`.
fn check_inhibit_args<'a>(what: &'a str, mode: &str) -> Result<Vec<&'a str>, LogindError> {
    if !matches!(mode, "block" | "delay" | "block-weak") {
        return Err(LogindError::new(
            ERR_INVALID_ARGS,
            "Invalid mode specification",
        ));
    }
    let whats: Vec<&str> = what.split(':').collect();
    if what.is_empty() || whats.iter().any(|w| !KNOWN_WHAT.contains(w)) {
        return Err(LogindError::new(
            ERR_INVALID_ARGS,
            "Invalid what specification",
        ));
    }
    if mode == "delay" && whats.iter().any(|w| !matches!(*w, "shutdown" | "sleep")) {
        return Err(LogindError::new(
            ERR_INVALID_ARGS,
            "Delay inhibitors only supported for shutdown and sleep",
        ));
    }
    Ok(whats)
}

/// Like logind's FIFO: the inhibitor `id` lives until every copy of the client's end of `rx` is
/// closed, which shows up here as EOF; then it is removed.
async fn release_on_close(shared: Arc<Shared>, rx: tokio::net::unix::pipe::Receiver, id: u64) {
    let mut buf = [0u8; 256];
    loop {
        if rx.readable().await.is_err() {
            break;
        }
        match rx.try_read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => break,
        }
    }
    lock(&shared.state).inhibitors.retain(|i| i.id != id);
    shared.bump();
}

/// Like logind: a block inhibitor on shutdown held by another user blocks the caller; one the
/// caller's own user holds does not (logind ignores the caller's uid there).
fn blocked_for(st: &State, caller_uid: u32) -> bool {
    st.inhibitors
        .iter()
        .any(|i| i.blocks_shutdown() && i.uid != caller_uid)
}

async fn caller_creds(conn: &Connection, sender: &str) -> (u32, u32) {
    let Ok(proxy) = zbus::fdo::DBusProxy::new(conn).await else {
        return (0, 0);
    };
    let Ok(name) = zbus::names::BusName::try_from(sender) else {
        return (0, 0);
    };
    let uid = proxy
        .get_connection_unix_user(name.clone())
        .await
        .unwrap_or(0);
    let pid = proxy
        .get_connection_unix_process_id(name)
        .await
        .unwrap_or(0);
    (uid, pid)
}

// ---------------------------------------------------------------------------------------------
// Handle

/// A fake logind serving on a bus. Knobs are plain setters; recorded data is read with the
/// getters or awaited with the `wait_for_*` methods.
///
/// Dropping the handle disconnects from the bus (releasing the name).
pub struct FakeLogind {
    shared: Arc<Shared>,
    address: String,
    conn: Mutex<Option<Connection>>,
    rt: tokio::runtime::Handle,
    thread: Option<(
        std::thread::JoinHandle<()>,
        tokio::sync::oneshot::Sender<()>,
    )>,
}

async fn connect_and_serve(address: String, shared: Arc<Shared>) -> zbus::Result<Connection> {
    let conn = zbus::connection::Builder::address(address.as_str())
        .serve_at(LOGIN1_PATH, Manager { shared })
        .build()
        .await?;
    // Requested here rather than through the builder, which does not fail when the name is
    // already owned by someone else (e.g. a real logind).
    let reply = conn
        .request_name_with_flags(LOGIN1_NAME, zbus::fdo::RequestNameFlags::DO_NOT_QUEUE)
        .await?;
    if reply != zbus::fdo::RequestNameReply::PrimaryOwner {
        let _ = conn.close().await;
        return Err(zbus::Error::NameTaken);
    }
    Ok(conn)
}

/// A "process" that owns `org.freedesktop.login1` and never reads its socket again: a hung
/// logind (a stopped or wedged process). The bus accepts calls for it and queues them; callers
/// get no answer until their own timeout. Dropping it closes the socket, and the bus releases
/// the name. Stop the [`FakeLogind`] first, or the name is taken.
pub struct HungLogind {
    _sock: std::os::unix::net::UnixStream,
}

impl HungLogind {
    /// Connects to the bus at `address` (`unix:path=...`) with a hand-rolled D-Bus handshake,
    /// says Hello, takes the name, and then stops reading.
    pub fn take_name(address: &str) -> io::Result<HungLogind> {
        use std::io::{Read, Write};
        let path = address
            .split(',')
            .find_map(|kv| kv.strip_prefix("unix:path="))
            .ok_or_else(|| io::Error::other(format!("not a unix:path= address: {address}")))?;
        let mut sock = std::os::unix::net::UnixStream::connect(path)?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))?;
        let uid: String = crate::effective_uid()
            .to_string()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        sock.write_all(format!("\0AUTH EXTERNAL {uid}\r\n").as_bytes())?;
        let mut buf = [0u8; 512];
        let n = sock.read(&mut buf)?;
        if !buf[..n].starts_with(b"OK ") {
            return Err(io::Error::other(format!(
                "bus refused the handshake: {}",
                String::from_utf8_lossy(&buf[..n])
            )));
        }
        sock.write_all(b"BEGIN\r\n")?;
        let call = |member: &str, body: Option<(&str, u32)>| -> io::Result<Vec<u8>> {
            let b = Message::method_call("/org/freedesktop/DBus", member)
                .destination("org.freedesktop.DBus")
                .interface("org.freedesktop.DBus");
            let m = match body {
                Some(args) => b.build(&args),
                None => b.build(&()),
            }
            .map_err(io::Error::other)?;
            Ok(m.data().to_vec())
        };
        sock.write_all(&call("Hello", None)?)?;
        // DBUS_NAME_FLAG_DO_NOT_QUEUE (4): fail rather than wait behind a serving fake.
        sock.write_all(&call("RequestName", Some((LOGIN1_NAME, 4)))?)?;
        // Wait until the bus says the name is ours (NameAcquired names it in its body).
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !seen
            .windows(LOGIN1_NAME.len())
            .any(|w| w == LOGIN1_NAME.as_bytes())
        {
            if std::time::Instant::now() > deadline {
                return Err(io::Error::other("the bus never confirmed the name"));
            }
            let n = sock.read(&mut buf)?;
            if n == 0 {
                return Err(io::Error::other("the bus closed the connection"));
            }
            seen.extend_from_slice(&buf[..n]);
        }
        Ok(HungLogind { _sock: sock })
    }
}

impl FakeLogind {
    /// Connect to the bus at `address`, own `org.freedesktop.login1` and serve the manager, on
    /// the current tokio runtime (which must keep running for the fake to answer).
    pub async fn serve(address: &str) -> zbus::Result<FakeLogind> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: watch::Sender::new(0),
        });
        let conn = connect_and_serve(address.to_string(), shared.clone()).await?;
        Ok(FakeLogind {
            shared,
            address: address.to_string(),
            conn: Mutex::new(Some(conn)),
            rt: tokio::runtime::Handle::current(),
            thread: None,
        })
    }

    /// Like [`FakeLogind::serve`], but on a dedicated thread with its own runtime, for tests
    /// that block their thread or use another runtime.
    pub fn serve_blocking(address: &str) -> zbus::Result<FakeLogind> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let address = address.to_string();
        let thread = std::thread::Builder::new()
            .name("nthd-fake-logind".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(zbus::Error::from(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match FakeLogind::serve(&address).await {
                        Ok(f) => {
                            let _ = tx.send(Ok(f));
                            let _ = stop_rx.await;
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(zbus::Error::from)?;
        match rx.recv() {
            Ok(Ok(mut f)) => {
                f.thread = Some((thread, stop_tx));
                Ok(f)
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(zbus::Error::Failure("fake logind thread died".into()))
            }
        }
    }

    /// The bus address this fake serves on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether the fake is currently on the bus.
    pub fn is_serving(&self) -> bool {
        lock(&self.conn).is_some()
    }

    /// Leave the bus (releasing `org.freedesktop.login1`), as if logind stopped. Held
    /// inhibitors are forgotten and a pending shutdown is dropped; knobs and the call history
    /// are kept. Use [`FakeLogind::start`] to come back.
    pub async fn stop(&self) -> zbus::Result<()> {
        let conn = lock(&self.conn).take();
        {
            let mut st = lock(&self.shared.state);
            for (_, t) in st.tasks.drain() {
                t.abort();
            }
            st.inhibitors.clear();
            st.pending = None;
            st.preparing = false;
        }
        self.shared.bump();
        if let Some(conn) = conn {
            self.rt
                .spawn(async move {
                    let _ = conn.release_name(LOGIN1_NAME).await;
                    conn.close().await
                })
                .await
                .map_err(|e| zbus::Error::Failure(e.to_string()))??;
        }
        Ok(())
    }

    /// Come back on the bus after [`FakeLogind::stop`] (a logind restart). No-op if serving.
    pub async fn start(&self) -> zbus::Result<()> {
        if self.is_serving() {
            return Ok(());
        }
        let conn = self
            .rt
            .spawn(connect_and_serve(self.address.clone(), self.shared.clone()))
            .await
            .map_err(|e| zbus::Error::Failure(e.to_string()))??;
        *lock(&self.conn) = Some(conn);
        Ok(())
    }

    /// `stop` then `start`.
    pub async fn restart(&self) -> zbus::Result<()> {
        self.stop().await?;
        self.start().await
    }

    /// Emit `PrepareForShutdown(false)` and forget the pending shutdown, as logind does when a
    /// scheduled/delayed shutdown is cancelled.
    pub async fn cancel_shutdown(&self) -> zbus::Result<()> {
        {
            let mut st = lock(&self.shared.state);
            st.pending = None;
            st.preparing = false;
        }
        self.shared.bump();
        self.emit_prepare_for_shutdown(false).await
    }

    /// Emit `PrepareForShutdown(start)` without any other state change.
    pub async fn emit_prepare_for_shutdown(&self, start: bool) -> zbus::Result<()> {
        let Some(conn) = lock(&self.conn).clone() else {
            return Err(zbus::Error::Failure("fake logind is stopped".into()));
        };
        self.rt
            .spawn(async move {
                conn.emit_signal(
                    None::<&str>,
                    LOGIN1_PATH,
                    LOGIN1_MANAGER,
                    "PrepareForShutdown",
                    &(start,),
                )
                .await
            })
            .await
            .map_err(|e| zbus::Error::Failure(e.to_string()))?
    }

    // --- knobs -------------------------------------------------------------------------------

    /// What `CanPowerOff` answers (`"yes"`, `"no"`, `"challenge"`, `"na"`).
    pub fn set_can_power_off(&self, v: &str) {
        lock(&self.shared.state).can_power_off = v.into();
    }

    /// Holds an inhibitor on the fake's side, as if process `pid` of `uid` had taken it, until
    /// [`FakeLogind::release_inhibitor`]. Unlike one taken over the bus, its lifetime does not
    /// hang on a file descriptor that zbus buffers or a concurrently spawned child inherits.
    pub fn hold_inhibitor(
        &self,
        what: &str,
        who: &str,
        why: &str,
        mode: &str,
        uid: u32,
        pid: u32,
    ) -> u64 {
        let id = lock(&self.shared.state).add_inhibitor(Inhibitor {
            id: 0,
            what: what.into(),
            who: who.into(),
            why: why.into(),
            mode: mode.into(),
            uid,
            pid,
            sender: String::new(),
            taken_at: SystemTime::now(),
        });
        self.shared.bump();
        id
    }

    /// Releases an inhibitor held with [`FakeLogind::hold_inhibitor`].
    pub fn release_inhibitor(&self, id: u64) {
        lock(&self.shared.state).inhibitors.retain(|i| i.id != id);
        self.shared.bump();
    }

    /// The systemd version whose block-inhibitor refusal is emulated (default 252).
    pub fn set_systemd_version(&self, v: u32) {
        lock(&self.shared.state).systemd = v;
    }

    /// What `CanReboot` answers.
    pub fn set_can_reboot(&self, v: &str) {
        lock(&self.shared.state).can_reboot = v.into();
    }

    /// Make `PowerOff` fail with this D-Bus error (name, message), or succeed again with
    /// `None`. Panics on an invalid error name.
    pub fn set_power_off_error(&self, e: Option<(&str, &str)>) {
        lock(&self.shared.state).power_off_error = e.map(|(n, m)| LogindError::new(n, m));
    }

    /// Make `Reboot` fail with this D-Bus error, or succeed again with `None`.
    pub fn set_reboot_error(&self, e: Option<(&str, &str)>) {
        lock(&self.shared.state).reboot_error = e.map(|(n, m)| LogindError::new(n, m));
    }

    /// Make `Inhibit` fail with this D-Bus error, or behave again with `None`.
    pub fn set_inhibit_error(&self, e: Option<(&str, &str)>) {
        lock(&self.shared.state).inhibit_error = e.map(|(n, m)| LogindError::new(n, m));
    }

    /// `InhibitDelayMaxUSec` (default 5 s, logind's default), also the longest a shutdown waits
    /// for delay inhibitors. Applies to shutdowns requested after the call.
    pub fn set_inhibit_delay_max(&self, d: Duration) {
        lock(&self.shared.state).inhibit_delay_max = d;
    }

    /// The `PreparingForShutdown` property (no signal is emitted).
    pub fn set_preparing(&self, v: bool) {
        lock(&self.shared.state).preparing = v;
    }

    /// The `HandlePowerKey` property.
    pub fn set_handle_power_key(&self, v: &str) {
        lock(&self.shared.state).handle_power_key = v.into();
    }

    /// The `PowerKeyIgnoreInhibited` property.
    pub fn set_power_key_ignore_inhibited(&self, v: bool) {
        lock(&self.shared.state).power_key_ignore_inhibited = v;
    }

    /// The `ScheduledShutdown` property (`("", 0)` means none).
    pub fn set_scheduled_shutdown(&self, kind: &str, usec: u64) {
        lock(&self.shared.state).scheduled_shutdown = (kind.into(), usec);
    }

    // --- observations ------------------------------------------------------------------------

    /// Every recorded method call, oldest first.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.shared.state).calls.clone()
    }

    /// Recorded calls of one method.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        lock(&self.shared.state)
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// `PowerOff` calls received (failed ones included; see [`Call::error`]).
    pub fn power_off_count(&self) -> usize {
        self.calls_of("PowerOff").len()
    }

    /// `Reboot` calls received (failed ones included).
    pub fn reboot_count(&self) -> usize {
        self.calls_of("Reboot").len()
    }

    /// Currently held inhibitors.
    pub fn inhibitors(&self) -> Vec<Inhibitor> {
        lock(&self.shared.state).inhibitors.clone()
    }

    /// Shutdowns that got past their delay.
    pub fn shutdowns(&self) -> Vec<Shutdown> {
        lock(&self.shared.state).shutdowns.clone()
    }

    /// Whether `PreparingForShutdown` is currently true.
    pub fn preparing(&self) -> bool {
        lock(&self.shared.state).preparing
    }

    /// Wait until at least `n` calls (any method) were recorded. False on timeout.
    pub async fn wait_for_calls(&self, n: usize, timeout: Duration) -> bool {
        self.shared
            .wait_until(timeout, |st| (st.calls.len() >= n).then_some(()))
            .await
            .is_some()
    }

    /// Wait until at least `n` calls of `method` were recorded. False on timeout.
    pub async fn wait_for_method(&self, method: &str, n: usize, timeout: Duration) -> bool {
        self.shared
            .wait_until(timeout, |st| {
                (st.calls.iter().filter(|c| c.method == method).count() >= n).then_some(())
            })
            .await
            .is_some()
    }

    /// Wait until exactly `n` inhibitors are held. False on timeout.
    pub async fn wait_for_inhibitors(&self, n: usize, timeout: Duration) -> bool {
        self.shared
            .wait_until(timeout, |st| (st.inhibitors.len() == n).then_some(()))
            .await
            .is_some()
    }

    /// Wait for the first shutdown to get past its delay.
    pub async fn wait_for_shutdown(&self, timeout: Duration) -> Option<Shutdown> {
        self.shared
            .wait_until(timeout, |st| st.shutdowns.first().cloned())
            .await
    }

    /// A receiver that changes whenever calls, inhibitors or shutdowns change (for streaming
    /// them out, as `nthd-fake-logind` does).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.shared.changed.subscribe()
    }
}

impl Drop for FakeLogind {
    fn drop(&mut self) {
        for (_, t) in lock(&self.shared.state).tasks.drain() {
            t.abort();
        }
        let conn = lock(&self.conn).take();
        if let Some(conn) = conn {
            // Close the socket so the bus drops our name promptly. If that runtime is gone (or
            // about to be), dropping the connection with it closes the socket as well.
            self.rt.spawn(async move {
                let _ = conn.close().await;
            });
        }
        if let Some((thread, stop)) = self.thread.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FakeLogind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLogind")
            .field("address", &self.address)
            .field("serving", &self.is_serving())
            .finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Client side

/// Client proxy for the parts of `org.freedesktop.login1.Manager` this crate fakes (used by
/// `nthd-fake-kubelet` and by tests). Properties are not cached.
#[zbus::proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1",
    async_name = "Login1ManagerProxy"
)]
pub trait Login1Manager {
    /// `PowerOff(b)`.
    fn power_off(&self, interactive: bool) -> zbus::Result<()>;
    /// `Reboot(b)`.
    fn reboot(&self, interactive: bool) -> zbus::Result<()>;
    /// `CanPowerOff() -> s`.
    fn can_power_off(&self) -> zbus::Result<String>;
    /// `CanReboot() -> s`.
    fn can_reboot(&self) -> zbus::Result<String>;
    /// `ListInhibitors() -> a(ssssuu)`: what, who, why, mode, uid, pid.
    fn list_inhibitors(&self) -> zbus::Result<Vec<(String, String, String, String, u32, u32)>>;
    /// `Inhibit(what, who, why, mode) -> h`.
    fn inhibit(&self, what: &str, who: &str, why: &str, mode: &str) -> zbus::Result<zbus::OwnedFd>;
    /// `PrepareForShutdown(b)`.
    #[zbus(signal)]
    fn prepare_for_shutdown(&self, start: bool) -> zbus::Result<()>;
    /// `InhibitDelayMaxUSec`.
    #[zbus(property(emits_changed_signal = "false"), name = "InhibitDelayMaxUSec")]
    fn inhibit_delay_max_usec(&self) -> zbus::Result<u64>;
    /// `PreparingForShutdown`.
    #[zbus(property(emits_changed_signal = "false"))]
    fn preparing_for_shutdown(&self) -> zbus::Result<bool>;
    /// `HandlePowerKey`.
    #[zbus(property(emits_changed_signal = "false"))]
    fn handle_power_key(&self) -> zbus::Result<String>;
    /// `PowerKeyIgnoreInhibited`.
    #[zbus(property(emits_changed_signal = "false"))]
    fn power_key_ignore_inhibited(&self) -> zbus::Result<bool>;
    /// `ScheduledShutdown`.
    #[zbus(property(emits_changed_signal = "false"))]
    fn scheduled_shutdown(&self) -> zbus::Result<(String, u64)>;
}

/// A [`Login1ManagerProxy`] without property caching.
pub async fn login1_proxy(conn: &Connection) -> zbus::Result<Login1ManagerProxy<'static>> {
    Login1ManagerProxy::builder(conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
}
