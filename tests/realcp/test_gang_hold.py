"""Gang scheduling with the Coscheduling plugin (issue 23 item 5): with the
product's default flags, a PodGroup member waiting at Permit longer than the
former 60 s --assume-ttl keeps its GPU: a pod placed meanwhile on the same
node is given the other GPU, and the member, once its group is complete, is
bound with the GPU it was given. (Before issue 22 item 5 the member's GPU
was given again after 60 s, and GPU 0 ended with two 60-core shares.) See
coscheduling.py for the setup.

python3 test_gang_hold.py --binary build/release/gpu-quota-admission --source-dir .
"""

import time

from realcp_suite import RealcpSuite
from coscheduling import GROUP_LABEL, OLD_DEFAULT_TTL_S, gpu_of, podgroup, setup, vcuda_pod

suite = RealcpSuite("realcp gang hold", extra_binaries=("kube-scheduler-plugins",))


@suite.test
def test_setup(s):
    setup(s, assume_ttl_s=None)


@suite.test
def test_member_waiting_at_permit_keeps_its_gpu(s):
    cp = s.cp
    podgroup(cp, "hold", 2, 300)
    cp.create_pod(vcuda_pod(cp, "missing", "gpu-two", 10, group="hold", scheduler="realcp-nobody"))
    cp.create_pod(vcuda_pod(cp, "member", "gpu-two", 60, group="hold"))
    decided_gpu = cp.wait_for(lambda: gpu_of(cp, "member"), 60, "the extender decided member's GPU at filter")
    t_decided = time.monotonic()
    # Waiting at Permit (unbound) for longer than the former 60 s TTL: the
    # time is what is tested, so the condition waited for is the time itself.
    cp.wait_for(lambda: time.monotonic() - t_decided > OLD_DEFAULT_TTL_S + 5, OLD_DEFAULT_TTL_S + 35,
                "the former 60 s assume-ttl passes")
    s.check_eq(cp.get_pod("member")["spec"].get("nodeName"), None, "member still waits at Permit")
    cp.create_pod(vcuda_pod(cp, "meanwhile", "gpu-two", 60))
    s.check_eq(cp.wait_bound("meanwhile", timeout=60), "gpu-two", "a pod placed meanwhile is bound")
    s.check(gpu_of(cp, "meanwhile") != decided_gpu,
            "the pod placed meanwhile got the other GPU, not the waiting member's (%s)" % decided_gpu,
            {"member": decided_gpu, "meanwhile": gpu_of(cp, "meanwhile")})
    # Complete the group: a second member (no GPU) lets Permit through.
    cp.create_pod(cp.pod("member-2", labels={GROUP_LABEL: "hold"},
                         extra_spec={"nodeSelector": {"kubernetes.io/hostname": "cpu-0"}}))
    s.check_eq(cp.wait_bound("member", timeout=90), "gpu-two", "the complete group's member is bound")
    s.check_eq(gpu_of(cp, "member"), decided_gpu, "with the GPU it was given before it waited")
    s.check(gpu_of(cp, "member") != gpu_of(cp, "meanwhile"), "no GPU given twice on gpu-two")


    s.cp.stop_scheduler(s.sched)
    s.cp.delete_all_pods()


if __name__ == "__main__":
    suite.main()
