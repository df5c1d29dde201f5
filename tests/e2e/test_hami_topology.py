#!/usr/bin/env python3
"""HAMi's topology-aware policy end to end (docs/hami.md, hami.io/node-nvidia-score).

The real binary against the API simulator, in bind placement, playing
kube-scheduler (filter, then bind) on HAMi nodes of four GPUs whose pair
scores (as HAMi's device plugin writes them with ENABLE_TOPOLOGY_SCORE)
link GPUs 0 and 2 best and GPU 1 worst:
  - a 2-vGPU pod with hami.io/gpu-scheduler-policy: topology-aware gets
    the best-scored pair (GPUs 0 and 2); a 1-vGPU one the worst-connected
    GPU (1), as HAMi's Fit picks them;
  - on a node without the annotation, a malformed one, or for a pod without
    the policy, the choice is as before (the policy's order: GPUs 3 and 2);
  - scores added to a node while the service runs are used from then on.

Standalone: python3 test_hami_topology.py --binary PATH --source-dir REPO
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hami_topology")

NS = "t"
V100 = "NVIDIA-Tesla V100-PCIE-32GB"
SCORE = "hami.io/node-nvidia-score"
POLICY = {"hami.io/gpu-scheduler-policy": "topology-aware"}
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
# Pair scores by device position: 0-2 NVLinked, 2-3 one switch, 0-3 one CPU, GPU 1 poorly linked.
LINKS = {(0, 1): 10, (0, 2): 200, (0, 3): 20, (1, 2): 10, (1, 3): 10, (2, 3): 50}


def uuids(node):
    return [g.hami_uuid(node, i) for i in range(4)]


def scores(node):
    """The annotation value as HAMi's plugin writes it: [{uuid, score{uuid: int}}]."""
    u = uuids(node)
    out = []
    for i in range(4):
        out.append({"uuid": u[i], "score": {u[j]: LINKS[(min(i, j), max(i, j))] for j in range(4) if j != i}})
    return json.dumps(out)


def hami_node(name, score=None):
    reg = "".join("%s,10,16384,100,%s,0,true,%d,hami-core:" % (u, V100, i) for i, u in enumerate(uuids(name)))
    n = g.node(name, {"nvidia.com/gpu": 40})
    n["metadata"]["annotations"] = {"hami.io/node-nvidia-register": reg,
                                    "hami.io/node-handshake": "Reported_2025-11-20 10:00:00"}
    if score is not None:
        n["metadata"]["annotations"][SCORE] = score
    return n


def place(c, srv, name, node, vgpus, annotations):
    """Filter the pod on node alone and bind it there: its GPUs (positions), or None."""
    c.create_pod(g.pod(name, g.vgpu(vgpus, 1000, cores=10), namespace=NS, annotations=annotations))
    pod = c.get_pod(name, NS)
    f = srv.filter(pod, [node])
    suite.check_eq(f.get("NodeNames"), [node], "%s fits %s" % (name, node), f)
    b = srv.post_json("/scheduler/bind", {"PodName": name, "PodNamespace": NS, "PodUID": pod["metadata"]["uid"],
                                          "Node": node})
    if not suite.check_eq(b.get("Error"), "", "%s binds to %s" % (name, node), b):
        return None
    text = c.annotations(name, NS).get(TO_ALLOCATE, "")
    hp = g.import_hamiplugin(suite)
    got = [d[0] for ctr in hp.decode_allocation(text) for d in ctr]
    u = uuids(node)
    return sorted(u.index(x) for x in got if x in u)


@suite.test
def topology_aware_uses_pair_scores(_s):
    c = g.Cluster(suite).start()
    try:
        for n in (hami_node("scored-a", scores("scored-a")), hami_node("scored-b", scores("scored-b")),
                  hami_node("scored-c", scores("scored-c")), hami_node("plain-a"), hami_node("plain-b"),
                  hami_node("broken", "[{\"uuid\":\"x\",\"score\":{\"y\":0.5}}]"), hami_node("late")):
            c.add_node(n)
        with g.LiveServer(suite, c.kubeconfig(), ["--placement", "bind"]) as srv:
            names = {"scored-a", "scored-b", "scored-c", "plain-a", "plain-b", "broken", "late"}
            ok = g.wait_until(lambda: {x["node"] for x in srv.inspect()} >= names, 15)
            suite.require(ok, "every node reaches the service", srv.inspect())
            suite.check_eq(place(c, srv, "pair", "scored-a", 2, POLICY), [0, 2],
                           "2 vGPUs, topology-aware: the best-scored pair")
            suite.check_eq(place(c, srv, "one", "scored-b", 1, POLICY), [1],
                           "1 vGPU, topology-aware: the worst-connected GPU")
            suite.check_eq(place(c, srv, "nopolicy", "scored-c", 2, None), [2, 3],
                           "without the policy the scores are not read: the policy's order")
            suite.check_eq(place(c, srv, "plain2", "plain-a", 2, POLICY), [2, 3],
                           "no annotation: as before (the policy's order)")
            suite.check_eq(place(c, srv, "plain1", "plain-b", 1, POLICY), [3],
                           "no annotation, 1 vGPU: as before")
            suite.check_eq(place(c, srv, "bad", "broken", 2, POLICY), [2, 3],
                           "a malformed annotation is ignored, never fatal")
            # Scores written while the service runs reach it through the node watch. Its events
            # come in order: once a node created after the patch is in /inspect, the patch is in too.
            c.sim.patch("nodes", "late", "merge", {"metadata": {"annotations": {SCORE: scores("late")}}})
            c.add_node(hami_node("sentinel"))
            ok = g.wait_until(lambda: "sentinel" in {x["node"] for x in srv.inspect()}, 15)
            suite.require(ok, "the node created after the patch reaches the service", srv.inspect())
            suite.check_eq(place(c, srv, "late", "late", 2, POLICY), [0, 2], "scores added later are used")
    finally:
        c.stop()


if __name__ == "__main__":
    suite.main()
