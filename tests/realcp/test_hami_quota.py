"""HAMi's ResourceQuota at scheduling time against a real control plane
(issue 25 item 11; docs/hami.md, "ResourceQuota on gpumem and gpucores").

  - the real kube-apiserver accepts a ResourceQuota with
    limits.nvidia.com/gpumem and limits.nvidia.com/gpucores in spec.hard,
    and creates vGPU pods in its namespace (its own quota admission counts
    nothing of limits.* extended resources);
  - through the shipped hami scheduler-config in --placement bind, a pod
    within the quota is bound, and the next one, over it with the first
    one's memory, stays Pending with the quota's reason in its
    FailedScheduling event.

python3 test_hami_quota.py --binary build/release/gpu-quota-admission --source-dir .
"""

import time

from realcp_suite import RealcpSuite, annotations, load_shipped_config, runnable_config

suite = RealcpSuite("realcp hami quota")
NS = "team-a"
REGISTER = ("GPU-realcp-hq-0,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
            "GPU-realcp-hq-1,10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:")


@suite.test
def test_quota_refuses_second_pod(s):
    cp = s.cp
    cp.ensure_namespace(NS)
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-quota", "namespace": NS},
             "spec": {"hard": {"limits.nvidia.com/gpumem": "10240", "limits.nvidia.com/gpucores": "100"}}}
    created = cp.admin.post("/api/v1/namespaces/%s/resourcequotas" % NS, quota, ok=(201,))
    s.check_eq(created["spec"]["hard"].get("limits.nvidia.com/gpumem"), "10240",
               "kube-apiserver accepts limits.nvidia.com/gpumem in a ResourceQuota", created)
    cp.add_node("gpu-hq-0", {"nvidia.com/gpu": "20"},
                annotations={"hami.io/node-nvidia-register": REGISTER,
                             "hami.io/node-handshake": "Reported " + time.strftime("%Y-%m-%d %H:%M:%S")})
    prod = cp.start_product(s.binary, flags=["--placement", "bind"], name="gqa-hq")
    cfg = runnable_config(cp, load_shipped_config(s.source_dir, "v1", "hami"), direct_port=prod.port)
    sched = cp.start_scheduler(cfg, name="sched-hq")
    try:
        limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "6000", "nvidia.com/gpucores": "30"}
        cp.create_pod(cp.pod("hq-1", limits, namespace=NS))
        s.check_eq(cp.wait_bound("hq-1", ns=NS, timeout=90), "gpu-hq-0", "a pod within the quota is bound")
        a = annotations(cp, "hq-1", ns=NS)
        s.check(",NVIDIA,6000,30:" in a.get("hami.io/vgpu-devices-allocated", ""),
                "hq-1 holds 6000 MiB and 30 cores", a)
        # The device plugin's part: release the node lock.
        cp.admin.merge_patch("/api/v1/nodes/gpu-hq-0", {"metadata": {"annotations": {"hami.io/mutex.lock": None}}})
        cp.create_pod(cp.pod("hq-2", limits, namespace=NS))
        ev = cp.wait_event("hq-2", "FailedScheduling", "gpu-quota", ns=NS, timeout=90)
        msg = ev["message"] if ev else ""
        s.check('namespace team-a quota "gpu-quota" limits.nvidia.com/gpumem: 6000 used + 6000 asked > 10240' in msg,
                "the pod over the quota stays Pending with the quota's reason", msg)
        pod = cp.admin.get("/api/v1/namespaces/%s/pods/hq-2" % NS)
        s.check(not pod["spec"].get("nodeName"), "hq-2 is not bound", pod["spec"].get("nodeName"))
    finally:
        s.end_round(sched, prod, ns=NS)


if __name__ == "__main__":
    suite.main()
