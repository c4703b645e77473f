//! A fake `org.freedesktop.systemd1` (PID 1's manager) on a private bus: its `Version`, its
//! `SystemState` (`running`, or `stopping` once a shutdown transaction is queued) and the
//! `ActiveState` of one unit, `nthd.service`. Each is a knob.

use std::sync::{Arc, Mutex};

use crate::lock;

const PATH: &str = "/org/freedesktop/systemd1";
const NTHD_UNIT_PATH: &str = "/org/freedesktop/systemd1/unit/nthd_2eservice";

#[derive(Clone)]
struct Knobs {
    version: Arc<Mutex<String>>,
    system_state: Arc<Mutex<String>>,
    nthd_state: Arc<Mutex<String>>,
}

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
}

struct Unit(Arc<Mutex<String>>);

#[zbus::interface(name = "org.freedesktop.systemd1.Unit")]
impl Unit {
    #[zbus(property)]
    fn active_state(&self) -> String {
        lock(&self.0).clone()
    }
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
        };
        let conn = zbus::connection::Builder::address(address)
            .name("org.freedesktop.systemd1")
            .serve_at(PATH, Manager(knobs.clone()))
            .serve_at(NTHD_UNIT_PATH, Unit(knobs.nthd_state.clone()))
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
}
