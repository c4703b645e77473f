#!/usr/bin/env python3
"""A CloudEvents webhook receiver for the e2e (tests/e2e/run.sh, scenario `observability`).

Runs inside the container, next to nthd, on the CloudEvents SDK for Python (PyPI package
`cloudevents`, installed from the host's wheel cache: the container has no network).

POST: the body is parsed by the SDK twice, through both of its HTTP entry points:
  * `cloudevents.v1.http.from_http(headers, body)`, the 1.x API that most receivers in the
    wild are written against (`cloudevents.http.from_http` before the SDK's 2.0);
  * `cloudevents.core.bindings.http.from_http(HTTPMessage, JSONFormat(), CloudEvent)`, the 2.x
    core, with the v1.0 event class as the factory: its constructor validates the required
    attributes, `specversion` == "1.0" and the types of the optional ones (`time` a datetime).
Then what nthd promises on top of the spec (issue #13): structured mode
(`application/cloudevents+json`), a known `type`, `source`, `id` and `time` set, `subject` the
instance id, `data` an object with the keys of DATA_KEYS and TYPE_KEYS[type] (dotted keys
are paths into nested objects), `data.instance_id` == subject.
Every POST appends one JSON line to --log with its arrival time (time.time_ns(), the host's
clock: the container shares it) and either the event (`"ok": true`, answered 200) or the
reason it was refused (`"ok": false`, answered 400 with the reason). The scenario fails on any
`"ok": false` line.

OPTIONS: the CloudEvents "HTTP 1.1 Web Hooks" abuse-protection handshake (validation
request). The sender names itself in `WebHook-Request-Origin`; the receiver allows it by
echoing that origin in `WebHook-Allowed-Origin` with 200 (`Allow: POST, OPTIONS`). A probe
without the header is answered 400 and logged as a failure: nthd's `check` must send it.
Every probe is logged (`"probe": true`).

Usage: receiver.py --listen 127.0.0.1:8099 --log /e2e/receiver.jsonl --instance-id ID
                   [--path /events] [--require-header 'Authorization: Bearer x']
"""

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cloudevents.core.bindings.http import HTTPMessage
from cloudevents.core.bindings.http import from_http as core_from_http
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent as CoreCloudEvent

try:  # SDK 1.x
    from cloudevents.http import from_http
except ImportError:  # SDK 2.x keeps the 1.x API under cloudevents.v1
    from cloudevents.v1.http import from_http

EVENT_TYPES = ("io.nthd.notice", "io.nthd.action", "io.nthd.canceled", "io.nthd.drained")
# The keys every event's `data` must have, and those each type adds; a dotted key is a path
# into nested objects. One place to change when nthd's data keys change (src/webhook/event.rs,
# the README's "Webhooks"). KIND_KEY: where the notice's kind is (logged as "kind").
DATA_KEYS = ("hostname", "cloud", "instance_id", "instance_type", "zone", "lifecycle")
NOTICE_KEYS = ("notice.kind", "notice.id", "notice.status", "notice.deadline", "notice.detail")
TYPE_KEYS = {
    "io.nthd.notice": NOTICE_KEYS + ("decision.action", "decision.at", "decision.deferred",
                                     "decision.reason"),
    "io.nthd.action": NOTICE_KEYS + ("result.action", "result.outcome"),
    "io.nthd.canceled": NOTICE_KEYS + ("reason",),
    # `notice` is null when the shutdown was not nthd's; `pods_left` is absent (with
    # `pods_left_unknown`) when nthd cannot tell.
    "io.nthd.drained": ("started", "held_s", "budget_s", "outcome", "holders", "notice"),
}
KIND_KEY = "notice.kind"
_MISSING = object()


def lookup(data, dotted):
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data
STRUCTURED = "application/cloudevents+json"


class Invalid(Exception):
    pass


