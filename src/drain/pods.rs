//! Which kubelet pods still had processes at one moment, for the drain report (issue 30).
//!
//! kubelet gives every pod a cgroup and a log directory. The cgroup says whether anything of the
//! pod still runs; the log directory, `/var/log/pods/<namespace>_<name>_<uid>/`, turns the
//! pod's UID into a name an operator knows. nthd needs no Kubernetes credentials for either.
//!
//! # Layouts
//!
//! * cgroup v2, kubelet's systemd cgroup driver:
//!   `kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice` for the burstable and
//!   besteffort classes, `kubepods.slice/kubepods-pod<uid_>.slice` for guaranteed pods; the
//!   pod still runs when its `cgroup.events` says `populated 1`.
//! * cgroup v2, the cgroupfs driver: `kubepods/<qos>/pod<uid>`, guaranteed `kubepods/pod<uid>`;
//!   the same `cgroup.events`.
//! * cgroup v1, either driver: the same trees under `systemd/` (the named hierarchy) or
//!   `pids/`; the pod still runs when some `cgroup.procs` in its subtree is not empty.
//!
//! (`<uid_>` is the UID with `_` for `-`, as systemd unit names need.) A hybrid host's v2 tree
//! under `unified/` counts as v2. The first of these that exists is read; one small file per
//! pod on v2, never a walk over every process.
//!
//! # What the answer means
//!
//! * No `kubepods` cgroup in any of these places: [`PodsLeft::Unknown`]. A node of a Kubernetes
//!   cluster always has one while kubelet runs (it makes it at start-up even with no pods), so
//!   its absence means a layout nthd does not know (or no kubelet), and "no pods left" would be
//!   a claim nthd cannot back.
//! * A `kubepods` tree where no pod cgroup is populated: `Known([])`.
//! * A populated pod whose log directory is missing (or `/var/log/pods` cannot be read) is still
//!   reported, as `pod-uid:<uid>`: that something still ran matters more than its name.
//! * Any directory or file of the tree that cannot be read (other than a pod cgroup that went
//!   away while being read, which is a pod that ended): `Unknown`, naming the path and the error.
//! * More than [`MAX_PODS`] pod cgroups: `Unknown` (kubelet's own limit is far lower).
//!
//! Ask before the shutdown goes ahead (while nthd still holds its own delay lock): once it
//! does, systemd stops `kubepods.slice` with everything else, the tree is gone, and the answer
//! is `Unknown`, not the pods that were just killed (seen in a booted Debian 12 container with
//! the kubelet stand-in's pods).
//!
//! Nothing is followed through a symbolic link, names that are not kubelet's (not UTF-8, no
//! `_`, too long, odd characters) are skipped, and every directory read is bounded.
//!
//! # Under nthd.service's sandbox
//!
//! The unit runs as user `nthd` with `ProtectControlGroups=yes` (the cgroup tree is mounted
//! read-only, not hidden), `ProtectSystem=strict` (`/var` read-only, not hidden) and
//! `PrivateUsers=yes` (root's files look owned by `nobody`, and the "other" permission bits
//! apply). This module only reads, and only what kubelet and systemd make readable by everyone:
//! cgroup directories are `0755` with `cgroup.events` and `cgroup.procs` `0444`/`0644`, and
//! kubelet makes `/var/log/pods` and each pod's directory `0755` (only the log files are
//! `0640`, and their contents are never read).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::files::{read_untrusted, ReadError};

/// What nthd can say about the pods still running at one moment.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) enum PodsLeft {
    /// `namespace/name` of every pod whose cgroup still has processes (empty: none), sorted.
    Known(Vec<String>),
    /// The layout is not recognised or cannot be read: why, in one sentence for an operator.
    Unknown(String),
}

/// The most pod cgroups read; more is [`PodsLeft::Unknown`]. kubelet's `maxPods` defaults to
/// 110 and is rarely set above 250.
pub(crate) const MAX_PODS: usize = 1000;

