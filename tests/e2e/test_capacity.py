#!/usr/bin/env python3
"""Capacity, fragmentation and pending-by-reason figures (/inspect/capacity and
/metrics), the node filters of /inspect/nodes, and the grouped explain answer
(summary, nearMiss), on the demo state and on small states built here."""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as e2e  # noqa: E402

suite = e2e.Suite("capacity")


@suite.test
def capacity_of_the_demo_state(s):
    with e2e.Server(s) as srv:
        cap = srv.get_json("/inspect/capacity")
        groups = {(g["model"], g["pool"]): g for g in cap["groups"]}
        s.check_eq(sorted(groups), [("A100", "public"), ("T4", "public"), ("V100", "training")], "groups")
        a100 = groups[("A100", "public")]
        s.check_eq(a100["gpus"], {"total": 8, "idle": 5, "partial": 1, "full": 2}, "A100 GPUs by use")
        s.check_eq(a100["freeCores"], {"idle": 500, "partial": 20}, "free cores on idle and partly used GPUs")
        s.check_eq(a100["fragmentation"], round(20 / 520, 4), "fragmentation = partial free / all free")
        s.check_eq(a100["resources"]["tencent.com/vcuda-core"], {"allocatable": 800, "allocated": 300, "stranded": 0},
                   "vcuda-core: 280 on GPUs + 20 unattributed")
        s.check_eq(a100["resources"]["tencent.com/vcuda-memory"]["allocated"], 800, "vcuda-memory allocated")
        s.check_eq(cap["total"]["gpus"]["total"], 20, "20 GPUs in all")
        m = e2e.checked_samples(s, srv)
        s.check_eq(e2e.metric(m, "gqa_gpus", state="partial", model="A100", pool="public"), 1.0, "gqa_gpus partial")
        s.check_eq(e2e.metric(m, "gqa_resource_allocated", resource="nvidia.com/gpu", model="V100", pool="training"),
                   2.0, "whole GPUs allocated")
        s.check(not [k for k in m if k[0].startswith("gqa_node_")], "no per-node series without --metrics-per-node")
    with e2e.Server(s, flags=["--metrics-per-node"]) as srv:
        m = e2e.checked_samples(s, srv)
        s.check_eq(e2e.metric(m, "gqa_node_gpus", node="gpu-a100-0", state="full"), 2.0, "per-node series with the flag")


@suite.test
def stranded_capacity(s):
    # GPU 0: all memory taken by a 30-core share -> 70 cores stranded; GPU 1: all cores by
    # shares using half the memory -> 8 memory blocks stranded.
    topo = e2e.topology(2, memory_mib=4096)  # 16 blocks of 256 MiB per GPU
    n = e2e.node("n1", e2e.vcuda(200, 32), topo=topo, labels={"tkestack.io/gpu-model": "X"})

    def placed(name, gpu, cores, mem):
        ann = {"tencent.com/predicate-gpu-idx-0": str(gpu), "tencent.com/predicate-node": "n1",
               "tencent.com/gpu-assigned": "true", "tencent.com/predicate-time": "1763700000000000000"}
        return e2e.pod(name, e2e.vcuda(cores, mem), node="n1", annotations=ann, phase="Running")

    state = e2e.write_state(s, [n, placed("a", 0, 30, 16), placed("b", 1, 60, 4), placed("c", 1, 40, 4)])
    with e2e.Server(s, state) as srv:
        res = srv.get_json("/inspect/capacity")["groups"][0]["resources"]
        s.check_eq(res["tencent.com/vcuda-core"]["stranded"], 70, "free cores on a GPU without free memory")
        s.check_eq(res["tencent.com/vcuda-memory"]["stranded"], 8, "free memory on a GPU without free cores")


@suite.test
def unschedulable_pods_by_reason(s):
    with e2e.Server(s) as srv:
        big = e2e.pod("big", e2e.vcuda(600, 1920), namespace="team-x")
        ans = srv.filter(big, e2e.DEMO_ARGS_ORDER)
        s.check_eq(ans["NodeNames"], [], "nothing fits six whole A100s")
        m = e2e.checked_samples(s, srv)
        s.check_eq(e2e.metric(m, "gqa_filter_unschedulable_total", reason="whole_gpus"), 1.0,
                   "counted under the class of the nodes that could take it, not of the CPU node")
        s.check_eq(e2e.metric(m, "gqa_pending_pods", reason="whole_gpus"), 1.0, "one pod pending for whole GPUs")
        srv.filter(big, e2e.DEMO_ARGS_ORDER)
        s.check_eq(e2e.metric(e2e.checked_samples(s, srv), "gqa_pending_pods", reason="whole_gpus"), 1.0, "a retry counts once")
        # the same pod, now small enough: it fits and leaves the gauge
        small = e2e.pod("big", e2e.vcuda(10, 8), namespace="team-x")
        s.check(srv.filter(small, e2e.DEMO_ARGS_ORDER)["NodeNames"], "fits")
        m = e2e.checked_samples(s, srv)
        s.check_eq(e2e.metric(m, "gqa_pending_pods", reason="whole_gpus"), 0.0, "no longer pending")
        s.check_eq(e2e.metric(m, "gqa_filter_unschedulable_total", reason="whole_gpus"), 2.0, "the counter stays")
        bad = e2e.pod("nomem", e2e.vcuda(30), namespace="team-x")
        srv.filter(bad, e2e.DEMO_ARGS_ORDER)
        s.check_eq(e2e.metric(e2e.checked_samples(s, srv), "gqa_pending_pods", reason="pod_invalid"), 1.0, "an invalid pod")


