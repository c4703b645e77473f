//! Which cloud is this? First DMI (`/sys/class/dmi/id`), then a short parallel probe of the
//! metadata services, each with its own header or token (containers usually show no DMI).

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::Method;

use super::Cloud;
use crate::imds::{ClientOptions, ImdsClient, ImdsError};
use crate::sandbox::IpPolicy;

/// The Azure chassis asset tag.
pub const AZURE_ASSET_TAG: &str = "7783-7084-3265-9085-8269-3286-77";

/// Which cloud this is, and how that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// The cloud.
    pub cloud: Cloud,
    /// How it was found, for logs and `nthd once`.
    pub how: String,
}

/// What detection tried, for the error message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DetectError {
    pub tried: Vec<String>,
    /// The first probe that the unit's IP access lists dropped, when every probe failed: that
    /// is the cause, whatever the others say.
    pub blocked: Option<String>,
}

impl fmt::Display for DetectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(b) = &self.blocked {
            return write!(f, "cannot tell which cloud this is: {b}");
        }
        write!(
            f,
            "cannot tell which cloud this is; tried: {}. Set \
             NTHD_PROVIDER=aws|gcp|azure|alibaba|tencent (and NTHD_IMDS_ENDPOINT if the metadata \
             service is elsewhere)",
            self.tried.join("; ")
        )
    }
}

impl std::error::Error for DetectError {}

fn read(root: &Path, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join(name))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The DMI strings detection looks at, readable from a fixture directory in tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dmi {
    /// `sys_vendor`, e.g. `Amazon EC2`.
    pub sys_vendor: Option<String>,
    /// `product_name`, e.g. `Google Compute Engine`.
    pub product_name: Option<String>,
    /// `board_vendor`.
    pub board_vendor: Option<String>,
    /// `chassis_asset_tag` (Azure's is [`AZURE_ASSET_TAG`]).
    pub chassis_asset_tag: Option<String>,
    /// `/sys/hypervisor/uuid` (old Xen-based EC2 instances).
    pub hypervisor_uuid: Option<String>,
}

impl Dmi {
    /// Reads from `dmi_dir` (normally `/sys/class/dmi/id`) and `hypervisor_uuid`
    /// (normally `/sys/hypervisor/uuid`).
    pub(crate) fn read(dmi_dir: &Path, hypervisor_uuid: &Path) -> Dmi {
        Dmi {
            sys_vendor: read(dmi_dir, "sys_vendor"),
            product_name: read(dmi_dir, "product_name"),
            board_vendor: read(dmi_dir, "board_vendor"),
            chassis_asset_tag: read(dmi_dir, "chassis_asset_tag"),
            hypervisor_uuid: std::fs::read_to_string(hypervisor_uuid)
                .ok()
                .map(|s| s.trim().to_string()),
        }
    }

    pub(crate) fn system() -> Dmi {
        Dmi::read(
            Path::new("/sys/class/dmi/id"),
            Path::new("/sys/hypervisor/uuid"),
        )
    }

    /// Recognises a cloud from DMI alone.
    pub fn cloud(&self) -> Option<Detection> {
        let eq = |v: &Option<String>, want: &str| {
            v.as_deref().is_some_and(|s| s.eq_ignore_ascii_case(want))
        };
        let found = |cloud, how: String| Some(Detection { cloud, how });
        if eq(&self.sys_vendor, "Amazon EC2") || eq(&self.board_vendor, "Amazon EC2") {
            return found(
                Cloud::Aws,
                "DMI sys_vendor/board_vendor is \"Amazon EC2\"".into(),
            );
        }
        if self
            .hypervisor_uuid
            .as_deref()
            .is_some_and(|u| u.to_ascii_lowercase().starts_with("ec2"))
        {
            return found(
                Cloud::Aws,
                "/sys/hypervisor/uuid starts with ec2 (Xen EC2)".into(),
            );
        }
        if eq(&self.product_name, "Google Compute Engine") || eq(&self.sys_vendor, "Google") {
            return found(
                Cloud::Gcp,
                "DMI product_name is \"Google Compute Engine\"".into(),
            );
        }
        if eq(&self.chassis_asset_tag, AZURE_ASSET_TAG) {
            return found(
                Cloud::Azure,
                format!("DMI chassis_asset_tag is the Azure tag {AZURE_ASSET_TAG}"),
            );
        }
        if eq(&self.sys_vendor, "Alibaba Cloud") || eq(&self.board_vendor, "Alibaba Cloud") {
            return found(Cloud::Alibaba, "DMI sys_vendor is \"Alibaba Cloud\"".into());
        }
        // Tencent CVM reports "Tencent Cloud"; any vendor naming Tencent is taken as it.
        if let Some(v) = self
            .sys_vendor
            .as_deref()
            .filter(|v| v.to_ascii_lowercase().contains("tencent"))
        {
            return found(
                Cloud::Tencent,
                format!("DMI sys_vendor is {:?}", crate::logging::clean(v, 64)),
            );
        }
        None
    }