/// The most entries read from one directory (a QoS slice holds pods and a few files; the log
/// root one directory per pod, and old ones until kubelet removes them).
const MAX_ENTRIES: usize = 10_000;

/// How deep a v1 pod's subtree is searched for a non-empty `cgroup.procs` (pod, container, and
/// a level for a container's own sub-cgroups).
const MAX_V1_DEPTH: usize = 3;

/// The prefix of a pod named by its UID alone (no log directory to name it).
pub(crate) const UID_PREFIX: &str = "pod-uid:";

/// Why the pods left could not be told. Each message names the path; [`PodsLeft::Unknown`]
/// carries it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PodsError {
    /// None of the known places has a `kubepods` cgroup.
    #[error(
        "no kubepods cgroup under {root}: kubelet's pods are not laid out as nthd knows \
         (kubepods.slice or kubepods, cgroup v2 or v1's systemd or pids hierarchy), or kubelet \
         is not running"
    )]
    NoKubepods {
        /// The cgroup mount.
        root: String,
    },
    /// A directory of the tree could not be listed.
    #[error("cannot list {path}: {reason}; nthd.service must be able to read the cgroup tree")]
    List {
        /// The directory.
        path: String,
        /// The error.
        reason: std::io::Error,
    },
    /// A cgroup file could not be read.
    #[error("{0}; nthd.service must be able to read the cgroup tree")]
    Read(ReadError),
    /// `cgroup.events` has no `populated` line.
    #[error(
        "{path} is missing or has no \"populated 0\" or \"populated 1\" line; is this a \
         cgroup v2 tree?"
    )]
    NoPopulated {
        /// The file.
        path: String,
    },
    /// A directory has more entries than nthd reads.
    #[error("{path} has more than {max} entries, more than nthd reads")]
    TooMany {
        /// The directory.
        path: String,
        /// The bound.
        max: usize,
    },
}

/// How to tell whether a pod cgroup still has processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Populated {
    /// cgroup v2: `cgroup.events`.
    Events,
    /// cgroup v1: any `cgroup.procs` in the subtree.
    Procs,
}

/// Which cgroup driver named the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    /// `kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice`.
    Systemd,
    /// `kubepods/burstable/pod<uid>`.
    Cgroupfs,
}

/// Reads the pod cgroups under `cgroup_root` (normally /sys/fs/cgroup) and names them from
/// `log_root` (normally /var/log/pods).
pub(crate) fn pods_left(cgroup_root: &Path, log_root: &Path) -> PodsLeft {
    match running_uids(cgroup_root) {
        Ok(uids) => PodsLeft::Known(name_pods(&uids, log_root)),
        Err(e) => PodsLeft::Unknown(e.to_string()),
    }
}

/// [`pods_left`] on this machine's `/sys/fs/cgroup` and `/var/log/pods`.
pub(crate) fn pods_left_now() -> PodsLeft {
    pods_left(Path::new("/sys/fs/cgroup"), Path::new("/var/log/pods"))
}

/// The longest the drain report waits for [`pods_left_now`].
pub(crate) const SCAN_BOUND: std::time::Duration = std::time::Duration::from_millis(500);

/// `scan` ([`pods_left_now`]) on the blocking pool, so a slow cgroup or log tree never stalls
/// the runtime; [`PodsLeft::Unknown`] when it is not done by `by`.
pub(crate) async fn scanned_by(
    by: tokio::time::Instant,
    scan: impl FnOnce() -> PodsLeft + Send + 'static,
) -> PodsLeft {
    match tokio::time::timeout_at(by, tokio::task::spawn_blocking(scan)).await {
        Ok(Ok(pods)) => pods,
        Ok(Err(e)) => PodsLeft::Unknown(format!("the scan of /sys/fs/cgroup failed: {e}")),
        Err(_) => PodsLeft::Unknown(
            "the scan of /sys/fs/cgroup and /var/log/pods was not done in time for the report"
                .to_string(),
        ),
    }
}

