//! SKELETON — replaced by the real provider.
use super::{Cloud, Observation, Provider};
use crate::imds::ImdsClient;
use std::time::Instant;
#[derive(Clone, Debug, Default)]
pub struct GcpOptions {
    pub wait: std::time::Duration,
    pub retry_interval: std::time::Duration,
}
pub struct Gcp {
    _c: ImdsClient,
    _o: GcpOptions,
}
impl Gcp {
    pub fn new(c: ImdsClient, o: GcpOptions) -> Self {
        Gcp { _c: c, _o: o }
    }
}
impl Provider for Gcp {
    fn cloud(&self) -> Cloud {
        Cloud::Gcp
    }
    fn describe(&self) -> String {
        String::new()
    }
    async fn observe(&mut self) -> Observation {
        Observation::default()
    }
    fn next_due(&self) -> Instant {
        Instant::now() + std::time::Duration::from_secs(1)
    }
}
