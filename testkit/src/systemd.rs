//! A fake `org.freedesktop.systemd1` (PID 1's manager) on a private bus: its `Version`, its
//! `SystemState` (`running`, or `stopping` once a shutdown transaction is queued), the
//! `ActiveState` and the IP access lists (`IPAddressDeny`, `IPAddressAllow`) of one unit,
//! `nthd.service`, and the unit `GetUnitByPID` answers for any process (`nthd.service`, an ssh
//! session's scope, or none). Each is a knob. It also takes `StartTransientUnit` and
//! `StopUnit` calls (the kubelet stand-in's pods), answers each with a job and keeps them, in
//! order, for the test to read ([`FakeSystemd::unit_calls`]); it starts and stops nothing.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::lock;

const PATH: &str = "/org/freedesktop/systemd1";
const NTHD_UNIT_PATH: &str = "/org/freedesktop/systemd1/unit/nthd_2eservice";
const SCOPE: &str = "session-1.scope";
const SCOPE_PATH: &str = "/org/freedesktop/systemd1/unit/session_2d1_2escope";

/// One entry of `IPAddressDeny` / `IPAddressAllow`: family, address bytes, prefix length.
type IpEntry = (i32, Vec<u8>, u32);

/// A unit's IP access lists, as PID 1 exports them.
type IpLists = Arc<Mutex<(Vec<IpEntry>, Vec<IpEntry>)>>;

#[derive(Clone)]
struct Knobs {
    version: Arc<Mutex<String>>,
    system_state: Arc<Mutex<String>>,
    nthd_state: Arc<Mutex<String>>,
    nthd_ip: IpLists,
    own_unit: Arc<Mutex<Option<String>>>,
    unit_calls: Arc<Mutex<Vec<UnitCall>>>,
}

/// A `StartTransientUnit` or `StopUnit` call the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitCall {
    /// `StartTransientUnit` or `StopUnit`.
    pub method: &'static str,
    /// The unit's name.
    pub unit: String,
    /// The job mode.
    pub mode: String,
    /// For `StartTransientUnit`: the `Slice` property, if given.
    pub slice: Option<String>,
    /// For `StartTransientUnit`: the argv of the first `ExecStart`, if given.
    pub exec: Vec<String>,
    /// Milliseconds since the Unix epoch at the call.
    pub t_ms: u64,
}

/// `a(sasb)`, the `ExecStart` of a transient service.
type ExecStart = Vec<(String, Vec<String>, bool)>;

struct Manager(Knobs);

#[zbus::interface(name = "org.freedesktop.systemd1.Manager")]
impl Manager {
    #[zbus(property)]
    fn version(&self) -> String {
        lock(&self.0.version).clone()
    }

    #[zbus(property)]
    fn system_state(&self) -> String {
        lock(&self.0.system_state).clone()
    }

    fn get_unit(&self, name: &str) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        if name != "nthd.service" {
            return Err(zbus::fdo::Error::Failed(format!("no such unit {name}")));
        }
        zbus::ObjectPath::try_from(NTHD_UNIT_PATH)
            .map(Into::into)
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }

    fn load_unit(&self, name: &str) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        self.get_unit(name)
    }

    fn start_transient_unit(
        &self,
        name: String,
        mode: String,
        properties: Vec<(String, zbus::OwnedVariant)>,
        _aux: Vec<(String, Vec<(String, zbus::OwnedVariant)>)>,
    ) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        let prop = |key: &str| properties.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let slice = prop("Slice").and_then(|v| String::try_from(v.clone()).ok());
        let exec = prop("ExecStart")
            .and_then(|v| ExecStart::try_from(v.clone()).ok())
            .and_then(|e| e.into_iter().next())
            .map(|(_, argv, _)| argv)
            .unwrap_or_default();
        self.unit_call("StartTransientUnit", name, mode, slice, exec)
    }

    fn stop_unit(&self, name: String, mode: String) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        self.unit_call("StopUnit", name, mode, None, Vec::new())
    }

    #[zbus(name = "GetUnitByPID")]
    fn get_unit_by_pid(&self, _pid: u32) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        let path = match lock(&self.0.own_unit).as_deref() {
            Some("nthd.service") => NTHD_UNIT_PATH,
            Some(_) => SCOPE_PATH,
            None => return Err(zbus::fdo::Error::Failed("no unit for this PID".into())),
        };
        zbus::ObjectPath::try_from(path)
            .map(Into::into)
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }
}

impl Manager {
    /// Keep a unit call and answer it with the next job's path.
    fn unit_call(
        &self,
        method: &'static str,
        unit: String,
        mode: String,
        slice: Option<String>,
        exec: Vec<String>,
    ) -> zbus::fdo::Result<zbus::OwnedObjectPath> {
        let mut calls = lock(&self.0.unit_calls);
        calls.push(UnitCall {
            method,
            unit,
            mode,
            slice,
            exec,
            t_ms: crate::now_ms(),
        });
        zbus::ObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{}", calls.len()))
            .map(Into::into)
            .map_err(|e| zbus::fdo::Error::Failed(e.to_string()))
    }
}

