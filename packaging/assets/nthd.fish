# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_nthd_global_optspecs
    string join \n provider= imds-endpoint= imds-via= aws-ipv6 aws-imdsv1 poll-interval= aws-rebalance-boost= slow-poll-interval= gcp-wait= request-timeout= settings-file= dry-run log-level= log-target= state-dir= deadline-kinds= gcp-preemption-notice= safety-margin= fallback-drain-budget= retry-delay= metrics-textfile= metrics-listen= webhook= webhook-url-file= webhook-format= webhook-headers-file= status-file= asg-complete= asg-lifecycle-hook= asg-group= asg-endpoint= action-spot-terminate= action-spot-stop= action-spot-hibernate= action-rebalance= action-asg-terminate= action-asg-other= action-scheduled-stop= action-scheduled-reboot= action-scheduled-maintenance= action-gcp-preempt= action-gcp-terminate-maintenance= action-gcp-migrate= action-azure-preempt= action-azure-terminate= action-azure-reboot= action-azure-redeploy= action-azure-freeze= action-alibaba-spot= action-tencent-spot= action-unknown= h/help V/version
end

function __fish_nthd_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_nthd_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_nthd_using_subcommand
    set -l cmd (__fish_nthd_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c nthd -n "__fish_nthd_needs_command" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_needs_command" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_needs_command" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_needs_command" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_needs_command" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_needs_command" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_needs_command" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_needs_command" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_needs_command" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_needs_command" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_needs_command" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_needs_command" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_needs_command" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_needs_command" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_needs_command" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_needs_command" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_needs_command" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_needs_command" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_needs_command" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_needs_command" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_needs_command" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_needs_command" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_needs_command" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_needs_command" -s V -l version -d 'Print version'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "run" -d 'Run the daemon (the default)'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "once" -d 'Read every source once, print the notices and what nthd would do, and exit'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "check" -d 'Check whether a graceful shutdown will really work on this node'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "simulate" -d 'Fire drill: inject a synthetic notice into the policy and action path'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "status" -d 'Show what the daemon knows: cloud, instance, sources, notices, actions, errors'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "generate-assets" -d 'Write the man page and shell completions into a directory (used by packaging)'
complete -c nthd -n "__fish_nthd_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c nthd -n "__fish_nthd_using_subcommand run" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand run" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand run" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand run" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand run" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand run" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand run" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand run" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand run" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand run" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand run" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand run" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand once" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand once" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand once" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand once" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand once" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand once" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand once" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand once" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand once" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand once" -l json -d 'Print JSON instead of text'
complete -c nthd -n "__fish_nthd_using_subcommand once" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand once" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand once" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand once" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand check" -l root -d 'Read system files below this directory instead of / (for tests)' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand check" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand check" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand check" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand check" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand check" -l json -d 'Print JSON instead of text'
complete -c nthd -n "__fish_nthd_using_subcommand check" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand check" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand check" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand check" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l deadline-in -d 'When the simulated platform would act (default: the kind\'s usual lead time)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l yes -d 'Really carry out the action'
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand simulate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand status" -l npd -d 'node-problem-detector custom-plugin mode (exit 0, 1 or 2 and one line), for CONDITION [default: termination-notice]' -r -f -a "termination-notice\t'nthd\'s own `TerminationNotice`: a notice nthd will act on is listed, or its action is under way'
maintenance-planned\t'Kubernetes\' `MaintenancePlanned` (KEP-5683): the same facts, the cloud named'
graceful-node-shutdown-in-progress\t'Kubernetes\' `GracefulNodeShutdownInProgress` (KEP-5683): logind accepted nthd\'s power action, so kubelet\'s Graceful Node Shutdown is draining'
preemption-scheduled\t'`PreemptionScheduled` (reason `SpotEvictionIncoming`), which Karpenter\'s Azure provider reads: Azure lists a Preempt event for this VM'
gce-spot-preempting\t'`GCESpotPreempting`, which Karpenter\'s GCP provider reads: `instance/preempted` is TRUE'"
complete -c nthd -n "__fish_nthd_using_subcommand status" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand status" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand status" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand status" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand status" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand status" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand status" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand status" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand status" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand status" -l json -d 'Print the status file\'s JSON instead of the screen'
complete -c nthd -n "__fish_nthd_using_subcommand status" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand status" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand status" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l out -d 'The directory to write into' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l provider -d 'Which cloud\'s metadata service to watch' -r -f -a "auto\t'Detect from DMI, then by probing the metadata services'
aws\t'AWS EC2 instance metadata (IMDSv2)'
gcp\t'Google Compute Engine metadata server'
azure\t'Azure Scheduled Events'
alibaba\t'Alibaba Cloud ECS instance metadata'
tencent\t'Tencent Cloud CVM instance metadata'"
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l imds-endpoint -d 'Metadata service base URL (default: the cloud\'s own, e.g. http://169.254.169.254)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l imds-via -d 'How to reach the metadata service: directly, through systemd-imdsd\'s Varlink service (systemd 261+), or auto: directly until a prohibit route (systemd.imds.network=locked) refuses the connection, then through systemd-imdsd' -r -f -a "auto\t'Directly, and through systemd-imdsd once a prohibit route refuses the connection'
direct\t'Directly only'
systemd-imdsd\t'Through systemd-imdsd\'s Varlink service only'"
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l poll-interval -d 'How often the fast sources are read (AWS spot; Azure; Alibaba; Tencent); AWS ASG every 3x [default: 1s; 500ms on Azure, whose evictions can come in under 10 s]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l aws-rebalance-boost -d 'AWS: while a rebalance recommendation is listed, read spot this often, for at most 30 minutes (the notice usually follows within 10-20); `off` keeps the normal interval' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l slow-poll-interval -d 'How often slow sources are read (AWS scheduled events; AWS rebalance recommendations when the boost is off, else every 4s or this often if shorter; GCP upcoming-maintenance while a TERMINATE maintenance is listed)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l gcp-wait -d 'GCP: how long one long-poll (wait_for_change) waits before it is re-armed' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l request-timeout -d 'Timeout for one metadata request' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l settings-file -d 'Settings file read, as the packaged unit reads it, for variables not already in the environment (default: /etc/default/nthd, then /etc/sysconfig/nthd; `none` reads none)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l log-level -d 'Log level: error, warn, info, debug or trace' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l log-target -d 'Where logs go' -r -f -a "auto\t'journald when started by systemd with a journal stream, stderr otherwise'
journald\t'journald, with structured fields (stderr if the journal cannot be opened)'
stderr\t'stderr, as plain text lines'"
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l state-dir -d 'Where nthd remembers what it acted on (default: $STATE_DIRECTORY from systemd, else /var/lib/nthd). If it is not writable nthd keeps the state in memory and says so' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l deadline-kinds -d 'Kinds whose power action waits for the last safe moment (deadline minus logind\'s InhibitDelayMaxUSec minus the safety margin) instead of happening at once' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l gcp-preemption-notice -d 'GCP: how long before its ACPI soft-off a Spot VM sees instance/preempted turn TRUE: 0s (the default: at the soft-off itself, 30 s before the hard stop), or the VM\'s scheduling.preemptionNoticeDuration (120s, gcloud --preemption-notice-duration). Used for the preemption notice\'s deadline and nthd check\'s drain-budget fit; the metadata server does not say it' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l safety-margin -d 'Time kept free between the end of the drain and the platform\'s deadline' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l fallback-drain-budget -d 'Drain budget assumed when logind\'s InhibitDelayMaxUSec cannot be read' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l retry-delay -d 'Wait between retries of a failed power action' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l metrics-textfile -d 'Write Prometheus metrics to this file (atomically) for node_exporter\'s textfile collector' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l metrics-listen -d 'Serve Prometheus metrics on http://ADDR/metrics (off by default; the packaged unit\'s IPAddressAllow= must be widened by a drop-in: docs/observability.md, "Reachability"). A bad address disables only the server (logged as an error, shown by `nthd status`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l webhook -d 'POST every notice, action and cancellation to this URL (repeatable; NTHD_WEBHOOK takes a comma-separated list). http or https; no credentials in the URL: put them in --webhook-headers-file. Delivery never delays the power-off, and a webhook that cannot be set up disables only webhooks: nthd keeps watching and acting' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l webhook-url-file -d 'A file with more webhook URLs, one per line (`#` starts a comment), for URLs whose path is a secret (Slack\'s). Must be owned by root and not readable by others, like the headers file: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l webhook-format -d 'The webhook body: `cloudevents` (CloudEvents 1.0 structured JSON) or `slack` (a Slack/Teams `{"text": ...}`)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l webhook-headers-file -d '`Name: value` lines added to every webhook request (e.g. Authorization). Must be owned by root and not readable by others: chown root:nthd F; chmod 0640 F' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l status-file -d 'The daemon\'s status file, read by `nthd status` [default: $RUNTIME_DIRECTORY/status.json under systemd, else /run/nthd/status.json]' -r -F
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l asg-complete -d 'AWS: complete the Auto Scaling termination lifecycle action after the drain, with this result: `off` (no request to Auto Scaling at all), `CONTINUE` or `ABANDON`. Needs --asg-lifecycle-hook, the instance role\'s autoscaling:CompleteLifecycleAction and a unit drop-in that lets nthd reach the endpoint (docs/clouds.md)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l asg-lifecycle-hook -d 'AWS: the name of the group\'s termination lifecycle hook (required when --asg-complete is on; without it completion is off, with a warning)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l asg-group -d 'AWS: the Auto Scaling group\'s name (default: asked with DescribeAutoScalingInstances)' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l asg-endpoint -d 'AWS: the Auto Scaling endpoint, https://HOST[:PORT] (a VPC interface endpoint, FIPS); http:// only to a loopback address [default: https://autoscaling.REGION.amazonaws.com]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-spot-terminate -d 'AWS spot instance-action `terminate` (about 2 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-spot-stop -d 'AWS spot instance-action `stop` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-spot-hibernate -d 'AWS spot instance-action `hibernate` (powering off would break hibernation) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-rebalance -d 'AWS rebalance recommendation (elevated interruption risk, not a notice) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-asg-terminate -d 'AWS Auto Scaling target-lifecycle-state `Terminated` / `Warmed:Terminated` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-asg-other -d 'AWS Auto Scaling target-lifecycle-state other than InService (Standby, Detached, Warmed:*) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-scheduled-stop -d 'AWS scheduled event `instance-stop` or `instance-retirement` [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-scheduled-reboot -d 'AWS scheduled event `instance-reboot` or `system-reboot` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-scheduled-maintenance -d 'AWS scheduled event `system-maintenance` [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-gcp-preempt -d 'GCP `instance/preempted` = TRUE (as the ACPI soft-off starts, hard-off 30 s later; 120 s earlier with a preemption notice) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-gcp-terminate-maintenance -d 'GCP `instance/maintenance-event` = TERMINATE_ON_HOST_MAINTENANCE (at the last safe moment before instance/upcoming-maintenance\'s start, else at once) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-gcp-migrate -d 'GCP `instance/maintenance-event` = MIGRATE_ON_HOST_MAINTENANCE (live migration) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-azure-preempt -d 'Azure Scheduled Event `Preempt` for this VM (at least 30 seconds ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-azure-terminate -d 'Azure Scheduled Event `Terminate` for this VM [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-azure-reboot -d 'Azure Scheduled Event `Reboot` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-azure-redeploy -d 'Azure Scheduled Event `Redeploy` for this VM [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-azure-freeze -d 'Azure Scheduled Event `Freeze` (a pause of seconds, never a reason to power off) [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-alibaba-spot -d 'Alibaba Cloud spot termination-time (about 5 minutes ahead) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-tencent-spot -d 'Tencent Cloud spot termination-time (read as UTC+8; lead time not documented) [default: poweroff]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l action-unknown -d 'Anything the metadata service says that nthd does not recognise [default: log]' -r
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l aws-ipv6 -d 'AWS: use the IPv6 endpoint http://[fd00:ec2::254] (IPv6-only subnets)'
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l aws-imdsv1 -d 'AWS: allow IMDSv1 when the IMDSv2 token request is refused (old setups only)'
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -l dry-run -d 'Do everything but the logind call; log what would have happened'
complete -c nthd -n "__fish_nthd_using_subcommand generate-assets" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "run" -d 'Run the daemon (the default)'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "once" -d 'Read every source once, print the notices and what nthd would do, and exit'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "check" -d 'Check whether a graceful shutdown will really work on this node'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "simulate" -d 'Fire drill: inject a synthetic notice into the policy and action path'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "status" -d 'Show what the daemon knows: cloud, instance, sources, notices, actions, errors'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "generate-assets" -d 'Write the man page and shell completions into a directory (used by packaging)'
complete -c nthd -n "__fish_nthd_using_subcommand help; and not __fish_seen_subcommand_from run once check simulate status generate-assets help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
