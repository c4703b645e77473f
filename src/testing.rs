//! The library's surface for nthd's own integration tests, the testkit's benchmark and the fuzz
//! targets: exactly the items they use, by the paths they always had (`nthd::testing::notice::
//! Notice` for `crate::notice::Notice`). Not an API: the modules themselves are `pub(crate)`,
//! so `unreachable_pub` flags every `pub` that nothing outside the crate can reach, and an item
//! joins this list only when a test needs it.
#![allow(missing_docs)]

/// The Auto Scaling completion, driven as the daemon's drain watcher drives it.
pub mod asg {
    use std::time::{Duration, Instant};

    use crate::asg::Lifecycle;
    use crate::config::Options;

    /// What `complete` gave: attempts, group, hook, result.
    pub type Completed = (u32, String, String, &'static str);

    /// `Lifecycle::new`, `prepare` and `complete` within `within`; `None` when completion is
    /// off; an error as the message nthd would log.
    pub async fn complete(opts: &Options, within: Duration) -> Option<Result<Completed, String>> {
        let mut lc = Lifecycle::new(opts.asg_settings()?)?;
        let until = Instant::now() + within;
        Some(
            lc.complete(until)
                .await
                .map(|c| (c.attempts, c.group, c.hook, c.result))
                .map_err(|e| e.to_string()),
        )
    }

    /// `prepare`, then `heartbeat_every(budget)`, then one `heartbeat`.
    pub async fn heartbeat(opts: &Options, budget: Duration) -> Result<Option<Duration>, String> {
        let mut lc = opts
            .asg_settings()
            .and_then(Lifecycle::new)
            .ok_or("completion is off")?;
        lc.prepare().await.map_err(|e| e.to_string())?;
        let every = lc.heartbeat_every(budget);
        lc.heartbeat().await.map_err(|e| e.to_string())?;
        Ok(every)
    }
}

pub mod assets {
    pub use crate::assets::render;
}

pub mod check {
    use std::time::Duration;

    use crate::notice::{Cloud, Lifecycle};

    /// `nthd check`'s drain-budget verdict on `budget`: the status (`pass`, `fail`, `warn`,
    /// `info`) and the fix it names; `gcp_notice` is `NTHD_GCP_PREEMPTION_NOTICE`.
    pub fn drain_verdict(
        cloud: Option<Cloud>,
        lifecycle: Option<Lifecycle>,
        gcp_notice: Duration,
        budget: Duration,
    ) -> (String, Option<String>) {
        let lead = cloud.map_or(Duration::from_secs(120), |c| {
            crate::timings::Timings {
                gcp_notice,
                ..crate::timings::Timings::defaults(c)
            }
            .notice_lead()
        });
        let (st, fix) = crate::check::drain_verdict(cloud, lifecycle, lead, budget);
        (format!("{st:?}").to_lowercase(), fix)
    }
}

pub mod config {
    pub use crate::config::Cli;
}

pub mod imds {
    pub use crate::imds::imdsd::Vendor;
    pub use crate::imds::{ClientOptions, ImdsClient, ImdsError, Via};

    /// One answer as the metadata reader reads it from `pieces` (each what one read(2)
    /// returns) with a body cap of `cap`: status, ETag, body and whether its connection would
    /// be kept; `Ok(None)` when nothing came; an error as text. Also the most memory the
    /// answer's buffer took, and the most it may take.
    pub fn read_answer(pieces: &[&[u8]], cap: usize) -> (ReadAnswer, usize, usize) {
        crate::imds::read_pieces(pieces, cap)
    }

    /// What [`read_answer`] gives.
    pub type ReadAnswer = crate::imds::PiecesAnswer;
}

pub mod logging {
    pub use crate::logging::{clean_id, ID_PART_MAX};
}

pub mod logind {
    pub use crate::logind::Logind;
}

pub mod notice {
    pub use crate::notice::{
        Cloud, Identity, Lifecycle, Notice, NoticeId, NoticeKind, NoticeStatus, SourceId, KINDS,
        MAX_IDENTITY, RAW_CAP,
    };
}

pub mod policy {
    pub use crate::policy::{
        decide, default_action, Action, Decision, Effect, Planner, PolicyConfig, PowerAction, When,
    };
}

pub mod provider {
    pub use crate::provider::{Observation, Provider};
    pub use crate::timings::Timings;

