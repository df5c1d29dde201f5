#!/usr/bin/env python3
"""Per-namespace GPU quota in the filter (design.md section 6, issue 5).

The quota ConfigMap kube-system/gpu-quota carries tkestack gpu-admission's
JSON in data.gpu_quota: {"<namespace>": {"pool": [...], "quota": {"<model>":
<whole GPUs>}}}; nodes carry tkestack.io/gpu-model and tkestack.io/gpu-pool.

  - within quota the pod fits; over by one shared pod (0.8 used, 0.3 more)
    it is refused on every node of that model with a reason naming the
    namespace, the model, the quota and the usage; whole GPUs and
    nvidia.com/gpu count 100 cores each;
  - a node outside the namespace's pools, a model the quota does not name,
    a node without labels: refused, each with its reason;
  - a namespace without an entry is unrestricted; pods using no GPU are not
    held to the quota;
  - /inspect/quota shows usage against quota;
  - filter-mode decisions count toward usage at once (two pods filtered back
    to back, or at the same time, cannot both take the last quota), and stop
    counting when the assumption expires;
  - --quota-configmap, --gpu-model-label, --gpu-pool-label;
  - live (API simulator): the quota ConfigMap changed, deleted and created
    while running applies to the next filter; usage follows the pod watch
    (bound, deleted, finished pods; a relabelled node); bind mode's bind
    re-checks the quota;
  - preemption does not offer victims whose eviction frees no quota;
  - shares that take the CRL vcuda-memory default are held to the quota and
    count toward usage.

Standalone: python3 test_quota.py --binary PATH --source-dir REPO
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("quota")

MODEL = "tkestack.io/gpu-model"
POOL = "tkestack.io/gpu-pool"

QUOTA = {
    "team-a": {"pool": ["public"], "quota": {"A100": 1}},
    "team-b": {"pool": ["private", "public"], "quota": {"A100": 2, "T4": 1}},
    "team-c": {"pool": ["public"], "quota": {}},
    "team-d": {"quota": {"T4": 1}},
}


def labels(model=None, pool=None, model_label=MODEL, pool_label=POOL):
    out = {}
    if model:
        out[model_label] = model
    if pool:
        out[pool_label] = pool
    return out


def quota_cm(entries, name="gpu-quota", namespace="kube-system", text=None):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"gpu_quota": text if text is not None else json.dumps(entries)}}


def vnode(name, model=None, pool=None, gpus=4, **kw):
    return g.node(name, g.vcuda(gpus * 100, gpus * 64), labels=labels(model, pool, **kw))


def bound(name, ns, node, res, phase="Running", gpu_idx="0"):
    ann = {"tencent.com/predicate-gpu-idx-0": gpu_idx, "tencent.com/predicate-node": node,
           "tencent.com/gpu-assigned": "true"} if gpu_idx is not None else None
    return g.pod(name, res, namespace=ns, node=node, phase=phase, annotations=ann)


# The cluster of the offline tests.
NODES = ["a100-pub-0", "a100-pub-1", "a100-priv", "t4-pub", "nomodel-pub", "nopool-a100", "a100-pgpu", "cpu-0"]
VCUDA_NODES = NODES[:6]


def cluster_objects(quota=QUOTA):
    return [
        vnode("a100-pub-0", "A100", "public"),
        vnode("a100-pub-1", "A100", "public"),
        vnode("a100-priv", "A100", "private"),
        vnode("t4-pub", "T4", "public"),
        vnode("nomodel-pub", None, "public"),
        vnode("nopool-a100", "A100", None),
        g.node("a100-pgpu", g.pgpu(8), labels=labels("A100", "public")),
        g.node("cpu-0", {}),
        quota_cm(quota),
        # team-a uses 0.8 of its single A100; a finished pod holds nothing.
        bound("used", "team-a", "a100-pub-0", g.vcuda(80, 16)),
        bound("done", "team-a", "a100-pub-1", g.vcuda(100, 64), phase="Succeeded"),
        # team-b uses its whole T4 quota.
        bound("t4-job", "team-b", "t4-pub", g.vcuda(100, 64)),
        # No entry: counted nowhere.
        bound("free-job", "free", "a100-pub-1", g.vcuda(200, 128), gpu_idx="0,1"),
    ]


def over(ns, used, quota, model, need, by):
    return "namespace %s uses %s of its %d %s GPUs; the pod needs %s more (over by %s)" % (ns, used, quota, model,
                                                                                          need, by)


def pools_msg(ns, pools, node_pool):
    where = "in pool %s" % node_pool if node_pool else "in no pool"
    return "namespace %s may use GPU pools [%s]; this node is %s" % (ns, ", ".join(pools), where)


def no_model(ns, model, names):
    return "namespace %s has no GPU quota for model %s (its quota names: %s)" % (
        ns, model or "(node has no model label)", " ".join(names) if names else "none")


def check_filter(s, srv, p, fits, reasons, what, names=NODES):
    """Bind mode: the filter answers exactly the feasible nodes `fits`;
    reasons maps node -> the exact reason (None: failed, any reason)."""
    res = srv.filter(p, names)
    s.check(not res.get("Error"), "%s: no Error" % what, res)
    s.check_eq(sorted(res.get("NodeNames") or []), sorted(fits), "%s: the feasible nodes" % what, res)
    for n, want in reasons.items():
        got = g.failed_reason(res, n)
        if want is None:
            s.check(bool(got), "%s: %s failed with a reason" % (what, n), res)
        else:
            s.check_eq(got, want, "%s: %s's reason" % (what, n))
    return res


def quota_view(srv):
    """/inspect/quota as {namespace: {model: (quotaGpus, usedCores)}}, plus the raw answer."""
    raw = srv.get_json("/inspect/quota")
    view = {e["namespace"]: {m["model"]: (m["quotaGpus"], m["usedCores"]) for m in e["models"]}
            for e in raw.get("namespaces", [])}
    return view, raw


# ---------------------------------------------------------------------------
# Offline: the verdicts
# ---------------------------------------------------------------------------

@suite.test
def test_within_quota_and_pools(s):
    with g.Server(s, g.write_state(s, cluster_objects()), ["--placement", "bind"]) as srv:
        # 0.8 used + 0.2 = exactly the quota.
        check_filter(s, srv, g.pod("fits", g.vcuda(20, 8), namespace="team-a"), ["a100-pub-0", "a100-pub-1"], {
            "a100-priv": pools_msg("team-a", ["public"], "private"),
            "nopool-a100": pools_msg("team-a", ["public"], None),
            "t4-pub": no_model("team-a", "T4", ["A100"]),
            "nomodel-pub": no_model("team-a", None, ["A100"]),
            "a100-pgpu": None, "cpu-0": None,
        }, "team-a, 20 cores (0.8 + 0.2 = its 1 A100)")
        # Several pools; an entry without pools; models are counted apart.
        check_filter(s, srv, g.pod("b", g.vcuda(200, 128), namespace="team-b"),
                     ["a100-pub-0", "a100-pub-1", "a100-priv"], {
                         "nopool-a100": pools_msg("team-b", ["private", "public"], None),
                         "t4-pub": over("team-b", "1", 1, "T4", "2", "2"),
                         "nomodel-pub": no_model("team-b", None, ["A100", "T4"]),
                     }, "team-b, 2 whole GPUs")
        check_filter(s, srv, g.pod("d", g.vcuda(50, 16), namespace="team-d"), ["t4-pub"], {
            "a100-pub-0": no_model("team-d", "A100", ["T4"]),
            "a100-priv": no_model("team-d", "A100", ["T4"]),
            "nopool-a100": no_model("team-d", "A100", ["T4"]),
            "nomodel-pub": no_model("team-d", None, ["T4"]),
        }, "team-d (no pool list), half a T4")
        # Pool mismatch is said first, even where the model has no quota.
        check_filter(s, srv, g.pod("c", g.vcuda(10, 4), namespace="team-c"), [], {
            "a100-pub-0": no_model("team-c", "A100", []),
            "t4-pub": no_model("team-c", "T4", []),
            "a100-priv": pools_msg("team-c", ["public"], "private"),
        }, "team-c (an empty quota)")


@suite.test
def test_over_quota(s):
    with g.Server(s, g.write_state(s, cluster_objects()), ["--placement", "bind"]) as srv:
        # Over by one shared pod: 0.8 used, a 30-core share asks 0.3 more.
        want = over("team-a", "0.80", 1, "A100", "0.30", "0.10")
        res = check_filter(s, srv, g.pod("share", g.vcuda(30, 8), namespace="team-a"), [], {
            "a100-pub-0": want, "a100-pub-1": want, "a100-pgpu": None,
            "a100-priv": pools_msg("team-a", ["public"], "private"),
        }, "team-a, 30 cores over 0.8 used")
        s.check("a100-pub-1" in (res.get("FailedNodes") or {}),
                "a quota refusal is a FailedNodes entry (preemption may free quota)", res)
        check_filter(s, srv, g.pod("one-core", g.vcuda(21, 8), namespace="team-a"), [], {
            "a100-pub-0": over("team-a", "0.80", 1, "A100", "0.21", "0.01"),
        }, "team-a, 21 cores: over by a single core")
        # Whole GPUs count 100 cores each, nvidia.com/gpu too.
        check_filter(s, srv, g.pod("whole", g.vcuda(100, 64), namespace="team-a"), [], {
            "a100-pub-1": over("team-a", "0.80", 1, "A100", "1", "0.80"),
        }, "team-a, one whole vcuda GPU")
        check_filter(s, srv, g.pod("pg", g.pgpu(1), namespace="team-a"), [], {
            "a100-pgpu": over("team-a", "0.80", 1, "A100", "1", "0.80"),
        }, "team-a, one nvidia.com/gpu")
        check_filter(s, srv, g.pod("pg2", g.pgpu(2), namespace="team-b"), ["a100-pgpu"], {},
                     "team-b, two nvidia.com/gpu within its 2 A100")
        check_filter(s, srv, g.pod("three", g.vcuda(300, 192), namespace="team-b"), [], {
            "a100-pub-0": over("team-b", "0", 2, "A100", "3", "1"),
            "a100-priv": over("team-b", "0", 2, "A100", "3", "1"),
            "t4-pub": over("team-b", "1", 1, "T4", "3", "3"),
        }, "team-b, 3 whole GPUs over its 2 A100")
        # A multi-container pod counts every GPU container.
        two = g.pod("two", [("a", g.vcuda(10, 4)), ("side", {"cpu": "1"}), ("b", g.vcuda(15, 4))], namespace="team-a")
        check_filter(s, srv, two, [], {"a100-pub-0": over("team-a", "0.80", 1, "A100", "0.25", "0.05")},
                     "team-a, two shares in one pod")


@suite.test
def test_unrestricted(s):
    with g.Server(s, g.write_state(s, cluster_objects()), ["--placement", "bind"]) as srv:
        for ns in ("free", "default", "team-a-not"):
            check_filter(s, srv, g.pod("big", g.vcuda(200, 128), namespace=ns), VCUDA_NODES, {},
                         "namespace %s (no entry), 2 whole GPUs: every vcuda node" % ns)
        check_filter(s, srv, g.pod("pg", g.pgpu(4), namespace="free"), ["a100-pgpu"], {},
                     "namespace free, 4 nvidia.com/gpu")
        # Pods that use no GPU are not held to the quota.
        check_filter(s, srv, g.pod("cpu", {"cpu": "1"}, namespace="team-c"), NODES, {}, "team-c, a CPU pod")


@suite.test
def test_inspect_quota(s):
    with g.Server(s, g.write_state(s, cluster_objects())) as srv:
        _view, raw = quota_view(srv)
        s.check_eq(raw, {"source": "kube-system/gpu-quota", "error": "", "namespaces": [
            {"namespace": "team-a", "pools": ["public"],
             "models": [{"model": "A100", "quotaGpus": 1, "usedCores": 80}]},
            {"namespace": "team-b", "pools": ["private", "public"],
             "models": [{"model": "A100", "quotaGpus": 2, "usedCores": 0},
                        {"model": "T4", "quotaGpus": 1, "usedCores": 100}]},
            {"namespace": "team-c", "pools": ["public"], "models": []},
            {"namespace": "team-d", "pools": [], "models": [{"model": "T4", "quotaGpus": 1, "usedCores": 0}]},
        ]}, "/inspect/quota: every entry, its pools, and usage (cores) against quota (GPUs)")
        # /metrics (docs/reference.md): gqa_quota_valid, gqa_quota_gpus and gqa_quota_used_gpus per
        # namespace and model.
        samples, types, _bad = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_quota_valid"), 1.0, "/metrics: gqa_quota_valid 1")
        for ns, model, quota, used in (("team-a", "A100", 1, 0.8), ("team-b", "A100", 2, 0), ("team-b", "T4", 1, 1),
                                       ("team-d", "T4", 1, 0)):
            got = (samples.get(("gqa_quota_gpus", frozenset({("namespace", ns), ("model", model)}))),
                   samples.get(("gqa_quota_used_gpus", frozenset({("namespace", ns), ("model", model)}))))
            s.check_eq(got, (float(quota), float(used)), "/metrics: %s's %s quota and usage in GPUs" % (ns, model))
        # The filter's decisions count at once (assumed pods included).
        res = srv.filter(g.pod("x", g.vcuda(20, 8), namespace="team-a"), NODES)
        s.check_eq(len(res.get("NodeNames") or []), 1, "a 20-core team-a pod is placed", res)
        samples, _types, _bad = g.parse_metrics(srv.metrics().text)
        s.check_eq(samples.get(("gqa_quota_used_gpus", frozenset({("namespace", "team-a"), ("model", "A100")}))),
                   1.0, "/metrics: team-a's A100 usage includes the assumed pod")

    # No quota ConfigMap: nothing restricted, nothing listed.
    objs = [o for o in cluster_objects() if o["kind"] != "ConfigMap"]
    with g.Server(s, g.write_state(s, objs), ["--placement", "bind"]) as srv:
        s.check_eq(srv.get_json("/inspect/quota")["namespaces"], [], "no quota ConfigMap: no entries")
        check_filter(s, srv, g.pod("share", g.vcuda(30, 8), namespace="team-a"), VCUDA_NODES, {},
                     "no quota ConfigMap: team-a is unrestricted")

    # A malformed quota ConfigMap: /inspect/quota says why.
    for text, err in (('{"team-a": {"pool": "public", "quota": {"A100": 1}}}',
                       'kube-system/gpu-quota: team-a: "pool" must be a list of pool names'),
                      ('{"team-a": {"quota": {"A100": 0.5}}}',
                       "kube-system/gpu-quota: team-a: quota for model A100 must be a whole number of GPUs"),
                      ("team-a: 1", "kube-system/gpu-quota: data.gpu_quota is not a JSON object of namespaces")):
        objs = [o for o in cluster_objects() if o["kind"] != "ConfigMap"] + [quota_cm(None, text=text)]
        with g.Server(s, g.write_state(s, objs)) as srv:
            raw = srv.get_json("/inspect/quota")
            s.check_eq((raw.get("error"), raw.get("namespaces")), (err, []),
                       "/inspect/quota reports a malformed quota: %s" % text, raw)
            samples, _types, _bad = g.parse_metrics(srv.metrics().text)
            s.check_eq(g.metric(samples, "gqa_quota_valid"), 0.0, "/metrics: gqa_quota_valid 0")
            # docs/reference.md: a malformed ConfigMap is ignored and every namespace is unrestricted.
            res = srv.filter(g.pod("share", g.vcuda(30, 8), namespace="team-a"), ["a100-pub-1"])
            s.check_eq(res.get("NodeNames"), ["a100-pub-1"], "a malformed quota restricts nothing", res)


@suite.test
def test_filter_mode_decisions_count(s):
    with g.Server(s, g.write_state(s, cluster_objects())) as srv:
        x = g.pod("x", g.vcuda(20, 8), namespace="team-a")
        res = srv.filter(x, NODES)
        chosen = res.get("NodeNames") or []
        s.require(len(chosen) == 1 and chosen[0] in ("a100-pub-0", "a100-pub-1"),
                  "team-a's 20-core pod is placed on a public A100 node", res)
        view, _ = quota_view(srv)
        s.check_eq(view["team-a"]["A100"], (1, 100), "/inspect/quota counts the filter's decision at once", view)
        # The same pod filtered again keeps its place: its own charge is not held against it.
        res = srv.filter(x, NODES)
        s.check_eq(res.get("NodeNames"), chosen, "a re-filter of the decided pod answers the same node", res)
        # The next pod finds the quota used up.
        want = over("team-a", "1", 1, "A100", "0.20", "0.20")
        res = srv.filter(g.pod("y", g.vcuda(20, 8), namespace="team-a"), NODES)
        s.check_eq(res.get("NodeNames") or [], [], "a second pod filtered right after cannot take the same quota",
                   res)
        for n in ("a100-pub-0", "a100-pub-1"):
            s.check_eq(g.failed_reason(res, n), want, "the second pod's reason on %s" % n)
        view, _ = quota_view(srv)
        s.check_eq(view["team-a"]["A100"], (1, 100), "the refused pod is not counted", view)

    # At the same time: 8 pods race for the last 0.2 GPU; exactly one wins.
    with g.Server(s, g.write_state(s, cluster_objects()), threads=4) as srv:
        results = {}

        def run(i):
            try:
                results[i] = srv.filter(g.pod("race-%d" % i, g.vcuda(20, 8), namespace="team-a"), NODES)
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e
        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        won = [i for i, r in results.items() if isinstance(r, dict) and r.get("NodeNames")]
        s.check_eq(len(results), 8, "every racing filter answered", results)
        s.check_eq(len(won), 1, "exactly one of 8 concurrent pods takes the last 0.2 GPU", results)
        view, _ = quota_view(srv)
        s.check_eq(view["team-a"]["A100"], (1, 100), "usage is the quota, not more", view)

    # An assumption that expires stops counting.
    with g.Server(s, g.write_state(s, cluster_objects()), ["--assume-ttl", "1s"]) as srv:
        res = srv.filter(g.pod("x", g.vcuda(20, 8), namespace="team-a"), NODES)
        s.check(len(res.get("NodeNames") or []) == 1, "placed", res)
        s.check_eq(quota_view(srv)[0]["team-a"]["A100"], (1, 100), "counted while assumed")
        s.check(g.wait_until(lambda: quota_view(srv)[0]["team-a"]["A100"] == (1, 80), timeout=10, interval=0.2),
                "after --assume-ttl the unbound decision no longer counts", quota_view(srv)[1])
        res = srv.filter(g.pod("y", g.vcuda(20, 8), namespace="team-a"), NODES)
        s.check_eq(len(res.get("NodeNames") or []), 1, "so another pod can take that quota", res)


@suite.test
def test_flags(s):
    # The quota ConfigMap and node labels are configurable.
    ml, pl = "example.com/model", "example.com/pool"
    objs = [
        g.node("x-a100", g.vcuda(400, 256), labels=labels("A100", "blue", ml, pl)),
        g.node("x-t4", g.vcuda(400, 256), labels=dict(labels("T4", "blue", ml, pl), **labels("A100", "public"))),
        quota_cm({"team-a": {"pool": ["blue"], "quota": {"A100": 1}}}, name="team-quota", namespace="gpu-system"),
        quota_cm({"team-a": {"pool": ["public"], "quota": {"T4": 1}}}),  # the default one: ignored
    ]
    flags = ["--placement", "bind", "--quota-configmap", "gpu-system/team-quota", "--gpu-model-label", ml,
             "--gpu-pool-label", pl]
    with g.Server(s, g.write_state(s, objs), flags) as srv:
        raw = srv.get_json("/inspect/quota")
        s.check_eq((raw["source"], [e["namespace"] for e in raw["namespaces"]]), ("gpu-system/team-quota", ["team-a"]),
                   "--quota-configmap: /inspect/quota shows that ConfigMap", raw)
        check_filter(s, srv, g.pod("p", g.vcuda(50, 16), namespace="team-a"), ["x-a100"], {
            "x-t4": no_model("team-a", "T4", ["A100"]),
        }, "custom model and pool labels", names=["x-a100", "x-t4"])


# ---------------------------------------------------------------------------
# Live: the quota follows the API server
# ---------------------------------------------------------------------------

def wait_quota(s, srv, pred, what, timeout=10):
    ok = g.wait_until(lambda: pred(quota_view(srv)[0]), timeout=timeout, interval=0.05)
    s.check(ok, what, srv.get("/inspect/quota"))
    return ok


@suite.test
def test_live_quota_changes(s):
    with g.Cluster(s) as c:
        c.add_node(vnode("a100-pub", "A100", "public"))
        c.add_node(vnode("a100-priv", "A100", "private"))
        c.sim.create("configmaps", quota_cm({"team-a": {"pool": ["public"], "quota": {"A100": 1}}}),
                     ns="kube-system")
        # The same name elsewhere is not the quota.
        c.sim.create("configmaps", quota_cm({"team-a": {"quota": {}}}, namespace="default"), ns="default")
        c.create_pod(g.pod("used", g.vcuda(80, 16), namespace="team-a"), node="a100-pub", phase="Running")
        names = ["a100-pub", "a100-priv"]
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            wait_quota(s, srv, lambda v: v.get("team-a", {}).get("A100") == (1, 80),
                       "/inspect/quota shows the bound pod's 80 cores against 1 A100")
            share = g.pod("share", g.vcuda(30, 8), namespace="team-a")
            check_filter(s, srv, share, [], {
                "a100-pub": over("team-a", "0.80", 1, "A100", "0.30", "0.10"),
                "a100-priv": pools_msg("team-a", ["public"], "private"),
            }, "quota 1: over", names=names)

            def update(entries=None, text=None):
                cm = c.sim.get("configmaps", "gpu-quota", "kube-system")
                cm["data"]["gpu_quota"] = text if text is not None else json.dumps(entries)
                c.sim.update("configmaps", "gpu-quota", cm, ns="kube-system")

            update({"team-a": {"pool": ["public"], "quota": {"A100": 2}}})
            wait_quota(s, srv, lambda v: v.get("team-a", {}).get("A100") == (2, 80), "the raised quota arrives")
            check_filter(s, srv, share, ["a100-pub"], {"a100-priv": pools_msg("team-a", ["public"], "private")},
                         "quota raised to 2: fits", names=names)

            update({"team-a": {"pool": ["private"], "quota": {"A100": 2}}})
            wait_quota(s, srv, lambda v: v.get("team-a") == {"A100": (2, 80)} and
                       [e["pools"] for e in srv.get_json("/inspect/quota")["namespaces"]] == [["private"]],
                       "the changed pools arrive")
            check_filter(s, srv, share, ["a100-priv"], {"a100-pub": pools_msg("team-a", ["private"], "public")},
                         "pools changed to private", names=names)

            update({"team-a": {"pool": ["public", "private"], "quota": {"A100": 0}}})
            wait_quota(s, srv, lambda v: v.get("team-a", {}).get("A100") == (0, 80), "the lowered quota arrives")
            want = over("team-a", "0.80", 0, "A100", "0.30", "1.10")
            check_filter(s, srv, share, [], {"a100-pub": want, "a100-priv": want}, "quota lowered to 0", names=names)

            update(text="{broken")
            s.check(g.wait_until(lambda: srv.get_json("/inspect/quota")["error"] ==
                                 "kube-system/gpu-quota: data.gpu_quota is not a JSON object of namespaces",
                                 timeout=10), "a broken update is reported", srv.get("/inspect/quota"))

            c.sim.delete("configmaps", "gpu-quota", ns="kube-system")
            s.check(g.wait_until(lambda: srv.get_json("/inspect/quota") ==
                                 {"source": "", "error": "", "namespaces": []}, timeout=10),
                    "the deleted quota leaves /inspect/quota", srv.get("/inspect/quota"))
            check_filter(s, srv, share, names, {}, "quota deleted: unrestricted", names=names)

            c.sim.create("configmaps", quota_cm({"team-a": {"pool": ["public"], "quota": {"A100": 1}}}),
                         ns="kube-system")
            wait_quota(s, srv, lambda v: v.get("team-a", {}).get("A100") == (1, 80), "a re-created quota arrives")
            check_filter(s, srv, g.pod("small", g.vcuda(20, 8), namespace="team-a"), ["a100-pub"], {},
                         "re-created: 0.2 left", names=names)

            # Usage follows the pod watch.
            c.delete_pod("used", ns="team-a")
            wait_quota(s, srv, lambda v: v["team-a"]["A100"] == (1, 0), "a deleted pod stops counting")
            c.create_pod(g.pod("job", g.vcuda(100, 64), namespace="team-a"), node="a100-pub", phase="Running")
            wait_quota(s, srv, lambda v: v["team-a"]["A100"] == (1, 100), "a pod bound by someone else counts")
            check_filter(s, srv, g.pod("one", g.vcuda(1, 1), namespace="team-a"), [], {
                "a100-pub": over("team-a", "1", 1, "A100", "0.01", "0.01")}, "and the quota is used up", names=names)
            c.sim.set_pod_phase("team-a", "job", "Succeeded")
            wait_quota(s, srv, lambda v: v["team-a"]["A100"] == (1, 0), "a finished pod stops counting")
            check_filter(s, srv, share, ["a100-pub"], {}, "after it finished the quota is free", names=names)


@suite.test
def test_live_filter_mode_decisions_count(s):
    with g.Cluster(s) as c:
        c.add_node(vnode("a100-pub", "A100", "public"))
        c.sim.create("configmaps", quota_cm({"team-a": {"pool": ["public"], "quota": {"A100": 1}}}),
                     ns="kube-system")
        for name in ("p1", "p2"):
            c.create_pod(g.pod(name, g.vcuda(60, 16), namespace="team-a"))
        with g.LiveServer(s, c.kubeconfig()) as srv:
            res = srv.filter(c.get_pod("p1", "team-a"), ["a100-pub"])
            s.check_eq(res.get("NodeNames"), ["a100-pub"], "p1 is placed", res)
            res = srv.filter(c.get_pod("p2", "team-a"), ["a100-pub"])
            s.check_eq(g.failed_reason(res, "a100-pub"), over("team-a", "0.60", 1, "A100", "0.60", "0.20"),
                       "p2, filtered right after, finds p1's 0.6 counted", res)
            s.check_eq(quota_view(srv)[0]["team-a"]["A100"], (1, 60), "/inspect/quota counts p1")
            # After the watch brings p1 back with its annotations, it still counts (once).
            s.check(srv.seen_rv("pods", c.get_pod("p1", "team-a")["metadata"]["resourceVersion"]),
                    "the watch delivers p1 with its decision")
            s.check_eq(quota_view(srv)[0]["team-a"]["A100"], (1, 60), "p1 counts once after the watch")


@suite.test
def test_live_bind_rechecks_quota(s):
    with g.Cluster(s) as c:
        c.add_node(vnode("a100-pub", "A100", "public"))
        c.sim.create("configmaps", quota_cm({"team-a": {"pool": ["public"], "quota": {"A100": 1, "T4": 1}}}),
                     ns="kube-system")
        c.create_pod(g.pod("used", g.vcuda(80, 16), namespace="team-a",
                           annotations={"tencent.com/predicate-gpu-idx-0": "0"}), node="a100-pub", phase="Running")
        for name in ("b1", "b2"):
            c.create_pod(g.pod(name, g.vcuda(20, 8), namespace="team-a"))
        with g.LiveServer(s, c.kubeconfig(), ["--placement", "bind"]) as srv:
            wait_quota(s, srv, lambda v: v.get("team-a", {}).get("A100") == (1, 80), "the bound pod counts")
            # Bind mode: the filter records nothing, so both pods pass it ...
            for name in ("b1", "b2"):
                res = srv.filter(c.get_pod(name, "team-a"), ["a100-pub"])
                s.check_eq(res.get("NodeNames"), ["a100-pub"], "bind mode: %s passes the filter" % name, res)
            # ... and bind, which allocates, takes the last quota once.
            out = {}
            for name in ("b1", "b2"):
                uid = c.get_pod(name, "team-a")["metadata"]["uid"]
                out[name] = srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": "team-a",
                                                              "PodUID": uid, "Node": "a100-pub"})
            s.check_eq(out["b1"].get("Error"), "", "b1 is bound", out)
            s.check_eq(out["b2"].get("Error"), "node a100-pub cannot take pod team-a/b2: " +
                       over("team-a", "1", 1, "A100", "0.20", "0.20"),
                       "b2's bind is refused with the quota reason", out)
            s.check_eq(c.get_pod("b2", "team-a")["spec"].get("nodeName"), None, "b2 is not bound")
            wait_quota(s, srv, lambda v: v["team-a"]["A100"] == (1, 100), "usage: 0.8 + b1's 0.2")

            # The node's model changes: the usage moves with it.
            node = c.sim.get("nodes", "a100-pub")
            node["metadata"]["labels"][MODEL] = "T4"
            c.sim.update("nodes", "a100-pub", node)
            wait_quota(s, srv, lambda v: v["team-a"] == {"A100": (1, 0), "T4": (1, 100)},
                       "relabelled to T4: the usage is counted under T4")
            res = srv.filter(c.get_pod("b2", "team-a"), ["a100-pub"])
            s.check_eq(g.failed_reason(res, "a100-pub"), over("team-a", "1", 1, "T4", "0.20", "0.20"),
                       "and the T4 quota is the one used up", res)


@suite.test
def test_preemption_and_quota(s):
    """Preemption keeps a node only where removing the victims lets the pod in (design.md section 2): for a pod
    held back by its namespace's quota, evicting pods of other namespaces frees no quota."""
    objs = [vnode("a100", "A100", "public", gpus=1), vnode("b100", "A100", "public", gpus=1),
            quota_cm({"team-a": {"pool": ["public"], "quota": {"A100": 1}}}),
            bound("mine", "team-a", "a100", g.vcuda(80, 16)), bound("other", "free", "b100", g.vcuda(90, 16))]
    with g.Server(s, g.write_state(s, objs), ["--placement", "bind"]) as srv:
        p = g.pod("new", g.vcuda(30, 8), namespace="team-a")
        uid = lambda name: "%s-0000-4000-8000-%012d" % (name, 1)  # noqa: E731 - g.pod's uid scheme
        res = srv.post_json("/scheduler/preemption", {"Pod": p, "NodeNameToMetaVictims": {
            "a100": {"Pods": [{"UID": uid("mine")}], "NumPDBViolations": 0},
            "b100": {"Pods": [{"UID": uid("other")}], "NumPDBViolations": 0}}})
        kept = res.get("NodeNameToMetaVictims") or {}
        s.check_eq(kept.get("a100"), {"Pods": [{"UID": uid("mine")}], "NumPDBViolations": 0},
                   "evicting team-a's own pod frees both the GPU and the quota: a100 kept", res)
        # Regression (found in issue 5): preemption ignored the quota, so it offered to evict a
        # pod of namespace free on b100, after which the pod was still over team-a's quota.
        s.check("b100" not in kept, "evicting another namespace's pod frees no quota: b100 dropped", res)


