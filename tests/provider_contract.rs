//! The provider contract: the same cases for all five clouds against the in-process mock IMDS.
//! Each cloud is a small description ([`Contract`]): how its provider is built on a base URL,
//! what a quiet machine serves, the routes of one notice, the identity keys and their hostile
//! answers. What only one cloud does stays in its own tests/provider_<cloud>.rs.
#![allow(clippy::unwrap_used)] // a test's unwrap is its failure report

mod common;

use std::time::{Duration, Instant};

use common::provider::{
    self as shared, client, kinds, mock_imds, nothing_listening, observe_until,
};
use nthd::testing::imds::{ImdsClient, ImdsError};
use nthd::testing::notice::{Cloud, Identity, Lifecycle, NoticeKind};
use nthd::testing::provider::{self, Provider};
use nthd_testkit::imds::{identity as values, Config, Fault, MockImds, Response, TokenMode};

/// Mock routes: a path and its answer.
type Routes = Vec<(&'static str, Response)>;

/// What the contract needs to know about one cloud.
trait Contract {
    /// The provider type.
    type P: Provider;
    /// The cloud it reports.
    const CLOUD: Cloud;
    /// The sources the first read of a quiet machine reads, sorted.
    const SOURCES: &'static [&'static str];
    /// The identity keys, in the order the provider reads them.
    const IDENTITY_PATHS: &'static [&'static str];
    /// Whether the provider long-polls: its next read is due at once, and waits at the service.
    const LONG_POLLS: bool = false;
    /// The provider on `client`, the tests' client for the mock.
    fn build(client: ImdsClient) -> Self::P;
    /// The mock's settings for this cloud (which tokens it requires).
    fn config() -> Config {
        Config {
            // This cloud sends no AWS token: AWS enforcement must be off for /latest/ reads.
            aws_token: TokenMode::Optional,
            ..Config::default()
        }
    }
    /// What a machine with nothing scheduled serves besides 404s.
    fn quiet() -> Routes {
        Vec::new()
    }
    /// The routes of one notice, and its kind.
    fn notice() -> (Routes, NoticeKind);
    /// The identity the mock's default values give.
    fn identity() -> Identity;
    /// Hostile identity answers, and the identity left after them.
    fn hostile() -> (Routes, Identity);
}

// ---------------------------------------------------------------------------------- the cases

/// The cloud's provider on the mock at `base`.
fn build<C: Contract>(base: &str) -> C::P {
    C::build(client(base))
}

/// The mock with this cloud's settings, serving `routes` (and its identity when asked).
fn serve<C: Contract>(routes: Routes, identity: bool) -> MockImds {
    let m = mock_imds(C::config(), identity.then(|| C::CLOUD.name()));
    for (path, r) in routes {
        m.set(path, r);
    }
    m
}

/// Nothing scheduled is an answer, not an error: every source fresh, no notice.
fn not_found_is_no_notice<C: Contract>() {
    let m = serve::<C>(C::quiet(), false);
    let mut p = build::<C>(&m.url());
    assert_eq!(<C::P as Provider>::CLOUD, C::CLOUD);
    let started = Instant::now();
    let o = p.observe();
    assert!(o.ok(), "{:?}", o.errors);
    assert!(o.notices.is_empty(), "{o:?}");
    let mut fresh = o.fresh.clone();
    fresh.sort();
    assert_eq!(fresh, C::SOURCES);
    // A poller's next read is an interval after this one began, however long the read took
    // (an emulated, loaded machine can take longer than the interval); a long poll's is now.
    let due = p.next_due();
    if C::LONG_POLLS {
        assert!(
            due <= Instant::now(),
            "a long poll waits at the service, not here"
        );
    } else {
        assert!(due > started, "a poller waits here for its interval");
    }
}

/// A notice served is observed with its kind; withdrawn, it is gone from a fresh read.
fn observe_until_a_notice_and_its_withdrawal<C: Contract>() {
    let m = serve::<C>(C::quiet(), false);
    let mut p = build::<C>(&m.url());
    assert!(p.observe().notices.is_empty());
    let (routes, kind) = C::notice();
    let paths: Vec<&str> = routes.iter().map(|(path, _)| *path).collect();
    for (path, r) in routes {
        m.set(path, r);
    }
    let o = observe_until(&mut p, |o| !o.notices.is_empty());
    assert!(o.ok(), "{:?}", o.errors);
    assert_eq!(kinds(&o), [kind]);
    for path in paths {
        m.clear(path);
    }
    for (path, r) in C::quiet() {
        m.set(path, r);
    }
    let o = observe_until(&mut p, |o| o.notices.is_empty());
    assert!(o.ok() && !o.fresh.is_empty(), "{o:?}");
}

