#!/usr/bin/env python3
"""Bad requests (design.md section 2): malformed bodies on the filter paths answer
200 with Error set (kube-scheduler reads ExtenderFilterResult.Error); on the
prioritize and preemption paths, whose answers have no Error field, HTTP 500
with the message as a plain-text body (kube-scheduler sees any non-200 as an
error); on /inspect/explain 400 with {"error": ...}; bodies past
--max-body-bytes answer 413 with a JSON error, with Content-Length and with
chunked transfer; a wrong method answers 405 with Allow; an unknown path 404
JSON. The server stays healthy throughout."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_malformed")
LIMIT = 64 * 1024
POD = g.demo_pod("gpu-4")
POD_TEXT = json.dumps(POD)

FILTER_PATHS = ("/scheduler/filter", "/scheduler/predicates")
PRIORITY_PATHS = ("/scheduler/prioritize", "/scheduler/priorities")

BAD_ARGS = [
    ("not JSON", b"this is not json"),
    ("empty body", b""),
    ("truncated JSON", ('{"Pod": %s, "NodeNames": ["gpu-v100-0"' % POD_TEXT).encode()),
    ("truncated inside Pod", POD_TEXT[:40].join(['{"Pod": ', '']).encode()),
    ("a JSON array", b'[{"Pod": {}}]'),
    ("a JSON string", b'"Pod"'),
    ("missing Pod", b'{"NodeNames": ["gpu-v100-0"]}'),
    ("Pod null", b'{"Pod": null, "NodeNames": ["gpu-v100-0"]}'),
    ("Pod is a number", b'{"Pod": 5, "NodeNames": ["gpu-v100-0"]}'),
    ("Pod is a string", b'{"Pod": "gpu-4", "NodeNames": ["gpu-v100-0"]}'),
    ("Pod without metadata.name", b'{"Pod": {"metadata": {"namespace": "x"}, "spec": {}}, "NodeNames": ["a"]}'),
    ("Pod metadata.name not a string", b'{"Pod": {"metadata": {"name": 7}}, "NodeNames": ["a"]}'),
    ("NodeNames is a string", ('{"Pod": %s, "NodeNames": "gpu-v100-0"}' % POD_TEXT).encode()),
    ("NodeNames holds a number", ('{"Pod": %s, "NodeNames": [1, 2]}' % POD_TEXT).encode()),
    ("Nodes is an array", ('{"Pod": %s, "Nodes": []}' % POD_TEXT).encode()),
    ("Nodes.items is an object", ('{"Pod": %s, "Nodes": {"items": {}}}' % POD_TEXT).encode()),
    ("Nodes.items holds a string", ('{"Pod": %s, "Nodes": {"items": ["gpu-v100-0"]}}' % POD_TEXT).encode()),
    ("Node without metadata.name", ('{"Pod": %s, "Nodes": {"items": [{"kind": "Node", "metadata": {}}]}}'
                                    % POD_TEXT).encode()),
    ("neither form", ('{"Pod": %s}' % POD_TEXT).encode()),
    ("neither form, both null", ('{"Pod": %s, "Nodes": null, "NodeNames": null}' % POD_TEXT).encode()),
    ("both forms", ('{"Pod": %s, "Nodes": {"items": [{"metadata": {"name": "gpu-v100-0"}}]}, '
                    '"NodeNames": ["gpu-v100-0"]}' % POD_TEXT).encode()),
    ("trailing garbage", ('{"Pod": %s, "NodeNames": ["gpu-v100-0"]} trailing' % POD_TEXT).encode()),
    ("two objects", ('{"Pod": %s, "NodeNames": []}{}' % POD_TEXT).encode()),
    ("bad escape", b'{"Pod": {"metadata": {"name": "\\q"}}, "NodeNames": ["a"]}'),
    ("unterminated string", b'{"Pod": {"metadata": {"name": "abc'),
    ("NUL byte", b'{"Pod": \x00}'),
    ("invalid UTF-8 outside strings", b'\xff\xfe{"Pod": {}}'),
    ("deep nesting", b'{"Pod": ' + b'[' * 5000 + b']' * 5000 + b', "NodeNames": []}'),
]


@suite.test
def extender_paths_answer_error(s):
    with g.Server(s) as srv:
        before = srv.inspect()
        for path in FILTER_PATHS:
            for what, body in BAD_ARGS:
                r = srv.post(path, body)
                label = "%s, %s" % (path, what)
                s.check_eq(r.status, 200, "%s: HTTP 200" % label)
                s.check_in("application/json", r.header("content-type"), "%s: JSON content type" % label)
                try:
                    res = r.json()
                except ValueError:
                    s.check(False, "%s: answer is JSON" % label, r)
                    continue
                s.check(isinstance(res, dict) and isinstance(res.get("Error"), str) and res["Error"],
                        "%s: Error is set" % label, res)
                if isinstance(res, dict):
                    s.check(not res.get("NodeNames") and not res.get("Nodes"), "%s: no node passes" % label, res)
        s.check_eq(srv.inspect(), before, "no malformed request recorded anything")
        s.check_eq(srv.get("/healthz").status, 200, "healthy after malformed requests")
        # The Error says what is wrong.
        for what, body, want in (("missing Pod", b'{"NodeNames": []}', "Pod"),
                                 ("neither form", ('{"Pod": %s}' % POD_TEXT).encode(), "NodeNames"),
                                 ("truncated", b'{"Pod": {', "JSON"),
                                 ("NodeNames type", ('{"Pod": %s, "NodeNames": 3}' % POD_TEXT).encode(), "NodeNames")):
            res = srv.post("/scheduler/filter", body).json()
            s.check_in(want, res.get("Error"), "Error for %s mentions %s" % (what, want))
        # A good request on the same server still works.
        res = srv.filter(POD, ["gpu-v100-0"])
        s.check_eq((res["NodeNames"], res["Error"]), (["gpu-v100-0"], ""), "a good filter after the bad ones")


def check_plain_500(s, r, label, want=None):
    """HTTP 500, text/plain, the message as the whole body (and no JSON answer
    kube-scheduler could mistake for an empty result)."""
    s.check_eq(r.status, 500, "%s: HTTP 500" % label)
    s.check_in("text/plain", r.header("content-type") or "", "%s: plain-text body" % label)
    s.check(r.text.strip() != "" and not r.text.lstrip().startswith(("{", "[")),
            "%s: the body is the message" % label, r)
    if want is not None:
        s.check_eq(r.text, want, "%s: the same message the filter puts in Error" % label)


@suite.test
def prioritize_errors_are_500(s):
    """HostPriorityList has no Error field: a 200 with a filter-shaped object
    would only fail kube-scheduler's decoding. The message is the filter's."""
    with g.Server(s) as srv:
        for path in PRIORITY_PATHS:
            for what, body in BAD_ARGS:
                want = srv.post("/scheduler/filter", body).json().get("Error")
                check_plain_500(s, srv.post(path, body), "%s, %s" % (path, what), want)
        hp = srv.prioritize(POD, ["gpu-v100-0", "cpu-0"])
        s.check(g.scores_of(hp, ["gpu-v100-0", "cpu-0"]) is not None, "a good prioritize after the bad ones", hp)
    # A request-level refusal (not a malformed body) is an error too, never a filter-shaped 200.
    with g.Server(s, flags=["--vcuda-shares", "refuse"]) as srv:
        body = json.dumps({"Pod": g.demo_pod("vcuda-share"), "NodeNames": ["gpu-a100-0"]})
        want = srv.post("/scheduler/filter", body).json().get("Error")
        s.check(want, "the filter refuses a vcuda share under --vcuda-shares refuse", want)
        check_plain_500(s, srv.post("/scheduler/prioritize", body), "prioritize, --vcuda-shares refuse", want)


BAD_PREEMPTION = [
    ("not JSON", b"nope", "not valid JSON"),
    ("empty body", b"", "not valid JSON"),
    ("truncated", b'{"Pod": {"metadata": {"name": "x"}', "not valid JSON"),
    ("a JSON array", b"[]", "must be a JSON object"),
    ("missing Pod", b'{"NodeNameToMetaVictims": {}}', "no Pod"),
    ("Pod is a string", b'{"Pod": "p", "NodeNameToMetaVictims": {}}', "no Pod"),
    ("Pod without metadata.name", b'{"Pod": {"metadata": {}}, "NodeNameToMetaVictims": {}}', "Pod:"),
    ("victims map is a list", ('{"Pod": %s, "NodeNameToMetaVictims": []}' % POD_TEXT).encode(), "must be objects"),
    ("Pods is a string", ('{"Pod": %s, "NodeNameToMetaVictims": {"gpu-v100-0": {"Pods": "x"}}}'
                          % POD_TEXT).encode(), "Pods array"),
    ("victim without UID", ('{"Pod": %s, "NodeNameToMetaVictims": {"gpu-v100-0": {"Pods": [{}]}}}'
                            % POD_TEXT).encode(), "UID"),
    ("negative NumPDBViolations", ('{"Pod": %s, "NodeNameToMetaVictims": {"gpu-v100-0": {"Pods": [{"UID": "u"}], '
                                   '"NumPDBViolations": -1}}}' % POD_TEXT).encode(), "NumPDBViolations"),
    ("fractional NumPDBViolations", ('{"Pod": %s, "NodeNameToMetaVictims": {"gpu-v100-0": {"Pods": [{"UID": "u"}], '
                                     '"NumPDBViolations": 0.5}}}' % POD_TEXT).encode(), "NumPDBViolations"),
]


@suite.test
def preemption_errors_are_500(s):
    """ExtenderPreemptionResult has no Error field: a 200 with an empty victim
    map would silently tell kube-scheduler that no node can be preempted."""
    with g.Server(s) as srv:
        before = srv.inspect()
        for what, body, want in BAD_PREEMPTION:
            r = srv.post("/scheduler/preemption", body)
            check_plain_500(s, r, "preemption, %s" % what)
            s.check_in(want, r.text, "preemption, %s: the message says what is wrong" % what)
        s.check_eq(srv.inspect(), before, "no malformed preemption recorded anything")
        good = {"Pod": POD, "NodeNameToMetaVictims": {"gpu-v100-0": {"Pods": [{"UID": "nobody"}]}}}
        r = srv.post("/scheduler/preemption", json.dumps(good))
        s.check_eq(r.status, 200, "a well-formed preemption is answered 200", r)
        s.check("Error" not in r.json(), "ExtenderPreemptionResult carries no Error field", r)


@suite.test
def explain_bad_bodies(s):
    with g.Server(s) as srv:
        for what, body in (("not JSON", b"nope"), ("empty", b""), ("truncated", POD_TEXT[:-3].encode()),
                           ("an array", b"[]"), ("a number", b"42"), ("null", b"null"),
                           ("no metadata.name", b'{"kind": "Pod", "metadata": {}}'),
                           ("metadata not an object", b'{"metadata": "x"}')):
            r = srv.post("/inspect/explain", body)
            s.check_eq(r.status, 400, "explain %s: 400" % what)
            s.check_in("application/json", r.header("content-type"), "explain %s: JSON" % what)
            try:
                err = r.json().get("error")
            except (ValueError, AttributeError):
                err = None
            s.check(isinstance(err, str) and err, "explain %s: {\"error\": ...}" % what, r)


def padded_args(total):
    """A valid filter body of exactly `total` bytes."""
    head = '{"Pod": %s, "NodeNames": ["gpu-v100-0"], "pad": "' % POD_TEXT
    tail = '"}'
    n = total - len(head) - len(tail)
    assert n >= 0
    body = (head + "x" * n + tail).encode()
    assert len(body) == total
    return body


def chunked(body, size=8192):
    return [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)] + \
        [b"0\r\n\r\n"]


def request_head(port, path, extra):
    return ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n%s\r\n"
            % (path, port, extra)).encode()


def check_413(s, r, label):
    s.check_eq(r.status, 413, "%s: 413" % label)
    s.check_in("application/json", r.header("content-type"), "%s: JSON" % label)
    try:
        err = r.json().get("error")
    except (ValueError, AttributeError):
        err = None
    s.check(isinstance(err, str) and "max-body-bytes" in err, "%s: error names --max-body-bytes" % label, r)


@suite.test
def oversized_bodies(s):
    with g.Server(s, flags=["--max-body-bytes", "64Ki"]) as srv:
        # Right at the limit is fine, one byte past is not.
        r = srv.post("/scheduler/filter", padded_args(LIMIT))
        s.check_eq(r.status, 200, "a body of exactly 64Ki is accepted")
        s.check_eq(r.json().get("NodeNames"), ["gpu-v100-0"], "and answered normally")
        r = srv.post("/scheduler/filter", padded_args(LIMIT + 1))
        check_413(s, r, "Content-Length 64Ki+1")
        big = padded_args(1024 * 1024)
        for path in ("/scheduler/filter", "/scheduler/prioritize", "/inspect/explain"):
            r = g.raw_exchange(srv.port, request_head(srv.port, path, "Content-Length: %d\r\n" % len(big)), [big])
            check_413(s, r, "%s Content-Length 1 MiB" % path)
            # Declared huge, nothing sent: answered from the headers alone.
        r = g.raw_exchange(srv.port, request_head(srv.port, "/scheduler/filter",
                                                  "Content-Length: 1000000000000000000\r\n"))
        check_413(s, r, "absurd Content-Length")

        # Chunked (no Content-Length): the cap applies while reading.
        head = request_head(srv.port, "/scheduler/filter", "Transfer-Encoding: chunked\r\n")
        r = g.raw_exchange(srv.port, head, chunked(padded_args(LIMIT - 100)))
        s.check_eq(r.status, 200, "chunked body under the limit: 200")
        s.check_eq(r.json().get("NodeNames"), ["gpu-v100-0"], "chunked body under the limit answered")
        r = g.raw_exchange(srv.port, head, chunked(padded_args(LIMIT + 1)))
        check_413(s, r, "chunked 64Ki+1")
        r = g.raw_exchange(srv.port, head, chunked(padded_args(2 * 1024 * 1024), size=65536))
        check_413(s, r, "chunked 2 MiB")
        r = g.raw_exchange(srv.port, request_head(srv.port, "/inspect/explain", "Transfer-Encoding: chunked\r\n"),
                           chunked(b" " * (LIMIT + 10) + POD_TEXT.encode()))
        check_413(s, r, "chunked explain past the limit")

        s.check_eq(srv.get("/healthz").status, 200, "healthy after oversized requests")
        res = srv.filter(POD, ["gpu-v100-0"])
        s.check_eq(res["NodeNames"], ["gpu-v100-0"], "a normal filter still works")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        n413 = sum(v for (name, lbl), v in samples.items()
                   if name == "gqa_http_requests_total" and dict(lbl).get("code") == "413")
        s.check(n413 >= 6, "413 answers are counted in gqa_http_requests_total", n413)


@suite.test
def wrong_method_and_unknown_path(s):
    with g.Server(s) as srv:
        cases = [("GET", "/scheduler/filter", "POST"), ("PUT", "/scheduler/predicates", "POST"),
                 ("GET", "/scheduler/prioritize", "POST"), ("DELETE", "/scheduler/priorities", "POST"),
                 ("PUT", "/inspect/explain", "POST"), ("POST", "/healthz", "GET"), ("POST", "/livez", "GET"),
                 ("PUT", "/readyz", "GET"), ("POST", "/metrics", "GET"), ("DELETE", "/version", "GET"),
                 ("POST", "/inspect/nodes", "GET"), ("PATCH", "/inspect/nodes/gpu-a100-0", "GET")]
        for method, path, allowed in cases:
            body = b"{}" if method in ("POST", "PUT", "PATCH") else None
            r = srv.request(method, path, body)
            s.check_eq(r.status, 405, "%s %s: 405" % (method, path))
            allow = r.header("allow") or ""
            s.check(allowed in [a.strip() for a in allow.split(",")], "%s %s: Allow lists %s" % (method, path, allowed),
                    allow)
            s.check(method not in [a.strip() for a in allow.split(",")], "%s %s: Allow omits %s" % (method, path, method),
                    allow)
            try:
                err = r.json().get("error")
            except (ValueError, AttributeError):
                err = None
            s.check(isinstance(err, str) and err, "%s %s: JSON error" % (method, path), r)
        for method, path in (("GET", "/"), ("GET", "/nope"), ("POST", "/scheduler/nope"), ("POST", "/scheduler"),
                             ("GET", "/inspect/nodes/a/b"), ("GET", "/healthz/x"), ("GET", "/metricsx"),
                             ("POST", "/scheduler/filter/"), ("GET", "/INSPECT/NODES")):
            r = srv.request(method, path, b"{}" if method == "POST" else None)
            s.check_eq(r.status, 404, "%s %s: 404" % (method, path))
            s.check_in("application/json", r.header("content-type"), "%s %s: JSON" % (method, path))
            try:
                err = r.json().get("error")
            except (ValueError, AttributeError):
                err = None
            s.check(isinstance(err, str) and err, "%s %s: JSON error" % (method, path), r)
        s.check_eq(srv.get("/healthz").status, 200, "healthy after bad methods and paths")


@suite.test
def error_bodies_are_utf8(s):
    """Error messages quote the path; the JSON must stay UTF-8 whatever the path holds."""
    with g.Server(s) as srv:
        cases = [("GET", "/" + "%C3%A9" * 60, 404, "/\u00e9\u00e9"),     # cut mid-character by the length cap
                 ("PUT", "/" + "%C3%A9" * 60, 404, "/\u00e9\u00e9"),
                 ("GET", "/inspect/nodes/%FF%FE", 404, "node"),
                 ("GET", "/inspect/nodes/%ED%A0%80%C0%80", 404, "node"),   # surrogate, overlong
                 ("GET", "/inspect/nodes/%E2%82%AC%F0%9F%98%80", 404, "\u20ac\U0001f600"),
                 ("GET", "/inspect/nodes/a%22b%5Cc%7Ed", 404, 'a"b\\c~d'),
                 # a decoded control character is refused before routing (issue 10 item 7)
                 ("GET", "/inspect/nodes/a%22b%5Cc%0Ad", 400, "control character"),
                 ("DELETE", "/inspect/nodes/%C3", 405, "DELETE"),
                 ("GET", "/x%22y", 404, '/x"y')]
        for method, path, status, needle in cases:
            r = srv.request(method, path)
            s.check_eq(r.status, status, "%s %s: %d" % (method, path[:40], status))
            try:
                err = json.loads(r.body.decode("utf-8")).get("error")
            except ValueError as e:
                s.check(False, "%s %s: the body is UTF-8 JSON" % (method, path[:40]), "%s: %r" % (e, r.body[-60:]))
                continue
            s.check_in(needle, err, "%s %s: the message quotes the path" % (method, path[:40]))


@suite.test
def http_protocol_details(s):
    """Expect: 100-continue (accepted and refused), pipelining, HTTP/1.0."""
    import socket
    with g.Server(s, flags=["--max-body-bytes", "64Ki"]) as srv:
        body = padded_args(8000)
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        c.sendall(request_head(srv.port, "/scheduler/filter",
                               "Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n" % len(body)))
        interim = b""
        while b"\r\n\r\n" not in interim:
            d = c.recv(1)
            if not d:
                break
            interim += d
        s.check(interim.startswith(b"HTTP/1.1 100"), "Expect: 100-continue under the limit gets 100 Continue", interim)
        c.sendall(body)
        r = g.read_http_response(c)
        c.close()
        s.check_eq((r.status, r.json().get("NodeNames") if r.status == 200 else None), (200, ["gpu-v100-0"]),
                   "and then the answer")
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        c.sendall(request_head(srv.port, "/scheduler/filter", "Content-Length: 100000\r\nExpect: 100-continue\r\n"))
        r = g.read_http_response(c)
        c.close()
        check_413(s, r, "Expect: 100-continue past the limit (no body sent)")

        small = json.dumps({"Pod": POD, "NodeNames": ["gpu-v100-0"]}).encode()
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" +
                  b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(small), small) +
                  b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        f = c.makefile("rb")
        statuses = [g.read_http_response(f).status for _ in range(3)]
        f.close()
        c.close()
        s.check_eq(statuses, [200, 200, 404], "three pipelined requests answered in order")
        c = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        c.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        r = g.read_http_response(c)
        c.close()
        s.check_eq((r.status, r.text), (200, "ok\n"), "HTTP/1.0 request answered")


@suite.test
def keepalive_after_errors(s):
    """Errors do not poison a keep-alive connection."""
    import http.client
    with g.Server(s) as srv:
        c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
        try:
            seq = [("POST", "/scheduler/filter", b"garbage", 200), ("GET", "/nope", None, 404),
                   ("POST", "/scheduler/prioritize", b"garbage", 500),
                   ("PUT", "/healthz", b"x", 405), ("POST", "/inspect/explain", b"[]", 400),
                   ("POST", "/scheduler/filter", json.dumps({"Pod": POD, "NodeNames": ["gpu-v100-0"]}).encode(), 200),
                   ("GET", "/healthz", None, 200)]
            answers = []
            for method, path, body, want in seq:
                c.request(method, path, body=body)
                r = c.getresponse()
                answers.append(r.read())
                s.check_eq(r.status, want, "keep-alive %s %s: %d" % (method, path, want))
            s.check_eq(json.loads(answers[5]).get("NodeNames"), ["gpu-v100-0"],
                       "the good filter on the same connection is answered normally")
        finally:
            c.close()


if __name__ == "__main__":
    suite.main()
