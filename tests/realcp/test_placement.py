"""Placement by the real kube-scheduler through the extender (issue 23 item 4):
vcuda shares, MPS, whole GPUs on an NVLink topology, in both placement
modes (--placement bind with filter/prioritize/bind verbs; --placement filter
with the filter verb only), the annotations the device plugins read on the
bound pods, and an infeasible pod left Pending with the extender's reason in
its FailedScheduling event.

python3 test_placement.py --binary build/release/gpu-quota-admission --source-dir .
"""

from realcp_suite import RealcpSuite, add_demo_nodes, direct_extender, gpu_indices, annotations

suite = RealcpSuite("realcp placement")

# DGX-1 hybrid cube-mesh (examples/demo-state.yaml gpu-v100-0): the two
# fully NVLink-connected quads.
V100_QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})


def setup_nodes(s):
    if not getattr(s, "nodes_added", False):
        add_demo_nodes(s.cp, s.source_dir)
        s.nodes_added = True


def check_vcuda(s, name, node="gpu-a100-0"):
    a = annotations(s.cp, name)
    s.check_eq(a.get("tencent.com/predicate-node"), node, "%s: tencent.com/predicate-node" % name, a)
    idx = gpu_indices(a.get("tencent.com/predicate-gpu-idx-0"))
    s.check(idx is not None and len(idx) == 1 and 0 <= idx[0] < 8,
            "%s: tencent.com/predicate-gpu-idx-0 names one of the 8 GPUs" % name, a)
    s.check_eq(a.get("tencent.com/gpu-assigned"), "false", "%s: tencent.com/gpu-assigned is false" % name, a)
    s.check(str(a.get("tencent.com/predicate-time", "")).isdigit(), "%s: tencent.com/predicate-time" % name, a)
    s.check_eq(a.get("gpu-admission.io/node"), node, "%s: gpu-admission.io/node" % name, a)
    return idx


def check_mps(s, name, node="gpu-t4-0"):
    a = annotations(s.cp, name)
    s.check_eq(a.get("gpu-admission.io/node"), node, "%s: gpu-admission.io/node" % name, a)
    idx = gpu_indices(a.get("gpu-admission.io/gpu-idx-0"))
    s.check(idx is not None and len(idx) == 1 and 0 <= idx[0] < 4,
            "%s: gpu-admission.io/gpu-idx-0 names one of the 4 T4s" % name, a)
    s.check("tencent.com/predicate-gpu-idx-0" not in a, "%s: no GPU-Manager keys on an MPS pod" % name, a)


def check_whole(s, name, node="gpu-v100-0"):
    a = annotations(s.cp, name)
    s.check_eq(a.get("gpu-admission.io/node"), node, "%s: gpu-admission.io/node" % name, a)
    idx = gpu_indices(a.get("gpu-admission.io/gpu-idx-0"))
    s.check(idx is not None and set(idx) in V100_QUADS,
            "%s: 4 whole GPUs are one NVLink quad of the DGX-1 (0-3 or 4-7)" % name, a)


def place_all(s, mode, suffix):
    """vcuda, MPS and whole-GPU pods, each bound to its node with annotations."""
    cp = s.cp
    pods = {
        "vcuda-" + suffix: ({"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "40"}, "gpu-a100-0",
                            check_vcuda),
        "mps-" + suffix: ({"nvidia.com/mps-core": "25", "nvidia.com/mps-memory": "4"}, "gpu-t4-0", check_mps),
        "gpu4-" + suffix: ({"nvidia.com/gpu": "4"}, "gpu-v100-0", check_whole),
    }
    for name, (limits, _node, _check) in pods.items():
        cp.create_pod(cp.pod(name, limits))
    for name, (_limits, node, check) in pods.items():
        got = cp.wait_bound(name, timeout=90)
        s.check_eq(got, node, "%s (%s mode) bound by kube-scheduler to %s" % (name, mode, node))
        check(s, name, node)
    # The second whole-GPU pod takes the other quad: the first is held.
    name = "gpu4b-" + suffix
    cp.create_pod(cp.pod(name, {"nvidia.com/gpu": "4"}))
    s.check_eq(cp.wait_bound(name, timeout=90), "gpu-v100-0", "%s bound to gpu-v100-0" % name)
    first = set(gpu_indices(annotations(cp, "gpu4-" + suffix).get("gpu-admission.io/gpu-idx-0")) or [])
    second = set(gpu_indices(annotations(cp, name).get("gpu-admission.io/gpu-idx-0")) or [])
    s.check(first | second == set(range(8)) and not first & second,
            "the two 4-GPU pods hold disjoint NVLink quads (%s mode)" % mode, (first, second))


def infeasible(s, mode, suffix):
    """More vcuda memory than one A100 has (80 GiB = 320 blocks of 256 MiB)
    with a share of cores: kube-scheduler's own fit check passes (the node
    has 2560), only the extender can say no, and its reason must reach the
    pod's FailedScheduling event."""
    cp = s.cp
    name = "too-big-" + suffix
    cp.create_pod(cp.pod(name, {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "400"}))
    ev = cp.wait_event(name, "FailedScheduling", "no GPU has both", timeout=90)
    msg = ev["message"]
    s.check("0/4 nodes are available" in msg, "FailedScheduling counts all 4 nodes (%s mode)" % mode, msg)
    # The three nodes without vcuda are kube-scheduler's own "Insufficient"
    # reasons; the A100 node passes that check, and the extender says why
    # it does not fit, in its own words.
    s.check_in('1 container "main" needs 50 tencent.com/vcuda-core and 400 tencent.com/vcuda-memory on one GPU',
               msg, "the extender's reason for gpu-a100-0 is in the event (%s mode)" % mode)
    s.check_in("3 Insufficient tencent.com/vcuda-core", msg, "kube-scheduler's own reasons for the other nodes")
    s.extender_reason = msg
    s.check_eq(cp.get_pod(name)["spec"].get("nodeName"), None, "%s stays Pending (%s mode)" % (name, mode))
    print("    FailedScheduling (%s): %s" % (mode, msg), flush=True)


def run_mode(s, mode):
    cp = s.cp
    setup_nodes(s)
    prod = cp.start_product(s.binary, flags=["--placement", mode], name="gqa-" + mode)
    ext = direct_extender(prod.port, bind=(mode == "bind"))
    if mode == "filter":
        # The drop-in shape: filter only, every node sent in full.
        for k in ("prioritizeVerb", "weight", "bindVerb", "preemptVerb"):
            ext.pop(k, None)
        ext["nodeCacheCapable"] = False
    sched = cp.start_scheduler(cp.scheduler_config([ext]), name="sched-" + mode)
    try:
        place_all(s, mode, mode)
        infeasible(s, mode, mode)
    finally:
        cp.stop_scheduler(sched)   # without leader election it exits 1 ("finished without leader elect")
        cp.delete_all_pods()
        s.check_eq(cp.stop_product(prod), 0, "gpu-quota-admission (%s) exits 0" % mode, prod.log())


@suite.test
def test_bind_mode(s):
    run_mode(s, "bind")


@suite.test
def test_filter_mode(s):
    run_mode(s, "filter")


if __name__ == "__main__":
    suite.main()
