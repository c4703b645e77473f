//! The unit's IP sandbox: what `IPAddressDeny=` / `IPAddressAllow=` let nthd reach.
//!
//! The packaged unit denies every address but the metadata services'. A packet to any other
//! address is dropped by the unit's BPF filter, and a TCP connect does not fail with EPERM: the
//! SYN is dropped and the connect simply times out. Without this module that reads as "the
//! metadata service is slow or throttling". So nthd reads its unit's IP access lists from PID 1
//! over D-Bus (`GetUnitByPID`, then the unit's `IPAddressDeny` / `IPAddressAllow`, type
//! `a(iayu)`), and when a request to an address those lists block fails, it names the unit's
//! allow-list as the cause and gives the drop-in that allows the address.
//!
//! The matching follows systemd.resource-control(5): an address that matches `IPAddressAllow=`
//! is allowed; else one that matches `IPAddressDeny=` is dropped; else it is allowed. The lists
//! of the unit's slices (which systemd applies too) are not read.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

/// An address prefix, as `IPAddressDeny=` / `IPAddressAllow=` hold them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// `addr/prefix`; `None` when the prefix is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<IpNet> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then_some(IpNet { addr, prefix })
    }

    /// One entry of an `a(iayu)` property: the family (`AF_INET` 2, `AF_INET6` 10), the
    /// address bytes and the prefix length. `None` for anything else.
    pub(crate) fn from_dbus(family: i32, bytes: &[u8], prefix: u32) -> Option<IpNet> {
        let addr = match (family, bytes.len()) {
            (libc::AF_INET, 4) => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
            (libc::AF_INET6, 16) => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
            _ => return None,
        };
        IpNet::new(addr, u8::try_from(prefix).ok()?)
    }

    /// Whether `ip` is in this prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

/// Whether the first `bits` bits of `a` and `b` are equal (`bits` is at most their length).
fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (full, rest) = (usize::from(bits / 8), bits % 8);
    a[..full] == b[..full] && (rest == 0 || (a[full] ^ b[full]) >> (8 - rest) == 0)
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = if self.addr.is_ipv4() { 32 } else { 128 };
        match self.prefix {
            0 => f.write_str("any"),
            p if p == full => write!(f, "{}", self.addr),
            p => write!(f, "{}/{p}", self.addr),
        }
    }
}

/// One unit's IP access lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpPolicy {
    /// The unit, e.g. `nthd.service`.
    pub unit: String,
    /// `IPAddressDeny=`.
    pub deny: Vec<IpNet>,
    /// `IPAddressAllow=`.
    pub allow: Vec<IpNet>,
}

/// Why an address cannot be reached from a unit: the cause and the remedy, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The address the unit drops.
    pub addr: IpAddr,
    /// "the unit nthd.service's IP allow-list blocks 169.254.0.99 (IPAddressDeny=any, and no
    /// IPAddressAllow= entry matches)".
    pub cause: String,
    /// The drop-in that allows the address.
    pub drop_in: String,
}

impl IpPolicy {
    /// A policy written as in a unit file: space-separated addresses with an optional
    /// `/prefix`, or `any`, `localhost`, `link-local`, `multicast`.
    pub fn parse(unit: &str, deny: &str, allow: &str) -> Result<IpPolicy, String> {
        Ok(IpPolicy {
            unit: unit.to_string(),
            deny: parse_list(deny)?,
            allow: parse_list(allow)?,
        })
    }

    /// The lists as PID 1 exports them (`a(iayu)`); malformed entries are skipped.
    pub(crate) fn from_dbus(unit: String, deny: &[DbusEntry], allow: &[DbusEntry]) -> IpPolicy {
        let list = |l: &[DbusEntry]| -> Vec<IpNet> {
            l.iter()
                .filter_map(|(f, b, p)| IpNet::from_dbus(*f, b, *p))
                .collect()
        };
        IpPolicy {
            unit,
            deny: list(deny),
            allow: list(allow),
        }
    }

