# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted scripts/jq programs run inside the container
# AWS Auto Scaling: the termination lifecycle action completed from the node.  The
# mock IMDS serves the instance's id, region and role credentials (fake keys) and the state
# `Terminated`; a mock Auto Scaling endpoint (tests/e2e/asg-mock.py) runs inside the container
# on 127.0.0.1, re-signs every request with botocore (an independent SigV4 signer) and logs each
# one to /e2e/asg-mock.jsonl; nthd reaches it through the drop-in IPAddressAllow=127.0.0.1.

ASG_STATE_PATH=/latest/meta-data/autoscaling/target-lifecycle-state
ASG_PORT=8098
ASG_ENDPOINT="http://127.0.0.1:$ASG_PORT"
ASG_INSTANCE="i-0123456789abcdef0"
ASG_GROUP=e2e-nodes
ASG_HOOK=nthd-terminate
ASG_ROLE=e2e-node-role
ASG_REGION=us-east-1
# Fake credentials, for the mock only; the scenario checks they never reach nthd's journal.
ASG_KEY=ASIAE2EFAKEKEYID0001
ASG_SECRET=e2eFakeSecretKey/0123456789abcdefghijklm
ASG_TOKEN=E2EFAKESESSIONTOKEN//////////wEaDe2efakee2efake=
ASG_PY_DIR=/opt/e2e-botocore
E2E_BOTOCORE_REQ="${E2E_BOTOCORE_REQ:-botocore>=1.31,<2}"
E2E_ASG_WHEELS="${E2E_ASG_WHEELS:-$E2E_DIR/wheels-botocore}"

# botocore's wheels (and its dependencies', and pip's) for the tree's Python 3.11, downloaded
# once on the host like the CloudEvents SDK's (lib.sh wheels_fetch): the container has no network.
_asg_wheels_fetch() { wheels_fetch_for "$E2E_ASG_WHEELS" "$E2E_BOTOCORE_REQ" botocore; }

