//! Command line and environment. Every flag has an `NTHD_*` environment variable; the packaged
//! unit reads them from `/etc/default/nthd` (or `/etc/sysconfig/nthd`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use tracing_subscriber::filter::LevelFilter;

use crate::imds::ClientOptions;
use crate::notice::{Cloud, KindInfo, NoticeKind, KINDS};
use crate::policy::{Action, PolicyConfig};
use crate::provider::ProviderSettings;
use crate::status::command::NpdCondition;
use crate::timefmt::parse_duration;
use crate::timings::{self, Timings};

mod asg;
mod fallback;
pub(crate) use asg::{AsgComplete, AsgSettings};
pub use fallback::{degraded, parse_lenient, unknown_variables, Fallback};

/// `nthd --version`: the version, the target it was built for, and the git commit (build.rs).
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("NTHD_BUILD_TARGET"),
    ", commit ",
    env!("NTHD_GIT_COMMIT"),
    ")"
);

/// The command line: a subcommand (the daemon when none is given) and the options every
/// command takes.
#[derive(Parser, Debug)]
#[command(
    name = "nthd",
    version,
    long_version = LONG_VERSION,
    about = "Node termination handler: turns cloud interruption notices into a graceful logind power-off",
    long_about = "nthd watches the cloud's instance metadata service for interruption notices \
(AWS spot, rebalance, scheduled events and Auto Scaling; GCP preemption and maintenance; Azure \
Scheduled Events; Alibaba and Tencent Cloud spot) and asks systemd-logind to power off, so \
kubelet's Graceful Node Shutdown drains the node first. It needs no Kubernetes credentials.\n\n\
Every option can also be set with the environment variable shown; the packaged unit reads \
/etc/default/nthd."
)]
pub struct Cli {
    /// The subcommand; `None` runs the daemon.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The options, global: they may come before or after the subcommand.
    #[command(flatten)]
    pub opts: Options,
}

/// What nthd is asked to do.
#[derive(Subcommand, Debug, Clone)]
pub enum Command {
    /// Run the daemon (the default).
    Run,
    /// Read every source once, print the notices and what nthd would do, and exit.
    ///
    /// Exits 0 when the metadata service answered, 1 when it did not.
    Once {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check whether a graceful shutdown will really work on this node.
    ///
    /// Prints each check with the value found and, for every failure, the fix. Run it as the
    /// daemon's user to test the real polkit grant: sudo -u nthd nthd check. Exits 0 only when
    /// every required check passes.
    Check {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Read system files below this directory instead of / (for tests).
        #[arg(long, hide = true, default_value = "/")]
        root: PathBuf,
    },
    /// Fire drill: inject a synthetic notice into the policy and action path.
    ///
    /// Without --yes it only narrates what would happen. With --yes it carries the action out
    /// exactly as a real notice would, so kubelet's drain can be rehearsed (on a terminal it
    /// also asks for the host name).
    Simulate {
        /// The notice kind, e.g. spot-terminate, rebalance, scheduled-stop, gcp-preempt.
        #[arg(value_parser = notice_kind)]
        kind: NoticeKind,
        /// Really carry out the action.
        #[arg(long)]
        yes: bool,
        /// When the simulated platform would act (default: the kind's usual lead time).
        #[arg(long, value_parser = duration, allow_hyphen_values = true, value_name = "DURATION")]
        deadline_in: Option<Duration>,
    },
    /// Show what the daemon knows: cloud, instance, sources, notices, actions, errors.
    ///
    /// Reads the daemon's status file (/run/nthd/status.json, or NTHD_STATUS_FILE); runs as any
    /// user. Exits 0 when the file is fresh and nthd can see; 2 (unknown) when it is missing,
    /// unreadable or stale, when nthd cannot read the metadata service (blind) or an extra is
    /// disabled. With --npd it is a node-problem-detector custom plugin: exit 0 (the condition is
    /// False), 1 (True) or 2 (Unknown), and one line of at most 80 bytes. --npd alone reports
    /// TerminationNotice: 1 while a notice nthd will act on is listed or its action is under way;
    /// --npd=CONDITION reports another node condition (docs/observability.md).
    Status {
        /// Print the status file's JSON instead of the screen.
        #[arg(long, conflicts_with = "npd")]
        json: bool,
        /// node-problem-detector custom-plugin mode (exit 0, 1 or 2 and one line), for
        /// CONDITION [default: termination-notice].
        #[arg(
            long,
            value_enum,
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "termination-notice",
            value_name = "CONDITION"
        )]
        npd: Option<NpdCondition>,
    },
    /// Write the man page and shell completions into a directory (used by packaging).
    #[command(hide = true)]
    GenerateAssets {
        /// The directory to write into.
        #[arg(long, default_value = "target/assets")]
        out: PathBuf,
    },
}

/// Which cloud to watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderChoice {
    /// Detect from DMI, then by probing the metadata services.
    Auto,
    /// AWS EC2 instance metadata (IMDSv2).
    Aws,
    /// Google Compute Engine metadata server.
    Gcp,
    /// Azure Scheduled Events.
    Azure,
    /// Alibaba Cloud ECS instance metadata.
    Alibaba,
    /// Tencent Cloud CVM instance metadata.
    Tencent,
}

