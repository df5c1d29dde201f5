#!/usr/bin/env python3
"""Live mode: kube-scheduler's interest rules (issue 25, items 1 and 2).

kube-scheduler sends a pod to the extender when a managed resource name
appears in any container or init container, in limits or requests, even at
0. Such a pod that asks for no GPU passes the filter and bind creates its
Binding, with no decision written, in both placement modes. A pod whose GPU
is asked only by an init container is decided like any other, its minors
under gpu-admission.io/gpu-idx-init-<j>. A pod that names no managed
resource is still refused by bind, so a test that binds everything fails.

Standalone: python3 test_live_interest.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-interest")


def bind(srv, pod, node):
    m = pod["metadata"]
    return srv.post_json("/scheduler/bind", {"PodName": m["name"], "PodNamespace": "default",
                                             "PodUID": m["uid"], "Node": node})


def zero_pods():
    """Pods that name a managed resource and ask for no GPU: {name: pod}."""
    limits_zero = g.pod("zero-limits", g.pgpu(0))
    requests_zero = g.pod("zero-requests", {"cpu": "1"})
    requests_zero["spec"]["containers"][0]["resources"] = {"requests": {"tencent.com/vcuda-core": "0"}}
    init_zero = g.pod("zero-init", {"cpu": "1"})
    init_zero["spec"]["initContainers"] = [{"name": "setup", "image": "registry.example.com/setup:1",
                                            "resources": {"limits": {"nvidia.com/gpu": "0"}}}]
    return {p["metadata"]["name"]: p for p in (limits_zero, requests_zero, init_zero)}


def init_only(name):
    p = g.pod(name, {"cpu": "1"})
    p["spec"]["initContainers"] = [
        {"name": "fetch", "image": "registry.example.com/fetch:1"},
        {"name": "warm", "image": "registry.example.com/warm:1",
         "resources": {"limits": {"tencent.com/vcuda-core": "100"}}},
    ]
    return p


def run(s, mode):
    with g.Cluster(s) as c:
        c.add_node(g.node("n1", g.vcuda(200, 80)))
        stored = {name: c.create_pod(p) for name, p in zero_pods().items()}
        stored["plain"] = c.create_pod(g.pod("plain", {"cpu": "1"}))
        stored["claimed"] = c.create_pod(g.pod("claimed", g.pgpu(0)))
        stored["warm"] = c.create_pod(init_only("warm"))
        with g.LiveServer(s, c.kubeconfig(), ["--placement", mode]) as srv:
            s.require(srv.seen_rv("pods", stored["warm"]["metadata"]["resourceVersion"]),
                      "the cache has every pod")
            for name in sorted(zero_pods()):
                r = srv.filter(stored[name], ["n1"])
                s.check_eq(r.get("NodeNames"), ["n1"], "%s passes the filter (%s mode)" % (name, mode), r)
                r = bind(srv, stored[name], "n1")
                s.check(not r.get("Error"), "%s is bound (%s mode)" % (name, mode), r)
                s.check_eq(c.get_pod(name)["spec"].get("nodeName"), "n1", "%s is bound in the API" % name)
                s.check("gpu-admission.io/node" not in c.annotations(name), "%s carries no decision" % name)
            if mode == "filter":
                # A filter whose copy claims a GPU for such a pod records nothing.
                fake = g.pod("claimed", g.vcuda(100), uid=stored["claimed"]["metadata"]["uid"])
                r = srv.filter(fake, ["n1"])
                s.check("asks for no GPU" in (r.get("Error") or ""), "a filter claiming a GPU is refused", r)
                s.check("gpu-admission.io/node" not in c.annotations("claimed"), "and nothing is recorded")
            r = bind(srv, stored["plain"], "n1")
            s.check("asks for no GPU resource" in (r.get("Error") or ""), "a pod naming no GPU is refused", r)
            r = srv.filter(stored["warm"], ["n1"])
            s.check_eq(r.get("NodeNames"), ["n1"], "the init-only GPU pod fits n1 (%s mode)" % mode, r)
            r = bind(srv, stored["warm"], "n1")
            s.check(not r.get("Error"), "the init-only GPU pod is bound (%s mode)" % mode, r)
            ann = c.annotations("warm")
            s.check_eq(ann.get("gpu-admission.io/node"), "n1", "its decision is recorded", ann)
            s.check(ann.get("gpu-admission.io/gpu-idx-init-1") in ("0", "1"),
                    "the init container's GPU is under its own key", ann)
            s.check("tencent.com/predicate-gpu-idx-1" not in ann and "gpu-admission.io/gpu-idx-0" not in ann,
                    "and under no app container's key", ann)


@suite.test
def test_bind_mode(s):
    run(s, "bind")


@suite.test
def test_filter_mode(s):
    run(s, "filter")


if __name__ == "__main__":
    suite.main()
