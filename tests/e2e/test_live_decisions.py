#!/usr/bin/env python3
"""Live mode, the decision side: what the binary writes to the API
simulator (tests/apisim) when it decides.

  2. filter mode: exactly GPU-Manager's annotations on the pod, as ONE JSON
     merge patch with the pod's resourceVersion as precondition;
  3. bind mode: the filter answers every feasible node and writes nothing;
     bind is ONE write: the Binding carries the decision annotations in
     its metadata (the API server merges them into the pod as it sets
     nodeName); a failed Binding leaves no annotation behind and says so
     in Error;
  6. a conflicting patch (409) is followed by a GET and a successful PATCH;
  8. 50 concurrent filters for 4 GPUs: exactly 4 decisions, no GPU given
     twice, in the answers, on the pods and in /inspect/nodes.
Also: preemption answered from the live cache (victims by the API's UIDs),
and a scheduler's stale copy of a pod (bound or deleted meanwhile): nothing
written, and the cache keeps what the watch delivered.

Standalone: python3 test_live_decisions.py --binary PATH --source-dir REPO
"""

import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-decisions")

SETTLE_S = 10.0
TENCENT_KEYS = ("tencent.com/predicate-node", "tencent.com/gpu-assigned", "tencent.com/predicate-time")
GQA_KEYS = ("gpu-admission.io/node", "gpu-admission.io/time")


def decision_keys(ann):
    return sorted(k for k in ann if k.startswith("tencent.com/") or k.startswith("gpu-admission.io/"))


def writes(reqs):
    """The service's requests that change something (not GET, not the watches)."""
    return [r for r in reqs if r["method"] in ("PATCH", "POST", "PUT", "DELETE")]


def describe(reqs):
    return "\n".join("%d %s %s %s -> %s (%s)" % (r["seq"], r["method"], r["path"], r.get("contentType"),
                                                  r["status"], r["user"]) for r in reqs)


# Regression guard: the service used to die with SIGSEGV (UBSan: "load of
# null pointer" in podspec.c copy_decision) when pod_info_clone() copied a
# pod without a decision: placement_bind -> pod_for_bind for any pod the
# informer had cached (every bind in bind mode), and undo_assumption after a
# failed record (a pod bound meanwhile). A dying service is reported so.
KNOWN_CRASH = ("[the service died: see pod_info_clone() of a pod without a decision (podspec.c copy_decision), "
               "reached from pod_for_bind / undo_assumption]")


def answered(s, srv, what, fn):
    """fn()'s answer; a service that dies instead fails the test with a clear message."""
    try:
        return fn()
    except (OSError, g.http.client.HTTPException) as e:
        try:
            dead = srv.proc.wait(timeout=1.0)   # a crash is reported as one
        except g.subprocess.TimeoutExpired:
            dead = None
        s.require(False, "the service answers %s%s" % (what, (" " + KNOWN_CRASH) if dead is not None else ""),
                  "%r; exit status %r; stderr:\n%s" % (e, dead, g.tail(srv.stderr(), 4000)))


def ns_time_ok(value, t0, t1):
    return isinstance(value, str) and value.isdigit() and t0 <= int(value) <= t1


# ---------------------------------------------------------------------------
# 2. Filter mode: the annotations, one merge patch
# ---------------------------------------------------------------------------

KEY = b"live-decisions-key-0123456789abcdef"


