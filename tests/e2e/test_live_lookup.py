#!/usr/bin/env python3
"""Live mode: decisions are keyed by UID, and a pod the cache does not have
is read from the API server (issue 9, items 2 and 3).

The simulator holds back the pod watch (hold_watches) so the cache lags the
API server exactly as it does when a watch is slow:

  * a pod deleted and created again under the same name (a StatefulSet)
    while the watch still shows the old one: the new pod gets a fresh
    decision (never the old pod's assumption) and its bind succeeds, in
    filter mode and in bind mode;
  * a pod created while the watch is held back: bind (bind mode) and the
    filter (filter mode) read it from the API server, once, and succeed;
    the cache then has it as the watch would have delivered it;
  * a pod the API server does not have either: an Error that says so.

Standalone: python3 test_live_lookup.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-lookup")

SETTLE_S = 10.0


def describe(reqs):
    return "\n".join("%d %s %s -> %s" % (r["seq"], r["method"], r["path"], r["status"]) for r in reqs)


def api_calls(c, since):
    return [(r["method"], r["path"], r["status"]) for r in c.requests_since(since) if not r["watch"]]


def bind(srv, name, uid, node):
    return srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": "default", "PodUID": uid,
                                             "Node": node})


def recreate(c, name, containers):
    """Delete the pod and create it again under the same name: a new UID."""
    c.delete_pod(name)
    return c.create_pod(g.pod(name, containers))


def charged(srv):
    """{pod key: node} of every pod charged in /inspect/nodes."""
    out = {}
    for n in srv.inspect():
        for gpu in n["gpus"]:
            for p in gpu["pods"]:
                out[p] = n["node"]
        for p in n["unattributed"]["pods"]:
            out[p] = n["node"]
    return out


@suite.test
def test_recreated_pod_filter_mode(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(100, 64)))
        c.add_node(g.node("n2", g.vcuda(100, 64)))
        old = c.create_pod(g.pod("same", g.vcuda(100, 64)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            r = srv.filter(c.get_pod("same"), ["n1", "n2"])
            s.require(r.get("NodeNames") == ["n1"], "the first pod is decided onto n1", r)
            s.require(g.wait_until(lambda: charged(srv).get("default/same") == "n1", SETTLE_S),
                      "and the cache shows it there", charged(srv))
            c.sim.hold_watches("pods")
            new = recreate(c, "same", g.vcuda(100, 64))
            s.require(new["metadata"]["uid"] != old["metadata"]["uid"], "the new pod has a new UID")
            mark = c.last_seq()
            # Before the fix: the old assumption answered "fits" on n1 and nothing was recorded.
            r = srv.filter(new, ["n1", "n2"])
            s.check_eq(len(r.get("NodeNames") or []), 1, "the new pod is decided", r)
            s.check(not r.get("Error"), "without an Error", r)
            chosen = (r.get("NodeNames") or [None])[0]
            ann = c.annotations("same")
            s.check_eq(ann.get("gpu-admission.io/node"), chosen, "the decision is recorded on the new pod", ann)
            calls = api_calls(c, mark)
            s.check_eq(calls, [("GET", g.pod_path("same"), 200), ("PATCH", g.pod_path("same"), 200)],
                       "the new pod was read once, then its decision written", describe(c.requests_since(mark)))
            r = bind(srv, "same", new["metadata"]["uid"], chosen)
            s.check(not r.get("Error"), "the bind of the new pod succeeds", r)
            s.check_eq(c.get_pod("same")["spec"].get("nodeName"), chosen, "it is bound in the API")
            c.sim.release_watches()
            s.check(g.wait_until(lambda: charged(srv) == {"default/same": chosen}, SETTLE_S),
                    "once the watch catches up the pod is charged once, where it is bound", charged(srv))


@suite.test
def test_recreated_pod_bind_mode(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(100, 64)))
        old = c.create_pod(g.pod("same", g.vcuda(100, 64)))
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            r = bind(srv, "same", old["metadata"]["uid"], "n1")
            s.require(not r.get("Error"), "the first pod is bound", r)
            s.require(g.wait_until(lambda: charged(srv).get("default/same") == "n1", SETTLE_S),
                      "and charged on n1", charged(srv))
            c.sim.hold_watches("pods")
            new = recreate(c, "same", g.vcuda(100, 64))
            # The cache has not seen the deletion: the old pod still holds the GPU, and its charge is not the
            # new pod's own (before the fix it was released as if it were, and the filter answered "fits").
            r = srv.filter(new, ["n1"])
            s.check(not r.get("NodeNames") and g.failed_reason(r, "n1"),
                    "the filter counts the old pod's GPU against the new pod", r)
            mark = c.last_seq()
            # Before the fix: "pod default/same has UID <old>, the binding names <new>".
            r = bind(srv, "same", new["metadata"]["uid"], "n1")
            s.check(not r.get("Error"), "the bind of the new pod succeeds", r)
            stored = c.get_pod("same")
            s.check_eq((stored["metadata"]["uid"], stored["spec"].get("nodeName")), (new["metadata"]["uid"], "n1"),
                       "the new pod is bound")
            s.check_eq(api_calls(c, mark), [("GET", g.pod_path("same"), 200),
                                            ("POST", g.pod_path("same") + "/binding", 201)],
                       "read once, bound with the annotations in one write", describe(c.requests_since(mark)))
            # A binding that names the old UID is refused, saying why.
            r = bind(srv, "same", old["metadata"]["uid"], "n1")
            s.check("UID" in (r.get("Error") or ""), "a binding for the old UID is refused", r)
            c.sim.release_watches()
            s.check(g.wait_until(lambda: charged(srv) == {"default/same": "n1"}, SETTLE_S),
                    "the cache ends with the new pod once", charged(srv))


@suite.test
def test_pod_not_in_cache_yet(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(200, 128)))
        c.create_pod(g.pod("seen", g.vcuda(10, 4)))
        for mode in ("bind", "filter"):
            with g.LiveServer(s, c.kubeconfig(), ["--placement", mode], name="server-" + mode) as srv:
                s.require(g.wait_until(lambda: srv.informers()["pods"]["synced"], SETTLE_S), "synced")
                c.sim.hold_watches("pods")
                fresh = c.create_pod(g.pod("fresh-" + mode, g.vcuda(20, 8)))
                name, uid = fresh["metadata"]["name"], fresh["metadata"]["uid"]
                mark = c.last_seq()
                if mode == "bind":
                    r = bind(srv, name, uid, "n1")
                    s.check(not r.get("Error"), "bind mode: a pod the watch has not delivered is bound", r)
                    want = [("GET", g.pod_path(name), 200), ("POST", g.pod_path(name) + "/binding", 201)]
                else:
                    r = srv.filter(c.get_pod(name), ["n1"])
                    s.check_eq(r.get("NodeNames"), ["n1"], "filter mode: a pod the watch has not delivered is "
                               "decided", r)
                    want = [("GET", g.pod_path(name), 200), ("PATCH", g.pod_path(name), 200)]
                s.check_eq(api_calls(c, mark), want, "%s mode: it was read from the API server once" % mode,
                           describe(c.requests_since(mark)))
                s.check_eq(charged(srv).get("default/" + name), "n1",
                           "%s mode: the cache has it while the watch is still held back" % mode, charged(srv))
                # Neither in the cache nor in the API server.
                ghost = g.pod("ghost-" + mode, g.vcuda(10, 4))
                if mode == "bind":
                    r = bind(srv, "ghost-bind", ghost["metadata"]["uid"], "n1")
                else:
                    r = srv.filter(ghost, ["n1"])
                s.check("the API server does not have it either" in (r.get("Error") or ""),
                        "%s mode: a pod the API server does not have either is an Error saying so" % mode, r)
                c.sim.release_watches()
                s.check(g.wait_until(lambda: charged(srv).get("default/" + name) == "n1", SETTLE_S),
                        "%s mode: after the watch catches up it is still charged once" % mode, charged(srv))


if __name__ == "__main__":
    suite.main()
