#!/usr/bin/env python3
"""Nodes-form filter answers with many separate runs of kept nodes (issue 22,
item 1).

A `Nodes`-form filter in bind placement keeps each fitting node as the
request's own bytes; with GPU and CPU nodes alternating, every kept node is a
run of its own. Such answers used to be sent as two iovec pieces per run:
from about 512 runs the plain HTTP answer was cut short (full Content-Length,
24 kB sent), at 2,047 runs libmicrohttpd aborted the process, over HTTPS at
5,000. Here answers at 511, 512, 2,047, 5,000 and 20,000 nodes must arrive
whole on both listeners, parse as JSON and keep exactly the GPU nodes, and
the server must stay up and exit cleanly."""

import http.client
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_large_answers")
# Nodes; half of them are kept runs (1,024 and 4,094 nodes: the 512 and
# 2,047 runs of the issue).
SIZES = (511, 512, 1024, 2047, 4094, 5000, 20000)
POD = g.pod("want-gpu", g.vcuda(30, 16))


def node_name(i):
    return ("gpu-%05d" if i % 2 == 0 else "cpu-%05d") % i


def cluster(n):
    """n nodes, GPU (even) and CPU (odd) alternating."""
    return [g.node(node_name(i), g.vcuda(100, 64) if i % 2 == 0 else {}) for i in range(n)]


def filter_body(nodes):
    """ExtenderArgs in the Nodes form (nodeCacheCapable: false), compact."""
    args = {"Pod": POD, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}
    return json.dumps(args, separators=(",", ":")).encode()


def send(s, n, where, request):
    """The answer, or None (a failed check) when it cannot be read whole."""
    try:
        return request()
    except (OSError, http.client.HTTPException) as e:
        s.check(False, "%d nodes over %s: the answer can be read" % (n, where), repr(e)[:300])
        return None


def check_answer(s, r, n, where):
    if r is None:
        return
    s.require(r.status == 200, "%d nodes over %s: 200" % (n, where), r)
    want_len = r.header("content-length")
    s.check(want_len is None or int(want_len) == len(r.body),
            "%d nodes over %s: the whole body arrives" % (n, where),
            "Content-Length %s, %d bytes arrived" % (want_len, len(r.body)))
    try:
        res = r.json()
    except ValueError as e:
        s.require(False, "%d nodes over %s: the answer is JSON" % (n, where),
                  "%s; %d bytes, ends with %r" % (e, len(r.body), r.body[-80:]))
    items = (res.get("Nodes") or {}).get("items")
    s.require(isinstance(items, list), "%d nodes over %s: Nodes.items is a list" % (n, where), res.get("Error"))
    kept = [it.get("metadata", {}).get("name") for it in items]
    want = [node_name(i) for i in range(0, n, 2)]
    s.check(kept == want, "%d nodes over %s: exactly the GPU nodes are kept, in order" % (n, where),
            "%d kept, want %d; first differing: %r" % (len(kept), len(want),
                                                         next(((a, b) for a, b in zip(kept, want) if a != b), None)))
    failed = set(res.get("FailedNodes") or {}) | set(res.get("FailedAndUnresolvableNodes") or {})
    s.check_eq(len(failed), n // 2, "%d nodes over %s: every CPU node is refused" % (n, where))
    s.check_eq(res.get("Error"), "", "%d nodes over %s: no Error" % (n, where))


@suite.test
def alternating_runs_arrive_whole(s):
    tls = g.TLSMaterial(s.tempdir("tls"))
    nodes = cluster(max(SIZES))
    state = g.write_state(s, nodes)
    flags = ["--placement", "bind"]
    with g.Server(s, state, flags=flags, https=True, tls=tls) as srv:
        ctx = tls.client_context()
        for n in SIZES:
            body = filter_body(nodes[:n])
            print("    %d nodes: request %.1f kB" % (n, len(body) / 1e3))
            r = send(s, n, "HTTP", lambda: srv.post("/scheduler/filter", body, timeout=60))
            check_answer(s, r, n, "HTTP")
            r = send(s, n, "HTTPS", lambda: g.http_request("127.0.0.1", srv.https_port, "POST", "/scheduler/filter",
                                                           body, tls_context=ctx, timeout=60))
            check_answer(s, r, n, "HTTPS")
        s.check_eq(srv.get("/livez").status, 200, "the server is still up after the large answers")


if __name__ == "__main__":
    suite.main()
