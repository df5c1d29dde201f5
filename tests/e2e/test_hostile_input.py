#!/usr/bin/env python3
"""Hostile values in requests (issue 10, items 6 and 7).

Logs cannot be forged: a pod whose name carries a newline, a fake log line and
an ESC sequence leaves one escaped line in the text log (and one JSON object
per line in the JSON log), never a forged line or a raw control byte.

Paths are exact: a path that decodes to a NUL or another control character is
a 400 with a JSON error and reaches no handler (libmicrohttpd decodes "%00"
and the router used to see only what came before it); everything else must
match a route exactly."""

import json
import re
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hostile_input")

# The name from the issue: a newline, a whole fake log line, and an ANSI
# escape that would turn a terminal red.
EVIL = "evil\n2026-11-24T00:00:00.000Z info  FORGED LINE\u001b[31m"
FORGED_PREFIX = "2026-11-24T00:00:00.000Z"


def evil_pod(name=EVIL):
    p = g.demo_pod("gpu-4")
    p["metadata"]["name"] = name
    p["metadata"]["uid"] = "evil-0000-4000-8000-000000000001"
    return p


def decide_evil(srv):
    """A filter that decides (filter placement mode) and logs the pod's name."""
    res = srv.filter(evil_pod(), g.DEMO_ARGS_ORDER)
    return res


@suite.test
def text_log_cannot_be_forged(s):
    with g.Server(s) as srv:
        res = decide_evil(srv)
        s.check_eq((res.get("NodeNames"), res.get("Error")), (["gpu-v100-0"], ""), "the evil pod is placed")
        logged = g.wait_until(lambda: "pod assigned" in srv.stderr(), timeout=10)
        s.require(logged, "the decision is logged", srv.stderr())
    raw = open(srv.stderr_path, "rb").read()
    s.check(b"\x1b" not in raw, "no raw ESC byte in the text log", raw[-600:])
    lines = raw.decode("utf-8", "replace").split("\n")
    forged = [ln for ln in lines if ln.startswith(FORGED_PREFIX)]
    s.check_eq(forged, [], "no line starts with the forged timestamp")
    want = ('info  pod assigned pod="default/evil\\n2026-11-24T00:00:00.000Z info  FORGED LINE\\x1b[31m" '
            'node="gpu-v100-0" gpus="')
    hits = [ln for ln in lines if want in ln]
    s.check_eq(len(hits), 1, "the decision is one line with the name escaped", "\n".join(lines[-12:]))
    for ln in lines:
        if ln:
            s.check(ln[:4].isdigit() and ln[4] == "-", "every line starts with the service's own timestamp", ln)


@suite.test
def text_log_escapes_other_controls(s):
    """C0 controls, DEL, C1 controls (U+009B is CSI) and invalid UTF-8 never
    reach the text log raw."""
    name = "ctl-\r\t\x7f\u009b[2J\u0085end"
    with g.Server(s) as srv:
        srv.filter(evil_pod(name), g.DEMO_ARGS_ORDER)
        s.require(g.wait_until(lambda: "pod assigned" in srv.stderr(), timeout=10), "the decision is logged")
    raw = open(srv.stderr_path, "rb").read()
    for byte in (b"\r", b"\t", b"\x7f", b"\xc2\x9b", b"\xc2\x85"):
        s.check(byte not in raw, "no raw %r in the text log" % byte)
    s.check_in("ctl-\\r\\t\\x7f\\xc2\\x9b[2J\\xc2\\x85end", raw.decode("utf-8", "replace"),
               "each control is escaped in place")


@suite.test
def json_log_keeps_one_object_per_line(s):
    with g.Server(s, flags=["--log-format", "json"]) as srv:
        decide_evil(srv)
        s.require(g.wait_until(lambda: "pod assigned" in srv.stderr(), timeout=10), "the decision is logged")
    raw = open(srv.stderr_path, "rb").read()
    s.check(b"\x1b" not in raw, "no raw ESC byte in the JSON log")
    objs = []
    for ln in raw.decode("utf-8").split("\n"):
        if not ln:
            continue
        try:
            objs.append(json.loads(ln))
            objs[-1]["msg"]
        except (ValueError, KeyError) as e:
            s.check(False, "every JSON log line is one object with a msg", "%s: %r" % (e, ln))
    decisions = [o for o in objs if o.get("msg") == "pod assigned"]
    s.check_eq([(o.get("pod"), o.get("node")) for o in decisions], [("default/" + EVIL, "gpu-v100-0")],
               "the decision is one object whose pod field keeps the name intact")
    s.check(decisions and decisions[0].get("gpus", "").startswith("trainer:"), "and names the GPUs", decisions)


