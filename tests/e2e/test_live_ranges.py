#!/usr/bin/env python3
"""Out-of-range values and bad objects never break the cache (issue 10, item 1).

A Node advertising nvidia.com/gpu "2147483648" used to wrap an int negative:
the sanitizer build crashed in the GPU table's calloc, the Release build
failed every relist and never became ready; "4294967297" silently became one
GPU. Now every count read from the API is range-checked first (GPU counts
clamp to 64 with a warning, memory past 2^40 is refused per field), and one
bad listed or watched object (a ConfigMap without a name, a list item that is
not an object) is skipped with a logged reason and counted in
gqa_objects_skipped_total{kind,reason}: the relist stands and the replica is
ready.

Standalone: python3 test_live_ranges.py --binary PATH --source-dir REPO
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("live-ranges")


def by_name(srv):
    return {n["node"]: n for n in srv.inspect()}


def skipped(srv, kind, reason):
    return srv.metric_value("gqa_objects_skipped_total", kind=kind, reason=reason)


@suite.test
def absurd_counts_and_bad_objects(s):
    with g.Cluster(s) as c:
        c.add_node(g.node("huge", g.pgpu("2147483648")))
        c.add_node(g.node("wrap", g.pgpu("4294967297")))
        c.add_node(g.node("vhuge", {"tencent.com/vcuda-core": "214748364800", "tencent.com/vcuda-memory": "1e30"}))
        c.add_node(g.node("ok", g.vcuda(200, 128)))
        # Objects no real API server lists, each to be skipped on its own.
        c.sim.add_list_garbage("configmaps", {"metadata": {"namespace": "kube-public"}}, ns="kube-public")
        c.sim.add_list_garbage("configmaps", 42, ns="kube-public")
        c.sim.add_list_garbage("nodes", {"kind": "Node", "metadata": {}})
        c.sim.add_list_garbage("pods", "not a pod")
        # bind placement: the filter only answers (no pod to record on).
        with g.LiveServer(s, c.kubeconfig(), flags=["--placement", "bind"]) as srv:
            s.check_eq(srv.readyz().status, 200, "ready although lists carry bad objects and absurd counts")
            nodes = by_name(srv)
            s.check_eq(sorted(nodes), ["huge", "ok", "vhuge", "wrap"], "every named node is in the cache")
            for name in ("huge", "wrap", "vhuge"):
                s.check_eq(nodes[name]["gpuCount"], 64, "%s: the GPU count clamps to 64" % name)
            s.check_eq(nodes["ok"]["gpuCount"], 2, "ok: 2 GPUs")
            s.check_eq([gp["memoryTotal"] for gp in nodes["vhuge"]["gpus"]][:2], [0, 0],
                       "vhuge: vcuda-memory past int64 is refused (0), the rest of the node kept")
            err = srv.stderr()
            s.check_in("node huge advertises 2147483648 GPUs; only the first 64 are used", err, "the clamp is logged")
            s.check_in("node wrap advertises 4294967297 GPUs", err, "2^32 + 1 is not read as 1")
            s.check_in("configmap has no metadata.name", err, "the nameless ConfigMap is logged with its reason")
            for kind, reason in (("configmap", "invalid"), ("configmap", "malformed"), ("node", "invalid"),
                                 ("pod", "malformed")):
                s.check(skipped(srv, kind, reason) >= 1, "gqa_objects_skipped_total{%s,%s} counts it" % (kind, reason))
            res = srv.filter(g.pod("share", g.vcuda(50, 32)), ["huge", "wrap", "vhuge", "ok"])
            s.check_eq(res.get("NodeNames"), ["ok"], "a share is placed on the sound node", res)
            big = srv.filter(g.pod("whole", g.pgpu(8)), ["huge", "wrap", "ok"])
            s.check_eq(big.get("NodeNames"), ["huge", "wrap"], "whole GPUs fit the clamped nodes", big)

            # A watched change to an absurd count is applied (clamped), not
            # fatal; a relist after it (410) stands as well.
            c.sim.upsert(g.node("ok", g.pgpu("9223372036854775807")))
            s.check(g.wait_until(lambda: by_name(srv)["ok"]["gpuCount"] == 64, timeout=15),
                    "a MODIFIED node with 2^63-1 GPUs is applied with 64")
            relists = srv.informers()["nodes"].get("relists", 0)
            c.sim.expire_watches()
            s.check(g.wait_until(lambda: srv.informers()["nodes"].get("relists", 0) > relists, timeout=20),
                    "the nodes informer lists again after 410")
            s.check_eq(srv.readyz().status, 200, "still ready after the relist")
            s.check_eq(by_name(srv)["ok"]["gpuCount"], 64, "the relisted node keeps its clamped count")


if __name__ == "__main__":
    suite.main()