    fn summary(&self) -> String {
        format!(
            "DMI (sys_vendor={:?}, product_name={:?}, chassis_asset_tag={:?}): no cloud recognised",
            self.sys_vendor.as_deref().unwrap_or("-"),
            self.product_name.as_deref().unwrap_or("-"),
            self.chassis_asset_tag.as_deref().unwrap_or("-"),
        )
    }
}

/// Where the probe of `cloud` goes: `endpoint` when set, else the cloud's default address.
/// Every default is an IP address, so no probe waits on DNS and all fit in one timeout.
fn probe_base(cloud: Cloud, endpoint: Option<&str>) -> &str {
    endpoint.unwrap_or(cloud.default_endpoint())
}

/// The request that tells `cloud` apart: method, path and headers.
fn probe_request(cloud: Cloud) -> (Method, &'static str, Vec<(&'static str, &'static str)>) {
    match cloud {
        Cloud::Aws => (
            Method::PUT,
            super::aws::TOKEN_PATH,
            vec![("x-aws-ec2-metadata-token-ttl-seconds", "60")],
        ),
        Cloud::Gcp => (
            Method::GET,
            "/computeMetadata/v1/instance/id",
            vec![("metadata-flavor", "Google")],
        ),
        Cloud::Azure => (
            Method::GET,
            "/metadata/instance/compute/vmId?api-version=2021-02-01&format=text",
            vec![("metadata", "true")],
        ),
        Cloud::Alibaba => (Method::GET, "/latest/meta-data/instance-id", vec![]),
        Cloud::Tencent => (Method::GET, "/latest/meta-data/", vec![]),
    }
}

/// Why a probe found nothing.
enum ProbeFailed {
    /// The unit's IP access lists drop the address (the whole message).
    Blocked(String),
    /// Anything else, prefixed with the cloud.
    Other(String),
}

/// Probes one cloud's metadata service. `Ok(how)` when it answers as that cloud would.
fn probe(cloud: Cloud, base: &str, opts: &ClientOptions) -> Result<String, ProbeFailed> {
    let client = ImdsClient::new(base, opts.clone())
        .map_err(|e| ProbeFailed::Other(format!("{cloud}: {e}")))?;
    let (method, path, headers) = probe_request(cloud);
    let url = client.url(path);
    let reply = match client.send(method, path, &headers, None, None) {
        Ok(r) => r,
        Err(e @ ImdsError::BlockedBySandbox { .. }) => {
            return Err(ProbeFailed::Blocked(e.to_string()))
        }
        Err(e) => return Err(ProbeFailed::Other(format!("{cloud}: {e}"))),
    };
    if reply.is_success() {
        Ok(format!("{url} answered HTTP {}", reply.status))
    } else {
        let e = format!("{cloud}: {url} answered HTTP {}", reply.status);
        Err(ProbeFailed::Other(e))
    }
}

