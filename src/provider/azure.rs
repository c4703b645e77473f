//! SKELETON — replaced by the real provider.
use super::{Cloud, Observation, Provider};
use crate::imds::ImdsClient;
use std::time::Instant;
#[derive(Clone, Debug, Default)]
pub struct AzureOptions {
    pub poll_interval: std::time::Duration,
}
pub struct Azure {
    _c: ImdsClient,
    _o: AzureOptions,
}
impl Azure {
    pub fn new(c: ImdsClient, o: AzureOptions) -> Self {
        Azure { _c: c, _o: o }
    }
}
impl Provider for Azure {
    fn cloud(&self) -> Cloud {
        Cloud::Azure
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
