//! The real-system idle cost measured by `bench/real-idle.sh` (the packaged unit on a booted
//! Debian 12, with real logind, journald and the unit's seccomp filter), read back from its
//! JSON so the report shows it next to the in-process figures.

use std::path::Path;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct CurlLoop {
    pub every_s: u32,
    pub cpu_s_per_hour: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub(crate) struct RealIdle {
    pub label: String,
    pub nthd_version: String,
    pub window_s: f64,
    pub cpu_s_per_hour: f64,
    pub switches_per_s: f64,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
    pub imds_req_per_s: f64,
    pub curl_loop: Option<CurlLoop>,
    /// The whole file, for latest.json.
    #[serde(skip)]
    pub raw: serde_json::Value,
}

/// Reads `bench/real-idle.sh --out FILE`'s result.
pub(crate) fn load(path: &Path) -> Result<RealIdle, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let raw: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    if let Some(e) = raw.get("error").and_then(|e| e.as_str()) {
        return Err(e.to_string());
    }
    let mut r = RealIdle::deserialize(&raw).map_err(|e| format!("{}: {e}", path.display()))?;
    r.raw = raw;
    Ok(r)
}