/// Detects the cloud: DMI first, then systemd-imdsd's `GetVendorInfo` where it serves (`imdsd`:
/// its socket and the root its polkit files are under; `None` when nthd reads directly only),
/// then the probes in parallel, each on a thread of its own. With `endpoint` set, every probe
/// goes there instead of each cloud's default address. `sandbox`: the IP access lists of the
/// unit nthd runs in, to name them when they drop the probes.
pub(crate) fn detect(
    dmi: &Dmi,
    imdsd: Option<&crate::imds::imdsd::Imdsd>,
    endpoint: Option<&str>,
    timeout: Duration,
    sandbox: Option<Arc<IpPolicy>>,
) -> Result<Detection, DetectError> {
    if let Some(d) = dmi.cloud() {
        return Ok(d);
    }
    let mut err = DetectError {
        tried: vec![dmi.summary()],
        blocked: None,
    };
    if let Some(d) = imdsd.and_then(|i| vendor_detection(i, timeout, &mut err)) {
        return Ok(d);
    }
    let opts = ClientOptions {
        connect_timeout: timeout,
        request_timeout: timeout,
        max_body: 64 * 1024,
        endpoint_set: endpoint.is_some(),
        sandbox,
        ..ClientOptions::default()
    };
    let (base, opts) = (&|c: Cloud| probe_base(c, endpoint), &opts);
    // GCP and Azure demand their own headers, so they are the most specific answers; AWS's
    // token PUT is next; Alibaba's plain GET of instance-id follows. Tencent's GET of the
    // meta-data directory is the least specific: AWS IMDSv1 and Alibaba answer it too, which
    // matters when NTHD_IMDS_ENDPOINT sends every probe to one service (by default Tencent's
    // goes to its own address, 169.254.0.23).
    let order = [
        Cloud::Gcp,
        Cloud::Azure,
        Cloud::Aws,
        Cloud::Alibaba,
        Cloud::Tencent,
    ];
    let results = std::thread::scope(|scope| {
        let probes = order.map(|c| scope.spawn(move || probe(c, base(c), opts)));
        let mut done = probes.into_iter().map(std::thread::ScopedJoinHandle::join);
        order.map(|c| {
            let r = done.next().and_then(Result::ok);
            (
                c,
                r.unwrap_or_else(|| Err(ProbeFailed::Other(format!("{c}: the probe failed")))),
            )
        })
    });
    pick(results, err)
}

/// The cloud systemd-imdsd is set up for, where it serves (`GetVendorInfo` needs no polkit);
/// what it said otherwise goes in `err`.
fn vendor_detection(
    imdsd: &crate::imds::imdsd::Imdsd,
    timeout: Duration,
    err: &mut DetectError,
) -> Option<Detection> {
    if !imdsd.present() {
        return None;
    }
    match imdsd.vendor_info(timeout) {
        Ok(v) => match v.cloud() {
            Some(cloud) => Some(Detection {
                cloud,
                how: format!(
                    "systemd-imdsd's GetVendorInfo: vendor {}, data URL {}",
                    v.name, v.data_url
                ),
            }),
            None => {
                err.tried.push(format!(
                    "systemd-imdsd: vendor {} (not a cloud nthd reads)",
                    v.name
                ));
                None
            }
        },
        Err(e) => {
            err.tried.push(format!("systemd-imdsd: {e}"));
            None
        }
    }
}

