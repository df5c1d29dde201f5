#!/usr/bin/env python3
"""Live mode: a GPU share is never given to two pods (issue 22, items 2-6
and the late PATCH of item 8), against the API simulator's faults.

  2. forged decisions: a pod created with decision annotations naming an
     occupied GPU is fitted again (filter and bind), and a direct caller's
     request body cannot change what the pod is charged;
  3. squatting: a far-future gpu-admission.io/time holds nothing, and the
     log says so once;
  4. an unrelated update of a pod (a label) while its decision's PATCH is in
     flight keeps the reservation, although the pod carries an expired
     earlier decision;
  5. a decision holds past the old 60 s TTL (gang waits at Permit), and the
     pod's next attempt on other nodes moves it;
  6. a new leader decides only once its cache caught up with the API server
     as of the Lease (watches held, the old leader SIGKILLed);
  8. a decision PATCH that times out on the client but lands later is
     charged when the watch shows it, and never honoured over a pod that
     got its GPU meanwhile (bind mode).

Standalone: python3 test_live_decision_safety.py --binary PATH --source-dir REPO
"""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-decision-safety")

SETTLE_S = 10.0
KEY = b"decision-safety-key-0123456789abcdef"
WHOLE = g.vcuda(100, 64)


def one_gpu_node(name):
    return g.node(name, g.vcuda(100, 64))


def gqa_decision(node, idx, t):
    return {"gpu-admission.io/node": node, "gpu-admission.io/time": str(t), "gpu-admission.io/gpu-idx-0": str(idx)}


def seen(srv, c, timeout=SETTLE_S):
    """The service's pods informer has applied everything the simulator holds."""
    return srv.seen_rv("pods", str(c.sim.rv), timeout)


def placed(res):
    return res.get("NodeNames") or []


def gpu_cores(srv, node, idx=0):
    return srv.cores().get(node, [None] * (idx + 1))[idx]


def filter_on(s, srv, c, name, nodes):
    return srv.filter(c.get_pod(name), nodes)


def key_flags(s):
    path, _ = g.decision_key_file(s, KEY)
    return ["--decision-key-file", path]


# ---------------------------------------------------------------------------
# 2. Forged decisions
# ---------------------------------------------------------------------------

@suite.test
def test_forged_decision_is_fitted_again(s):
    """A pod created with decision annotations naming GPU 0 (taken) and the
    current time is not 'its own live assumption': the filter fits it again
    and finds no room; GPU 0 stays at 100 cores."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("holder", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(placed(filter_on(s, srv, c, "holder", ["n1"])) == ["n1"], "the holder gets n1's GPU")
            c.create_pod(g.pod("forged", WHOLE, annotations=gqa_decision("n1", 0, time.time_ns())))
            s.require(seen(srv, c), "the watch delivered the forged pod")
            s.check(g.wait_until(lambda: "default/forged" in srv.stderr() and "cannot prove" in srv.stderr(), SETTLE_S),
                    "the unproven decision is logged", g.tail(srv.stderr()))
            s.check_eq(gpu_cores(srv, "n1"), 100, "the forged decision charges nothing: GPU 0 at 100 cores")
            res = filter_on(s, srv, c, "forged", ["n1"])
            s.check_eq(placed(res), [], "the forged pod is fitted again and does not fit", res)
            s.check_eq(gpu_cores(srv, "n1"), 100, "GPU 0 is still at 100 cores")


@suite.test
def test_forged_keys_beside_a_real_decision(s):
    """A pod's creator adds decision keys the decision itself does not
    write (an index for a container without GPUs, tencent.com keys on an MPS
    pod): the decision written over them clears them, so it reads back
    proven and keeps holding its GPU."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.add_node(g.node("m1", g.mps(100, 32)))
        c.create_pod(g.pod("two", [("gpu", WHOLE), ("sidecar", {"cpu": "100m"})],
                           annotations={"gpu-admission.io/gpu-idx-1": "0", "tencent.com/predicate-gpu-idx-1": "0"}))
        c.create_pod(g.pod("mps", g.mps(50, 8), annotations={"tencent.com/predicate-node": "elsewhere",
                                                             "tencent.com/predicate-time": str(time.time_ns())}))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            for name, node in (("two", "n1"), ("mps", "m1")):
                res = filter_on(s, srv, c, name, [node])
                s.require(placed(res) == [node], "%s is placed on %s" % (name, node), res)
            ann = c.annotations("two")
            s.check(not any(k.endswith("-idx-1") for k in ann), "the sidecar's forged index keys are gone", ann)
            s.check(not any(k.startswith("tencent.com/") for k in c.annotations("mps")),
                    "the MPS pod's forged tencent.com keys are gone", c.annotations("mps"))
            s.require(seen(srv, c), "the watch delivered both decisions")
            s.check_eq(gpu_cores(srv, "n1"), 100, "the two-container pod's decision still holds its GPU")
            s.check_eq(gpu_cores(srv, "m1"), 50, "the MPS pod's decision still holds its share")
            s.check(not [ln for ln in srv.stderr().splitlines() if "cannot prove" in ln and "default/two" in ln],
                    "the two-container pod's decision reads back proven", g.tail(srv.stderr()))


