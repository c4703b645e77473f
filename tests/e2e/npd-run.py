#!/usr/bin/env python3
"""Run a node-problem-detector custom-plugin monitor config's rules once, as NPD does.

What NPD's custom plugin monitor does (k8s.io/node-problem-detector,
pkg/custompluginmonitor/types/config.go and plugin/plugin.go), done here for one round:
  * config: "plugin" must be "custom"; pluginConfig defaults timeout 5s, max_output_length
    80, invoke_interval 30s, concurrency 3; a rule's own timeout may not exceed the global
    one; each rule's path must exist; a permanent rule's condition must be among
    "conditions" (Validate()).  Durations in Go's time.ParseDuration syntax.
  * per rule: exec path with args (no shell), in its own process group; after the rule's
    timeout (or the global one) the group is SIGKILLed and the result is Unknown with
    "Timeout when running plugin ..."; stdout is read up to 4 KiB and the rest drained;
    the output is whitespace-trimmed and cut at max_output_length bytes; exit 0 -> OK,
    1 -> NonOK, anything else (a signal too) -> Unknown.
Prints one JSON line per rule: {"t_ms", "type", "condition", "reason", "path", "args",
"exit_code", "status", "output", "elapsed_ms"}.  Exits 0 once every rule has run (whatever
their status), 3 if the config is invalid.

Usage: npd-run.py CONFIG.json
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

MAX_BUFFER = 4 * 1024  # maxCustomPluginBufferBytes
DEFAULTS = {"timeout": "5s", "invoke_interval": "30s", "max_output_length": 80, "concurrency": 3}
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text):
    """Go's time.ParseDuration for the non-negative values a config holds ("5s", "1m30s")."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def load(path):
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    errors = []
    if cfg.get("plugin") != "custom":
        errors.append(f'plugin is {cfg.get("plugin")!r}, NPD supports only "custom"')
    pc = dict(DEFAULTS, **cfg.get("pluginConfig", {}))
    pc["timeout_s"] = parse_duration(pc["timeout"])
    parse_duration(pc["invoke_interval"])
    if not isinstance(pc["max_output_length"], int) or pc["max_output_length"] <= 0:
        errors.append(f"max_output_length {pc['max_output_length']!r}")
    if not cfg.get("source"):
        errors.append("no source")
    conditions = {c.get("type") for c in cfg.get("conditions", [])}
    rules = cfg.get("rules") or []
    if not rules:
        errors.append("no rules")
    for r in rules:
        if r.get("type") not in ("temporary", "permanent"):
            errors.append(f"rule type {r.get('type')!r}")
        if not r.get("reason"):
            errors.append(f"rule without reason: {r}")
        if "timeout" in r and parse_duration(r["timeout"]) > pc["timeout_s"]:
            errors.append(f"rule timeout {r['timeout']} > global {pc['timeout']}")
        if not os.path.exists(r.get("path", "")):
            errors.append(f"rule path {r.get('path')!r} does not exist")
        if r.get("type") == "permanent" and r.get("condition") not in conditions:
            errors.append(f"permanent rule's condition {r.get('condition')!r} has no default condition")
    if errors:
        raise ValueError("; ".join(errors))
    return pc, rules


def run(rule, pc):
    timeout = pc["timeout_s"]
    if "timeout" in rule and parse_duration(rule["timeout"]) < timeout:
        timeout = parse_duration(rule["timeout"])
    t0 = time.monotonic()
    t_ms = time.time_ns() // 1_000_000
    proc = subprocess.Popen([rule["path"], *rule.get("args", [])], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # util.Exec: Setpgid
    killed = False
    try:
        out, _err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = True
        os.killpg(proc.pid, signal.SIGKILL)  # util.Kill: the whole group
        out, _err = proc.communicate()
    out = out[:MAX_BUFFER].strip()  # Go strings are bytes: cut and trim bytes
    code = proc.returncode
    if killed:
        out = f"Timeout when running plugin {rule['path']!r}: state - signal: killed. output - {out!r}".encode()
    out = out[: pc["max_output_length"]].decode("utf-8", "replace")
    status = {0: "OK", 1: "NonOK"}.get(code, "Unknown")
    return {"t_ms": t_ms, "type": rule.get("type"), "condition": rule.get("condition"),
            "reason": rule.get("reason"), "path": rule["path"], "args": rule.get("args", []),
            "exit_code": code, "status": status, "output": out,
            "elapsed_ms": round((time.monotonic() - t0) * 1000)}


def main():
    try:
        pc, rules = load(sys.argv[1])
    except (OSError, ValueError, KeyError) as e:
        print(json.dumps({"config_error": str(e)}))
        return 3
    for r in rules:
        print(json.dumps(run(r, pc)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