@suite.test
def klog_lines_cannot_be_forged(s):
    """--log-format klog: every line has klog's header, and the decision's fields are quoted and escaped."""
    with g.Server(s, flags=["--log-format", "klog"]) as srv:
        decide_evil(srv)
        s.require(g.wait_until(lambda: "pod assigned" in srv.stderr(), timeout=10), "the decision is logged")
    raw = open(srv.stderr_path, "rb").read()
    s.check(b"\x1b" not in raw, "no raw ESC byte in the klog log")
    lines = [ln for ln in raw.decode("utf-8", "replace").split("\n") if ln]
    header = re.compile(r"^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [a-z_-]+\.c:\d+\] \"")
    for ln in lines:
        s.check(header.match(ln), "every line starts with klog's header", ln)
    want = ('] "pod assigned" pod="default/evil\\n2026-11-24T00:00:00.000Z info  FORGED LINE\\x1b[31m" '
            'node="gpu-v100-0" gpus="')
    s.check_eq(len([ln for ln in lines if want in ln]), 1, "the decision is one line with the name escaped",
               "\n".join(lines[-8:]))


# (method, path, body, status) for paths that decode to control characters.
CONTROL_PATHS = [
    ("POST", "/scheduler/filter%00junk", "args", 400),
    ("POST", "/scheduler/predicates%00", "args", 400),
    ("POST", "/scheduler/bind%0a", "{}", 400),
    ("GET", "/inspect/nodes/gpu-a100-0%00x", None, 400),
    ("GET", "/inspect/nodes/gpu-a100-0%0A", None, 400),
    ("GET", "/inspect/nodes/gpu-a100-0%1b[31m", None, 400),
    ("GET", "/inspect/nodes/gpu-a100-0%7f", None, 400),
    ("GET", "/healthz%0d", None, 400),
    ("GET", "/metrics%09", None, 400),
]

# Paths that are close to a route but not it: 404 (or 405), never served.
NEAR_MISSES = [
    ("POST", "/scheduler/filter/", "args", 404),
    ("POST", "/scheduler/filterjunk", "args", 404),
    ("POST", "/scheduler/filter%20", "args", 404),
    ("POST", "//scheduler/filter", "args", 404),
    ("POST", "/Scheduler/filter", "args", 404),
    ("GET", "/inspect/nodes/gpu-a100-0/x", None, 404),
    ("GET", "/inspect/nodes/gpu-a100-0%2Fx", None, 404),
    ("GET", "/inspect/nodes/gpu-a100-0x", None, 404),
    ("GET", "/inspect/nodes/", None, 404),
    ("GET", "/healthzz", None, 404),
]


@suite.test
def control_characters_in_paths_are_400(s):
    args = {"Pod": g.demo_pod("gpu-4"), "NodeNames": g.DEMO_ARGS_ORDER}
    with g.Server(s) as srv:
        before = srv.inspect()
        for method, path, body, status in CONTROL_PATHS + NEAR_MISSES:
            b = args if body == "args" else body
            r = srv.request(method, path, b)
            s.check_eq(r.status, status, "%s %s answers %d" % (method, path, status), r)
            s.check_in("application/json", r.header("content-type"), "%s %s: JSON" % (method, path))
            try:
                err = r.json().get("error")
            except (ValueError, AttributeError):
                err = None
            s.check(isinstance(err, str) and err, "%s %s: {\"error\": ...}" % (method, path), r)
            if status == 400:
                s.check_in("control character", err, "%s %s: the error says why" % (method, path))
        s.check_eq(srv.inspect(), before, "no refused path decided anything")
        # The exact routes still work, and a control character in the query
        # (which no route reads) is not the path's business.
        s.check_eq(srv.get("/healthz?x=%00").status, 200, "a control character in the query string is ignored")
        s.check_eq(srv.get("/inspect/nodes/gpu-a100-0").status, 200, "the exact node path is served")
        res = srv.filter(g.demo_pod("gpu-4"), g.DEMO_ARGS_ORDER)
        s.check_eq(res.get("NodeNames"), ["gpu-v100-0"], "a filter on the exact path is served")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check(g.metric(samples, "gqa_http_requests_total", verb="other", code="400") >= len(CONTROL_PATHS),
                "refused paths are counted as 400s")


@suite.test
def raw_control_bytes_in_the_request_line(s):
    """Bytes the client did not even encode: never served as a route."""
    with g.Server(s) as srv:
        for target in (b"/scheduler/filter\x01", b"/inspect/nodes/gpu-a100-0\x7f"):
            try:
                r = g.raw_exchange(srv.port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                                   timeout=10)
                status = r.status
            except (OSError, IOError):
                status = None
            s.check(status != 200, "raw %r is not served" % target, status)
        s.check_eq(srv.get("/healthz").status, 200, "still healthy")


if __name__ == "__main__":
    suite.main()