    /// The first deny entry that drops `ip`, if the unit drops it.
    fn denying(&self, ip: IpAddr) -> Option<&IpNet> {
        let ip = ip.to_canonical();
        if self.allow.iter().any(|n| n.contains(ip)) {
            return None;
        }
        self.deny.iter().find(|n| n.contains(ip))
    }

    /// Whether the unit drops packets to `ip`.
    pub fn blocks(&self, ip: IpAddr) -> bool {
        self.denying(ip).is_some()
    }

    /// Whether the unit restricts anything at all.
    pub(crate) fn restricts(&self) -> bool {
        !self.deny.is_empty()
    }

    /// The cause and the remedy when the unit drops `ip`.
    pub fn blocked(&self, ip: IpAddr) -> Option<Blocked> {
        let rule = self.denying(ip)?;
        let ip = ip.to_canonical();
        Some(Blocked {
            addr: ip,
            cause: format!(
                "the unit {}'s IP allow-list blocks {ip} (IPAddressDeny={rule}, and no \
                 IPAddressAllow= entry matches)",
                self.unit
            ),
            drop_in: self.drop_in(ip),
        })
    }

    /// The drop-in that allows `ip`, with the commands that apply it.
    pub fn drop_in(&self, ip: IpAddr) -> String {
        // A transient unit (docs/observability.md's `systemd-run` copy of nthd.service's sandbox, named
        // run-u5.service or so) cannot be edited: the drop-in belongs to nthd.service.
        let u = if self.is_transient() {
            "nthd.service"
        } else {
            &self.unit
        };
        format!(
            "allow it with a drop-in: systemctl edit {u}, add the lines [Service] and \
             IPAddressAllow={ip} (or write them to /etc/systemd/system/{u}.d/allow.conf and run \
             systemctl daemon-reload), then systemctl restart {u}"
        )
    }

    /// Whether the unit is a transient `systemd-run` unit (`run-u5.service`, `run-p12-i34.service`).
    fn is_transient(&self) -> bool {
        self.unit.starts_with("run-") && self.unit.ends_with(".service")
    }

    /// The first of `addrs` the unit drops. Every one must be dropped: a host name with one
    /// reachable address is reachable.
    pub(crate) fn all_blocked(&self, addrs: &[IpAddr]) -> Option<Blocked> {
        if addrs.is_empty() || !addrs.iter().all(|a| self.blocks(*a)) {
            return None;
        }
        self.blocked(addrs[0])
    }

    /// Whether the unit drops every address of `host` (an address, or a name resolved here
    /// with a short timeout; `None` when it does not resolve in time).
    pub async fn blocked_host(&self, host: &str, port: u16) -> Option<Blocked> {
        if !self.restricts() {
            return None;
        }
        self.all_blocked(&resolve(host, port).await)
    }
}

/// How long a host name may take to resolve when nthd looks for the cause of a failure.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(1);

/// The addresses of `host`: itself when it is an address (IPv6 with or without brackets).
pub(crate) async fn resolve(host: &str, port: u16) -> Vec<IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((bare, port))).await {
        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
        _ => vec![],
    }
}

/// One entry of an `a(iayu)` property.
pub(crate) type DbusEntry = (i32, Vec<u8>, u32);

fn parse_list(s: &str) -> Result<Vec<IpNet>, String> {
    let mut out = Vec::new();
    for word in s.split_whitespace() {
        out.extend(parse_word(word)?);
    }
    Ok(out)
}

fn net(addr: impl Into<IpAddr>, prefix: u8) -> IpNet {
    IpNet {
        addr: addr.into(),
        prefix,
    }
}