impl ProviderChoice {
    /// The cloud chosen, or `None` for `auto` (detect it).
    pub fn cloud(self) -> Option<Cloud> {
        match self {
            ProviderChoice::Auto => None,
            ProviderChoice::Aws => Some(Cloud::Aws),
            ProviderChoice::Gcp => Some(Cloud::Gcp),
            ProviderChoice::Azure => Some(Cloud::Azure),
            ProviderChoice::Alibaba => Some(Cloud::Alibaba),
            ProviderChoice::Tencent => Some(Cloud::Tencent),
        }
    }
}

pub(crate) use crate::logging::LogTarget;

fn duration(s: &str) -> Result<Duration, String> {
    if s.trim_start().starts_with('-') {
        return Err(format!(
            "`{s}` is negative; give a duration of zero or more, e.g. 500ms, 1s, 2m"
        ));
    }
    parse_duration(s)
}

/// `NTHD_GCP_PREEMPTION_NOTICE`: 0 s, or a notice up to 10 minutes (Google documents 120 s).
fn gcp_notice(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d > Duration::from_secs(600) {
        return Err(format!(
            "`{s}` is longer than any preemption notice GCP offers (120s); give 0s or 120s"
        ));
    }
    Ok(d)
}

fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < Duration::from_millis(100) {
        return Err(format!("`{s}` is too short; use at least 100ms"));
    }
    Ok(d)
}

/// The fast poll interval: never as long as the longest notice any cloud gives (Alibaba spot,
/// 5 minutes), or nthd could read nothing before the instance is gone.
fn poll_interval(s: &str) -> Result<Duration, String> {
    let d = positive_duration(s)?;
    let longest = KINDS_LEAD_TIME_MAX;
    if d >= longest {
        return Err(format!(
            "`{s}` is not shorter than the longest notice any cloud gives ({}, Alibaba Cloud \
             spot); nthd would miss interruption notices. Use 1s (the default) or a few seconds",
            crate::timefmt::format_duration(longest)
        ));
    }
    Ok(d)
}

/// A boosted poll interval, or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boost(pub Option<Duration>);

impl std::fmt::Display for Boost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(d) => f.write_str(&crate::timefmt::format_duration(d)),
            None => f.write_str("off"),
        }
    }
}

fn boost_interval(s: &str) -> Result<Boost, String> {
    if matches!(s.trim(), "off" | "0" | "none") {
        return Ok(Boost(None));
    }
    positive_duration(s).map(|d| Boost(Some(d)))
}

/// The longest lead time among the clouds' interruption notices.
const KINDS_LEAD_TIME_MAX: Duration = Duration::from_secs(300);

/// The slow poll interval (AWS rebalance recommendations and scheduled events).
fn slow_poll_interval(s: &str) -> Result<Duration, String> {
    let d = positive_duration(s)?;
    if d > Duration::from_secs(600) {
        return Err(format!(
            "`{s}` is longer than 10m; a rebalance recommendation usually comes only 10-20 \
             minutes before the interruption and would be seen late or not at all. Use 20s \
             (the default) or up to 10m"
        ));
    }
    Ok(d)
}

/// A yes/no setting, as systemd spells them: true/false, yes/no, on/off, 1/0.
fn boolish(s: &str) -> Result<bool, String> {
    use clap::builder::TypedValueParser;
    clap::builder::BoolishValueParser::new()
        .parse_ref(&clap::Command::new("nthd"), None, std::ffi::OsStr::new(s))
        .map_err(|_| format!("`{s}` is not yes or no; use true or false (or yes/no, on/off, 1/0)"))
}

/// The metadata base URL: `http://HOST[:PORT]`.
fn endpoint(s: &str) -> Result<String, String> {
    match crate::imds::normalize_base(s) {
        Ok(_) => Ok(s.to_string()),
        Err(crate::imds::ImdsError::BadEndpoint { reason, .. }) => Err(format!(
            "{reason}; give http://HOST[:PORT], e.g. http://169.254.169.254"
        )),
        Err(other) => Err(other.to_string()),
    }
}

/// The exit status for a bad setting (the same as clap's usage errors).
pub const BAD_SETTING_EXIT: u8 = 2;

/// A setting value that may hold a secret (a webhook URL whose path is a token). clap keeps it
/// as given; `Debug` never shows it, and only [`SecretValue::expose`] hands it out, to the
/// parser that redacts it in every error.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// The value itself, for parsing; never for a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

/// clap's parser for a [`SecretValue`]: it never fails, so clap never echoes the value in an
/// error; the value is checked later, where a problem disables only the feature that uses it.
fn secret_value(s: &str) -> Result<SecretValue, std::convert::Infallible> {
    Ok(SecretValue(s.to_string()))
}

fn notice_kind(s: &str) -> Result<NoticeKind, String> {
    kind_list(s).and_then(|l| match l.0.as_slice() {
        [k] => Ok(*k),
        _ => Err("give exactly one notice kind".into()),
    })
}