# ---------------------------------------------------------------------------
# Pods that take a CRL default
# ---------------------------------------------------------------------------

def reference_crls():
    out = []
    for key, default in (("tencent.com/vcuda-core", "20"), ("tencent.com/vcuda-memory", "4")):
        kn = key.split("/")[1]
        out.append({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cf-crl-gpu-manager-" + kn, "namespace": "kube-public",
                                 "labels": {"features.alauda.io/type": "CustomResourceLimitation",
                                            "features.alauda.io/group": "gpu-manager",
                                            "features.alauda.io/enabled": "true"}},
                    "data": {"key": key, "dataType": "integer", "defaultValue": default, "group": "gpu-manager",
                             "limits": "optional", "requests": "disabled"}})
    return out


@suite.test
def test_default_memory_pods_count(s):
    """A share without vcuda-memory takes the CRL default and is a GPU pod like any other: it is held to the
    quota in the filter, and once placed it counts toward the namespace's usage."""
    objs = cluster_objects() + reference_crls()
    with g.Server(s, g.write_state(s, objs), ["--placement", "bind"]) as srv:
        check_filter(s, srv, g.pod("share", g.vcuda(30), namespace="team-a"), [], {
            "a100-pub-0": over("team-a", "0.80", 1, "A100", "0.30", "0.10")}, "a default-memory share over quota")
        check_filter(s, srv, g.pod("small", g.vcuda(20), namespace="team-a"), ["a100-pub-0", "a100-pub-1"], {},
                     "a default-memory share within quota")

    # Bound in the cluster (no mutating webhook wrote the default into it).
    objs = cluster_objects() + reference_crls() + [bound("defaulted", "team-b", "a100-priv", g.vcuda(50))]
    with g.Server(s, g.write_state(s, objs), ["--placement", "bind"]) as srv:
        # Regression (found in issue 5): pods the cache holds (state file, watch, bind) were
        # parsed without the CRL defaults, so a bound share relying on the vcuda-memory default was
        # not charged at all: neither quota usage nor GPU occupancy counted it.
        s.check_eq(quota_view(srv)[0]["team-b"]["A100"], (2, 50),
                   "a bound share that relies on the CRL memory default counts toward usage")
        gpu = srv.inspect("a100-priv")["gpus"][0]
        s.check_eq((gpu["coreUsed"], gpu["memoryUsed"]), (50, 4),
                   "and occupies its GPU with the default memory", gpu)


if __name__ == "__main__":
    suite.main()
