//! The stand-in's pods, laid out as kubelet with the systemd cgroup driver lays them out.
//!
//! Each pod gets a log directory, `<log root>/<namespace>_<name>_<uid>/app/0.log`, and one
//! long-running process (`sleep infinity`) in a transient service, `fake-pod-<uid>.service`,
//! placed by systemd's D-Bus API (`StartTransientUnit`) in the pod's slice:
//! `kubepods-<qos>-pod<uid with _ for ->.slice`, or `kubepods-pod<uid_>.slice` for a guaranteed
//! pod. systemd derives the parents from the slice's name, so the process runs in
//! `/sys/fs/cgroup/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice/`, as a
//! real pod's containers do.
//!
//! Pods belong to priority groups, each with a drain period (kubelet's
//! `shutdownGracePeriodByPodPriority`): on `PrepareForShutdown(true)` the groups stop one after
//! the other, in ascending order, each when its period ends (`StopUnit` of the pod slices, which
//! stops the processes in them). A group whose period had not ended when the shutdown went ahead
//! is still running: that is what nthd's drain report must name.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde_json::{json, Value};
use zbus::Variant as V;

use super::Recorder;

/// A pod's QoS class, which decides its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    /// Directly under `kubepods.slice`.
    Guaranteed,
    /// Under `kubepods-burstable.slice`.
    Burstable,
    /// Under `kubepods-besteffort.slice`.
    BestEffort,
}

impl Qos {
    fn as_str(self) -> &'static str {
        match self {
            Qos::Guaranteed => "guaranteed",
            Qos::Burstable => "burstable",
            Qos::BestEffort => "besteffort",
        }
    }
}

/// One pod of the stand-in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID, with dashes.
    pub uid: String,
    /// Its QoS class.
    pub qos: Qos,
    /// Its priority group (see [`Group`]).
    pub group: u32,
}

impl FromStr for Pod {
    type Err = String;

    /// `NAMESPACE/NAME:QOS[:GROUP[:UID]]`: QOS is `guaranteed`, `burstable` or `besteffort`;
    /// GROUP defaults to 0; UID defaults to one derived from NAMESPACE/NAME.
    fn from_str(s: &str) -> Result<Pod, String> {
        let bad = |why: &str| format!("pod {s:?}: {why} (NAMESPACE/NAME:QOS[:GROUP[:UID]])");
        let mut parts = s.split(':');
        let (namespace, name) = parts
            .next()
            .and_then(|p| p.split_once('/'))
            .filter(|(ns, n)| dns(ns, 63) && dns(n, 253))
            .ok_or_else(|| bad("NAMESPACE/NAME must be lowercase DNS names"))?;
        let qos = match parts.next() {
            Some("guaranteed") => Qos::Guaranteed,
            Some("burstable") => Qos::Burstable,
            Some("besteffort") => Qos::BestEffort,
            _ => return Err(bad("QOS must be guaranteed, burstable or besteffort")),
        };
        let group = match parts.next() {
            None => 0,
            Some(g) => g.parse().map_err(|_| bad("GROUP must be a number"))?,
        };
        let uid = match parts.next() {
            None => derived_uid(namespace, name),
            Some(u) if is_uid(u) => u.to_string(),
            Some(_) => return Err(bad("UID must be hex digits and dashes")),
        };
        if parts.next().is_some() {
            return Err(bad("too many fields"));
        }
        let (namespace, name) = (namespace.to_string(), name.to_string());
        Ok(Pod {
            namespace,
            name,
            uid,
            qos,
            group,
        })
    }
}

