"""Preemption by the real kube-scheduler with the extender's preemption
verb (issue 23 item 4): two low-priority pods hold all 8 GPUs of the DGX-1
node in two NVLink quads; a high-priority pod asking for 4 evicts exactly
one of them, in one preemption round, and is bound with the victim's quad.

Without kubelet nobody confirms a graceful deletion; the harness's reaper
does (ControlPlane.start_reaper).

python3 test_preemption.py --binary build/release/gpu-quota-admission --source-dir .
"""

from realcp_suite import RealcpSuite, add_demo_nodes, direct_extender, gpu_indices, annotations

suite = RealcpSuite("realcp preemption")


def priority_class(cp, name, value):
    cp.admin.post("/apis/scheduling.k8s.io/v1/priorityclasses",
                  {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                   "value": value, "preemptionPolicy": "PreemptLowerPriority"})


def quad(cp, name):
    return set(gpu_indices(annotations(cp, name).get("gpu-admission.io/gpu-idx-0")) or [])


@suite.test
def test_high_priority_gpu_pod_preempts_one_victim(s):
    cp = s.cp
    add_demo_nodes(cp, s.source_dir)
    priority_class(cp, "realcp-low", 100)
    priority_class(cp, "realcp-high", 1000000)
    cp.start_reaper()
    prod = cp.start_product(s.binary, flags=["--placement", "bind"])
    sched = cp.start_scheduler(cp.scheduler_config([direct_extender(prod.port, bind=True)]), name="sched")
    for n in ("low-1", "low-2"):
        cp.create_pod(cp.pod(n, {"nvidia.com/gpu": "4"}, priority_class="realcp-low"))
    for n in ("low-1", "low-2"):
        s.check_eq(cp.wait_bound(n, timeout=90), "gpu-v100-0", "%s bound" % n)
    before = {n: quad(cp, n) for n in ("low-1", "low-2")}
    s.check(before["low-1"] | before["low-2"] == set(range(8)), "the two low pods hold all 8 GPUs", before)
    cp.create_pod(cp.pod("high", {"nvidia.com/gpu": "4"}, priority_class="realcp-high"))
    try:
        s.check_eq(cp.wait_bound("high", timeout=120), "gpu-v100-0", "the high-priority pod is bound")
    except Exception as e:   # noqa: BLE001 - reported with the events
        s.check(False, "the high-priority pod is bound", "%s\nevents: %s\nproduct log: %s" % (
            e, cp.pod_events("high"), prod.log()[-2000:]))
        return
    left = {p["metadata"]["name"] for p in cp.admin.get("/api/v1/namespaces/default/pods")["items"]}
    victims = {"low-1", "low-2"} - left
    s.check_eq(len(victims), 1, "exactly one low-priority pod was evicted", sorted(left))
    if len(victims) == 1:
        victim = victims.pop()
        s.check_eq(quad(cp, "high"), before[victim], "the high pod took the victim's NVLink quad")
    failed = [e for e in cp.pod_events("high") if e["reason"] == "FailedScheduling"]
    s.check(len(failed) <= 1, "one preemption round (at most one FailedScheduling before the bind)", failed)
    cp.stop_scheduler(sched)
    cp.delete_all_pods()
    s.check_eq(cp.stop_product(prod), 0, "gpu-quota-admission exits 0", prod.log())


if __name__ == "__main__":
    suite.main()