/// The mock's default values are read as they are.
fn identity_is_read<C: Contract>() {
    let m = serve::<C>(Vec::new(), true);
    let mut p = build::<C>(&m.url());
    assert_eq!(p.identity().unwrap(), C::identity());
}

/// A hostile value is dropped, not cut down, and the clean keys are kept; with nothing clean
/// left the read is an error.
fn hostile_values_are_dropped<C: Contract>() {
    let m = serve::<C>(Vec::new(), true);
    let (routes, left) = C::hostile();
    for (path, r) in routes {
        m.set(path, r);
    }
    let mut p = build::<C>(&m.url());
    assert_eq!(p.identity().unwrap(), left);
    for path in C::IDENTITY_PATHS {
        m.set(path, Response::text(200, "value\r\nX-Injected: 1"));
    }
    let e = p.identity().unwrap_err();
    assert!(matches!(e, ImdsError::Malformed { .. }), "{e:?}");
}

/// No service, a hanging one, one without any key: errors, each saying why.
fn nothing_answering_is_an_error<C: Contract>() {
    let mut p = build::<C>(&nothing_listening());
    let e = p.identity().unwrap_err();
    assert!(matches!(e, ImdsError::Connect { .. }), "{e:?}");
    let o = p.observe();
    assert!(
        !o.ok() && o.notices.is_empty() && o.fresh.is_empty(),
        "{o:?}"
    );
    let m = serve::<C>(Vec::new(), true);
    for path in C::IDENTITY_PATHS {
        m.set(path, Response::fault(Fault::Hang));
    }
    let e = build::<C>(&m.url()).identity().unwrap_err();
    assert!(matches!(e, ImdsError::Timeout { .. }), "{e:?}");
    // A look-alike service without any of the keys: the first key's 404 is the reason.
    let m = serve::<C>(Vec::new(), false);
    let e = build::<C>(&m.url()).identity().unwrap_err();
    assert!(
        matches!(&e, ImdsError::Status { status: 404, url, .. } if url.contains(C::IDENTITY_PATHS[0])),
        "{e:?}"
    );
    for path in C::IDENTITY_PATHS {
        assert_eq!(
            m.count(path),
            1,
            "every key is tried before giving up: {path}"
        );
    }
}

/// Runs every case for each cloud, as `<cloud>::<case>`. The providers block the test's
/// thread; the mock answers from its own.
macro_rules! contract {
    ($($module:ident: $cloud:ident),* $(,)?) => {$(
        mod $module {
            #[test]
            fn not_found_is_no_notice() {
                super::not_found_is_no_notice::<super::$cloud>();
            }
            #[test]
            fn observe_until_a_notice_and_its_withdrawal() {
                super::observe_until_a_notice_and_its_withdrawal::<super::$cloud>();
            }
            #[test]
            fn identity_is_read() {
                super::identity_is_read::<super::$cloud>();
            }
            #[test]
            fn hostile_values_are_dropped() {
                super::hostile_values_are_dropped::<super::$cloud>();
            }
            #[test]
            fn nothing_answering_is_an_error() {
                super::nothing_answering_is_an_error::<super::$cloud>();
            }
        }
    )*};
}

contract!(
    aws: AwsCase,
    gcp: GcpCase,
    azure: AzureCase,
    alibaba: AlibabaCase,
    tencent: TencentCase,
);

// ------------------------------------------------------------------------------- the clouds

/// The identity with only `lifecycle` left.
fn only_lifecycle(lifecycle: Option<Lifecycle>) -> Identity {
    Identity {
        lifecycle,
        ..Identity::default()
    }
}

struct AwsCase;