/// A comma-separated list of notice kinds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KindList(pub Vec<NoticeKind>);

impl std::fmt::Display for KindList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|k| k.name()).collect();
        f.write_str(&names.join(","))
    }
}

fn kind_list(s: &str) -> Result<KindList, String> {
    s.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|k| {
            NoticeKind::from_name(k).ok_or_else(|| {
                format!(
                    "unknown notice kind `{k}`; known kinds: {}",
                    KINDS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(KindList)
}

fn default_deadline_kinds() -> KindList {
    KindList(
        KINDS
            .iter()
            .filter(|k| crate::policy::deadline_by_default(k.kind))
            .map(|k| k.kind)
            .collect(),
    )
}

/// A setting that could not be used as given, and what nthd does instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    /// The variable (`NTHD_DRY_RUN`), or the file and line (`/etc/default/nthd line 4`).
    pub setting: String,
    /// The whole warning: why, what nthd uses instead, the fix. Never the value of a setting
    /// that can hold a secret.
    pub message: String,
}

/// The options every command takes. Each has an `NTHD_*` environment variable.
#[derive(Args, Debug, Clone)]
pub struct Options {
    /// Which cloud's metadata service to watch.
    #[arg(
        long,
        env = "NTHD_PROVIDER",
        value_enum,
        default_value = "auto",
        global = true
    )]
    pub provider: ProviderChoice,

    /// Metadata service base URL (default: the cloud's own, e.g. http://169.254.169.254).
    #[arg(long, env = "NTHD_IMDS_ENDPOINT", value_parser = endpoint, global = true, value_name = "URL")]
    pub imds_endpoint: Option<String>,

    /// How to reach the metadata service: directly, through systemd-imdsd's Varlink service
    /// (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked)
    /// refuses the connection, then through systemd-imdsd.
    #[arg(
        long,
        env = "NTHD_IMDS_VIA",
        value_enum,
        default_value = "auto",
        global = true,
        value_name = "HOW"
    )]
    pub imds_via: crate::imds::Via,

    /// AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets).
    #[arg(long, env = "NTHD_AWS_IPV6", value_parser = boolish, global = true)]
    pub aws_ipv6: bool,

    /// AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only).
    #[arg(long, env = "NTHD_AWS_IMDSV1", value_parser = boolish, global = true)]
    pub aws_imdsv1: bool,

    /// How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every
    /// 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s].
    #[arg(long, env = "NTHD_POLL_INTERVAL", value_parser = poll_interval, allow_hyphen_values = true, global = true, value_name = "DURATION")]
    pub poll_interval: Option<Duration>,

    /// AWS: while a rebalance recommendation is listed, read spot this often, for at most 30
    /// minutes (the notice usually follows within 10-20); `off` keeps the normal interval.
    #[arg(long, env = "NTHD_AWS_REBALANCE_BOOST", default_value = crate::timings::REBALANCE_BOOST_TEXT, value_parser = boost_interval, allow_hyphen_values = true, global = true, value_name = "DURATION|off")]
    pub aws_rebalance_boost: Boost,

    /// How often slow sources are read (AWS scheduled events; AWS rebalance recommendations
    /// when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance
    /// while a TERMINATE maintenance is listed).
    #[arg(long, env = "NTHD_SLOW_POLL_INTERVAL", default_value = crate::timings::SLOW_POLL_TEXT, value_parser = slow_poll_interval, allow_hyphen_values = true, global = true)]
    pub slow_poll_interval: Duration,

    /// GCP: how long one long-poll (wait_for_change) waits before it is re-armed.
    #[arg(long, env = "NTHD_GCP_WAIT", default_value = crate::timings::GCP_WAIT_TEXT, value_parser = positive_duration, allow_hyphen_values = true, global = true)]
    pub gcp_wait: Duration,

    /// Timeout for one metadata request.
    #[arg(long, env = "NTHD_REQUEST_TIMEOUT", default_value = crate::timings::REQUEST_TIMEOUT_TEXT, value_parser = positive_duration, allow_hyphen_values = true, global = true)]
    pub request_timeout: Duration,

    /// Settings file read, as the packaged unit reads it, for variables not already in the
    /// environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none).
    #[arg(long, env = "NTHD_SETTINGS_FILE", global = true, value_name = "PATH")]
    pub settings_file: Option<String>,

    /// Do everything but the logind call; log what would have happened.
    #[arg(long, env = "NTHD_DRY_RUN", value_parser = boolish, global = true)]
    pub dry_run: bool,

    /// Log level: error, warn, info, debug or trace.
    #[arg(long, env = "NTHD_LOG_LEVEL", default_value = "info", value_parser = crate::logging::level, global = true)]
    pub log_level: LevelFilter,

    /// Where logs go.
    #[arg(
        long,
        env = "NTHD_LOG_TARGET",
        value_enum,
        default_value = "auto",
        global = true
    )]
    pub log_target: LogTarget,

    /// Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else
    /// /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so.
    #[arg(long, env = "NTHD_STATE_DIR", global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Kinds whose power action waits for the last safe moment (deadline minus logind's
    /// InhibitDelayMaxUSec minus the safety margin) instead of happening at once.
    #[arg(long, env = "NTHD_DEADLINE_KINDS", default_value_t = default_deadline_kinds(), value_parser = kind_list, global = true, value_name = "KIND,...")]
    pub deadline_kinds: KindList,

    /// GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s
    /// (the default: at the soft-off itself, 30 s before the hard stop), or the VM's
    /// scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used
    /// for the preemption notice's deadline and nthd check's drain-budget fit; the metadata
    /// server does not say it.
    #[arg(long, env = "NTHD_GCP_PREEMPTION_NOTICE", default_value = "0s", value_parser = gcp_notice, global = true, value_name = "DURATION")]
    pub gcp_preemption_notice: Duration,

    /// Time kept free between the end of the drain and the platform's deadline.
    #[arg(long, env = "NTHD_SAFETY_MARGIN", default_value = "2m", value_parser = duration, allow_hyphen_values = true, global = true)]
    pub safety_margin: Duration,

    /// Drain budget assumed when logind's InhibitDelayMaxUSec cannot be read.
    #[arg(long, env = "NTHD_FALLBACK_DRAIN_BUDGET", default_value = "5m", value_parser = duration, allow_hyphen_values = true, global = true)]
    pub fallback_drain_budget: Duration,

    /// Wait between retries of a failed power action.
    #[arg(long, env = "NTHD_RETRY_DELAY", default_value = "5s", value_parser = positive_duration, allow_hyphen_values = true, global = true)]
    pub retry_delay: Duration,

    /// Write Prometheus metrics to this file (atomically) for node_exporter's textfile collector.
    #[arg(
        long,
        env = "NTHD_METRICS_TEXTFILE",
        global = true,
        value_name = "PATH"
    )]
    pub metrics_textfile: Option<PathBuf>,

    /// Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit's
    /// IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability").
    /// A bad address disables only the server (logged as an error, shown by `nthd status`).
    #[arg(long, env = "NTHD_METRICS_LISTEN", global = true, value_name = "ADDR")]
    pub metrics_listen: Option<String>,

    /// POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a
    /// comma-separated list). http or https; no credentials in the URL: put them in
    /// --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be
    /// set up disables only webhooks: nthd keeps watching and acting.
    #[arg(long = "webhook", env = "NTHD_WEBHOOK", value_delimiter = ',', value_parser = secret_value, hide_env_values = true, global = true, value_name = "URL")]
    pub webhooks: Vec<SecretValue>,

    /// A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path
    /// is a secret (Slack's). Must be owned by root and not readable by others, like the headers
    /// file: chown root:nthd F; chmod 0640 F.
    #[arg(
        long,
        env = "NTHD_WEBHOOK_URL_FILE",
        global = true,
        value_name = "PATH"
    )]
    pub webhook_url_file: Option<PathBuf>,

    /// The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a
    /// Slack/Teams `{"text": ...}`).
    #[arg(
        long,
        env = "NTHD_WEBHOOK_FORMAT",
        default_value = "cloudevents",
        global = true,
        value_name = "FORMAT",
        value_parser = crate::webhook::FormatSetting::parse
    )]
    pub webhook_format: crate::webhook::FormatSetting,

    /// `Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by
    /// root and not readable by others: chown root:nthd F; chmod 0640 F.
    #[arg(
        long,
        env = "NTHD_WEBHOOK_HEADERS_FILE",
        global = true,
        value_name = "PATH"
    )]
    pub webhook_headers_file: Option<PathBuf>,

    /// The daemon's status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json
    /// under systemd, else /run/nthd/status.json].
    #[arg(long, env = "NTHD_STATUS_FILE", global = true, value_name = "PATH")]
    pub status_file: Option<PathBuf>,

    /// The settings that could not be used as given and fell back, found before the command
    /// ran (bad values, skipped lines of a settings file, a named file that cannot be read):
    /// reported for as long as nthd runs. Not a flag.
    #[arg(skip)]
    pub degraded: Vec<Degraded>,

    /// AWS: complete the Auto Scaling termination lifecycle action after the drain, with this
    /// result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs
    /// --asg-lifecycle-hook, the instance role's autoscaling:CompleteLifecycleAction and a
    /// unit drop-in that lets nthd reach the endpoint (docs/clouds.md).
    #[arg(long, env = "NTHD_ASG_COMPLETE", default_value = "off", value_parser = asg::asg_complete, global = true, value_name = "off|CONTINUE|ABANDON")]
    pub asg_complete: AsgComplete,

    /// AWS: the name of the group's termination lifecycle hook (required when --asg-complete is
    /// on; without it completion is off, with a warning).
    #[arg(long, env = "NTHD_ASG_LIFECYCLE_HOOK", value_parser = asg::hook_name, global = true, value_name = "NAME")]
    pub asg_lifecycle_hook: Option<String>,

    /// AWS: the Auto Scaling group's name (default: asked with DescribeAutoScalingInstances).
    #[arg(long, env = "NTHD_ASG_GROUP", value_parser = asg::group_name, global = true, value_name = "NAME")]
    pub asg_group: Option<String>,

    /// AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS);
    /// http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com].
    #[arg(long, env = "NTHD_ASG_ENDPOINT", value_parser = asg::asg_endpoint, global = true, value_name = "URL")]
    pub asg_endpoint: Option<String>,

    /// The `--action-<kind>` flags.
    #[command(flatten)]
    pub actions: ActionSettings,
}

