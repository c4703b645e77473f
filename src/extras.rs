//! The optional features: webhooks, the `/metrics` server and the metrics textfile.
//!
//! None of them may switch protection off. A setup error (a headers file with the wrong mode,
//! a URL file missing at boot, no CA store for an https URL, a bad URL or address, a port in
//! use, an unwritable textfile) disables only that feature: it is logged once at priority err
//! with [`MSG_EXTRA_DISABLED`], shown in the status file (`extras_disabled`, which `nthd status`
//! and the NPD plugin report as "unknown") and in `nthd_extra_disabled`, and nthd keeps
//! watching and acting. Webhooks are set up again every [`RETRY`] while disabled, so a headers
//! file that comes late or is fixed after a rotation takes effect without a restart.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Options;
use crate::notice::PerExtra;
use crate::sandbox::IpPolicy;
use crate::webhook::{Context, WebhookOptions, Webhooks};

/// journald `MESSAGE_ID` of "an optional feature is disabled": stable across releases.
pub(crate) const MSG_EXTRA_DISABLED: &str = "e7b1c0d24f6a4a5e9c3b8d7f6e5a4b3c";

/// How often a disabled webhook setup is tried again.
pub(crate) const RETRY: Duration = Duration::from_secs(60);

/// Webhook delivery, or why there is none.
pub(crate) struct WebhookSlot {
    hooks: Webhooks,
    problem: Option<String>,
    retry_at: Option<Instant>,
    context: Context,
    /// The unit's IP access lists, to blame a blocked receiver on them.
    sandbox: Option<Arc<IpPolicy>>,
}

/// Delivery for `opts`, or the error that stops it (must run inside the runtime).
fn setup(
    opts: &Options,
    context: Context,
    sandbox: Option<Arc<IpPolicy>>,
) -> Result<(Webhooks, WebhookOptions), String> {
    let mut w = opts.webhook_options().map_err(|e| e.to_string())?;
    w.sandbox = sandbox;
    let hooks = Webhooks::start(&w, context).map_err(|e| e.to_string())?;
    Ok((hooks, w))
}

impl WebhookSlot {
    /// Starts webhook delivery; an error disables webhooks only (see the module).
    pub(crate) fn start(
        opts: &Options,
        context: Context,
        sandbox: Option<Arc<IpPolicy>>,
    ) -> WebhookSlot {
        let mut slot = WebhookSlot {
            hooks: idle(context.clone()),
            problem: None,
            retry_at: None,
            context,
            sandbox,
        };
        slot.try_setup(opts);
        slot
    }

    fn try_setup(&mut self, opts: &Options) {
        if !opts.webhooks_wanted() {
            return;
        }
        match setup(opts, self.context.clone(), self.sandbox.clone()) {
            Ok((hooks, w)) => {
                let list: Vec<String> = w
                    .urls
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect();
                let again = if self.problem.take().is_some() {
                    " (set up again)"
                } else {
                    ""
                };
                tracing::info!("webhooks{again}: {} ({:?})", list.join(", "), w.format);
                self.hooks = hooks;
                self.retry_at = None;
            }
            Err(e) => {
                self.problem = Some(format!(
                    "{e}. nthd keeps watching and acting on notices without webhooks, and tries \
                     again every {}",
                    crate::timefmt::format_duration(RETRY)
                ));
                self.retry_at = Some(Instant::now() + RETRY);
            }
        }
    }

    /// Tries the setup again when webhooks are disabled and the retry is due at `now`.
    pub(crate) fn retry_if_due(&mut self, opts: &Options, now: Instant) {
        if self.retry_at.is_some_and(|t| t <= now) {
            self.try_setup(opts);
        }
    }

    /// The delivery handle (idle while disabled: events are then dropped).
    pub(crate) fn hooks(&self) -> &Webhooks {
        &self.hooks
    }

    /// Why webhooks are disabled, if they are.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    /// Changes the context later events carry (the cloud, the identity, once known), now and
    /// after a later setup. The slot holds the one copy; the daemon keeps none.
    pub(crate) fn update_context(&mut self, change: impl FnOnce(&mut Context)) {
        change(&mut self.context);
        self.hooks.set_context(self.context.clone());
    }

    /// Stops delivery, waiting up to `within` for what is under way.
    pub(crate) async fn drain(self, within: Duration) {
        self.hooks.drain(within).await;
    }
}

/// A handle that delivers nothing (no URL).
fn idle(context: Context) -> Webhooks {
    Webhooks::start(&WebhookOptions::default(), context)
        .expect("with no URL and no headers file nothing can fail")
}

/// Logs each extra's problem once when it appears or changes, and its recovery.
#[derive(Default)]
pub(crate) struct Reporter {
    last: PerExtra<Option<String>>,
}

impl Reporter {
    /// Compares `now` with what was reported, and logs the differences.
    pub(crate) fn report(&mut self, now: &PerExtra<Option<&str>>) {
        for (extra, cur) in now.iter() {
            let (name, last, cur) = (extra.name(), self.last.get_mut(extra), *cur);
            if last.as_deref() == cur {
                continue;
            }
            match cur {
                Some(reason) => tracing::error!(
                    message_id = MSG_EXTRA_DISABLED,
                    nthd_extra = name,
                    "extra {name} disabled: {reason}"
                ),
                None => tracing::info!(nthd_extra = name, "extra {name} works again"),
            }
            *last = cur.map(str::to_string);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::os::unix::fs::PermissionsExt;

    fn opts(args: &[&str]) -> Options {
        let mut v = vec!["nthd"];
        v.extend_from_slice(args);
        crate::config::Cli::try_parse_from(v).unwrap().opts
    }

    #[tokio::test]
    async fn a_fixed_headers_file_is_picked_up_by_the_retry() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("not root: the headers file must be owned by root (CI runs as root)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path().join("headers");
        std::fs::write(&h, "Authorization: Bearer x\n").unwrap();
        std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o644)).unwrap();
        let o = opts(&[
            "--webhook",
            "http://127.0.0.1:9/x",
            "--webhook-headers-file",
            h.to_str().unwrap(),
        ]);
        let mut slot = WebhookSlot::start(&o, Context::for_this_host(), None);
        let p = slot.problem().expect("disabled").to_string();
        assert!(
            p.contains("readable by others") && p.contains("tries again every 1m"),
            "{p}"
        );
        std::fs::set_permissions(&h, std::fs::Permissions::from_mode(0o640)).unwrap();
        slot.retry_if_due(&o, Instant::now());
        assert!(slot.problem().is_some(), "retried before it was due");
        slot.retry_if_due(&o, Instant::now() + RETRY);
        assert_eq!(slot.problem(), None, "the fixed file was not picked up");
    }

    #[tokio::test]
    async fn no_webhook_setting_is_no_problem() {
        let slot = WebhookSlot::start(&opts(&[]), Context::for_this_host(), None);
        assert_eq!(slot.problem(), None);
        let slot = WebhookSlot::start(
            &opts(&["--webhook", "gopher://x"]),
            Context::for_this_host(),
            None,
        );
        assert!(slot.problem().unwrap().contains("NTHD_WEBHOOK (URL 1)"));
    }
}
