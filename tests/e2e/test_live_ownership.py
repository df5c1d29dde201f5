#!/usr/bin/env python3
"""Live mode: the verbs change only what the extender owns (issue 10, item 2).

Anyone who reaches port 3456 can post a Binding or a filter. Bind (bind
mode) and a filter that records a decision (filter mode) act only on a pod
that, as the API server has it, is unbound, not being deleted and asks for a
GPU resource the service manages. Everything else gets an Error saying why,
and the API server sees no write at all:

  * a pod that asks for no GPU, even when the request's copy claims one;
  * a GPU pod being deleted (a finalizer keeps it, with a deletionTimestamp);
  * a GPU pod that has finished.

A GPU pod that is pending next to them is decided and bound as usual, so a
refusal of everything would fail the test.

Standalone: python3 test_live_ownership.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-ownership")

FINALIZER = "example.com/keep"


def writes_since(c, mark):
    """Every write the API server received since mark (watches and reads excluded)."""
    return [(r["method"], r["path"]) for r in c.requests_since(mark)
            if not r["watch"] and r["method"] in ("POST", "PUT", "PATCH", "DELETE")]


def bind(srv, pod, node):
    m = pod["metadata"]
    return srv.post_json("/scheduler/bind", {"PodName": m["name"], "PodNamespace": "default",
                                             "PodUID": m["uid"], "Node": node})


def populate(c):
    """n1 with one GPU, and the pods: {name: stored pod}."""
    c.add_node(g.node("n1", g.vcuda(100, 64)))
    pods = {
        "plain": c.create_pod(g.pod("plain", {"cpu": "1"})),
        "gpu": c.create_pod(g.pod("gpu", g.vcuda(10, 4))),
        "done": c.create_pod(g.pod("done", g.vcuda(10, 4)), phase="Succeeded"),
    }
    held = g.pod("leaving", g.vcuda(10, 4))
    held["metadata"]["finalizers"] = [FINALIZER]
    c.create_pod(held)
    c.delete_pod("leaving")
    pods["leaving"] = c.get_pod("leaving")
    return pods


def claims_gpu(pod):
    """The pod as a hostile client may post it: asking for a GPU it does not ask for."""
    fake = g.pod(pod["metadata"]["name"], g.vcuda(10, 4), uid=pod["metadata"]["uid"])
    return fake


REFUSALS = {
    "plain": "asks for no GPU resource",
    "leaving": "is being deleted",
    "done": "has finished",
}


def cleanup(c):
    c.patch_pod("leaving", {"metadata": {"finalizers": None}})


@suite.test
def test_bind_mode_refuses_what_it_does_not_own(s):
    with g.Cluster(s) as c:
        pods = populate(c)
        s.require(pods["leaving"]["metadata"].get("deletionTimestamp"), "the held pod is being deleted", pods)
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            s.require(srv.seen_rv("pods", pods["leaving"]["metadata"]["resourceVersion"]),
                      "the cache has every pod as the API server has it")
            for name, why in sorted(REFUSALS.items()):
                mark = c.last_seq()
                r = bind(srv, pods[name], "n1")
                s.check(why in (r.get("Error") or ""), "bind of %s is refused: %s" % (name, why), r)
                s.check_eq(writes_since(c, mark), [], "and nothing is written for %s" % name)
                s.check_eq(c.get_pod(name)["spec"].get("nodeName"), None, "%s stays unbound" % name)
            r = bind(srv, pods["gpu"], "n1")
            s.check(not r.get("Error"), "the pending GPU pod is bound", r)
            s.check_eq(c.get_pod("gpu")["spec"].get("nodeName"), "n1", "it is bound in the API")
        cleanup(c)


@suite.test
def test_filter_mode_refuses_what_it_does_not_own(s):
    with g.Cluster(s) as c:
        pods = populate(c)
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "filter"]) as srv:
            s.require(srv.seen_rv("pods", pods["leaving"]["metadata"]["resourceVersion"]),
                      "the cache has every pod as the API server has it")
            for name, why in sorted(REFUSALS.items()):
                mark = c.last_seq()
                r = srv.filter(claims_gpu(pods[name]), ["n1"])
                s.check(why in (r.get("Error") or ""), "a filter that would record a decision on %s is "
                        "refused: %s" % (name, why), r)
                s.check(not r.get("NodeNames"), "and names no node", r)
                s.check_eq(writes_since(c, mark), [], "nothing is written for %s" % name)
                s.check("gpu-admission.io/node" not in c.annotations(name), "%s carries no decision" % name)
            # The truthful request for the plain pod asks for nothing: every node passes, nothing recorded.
            mark = c.last_seq()
            r = srv.filter(pods["plain"], ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "a non-GPU pod passes every node", r)
            s.check_eq(writes_since(c, mark), [], "without a write")
            r = srv.filter(pods["gpu"], ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the pending GPU pod is decided", r)
            s.check_eq(c.annotations("gpu").get("gpu-admission.io/node"), "n1", "and its decision recorded")
        cleanup(c)


if __name__ == "__main__":
    suite.main()