@suite.test
def test_filter_records_annotations(s):
    key_file, _ = g.decision_key_file(s, KEY)
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 4))
        c.add_node(g.vcuda_node("n2", 4))
        c.add_node(g.node("m1", g.mps(200, 32)))
        c.create_pod(g.pod("share", g.vcuda(30, 8), annotations={"team": "blue"}))
        c.create_pod(g.pod("two", [("model", g.vcuda(40, 16)), ("sidecar", {"cpu": "100m"}),
                                   ("tokenizer", g.vcuda(20, 8))]))
        c.create_pod(g.pod("mps", g.mps(25, 4)))
        with g.LiveServer(s, c.kubeconfig(), ["--decision-key-file", key_file]) as srv:
            pod = c.get_pod("share")          # what kube-scheduler sends: the pod as stored
            mark = c.last_seq()
            t0 = time.time_ns()
            res = srv.filter(pod, ["n1", "n2"])
            t1 = time.time_ns()
            names = res.get("NodeNames") or []
            s.require(len(names) == 1, "the filter answers one node", res)
            chosen, other = names[0], ("n2" if names[0] == "n1" else "n1")
            s.check_eq(g.failed_reason(res, other), "pod assigned to node %s" % chosen,
                       "the other feasible node fails with 'pod assigned to node X'")
            s.check(not res.get("Error"), "no Error", res)

            ann = c.annotations("share")
            s.check_eq(ann.get("team"), "blue", "the pod's own annotations are kept")
            s.check_eq(decision_keys(ann), sorted(["tencent.com/predicate-gpu-idx-0", "tencent.com/predicate-node",
                                                   "tencent.com/gpu-assigned", "tencent.com/predicate-time",
                                                   "gpu-admission.io/gpu-idx-0", "gpu-admission.io/node",
                                                   "gpu-admission.io/time", "gpu-admission.io/proof"]),
                       "exactly GPU-Manager's and gpu-admission.io's decision annotations", ann)
            s.check_eq(ann.get("tencent.com/predicate-node"), chosen, "predicate-node is the node answered")
            s.check_eq(ann.get("gpu-admission.io/node"), chosen, "gpu-admission.io/node is the node answered")
            s.check_eq(ann.get("tencent.com/gpu-assigned"), "false", "gpu-assigned is \"false\"")
            s.check(ns_time_ok(ann.get("tencent.com/predicate-time"), t0, t1),
                    "predicate-time is the decision time in Unix nanoseconds",
                    "%r not in [%d, %d]" % (ann.get("tencent.com/predicate-time"), t0, t1))
            s.check(ns_time_ok(ann.get("gpu-admission.io/time"), t0, t1),
                    "gpu-admission.io/time is the decision time in Unix nanoseconds", ann.get("gpu-admission.io/time"))
            idx = ann.get("tencent.com/predicate-gpu-idx-0", "")
            s.check(re.fullmatch(r"[0-3]", idx or "") is not None, "predicate-gpu-idx-0 is one GPU of the node", idx)
            s.check_eq(ann.get("gpu-admission.io/gpu-idx-0"), idx, "gpu-admission.io/gpu-idx-0 says the same")
            s.check_eq(ann.get("gpu-admission.io/proof"),
                       g.decision_proof(KEY, pod["metadata"]["uid"], chosen, int(ann.get("gpu-admission.io/time", 0)),
                                        [[int(idx or 0)]]),
                       "gpu-admission.io/proof is the HMAC of docs/security.md with the --decision-key-file key")

            reqs = c.requests_since(mark)
            w = writes(reqs)
            s.check_eq(len(w), 1, "the decision is one write", describe(reqs))
            if w:
                p = w[0]
                s.check_eq((p["method"], p["path"], p["contentType"], p["status"]),
                           ("PATCH", g.pod_path("share"), "application/merge-patch+json", 200),
                           "it is a JSON merge patch of the pod, accepted")
                body = json.loads(p["body"])
                s.check_eq(body.get("metadata", {}).get("resourceVersion"), pod["metadata"]["resourceVersion"],
                           "the patch carries the pod's resourceVersion as precondition")
                s.check_eq(sorted(body.get("metadata", {}).get("annotations", {})), decision_keys(ann),
                           "the patch carries exactly the decision annotations")
                s.check_eq(sorted(body), ["metadata"], "the patch touches nothing but metadata", body)
                s.check_eq(p["user"], "token:live...", "the service authenticated with the kubeconfig's token")

            cores = g.wait_until(lambda: srv.cores()[chosen][int(idx)] == 30 and srv.cores(), SETTLE_S)
            s.check(cores, "/inspect/nodes charges the pod's GPU", srv.cores())

            # kube-scheduler filters again (e.g. after a failed bind cycle):
            # the live assumption is answered again, and nothing is written.
            mark = c.last_seq()
            res2 = srv.filter(c.get_pod("share"), ["n1", "n2"])
            s.check_eq(res2.get("NodeNames"), [chosen], "a re-filter answers the same node")
            s.check_eq(writes(c.requests_since(mark)), [], "a re-filter writes nothing")
            s.check_eq(c.annotations("share").get("tencent.com/predicate-time"),
                       ann.get("tencent.com/predicate-time"), "the recorded decision is unchanged")

            # Several containers: one index annotation per GPU container.
            mark = c.last_seq()
            res = srv.filter(c.get_pod("two"), ["n1", "n2"])
            s.check_eq(len(res.get("NodeNames") or []), 1, "a two-GPU-container pod is placed", res)
            ann = c.annotations("two")
            for i in (0, 2):
                s.check(re.fullmatch(r"[0-3]", ann.get("tencent.com/predicate-gpu-idx-%d" % i, "")) is not None,
                        "predicate-gpu-idx-%d names the GPU of container %d" % (i, i), ann)
                s.check_eq(ann.get("gpu-admission.io/gpu-idx-%d" % i), ann.get("tencent.com/predicate-gpu-idx-%d" % i),
                           "gpu-admission.io/gpu-idx-%d says the same" % i)
            s.check_eq(len(writes(c.requests_since(mark))), 1, "still one patch for a pod with several containers")

            # MPS: gpu-admission.io's annotations only.
            res = srv.filter(c.get_pod("mps"), ["n1", "n2", "m1"])
            s.check_eq(res.get("NodeNames"), ["m1"], "the MPS pod goes to the MPS node", res)
            ann = c.annotations("mps")
            s.check_eq(decision_keys(ann), sorted(["gpu-admission.io/gpu-idx-0", "gpu-admission.io/node",
                                                   "gpu-admission.io/time", "gpu-admission.io/proof"]),
                       "an MPS pod gets gpu-admission.io's annotations and no tencent.com ones", ann)


