#!/usr/bin/env python3
"""Allocation metrics that join utilization (issue 27 item 3):

- one unit per metric: gqa_resource_{allocatable,allocated,stranded}_{cores,
  memory_bytes,gpus} beside the deprecated mixed-unit gqa_resource_*;
- per GPU (--metrics-per-node): gqa_gpu_allocated_cores,
  gqa_gpu_allocated_memory_bytes, gqa_gpu_capacity_memory_bytes,
  gqa_gpu_shared_pods, labelled as DCGM exporter labels its series
  (Hostname, gpu, UUID, modelName, device);
- per pod (--metrics-per-pod): gqa_pod_gpu_allocated_cores and
  gqa_pod_gpu_allocated_memory_bytes with namespace, pod, node, gpu, UUID, state;
- label values taken from the cluster are escaped.
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gqa_e2e as e2e  # noqa: E402

suite = e2e.Suite("allocation-metrics")

MIB = 1 << 20
BLOCK = 256 * MIB
GIB = 1 << 30


def placed(name, node, gpu, res, ns="default"):
    ann = {"tencent.com/predicate-gpu-idx-0": str(gpu), "tencent.com/predicate-node": node,
           "tencent.com/gpu-assigned": "true", "tencent.com/predicate-time": "1763700000000000000"}
    return e2e.pod(name, res, namespace=ns, node=node, annotations=ann, phase="Running")


def cluster_state(s, model="Test GPU"):
    topo = e2e.topology(2, model=model, memory_mib=4096)  # 16 blocks of 256 MiB per GPU
    v = e2e.node("v1", e2e.vcuda(200, 32), topo=topo, labels={"tkestack.io/gpu-model": "X"})
    m = e2e.node("m1", e2e.mps(200, 40), labels={"tkestack.io/gpu-model": "X"})
    w = e2e.node("w1", e2e.pgpu(4), labels={"tkestack.io/gpu-model": "X"})
    return e2e.write_state(s, [v, m, w, placed("a", "v1", 0, e2e.vcuda(30, 16)),
                               placed("b", "v1", 1, e2e.vcuda(60, 4), ns="team-b"),
                               e2e.pod("whole", e2e.pgpu(2), node="w1", phase="Running")])


@suite.test
def one_unit_per_metric(s):
    with e2e.Server(s, cluster_state(s)) as srv:
        m = e2e.checked_samples(s, srv)
    g = {"model": "X", "pool": "none"}
    s.check_eq(e2e.metric(m, "gqa_resource_allocatable_cores", resource="tencent.com/vcuda-core", **g), 200.0,
               "vcuda cores offered")
    s.check_eq(e2e.metric(m, "gqa_resource_allocated_cores", resource="tencent.com/vcuda-core", **g), 90.0,
               "vcuda cores held")
    s.check_eq(e2e.metric(m, "gqa_resource_allocatable_memory_bytes", resource="tencent.com/vcuda-memory", **g),
               float(32 * BLOCK), "vcuda memory offered, in bytes (blocks of 256 MiB)")
    s.check_eq(e2e.metric(m, "gqa_resource_allocated_memory_bytes", resource="tencent.com/vcuda-memory", **g),
               float(20 * BLOCK), "vcuda memory held, in bytes")
    s.check_eq(e2e.metric(m, "gqa_resource_allocatable_memory_bytes", resource="nvidia.com/mps-memory", **g),
               float(40 * GIB), "MPS memory offered, in bytes (the MPS plugin's unit is taken as GiB)")
    s.check_eq(e2e.metric(m, "gqa_resource_allocatable_gpus", resource="nvidia.com/gpu", **g), 4.0,
               "whole GPUs offered")
    s.check_eq(e2e.metric(m, "gqa_resource_allocated_gpus", resource="nvidia.com/gpu", **g), 2.0, "whole GPUs held")
    s.check_eq(e2e.metric(m, "gqa_resource_stranded_memory_bytes", resource="tencent.com/vcuda-memory", **g), 0.0,
               "no memory stranded")
    s.check(("gqa_resource_stranded_cores", frozenset(dict(resource="tencent.com/vcuda-core", **g).items())) in m,
            "stranded cores exported")
    units = {"_cores": ("-core",), "_memory_bytes": ("-memory",), "_gpus": ("nvidia.com/gpu",)}
    for (name, labels), _v in m.items():
        for suffix, allowed in units.items():
            if name.startswith("gqa_resource_") and name.endswith(suffix):
                res = dict(labels)["resource"]
                s.check(any(res.endswith(a) for a in allowed), "%s carries only %s resources" % (name, suffix), res)
    s.check_eq(e2e.metric(m, "gqa_resource_allocatable", resource="tencent.com/vcuda-memory", **g), 32.0,
               "the deprecated mixed-unit series stays for one release")
    s.check(not [k for k in m if k[0].startswith("gqa_gpu_allocated") or k[0].startswith("gqa_pod_gpu_")],
            "no per-GPU or per-pod series without the flags")


@suite.test
def per_gpu_series_join_dcgm(s):
    with e2e.Server(s, cluster_state(s, model="NVIDIA A100-SXM4-80GB"), flags=["--metrics-per-node"]) as srv:
        m = e2e.checked_samples(s, srv)

    def gpu(i, node="v1", uuid=None, model="NVIDIA A100-SXM4-80GB"):
        return {"Hostname": node, "gpu": str(i), "UUID": uuid if uuid is not None else "GPU-test-%02d" % i,
                "modelName": model, "device": "nvidia%d" % i}
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_cores", **gpu(0)), 30.0, "cores held on GPU 0")
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_cores", **gpu(1)), 60.0, "cores held on GPU 1")
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_memory_bytes", **gpu(0)), float(16 * BLOCK), "memory held on GPU 0")
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_memory_bytes", **gpu(1)), float(4 * BLOCK), "memory held on GPU 1")
    s.check_eq(e2e.metric(m, "gqa_gpu_capacity_memory_bytes", **gpu(1)), float(4096 * MIB), "GPU 1's memory")
    s.check_eq(e2e.metric(m, "gqa_gpu_shared_pods", **gpu(0)), 1.0, "one share on GPU 0")
    s.check_eq(e2e.metric(m, "gqa_gpu_capacity_memory_bytes", **gpu(0, node="m1", uuid="", model="X")),
               float(20 * GIB), "an MPS GPU without topology: half the node's 40 GiB, no UUID")
    w1 = [k for k in m if k[0] == "gqa_gpu_allocated_cores" and dict(k[1])["Hostname"] == "w1"]
    s.check_eq(len(w1), 4, "one series per GPU of w1 (its pod's GPUs are not known: no index annotation)", w1)


@suite.test
def per_pod_series(s):
    with e2e.Server(s, cluster_state(s), flags=["--metrics-per-pod"]) as srv:
        m = e2e.checked_samples(s, srv)
    a = {"namespace": "default", "pod": "a", "node": "v1", "gpu": "0", "UUID": "GPU-test-00", "state": "bound"}
    b = {"namespace": "team-b", "pod": "b", "node": "v1", "gpu": "1", "UUID": "GPU-test-01", "state": "bound"}
    s.check_eq(e2e.metric(m, "gqa_pod_gpu_allocated_cores", **a), 30.0, "pod a's cores on GPU 0")
    s.check_eq(e2e.metric(m, "gqa_pod_gpu_allocated_memory_bytes", **a), float(16 * BLOCK), "pod a's memory")
    s.check_eq(e2e.metric(m, "gqa_pod_gpu_allocated_cores", **b), 60.0, "pod b's cores on GPU 1, its namespace")
    whole = [v for (n, l), v in m.items() if n == "gqa_pod_gpu_allocated_cores" and dict(l)["pod"] == "whole"]
    s.check_eq(sum(whole), 200.0, "the whole-GPU pod holds 200 cores", whole)
    s.check(not [k for k in m if k[0].startswith("gqa_gpu_allocated")], "no per-GPU series without --metrics-per-node")


@suite.test
def label_values_from_the_cluster_are_escaped(s):
    odd = 'Odd "GPU"\\ x'
    with e2e.Server(s, cluster_state(s, model=odd), flags=["--metrics-per-node"]) as srv:
        text = srv.metrics().text
        m = e2e.checked_samples(s, srv)
    s.check_in('modelName="Odd \\"GPU\\"\\\\ x"', text, "quotes and backslashes in modelName escaped")
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_cores", Hostname="v1", gpu="0", UUID="GPU-test-00",
                          modelName='Odd \\"GPU\\"\\\\ x', device="nvidia0"), 30.0, "and the series parses")


@suite.test
def pod_label_values_are_escaped(s):
    """The state file is the operator's, not the API server's: names it carries are not validated as
    Kubernetes would, so the per-pod series must escape them."""
    topo = e2e.topology(1, memory_mib=4096)
    n = e2e.node("v1", e2e.vcuda(100, 16), topo=topo)
    odd = placed('we"ird\\pod', "v1", 0, e2e.vcuda(30, 4), ns='ns"x')
    with e2e.Server(s, e2e.write_state(s, [n, odd]), flags=["--metrics-per-pod"]) as srv:
        text = srv.metrics().text
        m = e2e.checked_samples(s, srv)
    lines = [ln for ln in text.splitlines() if ln.startswith("gqa_pod_gpu_allocated_cores{")]
    s.check_eq(len(lines), 1, "one series for the pod", lines)
    s.check_in('namespace="ns\\"x",pod="we\\"ird\\\\pod"', "\n".join(lines), "quotes and backslashes escaped")
    s.check_eq(len([k for k in m if k[0] == "gqa_pod_gpu_allocated_cores"]), 1, "and the series parses")


@suite.test
def hami_devices_per_gpu_and_pod(s):
    """A HAMi node's devices, and a pod's vGPU on one, as HAMi's GPUDeviceCoreAllocated /
    vGPUMemoryAllocated would show them: UUID and index from the registration."""
    uuids = ["GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec", "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"]
    model = "NVIDIA-Tesla V100-PCIE-32GB"
    reg = "".join("%s,10,32768,100,%s,0,true,%d,hami-core:" % (u, model, i) for i, u in zip((0, 2), uuids))
    n = e2e.node("hami-0", {"nvidia.com/gpu": 20})
    n["metadata"]["annotations"] = {"hami.io/node-nvidia-register": reg,
                                    "hami.io/node-handshake": "Reported_2025-11-20 10:00:00"}
    held = e2e.pod("held", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30000, "nvidia.com/gpucores": 30},
                   namespace="t", node="hami-0", phase="Running",
                   annotations={"hami.io/vgpu-devices-allocated": uuids[1] + ",NVIDIA,30000,30:;",
                                "hami.io/vgpu-devices-to-allocate": ";", "hami.io/vgpu-node": "hami-0"})
    state = e2e.write_state(s, [n, held])
    with e2e.Server(s, state, flags=["--metrics-per-node", "--metrics-per-pod"]) as srv:
        m = e2e.checked_samples(s, srv)
    dev = {"Hostname": "hami-0", "gpu": "2", "UUID": uuids[1], "modelName": model}
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_cores", **dev), 30.0, "cores held on the HAMi device (index 2)")
    s.check_eq(e2e.metric(m, "gqa_gpu_allocated_memory_bytes", **dev), float(30000 * MIB), "its memory held")
    s.check_eq(e2e.metric(m, "gqa_gpu_capacity_memory_bytes", **dev), float(32768 * MIB), "its registered memory")
    s.check_eq(e2e.metric(m, "gqa_gpu_shared_pods", **dev), 1.0, "one vGPU on it")
    pod = {"namespace": "t", "pod": "held", "node": "hami-0", "gpu": "2", "UUID": uuids[1], "state": "bound"}
    s.check_eq(e2e.metric(m, "gqa_pod_gpu_allocated_cores", **pod), 30.0, "the pod's vGPU cores")
    s.check_eq(e2e.metric(m, "gqa_pod_gpu_allocated_memory_bytes", **pod), float(30000 * MIB), "and memory")


if __name__ == "__main__":
    suite.main()
