//! Startup: spawn → `READY=1` on the notify socket, sequential starts.

use std::time::Duration;

use crate::args::Args;
use crate::world::{Cloud, Subject, World};

/// Milliseconds from spawn to READY=1, one per start.
pub(crate) async fn startup(args: &Args) -> Result<Vec<f64>, String> {
    let world = World::new(Cloud::Aws).await?;
    let mut v = Vec::new();
    for i in 0..args.starts {
        let started = world
            .start(&args.nthd, Subject::nthd(Cloud::Aws))
            .await
            .map_err(|e| format!("start {}: {e}", i + 1))?;
        let took = started.took;
        drop(started);
        let _ = std::fs::remove_file(world.dir().join("notify"));
        v.push(took.as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(v)
}