@suite.test
def node_filters(s):
    with e2e.Server(s) as srv:
        names = lambda q: [n["node"] for n in srv.get_json("/inspect/nodes" + q)]  # noqa: E731
        s.check_eq(names("?labelSelector=tkestack.io/gpu-pool%3Dpublic"), ["gpu-a100-0", "gpu-t4-0"], "=")
        s.check_eq(names("?labelSelector=tkestack.io/gpu-pool%20notin%20(public)"), ["cpu-0", "gpu-v100-0"],
                   "notin matches a node without the label")
        s.check_eq(names("?labelSelector=!tkestack.io/gpu-model"), ["cpu-0"], "!key")
        s.check_eq(names("?model=V100"), ["gpu-v100-0"], "model")
        s.check_eq(names("?labelSelector="), e2e.DEMO_NODES, "empty selector: everything")
        r = srv.get("/inspect/nodes?labelSelector=a%20b")
        s.check(r.status == 400 and "position" in r.json()["error"], "a bad selector is a 400 naming the position", r)
        lean = srv.get_json("/inspect/nodes?topology=false")
        s.check(all("topology" not in n for n in lean), "topology=false leaves it out")
        s.check_eq({n["node"]: n["model"] for n in lean}["gpu-a100-0"], "A100", "model field")
        s.check_eq({n["node"]: n["pool"] for n in lean}["gpu-v100-0"], "training", "pool field")
        s.check("topology" in srv.get_json("/inspect/nodes/gpu-a100-0"), "one node keeps its topology")


@suite.test
def explain_summary_and_near_miss(s):
    with e2e.Server(s) as srv:
        ans = srv.explain(e2e.demo_pod("vcuda-share"))
        s.check_eq(ans["feasible"], 1, "feasible count")
        s.check_eq([(g["reason"], g["count"], g["message"]) for g in ans["summary"]],
                   [("no_capacity", 2, "no tencent.com/vcuda-core capacity"), ("no_gpu", 1, "no GPUs")],
                   "failed nodes grouped, largest group first")
        s.check_eq(ans["nearMiss"], None, "no near miss when it fits")
        share = e2e.pod("wide-share", e2e.vcuda(90, 64))
        ans = srv.explain(share)
        s.check_eq(ans["feasible"], 1, "GPU 1 of the A100 is idle")
        # six shares of 90 cores: the A100 has five GPUs with 90 free, so the sixth does not fit
        ans = srv.explain(e2e.pod("six-shares", [("a", e2e.vcuda(90, 64)), ("b", e2e.vcuda(90, 64)),
                                               ("c", e2e.vcuda(90, 64)), ("d", e2e.vcuda(90, 64)),
                                               ("e", e2e.vcuda(90, 64)), ("f", e2e.vcuda(90, 64))]))
        near = ans["nearMiss"]
        s.check(near is not None and near["node"] == "gpu-a100-0" and near["reason"] == "gpu_cores",
                "the A100 is the near miss for the sixth share", ans)
        if near:
            s.check_in("or ask for at most", near["hint"], "the hint says what to ask for")
        # YAML bodies, as the /ui form sends them
        with open(s.path("examples", "pods", "vcuda-share.yaml"), "rb") as f:
            r = srv.post("/inspect/explain", f.read(), headers={"Content-Type": "application/yaml"})
        s.check(r.status == 200 and r.json()["pod"] == "default/vcuda-share", "explain takes YAML", r)
        r = srv.post("/inspect/explain", b"- just\n- a list\n")
        s.check_eq(r.status, 400, "a YAML list is not a Pod")


@suite.test
def label_values_are_escaped(s):
    topo = e2e.topology(1, model='Odd "GPU"\\ x')
    state = e2e.write_state(s, [e2e.node("n1", e2e.vcuda(100, 16), topo=topo)])
    with e2e.Server(s, state) as srv:
        text = srv.metrics().text
        s.check_in('model="Odd \\"GPU\\"\\\\ x"', text, "quotes and backslashes escaped")
        e2e.checked_samples(s, srv)


@suite.test
def absurd_capacity_does_not_poison_totals(s):
    # issue 22 item 8: INT64_MAX GPUs on one node and 2 on another summed past
    # INT64_MAX (negative gqa_resource_allocatable; UBSan aborted the scrape).
    # Per-node amounts are capped at 2^40 (GPU_AMOUNT_MAX, docs/behaviour.md).
    big = e2e.node("huge", e2e.pgpu(9223372036854775807), labels={"tkestack.io/gpu-model": "X"})
    small = e2e.node("small", e2e.pgpu(2), labels={"tkestack.io/gpu-model": "X"})
    state = e2e.write_state(s, [big, small])
    with e2e.Server(s, state, flags=["--metrics-per-node"]) as srv:
        m = e2e.checked_samples(s, srv)
        total = e2e.metric(m, "gqa_resource_allocatable", resource="nvidia.com/gpu", model="X", pool="none")
        s.check_eq(total, float((1 << 40) + 2), "the absurd node counts 2^40, the sum stays positive")
        s.check_eq(e2e.metric(m, "gqa_node_resource_allocatable", node="huge", resource="nvidia.com/gpu"),
                   float(1 << 40), "per-node value capped")
        cap = srv.get_json("/inspect/capacity")
        got = cap["total"]["resources"]["nvidia.com/gpu"]["allocatable"]
        s.check_eq(got, (1 << 40) + 2, "the JSON total too")
        s.check(srv.get("/livez").status == 200, "still alive after the scrapes")


if __name__ == "__main__":
    suite.main()