/// Where the kubepods tree is, which driver made it, and how to read it.
fn find_kubepods(root: &Path) -> Option<(PathBuf, Driver, Populated)> {
    let places = [
        ("", Populated::Events),
        ("unified", Populated::Events),
        ("systemd", Populated::Procs),
        ("pids", Populated::Procs),
    ];
    for (sub, populated) in places {
        for (name, driver) in [
            ("kubepods.slice", Driver::Systemd),
            ("kubepods", Driver::Cgroupfs),
        ] {
            let dir = root.join(sub).join(name);
            if is_dir(&dir) {
                return Some((dir, driver, populated));
            }
        }
    }
    None
}

/// A directory, not through a symbolic link.
fn is_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// The UIDs (with dashes) of the pods whose cgroups still have processes.
fn running_uids(root: &Path) -> Result<Vec<String>, PodsError> {
    let Some((kubepods, driver, populated)) = find_kubepods(root) else {
        return Err(PodsError::NoKubepods {
            root: root.display().to_string(),
        });
    };
    let mut uids = Vec::new();
    for (dir, uid) in pod_dirs(&kubepods, driver)? {
        let running = match populated {
            Populated::Events => events_populated(&dir)?,
            Populated::Procs => procs_populated(&dir, MAX_V1_DEPTH)?,
        };
        if running {
            uids.push(uid);
        }
    }
    Ok(uids)
}

/// The subdirectories of `dir` (not symbolic links), by name; names that are not UTF-8 are
/// skipped. `Ok(None)` if `dir` went away (a pod that ended while being read).
fn subdirs(dir: &Path) -> Result<Option<Vec<(PathBuf, String)>>, PodsError> {
    let list_err = |reason| PodsError::List {
        path: dir.display().to_string(),
        reason,
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(list_err(e)),
    };
    let mut out = Vec::new();
    for (n, entry) in entries.enumerate() {
        if n >= MAX_ENTRIES {
            return Err(PodsError::TooMany {
                path: dir.display().to_string(),
                max: MAX_ENTRIES,
            });
        }
        let entry = entry.map_err(list_err)?;
        // DirEntry::file_type does not follow a symbolic link.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Ok(name) = entry.file_name().into_string() {
            out.push((entry.path(), name));
        }
    }
    Ok(Some(out))
}

/// The pod cgroups of a kubepods tree and their UIDs: the pods directly in it (guaranteed) and
/// those in its burstable and besteffort children.
fn pod_dirs(kubepods: &Path, driver: Driver) -> Result<Vec<(PathBuf, String)>, PodsError> {
    let mut pods = Vec::new();
    let mut add = |dirs: Vec<(PathBuf, String)>, qos: &str| {
        pods.extend(
            dirs.into_iter()
                .filter_map(|(p, name)| pod_uid(&name, driver, qos).map(|uid| (p, uid))),
        );
    };
    let top = subdirs(kubepods)?.unwrap_or_default();
    for qos in ["burstable", "besteffort"] {
        let name = match driver {
            Driver::Systemd => format!("kubepods-{qos}.slice"),
            Driver::Cgroupfs => qos.to_string(),
        };
        if let Some((dir, _)) = top.iter().find(|(_, n)| *n == name) {
            add(subdirs(dir)?.unwrap_or_default(), qos);
        }
    }
    add(top, "");
    if pods.len() > MAX_PODS {
        return Err(PodsError::TooMany {
            path: kubepods.display().to_string(),
            max: MAX_PODS,
        });
    }
    Ok(pods)
}

