"""HAMi's dynamic MIG against a real control plane (issue 28 item 2;
docs/mig.md, "HAMi MIG in the extender"): a node registered as HAMi v2.10
writes it (tests/fixtures/mig/node-hami-mig.json: two A100s in `mode: mig`
with their migProfiles), the shipped hami scheduler-config, --placement
bind. Two vGPU pods asking 9,000 MiB each are bound by kube-scheduler
through the extender; each carries hami.io/vgpu-mig-allocations naming a
profile and a placement on its GPU, and the two instances do not overlap
where they share a GPU.

python3 test_hami_mig.py --binary build/release/gpu-quota-admission --source-dir .
"""

import json
import os
import time

from realcp_suite import RealcpSuite, annotations, load_shipped_config, runnable_config

suite = RealcpSuite("realcp hami mig")
MIG_KEY = "hami.io/vgpu-mig-allocations"


def fixture_node(source_dir):
    with open(os.path.join(source_dir, "tests", "fixtures", "mig", "node-hami-mig.json")) as f:
        return json.load(f)


def slices(alloc):
    p = alloc["placement"]
    return alloc["gpuUUID"], set(range(p["start"], p["start"] + p["size"]))


@suite.test
def test_vgpus_placed_on_mig_instances(s):
    cp = s.cp
    node = fixture_node(s.source_dir)
    ann = dict(node["metadata"]["annotations"])
    ann["hami.io/node-handshake"] = "Reported " + time.strftime("%Y-%m-%d %H:%M:%S")
    res = {k: v for k, v in node["status"]["allocatable"].items() if "/" in k}
    cp.add_node("hami-mig-0", res, annotations=ann)
    prod = cp.start_product(s.binary, flags=["--placement", "bind"], name="gqa-hami-mig")
    cfg = runnable_config(cp, load_shipped_config(s.source_dir, "v1", "hami"), direct_port=prod.port)
    sched = cp.start_scheduler(cfg, name="sched-hami-mig")
    placed = []
    try:
        for i in range(2):
            name = "hmig-%d" % i
            cp.create_pod(cp.pod(name, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "9000"}))
            s.check_eq(cp.wait_bound(name, timeout=90), "hami-mig-0", "%s is bound to the MIG node" % name)
            a = annotations(cp, name)
            allocs = json.loads(a.get(MIG_KEY) or "[]")
            s.check_eq(len(allocs), 1, "%s carries one MIG instance" % name, a)
            if allocs:
                s.check(allocs[0]["profile"] in ("1g.10gb", "2g.10gb"), "a profile with 9,000 MiB room", allocs)
                placed.append(slices(allocs[0]))
            # The device plugin's part: release the node lock for the next pod.
            cp.admin.merge_patch("/api/v1/nodes/hami-mig-0",
                                 {"metadata": {"annotations": {"hami.io/mutex.lock": None}}})
        if len(placed) == 2 and placed[0][0] == placed[1][0]:
            s.check(not (placed[0][1] & placed[1][1]), "instances on one GPU do not overlap", placed)
    finally:
        s.end_round(sched, prod)


if __name__ == "__main__":
    suite.main()