/// One `--action-<kind>` flag per notice kind, generated from [`KINDS`].
#[derive(Debug, Clone, Default)]
pub struct ActionSettings {
    /// Each kind whose flag or variable was given, with the action chosen; the other kinds keep
    /// their default.
    pub overrides: Vec<(NoticeKind, Action)>,
}

fn parse_action(s: &str) -> Result<Action, String> {
    Action::parse(s)
        .ok_or_else(|| format!("`{s}` is not an action; use ignore, log, poweroff or reboot"))
}

/// The action for one kind. `reboot` is refused for kinds without a platform event id: after
/// the reboot the notice is still listed, nthd cannot tell it from a new one, and it would
/// reboot again on every boot.
fn parse_kind_action(info: &'static KindInfo, s: &str) -> Result<Action, String> {
    let action = parse_action(s)?;
    if action == Action::Reboot && !info.kind.has_event_id() {
        return Err(format!(
            "`reboot` is refused for {} ({}): its notices carry no platform event id, so after \
             the reboot nthd could not tell the still-listed notice from a new one and would \
             reboot on every boot. Use poweroff, log or ignore",
            info.name, info.env
        ));
    }
    Ok(action)
}

impl FromArgMatches for ActionSettings {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut s = ActionSettings::default();
        s.update_from_arg_matches(m)?;
        Ok(s)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for k in KINDS {
            if let Some(a) = m.get_one::<Action>(k.flag) {
                self.overrides.retain(|(kind, _)| *kind != k.kind);
                self.overrides.push((k.kind, *a));
            }
        }
        Ok(())
    }
}