/// The UID (with dashes) of the pod cgroup `name` of QoS class `qos` (`""` for guaranteed), or
/// `None` if `name` is not one.
fn pod_uid(name: &str, driver: Driver, qos: &str) -> Option<String> {
    let uid = match driver {
        Driver::Systemd => {
            let prefix = if qos.is_empty() {
                "kubepods-pod".to_string()
            } else {
                format!("kubepods-{qos}-pod")
            };
            let stem = name.strip_prefix(&prefix)?.strip_suffix(".slice")?;
            if stem.contains('-') {
                return None;
            }
            stem.replace('_', "-")
        }
        Driver::Cgroupfs => name.strip_prefix("pod")?.to_string(),
    };
    is_uid(&uid).then_some(uid)
}

/// Whether `s` looks like a pod UID: a UUID, or a static pod's 32 hex digits.
fn is_uid(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// Reads a cgroup file; `Ok(None)` if it went away.
fn read_cgroup_file(path: &Path) -> Result<Option<String>, PodsError> {
    match read_untrusted(path) {
        Ok(body) => Ok(Some(String::from_utf8_lossy(&body).into_owned())),
        Err(e) if e.is_missing() => Ok(None),
        Err(e) => Err(PodsError::Read(e)),
    }
}

/// cgroup v2: whether `dir/cgroup.events` says `populated 1`. A cgroup gone is not populated.
fn events_populated(dir: &Path) -> Result<bool, PodsError> {
    let path = dir.join("cgroup.events");
    let Some(body) = read_cgroup_file(&path)? else {
        // The pod cgroup went away (the pod ended), or this is no cgroup v2 directory.
        return if is_dir(dir) {
            Err(PodsError::NoPopulated {
                path: path.display().to_string(),
            })
        } else {
            Ok(false)
        };
    };
    match body
        .lines()
        .find_map(|l| l.strip_prefix("populated "))
        .map(str::trim)
    {
        Some("1") => Ok(true),
        Some("0") => Ok(false),
        _ => Err(PodsError::NoPopulated {
            path: path.display().to_string(),
        }),
    }
}

/// cgroup v1: whether a `cgroup.procs` in `dir` or its subdirectories (down to `depth` levels)
/// lists a process.
fn procs_populated(dir: &Path, depth: usize) -> Result<bool, PodsError> {
    let Some(body) = read_cgroup_file(&dir.join("cgroup.procs"))? else {
        return Ok(false);
    };
    if body.split_ascii_whitespace().next().is_some() {
        return Ok(true);
    }
    if depth == 0 {
        return Ok(false);
    }
    for (sub, _) in subdirs(dir)?.unwrap_or_default() {
        if procs_populated(&sub, depth - 1)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `namespace/name` for each UID, from the log directories under `log_root`; `pod-uid:<uid>`
/// for a UID without one. Sorted.
fn name_pods(uids: &[String], log_root: &Path) -> Vec<String> {
    let names = if uids.is_empty() {
        BTreeMap::new()
    } else {
        log_names(log_root)
    };
    let mut out: Vec<String> = uids
        .iter()
        .map(|uid| {
            names
                .get(uid.as_str())
                .cloned()
                .unwrap_or_else(|| format!("{UID_PREFIX}{uid}"))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// UID → `namespace/name` from the directory names `<namespace>_<name>_<uid>` under
/// `log_root`. Unreadable or missing: empty (the pods are then named by UID). Of two
/// directories with one UID, the first by name wins.
fn log_names(log_root: &Path) -> BTreeMap<String, String> {
    let mut dirs = subdirs(log_root).ok().flatten().unwrap_or_default();
    dirs.sort_by(|a, b| a.1.cmp(&b.1));
    let mut names = BTreeMap::new();
    for (_, dir) in dirs {
        if let Some((ns, name, uid)) = split_log_dir(&dir) {
            names
                .entry(uid.to_string())
                .or_insert_with(|| format!("{ns}/{name}"));
        }
    }
    names
}

/// `<namespace>_<name>_<uid>` as its three parts, if each is what Kubernetes allows: a DNS
/// label for the namespace (at most 63), a DNS subdomain for the name (at most 253), a UID.
fn split_log_dir(dir: &str) -> Option<(&str, &str, &str)> {
    let mut parts = dir.split('_');
    let (ns, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
    let dns = |s: &str, max: usize| {
        (1..=max).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    (parts.next().is_none() && dns(ns, 63) && dns(name, 253) && is_uid(uid))
        .then_some((ns, name, uid))
}

#[cfg(test)]
mod tests {
    //! Trees as kubelet and systemd lay them out, in temporary directories.

    use std::os::unix::ffi::OsStrExt;

    use super::*;

    const A: &str = "0a1b2c3d-0000-4000-8000-00000000000a";
    const B: &str = "0a1b2c3d-0000-4000-8000-00000000000b";
    const C: &str = "0a1b2c3d-0000-4000-8000-00000000000c";
    const D: &str = "0a1b2c3d-0000-4000-8000-00000000000d";

    /// A cgroup directory `rel` under `root`, with `file` holding `body`.
    fn cgroup(root: &Path, rel: &str, file: &str, body: &str) -> PathBuf {
        let dir = root.join(rel);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(file), body).unwrap();
        dir
    }

    /// A v2 pod cgroup, populated or not.
    fn v2(root: &Path, rel: &str, populated: bool) {
        let body = format!("populated {}\nfrozen 0\n", u8::from(populated));
        cgroup(root, rel, "cgroup.events", &body);
    }

    /// The systemd driver's name of a pod cgroup of class `qos` ("" for guaranteed).
    fn slice(qos: &str, uid: &str) -> String {
        let uid = uid.replace('-', "_");
        if qos.is_empty() {
            format!("kubepods.slice/kubepods-pod{uid}.slice")
        } else {
            format!("kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{uid}.slice")
        }
    }

    /// `/var/log/pods/<ns>_<name>_<uid>/<container>/0.log`.
    fn log_dir(logs: &Path, ns: &str, name: &str, uid: &str) {
        cgroup(logs, &format!("{ns}_{name}_{uid}/app"), "0.log", "");
    }

    fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let (cg, logs) = (t.path().join("cgroup"), t.path().join("pods"));
        fs::create_dir_all(&cg).unwrap();
        fs::create_dir_all(&logs).unwrap();
        (t, cg, logs)
    }

    fn known(v: &[&str]) -> PodsLeft {
        PodsLeft::Known(v.iter().map(|s| (*s).to_string()).collect())
    }

    fn unknown_text(p: PodsLeft) -> String {
        match p {
            PodsLeft::Unknown(why) => why,
            k => panic!("expected Unknown, got {k:?}"),
        }
    }

    #[test]
    fn systemd_driver_on_v2_names_the_populated_pods_of_every_class() {
        let (_t, cg, logs) = dirs();
        v2(&cg, "kubepods.slice", true);
        v2(&cg, "kubepods.slice/kubepods-burstable.slice", true);
        v2(&cg, &slice("burstable", A), true);
        v2(&cg, &slice("besteffort", B), true);
        v2(&cg, &slice("", C), true);
        v2(&cg, &slice("burstable", D), false);
        for (ns, name, uid) in [
            ("kube-system", "coredns-1", A),
            ("web", "cache-0", B),
            ("db", "pg-0", C),
            ("web", "done-0", D),
        ] {
            log_dir(&logs, ns, name, uid);
        }
        assert_eq!(
            pods_left(&cg, &logs),
            known(&["db/pg-0", "kube-system/coredns-1", "web/cache-0"])
        );
    }

    #[test]
    fn a_kubepods_tree_without_a_populated_pod_is_known_empty() {
        let (_t, cg, logs) = dirs();
        v2(&cg, "kubepods.slice", false);
        v2(&cg, &slice("burstable", A), false);
        v2(&cg, &slice("", B), false);
        assert_eq!(pods_left(&cg, &logs), known(&[]));
        fs::remove_dir_all(cg.join("kubepods.slice")).unwrap();
        v2(&cg, "kubepods.slice", false);
        assert_eq!(pods_left(&cg, &logs), known(&[]));
    }

    #[test]
    fn no_kubepods_at_all_is_unknown_and_says_where_it_looked() {
        let (_t, cg, logs) = dirs();
        v2(&cg, "system.slice", true);
        let why = unknown_text(pods_left(&cg, &logs));
        assert!(why.starts_with("no kubepods cgroup under "), "{why}");
        assert!(why.contains(&cg.display().to_string()), "{why}");
    }

    #[test]
    fn cgroupfs_driver_on_v2() {
        let (_t, cg, logs) = dirs();
        v2(&cg, &format!("kubepods/burstable/pod{A}"), true);
        v2(&cg, &format!("kubepods/besteffort/pod{B}"), false);
        v2(&cg, &format!("kubepods/pod{C}"), true);
        log_dir(&logs, "a", "one", A);
        log_dir(&logs, "c", "three", C);
        assert_eq!(pods_left(&cg, &logs), known(&["a/one", "c/three"]));
    }

    #[test]
    fn v1_reads_cgroup_procs_in_the_pods_subtree() {
        for (hierarchy, burstable, guaranteed) in [
            ("systemd", slice("burstable", A), slice("", C)),
            (
                "pids",
                format!("kubepods/burstable/pod{A}"),
                format!("kubepods/pod{C}"),
            ),
        ] {
            let (_t, cg, logs) = dirs();
            let h = cg.join(hierarchy);
            // A's process is in a container's cgroup, the pod's own list is empty.
            cgroup(&h, &burstable, "cgroup.procs", "");
            cgroup(&h, &format!("{burstable}/ctr-1"), "cgroup.procs", "4242\n");
            // C: nothing anywhere.
            cgroup(&h, &guaranteed, "cgroup.procs", "");
            cgroup(&h, &format!("{guaranteed}/ctr-2"), "cgroup.procs", "\n");
            log_dir(&logs, "a", "one", A);
            log_dir(&logs, "c", "three", C);
            assert_eq!(pods_left(&cg, &logs), known(&["a/one"]), "{hierarchy}");
        }
    }

    #[test]
    fn a_hybrid_hosts_unified_tree_is_read_as_v2() {
        let (_t, cg, logs) = dirs();
        v2(&cg.join("unified"), &slice("besteffort", B), true);
        log_dir(&logs, "b", "two", B);
        assert_eq!(pods_left(&cg, &logs), known(&["b/two"]));
    }

    #[test]
    fn a_pod_without_a_log_directory_is_named_by_uid() {
        let (_t, cg, logs) = dirs();
        v2(&cg, &slice("burstable", A), true);
        v2(&cg, &slice("burstable", B), true);
        log_dir(&logs, "b", "two", B);
        let want = known(&["b/two", &format!("pod-uid:{A}")]);
        assert_eq!(pods_left(&cg, &logs), want);
        // No /var/log/pods at all: still reported, by UID.
        let none = logs.join("absent");
        assert_eq!(
            pods_left(&cg, &none),
            known(&[&format!("pod-uid:{A}"), &format!("pod-uid:{B}")])
        );
    }

    #[test]
    fn hostile_log_directory_names_are_skipped() {
        let (_t, cg, logs) = dirs();
        v2(&cg, &slice("burstable", A), true);
        // Longer than a namespace may be (63).
        let long_ns = "n".repeat(64);
        for name in [
            format!("no-underscore-{A}"),
            format!("ns_two_parts{A}"),
            format!("a_b_c_{A}"),
            format!("NS_Upper_{A}"),
            format!("{long_ns}_name_{A}"),
            format!("ns_name_{A}x"),
            format!("ns_na/me_{A}").replace('/', "\n"),
        ] {
            fs::create_dir(logs.join(name)).unwrap();
        }
        let mut bad = b"ns_\xffname_".to_vec();
        bad.extend_from_slice(A.as_bytes());
        fs::create_dir(logs.join(std::ffi::OsStr::from_bytes(&bad))).unwrap();
        // A pod name as long as a file name allows is still a name.
        v2(&cg, &slice("burstable", B), true);
        let long_name = "x".repeat(255 - "ns__".len() - B.len());
        log_dir(&logs, "ns", &long_name, B);
        let long = format!("ns/{long_name}");
        assert_eq!(
            pods_left(&cg, &logs),
            known(&[&long, &format!("pod-uid:{A}")])
        );
        // One good name among them wins.
        log_dir(&logs, "ok", "fine", A);
        assert_eq!(pods_left(&cg, &logs), known(&[&long, "ok/fine"]));
    }

    #[test]
    fn odd_cgroup_names_and_symbolic_links_are_not_pods() {
        let (_t, cg, logs) = dirs();
        v2(&cg, &slice("burstable", A), false);
        let burstable = cg.join("kubepods.slice/kubepods-burstable.slice");
        let populated = cgroup(&cg, "elsewhere", "cgroup.events", "populated 1\n");
        let linked = format!("kubepods-burstable-pod{}.slice", B.replace('-', "_"));
        std::os::unix::fs::symlink(&populated, burstable.join(linked)).unwrap();
        let bad = b"kubepods-burstable-pod\xff.slice";
        fs::create_dir(burstable.join(std::ffi::OsStr::from_bytes(bad))).unwrap();
        for name in [
            format!("kubepods-burstable-pod{}.slice", "a".repeat(200)),
            format!("kubepods-burstable-pod{A}.slice"), // dashes: not systemd's name
            "kubepods-burstable-pod.slice".to_string(),
            "kubepods-besteffort-podabc.slice".to_string(), // wrong class for the parent
        ] {
            v2(&burstable, &name, true);
        }
        assert_eq!(pods_left(&cg, &logs), known(&[]));
        // The symbolic link to the whole tree is not followed either.
        let (_t2, cg2, _) = dirs();
        std::os::unix::fs::symlink(cg.join("kubepods.slice"), cg2.join("kubepods.slice")).unwrap();
        assert!(matches!(pods_left(&cg2, &logs), PodsLeft::Unknown(_)));
    }

    #[test]
    fn an_unreadable_cgroup_file_is_unknown_and_named() {
        let (_t, cg, logs) = dirs();
        v2(&cg, &slice("burstable", A), true);
        let pod = cg.join(slice("burstable", B));
        fs::create_dir_all(&pod).unwrap();
        // A FIFO where cgroup.events should be: refused, never waited on.
        let fifo = pod.join("cgroup.events");
        crate::files::mkfifo(&fifo);
        let why = unknown_text(pods_left(&cg, &logs));
        assert!(why.contains(&fifo.display().to_string()), "{why}");
        assert!(why.contains("nthd.service must be able to read"), "{why}");
    }

    #[test]
    fn cgroup_events_without_populated_is_unknown() {
        let (_t, cg, logs) = dirs();
        cgroup(&cg, &slice("", A), "cgroup.events", "frozen 0\n");
        let why = unknown_text(pods_left(&cg, &logs));
        assert!(why.contains("cgroup.events"), "{why}");
        // A pod cgroup without the file at all (not v2) says the same.
        fs::remove_file(cg.join(slice("", A)).join("cgroup.events")).unwrap();
        let why = unknown_text(pods_left(&cg, &logs));
        assert!(why.contains("is missing or has no"), "{why}");
    }

    #[test]
    fn more_pods_than_nthd_reads_is_unknown() {
        let (_t, cg, logs) = dirs();
        for i in 0..=MAX_PODS {
            fs::create_dir_all(cg.join(slice("besteffort", &format!("{i:032x}")))).unwrap();
        }
        let why = unknown_text(pods_left(&cg, &logs));
        assert!(why.contains("more than 1000 entries"), "{why}");
    }

    #[test]
    fn the_real_cgroup_tree_of_this_machine_is_read_without_failing() {
        match pods_left_now() {
            PodsLeft::Known(pods) => {
                let mut sorted = pods.clone();
                sorted.sort();
                assert_eq!(pods, sorted);
                assert!(pods
                    .iter()
                    .all(|p| p.contains('/') || p.starts_with(UID_PREFIX)));
            }
            PodsLeft::Unknown(why) => assert!(why.contains("/sys/fs/cgroup"), "{why}"),
        }
    }

    proptest::proptest! {
        /// Any directory name: either not kubelet's, or exactly `<ns>_<name>_<uid>` of valid
        /// parts, never a panic.
        #[test]
        fn a_log_directory_name_is_split_only_when_it_is_kubelets(
            dir in "\\PC{0,80}|[a-z0-9._-]{1,12}_[a-z0-9._-]{1,12}_[0-9a-f-]{1,40}"
        ) {
            if let Some((ns, name, uid)) = split_log_dir(&dir) {
                proptest::prop_assert_eq!(format!("{ns}_{name}_{uid}"), dir.clone());
                proptest::prop_assert!(is_uid(uid) && !ns.contains('_') && !name.contains('_'));
            }
        }

        /// Any cgroup name: a UID only from systemd's or cgroupfs' pod name, never a panic.
        #[test]
        fn a_cgroup_name_gives_a_uid_only_when_it_is_a_pods(
            name in "\\PC{0,80}|kubepods-(burstable-)?pod[0-9a-f_]{1,40}\\.slice|pod[0-9a-f-]{1,40}"
        ) {
            let kinds = [
                (Driver::Systemd, ""),
                (Driver::Systemd, "burstable"),
                (Driver::Cgroupfs, ""),
            ];
            for (driver, qos) in kinds {
                if let Some(uid) = pod_uid(&name, driver, qos) {
                    proptest::prop_assert!(is_uid(&uid));
                    let u = uid.replace('-', "_");
                    let back = match driver {
                        Driver::Systemd if qos.is_empty() => format!("kubepods-pod{u}.slice"),
                        Driver::Systemd => format!("kubepods-{qos}-pod{u}.slice"),
                        Driver::Cgroupfs => format!("pod{uid}"),
                    };
                    proptest::prop_assert_eq!(back, name.clone());
                }
            }
        }
    }

    #[test]
    fn the_serialized_form_is_tagged() {
        assert_eq!(
            serde_json::to_string(&known(&["a/b"])).unwrap(),
            r#"{"Known":["a/b"]}"#
        );
    }

    /// The scan runs off the runtime: a slow one leaves the runtime free and, not done by its
    /// bound, makes the pods unknown with the reason; a quick one gives its answer.
    #[tokio::test(flavor = "current_thread")]
    async fn a_slow_scan_is_bounded_and_leaves_the_runtime_free() {
        let by = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
        let ticked =
            tokio::spawn(async { tokio::time::sleep(std::time::Duration::from_millis(50)).await });
        let slow = || {
            std::thread::sleep(std::time::Duration::from_millis(800));
            PodsLeft::Known(vec![])
        };
        let t0 = std::time::Instant::now();
        match scanned_by(by, slow).await {
            PodsLeft::Unknown(why) => assert!(why.contains("not done in time"), "{why}"),
            known => panic!("{known:?}"),
        }
        assert!(t0.elapsed() < std::time::Duration::from_millis(800));
        assert!(ticked.is_finished(), "the runtime was stalled by the scan");
        let quick = || PodsLeft::Known(vec!["default/web-1".to_string()]);
        let by = tokio::time::Instant::now() + SCAN_BOUND;
        assert!(
            matches!(scanned_by(by, quick).await, PodsLeft::Known(p) if p == ["default/web-1"])
        );
    }
}
