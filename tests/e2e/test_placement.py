#!/usr/bin/env python3
"""Placement: what the filter answers and records (design.md sections 3 and 4).

filter mode (default): one node answered, the decision visible in /inspect,
re-filters answer the same node without charging twice, other feasible nodes
fail with "pod assigned to node X"; bind mode: every feasible node, nothing
recorded. Correct answers on the demo state for vcuda shares (GPU-Manager
binpack order), vcuda whole GPUs, MPS and nvidia.com/gpu, with reasons that
name the resource, the GPU and the numbers; vcuda shares without memory;
unknown node names; --gpu-policy spread; --node-policy; device minors."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_placement")
ALL = g.DEMO_ARGS_ORDER


def pods_on(inspect_node):
    return {i: sorted(gp["pods"]) for i, gp in enumerate(inspect_node["gpus"])}


def used(inspect_node):
    return [(gp["coreUsed"], gp["memoryUsed"]) for gp in inspect_node["gpus"]]


@suite.test
def filter_mode_records_decision(s):
    with g.Server(s) as srv:
        before = srv.inspect("gpu-a100-0")
        share = g.demo_pod("vcuda-share")
        res = srv.filter(share, ALL)
        s.check_eq(res["NodeNames"], ["gpu-a100-0"], "filter mode answers exactly one node")
        s.check_eq(res["Error"], "", "no Error")
        after = srv.inspect("gpu-a100-0")
        s.check_eq(after["gpus"][1]["coreUsed"], 50, "decision visible: GPU 1 coreUsed 0 -> 50")
        s.check_eq(after["gpus"][1]["memoryUsed"], 64, "decision visible: GPU 1 memoryUsed 0 -> 64")
        s.check_eq(after["gpus"][1]["pods"], ["default/vcuda-share"], "decision visible: pod listed on GPU 1")
        others = [i for i in range(8) if i != 1]
        s.check_eq([used(after)[i] for i in others], [used(before)[i] for i in others],
                   "no other GPU changed")

        for path in ("/scheduler/filter", "/scheduler/predicates"):
            again = srv.filter(share, ALL, path=path)
            s.check_eq(again["NodeNames"], ["gpu-a100-0"], "re-filter via %s answers the same node" % path)
        again = srv.filter(share, ["gpu-a100-0"])
        s.check_eq(again["NodeNames"], ["gpu-a100-0"], "re-filter with only that node answers it")
        s.check_eq(srv.inspect("gpu-a100-0"), after, "re-filters do not charge twice")
        ex = srv.explain(share)
        s.check_eq(g.explain_node(ex, "gpu-a100-0")["gpus"], {"app": [1]},
                   "explain of the assumed pod does not collide with its own charge")

        # GPU-Manager binpack: the next share goes to the GPU with the fewest free cores that fits.
        second = g.pod("share-2", {"tencent.com/vcuda-core": 50, "tencent.com/vcuda-memory": 64})
        res = srv.filter(second, ALL)
        s.check_eq(res["NodeNames"], ["gpu-a100-0"], "second share fits gpu-a100-0")
        gp1 = srv.inspect("gpu-a100-0")["gpus"][1]
        s.check_eq((gp1["coreUsed"], gp1["memoryUsed"]), (100, 128), "second share packed onto GPU 1 (binpack)")
        s.check_eq(gp1["pods"], ["default/share-2", "default/vcuda-share"], "both shares listed on GPU 1")
        third = g.pod("share-3", {"tencent.com/vcuda-core": 50, "tencent.com/vcuda-memory": 64})
        srv.filter(third, ALL)
        a = srv.inspect("gpu-a100-0")
        s.check_eq(a["gpus"][4]["pods"], ["default/share-3"],
                   "third share: GPU 0 (20 free) and GPU 1 (full) do not fit, lowest idle minor 4 does")
        small = g.pod("share-4", {"tencent.com/vcuda-core": 20, "tencent.com/vcuda-memory": 10})
        srv.filter(small, ALL)
        a = srv.inspect("gpu-a100-0")
        s.check_eq((a["gpus"][0]["coreUsed"], a["gpus"][0]["memoryUsed"]), (100, 150),
                   "a 20-core share fills GPU 0's last 20 cores (fewest free cores first)")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_decisions_total"), 4.0, "four decisions recorded, re-filters not counted")
        s.check_eq(g.metric(samples, "gqa_assumed_pods"), 4.0, "four pods assumed")

        # Whole GPUs after the shares: the pod must not land on a GPU that holds a share.
        whole = g.pod("whole-2", {"tencent.com/vcuda-core": 200, "tencent.com/vcuda-memory": 640})
        res = srv.filter(whole, ALL)
        s.check_eq(res["NodeNames"], ["gpu-a100-0"], "two whole vcuda GPUs still fit")
        a = srv.inspect("gpu-a100-0")
        taken = [i for i, gp in enumerate(a["gpus"]) if "default/whole-2" in gp["pods"]]
        s.check(len(taken) == 2 and set(taken) <= {5, 6, 7}, "whole GPUs only from the idle 5, 6, 7", taken)
        s.check(all(gp["coreUsed"] <= 100 and gp["memoryUsed"] <= gp["memoryTotal"] for gp in a["gpus"]),
                "no GPU overcommitted", used(a))
        # 5, 6, 7 minus two = one idle GPU left, and legacy-1's 20 unattributed cores hold it back.
        one_more = g.pod("whole-1", {"tencent.com/vcuda-core": 100, "tencent.com/vcuda-memory": 320})
        res = srv.filter(one_more, ALL)
        s.check_eq(res["NodeNames"], [], "the last idle GPU is held for unattributed usage")
        reason = g.failed_reason(res, "gpu-a100-0") or ""
        s.check("held" in reason and "20 cores" in reason, "the reason says the GPU is held for 20 cores", reason)


@suite.test
def assumption_expires(s):
    import time
    with g.Server(s, flags=["--assume-ttl", "1s"]) as srv:
        first = g.pod("big-1", g.vcuda(400, 1280))
        second = g.pod("big-2", g.vcuda(400, 1280))
        t0 = time.monotonic()
        res = srv.filter(first, ALL)
        s.check_eq(res["NodeNames"], ["gpu-a100-0"], "the first 4-GPU pod is placed")
        res = srv.filter(second, ALL)
        s.check_eq(res["NodeNames"], [], "the second does not fit while the first is assumed")
        again = srv.filter(first, ALL)
        within = time.monotonic() - t0 < 0.9
        if within:
            s.check_eq(again["NodeNames"], ["gpu-a100-0"], "a re-filter inside the TTL answers the same node")
        held = [i for i, gp in enumerate(srv.inspect("gpu-a100-0")["gpus"]) if "default/big-1" in gp["pods"]]
        s.check_eq(len(held), 4, "big-1 holds 4 GPUs while assumed")
        def expired():
            return all("default/big-1" not in gp["pods"] for gp in srv.inspect("gpu-a100-0")["gpus"])
        s.check(g.wait_until(expired, 10), "after the TTL /inspect no longer shows the expired assumption",
                srv.inspect("gpu-a100-0")["gpus"])
        s.check(time.monotonic() - t0 >= 1.0, "and not before the TTL of 1 s")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_assumed_pods"), 0.0, "after the TTL gqa_assumed_pods is 0")
        res = srv.filter(second, ALL)
        s.check_eq(res["NodeNames"], ["gpu-a100-0"], "the expired GPUs are free for the second pod")
        res = srv.filter(first, ALL)
        s.check_eq(res["NodeNames"], [], "the first pod, expired, is decided afresh (and no longer fits)")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_decisions_total"), 2.0, "two decisions in all")


def multi_state(s):
    """Three GPU-Manager nodes of 4 GPUs (a-1 the busiest) and a CPU node."""
    topo = g.topology(4, memory_mib=16384)
    res = {"tencent.com/vcuda-core": 400, "tencent.com/vcuda-memory": 256}
    objs = [g.node("a-0", res, topo), g.node("a-1", res, topo), g.node("a-2", res, topo),
            g.node("c-0", {})]
    objs.append(g.pod("busy", g.vcuda(100, 64), namespace="ns", node="a-1", phase="Running",
                      annotations={"tencent.com/predicate-gpu-idx-0": "3", "tencent.com/predicate-node": "a-1",
                                   "tencent.com/gpu-assigned": "true",
                                   "tencent.com/predicate-time": "1763700000000000000"}))
    return g.write_state(s, objs)


@suite.test
def pod_assigned_to_node_x(s):
    state = multi_state(s)
    names = ["a-0", "a-1", "a-2", "c-0"]
    with g.Server(s, state) as srv:
        pod = g.pod("p", g.vcuda(30, 16))
        res = srv.filter(pod, names)
        s.check_eq(res["NodeNames"], ["a-1"], "binpack node policy picks the busiest node a-1")
        for n in ("a-0", "a-2"):
            s.check_eq((res["FailedNodes"] or {}).get(n), "pod assigned to node a-1",
                       "feasible %s fails with \"pod assigned to node a-1\"" % n)
        s.check("assigned" not in (g.failed_reason(res, "c-0") or "assigned"),
                "the infeasible node keeps its own reason", res)
        s.check_in("c-0", res["FailedAndUnresolvableNodes"] or {}, "c-0 is unresolvable (no GPUs)")
        again = srv.filter(pod, ["a-2", "a-0", "a-1"])
        s.check_eq(again["NodeNames"], ["a-1"], "re-filter answers a-1 whatever the order")
        s.check_eq((again["FailedNodes"] or {}).get("a-0"), "pod assigned to node a-1",
                   "re-filter fails the others the same way")
        a1 = srv.inspect("a-1")
        s.check_eq(sum(gp["coreUsed"] for gp in a1["gpus"]), 130, "a-1 charged once: 100 busy + 30")

    with g.Server(s, state, ["--node-policy", "spread"]) as srv:
        res = srv.filter(g.pod("p", g.vcuda(30, 16)), names)
        s.check_eq(res["NodeNames"], ["a-0"], "spread node policy picks an idle node (a-0, by name)")
        s.check_eq((res["FailedNodes"] or {}).get("a-1"), "pod assigned to node a-0", "and fails a-1 for it")


@suite.test
def bind_mode_records_nothing(s):
    state = multi_state(s)
    names = ["a-0", "a-1", "a-2", "c-0"]
    with g.Server(s, state, ["--placement", "bind"]) as srv:
        before = srv.inspect()
        pod = g.pod("p", g.vcuda(30, 16))
        for _ in range(2):
            res = srv.filter(pod, names)
            s.check_eq(res["NodeNames"], ["a-0", "a-1", "a-2"], "bind mode answers every feasible node")
            s.check_eq(list(res["FailedNodes"] or {}), [], "no feasible node is failed")
            s.check_in("c-0", res["FailedAndUnresolvableNodes"] or {}, "c-0 failed with its reason")
        whole = g.pod("w", g.vcuda(400, 256))
        res = srv.filter(whole, names)
        s.check_eq(res["NodeNames"], ["a-0", "a-2"], "bind mode: four whole GPUs fit only the idle nodes")
        s.check_in("3 are completely free", (res["FailedNodes"] or {}).get("a-1", ""),
                   "a-1's reason counts its free GPUs")
        s.check_eq(srv.inspect(), before, "bind mode records nothing")
        samples, _, _ = g.parse_metrics(srv.metrics().text)
        s.check_eq(g.metric(samples, "gqa_decisions_total"), 0.0, "no decisions in bind mode")
        s.check_eq(g.metric(samples, "gqa_assumed_pods"), 0.0, "no assumed pods in bind mode")
        hp = srv.prioritize(pod, names)
        sc = g.scores_of(hp, names)
        s.check(sc is not None and sc["a-1"] > sc["a-0"] and sc["a-0"] == sc["a-2"] and sc["c-0"] == 0,
                "prioritize: binpack scores the busiest node highest, c-0 zero", hp)
        s.check("c-0" not in [h["Host"] for h in hp], "c-0, at the lowest score, is left out of the answer", hp)


@suite.test
def demo_answers(s):
    """Every resource family on the demo state, in bind mode (nothing recorded)."""
    with g.Server(s, flags=["--placement", "bind"]) as srv:
        def fit(limits, node, want_gpus=None, name="q", containers=None):
            p = g.pod(name, containers or [("c", limits)])
            res = srv.filter(p, ALL)
            s.check_eq(res["NodeNames"], [node], "%s fits only %s" % (limits, node))
            ex = srv.explain(p)
            best = ex["nodes"][0]
            s.check_eq((best["node"], best["fits"]), (node, True), "explain: %s best on %s" % (limits, node))
            if want_gpus is not None:
                s.check_eq(best["gpus"].get("c"), want_gpus, "%s takes GPUs %s on %s" % (limits, want_gpus, node))
            return res, best

        # vcuda shares: GPU-Manager order (fewest free cores, then fewest free memory, then minor).
        fit(g.vcuda(50, 64), "gpu-a100-0", [1])
        fit(g.vcuda(20, 10), "gpu-a100-0", [0])
        fit(g.vcuda(20, 180), "gpu-a100-0", [0])
        fit(g.vcuda(20, 181), "gpu-a100-0", [1])   # GPU 0 has only 180 blocks free
        fit(g.vcuda(21, 10), "gpu-a100-0", [1])    # GPU 0 has only 20 cores free
        fit(g.vcuda(99, 320), "gpu-a100-0", [1])
        # vcuda whole GPUs: idle ones only (0 is shared, 2 and 3 are trainer-1's).
        _, best = fit(g.vcuda(400, 1280), "gpu-a100-0")
        got = best["gpus"].get("c", [])
        s.check(len(got) == 4 and len(set(got)) == 4 and set(got) <= {1, 4, 5, 6, 7},
                "vcuda 400: four distinct idle GPUs", got)
        _, best = fit(g.vcuda(100), "gpu-a100-0")
        s.check(len(best["gpus"].get("c", [])) == 1 and best["gpus"]["c"][0] in (1, 4, 5, 6, 7),
                "vcuda 100 without memory (whole GPU): one idle GPU", best)
        res = srv.filter(g.pod("q", g.vcuda(500, 1600)), ALL)
        r = (res["FailedNodes"] or {}).get("gpu-a100-0", "")
        for part in ("5 whole GPUs", "tencent.com/vcuda-core 500", "5 are completely free", "1,4,5,6,7", "held",
                     "20 cores"):
            s.check_in(part, r, "vcuda 500 reason mentions %r" % part)
        res = srv.filter(g.pod("q", g.vcuda(900, 2880)), ALL)
        s.check_in("gpu-a100-0", res["FailedAndUnresolvableNodes"] or {},
                   "9 whole GPUs on an 8-GPU node is unresolvable")

        # MPS.
        fit(g.mps(25, 4), "gpu-t4-0", [1])
        fit(g.mps(50, 7), "gpu-t4-0", [1])
        fit(g.mps(50, 8), "gpu-t4-0", [0])         # GPU 1 has 7 of 15 left
        fit(g.mps(60, 4), "gpu-t4-0", [0])         # GPU 1 has 50 cores left
        res = srv.filter(g.pod("q", g.mps(25, 16)), ALL)
        s.check_eq(res["NodeNames"], [], "mps-memory 16 > 15 per T4 fits nowhere")
        r = (res["FailedNodes"] or {}).get("gpu-t4-0", "")
        for part in ("nvidia.com/mps-memory", "16", "15", "GPU"):
            s.check_in(part, r, "MPS memory reason mentions %r" % part)
        res = srv.filter(g.pod("q", g.mps(101, 1)), ALL)
        s.check_eq(res["NodeNames"], [], "mps-core above 100 fits nowhere")
        s.check(all("100" in (g.failed_reason(res, n) or "") for n in ALL), "the reason names the 1..100 range", res)

        # nvidia.com/gpu.
        _, best = fit(g.pgpu(4), "gpu-v100-0")
        got = best["gpus"].get("c", [])
        s.check(len(set(got)) == 4 and set(got) <= {1, 2, 4, 5, 6, 7}, "nvidia.com/gpu 4: idle GPUs only", got)
        _, best = fit(g.pgpu(6), "gpu-v100-0")
        s.check_eq(sorted(best["gpus"].get("c", [])), [1, 2, 4, 5, 6, 7], "nvidia.com/gpu 6 takes every idle GPU")
        res = srv.filter(g.pod("q", g.pgpu(7)), ALL)
        r = (res["FailedNodes"] or {}).get("gpu-v100-0", "")
        for part in ("7 whole GPUs", "nvidia.com/gpu 7", "6 are completely free", "1,2,4,5,6,7"):
            s.check_in(part, r, "nvidia.com/gpu 7 reason mentions %r" % part)
        res = srv.filter(g.pod("q", g.pgpu(9)), ALL)
        s.check_in("gpu-v100-0", res["FailedAndUnresolvableNodes"] or {}, "nvidia.com/gpu 9 is unresolvable")
        res = srv.filter(g.pod("q", g.pgpu("0.5")), ALL)
        s.check_eq(res["NodeNames"], [], "a fractional nvidia.com/gpu fits nowhere")
        s.check(all(g.failed_reason(res, n) for n in ALL), "and every node says why", res)

        # Two GPU families in one pod, each on its own node kind: fits nowhere.
        res = srv.filter(g.pod("q", containers=[("a", g.pgpu(1)), ("b", g.mps(10, 1))]), ALL)
        s.check_eq(res["NodeNames"], [], "nvidia.com/gpu + MPS containers fit no single node")

        # A pod without GPU requests passes every node it is offered.
        res = srv.filter(g.pod("cpu-only", {"cpu": "1"}), ALL)
        s.check_eq(res["NodeNames"], ALL, "a non-GPU pod passes every node")


@suite.test
def vcuda_share_without_memory(s):
    with g.Server(s) as srv:
        before = srv.inspect()
        for pod in (g.demo_pod("vcuda-no-memory"), g.pod("q", containers=[("x", g.vcuda(30))])):
            res = srv.filter(pod, ALL)
            s.check_eq(res["NodeNames"], [], "vcuda share without memory fits nowhere")
            un = res["FailedAndUnresolvableNodes"] or {}
            s.check_eq(sorted(un), sorted(ALL), "every node is FailedAndUnresolvable")
            s.check_eq(res["FailedNodes"] or {}, {}, "none merely failed")
            cname = pod["spec"]["containers"][0]["name"]
            for n, r in un.items():
                s.check("tencent.com/vcuda-memory" in r and "\"%s\"" % cname in r and "30" in r,
                        "%s: reason names the container, the share and vcuda-memory" % n, r)
        s.check_eq(srv.inspect(), before, "nothing recorded for an unresolvable pod")


@suite.test
def unknown_node_names(s):
    with g.Server(s) as srv:
        pod = g.demo_pod("gpu-4")
        res = srv.filter(pod, ["ghost-0", "gpu-v100-0", "ghost-1"])
        s.check_eq(res["NodeNames"], ["gpu-v100-0"], "the known node is answered")
        for n in ("ghost-0", "ghost-1"):
            s.check_in("not in the extender's cache", g.failed_reason(res, n), "%s: not in the extender's cache" % n)
        res = srv.filter(g.pod("q2", g.pgpu(1)), ["ghost-0"])
        s.check_eq(res["NodeNames"], [], "only unknown nodes: nothing fits")
        s.check_in("not in the extender's cache", g.failed_reason(res, "ghost-0"), "unknown-only reason")
        s.check_eq(srv.get("/inspect/nodes/ghost-0").status, 404, "an unknown node is not invented in the cache")
        hp = srv.prioritize(g.pod("q3", g.pgpu(1)), ["ghost-0", "gpu-v100-0"])
        s.check_eq([(h["Host"], h["Score"] > 0) for h in hp], [("gpu-v100-0", True)],
                   "prioritize scores an unknown node 0 (the lowest: left out)")


@suite.test
def gpu_policy_spread_with_vcuda_shares_refused_at_start(s):
    """GPU-Manager would fail every vcuda share placed in spread order: the
    combination is refused when the process starts, not at each request."""
    for flags in (["--gpu-policy", "spread"], ["--gpu-policy", "spread", "--vcuda-shares", "place"]):
        r = g.run_binary(s, ["--state-file", s.demo_state, "--listen-http", "127.0.0.1:0"] + flags, timeout=30)
        s.check_eq(r.code, 2, "%s: exit 2 at start" % " ".join(flags), r)
        s.check_in("--gpu-policy spread cannot place tencent.com/vcuda-core shares", r.err, "the message says why")
        s.check_in("--gpu-policy binpack, or add --vcuda-shares refuse", r.err, "and names the fix")


@suite.test
def gpu_policy_spread(s):
    with g.Server(s, flags=["--gpu-policy", "spread", "--vcuda-shares", "refuse"]) as srv:
        before = srv.inspect()
        res = srv.filter(g.demo_pod("vcuda-share"), ALL)
        s.check(isinstance(res.get("Error"), str) and "--vcuda-shares refuse" in res["Error"] and
                "vcuda" in res["Error"], "a vcuda share answers an Error naming --vcuda-shares refuse", res)
        s.check(not res.get("NodeNames"), "no node is answered with the Error", res)
        ex = srv.explain(g.demo_pod("vcuda-share"))
        s.check_in("--vcuda-shares refuse", ex.get("error"), "explain reports the same error")
        s.check_eq(srv.inspect(), before, "nothing recorded")
        # Spread is fine for MPS: the freest GPU instead of the fullest.
        res = srv.filter(g.demo_pod("mps-share"), ALL)
        s.check_eq(res["NodeNames"], ["gpu-t4-0"], "spread MPS share fits gpu-t4-0")
        t4 = srv.inspect("gpu-t4-0")
        s.check_eq(t4["gpus"][0]["pods"], ["default/mps-share"], "spread puts the MPS share on idle GPU 0, not GPU 1")
        # vcuda whole GPUs are not shares: no error.
        res = srv.filter(g.demo_pod("vcuda-whole-4"), ALL)
        s.check_eq((res["Error"], res["NodeNames"]), ("", ["gpu-a100-0"]), "spread allows vcuda whole GPUs")


def minors_state(s):
    """One GPU-Manager node whose device minors run backwards (index i = minor 3-i),
    with shares on minors 1 and 0 that leave both with 70 free cores."""
    topo = g.topology(4, memory_mib=16384, minors=[3, 2, 1, 0])   # 64 blocks per GPU
    objs = [g.node("m-0", {"tencent.com/vcuda-core": 400, "tencent.com/vcuda-memory": 256}, topo)]
    for name, minor, mem in (("p-m1", 1, 10), ("p-m0", 0, 40)):
        objs.append(g.pod(name, g.vcuda(30, mem), namespace="ns", node="m-0", phase="Running",
                          annotations={"tencent.com/predicate-gpu-idx-0": str(minor),
                                       "tencent.com/predicate-node": "m-0", "tencent.com/gpu-assigned": "true",
                                       "tencent.com/predicate-time": "1763700000000000000"}))
    return g.write_state(s, objs)


@suite.test
def gpu_manager_order_with_minors(s):
    state = minors_state(s)
    with g.Server(s, state) as srv:
        ins = srv.inspect("m-0")
        s.check_eq([gp.get("minor") for gp in ins["gpus"]], [3, 2, 1, 0], "minors as the topology says")
        s.check_eq(pods_on(ins), {0: [], 1: [], 2: ["ns/p-m1"], 3: ["ns/p-m0"]},
                   "index annotations are device minors")
        s.check_eq([gp["memoryTotal"] for gp in ins["gpus"]], [64] * 4, "per-GPU memory from memoryMiB (64 blocks)")

        def explain_gpus(limits):
            return g.explain_node(srv.explain(g.pod("q", {**limits})), "m-0")["gpus"].get("main")

        s.check_eq(explain_gpus(g.vcuda(20, 10)), [0],
                   "equal free cores: the GPU with fewer free memory blocks (minor 0: 24 < 54)")
        s.check_eq(explain_gpus(g.vcuda(20, 30)), [1], "minor 0 lacks memory: minor 1")
        s.check_eq(explain_gpus(g.vcuda(80, 10)), [2], "idle GPUs tie: the lowest minor (2), not the lowest index")
        res = srv.filter(g.pod("d", g.vcuda(80, 10)), ["m-0"])
        s.check_eq(res["NodeNames"], ["m-0"], "filter fits m-0")
        ins = srv.inspect("m-0")
        s.check_eq(ins["gpus"][1]["pods"], ["default/d"], "recorded on minor 2 (index 1)")
        s.check_eq(ins["gpus"][1]["coreUsed"], 80, "minor 2 coreUsed 80")
        res = srv.filter(g.pod("e", g.vcuda(71, 10)), ["m-0"])
        s.check_eq(res["NodeNames"], ["m-0"], "71 cores still fit the idle minor 3")
        res = srv.filter(g.pod("f", g.vcuda(71, 10)), ["m-0"])
        r = (res["FailedNodes"] or {}).get("m-0", "")
        s.check_eq(res["NodeNames"], [], "no GPU has 71 cores left")
        for part in ("71", "tencent.com/vcuda-core", "GPU", "70"):
            s.check_in(part, r, "the misfit reason mentions %r" % part)
        s.check_in("/dev/nvidia", r, "a GPU whose minor differs from its index is named by its device too")


if __name__ == "__main__":
    suite.main()
