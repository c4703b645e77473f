//! SKELETON — replaced by the real provider.
use super::{Cloud, Observation, Provider};
use crate::imds::ImdsClient;
use std::time::Instant;
#[derive(Clone, Debug, Default)]
pub struct AlibabaOptions {
    pub poll_interval: std::time::Duration,
}
pub struct Alibaba {
    _c: ImdsClient,
    _o: AlibabaOptions,
}
impl Alibaba {
    pub fn new(c: ImdsClient, o: AlibabaOptions) -> Self {
        Alibaba { _c: c, _o: o }
    }
}
impl Provider for Alibaba {
    fn cloud(&self) -> Cloud {
        Cloud::Alibaba
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
