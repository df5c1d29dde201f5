"""MIG under NVIDIA's device plugin (mixed strategy) against a real control
plane (issue 28; docs/mig.md): kube-scheduler counts nvidia.com/mig-<profile>
itself (they are in the extender's managedResources), the extender counts
the same instances per node and profile, decides and binds.

  - two nodes advertising 2 x nvidia.com/mig-3g.20gb each (GFD's labels on
    them), one node without MIG: four pods asking one 3g.20gb each are all
    bound, two per MIG node, none on the node without MIG;
  - a fifth stays Pending (kube-scheduler's own count says no room), and no
    bind was refused for room kube-scheduler saw free (no FailedScheduling
    event carries the extender's instance reason while room existed);
  - the extender's /inspect/nodes agrees with the bindings: 2 of 2 used on
    each MIG node.

python3 test_mig.py --binary build/release/gpu-quota-admission --source-dir .
"""

import json
import urllib.request

from realcp_suite import RealcpSuite, direct_extender

suite = RealcpSuite("realcp mig")
PROFILE = "nvidia.com/mig-3g.20gb"
GFD = {"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed",
       "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "1",
       "nvidia.com/mig-3g.20gb.count": "2", "nvidia.com/mig-3g.20gb.memory": "19968",
       "nvidia.com/mig-3g.20gb.slices.gi": "3", "nvidia.com/mig-3g.20gb.slices.ci": "3"}


def inspect_units(port, node):
    with urllib.request.urlopen("http://127.0.0.1:%d/inspect/nodes/%s" % (port, node), timeout=10) as r:
        return {u["resource"]: (u["total"], u["used"]) for u in json.load(r)["units"]}


@suite.test
def test_instances_counted_like_kube_scheduler(s):
    cp = s.cp
    for name in ("mig-0", "mig-1"):
        cp.add_node(name, {PROFILE: "2", "nvidia.com/gpu": "0"}, labels=GFD)
    cp.add_node("plain-0", {"nvidia.com/gpu": "8"})
    prod = cp.start_product(s.binary, flags=["--placement", "bind"], name="gqa-mig")
    ext = direct_extender(prod.port)
    ext["managedResources"].append({"name": PROFILE, "ignoredByScheduler": False})
    sched = cp.start_scheduler(cp.scheduler_config([ext]), name="sched-mig")
    pods = ["mig-pod-%d" % i for i in range(5)]
    try:
        for p in pods:
            cp.create_pod(cp.pod(p, limits={PROFILE: "1"}))
        placed = {}
        cp.wait_for(lambda: sum(1 for p in pods if cp.get_pod(p)["spec"].get("nodeName")) >= 4, 90,
                    "four MIG pods bound")
        for p in pods:
            placed[p] = cp.get_pod(p)["spec"].get("nodeName")
        nodes = sorted(n for n in placed.values() if n)
        s.check_eq(nodes, ["mig-0", "mig-0", "mig-1", "mig-1"], "two pods on each MIG node, none elsewhere", placed)
        pending = [p for p in pods if not placed[p]]
        s.check_eq(len(pending), 1, "the fifth stays Pending", placed)
        if pending:
            ev = cp.wait_event(pending[0], "FailedScheduling", "", timeout=60)
            s.check(ev is not None, "the Pending pod has a FailedScheduling event", ev)
        for p in pods:
            if placed[p]:
                msgs = [e.get("message", "") for e in cp.pod_events(p)]
                s.check(not any("free instances here" in m for m in msgs),
                        "%s: no bind refused for instances kube-scheduler saw free" % p, msgs)
        for n in ("mig-0", "mig-1"):
            s.check_eq(inspect_units(prod.port, n).get(PROFILE), (2, 2), "the extender counts %s full" % n)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % prod.port, timeout=10) as r:
            text = r.read().decode()
        binds = [l for l in text.splitlines() if l.startswith('gqa_extender_answers_total{verb="bind",outcome="fit"}')]
        s.check(binds and float(binds[0].split()[-1]) >= 4, "the extender bound the four pods", binds)
    finally:
        s.end_round(sched, prod)


if __name__ == "__main__":
    suite.main()