impl Args for ActionSettings {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for k in KINDS {
            cmd = cmd.arg(
                Arg::new(k.flag)
                    .long(k.flag)
                    .env(k.env)
                    .value_name("ACTION")
                    .value_parser(move |s: &str| parse_kind_action(k, s))
                    .action(ArgAction::Set)
                    .global(true)
                    .help_heading("Actions per notice kind (ignore|log|poweroff|reboot)")
                    .help(format!(
                        "{} [default: {}]",
                        k.help,
                        crate::policy::default_action(k.kind)
                    )),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl Options {
    /// What clap cannot check flag by flag, before anything starts: the poll interval against
    /// the shortest notice of the cloud, when the cloud is known. A value that does not fit
    /// falls back (see [`Options::fit_poll_interval`]).
    pub fn validate(&mut self) -> Vec<Fallback> {
        let mut out: Vec<Fallback> = match self.provider.cloud() {
            Some(cloud) => self.fit_poll_interval(cloud).into_iter().collect(),
            None => Vec::new(),
        };
        out.extend(self.fit_asg());
        out
    }

    /// Completing the lifecycle action needs the hook's name: without it, completion is off.
    pub fn fit_asg(&mut self) -> Option<Fallback> {
        if self.asg_complete == AsgComplete::Off || self.asg_lifecycle_hook.is_some() {
            return None;
        }
        let value = self.asg_complete.to_string();
        self.asg_complete = AsgComplete::Off;
        Some(Fallback {
            setting: "NTHD_ASG_COMPLETE".into(),
            value,
            reason: "NTHD_ASG_LIFECYCLE_HOOK is not set (or its value could not be used), and \
                     completing the lifecycle action needs the hook's name: set it to the \
                     group's termination hook"
                .into(),
            instead: "off (no request to Auto Scaling)".into(),
        })
    }

    /// The timing settings as given, before a cloud is known.
    pub fn timing_set(&self) -> timings::Set {
        timings::Set {
            poll: self.poll_interval,
            slow_poll: self.slow_poll_interval,
            gcp_wait: self.gcp_wait,
            request_timeout: self.request_timeout,
            rebalance_boost: self.aws_rebalance_boost.0,
            gcp_notice: self.gcp_preemption_notice,
        }
    }

    /// Every timing on `cloud`, from the one plan ([`timings::Set::resolve`]).
    pub fn timings(&self, cloud: Cloud) -> Timings {
        self.timing_set().resolve(cloud)
    }

    /// The fast poll interval on `cloud`.
    pub fn poll_interval_for(&self, cloud: Cloud) -> Duration {
        self.timings(cloud).poll
    }

    /// What the providers need from these settings.
    pub fn provider_settings(&self) -> ProviderSettings {
        ProviderSettings {
            cloud: self.provider.cloud(),
            endpoint: self.imds_endpoint.clone(),
            client: self.client_options(),
            timings: self.timing_set(),
            aws_ipv6: self.aws_ipv6,
            aws_imdsv1: self.aws_imdsv1,
        }
    }

    /// What completing the Auto Scaling lifecycle action needs; `None` when it is off.
    pub fn asg_settings(&self) -> Option<asg::AsgSettings> {
        Some(asg::AsgSettings {
            result: self.asg_complete.result()?,
            hook: self.asg_lifecycle_hook.clone(),
            group: self.asg_group.clone(),
            endpoint: self.asg_endpoint.clone(),
            metadata: crate::provider::aws::endpoint(self.imds_endpoint.as_deref(), self.aws_ipv6),
            client: self.client_options(),
            imdsv1: self.aws_imdsv1,
        })
    }

    /// How long nthd may go without a successful metadata read on `cloud` before it counts as
    /// blind, for all sources and for one (see [`Timings::blind_after`]).
    pub fn blind_after(&self, cloud: Cloud) -> (Duration, Duration) {
        self.timings(cloud).blind_after()
    }

    /// The poll interval must be well inside the cloud's shortest notice: one that is not
    /// falls back to the cloud's default (polling too rarely would see the notice late or not
    /// at all; polling more often harms nothing).
    pub fn fit_poll_interval(&mut self, cloud: Cloud) -> Option<Fallback> {
        let interval = self.poll_interval?;
        if timings::fits(cloud, interval) {
            return None;
        }
        let lead = cloud.notice_lead_time();
        self.poll_interval = None;
        Some(Fallback {
            setting: "NTHD_POLL_INTERVAL".into(),
            value: crate::timefmt::format_duration(interval),
            reason: format!(
                "on {cloud}, {} comes only {} ahead; polling this rarely would see it late or \
                 not at all; use at most {}",
                cloud.shortest_notice(),
                crate::timefmt::format_duration(lead),
                crate::timefmt::format_duration(lead / 2)
            ),
            instead: format!(
                "the default on {cloud} ({})",
                crate::timefmt::format_duration(self.poll_interval_for(cloud))
            ),
        })
    }

    /// The policy settings: the actions per kind, the deadline kinds, the safety margin, the
    /// fallback drain budget and the retry delay.
    pub fn policy(&self) -> PolicyConfig {
        let mut p = PolicyConfig::default();
        for (kind, action) in &self.actions.overrides {
            p.set_action(*kind, *action);
        }
        p.set_at_deadline(self.deadline_kinds.0.iter().copied());
        p.margin = self.safety_margin;
        p.fallback_budget = self.fallback_drain_budget;
        p.retry_delay = self.retry_delay;
        p
    }

    /// The metadata client's settings: the request timeout, and a connect timeout of at most 1 s.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            request_timeout: self.request_timeout,
            connect_timeout: self.request_timeout.min(timings::CONNECT_TIMEOUT_MAX),
            endpoint_set: self.imds_endpoint.is_some(),
            via: self.imds_via,
            ..ClientOptions::default()
        }
    }

