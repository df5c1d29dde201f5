"""Faults on the real control plane (issue 23 item 6):

- two replicas with --leader-elect on the real Lease behind the extender
  Service (the test plays the endpoints controller: the Endpoints follow the
  pod labelled gpu-admission.io/leader=true); the leader is SIGKILLed, the
  other takes the Lease and places the next pods, and no GPU is given twice;
- while the leader is frozen (SIGSTOP) pods change, etcd is compacted past
  its watch position and the API server is restarted: on resuming its watch
  is refused (410 Gone), it relists, and what changed meanwhile is neither
  lost (a freed GPU is given again) nor double-booked (a GPU taken meanwhile
  is not given).

python3 test_faults.py --binary build/release/gpu-quota-admission --source-dir .
"""

import base64
import http.client
import json
import os
import signal

from realcp_suite import RealcpSuite, add_demo_nodes, annotations, gpu_indices, load_shipped_config, runnable_config
from controlplane import http_get

suite = RealcpSuite("realcp faults")

NS = "kube-system"
REPLICAS = ("gqa-replica-a", "gqa-replica-b")
WHOLE_A100 = {"tencent.com/vcuda-core": "100", "tencent.com/vcuda-memory": "320"}


def leader_pod(s):
    for name in REPLICAS:
        labels = s.cp.get_pod(name, NS)["metadata"].get("labels") or {}
        if labels.get("gpu-admission.io/leader") == "true" and s.replicas[name].alive():
            return name
    return None


def follow_leader(s, timeout=90):
    """What the endpoints controller would do for the Service selecting the
    leader label: point it at the leader's replica. Returns the leader."""
    name = s.cp.wait_for(lambda: leader_pod(s), timeout, "a live replica holds the leader label")
    s.cp.point_service_at("gpu-quota-admission", s.replicas[name].port, ns=NS, stand_in=name)
    return name


def a100_indices(s):
    """GPU index of every pod on gpu-a100-0 (pod name -> index)."""
    out = {}
    for p in s.cp.admin.get("/api/v1/namespaces/default/pods")["items"]:
        a = p["metadata"].get("annotations") or {}
        if p["spec"].get("nodeName") == "gpu-a100-0":
            idx = gpu_indices(a.get("tencent.com/predicate-gpu-idx-0"))
            out[p["metadata"]["name"]] = tuple(idx or ())
    return out


def place(s, names, what):
    cp = s.cp
    for n in names:
        cp.create_pod(cp.pod(n, WHOLE_A100))
    for n in names:
        s.check_eq(cp.wait_bound(n, timeout=90), "gpu-a100-0", "%s: %s bound" % (what, n))
        s.check(annotations(cp, n).get("tencent.com/predicate-gpu-idx-0"), "%s: %s has its GPU index" % (what, n))


def check_no_double_booking(s, what):
    idx = a100_indices(s)
    flat = [i for v in idx.values() for i in v]
    s.check(len(flat) == len(set(flat)) and all(len(v) == 1 for v in idx.values()),
            "%s: every pod on gpu-a100-0 has its own GPU" % what, idx)
    return idx


@suite.test
def test_leader_failover(s):
    cp = s.cp
    add_demo_nodes(cp, s.source_dir)
    cp.kubectl("apply", "-f", os.path.join(s.source_dir, "manifests", "services.yaml"))
    s.replicas = {}
    for name in REPLICAS:
        cp.stand_in_pod(NS, name, labels={"app.kubernetes.io/name": "gpu-quota-admission"})
        s.replicas[name] = cp.start_product(
            s.binary, name=name, flags=["--placement", "bind", "--leader-elect"],
            env={"POD_NAME": name, "POD_NAMESPACE": NS})
    first = follow_leader(s)
    text = load_shipped_config(s.source_dir, "v1", "recommended")
    s.sched = cp.start_scheduler(runnable_config(cp, text, client=(cp.admin_key, cp.admin_crt)), name="sched")
    place(s, ["before-1", "before-2", "before-3"], "leader %s" % first)
    s.replicas[first].kill()
    cp.procs.remove(s.replicas[first])
    second = follow_leader(s)
    s.check(second != first, "the other replica took the Lease and the label", (first, second))
    lease = cp.admin.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/gpu-quota-admission" % NS)
    s.check(lease["spec"].get("holderIdentity"), "the Lease names a holder", lease["spec"])
    place(s, ["after-1", "after-2", "after-3"], "new leader %s" % second)
    check_no_double_booking(s, "after failover")
    s.leader = s.replicas[second]