@suite.test
def test_creator_cannot_drop_a_hold(s):
    """After p's decision is written, its creator edits the annotations
    (another GPU, then no decision at all) before kube-scheduler binds it:
    p keeps holding its GPU, so q finds none."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("p", WHOLE))
        c.create_pod(g.pod("q", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            s.require(placed(filter_on(s, srv, c, "p", ["n1"])) == ["n1"], "p is decided onto n1")
            s.require(seen(srv, c), "the watch delivered p's decision")
            for edit in ({"gpu-admission.io/gpu-idx-0": "1", "tencent.com/predicate-gpu-idx-0": "1"},
                         {k: None for k in c.annotations("p") if k.startswith(("gpu-admission.io/", "tencent.com/"))}):
                c.patch_pod("p", {"metadata": {"annotations": edit}})
                s.require(seen(srv, c), "the edit reached the cache")
                s.check_eq(gpu_cores(srv, "n1"), 100, "p still holds n1's GPU after its creator's edit %r" % edit)
                res = filter_on(s, srv, c, "q", ["n1"])
                s.check_eq(placed(res), [], "q finds no room", res)
            s.check("took its decision for node n1 off or changed it" in srv.stderr(), "the log says so",
                    g.tail(srv.stderr()))


@suite.test
def test_forged_decision_bind_mode(s):
    """Bind mode: bind of a pod whose forged annotations name a taken GPU is
    fitted again and refused, nothing bound."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("holder", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s) + ["--placement", "bind"]) as srv:
            b = srv.post_json("/scheduler/bind", {"PodName": "holder", "PodNamespace": "default",
                                                  "PodUID": c.get_pod("holder")["metadata"]["uid"], "Node": "n1"})
            s.require(not b.get("Error"), "the holder is bound to n1", b)
            s.require(g.wait_until(lambda: gpu_cores(srv, "n1") == 100, SETTLE_S), "and charged", srv.cores())
            c.create_pod(g.pod("forged", WHOLE, annotations=gqa_decision("n1", 0, time.time_ns())))
            s.require(seen(srv, c), "the watch delivered the forged pod")
            b = srv.post_json("/scheduler/bind", {"PodName": "forged", "PodNamespace": "default",
                                                  "PodUID": c.get_pod("forged")["metadata"]["uid"], "Node": "n1"})
            s.check("cannot take pod" in (b.get("Error") or ""), "bind of the forged pod is refused (fitted again)", b)
            s.check(not c.get_pod("forged")["spec"].get("nodeName"), "the forged pod is not bound")
            s.check_eq(gpu_cores(srv, "n1"), 100, "GPU 0 is still at 100 cores")