    /// Where metrics go: the textfile and the listen address, each if set.
    pub fn metrics_options(&self) -> crate::metrics::MetricsOptions {
        crate::metrics::MetricsOptions {
            textfile: self.metrics_textfile.clone(),
            listen: self.metrics_listen.clone(),
        }
    }

    /// The webhook settings (`--webhook`, `--webhook-url-file`, `--webhook-format`,
    /// `--webhook-headers-file`). An error disables webhooks only; its text never holds a URL's
    /// path or query.
    pub fn webhook_options(
        &self,
    ) -> Result<crate::webhook::WebhookOptions, crate::webhook::WebhookError> {
        use crate::webhook::WebhookError;
        let mut urls = Vec::new();
        for (i, raw) in self.webhooks.iter().enumerate() {
            let url =
                crate::webhook::parse_url(raw.expose()).map_err(|reason| WebhookError::BadUrl {
                    source_of: format!("NTHD_WEBHOOK (URL {})", i + 1),
                    reason,
                })?;
            urls.push(url);
        }
        if let Some(p) = &self.webhook_url_file {
            urls.extend(crate::webhook::read_url_file(p)?);
        }
        let format = self.webhook_format.format()?;
        Ok(crate::webhook::WebhookOptions {
            urls,
            format,
            headers_file: self.webhook_headers_file.clone(),
            ..Default::default()
        })
    }

    /// Whether any webhook setting is given (then a setup error is worth reporting).
    pub fn webhooks_wanted(&self) -> bool {
        !self.webhooks.is_empty() || self.webhook_url_file.is_some()
    }

    /// The status file `nthd status` reads: `--status-file`, else
    /// [`DEFAULT_PATH`](crate::status::DEFAULT_PATH).
    pub fn status_path(&self) -> PathBuf {
        self.status_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::status::DEFAULT_PATH))
    }

    /// The status file the daemon keeps: `--status-file`, else `status.json` in systemd's
    /// `$RUNTIME_DIRECTORY`, else [`DEFAULT_PATH`](crate::status::DEFAULT_PATH) when its
    /// directory exists; `None` (no file) otherwise, for a daemon run by hand.
    pub fn daemon_status_path(&self) -> Option<PathBuf> {
        if let Some(p) = &self.status_file {
            return Some(p.clone());
        }
        if let Some(dir) = systemd_directory("RUNTIME_DIRECTORY") {
            return Some(dir.join("status.json"));
        }
        let p = PathBuf::from(crate::status::DEFAULT_PATH);
        p.parent().is_some_and(std::path::Path::is_dir).then_some(p)
    }

    /// The state directory: `--state-dir`, else the first entry of systemd's `$STATE_DIRECTORY`,
    /// else `/var/lib/nthd`.
    pub fn state_dir(&self) -> PathBuf {
        if let Some(d) = &self.state_dir {
            return d.clone();
        }
        systemd_directory("STATE_DIRECTORY").unwrap_or_else(|| PathBuf::from("/var/lib/nthd"))
    }
}

