_nthd() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="nthd"
                ;;
            nthd,check)
                cmd="nthd__subcmd__check"
                ;;
            nthd,generate-assets)
                cmd="nthd__subcmd__generate__subcmd__assets"
                ;;
            nthd,help)
                cmd="nthd__subcmd__help"
                ;;
            nthd,once)
                cmd="nthd__subcmd__once"
                ;;
            nthd,run)
                cmd="nthd__subcmd__run"
                ;;
            nthd,simulate)
                cmd="nthd__subcmd__simulate"
                ;;
            nthd,status)
                cmd="nthd__subcmd__status"
                ;;
            nthd__subcmd__help,check)
                cmd="nthd__subcmd__help__subcmd__check"
                ;;
            nthd__subcmd__help,generate-assets)
                cmd="nthd__subcmd__help__subcmd__generate__subcmd__assets"
                ;;
            nthd__subcmd__help,help)
                cmd="nthd__subcmd__help__subcmd__help"
                ;;
            nthd__subcmd__help,once)
                cmd="nthd__subcmd__help__subcmd__once"
                ;;
            nthd__subcmd__help,run)
                cmd="nthd__subcmd__help__subcmd__run"
                ;;
            nthd__subcmd__help,simulate)
                cmd="nthd__subcmd__help__subcmd__simulate"
                ;;
            nthd__subcmd__help,status)
                cmd="nthd__subcmd__help__subcmd__status"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        nthd)
            opts="-h -V --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help --version run once check simulate status generate-assets help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__check)
            opts="-h --json --root --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --root)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__generate__subcmd__assets)
            opts="-h --out --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help)
            opts="run once check simulate status generate-assets help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__check)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__generate__subcmd__assets)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__once)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__simulate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__once)
            opts="-h --json --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__run)
            opts="-h --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__simulate)
            opts="-h --yes --deadline-in --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --deadline-in)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        nthd__subcmd__status)
            opts="-h --json --npd --provider --imds-endpoint --imds-via --aws-ipv6 --aws-imdsv1 --poll-interval --aws-rebalance-boost --slow-poll-interval --gcp-wait --request-timeout --settings-file --dry-run --log-level --log-target --state-dir --deadline-kinds --gcp-preemption-notice --safety-margin --fallback-drain-budget --retry-delay --metrics-textfile --metrics-listen --webhook --webhook-url-file --webhook-format --webhook-headers-file --status-file --asg-complete --asg-lifecycle-hook --asg-group --asg-endpoint --action-spot-terminate --action-spot-stop --action-spot-hibernate --action-rebalance --action-asg-terminate --action-asg-other --action-scheduled-stop --action-scheduled-reboot --action-scheduled-maintenance --action-gcp-preempt --action-gcp-terminate-maintenance --action-gcp-migrate --action-azure-preempt --action-azure-terminate --action-azure-reboot --action-azure-redeploy --action-azure-freeze --action-alibaba-spot --action-tencent-spot --action-unknown --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --npd)
                    COMPREPLY=($(compgen -W "termination-notice maintenance-planned graceful-node-shutdown-in-progress preemption-scheduled gce-spot-preempting" -- "${cur}"))
                    return 0
                    ;;
                --provider)
                    COMPREPLY=($(compgen -W "auto aws gcp azure alibaba tencent" -- "${cur}"))
                    return 0
                    ;;
                --imds-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --imds-via)
                    COMPREPLY=($(compgen -W "auto direct systemd-imdsd" -- "${cur}"))
                    return 0
                    ;;
                --poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --aws-rebalance-boost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --slow-poll-interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-wait)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --request-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --settings-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-level)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --log-target)
                    COMPREPLY=($(compgen -W "auto journald stderr" -- "${cur}"))
                    return 0
                    ;;
                --state-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --deadline-kinds)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gcp-preemption-notice)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --safety-margin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --fallback-drain-budget)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --retry-delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-textfile)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --metrics-listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-url-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-format)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --webhook-headers-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --status-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-complete)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-lifecycle-hook)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-group)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --asg-endpoint)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-spot-hibernate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-rebalance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-asg-other)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-scheduled-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-terminate-maintenance)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-gcp-migrate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-preempt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-terminate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-reboot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-redeploy)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-azure-freeze)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-alibaba-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-tencent-spot)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --action-unknown)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _nthd -o nosort -o bashdefault -o default nthd
else
    complete -F _nthd -o bashdefault -o default nthd
fi