# ---------------------------------------------------------------------------
# 3. Bind mode
# ---------------------------------------------------------------------------

def bind(srv, c, name, node, uid=None):
    args = {"PodName": name, "PodNamespace": "default",
            "PodUID": uid if uid is not None else c.get_pod(name)["metadata"]["uid"], "Node": node}
    return answered(srv.suite, srv, "bind of %s" % name, lambda: srv.post_json("/scheduler/bind", args))


@suite.test
def test_bind_mode(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.add_node(g.vcuda_node("n2", 2))
        for name in ("b1", "b2", "b3"):
            c.create_pod(g.pod(name, g.vcuda(50, 16)))
        c.create_pod(g.pod("huge", g.vcuda(300, 192)))
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            mark = c.last_seq()
            res = srv.filter(c.get_pod("b1"), ["n1", "n2"])
            s.check_eq(sorted(res.get("NodeNames") or []), ["n1", "n2"], "the filter answers every feasible node", res)
            s.check(not res.get("FailedNodes"), "and fails none", res)
            s.check_eq(writes(c.requests_since(mark)), [], "the filter writes nothing")
            s.check_eq(decision_keys(c.annotations("b1")), [], "the pod carries no decision annotation")
            res = srv.filter(c.get_pod("huge"), ["n1", "n2"])
            s.check(not res.get("NodeNames") and g.failed_reason(res, "n1"), "a pod too big fails with reasons", res)
            pr = srv.prioritize(c.get_pod("b1"), ["n1", "n2"])
            s.check(g.scores_of(pr, ["n1", "n2"]) is not None, "prioritize scores the nodes sent", pr)

            # Bind: one write, the Binding with the annotations.
            mark = c.last_seq()
            r = bind(srv, c, "b1", "n2")
            s.check(not r.get("Error"), "bind succeeds", r)
            stored = c.get_pod("b1")
            s.check_eq(stored["spec"].get("nodeName"), "n2", "the Binding set spec.nodeName in the API")
            ann = stored["metadata"].get("annotations") or {}
            s.check_eq(ann.get("tencent.com/predicate-node"), "n2", "the pod carries the decision for n2", ann)
            s.check(ann.get("tencent.com/predicate-gpu-idx-0") in ("0", "1"), "and the GPU index", ann)
            w = writes(c.requests_since(mark))
            kinds = [(x["method"], x["path"], x["status"]) for x in w]
            s.check_eq(kinds, [("POST", g.pod_path("b1") + "/binding", 201)],
                       "one write: the Binding, no annotation patch", describe(w))
            bann = (json.loads(w[0]["body"]) if w else {}).get("metadata", {}).get("annotations") or {}
            s.check_eq(bann.get("tencent.com/predicate-node"), "n2", "the Binding carries the decision", w)
            cores = g.wait_until(lambda: sum(srv.cores()["n2"]) == 50 and srv.cores(), SETTLE_S)
            s.check(cores, "the bound pod is charged on n2", srv.cores())
            r = bind(srv, c, "b1", "n2")
            s.check(not r.get("Error"), "binding again to the same node is not an error", r)
            r = bind(srv, c, "b1", "n1")
            s.check("already bound" in (r.get("Error") or ""), "binding to another node is refused", r)

            # The Binding fails: Error says so, and no annotation was written.
            c.sim.fail(500, count=1, path=r"/pods/b2/binding$", method="POST", message="apisim: binding refused")
            mark = c.last_seq()
            r = bind(srv, c, "b2", "n1")
            err = r.get("Error") or ""
            s.check("binding" in err and "failed" in err, "a failed Binding is reported in Error", r)
            s.check("binding refused" in err or "500" in err, "with the API's answer", r)
            stored = c.get_pod("b2")
            s.check(not stored["spec"].get("nodeName"), "the pod is not bound", stored["spec"])
            s.check_eq(decision_keys(stored["metadata"].get("annotations") or {}), [],
                       "no decision annotation is left on the pod", stored["metadata"].get("annotations"))
            w = writes(c.requests_since(mark))
            kinds = [(x["method"], x["path"], x["status"]) for x in w]
            s.check_eq(kinds, [("POST", g.pod_path("b2") + "/binding", 500)],
                       "the failed Binding is the only write: nothing to take off", describe(w))
            s.check_eq(sum(srv.cores()["n1"]), 0, "the failed bind charges nothing", srv.cores())
            r = bind(srv, c, "b2", "n1")
            s.check(not r.get("Error"), "a second bind (the fault is gone) succeeds", r)
            s.check_eq(c.get_pod("b2")["spec"].get("nodeName"), "n1", "and binds the pod")

            # Bind a pod the watch has not delivered yet: it is read from the API.
            c.sim.fail(500, path=r"^/api/v1/pods$", watch=True, seconds=3)
            c.sim.drop_watches()
            fresh = c.create_pod(g.pod("fresh", g.vcuda(20, 8)))
            mark = c.last_seq()
            r = bind(srv, c, "fresh", "n1", uid=fresh["metadata"]["uid"])
            s.check(not r.get("Error"), "a pod not yet in the cache is bound", r)
            s.check_eq(c.get_pod("fresh")["spec"].get("nodeName"), "n1", "and is bound in the API")
            s.check(any(x["method"] == "GET" and x["path"] == g.pod_path("fresh") for x in c.requests_since(mark)),
                    "it was read from the API server", describe(c.requests_since(mark)))
            r = bind(srv, c, "b3", "n1", uid="00000000-0000-4000-8000-000000000000")
            s.check("UID" in (r.get("Error") or ""), "a binding for another UID is refused", r)
            c.sim.clear_faults()
            want = {"n1": 70, "n2": 50}
            ok = g.wait_until(lambda: {n: sum(v) for n, v in srv.cores().items()} == want, SETTLE_S)
            s.check(ok, "occupancy: b1 on n2, b2 and fresh on n1", srv.cores())


# ---------------------------------------------------------------------------
# Preemption against the live cache
# ---------------------------------------------------------------------------

@suite.test
def test_preemption_live(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.add_node(g.vcuda_node("n2", 2))
        c.add_node(g.vcuda_node("n3", 1))
        uid = {}

        def running(name, node, idx, cores, mem):
            ann = {"tencent.com/predicate-gpu-idx-0": str(idx), "tencent.com/gpu-assigned": "true"}
            uid[name] = c.create_pod(g.pod(name, g.vcuda(cores, mem), annotations=ann), node=node,
                                     phase="Running")["metadata"]["uid"]

        running("v1", "n1", 0, 100, 64)
        running("v2", "n1", 1, 100, 64)
        running("v3", "n2", 0, 30, 8)
        running("v4", "n2", 1, 30, 8)
        running("v5", "n3", 0, 100, 64)
        uid["cpu"] = c.create_pod(g.pod("cpu", {"cpu": "2"}), node="n3", phase="Running")["metadata"]["uid"]
        pending = c.create_pod(g.pod("needs", g.vcuda(100, 64)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            res = srv.filter(c.get_pod("needs"), ["n1", "n2", "n3"])
            s.check(not res.get("NodeNames"), "no node has a free GPU", res)
            args = {"Pod": pending, "NodeNameToMetaVictims": {
                "n1": {"Pods": [{"UID": uid["v1"]}, {"UID": uid["v2"]}], "NumPDBViolations": 2},
                "n2": {"Pods": [{"UID": uid["v3"]}, {"UID": uid["v4"]}], "NumPDBViolations": 1},
                "n3": {"Pods": [{"UID": uid["cpu"]}], "NumPDBViolations": 0}}}
            r = srv.post_json("/scheduler/preemption", args)
            got = r.get("NodeNameToMetaVictims") or {}
            s.check(not r.get("Error"), "no Error", r)
            s.check_eq(sorted(got), ["n1", "n2"], "nodes where eviction frees a GPU are kept, n3 is not", r)
            # kube-scheduler lists only the victims its own fit needs: sparing one here would make the
            # preemptor fail that fit and a second preemption round follow (issue 25 item 3).
            s.check_eq([v["UID"] for v in got.get("n1", {}).get("Pods", [])], [uid["v1"], uid["v2"]],
                       "n1: every victim kube-scheduler listed is kept", r)
            s.check_eq([v["UID"] for v in got.get("n2", {}).get("Pods", [])], [uid["v3"], uid["v4"]],
                       "n2: every victim kube-scheduler listed is kept", r)
            s.check_eq(got.get("n2", {}).get("NumPDBViolations"), 1, "NumPDBViolations is passed through", r)
            s.check_eq(got.get("n1", {}).get("NumPDBViolations"), 2, "NumPDBViolations is passed through", r)

            # The scheduler evicts v1; the pod then fits on n1 GPU 0.
            c.delete_pod("v1")
            ok = g.wait_until(lambda: srv.cores()["n1"] == [0, 100], SETTLE_S)
            s.check(ok, "the eviction frees GPU 0 of n1", srv.cores())
            res = srv.filter(c.get_pod("needs"), ["n1", "n2", "n3"])
            s.check_eq(res.get("NodeNames"), ["n1"], "the preemptor now fits on n1", res)
            s.check_eq(c.annotations("needs").get("tencent.com/predicate-gpu-idx-0"), "0", "on the freed GPU")


# ---------------------------------------------------------------------------
# 6. Conflict: 409, GET, PATCH
# ---------------------------------------------------------------------------

@suite.test
def test_patch_conflict_retried(s):
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.add_node(g.vcuda_node("n2", 2))
        c.create_pod(g.pod("conf", g.vcuda(30, 8)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            old = c.get_pod("conf")         # the scheduler's copy, and the cache's
            # The watch has not delivered the change yet: the decision carries
            # the resourceVersion the cache knows, which is stale by now.
            c.sim.hold_watches("pods")
            c.patch_pod("conf", {"metadata": {"labels": {"changed": "meanwhile"}}})
            mid_rv = c.get_pod("conf")["metadata"]["resourceVersion"]
            s.require(mid_rv != old["metadata"]["resourceVersion"], "the label patch changed the resourceVersion")
            mark = c.last_seq()
            res = srv.filter(old, ["n1", "n2"])
            c.sim.release_watches()
            s.check_eq(len(res.get("NodeNames") or []), 1, "the filter still decides", res)
            s.check(not res.get("Error"), "without an Error", res)
            reqs = [r for r in c.requests_since(mark) if not r["watch"]]
            seq = [(r["method"], r["path"], r["status"]) for r in reqs]
            s.check_eq(seq, [("PATCH", g.pod_path("conf"), 409), ("GET", g.pod_path("conf"), 200),
                             ("PATCH", g.pod_path("conf"), 200)],
                       "a 409, then the pod is read again, then the patch succeeds", describe(reqs))
            if len(reqs) == 3:
                b1, b2 = json.loads(reqs[0]["body"]), json.loads(reqs[2]["body"])
                s.check_eq(b1["metadata"].get("resourceVersion"), old["metadata"]["resourceVersion"],
                           "the first patch had the old resourceVersion")
                s.check_eq(b2["metadata"].get("resourceVersion"), mid_rv,
                           "the retry carries the resourceVersion read again")
            stored = c.get_pod("conf")
            s.check_eq(stored["metadata"].get("labels", {}).get("changed"), "meanwhile", "the other change is kept")
            s.check_eq(stored["metadata"].get("annotations", {}).get("tencent.com/predicate-node"),
                       res.get("NodeNames", [None])[0], "the decision is on the pod")


# ---------------------------------------------------------------------------
# The scheduler's copy of the pod is stale: bound or deleted meanwhile
# ---------------------------------------------------------------------------

@suite.test
def test_stale_pod_copies(s):
    """kube-scheduler filters with the pod as it read it. If the pod was bound
    (by someone else) or deleted in between, the decision is judged on the
    cluster's copy (the cache's, else the API server's): an Error that says
    so, nothing written, and the cache still holds the pod as the watch
    delivered it: neither forget a binding nor charge GPUs to a pod that no
    longer exists."""
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.add_node(g.vcuda_node("n2", 2))
        c.add_node(g.vcuda_node("n3", 2))
        c.create_pod(g.pod("gone", g.vcuda(30, 8)))
        c.create_pod(g.pod("deleted", g.vcuda(100, 64)))
        c.create_pod(g.pod("big", g.vcuda(200, 128)))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            # Bound meanwhile, without index annotations (placed by something
            # else): counted at node level on n1.
            old = c.get_pod("gone")
            c.sim.bind("default", "gone", {"target": {"name": "n1"}})
            s.require(g.wait_until(lambda: srv.inspect("n1")["unattributed"]["cores"] == 30, SETTLE_S),
                      "the watch shows the binding (30 cores at node level on n1)", srv.inspect("n1"))
            mark = c.last_seq()
            res = answered(s, srv, "a filter for a pod bound meanwhile", lambda: srv.filter(old, ["n1", "n2"]))
            s.check(not res.get("NodeNames"), "a pod bound meanwhile is not placed", res)
            s.check("already bound to node n1" in (res.get("Error") or ""),
                    "the Error says it is bound already (judged on the cache's copy, not the request's)", res)
            s.check_eq(decision_keys(c.annotations("gone")), [], "no decision annotation is written")
            s.check_eq([r for r in c.requests_since(mark) if r["method"] == "PATCH"], [], "nothing was written",
                       describe(c.requests_since(mark)))
            s.check_eq(srv.inspect("n1")["unattributed"]["cores"], 30,
                       "the cache still counts the pod bound meanwhile", srv.inspect("n1"))
            res = srv.filter(c.get_pod("big"), ["n1", "n2"])
            s.check_eq(res.get("NodeNames"), ["n2"], "so a two-GPU pod does not fit n1 (30 cores are used there)", res)

            # Deleted meanwhile, with the annotations of an earlier decision
            # in the scheduler's copy.
            res = srv.filter(c.get_pod("deleted"), ["n3"])
            s.require(res.get("NodeNames") == ["n3"], "the pod to be deleted is first placed on n3", res)
            s.require(g.wait_until(lambda: "default/deleted" in str(srv.pods_on()["n3"]), SETTLE_S),
                      "and charged there", srv.pods_on())
            stale = c.get_pod("deleted")
            c.delete_pod("deleted")
            s.require(g.wait_until(lambda: "default/deleted" not in str(srv.pods_on()), SETTLE_S),
                      "the watch delivers the deletion", srv.pods_on())
            mark = c.last_seq()
            res = answered(s, srv, "a filter for a pod deleted meanwhile", lambda: srv.filter(stale, ["n3"]))
            s.check(not res.get("NodeNames"), "a deleted pod is not placed", res)
            s.check("the API server does not have it either" in (res.get("Error") or ""),
                    "the Error says the API server does not have it", res)
            reqs = c.requests_since(mark)
            s.check_eq([(r["method"], r["path"], r["status"]) for r in reqs if not r["watch"]],
                       [("GET", g.pod_path("deleted"), 404)], "the pod was looked up once, nothing written",
                       describe(reqs))
            s.check("default/deleted" not in str(srv.pods_on()), "no GPU is charged to the deleted pod",
                    srv.pods_on())


# ---------------------------------------------------------------------------
# 8. Concurrent filters never overcommit
# ---------------------------------------------------------------------------

@suite.test
def test_concurrent_filters_never_overcommit(s):
    npods = 50
    with g.Cluster(s) as c:
        c.add_node(g.vcuda_node("n1", 2))
        c.add_node(g.vcuda_node("n2", 2))
        for i in range(npods):
            c.create_pod(g.pod("whole-%02d" % i, g.vcuda(100, 64)))
        with g.LiveServer(s, c.kubeconfig(), ["--threads", "8"]) as srv:
            pods = [c.get_pod("whole-%02d" % i) for i in range(npods)]
            mark = c.last_seq()
            barrier = threading.Barrier(npods)
            results = [None] * npods

            def run(i):
                try:
                    barrier.wait(timeout=30)
                    r = srv.post("/scheduler/filter", {"Pod": pods[i], "NodeNames": ["n1", "n2"]})
                    results[i] = r.json() if r.status == 200 else {"status": r.status, "body": r.text}
                except Exception as e:  # noqa: BLE001 - recorded as a failed answer
                    results[i] = {"exception": repr(e)}

            threads = [threading.Thread(target=run, args=(i,)) for i in range(npods)]
            t0 = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            elapsed = time.monotonic() - t0
            print("  %d concurrent filters answered in %.2fs" % (npods, elapsed))
            s.check(all(isinstance(r, dict) and "NodeNames" in r or "FailedNodes" in (r or {}) for r in results),
                    "every filter got an ExtenderFilterResult", [r for r in results if not r or "exception" in r])
            s.check_eq([r for r in results if r and r.get("Error")], [], "no filter answered an Error")
            winners = {pods[i]["metadata"]["name"]: r["NodeNames"] for i, r in enumerate(results)
                       if r and r.get("NodeNames")}
            s.check_eq(len(winners), 4, "exactly 4 of %d pods get a node (4 GPUs)" % npods, winners)
            s.check(all(len(v) == 1 for v in winners.values()), "each winner gets exactly one node", winners)

            annotated = {}
            for i in range(npods):
                name = "whole-%02d" % i
                ann = c.annotations(name)
                if "tencent.com/predicate-node" in ann:
                    annotated[name] = (ann["tencent.com/predicate-node"], ann.get("tencent.com/predicate-gpu-idx-0"))
            s.check_eq(sorted(annotated), sorted(winners), "exactly the winners carry decision annotations")
            s.check_eq(len(set(annotated.values())), len(annotated), "no GPU is annotated to two pods", annotated)
            s.check(all(annotated[n][0] == winners[n][0] for n in annotated if n in winners),
                    "each winner's annotation names the node it was answered", (annotated, winners))
            patches = [r for r in c.requests_since(mark) if r["method"] == "PATCH"]
            s.check_eq(len(patches), 4, "4 patches, one per decision", describe(patches))

            def settled():
                nodes = srv.inspect()
                return all(len(gp["pods"]) == 1 for n in nodes for gp in n["gpus"]) and nodes
            nodes = g.wait_until(settled, SETTLE_S) or srv.inspect()
            for n in nodes:
                for gp in n["gpus"]:
                    s.check(gp["coreUsed"] <= 100, "%s GPU %d is not overcommitted" % (n["node"], gp["index"]), gp)
                    s.check_eq(len(gp["pods"]), 1, "%s GPU %d holds one pod" % (n["node"], gp["index"]), gp)
            # And no one else gets in now.
            res = srv.filter(c.get_pod("whole-%02d" % next(i for i in range(npods)
                                                              if "whole-%02d" % i not in winners)), ["n1", "n2"])
            s.check(not res.get("NodeNames"), "a later filter finds no free GPU", res)


if __name__ == "__main__":
    suite.main()
