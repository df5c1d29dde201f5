"""Smoke of the scheduling benchmark (bench_schedule.py, issue 24) with tens
of pods: kube-scheduler alone, with --placement bind and with --placement
filter, on the same nodes and pods. Checks what does not depend on the
machine's speed: every pod bound, each at its first attempt (one filter,
and in bind mode one bind, per pod), no Error answered, and the API writes
per pod (bind: one, the Binding carrying the annotations; filter: the
annotation PATCH and kube-scheduler's Binding); then whole GPUs on NVLink
nodes (one write per pod in bind placement) and HAMi vGPUs (every pod bound,
one node lock per pod released by the script playing HAMi's plugin). The
figures are printed, never asserted.

python3 test_bench_schedule.py --binary build/release/gpu-quota-admission --source-dir .
"""

from realcp_suite import RealcpSuite
from bench_schedule import Bench, fmt

suite = RealcpSuite("realcp bench smoke")

NODES, PODS = 4, 24


@suite.test
def test_bench_rounds(s):
    b = Bench(s.cp, s.args.binary, NODES, PODS, 50, 10, timeout=120)
    b.make_nodes()
    try:
        share_rounds(s, b)
    finally:
        b.remove_nodes()


def share_rounds(s, b):
    for mode in ("none", "bind", "filter"):
        fig = b.round(mode)
        print("  " + fmt(fig), flush=True)
        s.check_eq(fig["bound"], PODS, "%s: every pod is bound" % mode, fig)
        if mode == "none":
            continue
        s.check_eq(fig.get("extender_exit"), 0, "%s: the extender exits 0" % mode, fig)
        s.check_eq(fig.get("refused"), 0, "%s: no bind or decision refused" % mode, fig)
        s.check_eq(round(fig["filter_per_pod"], 2), 1.0, "%s: one filter per pod" % mode, fig)
        want_binds = 1.0 if mode == "bind" else 0.0
        s.check_eq(round(fig["bind_per_pod"], 2), want_binds, "%s: binds per pod" % mode, fig)
        want_writes = {"POST/binding": PODS} if mode == "bind" else {"PATCH": PODS, "POST/binding": PODS}
        s.check_eq(fig["writes"], want_writes, "%s: API writes on pods" % mode, fig)


@suite.test
def test_bench_whole_gpus(s):
    """nvidia.com/gpu pods on NVLink nodes: in bind placement one write per
    pod too (the Binding with the decision), as for shares."""
    pods = 12   # 2 GPUs each: 24 of the 4 nodes' 32
    b = Bench(s.cp, s.args.binary, NODES, pods, 0, 0, timeout=120, workload="whole", gpus=2,
              source_dir=s.source_dir)
    b.make_nodes()
    try:
        whole_rounds(s, b, pods)
    finally:
        b.remove_nodes()


def whole_rounds(s, b, pods):
    for mode in ("none", "bind"):
        fig = b.round(mode)
        print("  " + fmt(fig), flush=True)
        s.check_eq(fig["bound"], pods, "whole %s: every pod is bound" % mode, fig)
        if mode == "bind":
            s.check_eq(fig.get("extender_exit"), 0, "whole bind: the extender exits 0", fig)
            s.check_eq(fig["writes"], {"POST/binding": pods}, "whole bind: one write per pod, the Binding", fig)


@suite.test
def test_bench_hami(s):
    """HAMi vGPUs, the script playing the device plugin's lock release:
    every pod bound, each lock released, the writes of HAMi's protocol."""
    pods = 12
    b = Bench(s.cp, s.args.binary, NODES, pods, 0, 0, timeout=120, workload="hami", source_dir=s.source_dir)
    b.make_nodes()
    try:
        fig = b.round("bind")
    finally:
        b.remove_nodes()
    print("  " + fmt(fig), flush=True)
    s.check_eq(fig["bound"], pods, "hami bind: every pod is bound", fig)
    s.check_eq(fig.get("extender_exit"), 0, "hami bind: the extender exits 0", fig)
    s.check_eq(fig.get("locks_released"), pods, "hami bind: one node lock per pod, released by the plugin", fig)
    s.check_eq(fig["writes"].get("POST/binding"), pods, "hami bind: one Binding per pod", fig)


if __name__ == "__main__":
    suite.main()