    pub mod alibaba {
        pub use crate::provider::alibaba::{
            parse_termination_time, Alibaba, INSTANCE_ID_PATH, INSTANCE_TYPE_PATH, SPOT_PATH,
            TOKEN_PATH, ZONE_PATH,
        };
    }

    pub mod aws {
        pub use crate::provider::aws::{
            parse_asg, parse_rebalance, parse_scheduled, parse_spot, Aws, AwsOptions, ASG_PATH,
            INSTANCE_ID_PATH, INSTANCE_TYPE_PATH, LIFE_CYCLE_PATH, REBALANCE_PATH, SCHEDULED_PATH,
            SOURCE_PATHS, SPOT_PATH, ZONE_PATH,
        };
    }

    pub mod azure {
        pub use crate::provider::azure::{
            parse_document, parse_events, parse_vm_name, Azure, COMPUTE_PATH, EVENTS_PATH,
            NAME_PATH,
        };
    }

    pub mod detect {
        pub use crate::provider::detect::{Dmi, AZURE_ASSET_TAG};
    }

    pub mod gcp {
        pub use crate::provider::gcp::{
            parse_maintenance_event, parse_preempted, parse_upcoming_maintenance, Gcp,
            INSTANCE_ID_PATH, MACHINE_TYPE_PATH, MAINTENANCE_PATH, PREEMPTED_PATH,
            PREEMPTIBLE_PATH, PROVISIONING_MODEL_PATH, RECHECK_LEAD, UPCOMING_PATH, ZONE_PATH,
        };
    }

    pub mod tencent {
        pub use crate::provider::tencent::{
            parse_termination_time, Tencent, CHARGE_TYPE_PATH, INSTANCE_ID_PATH,
            INSTANCE_TYPE_PATH, SPOT_PATH, UTC_OFFSET_SECS, ZONE_PATH,
        };
    }
}

pub mod sandbox {
    pub use crate::sandbox::IpPolicy;
}

pub mod state {
    pub use crate::state::{State, RETENTION};
}

pub mod timefmt {
    pub use crate::timefmt::{
        format_aws, format_duration, format_rfc1123, format_rfc3339, parse_any, parse_duration,
        parse_http_like, parse_local_datetime, parse_rfc3339, relative, MAX_UNIX_SECS,
    };
}

pub mod webhook {
    pub use crate::webhook::{
        parse_url, plain_http_warning, probe, probe_with_headers, ActionResult, Context, Event,
        ProbeOutcome, SecretHeaders, WebhookFormat, WebhookOptions, Webhooks,
    };
}

pub mod varlink {
    pub use crate::varlink::{decode, Answer};
}

/// The poll loop's sleep (a timerfd re-armed for each deadline), for the testkit's
/// `nthd-stack-floor`, which times its reads as nthd does.
pub mod timer {
    /// [`crate::timer::Deadline`] behind a public face.
    pub struct Tick(crate::timer::Deadline);

    impl Tick {
        /// Must be called inside the runtime.
        #[allow(clippy::new_without_default)]
        pub fn new() -> Tick {
            Tick(crate::timer::Deadline::new())
        }

        /// Sleeps until `when`.
        pub async fn sleep_until(&mut self, when: tokio::time::Instant) {
            self.0.sleep_until(when).await;
        }
    }
}

pub mod settings {
    /// `settings/env_file.rs`'s reading of a settings file's bytes: the assignments in order,
    /// and the warning of each assignment skipped.
    pub fn parse_env_file(bytes: &[u8]) -> (Vec<(String, String)>, Vec<String>) {
        let p = crate::settings::env_file::parse(std::path::Path::new("/etc/default/nthd"), bytes);
        let skipped = p.skipped.iter().map(ToString::to_string).collect();
        (p.pairs, skipped)
    }
}

pub use crate::files::mkfifo;