def etcd_call(s, path, body):
    c = http.client.HTTPConnection("127.0.0.1", s.cp.etcd_port, timeout=30)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        s.require(r.status == 200, "etcd %s" % path, data)
        return json.loads(data)
    finally:
        c.close()


def informers(port):
    st, body = http_get(port, "/inspect/informers")
    return json.loads(body) if st == 200 else None


def pods_informer(port):
    for inf in informers(port) or []:
        if inf.get("name", inf.get("informer", "")).startswith("pods"):
            return inf
    return None


@suite.test
def test_compaction_and_apiserver_restart(s):
    cp = s.cp
    s.require(getattr(s, "leader", None) is not None, "a leader from the failover test")
    prod = s.leader
    before = pods_informer(prod.port)
    s.require(before is not None, "/inspect/informers lists the pods informer", informers(prod.port))
    held = a100_indices(s)
    os.kill(prod.pid, signal.SIGSTOP)
    try:
        # Meanwhile: one pod goes (its GPU is free again), and GPU-Manager-like
        # usage appears on another GPU the leader has never given out.
        freed = held.pop("before-1")[0]
        cp.delete_pod("before-1")
        used = {i for v in held.values() for i in v}
        taken = min(set(range(8)) - used - {freed})
        ext = cp.pod("external", WHOLE_A100, node_name="gpu-a100-0",
                     annotations={"tencent.com/predicate-node": "gpu-a100-0",
                                  "tencent.com/predicate-gpu-idx-0": str(taken),
                                  "tencent.com/gpu-assigned": "true"})
        cp.create_pod(ext)
        rev = int(etcd_call(s, "/v3/kv/range", {"key": base64.b64encode(b"/registry").decode()})
                  ["header"]["revision"])
        etcd_call(s, "/v3/kv/compaction", {"revision": rev, "physical": True})
        cp.restart_apiserver()
    finally:
        os.kill(prod.pid, signal.SIGCONT)

    def relisted():
        inf = pods_informer(prod.port)
        return inf if inf and inf.get("relists", 0) > before.get("relists", 0) and inf.get("synced") else None
    try:
        after = cp.wait_for(relisted, 90, "the pods informer relisted after 410 Gone")
    except Exception as e:   # noqa: BLE001 - reported
        s.check(False, "the pods informer relisted after the compaction", "%s\n%s\n%s" % (
            e, json.dumps(informers(prod.port)), prod.log()[-3000:]))
        after = pods_informer(prod.port) or {}
    print("    pods informer before: %s" % json.dumps(before), flush=True)
    print("    pods informer after:  %s" % json.dumps(after), flush=True)
    s.check("informer pods: watch error 410" in prod.log(0),
            "the service's log shows the pods watch refused as expired (410 Gone)", prod.log()[-2000:])
    cp.wait_for(lambda: http_get(prod.port, "/readyz")[0] == 200, 60, "the leader is ready again")
    # Two GPUs are free now: 'freed' and one more; 'taken' is not.
    free = set(range(8)) - {i for v in held.values() for i in v} - {taken}
    s.check(freed in free and len(free) == 2, "test arithmetic: two GPUs free", (free, freed, taken))
    place(s, ["later-1", "later-2"], "after the restart")
    idx = check_no_double_booking(s, "after compaction and restart")
    got = {idx.get("later-1", (None,))[0], idx.get("later-2", (None,))[0]}
    s.check_eq(got, free, "the new pods got exactly the freed GPU and the never-used one, not 'taken'")
    cp.create_pod(cp.pod("one-too-many", WHOLE_A100))
    cp.wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in cp.pod_events("one-too-many")), 90,
                "one-too-many is refused")
    s.check_eq(cp.get_pod("one-too-many")["spec"].get("nodeName"), None, "a ninth whole A100 is not given")
    cp.stop_scheduler(s.sched)
    cp.delete_all_pods()


if __name__ == "__main__":
    suite.main()