/// The subcommand's name (`run`, `check`, ...; `None` for none, the daemon), read leniently
/// from the command line before the settings files are loaded.
pub fn command_name(args: &[String]) -> Option<String> {
    use clap::CommandFactory;
    let m = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()?;
    m.subcommand_name().map(str::to_string)
}

/// `nthd status` reads one file, so a bad value of an unrelated setting (a typo in
/// `NTHD_POLL_INTERVAL`, say) must not break it, nor the NPD plugin built on it. When the full
/// command line does not parse, this parses it again leniently: if the command is `status`, it
/// returns the status file, the `--json` flag and the `--npd` condition; otherwise `None`.
pub fn status_only<I, T>(args: I) -> Option<(PathBuf, bool, Option<NpdCondition>)>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::CommandFactory;
    let m = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(args)
        .ok()?;
    let ("status", sub) = m.subcommand()? else {
        return None;
    };
    let flag = |name: &str| {
        sub.try_get_one::<bool>(name)
            .ok()
            .flatten()
            .copied()
            .unwrap_or(false)
    };
    let file = [sub, &m]
        .iter()
        .find_map(|x| {
            x.try_get_one::<PathBuf>("status_file")
                .ok()
                .flatten()
                .cloned()
        })
        .unwrap_or_else(|| PathBuf::from(crate::status::DEFAULT_PATH));
    let npd = sub
        .try_get_one::<NpdCondition>("npd")
        .ok()
        .flatten()
        .copied();
    Some((file, flag("json"), npd))
}

