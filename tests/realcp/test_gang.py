"""Gang scheduling with the Coscheduling plugin (issue 23 item 5): a
PodGroup that timed out at Permit (and cannot come back: its sibling is
gone) releases the GPU the extender gave its member, and the next pod gets
it. See coscheduling.py for the setup.

python3 test_gang.py --binary build/release/gpu-quota-admission --source-dir .
"""

from realcp_suite import RealcpSuite
from coscheduling import gpu_of, podgroup, setup, vcuda_pod

suite = RealcpSuite("realcp gang", extra_binaries=("kube-scheduler-plugins",))


@suite.test
def test_setup(s):
    setup(s)


@suite.test
def test_timed_out_group_releases_its_gpu(s):
    cp = s.cp
    podgroup(cp, "late", 2, 6)
    cp.create_pod(vcuda_pod(cp, "never", "gpu-solo", 10, group="late", scheduler="realcp-nobody"))
    cp.create_pod(vcuda_pod(cp, "timed-out", "gpu-solo", 100, group="late"))
    gpu = cp.wait_for(lambda: gpu_of(cp, "timed-out"), 60, "the extender decided timed-out's GPU")
    ev = cp.wait_event("timed-out", "FailedScheduling", "timeout", timeout=90)
    print("    %s" % ev["message"], flush=True)
    # The group cannot come back: its other member is gone (PreFilter now
    # refuses timed-out for want of siblings).
    cp.delete_pod("never")
    cp.create_pod(vcuda_pod(cp, "next", "gpu-solo", 100))
    try:
        node = cp.wait_bound("next", timeout=60)
    except Exception as e:   # noqa: BLE001 - reported
        node = None
        s.check(False, "the next pod is bound once the group timed out",
                "%s\nevents: %s" % (e, cp.pod_events("next")[-2:]))
    if node:
        s.check_eq(node, "gpu-solo", "the next pod is bound to gpu-solo")
        s.check_eq(gpu_of(cp, "next"), gpu, "with the GPU the timed-out group had")
    s.check_eq(cp.get_pod("timed-out")["spec"].get("nodeName"), None, "the timed-out member stays unbound")
    cp.stop_scheduler(s.sched)
    cp.delete_all_pods()


if __name__ == "__main__":
    suite.main()