@suite.test
def test_request_body_cannot_shrink_the_pod(s):
    """A direct caller sends the pod with 10 cores where the cluster's copy
    asks 100: the decision charges the cluster's 100, so a 90-core pod finds
    no room (watches held: the cache shows the reservation itself)."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("big", WHOLE))
        c.create_pod(g.pod("small", g.vcuda(90, 8)))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered both pods")
            c.sim.hold_watches("pods")
            forged = c.get_pod("big")
            forged["spec"]["containers"][0]["resources"] = {"limits": g.vcuda(10, 8),
                                                            "requests": g.vcuda(10, 8)}
            res = srv.filter(forged, ["n1"])
            s.require(placed(res) == ["n1"], "the pod is placed", res)
            s.check_eq(gpu_cores(srv, "n1"), 100, "it is charged the cluster's 100 cores, not the request's 10")
            res = filter_on(s, srv, c, "small", ["n1"])
            s.check_eq(placed(res), [], "a 90-core pod finds no room on the GPU", res)
            c.sim.release_watches()
            # A body with more GPU containers than the pod has, and one with
            # none: the pod's own containers are what is decided.
            c.create_pod(g.pod("one", g.vcuda(10, 4)))
            s.require(seen(srv, c), "the watch delivered the pod")
            many = c.get_pod("one")
            many["spec"]["containers"] = [{"name": "c%d" % i, "resources": {"limits": g.vcuda(1, 1)}}
                                          for i in range(5)]
            res = srv.filter(many, ["n1"])
            s.check_eq((placed(res), res.get("Error") or ""), ([], ""), "no room for the pod's own 10 cores", res)
            c.delete_pod("small")
            c.delete_pod("big")
            s.require(g.wait_until(lambda: gpu_cores(srv, "n1") == 0, SETTLE_S), "n1 is free", srv.cores())
            res = srv.filter(many, ["n1"])
            s.check_eq(placed(res), ["n1"], "the pod is placed", res)
            ann = c.annotations("one")
            s.check_eq(sorted(k for k in ann if "gpu-idx" in k),
                       ["gpu-admission.io/gpu-idx-0", "tencent.com/predicate-gpu-idx-0"],
                       "index annotations for its one container only", ann)
            s.check(g.wait_until(lambda: gpu_cores(srv, "n1") == 10, SETTLE_S), "charged its own 10 cores",
                    srv.cores())


# ---------------------------------------------------------------------------
# 3. Squatting
# ---------------------------------------------------------------------------

@suite.test
def test_far_future_decision_holds_nothing(s):
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("squat", WHOLE, annotations=gqa_decision("n1", 0, 9223372036854775807)))
        c.create_pod(g.pod("worker", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            s.check_eq(gpu_cores(srv, "n1"), 0, "a far-future unproven decision holds nothing")
            c.patch_pod("squat", {"metadata": {"labels": {"again": "1"}}})
            s.require(seen(srv, c), "an update of the squatter arrives")
            res = filter_on(s, srv, c, "worker", ["n1"])
            s.check_eq(placed(res), ["n1"], "another pod gets the GPU", res)
            s.check_eq(srv.stderr().count("pod default/squat carries a decision"), 1,
                       "the log says once that the squatter's decision holds nothing", g.tail(srv.stderr()))


# ---------------------------------------------------------------------------
# 4. A reservation survives an unrelated update
# ---------------------------------------------------------------------------

@suite.test
def test_reservation_survives_unrelated_update(s):
    """Filter mode; p carries an expired earlier decision; the PATCH of the
    new one takes 2 s; a label update of p arrives meanwhile. q must not get
    the same GPU."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("p", WHOLE, annotations=gqa_decision("n1", 0, time.time_ns() - 3600 * 10**9)))
        c.create_pod(g.pod("q", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            c.sim.delay(2000, count=1, method="PATCH", path="/pods/p$")
            out = {}
            t = threading.Thread(target=lambda: out.update(res=filter_on(s, srv, c, "p", ["n1"])))
            t.start()
            s.require(g.wait_until(lambda: gpu_cores(srv, "n1") == 100, SETTLE_S),
                      "p's reservation holds the GPU", srv.cores())
            c.patch_pod("p", {"metadata": {"labels": {"unrelated": "yes"}}})
            s.require(seen(srv, c, 5), "the label update reached the cache")
            res = filter_on(s, srv, c, "q", ["n1"])
            s.check_eq(placed(res), [], "q does not get p's GPU while p's write is in flight", res)
            t.join(30)
            s.check_eq(placed(out.get("res") or {}), ["n1"], "p is placed", out)
            s.require(seen(srv, c), "the written decision reached the cache")
            s.check_eq(gpu_cores(srv, "n1"), 100, "GPU 0 ends at 100 cores")


# ---------------------------------------------------------------------------
# 5. Holding past gang waits; the next attempt moves the decision
# ---------------------------------------------------------------------------

@suite.test
def test_decision_outlives_permit_wait(s):
    """A proven decision 75 s old (a gang member waiting at Coscheduling's
    Permit, 60 s by default there) still holds its GPU at the default
    --assume-ttl; the pod's next attempt on another node moves it."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.add_node(one_gpu_node("n2"))
        p = c.create_pod(g.pod("member", WHOLE))
        c.create_pod(g.pod("other", WHOLE))
        t = time.time_ns() - 75 * 10**9
        ann = dict(gqa_decision("n1", 0, t))
        ann["gpu-admission.io/proof"] = g.decision_proof(KEY, p["metadata"]["uid"], "n1", t, [[0]])
        c.patch_pod("member", {"metadata": {"annotations": ann}})
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            s.check_eq(gpu_cores(srv, "n1"), 100, "the 75 s old decision still holds n1's GPU")
            res = filter_on(s, srv, c, "other", ["n1"])
            s.check_eq(placed(res), [], "another pod does not get it", res)
            res = filter_on(s, srv, c, "member", ["n2"])
            s.check_eq(placed(res), ["n2"], "the member's next attempt (n1 not offered) decides on n2", res)
            s.check_eq(c.annotations("member").get("gpu-admission.io/node"), "n2", "the decision moved")
            s.require(g.wait_until(lambda: gpu_cores(srv, "n1") == 0, SETTLE_S), "n1's GPU is free", srv.cores())
            res = filter_on(s, srv, c, "other", ["n1"])
            s.check_eq(placed(res), ["n1"], "so another pod gets n1", res)
            # An attempt that fits nowhere (n1 is taken now) releases what
            # the member held on n2.
            res = filter_on(s, srv, c, "member", ["n1"])
            s.check_eq(placed(res), [], "the member's next attempt fits nowhere", res)
            s.check("gpu-admission.io/node" not in c.annotations("member"), "its decision is taken off the pod",
                    c.annotations("member"))
            s.check(g.wait_until(lambda: gpu_cores(srv, "n2") == 0, SETTLE_S), "n2's GPU is free again", srv.cores())


# ---------------------------------------------------------------------------
# 6. A new leader catches up before deciding
# ---------------------------------------------------------------------------

LEASE_NS, LEASE_NAME = "kube-system", "gqa-safety-test"


@suite.test
def test_new_leader_catches_up(s):
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("p", WHOLE))
        c.create_pod(g.pod("q", WHOLE))
        flags = key_flags(s) + ["--leader-elect", "--lease-namespace", LEASE_NS, "--lease-name", LEASE_NAME]
        srv = {k: g.LiveServer(s, c.kubeconfig(token=c.tokens[0], name="kc-%s.json" % k), flags,
                               name="replica-" + k) for k in ("a", "b")}
        try:
            srv["a"].start()
            s.require(g.wait_until(lambda: g.leader_gauge(srv["a"]) == 1, 30), "replica a leads")
            srv["b"].start()
            s.require(seen(srv["a"], c) and seen(srv["b"], c), "both replicas hold the pods")
            # b must not see p's decision before it leads.
            c.sim.hold_watches("pods")
            res = g.wait_until(lambda: (lambda r: r if placed(r) else None)(filter_on(s, srv["a"], c, "p", ["n1"])),
                               SETTLE_S)
            s.require(res and placed(res) == ["n1"], "the leader decides p onto n1", res)
            s.require(c.annotations("p").get("gpu-admission.io/node") == "n1", "the API server holds p's decision")
            srv["a"].signal(signal.SIGKILL)
            srv["a"].wait_exit()
            t0 = time.monotonic()
            s.require(g.wait_until(lambda: g.leader_gauge(srv["b"]) == 1, 40), "b takes the expired Lease")
            print("  b leads %.1fs after a was killed" % (time.monotonic() - t0))
            res = filter_on(s, srv["b"], c, "q", ["n1"])
            s.check_eq(placed(res), [], "b does not give q p's GPU while its cache lags", res)
            s.check("catching up" in (res.get("Error") or ""), "it answers that it is catching up (retry)", res)
            c.sim.release_watches()
            res = g.wait_until(lambda: (lambda r: None if "catching up" in (r.get("Error") or "") else r)(
                filter_on(s, srv["b"], c, "q", ["n1"])), 20)
            s.require(res is not None, "b decides once caught up")
            s.check_eq(placed(res), [], "and q finds n1's GPU taken by p", res)
            s.check_eq(gpu_cores(srv["b"], "n1"), 100, "GPU 0 at 100 cores (p's proven decision)")
        finally:
            c.sim.release_watches()
            srv["a"].stop(expect_code=-signal.SIGKILL) if srv["a"].proc else None
            srv["b"].stop()


# ---------------------------------------------------------------------------
# 8. A PATCH that times out on the client but lands later
# ---------------------------------------------------------------------------

@suite.test
def test_late_patch_is_charged(s):
    """The decision PATCH of p takes longer than the client waits (3 s), so
    the filter answers an Error; the write lands all the same. p must then
    hold its GPU: q finds none."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("p", WHOLE))
        c.create_pod(g.pod("q", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s)) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")
            c.sim.delay(4000, count=1, method="PATCH", path="/pods/p$")
            res = filter_on(s, srv, c, "p", ["n1"])
            s.check(res.get("Error"), "the timed-out write is an Error", res)
            res = filter_on(s, srv, c, "q", ["n1"])
            s.check_eq(placed(res), [], "q does not get the GPU while p's write may still land", res)
            s.require(g.wait_until(lambda: c.annotations("p").get("gpu-admission.io/node") == "n1", SETTLE_S),
                      "p's write landed late", c.annotations("p"))
            s.require(seen(srv, c), "the watch delivered it")
            s.check_eq(gpu_cores(srv, "n1"), 100, "p's late decision is charged")
            res = filter_on(s, srv, c, "q", ["n1"])
            s.check_eq(placed(res), [], "q finds no room", res)
            res = filter_on(s, srv, c, "p", ["n1"])
            s.check_eq(placed(res), ["n1"], "p's retry is answered with its own decision", res)


@suite.test
def test_late_patch_bind_mode(s):
    """Bind mode, one write per bind: p's Binding (which carries its decision) gets no answer, so the bind
    fails, but the Binding may land yet: p's GPU stays held, q is refused it meanwhile, and when p's Binding
    lands late p holds the GPU alone (never two pods on it)."""
    with g.Cluster(s) as c:
        c.add_node(one_gpu_node("n1"))
        c.create_pod(g.pod("p", WHOLE))
        c.create_pod(g.pod("q", WHOLE))
        with g.LiveServer(s, c.kubeconfig(), key_flags(s) + ["--placement", "bind"]) as srv:
            s.require(seen(srv, c), "the watch delivered the pods")

            def bind(name):
                return srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": "default",
                                                         "PodUID": c.get_pod(name)["metadata"]["uid"], "Node": "n1"})
            # Watches held: the cache learns of p's late Binding only after q's bind.
            c.sim.hold_watches("pods")
            c.sim.delay(4000, count=1, method="POST", path="/pods/p/binding$")
            b = bind("p")
            s.require("no answer" in (b.get("Error") or ""), "p's bind fails: its Binding got no answer", b)
            b = bind("q")
            s.check("cannot take pod" in (b.get("Error") or ""),
                    "q is refused: p's unanswered Binding still holds the GPU", (b, g.tail(srv.stderr())))
            s.require(g.wait_until(lambda: c.get_pod("p")["spec"].get("nodeName") == "n1", SETTLE_S),
                      "p's Binding landed late", c.get_pod("p"))
            s.check_eq(c.annotations("p").get("gpu-admission.io/node"), "n1", "with its decision")
            c.sim.release_watches()
            s.require(seen(srv, c), "the watch delivered it")
            b = bind("q")
            s.check("cannot take pod" in (b.get("Error") or ""), "q is still refused: p holds the GPU", b)
            s.check(not c.get_pod("q")["spec"].get("nodeName"), "q is not bound over p")


if __name__ == "__main__":
    suite.main()
