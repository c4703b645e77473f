//! The provider tests' one helper set: the metadata client they all use, the one place each
//! cloud's provider is built (so a change of a constructor or its options changes only these
//! lines), and the observation helpers, generic over [`Provider`].

use std::time::{Duration, Instant};

use nthd::testing::imds::{ClientOptions, ImdsClient};
use nthd::testing::notice::{Cloud, NoticeKind};
use nthd::testing::provider::alibaba::Alibaba;
use nthd::testing::provider::aws::{Aws, AwsOptions};
use nthd::testing::provider::azure::Azure;
use nthd::testing::provider::gcp::Gcp;
use nthd::testing::provider::tencent::Tencent;
use nthd::testing::provider::{Observation, Provider, Timings};
use nthd_testkit::imds::{Config, MockImds};

/// The client options of the provider tests: 500 ms to connect and to answer, so a hanging
/// mock fails a read quickly.
pub(crate) fn fast_client_options() -> ClientOptions {
    ClientOptions {
        request_timeout: Duration::from_millis(500),
        connect_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    }
}

/// A metadata client for `base` with [`fast_client_options`].
pub(crate) fn client(base: &str) -> ImdsClient {
    ImdsClient::new(base, fast_client_options()).unwrap()
}

/// The mock IMDS on a free local port with `config`, serving the identity keys of `identity`
/// (a cloud's `--provider` name) when given. It answers from a thread of its own, so a test
/// can block on a provider's reads.
pub(crate) fn mock_imds(config: Config, identity: Option<&str>) -> MockImds {
    let mut b = MockImds::builder().listen("127.0.0.1:0").config(config);
    if let Some(cloud) = identity {
        b = b.identity(cloud);
    }
    b.start_blocking().unwrap()
}

/// A base URL where nothing listens.
pub(crate) fn nothing_listening() -> String {
    format!("http://127.0.0.1:{}", super::free_port())
}

/// The AWS provider on `client`.
pub(crate) fn aws(client: ImdsClient, opts: AwsOptions) -> Aws {
    Aws::new(client, opts)
}

/// The GCP provider on `client`.
pub(crate) fn gcp(client: ImdsClient, timings: Timings) -> Gcp {
    Gcp::new(client, &timings)
}

/// The Azure provider on `client`, polling every `poll_interval`.
pub(crate) fn azure(client: ImdsClient, poll_interval: Duration) -> Azure {
    Azure::new(client, &poll_every(Cloud::Azure, poll_interval))
}

/// The Alibaba Cloud provider on `client`, polling every `poll_interval`.
pub(crate) fn alibaba(client: ImdsClient, poll_interval: Duration) -> Alibaba {
    Alibaba::new(client, &poll_every(Cloud::Alibaba, poll_interval))
}

/// The Tencent Cloud provider on `client`, polling every `poll_interval`.
pub(crate) fn tencent(client: ImdsClient, poll_interval: Duration) -> Tencent {
    Tencent::new(client, &poll_every(Cloud::Tencent, poll_interval))
}

/// The kinds of the notices observed, sorted.
pub(crate) fn kinds(o: &Observation) -> Vec<NoticeKind> {
    let mut k: Vec<_> = o.notices.iter().map(|n| n.kind).collect();
    k.sort();
    k
}

/// Observes until `f` accepts an observation (each read waits for `next_due`); fails after 5 s.
pub(crate) fn observe_until<P: Provider>(
    p: &mut P,
    f: impl Fn(&Observation) -> bool,
) -> Observation {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let due = p.next_due();
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let o = p.observe();
        if f(&o) {
            return o;
        }
        assert!(Instant::now() < deadline, "gave up waiting; last: {o:?}");
    }
}

/// Lists an AWS spot notice for `time` on `imds` and waits up to 5 s for the first `PowerOff`
/// on `logind`: the step of every test that needs a daemon to act.
pub(crate) async fn spot_notice_powers_off(
    imds: &MockImds,
    logind: &nthd_testkit::logind::FakeLogind,
    time: &str,
) -> bool {
    let body = format!(r#"{{"action":"terminate","time":"{time}"}}"#);
    imds.set(
        nthd::testing::provider::aws::SPOT_PATH,
        nthd_testkit::imds::Response::json(200, &body),
    );
    logind
        .wait_for_method("PowerOff", 1, Duration::from_secs(5))
        .await
}

/// `cloud`'s default timings, polling every `poll`.
pub(crate) fn poll_every(cloud: Cloud, poll: Duration) -> Timings {
    Timings {
        poll,
        ..Timings::defaults(cloud)
    }
}