def validate(headers, body, instance_id):
    """Parse and check one POST; returns the record to log. Raises Invalid."""
    ctype = headers.get("content-type", "")
    if ctype.split(";")[0].strip().lower() != STRUCTURED:
        raise Invalid(f"content-type {ctype!r}, not structured mode ({STRUCTURED})")
    if any(k.lower().startswith("ce-") for k in headers):
        raise Invalid("ce-* headers in a structured-mode request")
    try:
        legacy = from_http(headers, body)
    except Exception as e:  # the SDK's own errors: missing attributes, bad JSON, ...
        raise Invalid(f"cloudevents from_http(headers, body): {type(e).__name__}: {e}")
    try:
        core = core_from_http(HTTPMessage(dict(headers), body), JSONFormat(), CoreCloudEvent)
    except Exception as e:
        raise Invalid(f"cloudevents core from_http (v1.0 CloudEvent): {type(e).__name__}: {e}")

    # The SDK fills in `id` and `time` when they are missing (a producer's convenience): check
    # the document as sent.
    try:
        attrs = json.loads(body)
    except ValueError as e:
        raise Invalid(f"body is not JSON: {e}")
    if core.get_specversion() != "1.0" or attrs.get("specversion") != "1.0":
        raise Invalid(f"specversion {attrs.get('specversion')!r}, not 1.0")
    etype = core.get_type()
    if etype not in EVENT_TYPES:
        raise Invalid(f"type {etype!r} is not one of {EVENT_TYPES}")
    for attr in ("source", "id", "time"):
        if not attrs.get(attr):
            raise Invalid(f"attribute {attr} missing or empty")
    if attrs["id"] != core.get_id() or core.get_time() is None:
        raise Invalid("the SDK read another id, or no time")
    if core.get_subject() != instance_id:
        raise Invalid(f"subject {core.get_subject()!r}, not the instance id {instance_id!r}")
    data = core.get_data()
    if not isinstance(data, dict):
        raise Invalid(f"data is {type(data).__name__}, not a JSON object")
    want = DATA_KEYS + TYPE_KEYS[etype]
    missing = [k for k in want if lookup(data, k) is _MISSING]
    if missing:
        raise Invalid(f"data lacks {missing} (has {sorted(data)})")
    if data.get("instance_id") != instance_id:
        raise Invalid(f"data.instance_id {data.get('instance_id')!r}, not {instance_id!r}")
    if legacy.get_data() != data:
        raise Invalid("the two SDK entry points disagree on data")
    return {
        "type": etype,
        "id": core.get_id(),
        "source": core.get_source(),
        "subject": core.get_subject(),
        "time": attrs.get("time"),
        "kind": None if lookup(data, KIND_KEY) is _MISSING else lookup(data, KIND_KEY),
        "data": data,
    }


class Handler(BaseHTTPRequestHandler):
    server_version = "nthd-e2e-receiver/1"
    protocol_version = "HTTP/1.1"

    def _record(self, rec):
        rec.setdefault("t_ns", self.t_ns)
        rec["t_ms"] = rec["t_ns"] // 1_000_000
        rec["method"] = self.command
        rec["path"] = self.path
        rec["user_agent"] = self.headers.get("User-Agent")
        line = json.dumps(rec, sort_keys=True)
        with self.server.lock, open(self.server.log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()

    def _answer(self, code, text, extra=()):
        body = (text + "\n").encode()
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _checks_common(self):
        if self.path.split("?")[0] != self.server.path:
            return f"path {self.path!r}, not {self.server.path!r}"
        if self.server.require:
            name, value = self.server.require
            if self.headers.get(name) != value:
                return f"header {name} missing or wrong"
        return None

    def do_OPTIONS(self):
        self.t_ns = time.time_ns()
        origin = self.headers.get("WebHook-Request-Origin")
        problem = self._checks_common()
        if problem is None and not origin:
            problem = "validation request without WebHook-Request-Origin"
        if problem:
            self._record({"ok": False, "probe": True, "reason": problem})
            self._answer(400, problem)
            return
        self._record({"ok": True, "probe": True, "origin": origin,
                      "callback": self.headers.get("WebHook-Request-Callback"),
                      "rate": self.headers.get("WebHook-Request-Rate")})
        self._answer(200, "ok", [("WebHook-Allowed-Origin", origin),
                                 ("WebHook-Allowed-Rate", "*"),
                                 ("Allow", "POST, OPTIONS")])

    def do_POST(self):
        self.t_ns = time.time_ns()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        problem = self._checks_common()
        try:
            if problem:
                raise Invalid(problem)
            rec = validate(headers, body, self.server.instance_id)
        except Invalid as e:
            self._record({"ok": False, "reason": str(e),
                          "body": body.decode("utf-8", "replace")[:2000],
                          "content_type": headers.get("content-type")})
            self._answer(400, str(e))
            return
        rec["ok"] = True
        rec["content_type"] = headers.get("content-type")
        self._record(rec)
        self._answer(200, "ok")

    def do_GET(self):  # health check for the harness; not logged
        self._answer(200 if self.path == "/health" else 404, "receiver")

    def log_message(self, fmt, *args):  # to the journal (stderr), one line per request
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:8099")
    ap.add_argument("--path", default="/events")
    ap.add_argument("--log", required=True)
    ap.add_argument("--instance-id", required=True)
    ap.add_argument("--require-header", default=None, help="'Name: value' every request must carry")
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    srv.log = a.log
    srv.path = a.path
    srv.instance_id = a.instance_id
    srv.require = None
    if a.require_header:
        name, value = a.require_header.split(":", 1)
        srv.require = (name.strip(), value.strip())
    import cloudevents
    sys.stderr.write(f"receiver on {a.listen}{a.path}, cloudevents {cloudevents.__version__}\n")
    srv.serve_forever()


if __name__ == "__main__":
    main()
