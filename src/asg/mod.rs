//! Placeholder until the Auto Scaling client lands (h-asg).
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
#[error("Auto Scaling: {0}")]
pub(crate) struct AsgError(String);

pub(crate) struct Lifecycle;
pub(crate) struct Completed {
    pub(crate) attempts: u32,
    pub(crate) group: String,
    pub(crate) hook: String,
    pub(crate) result: &'static str,
}
impl Lifecycle {
    pub(crate) fn from_options(_opts: &crate::config::Options) -> Option<Lifecycle> {
        None
    }
    pub(crate) async fn prepare(&mut self) -> Result<(), AsgError> {
        Ok(())
    }
    pub(crate) fn heartbeat_every(&self, _b: Duration) -> Option<Duration> {
        None
    }
    pub(crate) async fn heartbeat(&mut self) -> Result<(), AsgError> {
        Ok(())
    }
    pub(crate) async fn complete(&mut self, _until: Instant) -> Result<Completed, AsgError> {
        Err(AsgError("off".into()))
    }
}
