#!/usr/bin/env python3
"""HAMi dynamic MIG end to end (issue 28 item 2; docs/mig.md, docs/hami.md).

The real binary against the API simulator, with the HAMi MIG fixtures of
tests/fixtures/mig: a node with two A100-SXM4-40GB registered in `mig` mode
with their migProfiles, and a pod HAMi's own scheduler placed there
(1g.10gb at slice 6 and 1g.5gb at slice 5 of GPU 0, with
hami.io/vgpu-mig-allocations). In filter placement the filter writes the
decision, which is read back from the API server:
  - the pod HAMi placed is charged as its two instances (/inspect/nodes);
  - a vGPU pod on the MIG node gets hami.io/vgpu-devices-to-allocate with the
    profile's memory and cores and hami.io/vgpu-mig-allocations with the
    profile and placement HAMi's device plugin reads; explain says where the
    instance goes and what stays possible;
  - a second pod on the same GPU gets a placement that overlaps none in use;
  - a GPU whose free slots take no instance of the profile refuses with the
    reason, and the MIG fragmentation gauge shows the node.

Standalone: python3 test_hami_mig.py --binary PATH --source-dir REPO
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as g  # noqa: E402

suite = g.Suite("test_hami_mig")

NODE = "hami-a100-mig"
GPU_A = "GPU-5b4c2b1a-8f3e-4d2c-9a7b-0e1f2a3b4c5d"
GPU_B = "GPU-6c5d3c2b-9a4f-4e3d-8b6c-1f2a3b4c5d6e"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
MIG = "hami.io/vgpu-mig-allocations"
NS = "t"


def fixture(name):
    with open(suite.path("tests", "fixtures", "mig", name)) as f:
        return json.load(f)


def instances(srv, index):
    """[(profile, start, size)] in use on GPU `index` of the node, or None."""
    n = srv.inspect(NODE)
    devs = ((n.get("hami") or {}).get("devices") or [])
    mig = devs[index].get("mig") if len(devs) > index else None
    return None if mig is None else sorted((i["profile"], i["start"], i["size"]) for i in mig["instances"])


def overlaps(a, b):
    return a[1] < b[1] + b[2] and b[1] < a[1] + a[2]


def on_gpu(uuid, mem):
    return g.pod("p", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": mem}, namespace=NS,
                 annotations={"nvidia.com/use-gpuuuid": uuid})


@suite.test
def mig_decisions(_s):
    with g.Cluster(suite) as c:
        c.add_node(fixture("node-hami-mig.json"))
        hami_pod = fixture("pod-hami-mig.json")
        hami_pod.pop("status", None)
        c.create_pod(hami_pod, phase="Running")
        with g.LiveServer(suite, c.kubeconfig(), ["--placement", "filter"]) as srv:
            ok = g.wait_until(lambda: instances(srv, 0) == [("1g.10gb", 6, 2), ("1g.5gb", 5, 1)], 15)
            suite.require(ok, "the pod HAMi placed holds its two MIG instances on GPU 0", srv.inspect(NODE))
            devs = srv.inspect(NODE)["hami"]["devices"]
            suite.check_eq((devs[0]["tasks"], devs[0]["memoryUsedMiB"], devs[0]["coreUsed"]), (2, 9856 + 4864, 28),
                           "and the profiles' memory and cores HAMi wrote", devs[0])
            suite.check_eq(instances(srv, 1), [], "GPU 1 is empty")

            # 9900 MiB: 1g.10gb (9856) is too small, 2g.10gb (9984) it is.
            # HAMi would cut it at slice 0; slice 4 keeps 3g.20gb and 4g.20gb possible.
            e = srv.explain(on_gpu(GPU_B, 9900))
            node = g.explain_node(e, NODE)
            suite.check(node["fits"], "the MIG node fits a vGPU pod", node)
            suite.check("placed 2g.10gb at slice 4" in node["reason"] and "slice 0 would keep" in node["reason"],
                        "explain says where the instance goes and what HAMi's choice would have left", node)

            p1 = on_gpu(GPU_B, 9900)
            p1["metadata"]["name"] = "m1"
            c.create_pod(p1)
            f = srv.filter(c.get_pod("m1", NS), [NODE])
            suite.check_eq(f.get("NodeNames"), [NODE], "m1 is decided onto the MIG node", f)
            ann = c.annotations("m1", NS)
            suite.check_eq(ann.get(TO_ALLOCATE), GPU_B + ",NVIDIA,9984,28:;",
                           "the allocation carries the profile's memory and cores, as HAMi writes it", ann)
            suite.check_eq(ann.get(ALLOCATED), ann.get(TO_ALLOCATE), "-allocated agrees", ann)
            want = [{"containerIndex": 0, "deviceIndex": 0, "gpuUUID": GPU_B, "profile": "2g.10gb",
                     "placement": {"start": 4, "size": 2}}]
            suite.check_eq(json.loads(ann.get(MIG, "null")), want, "hami.io/vgpu-mig-allocations names the instance",
                           ann)
            suite.check_eq(ann.get(MIG), json.dumps(want, separators=(",", ":")), "in Go's compact bytes", ann)
            ok = g.wait_until(lambda: instances(srv, 1) == [("2g.10gb", 4, 2)], 10)
            suite.check(ok, "the decision holds its instance", srv.inspect(NODE))

            p2 = on_gpu(GPU_B, 9900)
            p2["metadata"]["name"] = "m2"
            p2["metadata"]["uid"] = "m2-0000-4000-8000-000000000002"
            c.create_pod(p2)
            f = srv.filter(c.get_pod("m2", NS), [NODE])
            suite.check_eq(f.get("NodeNames"), [NODE], "m2 is decided onto the MIG node", f)
            got = json.loads(c.annotations("m2", NS).get(MIG, "[]"))
            suite.require(len(got) == 1, "m2 has one MIG instance", got)
            second = (got[0]["profile"], got[0]["placement"]["start"], got[0]["placement"]["size"])
            suite.check(got[0]["gpuUUID"] == GPU_B and second[0] == "2g.10gb" and not overlaps(second, ("", 4, 2)),
                        "m2's instance overlaps none in use", got)
            ok = g.wait_until(lambda: instances(srv, 1) == sorted([("2g.10gb", 4, 2), second]), 10)
            suite.check(ok, "both instances are held", srv.inspect(NODE))

            # 19000 MiB: a 3g.20gb or 4g.20gb needs four free slots, and GPU 1
            # has memory and tasks left but no such window.
            p3 = on_gpu(GPU_B, 19000)
            p3["metadata"]["name"] = "m3"
            p3["metadata"]["uid"] = "m3-0000-4000-8000-000000000003"
            c.create_pod(p3)
            f = srv.filter(c.get_pod("m3", NS), [NODE])
            suite.check_eq(f.get("NodeNames") or [], [], "m3 fits nowhere", f)
            reason = (f.get("FailedNodes") or {}).get(NODE, "")
            suite.check("GPU 1 (GPU-6c5d\u2026) (MIG mode): no free placement for a MIG profile of 19000 MiB" in reason,
                        "the over-full GPU refuses with the MIG reason (preemption could help)", f)
            suite.check(MIG not in c.annotations("m3", NS), "nothing is written for m3", c.annotations("m3", NS))

            samples, _, _ = g.parse_metrics(srv.metrics().text)
            frag = g.metric(samples, "gqa_node_mig_fragmentation_ratio", node=NODE)
            # The node's worst GPU: GPU 0 has slots 0..4 free and a 4-slot
            # instance fits (1 - 4/5 = 0.2); GPU 1 has 4 free slots in two
            # 2-slot holes (1 - 2/4 = 0.5).
            suite.check(frag is not None and abs(frag - 0.5) < 1e-3, "the MIG fragmentation gauge of the node", frag)


if __name__ == "__main__":
    suite.main()