/// The first probe that answered, in the order given (most specific first); else `err` with
/// what each probe found.
fn pick(
    results: [(Cloud, Result<String, ProbeFailed>); 5],
    mut err: DetectError,
) -> Result<Detection, DetectError> {
    let mut others = 0;
    for (cloud, r) in results {
        match r {
            Ok(how) => {
                return Ok(Detection {
                    cloud,
                    how: format!("probe: {how}"),
                })
            }
            Err(ProbeFailed::Other(e)) => {
                err.tried.push(e);
                others += 1;
            }
            Err(ProbeFailed::Blocked(e)) => {
                err.tried.push(format!("{cloud}: {e}"));
                err.blocked.get_or_insert(e);
            }
        }
    }
    // Named alone only when it stopped every probe (NTHD_IMDS_ENDPOINT at a dropped address).
    if others > 0 {
        err.blocked = None;
    }
    Err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dmi(vendor: &str, product: &str, tag: &str) -> Dmi {
        let s = |v: &str| (!v.is_empty()).then(|| v.to_string());
        Dmi {
            sys_vendor: s(vendor),
            product_name: s(product),
            board_vendor: None,
            chassis_asset_tag: s(tag),
            hypervisor_uuid: None,
        }
    }

    #[test]
    fn dmi_recognises_each_cloud() {
        assert_eq!(
            dmi("Amazon EC2", "m5.large", "").cloud().unwrap().cloud,
            Cloud::Aws
        );
        assert_eq!(
            dmi("Google", "Google Compute Engine", "")
                .cloud()
                .unwrap()
                .cloud,
            Cloud::Gcp
        );
        assert_eq!(
            dmi("Microsoft Corporation", "Virtual Machine", AZURE_ASSET_TAG)
                .cloud()
                .unwrap()
                .cloud,
            Cloud::Azure
        );
        assert_eq!(
            dmi("Alibaba Cloud", "Alibaba Cloud ECS", "")
                .cloud()
                .unwrap()
                .cloud,
            Cloud::Alibaba
        );
        for vendor in ["Tencent Cloud", "tencent cloud", "TENCENT CLOUD"] {
            let d = dmi(vendor, "CVM", "").cloud().unwrap();
            assert_eq!(d.cloud, Cloud::Tencent, "{vendor}");
            assert!(d.how.contains(vendor), "{}", d.how);
        }
        // Only sys_vendor counts for Tencent.
        assert!(dmi("QEMU", "Tencent Cloud CVM", "").cloud().is_none());
        // Hyper-V on premises is not Azure.
        assert!(dmi("Microsoft Corporation", "Virtual Machine", "0000")
            .cloud()
            .is_none());
        assert!(dmi("QEMU", "Standard PC", "").cloud().is_none());
        assert!(Dmi::default().cloud().is_none());
        let xen = Dmi {
            hypervisor_uuid: Some("ec2e1916-9099-7caf-fd21-012345abcdef".into()),
            ..Dmi::default()
        };
        assert_eq!(xen.cloud().unwrap().cloud, Cloud::Aws);
    }

    #[test]
    fn dmi_is_read_from_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("sys_vendor"), "Amazon EC2\n").unwrap();
        let d = Dmi::read(dir.path(), &dir.path().join("missing"));
        assert_eq!(d.sys_vendor.as_deref(), Some("Amazon EC2"));
        assert!(d.product_name.is_none());
        assert_eq!(d.cloud().unwrap().cloud, Cloud::Aws);
    }

    #[test]
    fn unknown_cloud_error_lists_what_was_tried() {
        // Nothing listens on port 9 of loopback: every probe fails fast.
        let e = detect(
            &Dmi::default(),
            None,
            Some("http://127.0.0.1:9"),
            Duration::from_millis(300),
            None,
        )
        .unwrap_err();
        let s = e.to_string();
        for want in [
            "DMI",
            "aws:",
            "gcp:",
            "azure:",
            "alibaba:",
            "tencent:",
            "NTHD_PROVIDER",
        ] {
            assert!(s.contains(want), "{want} missing from {s}");
        }
    }

    #[test]
    fn probes_the_unit_drops_are_named_once_as_the_cause() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}", silent.local_addr().unwrap());
        let deny = |allow: &str| {
            Some(Arc::new(
                IpPolicy::parse("nthd.service", "any", allow).unwrap(),
            ))
        };
        let t = Duration::from_millis(300);
        let e = detect(&Dmi::default(), None, Some(&endpoint), t, deny(""))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("cannot tell which cloud this is: no answer from http://127.0.0.1:")
                && e.contains("the unit nthd.service's IP allow-list blocks 127.0.0.1")
                && e.matches("IPAddressAllow=127.0.0.1").count() == 1
                && !e.contains("slow or throttling"),
            "{e}"
        );
        // Allowed: the old list of what was tried.
        let e = detect(&Dmi::default(), None, Some(&endpoint), t, deny("localhost"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("slow or throttling") && e.contains("aws:"),
            "{e}"
        );
    }

    #[test]
    fn every_default_probe_goes_to_an_address_and_tencent_to_169_254_0_23() {
        let opts = ClientOptions::default();
        let url = |c: Cloud, endpoint: Option<&str>| {
            ImdsClient::new(probe_base(c, endpoint), opts.clone())
                .unwrap()
                .url(probe_request(c).1)
        };
        assert_eq!(
            url(Cloud::Tencent, None),
            "http://169.254.0.23/latest/meta-data/"
        );
        // No default needs DNS: a host name would be blocked by the unit's IPAddressDeny=any.
        for c in Cloud::ALL {
            let host = probe_base(c, None).trim_start_matches("http://");
            assert!(
                host.parse::<std::net::IpAddr>().is_ok(),
                "{c}'s probe goes to {host}, not an address"
            );
        }
        // NTHD_IMDS_ENDPOINT still sends every probe, Tencent's too, to the one it names.
        assert_eq!(
            url(Cloud::Tencent, Some("http://metadata.tencentyun.com")),
            "http://metadata.tencentyun.com/latest/meta-data/"
        );
    }

    fn mock(routes: &[&str]) -> nthd_testkit::imds::MockImds {
        use nthd_testkit::imds::{Config, MockImds, Response, TokenMode};
        let m = MockImds::builder()
            .listen("127.0.0.1:0")
            .config(Config {
                // The AWS token PUT is refused, as on a cloud that is not AWS.
                aws_token: TokenMode::Refused,
                ..Config::default()
            })
            .start_blocking()
            .unwrap();
        for r in routes {
            m.set(r, Response::text(200, "instance-id\nlocal-ipv4\n"));
        }
        m
    }

    /// Detection by the probes alone (no DMI, no sandbox), every probe to `url`.
    fn probe_only(url: &str) -> Result<Detection, DetectError> {
        detect(
            &Dmi::default(),
            None,
            Some(url),
            Duration::from_secs(2),
            None,
        )
    }

    /// Where systemd-imdsd serves, its `GetVendorInfo` names the cloud before any probe (which
    /// a locked route would refuse anyway), and the detection says so.
    #[test]
    fn systemd_imdsd_names_the_cloud_before_the_probes() {
        let dir = tempfile::tempdir().unwrap();
        let (sock, calls) = crate::imds::imdsd::tests::fake_imdsd(dir.path(), &[]);
        let imdsd = crate::imds::imdsd::Imdsd::new(sock, dir.path().into());
        let t = Duration::from_millis(300);
        let d = detect(
            &Dmi::default(),
            Some(&imdsd),
            Some("http://127.0.0.1:9"),
            t,
            None,
        )
        .unwrap();
        assert_eq!(d.cloud, Cloud::Aws);
        assert!(
            d.how.contains("GetVendorInfo: vendor amazon-ec2"),
            "{}",
            d.how
        );
        assert_eq!(calls.lock().unwrap().len(), 1, "one call, no Get");
        // Without the socket: the probes, as before.
        let gone = crate::imds::imdsd::Imdsd::new(dir.path().join("none"), dir.path().into());
        let e = detect(
            &Dmi::default(),
            Some(&gone),
            Some("http://127.0.0.1:9"),
            t,
            None,
        );
        assert!(e.is_err());
    }

    #[test]
    fn tencent_is_found_by_its_meta_data_directory() {
        let m = mock(&["/latest/meta-data/"]);
        let d = probe_only(&m.url()).unwrap();
        assert_eq!(d.cloud, Cloud::Tencent, "{d:?}");
        assert!(d.how.contains("/latest/meta-data/"), "{}", d.how);
        let probe = m.requests_for("/latest/meta-data/");
        assert_eq!(probe.len(), 1);
        assert_eq!(probe[0].method, "GET");
    }

    #[test]
    fn the_tencent_probe_is_the_least_specific() {
        // Alibaba answers the meta-data directory too: its own probe wins.
        let m = mock(&["/latest/meta-data/", "/latest/meta-data/instance-id"]);
        let d = probe_only(&m.url()).unwrap();
        assert_eq!(d.cloud, Cloud::Alibaba, "{d:?}");
        // A 404 on the directory is not Tencent.
        let m = mock(&[]);
        let e = probe_only(&m.url()).unwrap_err().to_string();
        assert!(e.contains("tencent: ") && e.contains("HTTP 404"), "{e}");
    }
}