impl Contract for AwsCase {
    type P = provider::aws::Aws;
    const CLOUD: Cloud = Cloud::Aws;
    const SOURCES: &'static [&'static str] = &[
        "aws/autoscaling/target-lifecycle-state",
        "aws/events/maintenance/scheduled",
        "aws/events/recommendations/rebalance",
        "aws/spot/instance-action",
    ];
    const IDENTITY_PATHS: &'static [&'static str] = &[
        provider::aws::INSTANCE_ID_PATH,
        provider::aws::INSTANCE_TYPE_PATH,
        provider::aws::ZONE_PATH,
        provider::aws::LIFE_CYCLE_PATH,
    ];
    fn build(client: ImdsClient) -> provider::aws::Aws {
        let opts = provider::aws::AwsOptions {
            poll_interval: Duration::from_millis(100),
            ..provider::aws::AwsOptions::default()
        };
        shared::aws(client, opts)
    }
    fn config() -> Config {
        // IMDSv2 only: every read must carry the token.
        Config::default()
    }
    fn notice() -> (Routes, NoticeKind) {
        let body = r#"{"action":"terminate","time":"2030-01-01T00:02:00Z"}"#;
        let routes = vec![(provider::aws::SPOT_PATH, Response::json(200, body))];
        (routes, NoticeKind::SpotTerminate)
    }
    fn identity() -> Identity {
        Identity {
            instance_id: Some(values::AWS_INSTANCE_ID.into()),
            instance_type: Some(values::AWS_INSTANCE_TYPE.into()),
            zone: Some(values::AWS_ZONE.into()),
            lifecycle: Some(Lifecycle::Spot),
        }
    }
    fn hostile() -> (Routes, Identity) {
        let routes = vec![
            // Larger than the client's body cap.
            (provider::aws::INSTANCE_TYPE_PATH, Response::huge(1 << 20)),
            (
                provider::aws::ZONE_PATH,
                Response::text(200, "<html><body><h1>404 Not Found</h1></body></html>"),
            ),
            (
                provider::aws::INSTANCE_ID_PATH,
                Response::text(200, "i-0123\x1b[2J\nFAKE: line"),
            ),
        ];
        (routes, only_lifecycle(Some(Lifecycle::Spot)))
    }
}

struct GcpCase;

impl Contract for GcpCase {
    type P = provider::gcp::Gcp;
    const CLOUD: Cloud = Cloud::Gcp;
    const SOURCES: &'static [&'static str] =
        &["gcp/instance/maintenance-event", "gcp/instance/preempted"];
    const IDENTITY_PATHS: &'static [&'static str] = &[
        provider::gcp::INSTANCE_ID_PATH,
        provider::gcp::MACHINE_TYPE_PATH,
        provider::gcp::ZONE_PATH,
        provider::gcp::PROVISIONING_MODEL_PATH,
        provider::gcp::PREEMPTIBLE_PATH,
    ];
    const LONG_POLLS: bool = true;
    fn build(client: ImdsClient) -> provider::gcp::Gcp {
        let opts = provider::Timings {
            gcp_wait: Duration::from_secs(1),
            poll: Duration::from_millis(100),
            ..provider::Timings::defaults(nthd::testing::notice::Cloud::Gcp)
        };
        shared::gcp(client, opts)
    }
    fn notice() -> (Routes, NoticeKind) {
        let routes = vec![(provider::gcp::PREEMPTED_PATH, Response::text(200, "TRUE"))];
        (routes, NoticeKind::GcpPreempt)
    }
    fn identity() -> Identity {
        // Resource paths cut to their last segment.
        Identity {
            instance_id: Some(values::GCP_INSTANCE_ID.into()),
            instance_type: Some("e2-standard-4".into()),
            zone: Some("us-central1-a".into()),
            lifecycle: Some(Lifecycle::Spot),
        }
    }
    fn hostile() -> (Routes, Identity) {
        let routes = vec![
            (
                provider::gcp::ZONE_PATH,
                Response::text(200, "projects/1/zones/<script>x</script>"),
            ),
            (provider::gcp::INSTANCE_ID_PATH, Response::huge(1 << 20)),
            // An empty last segment is no value.
            (
                provider::gcp::MACHINE_TYPE_PATH,
                Response::text(200, "projects/1/machineTypes/"),
            ),
        ];
        (routes, only_lifecycle(Some(Lifecycle::Spot)))
    }
}

struct AzureCase;

impl Contract for AzureCase {
    type P = provider::azure::Azure;
    const CLOUD: Cloud = Cloud::Azure;
    const SOURCES: &'static [&'static str] = &["azure/scheduledevents"];
    const IDENTITY_PATHS: &'static [&'static str] = &[provider::azure::COMPUTE_PATH];
    fn build(client: ImdsClient) -> provider::azure::Azure {
        shared::azure(client, Duration::from_millis(50))
    }
    /// Azure always serves its Scheduled Events document: nothing scheduled is an empty one.
    fn quiet() -> Routes {
        vec![
            (provider::azure::NAME_PATH, Response::text(200, "vm1")),
            (
                provider::azure::EVENTS_PATH,
                Response::json(200, r#"{"DocumentIncarnation": 1, "Events": []}"#),
            ),
        ]
    }
    fn notice() -> (Routes, NoticeKind) {
        let event = serde_json::json!({
            "EventId": "E-PREEMPT",
            "EventType": "Preempt",
            "ResourceType": "VirtualMachine",
            "Resources": ["vm1"],
            "EventStatus": "Scheduled",
            "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
            "Description": "test event",
            "EventSource": "Platform",
            "DurationInSeconds": -1,
        });
        let doc = serde_json::json!({"DocumentIncarnation": 2, "Events": [event]});
        let routes = vec![(
            provider::azure::EVENTS_PATH,
            Response::json(200, doc.to_string()),
        )];
        (routes, NoticeKind::AzurePreempt)
    }
    fn identity() -> Identity {
        // One document; the zone is the location and the zone number.
        Identity {
            instance_id: Some(values::AZURE_VM_ID.into()),
            instance_type: Some(values::AZURE_VM_SIZE.into()),
            zone: Some("westeurope-1".into()),
            lifecycle: Some(Lifecycle::Spot),
        }
    }
    fn hostile() -> (Routes, Identity) {
        let doc = serde_json::json!({
            "vmId": "x".repeat(nthd::testing::notice::MAX_IDENTITY + 1),
            "vmSize": "Standard_D2s_v5\u{1b}[31m",
            "location": "<html>",
            "zone": "1",
            "priority": "Spot",
        });
        let routes = vec![(
            provider::azure::COMPUTE_PATH,
            Response::json(200, doc.to_string()),
        )];
        (routes, only_lifecycle(Some(Lifecycle::Spot)))
    }
}