/// A DNS label or subdomain of at most `max` characters, as Kubernetes names are.
fn dns(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

fn is_uid(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// A UUID-shaped UID that depends only on `namespace/name` (two FNV-1a hashes).
fn derived_uid(namespace: &str, name: &str) -> String {
    let fnv = |seed: u64| {
        format!("{namespace}/{name}").bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let h = format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x8422_2325_cbf2_9ce4)
    );
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

impl Pod {
    /// `namespace/name`, as nthd reports it.
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The pod's slice, as kubelet's systemd cgroup driver names it.
    pub fn slice(&self) -> String {
        let uid = self.uid.replace('-', "_");
        match self.qos {
            Qos::Guaranteed => format!("kubepods-pod{uid}.slice"),
            q => format!("kubepods-{}-pod{uid}.slice", q.as_str()),
        }
    }

    /// The transient service that holds the pod's process.
    pub fn unit(&self) -> String {
        format!("fake-pod-{}.service", self.uid)
    }

    /// The pod's cgroup, relative to the cgroup mount.
    pub fn cgroup(&self) -> String {
        match self.qos {
            Qos::Guaranteed => format!("kubepods.slice/{}", self.slice()),
            q => format!(
                "kubepods.slice/kubepods-{}.slice/{}",
                q.as_str(),
                self.slice()
            ),
        }
    }

    /// The pod's log directory, relative to the log root.
    pub fn log_dir(&self) -> String {
        format!("{}_{}_{}", self.namespace, self.name, self.uid)
    }
}

/// A priority group: its pods stop when its period ends, after the groups before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// The group's number, as in `--pod`'s GROUP.
    pub id: u32,
    /// How long its pods take to stop.
    pub period: Duration,
}

impl FromStr for Group {
    type Err = String;

    /// `GROUP:SECS`, SECS a non-negative number (fractions allowed).
    fn from_str(s: &str) -> Result<Group, String> {
        let bad = || format!("group {s:?}: expected GROUP:SECS, e.g. 1:5 or 2:0.5");
        let (id, secs) = s.split_once(':').ok_or_else(bad)?;
        let id = id.parse().map_err(|_| bad())?;
        let secs: f64 = secs.parse().map_err(|_| bad())?;
        if !(secs >= 0.0 && secs.is_finite()) {
            return Err(bad());
        }
        Ok(Group {
            id,
            period: Duration::from_secs_f64(secs),
        })
    }
}

/// The groups in the order they stop (ascending), with their pods; an error naming the first
/// pod whose group has no `--group`, or a group given twice. With no groups at all every pod
/// is in one group of `drain`.
pub fn plan(
    pods: &[Pod],
    groups: &[Group],
    drain: Duration,
) -> Result<Vec<(Group, Vec<Pod>)>, String> {
    let mut groups = groups.to_vec();
    if groups.is_empty() {
        groups = pods
            .iter()
            .map(|p| Group {
                id: p.group,
                period: drain,
            })
            .take(1)
            .collect();
    }
    groups.sort_by_key(|g| g.id);
    if let Some(w) = groups.windows(2).find(|w| w[0].id == w[1].id) {
        return Err(format!("group {} is given twice", w[0].id));
    }
    if let Some(p) = pods
        .iter()
        .find(|p| !groups.iter().any(|g| g.id == p.group))
    {
        return Err(format!(
            "pod {} is in group {}, which has no --group GROUP:SECS",
            p.full_name(),
            p.group
        ));
    }
    Ok(groups
        .into_iter()
        .map(|g| {
            (
                g,
                pods.iter().filter(|p| p.group == g.id).cloned().collect(),
            )
        })
        .collect())
}

/// The part of systemd's manager API the stand-in uses.
#[zbus::proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1"
)]
pub trait SystemdManager {
    /// `StartTransientUnit(name, mode, properties, aux)`.
    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, V<'_>)],
        aux: &[(&str, &[(&str, V<'_>)])],
    ) -> zbus::Result<zbus::OwnedObjectPath>;

    /// `StopUnit(name, mode)`.
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<zbus::OwnedObjectPath>;
}

/// The pods of a running stand-in and the means to stop them.
pub struct Pods {
    proxy: SystemdManagerProxy<'static>,
    plan: Vec<(Group, Vec<Pod>)>,
}

/// How long [`Pods::start`] waits for each pod's cgroup to be populated.
const START_WAIT: Duration = Duration::from_secs(5);

impl Pods {
    /// Lay out every pod of `plan` (log directory, process in its slice), wait until its cgroup
    /// under `cgroup_root` is populated (at most [`START_WAIT`] in all), and record `pods`.
    pub async fn start(
        conn: &zbus::Connection,
        plan: Vec<(Group, Vec<Pod>)>,
        roots: (&Path, &Path),
        rec: &mut Recorder,
    ) -> Result<Pods, String> {
        let (cgroup_root, log_root) = roots;
        let proxy = SystemdManagerProxy::new(conn)
            .await
            .map_err(|e| format!("cannot create a systemd manager proxy: {e}"))?;
        let pods: Vec<&Pod> = plan.iter().flat_map(|(_, p)| p).collect();
        for pod in &pods {
            make_log_dir(log_root, pod)?;
            start_pod(&proxy, pod).await?;
        }
        let deadline = tokio::time::Instant::now() + START_WAIT;
        let mut listed = Vec::new();
        for pod in &pods {
            let events = cgroup_root.join(pod.cgroup()).join("cgroup.events");
            let populated = wait_populated(&events, deadline).await;
            listed.push(pod_json(pod, &events, log_root, populated));
        }
        rec.event("pods", json!({ "pods": listed }))?;
        Ok(Pods { proxy, plan })
    }

    /// The whole drain: the groups' periods one after the other.
    pub fn drain_length(&self) -> Duration {
        self.plan.iter().map(|(g, _)| g.period).sum()
    }

    /// When each group ends, from the start of the drain, in order.
    pub fn stages(&self) -> Vec<(Duration, usize)> {
        let mut at = Duration::ZERO;
        (0..self.plan.len())
            .map(|i| {
                at += self.plan[i].0.period;
                (at, i)
            })
            .collect()
    }

    /// Stop the pods of group number `i` of the plan (`StopUnit` of their slices) and record
    /// `group_stopped`; a pod systemd would not stop is named in `stop_errors`.
    pub async fn stop_group(
        &self,
        i: usize,
        elapsed: Duration,
        rec: &mut Recorder,
    ) -> Result<(), String> {
        let (group, pods) = &self.plan[i];
        let mut errors = Vec::new();
        for pod in pods {
            if let Err(e) = self.proxy.stop_unit(&pod.slice(), "replace").await {
                errors.push(format!("{}: {e}", pod.full_name()));
            }
        }
        let mut fields = json!({
            "group": group.id,
            "pods": pods.iter().map(Pod::full_name).collect::<Vec<_>>(),
            "elapsed_ms": elapsed.as_millis() as u64,
        });
        if !errors.is_empty() {
            fields["stop_errors"] = json!(errors);
        }
        rec.event("group_stopped", fields)
    }
}

/// `<log_root>/<ns>_<name>_<uid>/app/0.log`, as kubelet makes it.
fn make_log_dir(log_root: &Path, pod: &Pod) -> Result<(), String> {
    let dir = log_root.join(pod.log_dir()).join("app");
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(dir.join("0.log"), ""))
        .map_err(|e| format!("cannot make the log directory {}: {e}", dir.display()))
}

/// `sleep infinity` in the transient service [`Pod::unit`], in the pod's slice.
async fn start_pod(proxy: &SystemdManagerProxy<'static>, pod: &Pod) -> Result<(), String> {
    let exec = vec![(
        "/bin/sleep".to_string(),
        vec!["sleep".to_string(), "infinity".to_string()],
        false,
    )];
    let description = format!("nthd-fake-kubelet pod {}", pod.full_name());
    let props: [(&str, V<'_>); 4] = [
        ("Description", V::from(description)),
        ("Slice", V::from(pod.slice())),
        ("ExecStart", V::from(exec)),
        ("CollectMode", V::from("inactive-or-failed")),
    ];
    proxy
        .start_transient_unit(&pod.unit(), "fail", &props, &[])
        .await
        .map(drop)
        .map_err(|e| {
            format!(
                "StartTransientUnit({}) in {} failed: {e}",
                pod.unit(),
                pod.slice()
            )
        })
}

/// Poll `events` until it says `populated 1` or `deadline` passes; whether it did.
async fn wait_populated(events: &Path, deadline: tokio::time::Instant) -> bool {
    loop {
        let body = std::fs::read_to_string(events).unwrap_or_default();
        if body.lines().any(|l| l.trim() == "populated 1") {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One pod of the `pods` record.
fn pod_json(pod: &Pod, events: &Path, log_root: &Path, populated: bool) -> Value {
    let cgroup: PathBuf = events.parent().map(Path::to_path_buf).unwrap_or_default();
    json!({
        "name": pod.full_name(),
        "uid": pod.uid,
        "qos": pod.qos.as_str(),
        "group": pod.group,
        "unit": pod.unit(),
        "slice": pod.slice(),
        "cgroup": cgroup,
        "log_dir": log_root.join(pod.log_dir()),
        "populated": populated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_spec_gives_kubelets_names() {
        let p: Pod = "kube-system/coredns-1:burstable:2:0a1b-2c".parse().unwrap();
        assert_eq!(p.full_name(), "kube-system/coredns-1");
        assert_eq!(p.group, 2);
        assert_eq!(p.slice(), "kubepods-burstable-pod0a1b_2c.slice");
        assert_eq!(
            p.cgroup(),
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b_2c.slice"
        );
        assert_eq!(p.log_dir(), "kube-system_coredns-1_0a1b-2c");
        let g: Pod = "db/pg-0:guaranteed".parse().unwrap();
        assert_eq!(g.group, 0);
        assert_eq!(g.cgroup(), format!("kubepods.slice/{}", g.slice()));
        assert!(g.slice().starts_with("kubepods-pod"));
        assert_eq!(g.uid.len(), 36);
        assert_eq!(g.uid, "db/pg-0:besteffort".parse::<Pod>().unwrap().uid);
        assert_ne!(g.uid, "db/pg-1:guaranteed".parse::<Pod>().unwrap().uid);
    }

    #[test]
    fn bad_pod_and_group_specs_are_refused() {
        for bad in [
            "noslash:burstable",
            "NS/x:burstable",
            "ns/x_y:burstable",
            "ns/x:gold",
            "ns/x:burstable:one",
            "ns/x:burstable:1:not-hex!",
            "ns/x:burstable:1:ab:extra",
        ] {
            assert!(bad.parse::<Pod>().is_err(), "{bad}");
        }
        for bad in ["5", "a:5", "1:-1", "1:inf", "1:"] {
            assert!(bad.parse::<Group>().is_err(), "{bad}");
        }
        assert_eq!(
            "2:0.5".parse::<Group>().unwrap().period,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn the_plan_orders_groups_and_needs_one_for_every_pod() {
        let a: Pod = "a/a:burstable:2".parse().unwrap();
        let b: Pod = "b/b:besteffort:1".parse().unwrap();
        let groups: Vec<Group> = ["2:3", "1:1"].iter().map(|g| g.parse().unwrap()).collect();
        let plan = plan(&[a.clone(), b.clone()], &groups, Duration::ZERO).unwrap();
        let ids: Vec<_> = plan.iter().map(|(g, p)| (g.id, p.len())).collect();
        assert_eq!(ids, [(1, 1), (2, 1)]);
        assert!(
            super::plan(std::slice::from_ref(&a), &groups[1..], Duration::ZERO)
                .unwrap_err()
                .contains("pod a/a is in group 2")
        );
        let twice = [groups[0], groups[0]];
        assert!(super::plan(std::slice::from_ref(&a), &twice, Duration::ZERO).is_err());
        // No groups: one, of the whole drain.
        let one = super::plan(&[b], &[], Duration::from_secs(7)).unwrap();
        assert_eq!(one[0].0.period, Duration::from_secs(7));
    }
}