/// One word of `IPAddressDeny=` / `IPAddressAllow=`, with systemd's symbolic names.
fn parse_word(w: &str) -> Result<Vec<IpNet>, String> {
    Ok(match w {
        "any" => vec![net(Ipv4Addr::UNSPECIFIED, 0), net(Ipv6Addr::UNSPECIFIED, 0)],
        "localhost" => vec![net(Ipv4Addr::LOCALHOST, 8), net(Ipv6Addr::LOCALHOST, 128)],
        "link-local" => vec![
            net(Ipv4Addr::new(169, 254, 0, 0), 16),
            net(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 64),
        ],
        "multicast" => vec![
            net(Ipv4Addr::new(224, 0, 0, 0), 4),
            net(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
        ],
        _ => {
            let bad = || format!("{w:?} is not an address, a prefix or a symbolic name");
            let (a, p) = w.split_once('/').unwrap_or((w, ""));
            let addr: IpAddr = a.parse().map_err(|_| bad())?;
            let prefix = match p {
                "" if addr.is_ipv4() => 32,
                "" => 128,
                p => p.parse().map_err(|_| bad())?,
            };
            vec![IpNet::new(addr, prefix).ok_or_else(bad)?]
        }
    })
}

/// How long the D-Bus calls that read a unit's lists may take, together.
const DBUS_TIMEOUT: Duration = Duration::from_secs(2);

/// The lists of the unit this process runs in (`GetUnitByPID`). `None` (logged at debug level)
/// when there is no system bus or no systemd: nthd then attributes nothing to the sandbox.
pub(crate) async fn own_policy() -> Option<Arc<IpPolicy>> {
    load(Target::Pid(std::process::id())).await
}

/// The lists of the unit `name` (loaded from disk if it is not running).
pub(crate) async fn unit_policy(name: &str) -> Option<Arc<IpPolicy>> {
    load(Target::Unit(name)).await
}

#[derive(Clone, Copy, Debug)]
enum Target<'a> {
    Pid(u32),
    Unit(&'a str),
}

async fn load(t: Target<'_>) -> Option<Arc<IpPolicy>> {
    match tokio::time::timeout(DBUS_TIMEOUT, query(t)).await {
        Ok(Ok(p)) => {
            tracing::debug!(
                "IP sandbox of {}: IPAddressDeny={} IPAddressAllow={}",
                p.unit,
                join(&p.deny),
                join(&p.allow)
            );
            Some(Arc::new(p))
        }
        Ok(Err(e)) => {
            tracing::debug!("cannot read the IP sandbox of {t:?} from systemd: {e}");
            None
        }
        Err(_) => {
            tracing::debug!("systemd did not tell the IP sandbox of {t:?} in time");
            None
        }
    }
}

fn join(l: &[IpNet]) -> String {
    l.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The D-Bus interface that carries a unit's resource-control properties.
fn interface_for(unit: &str) -> &'static str {
    match unit.rsplit('.').next() {
        Some("scope") => "org.freedesktop.systemd1.Scope",
        Some("slice") => "org.freedesktop.systemd1.Slice",
        Some("socket") => "org.freedesktop.systemd1.Socket",
        Some("mount") => "org.freedesktop.systemd1.Mount",
        Some("swap") => "org.freedesktop.systemd1.Swap",
        _ => "org.freedesktop.systemd1.Service",
    }
}

async fn query(t: Target<'_>) -> zbus::Result<IpPolicy> {
    let conn = zbus::connection::Builder::system()
        .method_timeout(DBUS_TIMEOUT)
        .build()
        .await?;
    let sd = crate::logind::SystemdProxy::builder(&conn)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await?;
    let path = match t {
        Target::Pid(pid) => sd.get_unit_by_pid(pid).await?,
        Target::Unit(name) => match sd.get_unit(name).await {
            Ok(p) => p,
            Err(_) => sd.load_unit(name).await?,
        },
    };
    let id: String = properties(&conn, &path, "org.freedesktop.systemd1.Unit")
        .await?
        .get_property("Id")
        .await?;
    let p = properties(&conn, &path, interface_for(&id)).await?;
    let deny: Vec<DbusEntry> = p.get_property("IPAddressDeny").await?;
    let allow: Vec<DbusEntry> = p.get_property("IPAddressAllow").await?;
    Ok(IpPolicy::from_dbus(id, &deny, &allow))
}

async fn properties<'a>(
    conn: &zbus::Connection,
    path: &'a zbus::OwnedObjectPath,
    interface: &'static str,
) -> zbus::Result<zbus::Proxy<'a>> {
    zbus::proxy::Builder::<zbus::Proxy<'a>>::new(conn)
        .destination("org.freedesktop.systemd1")
        .path(path.as_ref())
        .interface(interface)
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn packaged() -> IpPolicy {
        IpPolicy::parse(
            "nthd.service",
            "any",
            "169.254.169.254 fd00:ec2::254 100.100.100.200 169.254.0.23",
        )
        .unwrap()
    }

    #[test]
    fn the_packaged_unit_allows_only_the_metadata_services() {
        let p = packaged();
        for ok in [
            "169.254.169.254",
            "fd00:ec2::254",
            "100.100.100.200",
            "169.254.0.23",
        ] {
            assert!(!p.blocks(ip(ok)), "{ok}");
        }
        for blocked in [
            "169.254.0.99",
            "127.0.0.1",
            "::1",
            "10.0.0.2",
            "fd00:ec2::253",
        ] {
            assert!(p.blocks(ip(blocked)), "{blocked}");
        }
        // An IPv4-mapped address is the IPv4 address on the wire.
        assert!(!p.blocks(ip("::ffff:169.254.169.254")));
        assert!(p.blocks(ip("::ffff:127.0.0.1")));
    }

    #[test]
    fn symbolic_names_and_prefixes() {
        let p = IpPolicy::parse("u", "any", "localhost link-local").unwrap();
        for ok in ["127.0.0.1", "127.255.0.9", "::1", "169.254.7.7", "fe80::1"] {
            assert!(!p.blocks(ip(ok)), "{ok}");
        }
        for blocked in ["128.0.0.1", "::2", "169.253.255.255", "fe80:0:0:1::1"] {
            assert!(p.blocks(ip(blocked)), "{blocked}");
        }
        let p = IpPolicy::parse("u", "10.0.0.0/8 fd00::/7", "10.1.2.0/23").unwrap();
        assert!(p.blocks(ip("10.9.9.9")) && p.blocks(ip("fdff::1")));
        assert!(!p.blocks(ip("10.1.3.255")) && p.blocks(ip("10.1.4.0")));
        // Not in any list: allowed.
        assert!(!p.blocks(ip("11.0.0.1")) && !p.blocks(ip("2001:db8::1")));
        // fd00::/7 is fc00::/7: only the first 7 bits count.
        assert!(p.blocks(ip("fc00::1")));
        let p = IpPolicy::parse("u", "multicast", "").unwrap();
        assert!(p.blocks(ip("239.1.1.1")) && p.blocks(ip("ff02::1")));
        assert!(!p.blocks(ip("223.255.255.255")));
        // No deny list: nothing is blocked, whatever the allow list says.
        let p = IpPolicy::parse("u", "", "127.0.0.1").unwrap();
        assert!(!p.blocks(ip("8.8.8.8")) && !p.restricts());
        for bad in ["10.0.0.0/33", "::/129", "example.com", "10.0.0.1/x"] {
            assert!(IpPolicy::parse("u", bad, "").is_err(), "{bad}");
        }
    }

    #[test]
    fn allow_beats_deny() {
        let p = IpPolicy::parse("u", "127.0.0.1", "127.0.0.0/8").unwrap();
        assert!(!p.blocks(ip("127.0.0.1")));
        let p = IpPolicy::parse("u", "127.0.0.0/8", "any").unwrap();
        assert!(!p.blocks(ip("127.0.0.1")));
    }

    #[test]
    fn dbus_entries_are_read_as_systemd_exports_them() {
        let deny = vec![(2, vec![0; 4], 0), (10, vec![0; 16], 0)];
        let allow = vec![
            (2, vec![169, 254, 0, 23], 32),
            (10, ip_bytes("fd00:ec2::254"), 128),
            // Malformed: skipped, not a reason to give up on the rest.
            (2, vec![1, 2, 3], 32),
            (10, vec![0; 16], 129),
            (7, vec![0; 4], 0),
        ];
        let p = IpPolicy::from_dbus("nthd.service".into(), &deny, &allow);
        assert_eq!(p.deny.len(), 2);
        assert_eq!(p.allow.len(), 2);
        assert!(!p.blocks(ip("169.254.0.23")) && !p.blocks(ip("fd00:ec2::254")));
        assert!(p.blocks(ip("169.254.0.99")) && p.blocks(ip("::1")));
        assert_eq!(p.allow[0].to_string(), "169.254.0.23");
        assert_eq!(p.deny[0].to_string(), "any");
        assert_eq!(net(ip("10.0.0.0"), 8).to_string(), "10.0.0.0/8");
    }

    fn ip_bytes(s: &str) -> Vec<u8> {
        match ip(s) {
            IpAddr::V6(a) => a.octets().to_vec(),
            IpAddr::V4(a) => a.octets().to_vec(),
        }
    }

    #[test]
    fn the_cause_names_the_unit_the_rule_and_the_drop_in() {
        let p = packaged();
        assert_eq!(p.blocked(ip("169.254.169.254")), None);
        let b = p.blocked(ip("169.254.0.99")).unwrap();
        assert_eq!(
            b.cause,
            "the unit nthd.service's IP allow-list blocks 169.254.0.99 (IPAddressDeny=any, and \
             no IPAddressAllow= entry matches)"
        );
        assert_eq!(
            b.drop_in,
            "allow it with a drop-in: systemctl edit nthd.service, add the lines [Service] and \
             IPAddressAllow=169.254.0.99 (or write them to \
             /etc/systemd/system/nthd.service.d/allow.conf and run systemctl daemon-reload), \
             then systemctl restart nthd.service"
        );
        // Run in a transient copy of the sandbox (systemd-run): the drop-in is nthd.service's.
        let t = IpPolicy::parse("run-u7.service", "any", "169.254.169.254").unwrap();
        let d = t.drop_in(ip("169.254.0.99"));
        assert!(
            d.contains("systemctl edit nthd.service") && !d.contains("run-u7"),
            "{d}"
        );
        let p = IpPolicy::parse("x.service", "10.0.0.0/8", "").unwrap();
        let b = p.blocked(ip("10.1.1.1")).unwrap();
        assert!(b.cause.contains("IPAddressDeny=10.0.0.0/8"), "{}", b.cause);
    }

    #[test]
    fn a_host_is_blocked_only_when_every_address_is() {
        let p = IpPolicy::parse("u", "any", "127.0.0.1").unwrap();
        assert!(p.all_blocked(&[ip("::1"), ip("127.0.0.1")]).is_none());
        assert_eq!(p.all_blocked(&[ip("::1")]).unwrap().addr, ip("::1"));
        assert!(p.all_blocked(&[]).is_none());
    }

    #[tokio::test]
    async fn literal_hosts_are_not_resolved() {
        assert_eq!(resolve("[::1]", 80).await, vec![ip("::1")]);
        assert_eq!(resolve("192.0.2.1", 80).await, vec![ip("192.0.2.1")]);
        let p = IpPolicy::parse("u", "any", "").unwrap();
        assert!(p.blocked_host("[fd00::1]", 80).await.is_some());
        assert!(IpPolicy::parse("u", "", "")
            .unwrap()
            .blocked_host("192.0.2.1", 80)
            .await
            .is_none());
    }

    #[test]
    fn the_interface_follows_the_unit_type() {
        assert_eq!(
            interface_for("nthd.service"),
            "org.freedesktop.systemd1.Service"
        );
        assert_eq!(
            interface_for("session-3.scope"),
            "org.freedesktop.systemd1.Scope"
        );
        assert_eq!(
            interface_for("run-u7.service"),
            "org.freedesktop.systemd1.Service"
        );
    }
}