struct AlibabaCase;

impl Contract for AlibabaCase {
    type P = provider::alibaba::Alibaba;
    const CLOUD: Cloud = Cloud::Alibaba;
    const SOURCES: &'static [&'static str] = &["alibaba/spot/termination-time"];
    const IDENTITY_PATHS: &'static [&'static str] = &[
        provider::alibaba::INSTANCE_ID_PATH,
        provider::alibaba::INSTANCE_TYPE_PATH,
        provider::alibaba::ZONE_PATH,
    ];
    fn build(client: ImdsClient) -> provider::alibaba::Alibaba {
        shared::alibaba(client, Duration::from_millis(50))
    }
    fn notice() -> (Routes, NoticeKind) {
        let body = "2015-01-05T18:02:00Z";
        let routes = vec![(provider::alibaba::SPOT_PATH, Response::text(200, body))];
        (routes, NoticeKind::AlibabaSpot)
    }
    fn identity() -> Identity {
        // Alibaba gives no lifecycle key.
        Identity {
            instance_id: Some(values::ALIBABA_INSTANCE_ID.into()),
            instance_type: Some(values::ALIBABA_INSTANCE_TYPE.into()),
            zone: Some(values::ALIBABA_ZONE.into()),
            lifecycle: None,
        }
    }
    fn hostile() -> (Routes, Identity) {
        let routes = vec![
            (provider::alibaba::INSTANCE_ID_PATH, Response::huge(1 << 20)),
            (
                provider::alibaba::INSTANCE_TYPE_PATH,
                Response::text(200, "<!DOCTYPE html><title>Error</title>"),
            ),
        ];
        let left = Identity {
            zone: Some(values::ALIBABA_ZONE.into()),
            ..Identity::default()
        };
        (routes, left)
    }
}

struct TencentCase;

impl Contract for TencentCase {
    type P = provider::tencent::Tencent;
    const CLOUD: Cloud = Cloud::Tencent;
    const SOURCES: &'static [&'static str] = &["tencent/spot/termination-time"];
    const IDENTITY_PATHS: &'static [&'static str] = &[
        provider::tencent::INSTANCE_ID_PATH,
        provider::tencent::INSTANCE_TYPE_PATH,
        provider::tencent::ZONE_PATH,
        provider::tencent::CHARGE_TYPE_PATH,
    ];
    fn build(client: ImdsClient) -> provider::tencent::Tencent {
        shared::tencent(client, Duration::from_millis(50))
    }
    fn notice() -> (Routes, NoticeKind) {
        let body = "2018-08-18 12:05:33";
        let routes = vec![(provider::tencent::SPOT_PATH, Response::text(200, body))];
        (routes, NoticeKind::TencentSpot)
    }
    fn identity() -> Identity {
        Identity {
            instance_id: Some(values::TENCENT_INSTANCE_ID.into()),
            instance_type: Some(values::TENCENT_INSTANCE_TYPE.into()),
            zone: Some(values::TENCENT_ZONE.into()),
            lifecycle: Some(Lifecycle::Spot),
        }
    }
    fn hostile() -> (Routes, Identity) {
        let routes = vec![
            (provider::tencent::ZONE_PATH, Response::huge(1 << 20)),
            (
                provider::tencent::INSTANCE_TYPE_PATH,
                Response::text(200, "S5.MEDIUM4\u{202e}evil"),
            ),
            (
                provider::tencent::INSTANCE_ID_PATH,
                Response::text(200, "   \n"),
            ),
        ];
        (routes, only_lifecycle(Some(Lifecycle::Spot)))
    }
}