# botocore into ASG_PY_DIR inside the container: pip from its wheel, --no-index.
_asg_botocore_in_ct() {
  mkdir -p "$CT_DIR/wheels-botocore"
  cp -f "$E2E_ASG_WHEELS"/*.whl "$CT_DIR/wheels-botocore/" || return 1
  ct_sh 'set -- /e2e/wheels-botocore/pip-*.whl "$1"
         python3 "$1/pip" install -q --no-index --find-links /e2e/wheels-botocore --disable-pip-version-check \
           --no-cache-dir --no-compile --root-user-action=ignore --target "$2" botocore' "$ASG_PY_DIR"
}

_asg_mock_up() { ct_exec curl -sf -m 2 -o /dev/null "$ASG_ENDPOINT/health"; }

# Before nthd is configured: the instance's identity and role on the mock IMDS, botocore, the
# mock Auto Scaling endpoint (one "No active Lifecycle Action found" first), the drop-in.
_asg_pre() {
  local md=/latest/meta-data kv
  step "the instance's id, region and role on the mock IMDS"
  for kv in "instance-id=$ASG_INSTANCE" "placement/region=$ASG_REGION" \
            "iam/security-credentials/=$ASG_ROLE"; do
    set_route_text "$md/${kv%%=*}" "${kv#*=}" || fail "could not set $md/${kv%%=*}"
  done
  set_route "$md/iam/security-credentials/$ASG_ROLE" \
    "{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"$ASG_KEY\",\"SecretAccessKey\":\"$ASG_SECRET\",\"Token\":\"$ASG_TOKEN\",\"Expiration\":\"$(iso_in 21600)\"}" \
    || fail "could not set the role's credentials"
  step "botocore: pip (from its wheel) installs the host's cached wheels, --no-index"
  _asg_botocore_in_ct || fail "could not install botocore into the container"
  ct_put "$HERE/asg-mock.py" asg-mock.py >/dev/null
  # Before=nthd.service: at the shutdown systemd stops nthd first and the mock after it.
  ct_exec systemd-run --quiet --unit=asg-mock --service-type=simple -p Before=nthd.service \
    -p StandardOutput=journal -p StandardError=journal -p "Environment=PYTHONPATH=$ASG_PY_DIR" \
    python3 /e2e/bin/asg-mock.py --listen "127.0.0.1:$ASG_PORT" --log /e2e/asg-mock.jsonl \
    --access-key "$ASG_KEY" --secret-key "$ASG_SECRET" --token "$ASG_TOKEN" --region "$ASG_REGION" \
    --instance-id "$ASG_INSTANCE" --group "$ASG_GROUP" --hook "$ASG_HOOK" --not-active 1 \
    || fail "could not start the Auto Scaling mock"
  wait_until 10 _asg_mock_up || fail "the Auto Scaling mock did not come up: $(ct_journal -u asg-mock | tail -n 5)"
  step "nthd.service drop-in: IPAddressAllow=127.0.0.1 (docs/clouds.md, \"Completing the lifecycle action\")"
  ct_sh 'mkdir -p /etc/systemd/system/nthd.service.d &&
         printf "[Service]\nIPAddressAllow=127.0.0.1\n" >/etc/systemd/system/nthd.service.d/asg.conf &&
         systemctl daemon-reload' || fail "could not write nthd's asg.conf drop-in"
}

# The mock's request log (JSON lines), on the host.
_asg_log() { cat "$SDIR/asg-mock.jsonl" 2>/dev/null || true; }

# The state turns Terminated; nthd drains and powers off.
_asg_terminated_poweroff() {
  step "Auto Scaling target-lifecycle-state Terminated"
  set_notice --text "$ASG_STATE_PATH" Terminated
  # The state is read every 3 poll intervals.
  expect_poweroff_through_lock 10 5000
}

# Completion on: a drained power-off, then exactly one successful, signed
# CompleteLifecycleAction (CONTINUE, right group, hook and instance) after one refused with
# "No active Lifecycle Action found", before the halt.
scen_asg_complete() {
  _asg_wheels_fetch || fail "could not download botocore's wheels (pip download)"
  setup_node --pre _asg_pre --env NTHD_ASG_COMPLETE=CONTINUE --env "NTHD_ASG_LIFECYCLE_HOOK=$ASG_HOOK" \
    --env "NTHD_ASG_ENDPOINT=$ASG_ENDPOINT"
  _asg_terminated_poweroff
  local log calls bad ok released
  log="$(_asg_log)"
  [[ -n "$log" ]] || fail "no request reached the Auto Scaling mock"
  hjq -c '{action, status, signature_ok, t_ms}' <<<"$log" | indent >&2
  bad="$(hjq -c 'select(.signature_ok | not)' <<<"$log")"
  [[ -z "$bad" ]] || fail "botocore rejected nthd's signature: $bad"
  calls="$(hjq -sc '[.[] | select(.action == "CompleteLifecycleAction")]' <<<"$log")"
  [[ "$(hjq 'length' <<<"$calls")" == 2 ]] || fail "not exactly two CompleteLifecycleAction calls: $calls"
  [[ "$(hjq -r '.[0].status' <<<"$calls")" == 400 ]] || fail "the first CompleteLifecycleAction was not the refused one: $calls"
  ok="$(hjq -c '.[1]' <<<"$calls")"
  [[ "$(hjq -r .status <<<"$ok")" == 200 ]] || fail "the second CompleteLifecycleAction did not succeed: $ok"
  [[ "$(hjq -r '.params | "\(.LifecycleActionResult) \(.AutoScalingGroupName) \(.LifecycleHookName) \(.InstanceId)"' <<<"$ok")" \
       == "CONTINUE $ASG_GROUP $ASG_HOOK $ASG_INSTANCE" ]] || fail "CompleteLifecycleAction named the wrong action: $ok"
  released="$(kubelet_event_ms released)"
  (( $(hjq -r .t_ms <<<"$ok") >= released )) || fail "the lifecycle action was completed before the drain ended"
  (( $(hjq -r .t_ms <<<"$ok") <= CT_EXIT_MS )) || fail "the lifecycle action was completed after the halt?!"
  timing "completed $(fmt_ms $(( $(hjq -r .t_ms <<<"$ok") - released ))) after the drain, $(fmt_ms $((CT_EXIT_MS - $(hjq -r .t_ms <<<"$ok")))) before the halt"
  _asg_no_secret_in_journal
}

# Completion off (the default), everything else the same: no request at all reaches the mock,
# and nthd never asks IMDS for the role's credentials.
scen_asg_complete_off() {
  _asg_wheels_fetch || fail "could not download botocore's wheels (pip download)"
  setup_node --pre _asg_pre
  _asg_terminated_poweroff
  [[ -z "$(_asg_log)" ]] || fail "requests reached the Auto Scaling mock with completion off: $(_asg_log)"
  local mlog="$SDIR/mock-log.final.json"
  [[ -s "$mlog" ]] || mlog="$SDIR/mock-log.json"
  ! hjq -e '.[] | select(.path | contains("/iam/security-credentials"))' "$mlog" >/dev/null 2>&1 \
    || fail "nthd read the role's credentials with completion off"
  log "no request reached the Auto Scaling mock; no credentials read"
}

# The fake credentials never reached nthd's journal.
_asg_no_secret_in_journal() {
  local j s
  j="$(journalctl -D "$SDIR/journal" -q --no-pager -o cat _SYSTEMD_UNIT=nthd.service 2>/dev/null)"
  for s in "$ASG_KEY" "$ASG_SECRET" "$ASG_TOKEN"; do
    ! grep -qF -- "$s" <<<"$j" || fail "a credential reached nthd's journal"
  done
  log "nthd's journal holds none of the role's credentials"
}

# Completion on, nthd logging at debug, and the role's credentials document not UTF-8: the
# document as EC2 serves it, then one stray byte (0xC3, the first half of a two-byte
# character). The drain and the power-off go on; the completion fails naming the credentials'
# URL; and no byte of the document's secrets reaches nthd's journal, at debug level either.
scen_asg_credentials_not_utf8() {
  _asg_wheels_fetch || fail "could not download botocore's wheels (pip download)"
  setup_node --pre _asg_pre_not_utf8 --env NTHD_ASG_COMPLETE=CONTINUE \
    --env "NTHD_ASG_LIFECYCLE_HOOK=$ASG_HOOK" --env "NTHD_ASG_ENDPOINT=$ASG_ENDPOINT" \
    --env NTHD_LOG_LEVEL=debug
  _asg_terminated_poweroff
  _nthd_logged "security-credentials/$ASG_ROLE is not what nthd expects: the body is not UTF-8" \
    || fail "the journal does not say the role's credentials are not UTF-8"
  _nthd_logged "bytes; a secret, never logged)" || fail "the error does not say the document is never logged"
  # nthd logs at debug level, and its debug line about the answer shows no byte of it.
  _nthd_logged "security-credentials/$ASG_ROLE (" || fail "no debug line about the answer: is debug logging on?"
  _nthd_logged "bytes; a secret, not shown)" || fail "the debug line does not say the body is not shown"
  [[ -z "$(_asg_log | hjq -c 'select(.action == "CompleteLifecycleAction")')" ]] \
    || fail "nthd called CompleteLifecycleAction without usable credentials: $(_asg_log)"
  _asg_no_secret_in_journal
}
# _asg_pre, then the credentials document with a byte that is not UTF-8 after it.
_asg_pre_not_utf8() {
  _asg_pre
  local doc spec
  doc="{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"$ASG_KEY\",\"SecretAccessKey\":\"$ASG_SECRET\",\"Token\":\"$ASG_TOKEN\",\"Expiration\":\"$(iso_in 21600)\"}"
  spec="$(ct_exec jq -cn --arg d "$doc" \
    '{status: 200, headers: {"Content-Type": "text/plain"}, body_len: (($d | utf8bytelength) + 1), body_fill: ($d + "\u00fc")}')" \
    || fail "could not build the credentials route"
  mock_route "/latest/meta-data/iam/security-credentials/$ASG_ROLE" "$spec" \
    || fail "could not serve the credentials document that is not UTF-8"
}