struct Unit {
    id: &'static str,
    state: Arc<Mutex<String>>,
}

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl Unit {
    #[zbus(property)]
    fn id(&self) -> String {
        self.id.to_string()
    }

    #[zbus(property)]
    fn active_state(&self) -> String {
        lock(&self.state).clone()
    }
}

/// The resource-control properties of a service (the IP access lists only).
struct Service(IpLists);

#[zbus::interface(name = "org.freedesktop.systemd1.Service")]
impl Service {
    #[zbus(property, name = "IPAddressDeny")]
    fn ip_address_deny(&self) -> Vec<IpEntry> {
        lock(&self.0).0.clone()
    }

    #[zbus(property, name = "IPAddressAllow")]
    fn ip_address_allow(&self) -> Vec<IpEntry> {
        lock(&self.0).1.clone()
    }
}

/// The same for a scope (an ssh session's: no lists).
struct Scope(IpLists);

#[zbus::interface(name = "org.freedesktop.systemd1.Scope")]
impl Scope {
    #[zbus(property, name = "IPAddressDeny")]
    fn ip_address_deny(&self) -> Vec<IpEntry> {
        lock(&self.0).0.clone()
    }

    #[zbus(property, name = "IPAddressAllow")]
    fn ip_address_allow(&self) -> Vec<IpEntry> {
        lock(&self.0).1.clone()
    }
}

/// `ADDR[/PREFIX]` as an `a(iayu)` entry. Panics on anything else (test input).
fn ip_entry(s: &str) -> IpEntry {
    let (a, p) = s.split_once('/').unwrap_or((s, ""));
    let addr: IpAddr = a.parse().expect("an IP address");
    let (family, bytes, full) = match addr {
        IpAddr::V4(v) => (libc::AF_INET, v.octets().to_vec(), 32),
        IpAddr::V6(v) => (libc::AF_INET6, v.octets().to_vec(), 128),
    };
    let prefix = if p.is_empty() {
        full
    } else {
        p.parse().expect("a prefix length")
    };
    (family, bytes, prefix)
}

/// The fake; it leaves the bus when dropped.
pub struct FakeSystemd {
    knobs: Knobs,
    _conn: zbus::Connection,
}

impl FakeSystemd {
    /// Owns `org.freedesktop.systemd1` on the bus at `address`: version `252.38-1~deb12u1`,
    /// system state `running`, `nthd.service` `active`.
    pub async fn serve(address: &str) -> zbus::Result<FakeSystemd> {
        let knobs = Knobs {
            version: Arc::new(Mutex::new("252.38-1~deb12u1".into())),
            system_state: Arc::new(Mutex::new("running".into())),
            nthd_state: Arc::new(Mutex::new("active".into())),
            nthd_ip: Arc::default(),
            own_unit: Arc::default(),
            unit_calls: Arc::default(),
        };
        let nthd = Unit {
            id: "nthd.service",
            state: knobs.nthd_state.clone(),
        };
        let scope = Unit {
            id: SCOPE,
            state: Arc::new(Mutex::new("active".into())),
        };
        let conn = zbus::connection::Builder::address(address)
            .name("org.freedesktop.systemd1")
            .serve_at(PATH, Manager(knobs.clone()))
            .serve_at(NTHD_UNIT_PATH, nthd)
            .serve_at(NTHD_UNIT_PATH, Service(knobs.nthd_ip.clone()))
            .serve_at(SCOPE_PATH, scope)
            .serve_at(SCOPE_PATH, Scope(Arc::default()))
            .build()
            .await?;
        Ok(FakeSystemd { knobs, _conn: conn })
    }

    /// What `Version` answers.
    pub fn set_version(&self, v: &str) {
        *lock(&self.knobs.version) = v.into();
    }

    /// What `SystemState` answers (`running`, `stopping`, ...).
    pub fn set_system_state(&self, v: &str) {
        *lock(&self.knobs.system_state) = v.into();
    }

    /// What `nthd.service`'s `ActiveState` answers.
    pub fn set_nthd_state(&self, v: &str) {
        *lock(&self.knobs.nthd_state) = v.into();
    }

    /// `nthd.service`'s `IPAddressDeny` and `IPAddressAllow`, each entry `ADDR[/PREFIX]`
    /// (`0.0.0.0/0` and `::/0` for `any`). Empty lists by default.
    pub fn set_nthd_ip_policy(&self, deny: &[&str], allow: &[&str]) {
        let list = |l: &[&str]| l.iter().map(|s| ip_entry(s)).collect();
        *lock(&self.knobs.nthd_ip) = (list(deny), list(allow));
    }

    /// The unit `GetUnitByPID` answers, for any process: `nthd.service`, any other name for an
    /// ssh session's scope without IP lists (`session-1.scope`), or `None` (an error, the
    /// default).
    pub fn set_own_unit(&self, unit: Option<&str>) {
        *lock(&self.knobs.own_unit) = unit.map(str::to_string);
    }

    /// The `StartTransientUnit` and `StopUnit` calls so far, in order.
    pub fn unit_calls(&self) -> Vec<UnitCall> {
        lock(&self.knobs.unit_calls).clone()
    }
}