/// The first entry of a directory list systemd passes for `StateDirectory=` and the like
/// (`$STATE_DIRECTORY`, `$RUNTIME_DIRECTORY`: colon-separated), if set.
fn systemd_directory(var: &str) -> Option<PathBuf> {
    let s = std::env::var(var).ok()?;
    s.split(':').find(|p| !p.is_empty()).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        let mut v = vec!["nthd"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v)
    }

    #[test]
    fn status_survives_an_unrelated_bad_setting() {
        let args = [
            "nthd",
            "--poll-interval",
            "bogus",
            "status",
            "--npd",
            "--status-file",
            "/tmp/x.json",
        ];
        assert!(
            Cli::try_parse_from(args).is_err(),
            "the full parse refuses it"
        );
        let (file, json, npd) = status_only(args).expect("a status command");
        assert_eq!(file, PathBuf::from("/tmp/x.json"));
        assert_eq!(npd, Some(NpdCondition::TerminationNotice));
        assert!(!json);
        let named = [
            "nthd",
            "--poll-interval",
            "bogus",
            "status",
            "--npd=maintenance-planned",
        ];
        assert_eq!(
            status_only(named).unwrap().2,
            Some(NpdCondition::MaintenancePlanned),
            "the condition survives the lenient parse"
        );
        let (file, json, _) =
            status_only(["nthd", "status", "--json", "--safety-margin=x"]).unwrap();
        assert!(json);
        assert_eq!(file, PathBuf::from(crate::status::DEFAULT_PATH));
        assert!(status_only(["nthd", "--poll-interval", "bogus", "check"]).is_none());
        assert!(status_only(["nthd", "--poll-interval", "bogus"]).is_none());
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let c = parse(&[]).unwrap();
        assert!(c.command.is_none());
        assert_eq!(c.opts.provider, ProviderChoice::Auto);
        assert_eq!(c.opts.poll_interval, None);
        assert_eq!(c.opts.poll_interval_for(Cloud::Aws), Duration::from_secs(1));
        assert_eq!(c.opts.poll_interval_for(Cloud::Gcp), Duration::from_secs(1));
        assert_eq!(
            c.opts.poll_interval_for(Cloud::Azure),
            Duration::from_millis(500),
            "Azure evictions come fast: 2 reads a second by default"
        );
        let p = c.opts.policy();
        assert_eq!(p.action(NoticeKind::SpotTerminate), Action::PowerOff);
        assert_eq!(p.action(NoticeKind::SpotHibernate), Action::Log);
        assert!(p.at_deadline(NoticeKind::ScheduledStop));
        assert!(!p.at_deadline(NoticeKind::SpotTerminate));
    }

    #[test]
    fn per_kind_actions_and_global_flags_after_the_subcommand() {
        let c = parse(&[
            "once",
            "--provider",
            "aws",
            "--action-rebalance",
            "poweroff",
            "--action-scheduled-reboot=reboot",
            "--deadline-kinds",
            "alibaba-spot, scheduled-reboot",
            "--poll-interval",
            "500ms",
        ])
        .unwrap();
        assert!(matches!(c.command, Some(Command::Once { json: false })));
        let p = c.opts.policy();
        assert_eq!(p.action(NoticeKind::Rebalance), Action::PowerOff);
        assert_eq!(p.action(NoticeKind::ScheduledReboot), Action::Reboot);
        assert!(p.at_deadline(NoticeKind::AlibabaSpot));
        assert!(!p.at_deadline(NoticeKind::ScheduledStop));
        assert_eq!(c.opts.poll_interval, Some(Duration::from_millis(500)));
        assert_eq!(
            c.opts.poll_interval_for(Cloud::Azure),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn bad_flags_get_clear_errors() {
        let e = parse(&["--action-spot-terminate", "explode"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ignore, log, poweroff or reboot"), "{e}");
        let e = parse(&["--deadline-kinds", "spot-terminate,nope"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown notice kind `nope`"), "{e}");
        let e = parse(&["--poll-interval", "1ms"]).unwrap_err().to_string();
        assert!(e.contains("too short"), "{e}");
        let e = parse(&["--provider", "oracle"]).unwrap_err().to_string();
        assert!(e.contains("oracle"), "{e}");
    }

    #[test]
    fn negative_and_pointless_intervals_are_refused_by_name() {
        let e = parse(&["--poll-interval", "-1s"]).unwrap_err().to_string();
        assert!(
            e.contains("--poll-interval") && e.contains("negative"),
            "{e}"
        );
        let e = parse(&["once", "--retry-delay=-5s"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--retry-delay") && e.contains("negative"), "{e}");
        let e = parse(&["--poll-interval", "48h"]).unwrap_err().to_string();
        assert!(e.contains("would miss interruption notices"), "{e}");
        let e = parse(&["--slow-poll-interval", "1h"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("rebalance recommendation"), "{e}");
        // Per cloud: 20s is fine on Alibaba (5 min), not on Azure (30 s), where it falls back
        // to Azure's default.
        let mut c = parse(&["--poll-interval", "20s"]).unwrap();
        assert!(c.opts.fit_poll_interval(Cloud::Alibaba).is_none());
        let e = c.opts.fit_poll_interval(Cloud::Azure).unwrap().to_string();
        assert!(
            e.starts_with("NTHD_POLL_INTERVAL=\"20s\"")
                && e.contains("Azure Preempt")
                && e.contains("goes on with the default on azure (500ms)"),
            "{e}"
        );
        assert_eq!(c.opts.poll_interval, None);
        assert_eq!(
            c.opts.poll_interval_for(Cloud::Azure),
            Duration::from_millis(500)
        );
        let mut c = parse(&["--provider", "gcp", "--poll-interval", "20s"]).unwrap();
        assert_eq!(c.opts.validate().len(), 1);
        assert_eq!(c.opts.poll_interval_for(Cloud::Gcp), Duration::from_secs(1));
        // Tencent's lead time is assumed to be 2 minutes (not documented): at most 1m.
        let mut c = parse(&["--provider", "tencent", "--poll-interval", "1m"]).unwrap();
        assert_eq!(c.opts.provider.cloud(), Some(Cloud::Tencent));
        assert!(c.opts.validate().is_empty());
        let mut c = parse(&["--provider", "tencent", "--poll-interval", "61s"]).unwrap();
        let e = c.opts.validate()[0].to_string();
        assert!(e.contains("Tencent Cloud spot termination notice"), "{e}");
        let e = parse(&["--imds-endpoint", "https://x"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--imds-endpoint") && e.contains("http://HOST"),
            "{e}"
        );
    }

    #[test]
    fn reboot_only_for_kinds_with_an_event_id() {
        for k in KINDS {
            let flag = format!("--{}=reboot", k.flag);
            match parse(&[&flag]) {
                Ok(c) => {
                    assert!(k.kind.has_event_id(), "{} accepted reboot", k.name);
                    assert_eq!(c.opts.policy().action(k.kind), Action::Reboot);
                }
                Err(e) => {
                    assert!(!k.kind.has_event_id(), "{} refused reboot: {e}", k.name);
                    let e = e.to_string();
                    assert!(
                        e.contains(k.env) && e.contains("reboot on every boot"),
                        "{e}"
                    );
                    assert_eq!(parse(&[&flag]).unwrap_err().exit_code(), 2);
                }
            }
        }
        // poweroff stays allowed everywhere.
        assert!(parse(&["--action-rebalance=poweroff"]).is_ok());
    }

    #[test]
    fn every_kind_has_a_flag_with_its_env_var() {
        let cmd = Cli::command();
        for k in KINDS {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_id() == k.flag)
                .unwrap_or_else(|| panic!("no flag for {}", k.name));
            assert_eq!(arg.get_env().unwrap(), k.env);
        }
        for a in cmd.get_arguments() {
            if a.get_id() != "help" && a.get_id() != "version" {
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                assert!(
                    env.as_deref().is_some_and(|e| e.starts_with("NTHD_")),
                    "{} has no NTHD_ env var",
                    a.get_id()
                );
            }
        }
    }
}
