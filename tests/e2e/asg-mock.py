#!/usr/bin/env python3
"""A mock EC2 Auto Scaling Query API endpoint for nthd's tests (tests/asg.rs, tests/e2e/scen-asg.sh).

Every request's SigV4 signature is computed again with botocore's own signer (SigV4Auth, an
implementation independent of nthd's) from the credentials given on the command line and the
headers the request says it signed; a mismatch is answered 403 SignatureDoesNotMatch, as AWS
does. It answers DescribeAutoScalingInstances, CompleteLifecycleAction (the first
--not-active calls get AWS's real "No active Lifecycle Action found" ValidationError),
RecordLifecycleActionHeartbeat and DescribeLifecycleHooks, and writes every request to --log as a
JSON line: time, t_ms, action, params, signature_ok, status. Credentials, tokens and signatures
are never logged.

The first line on stdout is "listening on HOST:PORT" (so --listen 127.0.0.1:0 works).
"""

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

NS = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$"
)
MAX_BODY = 64 * 1024


def xml_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def error_xml(code, message):
    return (
        f'<ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type><Code>{code}</Code>'
        f"<Message>{xml_escape(message)}</Message></Error>"
        f"<RequestId>00000000-0000-0000-0000-000000000000</RequestId></ErrorResponse>"
    )


def ok_xml(action, result=""):
    return (
        f'<{action}Response xmlns="{NS}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>00000000-0000-0000-0000-000000000001</RequestId>"
        f"</ResponseMetadata></{action}Response>"
    )


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.complete_calls = 0
        self.log = open(args.log, "a", encoding="utf-8") if args.log else None

    def record(self, entry):
        line = json.dumps(entry, sort_keys=True)
        with self.lock:
            if self.log:
                self.log.write(line + "\n")
                self.log.flush()
            if self.args.verbose:
                print(line, file=sys.stderr, flush=True)


def check_signature(args, handler, body):
    """Whether the request's signature is the one botocore computes; and why not."""
    m = AUTH_RE.match(handler.headers.get("Authorization", ""))
    if not m:
        return False, "no SigV4 Authorization header"
    key_id, _date, region, service, signed, signature = m.groups()
    if key_id != args.access_key or region != args.region or service != "autoscaling":
        return False, "wrong key id, region or service in the credential scope"
    if handler.headers.get("X-Amz-Security-Token") != args.token:
        return False, "missing or wrong X-Amz-Security-Token"
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names or "x-amz-security-token" not in names:
        return False, "host, x-amz-date and x-amz-security-token must be signed"
    headers = {}
    for name in names:
        value = handler.headers.get(name)
        if value is None:
            return False, f"signed header {name} is missing"
        headers[name] = value
    req = AWSRequest(method=handler.command, url=f"http://{headers['host']}{handler.path}",
                     data=body, headers=headers)
    req.context["timestamp"] = headers["x-amz-date"]
    auth = SigV4Auth(Credentials(args.access_key, args.secret_key, args.token), "autoscaling", region)
    canonical = auth.canonical_request(req)
    want = auth.signature(auth.string_to_sign(req, canonical), req)
    if want != signature:
        return False, "signature mismatch"
    return True, ""


def answer(state, action, params):
    """(status, body) for a correctly signed call."""
    a = state.args
    if action in a.deny:
        return 403, error_xml("AccessDenied", f"User: arn:aws:sts::123456789012:assumed-role/node/{a.instance_id} "
                              f"is not authorized to perform: autoscaling:{action}")
    if action == "DescribeAutoScalingInstances":
        if params.get("InstanceIds.member.1") != a.instance_id:
            return 200, ok_xml(action, "<AutoScalingInstances/>")
        member = (f"<member><AutoScalingGroupName>{a.group}</AutoScalingGroupName><InstanceId>{a.instance_id}"
                  f"</InstanceId><LifecycleState>Terminating:Wait</LifecycleState></member>")
        return 200, ok_xml(action, f"<AutoScalingInstances>{member}</AutoScalingInstances>")
    if action == "DescribeLifecycleHooks":
        member = (f"<member><LifecycleHookName>{a.hook}</LifecycleHookName><AutoScalingGroupName>{a.group}"
                  f"</AutoScalingGroupName><LifecycleTransition>autoscaling:EC2_INSTANCE_TERMINATING"
                  f"</LifecycleTransition><HeartbeatTimeout>{a.heartbeat_timeout}</HeartbeatTimeout></member>")
        return 200, ok_xml(action, f"<LifecycleHooks>{member}</LifecycleHooks>")
    if action in ("CompleteLifecycleAction", "RecordLifecycleActionHeartbeat"):
        if (params.get("AutoScalingGroupName"), params.get("LifecycleHookName"), params.get("InstanceId")) != \
                (a.group, a.hook, a.instance_id):
            return 400, error_xml("ValidationError", "No Lifecycle Hook found for that group and name")
        if action == "CompleteLifecycleAction":
            if params.get("LifecycleActionResult") not in ("CONTINUE", "ABANDON"):
                return 400, error_xml("ValidationError", "LifecycleActionResult must be CONTINUE or ABANDON")
            with state.lock:
                state.complete_calls += 1
                n = state.complete_calls
            if n <= a.not_active:
                return 400, error_xml("ValidationError",
                                      f"No active Lifecycle Action found with instance ID {a.instance_id}")
        return 200, ok_xml(action)
    return 400, error_xml("InvalidAction", f"Could not find operation {action} for version 2011-01-01")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "asg-mock"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    def send(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self.send(200, "ok")
        self.send(400, error_xml("InvalidAction", "use POST"))

    def do_POST(self):
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.send(413, error_xml("RequestTooLarge", "body too large"))
        body = self.rfile.read(length)
        ok, why = check_signature(state.args, self, body)
        params = {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}
        action = params.pop("Action", "")
        version = params.pop("Version", "")
        if not ok:
            status, out = 403, error_xml("SignatureDoesNotMatch",
                                          "The request signature we calculated does not match the signature you provided.")
        elif version != "2011-01-01":
            status, out = 400, error_xml("InvalidAction", f"unknown version {version}")
        else:
            status, out = answer(state, action, params)
        now = time.time()
        state.record({"time": now, "t_ms": int(now * 1000), "action": action, "params": params,
                      "signature_ok": ok, "why": why, "status": status})
        self.send(status, out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--log")
    p.add_argument("--access-key", required=True)
    p.add_argument("--secret-key", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--instance-id", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--hook", required=True)
    p.add_argument("--heartbeat-timeout", type=int, default=3600)
    p.add_argument("--not-active", type=int, default=0,
                   help="answer the first N CompleteLifecycleAction calls 'No active Lifecycle Action found'")
    p.add_argument("--deny", action="append", default=[], help="answer AccessDenied to this action")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    host, port = args.listen.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    server.state = State(args)
    print(f"listening on {host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
